"""atoll.grad through the jax.lax primitives: for each differentiable one, the gradient of a
loss sum(f(x, y) * w) that atoll computes (Grad's rules, on a real cluster) equals jax.grad
of the same function in f32 and central finite differences in f64 (evaluated by JAX), over
seeded random inputs drawn where the function is smooth, ties included for max and min.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Tuple

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax import lax as jlax  # noqa: E402

import atoll  # noqa: E402
from atoll import lax  # noqa: E402
from atoll._types import dtype_of_numpy  # noqa: E402
from test_lax import SEED  # noqa: E402

jax.config.update("jax_enable_x64", True)

SHAPE = (3, 4)
DOT = (((1,), (2,)), ((0,), (0,)))


def uniform(lo: float, hi: float) -> Callable[[np.random.Generator, Tuple[int, ...]], np.ndarray]:
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def ties(rng: np.random.Generator, shape: Tuple[int, ...]) -> np.ndarray:
    v = rng.standard_normal(shape)
    v[rng.random(shape) < 0.3] = 0.5  # equal elements: the cotangent is shared
    return v


NORMAL = uniform(-2, 2)

# name: (f(lax, x, y) -> value of the loss weights' shape, draw x, draw y, y's shape)
CASES: Dict[str, Tuple[Callable[..., Any], Any, Any, Tuple[int, ...]]] = {
    "max": (lambda l, x, y: l.max(x, y), ties, ties, SHAPE),
    "min": (lambda l, x, y: l.min(x, y), ties, ties, SHAPE),
    "pow": (lambda l, x, y: l.pow(x, y), uniform(0.5, 2), uniform(-1.5, 1.5), SHAPE),
    "atan2": (lambda l, x, y: l.atan2(x, y), NORMAL, uniform(0.5, 2), SHAPE),
    "rem": (lambda l, x, y: l.rem(x, y), uniform(1, 5), uniform(0.7, 1.3), SHAPE),
    "abs": (lambda l, x, y: l.mul(l.abs(x), y), uniform(0.1, 2), NORMAL, SHAPE),
    "sin cos tan": (lambda l, x, y: l.add(l.mul(l.sin(x), l.cos(y)), l.tan(x)), uniform(-1, 1),
                    NORMAL, SHAPE),
    "asin acos atan": (lambda l, x, y: l.add(l.asin(x), l.mul(l.acos(x), l.atan(y))),
                       uniform(-0.8, 0.8), NORMAL, SHAPE),
    "sinh cosh asinh": (lambda l, x, y: l.add(l.sinh(x), l.mul(l.cosh(y), l.asinh(x))), NORMAL,
                        NORMAL, SHAPE),
    "acosh atanh": (lambda l, x, y: l.add(l.acosh(x), l.atanh(y)), uniform(1.2, 3),
                    uniform(-0.8, 0.8), SHAPE),
    "cbrt exp2 log1p expm1": (lambda l, x, y: l.add(l.mul(l.cbrt(x), l.exp2(y)),
                                                    l.sub(l.log1p(x), l.expm1(y))),
                              uniform(0.3, 2), NORMAL, SHAPE),
    "erf erfc erf_inv": (lambda l, x, y: l.add(l.mul(l.erf(x), l.erfc(y)), l.erf_inv(
        l.mul(x, l.full(SHAPE, 0.3, np.float64 if x.dtype in ("f64", np.float64) else np.float32)
              ))), uniform(-1.5, 1.5), NORMAL, SHAPE),
    "floor sign are flat": (lambda l, x, y: l.add(l.mul(l.floor(x), y), l.sign(x)),
                            uniform(0.1, 0.9), NORMAL, SHAPE),
    "select_n": (lambda l, x, y: l.select_n(l.gt(x, y), x, l.mul(y, y)), NORMAL, NORMAL, SHAPE),
    "reshape transpose": (lambda l, x, y: l.mul(l.transpose(l.reshape(x, (2, 6)), (1, 0)),
                                                l.reshape(y, (6, 2))), NORMAL, NORMAL, SHAPE),
    "broadcast_in_dim": (lambda l, x, y: l.mul(l.broadcast_in_dim(y, SHAPE, (1,)), x), NORMAL,
                         NORMAL, (4,)),
    "slice pad": (lambda l, x, y: l.pad(l.slice(x, (0, 1), (3, 4), (2, 2)), l.reduce_max(y, (0,)),
                                       [(1, -1, 1), (0, 2, 0)]), NORMAL, NORMAL, (1,)),
    "concatenate rev": (lambda l, x, y: l.rev(l.concatenate([x, y], 1), (0, 1)), NORMAL, NORMAL,
                        (3, 2)),
    "reduce_max reduce_min": (lambda l, x, y: l.add(l.reduce_max(x, (1,)), l.reduce_min(y, (1,))),
                              ties, ties, SHAPE),
    "dot_general": (lambda l, x, y: l.dot_general(x, y, DOT), NORMAL, NORMAL, (3, 5, 4)),
    "integer_pow cumsum": (lambda l, x, y: l.add(l.integer_pow(x, 3), l.mul(
        l.cumsum(y, 1, reverse=True), l.integer_pow(x, -2))), uniform(0.5, 2), NORMAL, SHAPE),
    # f32 through f64 and back (for f64 inputs the conversions are the identity, which keeps
    # the finite differences smooth).
    "convert_element_type": (lambda l, x, y: l.convert_element_type(l.mul(l.convert_element_type(
        x, np.float64), l.convert_element_type(y, np.float64)), x.dtype), NORMAL, NORMAL, SHAPE),
}


def atoll_grads(client: atoll.Client, fn: Callable[..., Any], x: np.ndarray, y: np.ndarray,
                w: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    def loss(x_, y_, w_):
        return lax.reduce_sum(lax.mul(fn(lax, x_, y_), w_), tuple(range(len(w.shape))))

    types = [dtype_of_numpy(a.dtype)[tuple(a.shape)] for a in (x, y, w)]
    traced = client.function(client.slice(1), *types)(
        lambda x_, y_, w_: atoll.grad(loss, argnums=(0, 1))(x_, y_, w_))
    gx, gy = client.run(traced, x, y, w).result(timeout=60)
    return np.asarray(gx), np.asarray(gy)


def jax_loss(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda x_, y_, w_: (fn(jlax, x_, y_) * w_).sum()


def finite_differences(fn: Callable[..., Any], args: Tuple[np.ndarray, ...], i: int,
                       eps: float = 1e-6) -> np.ndarray:
    f = jax.jit(jax_loss(fn))
    grad = np.zeros_like(args[i])
    for idx in np.ndindex(args[i].shape):
        hi, lo = [a.copy() for a in args], [a.copy() for a in args]
        hi[i][idx] += eps
        lo[i][idx] -= eps
        grad[idx] = (float(f(*hi)) - float(f(*lo))) / (2 * eps)
    return grad


@pytest.mark.parametrize("name", list(CASES))
def test_grad_rule_matches_jax_and_finite_differences(client, name: str) -> None:
    fn, draw_x, draw_y, y_shape = CASES[name]
    rng = np.random.default_rng([SEED, 301, list(CASES).index(name)])
    x64, y64 = draw_x(rng, SHAPE), draw_y(rng, y_shape)
    w_shape = jax.eval_shape(lambda a, b: fn(jlax, a, b), x64, y64).shape
    w64 = rng.standard_normal(w_shape)
    # f32 against jax.grad.
    x32, y32, w32 = (a.astype(np.float32) for a in (x64, y64, w64))
    got = atoll_grads(client, fn, x32, y32, w32)
    want = jax.jit(jax.grad(jax_loss(fn), argnums=(0, 1)))(x32, y32, w32)
    for k in range(2):
        np.testing.assert_allclose(got[k], np.asarray(want[k]), rtol=2e-5, atol=2e-5,
                                   err_msg=f"{name}: d/d{'xy'[k]} against jax.grad (f32)")
    # f64 against central finite differences.
    got = atoll_grads(client, fn, x64, y64, w64)
    for k in range(2):
        fd = finite_differences(fn, (x64, y64, w64), k)
        np.testing.assert_allclose(got[k], fd, rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name}: d/d{'xy'[k]} against finite differences")
