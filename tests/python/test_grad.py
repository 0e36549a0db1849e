"""atoll.grad and atoll.value_and_grad over traced functions: what they trace and refuse
without a cluster, and gradients computed on a cluster's devices against numpy's."""

from __future__ import annotations

import numpy as np
import pytest

import atoll
from atoll import _atoll, ops


def loss(x, w):
    return ops.reduce_sum(ops.reduce_sum(ops.tanh(x @ w), 1), 0)


def test_grad_traces_into_the_calling_function() -> None:
    b = _atoll.FunctionBuilder("step")
    x = b.input("f32", [4, 3], [-1, -1])
    w = b.input("f32", [3, 2], [-1, -1])
    dw = atoll.grad(loss, argnums=1)(x, w)
    assert isinstance(dw, atoll.Value) and dw.function == "step"
    dx, dw = atoll.grad(loss, argnums=(0, -1))(x, w)
    assert dx.function == dw.function == "step"
    value, dx = atoll.value_and_grad(loss)(x, w)
    assert value.function == "step"
    b.output(dw)


def test_what_cannot_be_differentiated_is_refused_by_name() -> None:
    b = _atoll.FunctionBuilder("f")
    x = b.input("f32", [4], [-1])
    n = b.input("i32", [4], [-1])
    with pytest.raises(atoll.InvalidArgument, match="needs a float \\[\\] output"):
        atoll.grad(lambda v: ops.exp(v))(x)
    with pytest.raises(atoll.InvalidArgument, match="input 1 is i32"):
        atoll.grad(lambda v, m: ops.reduce_sum(v, 0), argnums=1)(x, n)
    with pytest.raises(atoll.InvalidArgument, match="must return one value"):
        atoll.grad(lambda v: (ops.reduce_sum(v, 0), v))(x)
    with pytest.raises(atoll.InvalidArgument, match="sgd_update\\) is not differentiable"):
        atoll.grad(lambda v: ops.reduce_sum(ops.sgd_update(v, v, 0.1), 0))(x)
    other = _atoll.FunctionBuilder("g").input("f32", [4], [-1])
    with pytest.raises(atoll.InvalidArgument, match="two functions"):
        atoll.grad(lambda u, v: ops.reduce_sum(u + v, 0))(x, other)


# f64 gradients are numpy's to double precision; f32's to f32's.
@pytest.mark.parametrize("dtype,np_dtype,rtol", [(atoll.f32, np.float32, 1e-5),
                                                 (atoll.f64, np.float64, 1e-12)])
def test_gradients_on_devices_equal_numpy(client: atoll.Client, dtype, np_dtype, rtol) -> None:
    s = client.slice(2)

    # x's rows split over the devices: w's gradient sums over them, all-reduced.
    @atoll.function(s, dtype[6, 3].split(0), dtype[3, 2])
    def gradients(x, w):
        total = lambda x, w: ops.all_reduce_sum(loss(x, w))  # noqa: E731
        value, (dx, dw) = atoll.value_and_grad(total, argnums=(0, 1))(x, w)
        return value, dx, dw

    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 3)).astype(np_dtype)
    w = rng.standard_normal((3, 2)).astype(np_dtype)
    value, dx, dw = client.run(gradients, x, w).result(timeout=30)
    assert dx.dtype == dw.dtype == np_dtype
    t = np.tanh(x.astype(np.float64) @ w.astype(np.float64))
    np.testing.assert_allclose(value, t.sum(), rtol=rtol)
    np.testing.assert_allclose(dx, (1 - t * t) @ w.T, rtol=rtol, atol=rtol / 10)
    np.testing.assert_allclose(dw, x.T @ (1 - t * t), rtol=rtol, atol=rtol / 10)
