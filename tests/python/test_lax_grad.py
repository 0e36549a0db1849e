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
import atoll.numpy as anp  # noqa: E402
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


def const(l: Any, array: np.ndarray) -> Any:
    """A constant array inside f(l, ...), for atoll.lax and jax.lax alike."""
    return jax.numpy.asarray(array) if l is jlax else anp.asarray(array)


def finite_or_zero(l: Any, v: Any) -> Any:
    return l.select_n(l.ne(v, v), v, l.full(v.shape, 0, v.dtype))


GATHER = jlax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                     start_index_map=(0,))
SCATTER = jlax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                       scatter_dims_to_operand_dims=(0,))
ROWS = np.array([[4], [0], [7], [2], [-3], [2]], np.int32)  # out of range, repeated
DROP = jlax.GatherScatterMode.FILL_OR_DROP
CONV_NCHW = ("NCHW", "OIHW", "NCHW")
CONV_NHWC = ("NHWC", "HWIO", "NHWC")

# The windowed and indexed primitives, each with its own shapes:
# name: (f(lax, x, y), x's shape, y's shape, draw, checked against finite differences)
WINDOW_CASES: Dict[str, Tuple[Callable[..., Any], Tuple[int, ...], Tuple[int, ...], Any,
                              bool]] = {
    "conv strided, padded, rhs dilated": (lambda l, x, y: l.conv_general_dilated(
        x, y, (2, 1), [(1, 0), (1, 1)], (1, 1), (1, 2), CONV_NCHW), (2, 3, 6, 5), (4, 3, 3, 2),
        NORMAL, True),
    "conv grouped, lhs dilated, NHWC": (lambda l, x, y: l.conv_general_dilated(
        x, y, (1, 2), [(1, 1), (2, 0)], (2, 1), (1, 1), CONV_NHWC, feature_group_count=2),
        (2, 4, 5, 4), (3, 2, 2, 6), NORMAL, True),
    "reduce_window sum, strided, base dilated": (lambda l, x, y: l.mul(l.reduce_window(
        x, 0.0, l.add, (1, 3, 2), (1, 2, 1), [(0, 0), (1, 1), (0, 1)], (1, 1, 2), (1, 2, 1)), y),
        (2, 7, 4), (2, 3, 7), NORMAL, True),
    "reduce_window max and min pools": (lambda l, x, y: l.add(l.reduce_window(
        x, -np.inf, l.max, (1, 2, 2), (1, 2, 1), [(0, 0), (0, 1), (1, 0)]), l.reduce_window(
        y, np.inf, l.min, (1, 3, 1), (1, 1, 1), "VALID")), (2, 5, 4), (2, 5, 4), NORMAL, True),
    "dynamic_slice dynamic_update_slice": (lambda l, x, y: l.dynamic_slice(
        l.dynamic_update_slice(x, l.mul(y, y), (l.full((), 1, np.int32), l.full(
            (), 3, np.int32))), (l.full((), 2, np.int32), l.full((), 0, np.int32)), (3, 4)),
        (5, 4), (2, 2), NORMAL, True),
    "gather clip": (lambda l, x, y: l.mul(l.gather(x, const(l, ROWS), GATHER, (1, 4),
                                                   mode="clip"), y), (5, 4), (6, 4), NORMAL,
                    True),
    # Rows out of range are NaN; the loss takes 0 there.
    "gather fill": (lambda l, x, y: l.mul(finite_or_zero(l, l.gather(
        x, const(l, ROWS), GATHER, (1, 4), mode=DROP)), y), (5, 4), (6, 4), NORMAL, True),
    "scatter_add clip and drop": (lambda l, x, y: l.add(
        l.scatter_add(x, const(l, ROWS), l.mul(y, y), SCATTER, mode="clip"),
        l.scatter_add(x, const(l, ROWS), y, SCATTER, mode=DROP)), (5, 4), (6, 4),
        NORMAL, True),
    "clamp": (lambda l, x, y: l.clamp(l.neg(l.abs(y)), x, l.abs(y)), (3, 4), (3, 4), NORMAL,
              True),
    # reduce_precision is flat almost everywhere; its rule is jax's (the cotangent rounded).
    "reduce_precision": (lambda l, x, y: l.mul(l.reduce_precision(x, 5, 10), y), (3, 4), (3, 4),
                         NORMAL, False),
}


@pytest.mark.parametrize("name", list(WINDOW_CASES))
def test_window_and_index_grad_rules_match_jax(client, name: str) -> None:
    fn, x_shape, y_shape, draw, by_differences = WINDOW_CASES[name]
    rng = np.random.default_rng([SEED, 302, list(WINDOW_CASES).index(name)])
    check_grads(client, name, fn, draw(rng, x_shape), draw(rng, y_shape), rng, by_differences)


@pytest.mark.parametrize("name", list(CASES))
def test_grad_rule_matches_jax_and_finite_differences(client, name: str) -> None:
    fn, draw_x, draw_y, y_shape = CASES[name]
    rng = np.random.default_rng([SEED, 301, list(CASES).index(name)])
    check_grads(client, name, fn, draw_x(rng, SHAPE), draw_y(rng, y_shape), rng)


def check_grads(client, name: str, fn: Callable[..., Any], x64: np.ndarray, y64: np.ndarray,
                rng: np.random.Generator, by_differences: bool = True) -> None:
    """atoll.grad of sum(fn(x, y) * w) against jax.grad in f32 and, unless told otherwise,
    against central finite differences in f64."""
    w_shape = jax.eval_shape(lambda a, b: fn(jlax, a, b), x64, y64).shape
    w64 = rng.standard_normal(w_shape)
    # f32 against jax.grad.
    x32, y32, w32 = (a.astype(np.float32) for a in (x64, y64, w64))
    got = atoll_grads(client, fn, x32, y32, w32)
    want = jax.jit(jax.grad(jax_loss(fn), argnums=(0, 1)))(x32, y32, w32)
    for k in range(2):
        np.testing.assert_allclose(got[k], np.asarray(want[k]), rtol=2e-5, atol=2e-5,
                                   err_msg=f"{name}: d/d{'xy'[k]} against jax.grad (f32)")
    if not by_differences:
        return
    # f64 against central finite differences.
    got = atoll_grads(client, fn, x64, y64, w64)
    for k in range(2):
        fd = finite_differences(fn, (x64, y64, w64), k)
        np.testing.assert_allclose(got[k], fd, rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name}: d/d{'xy'[k]} against finite differences")


def cnn(np_: Any, l: Any) -> Callable[..., Any]:
    """Two blocks of conv, batch norm (batch statistics), relu and 2x2 max pool, then a dense
    layer; NHWC as flax."""
    def block(x, k, gamma, beta):
        y = l.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=CONV_NHWC)
        mu = np_.mean(y, axis=(0, 1, 2), keepdims=True)
        var = np_.mean(np_.square(y - mu), axis=(0, 1, 2), keepdims=True)
        y = np_.maximum((y - mu) / np_.sqrt(var + 1e-5) * gamma + beta, 0.0)
        return l.reduce_window(y, -np.inf, l.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def net(x, k1, g1, b1, k2, g2, b2, w, labels):
        y = block(block(x, k1, g1, b1), k2, g2, b2)
        logits = y.reshape(x.shape[0], -1) @ w
        shifted = logits - np_.max(logits, axis=-1, keepdims=True)
        log_p = shifted - np_.log(np_.sum(np_.exp(shifted), axis=-1, keepdims=True))
        return -np_.mean(np_.sum(log_p * labels, axis=-1))
    return net


def test_a_cnn_with_batch_norm_has_jax_gradients(client) -> None:
    rng = np.random.default_rng([SEED, 303])
    shapes = [(4, 8, 8, 3), (3, 3, 3, 8), (8,), (8,), (3, 3, 8, 8), (8,), (8,), (2 * 2 * 8, 5)]
    args = [(rng.standard_normal(s) * (0.3 if len(s) > 1 else 0.1)).astype(np.float32)
            for s in shapes]
    args[2] += 1.0
    args[5] += 1.0
    labels = np.eye(5, dtype=np.float32)[rng.integers(0, 5, 4)]
    params = tuple(range(1, 8))
    types = [atoll.f32[a.shape] for a in args + [labels]]
    traced = client.function(client.slice(1), *types)(
        lambda *a: (cnn(anp, lax)(*a),) + tuple(atoll.grad(cnn(anp, lax), argnums=params)(*a)))
    got = [np.asarray(v) for v in client.run(traced, *args, labels).result(timeout=120)]
    jax_net = cnn(jax.numpy, jlax)
    want_loss, want_grads = jax.jit(jax.value_and_grad(jax_net, argnums=params))(*args, labels)
    np.testing.assert_allclose(got[0], np.asarray(want_loss), rtol=1e-5)
    for k, (g, want) in enumerate(zip(got[1:], want_grads)):
        scale = float(np.max(np.abs(want)))
        np.testing.assert_allclose(g, np.asarray(want), rtol=1e-3, atol=1e-4 * scale,
                                   err_msg=f"gradient of parameter {k + 1}")
