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




def with_zeros(rng: np.random.Generator, shape: Tuple[int, ...]) -> np.ndarray:
    v = rng.uniform(-1.5, 1.5, shape)
    v[rng.random(shape) < 0.2] = 0.0  # a product through a zero has an exact gradient
    return v


UNIQUE_ROWS = np.array([[3], [9], [0]], np.int32)  # distinct; one out of range
# In range, repeated: jax's scatter_min/max gradient with clip mode and an index out of range
# is inf (its inner gathers drop the update that the scatter clips), so clip is checked on
# these; fill_or_drop on ROWS.
REPEATED_ROWS = np.array([[4], [0], [2], [2], [0], [2]], np.int32)


def flat_where_chosen(l: Any, x: Any, y: Any) -> Any:
    """x * y where y's row argmax falls, sin(x) elsewhere, plus x's row argmin picked: the
    indices carry no gradient."""
    at_max = l.broadcast_in_dim(l.argmax(y, 1, np.int32), x.shape, (0,))
    at_min = l.broadcast_in_dim(l.argmin(x, 1, np.int32), x.shape, (0,))
    column = l.broadcasted_iota(np.int32, x.shape, 1)
    return l.add(l.select_n(l.eq(at_max, column), l.sin(x), l.mul(x, y)),
                 l.select_n(l.eq(at_min, column), y, l.mul(y, y)))


def sorted_by(l: Any, x: Any, y: Any, dimension: int, num_keys: int) -> Any:
    keys_and_values = l.sort((x, l.sin(y), y), dimension=dimension, num_keys=num_keys)
    return l.add(l.mul(keys_and_values[0], keys_and_values[2]), keys_and_values[1])


# Sorting, running and whole products, the scatter family, argmax and top_k, each with its
# own shapes, as WINDOW_CASES.
ORDER_CASES: Dict[str, Tuple[Callable[..., Any], Tuple[int, ...], Tuple[int, ...], Any,
                             bool]] = {
    "sort, one key, values follow": (lambda l, x, y: sorted_by(l, x, y, 1, 1), (3, 5), (3, 5),
                                     NORMAL, True),
    "sort along 0, two keys": (lambda l, x, y: sorted_by(l, x, y, 0, 2), (5, 3), (5, 3),
                               NORMAL, True),
    "cumprod forward and reverse": (lambda l, x, y: l.add(l.cumprod(x, 1), l.mul(
        l.cumprod(x, 0, reverse=True), y)), (4, 5), (4, 5), NORMAL, True),
    "cumprod through zeros": (lambda l, x, y: l.mul(l.cumprod(x, 1, reverse=True), y), (4, 6),
                              (4, 6), with_zeros, True),
    "cummax cummin": (lambda l, x, y: l.add(l.cummax(x, 1), l.cummin(y, 0, reverse=True)),
                      (4, 5), (4, 5), NORMAL, True),
    "cummax ties": (lambda l, x, y: l.mul(l.cummax(x, 1), y), (4, 5), (4, 5), ties, False),
    "reduce_prod over two axes and one": (lambda l, x, y: l.mul(l.reduce_prod(x, (0, 2)),
                                                                l.reduce_prod(y, (1,))),
                                          (3, 4, 2), (4, 3), with_zeros, True),
    "scatter, repeated indices, clip and drop": (lambda l, x, y: l.add(
        l.scatter(x, const(l, ROWS), y, SCATTER, mode="clip"),
        l.scatter(l.mul(x, x), const(l, ROWS), l.sin(y), SCATTER, mode=DROP)), (5, 4), (6, 4),
        NORMAL, True),
    "scatter_mul unique indices": (lambda l, x, y: l.add(
        l.scatter_mul(x, const(l, UNIQUE_ROWS), y, SCATTER, unique_indices=True, mode=DROP),
        l.scatter_mul(l.sin(x), const(l, UNIQUE_ROWS), l.mul(y, y), SCATTER,
                      unique_indices=True, mode="clip")), (5, 4), (3, 4), NORMAL, True),
    "scatter_max scatter_min, repeated indices": (lambda l, x, y: l.add(
        l.scatter_max(x, const(l, REPEATED_ROWS), y, SCATTER, mode="clip"),
        l.scatter_min(x, const(l, ROWS), y, SCATTER, mode=DROP)), (5, 4), (6, 4), NORMAL, True),
    "scatter_max scatter_min ties": (lambda l, x, y: l.add(
        l.scatter_max(x, const(l, REPEATED_ROWS), y, SCATTER, mode="clip"),
        l.scatter_min(x, const(l, ROWS), y, SCATTER, mode=DROP)), (5, 4), (6, 4), ties, False),
    "argmax argmin are flat": (flat_where_chosen, (3, 5), (3, 5), NORMAL, True),
    "top_k": (lambda l, x, y: l.add(l.top_k(x, 3)[0], l.mul(l.top_k(y, 3)[0], l.top_k(x, 3)[0])),
              (3, 5), (3, 5), NORMAL, True),
}


def stacked(l: Any, carry: Any, ys: Any) -> Any:
    """A scan's last carry below its stacked ys: one value, so the loss weighs both."""
    shape = tuple(carry.shape)
    return l.concatenate([ys, l.broadcast_in_dim(carry, (1,) + shape,
                                                 tuple(range(1, 1 + len(shape))))], 0)


def counted_scan(l: Any, x: Any, y: Any) -> Any:
    """An i32 counter beside the float carry (no gradient through it), two xs."""
    def step(c, rows):
        n, h = c
        h = l.add(l.mul(h, rows[0]), l.tanh(rows[1]))
        return (n + 1, h), l.mul(h, rows[1])
    (_, h), ys = l.scan(step, (l.full((), 0, np.int32), l.reduce_sum(x, (0,))), (x, y))
    return stacked(l, h, ys)


def both_ways(l: Any, x: Any, y: Any) -> Any:
    """A cond that takes its true branch and one that takes its false one, the second's
    branches closing over y (each its own consts)."""
    s = l.reduce_sum(l.abs(x), (0, 1))
    t = l.neg(s)
    a = l.cond(l.gt(s, t), lambda p, q: l.mul(l.sin(p), q), lambda p, q: l.add(p, q), x, y)
    b = l.cond(l.lt(s, t), lambda p: l.mul(p, y), lambda p: l.sub(l.exp(p), l.cos(y)), x)
    return l.add(a, b)


def switched(l: Any, x: Any, y: Any) -> Any:
    """switch over three branches at every index, one out of range (clamped)."""
    branches = [lambda p, q: l.mul(p, q), lambda p, q: l.sin(l.add(p, q)),
                lambda p, q: l.mul(l.exp(p), l.cos(y))]
    out = l.switch(l.full((), 0, np.int32), branches, x, y)
    for k in (1, 2, 7):
        out = l.add(out, l.switch(l.full((), k, np.int32), branches, x, y))
    return out


def cond_in_scan(l: Any, x: Any, y: Any) -> Any:
    def step(c, row):
        up = l.gt(l.reduce_sum(row, (0,)), l.reduce_sum(l.neg(row), (0,)))
        c = l.cond(up, lambda a, r: l.tanh(l.add(a, r)), lambda a, r: l.mul(a, l.cos(r)), c, row)
        return c, l.mul(c, y)
    return stacked(l, *l.scan(step, y, x))


# Loops and branches, each checked as WINDOW_CASES: (f, x's shape, y's shape, draw, checked
# against finite differences).
CONTROL_CASES: Dict[str, Tuple[Callable[..., Any], Tuple[int, ...], Tuple[int, ...], Any,
                               bool]] = {
    "scan carry and stacked ys": (lambda l, x, y: stacked(l, *l.scan(
        lambda c, r: (l.tanh(l.add(l.mul(c, r), r)), l.mul(c, r)), y, x)), (6, 3), (3,), NORMAL,
        True),
    "scan reverse, closing over y": (lambda l, x, y: stacked(l, *l.scan(
        lambda c, r: (l.sin(l.add(l.mul(c, y), r)), l.mul(c, r)), l.cos(y), x, reverse=True)),
        (5, 4), (4,), NORMAL, True),
    "scan with an i32 counter and two xs": (counted_scan, (5, 4), (5, 4), NORMAL, True),
    "fori_loop (a scan)": (lambda l, x, y: l.fori_loop(
        0, 4, lambda i, c: l.add(l.mul(l.sin(c), y), x), x), (3, 4), (3, 4), NORMAL, True),
    "cond, both branches": (both_ways, (3, 4), (3, 4), NORMAL, True),
    "switch, every branch": (switched, (3, 4), (3, 4), NORMAL, True),
    "cond inside scan": (cond_in_scan, (6, 3), (3,), NORMAL, True),
}


def check_shaped_case(client, cases: Dict[str, Any], salt: int, name: str) -> None:
    fn, x_shape, y_shape, draw, by_differences = cases[name]
    rng = np.random.default_rng([SEED, salt, list(cases).index(name)])
    check_grads(client, name, fn, draw(rng, x_shape), draw(rng, y_shape), rng, by_differences)


@pytest.mark.parametrize("name", list(WINDOW_CASES))
def test_window_and_index_grad_rules_match_jax(client, name: str) -> None:
    check_shaped_case(client, WINDOW_CASES, 302, name)


@pytest.mark.parametrize("name", list(ORDER_CASES))
def test_order_and_scatter_grad_rules_match_jax(client, name: str) -> None:
    check_shaped_case(client, ORDER_CASES, 304, name)


@pytest.mark.parametrize("name", list(CONTROL_CASES))
def test_control_flow_grad_rules_match_jax(client, name: str) -> None:
    check_shaped_case(client, CONTROL_CASES, 305, name)


def test_while_loop_is_refused_by_grad_naming_it(client) -> None:
    def loss(x):
        c = lax.while_loop(lambda c: lax.lt(c[0], lax.full((), 3, np.int32)),
                           lambda c: (c[0] + 1, lax.sin(c[1])), (lax.full((), 0, np.int32), x))
        return lax.reduce_sum(c[1], (0,))

    with pytest.raises(atoll.InvalidArgument, match=r"\(while\).*while loop is not supported"):
        client.function(client.slice(1), atoll.f32[4])(lambda x: atoll.grad(loss)(x))


def test_a_branch_gradient_that_needs_an_all_reduce_is_refused_naming_cond(client) -> None:
    """w's gradient inside the branch sums over x's rows, cut over 2 devices: a body may hold
    no collective, and a cond's result cannot be left partial."""
    def loss(x, w):
        y = lax.cond(lax.gt(lax.reduce_max(w, (0, 1)), lax.reduce_min(w, (0, 1))),
                     lambda a, b: a @ b, lambda a, b: lax.neg(a @ b), x, w)
        return atoll.ops.all_reduce_sum(lax.reduce_sum(y, (0, 1)))

    with pytest.raises(atoll.InvalidArgument,
                       match=r"\(cond\).*sums over a dimension cut over devices"):
        client.function(client.slice(2), atoll.f32[4, 3].split(0), atoll.f32[3, 2])(
            lambda x, w: atoll.grad(loss, argnums=1)(x, w))


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
    assert_gradients_close(got[1:], want_grads, rtol=1e-3, atol=1e-4)


def assert_gradients_close(got: Any, want: Any, rtol: float, atol: float) -> None:
    """Each gradient against jax's, atol relative to the largest element of jax's."""
    for k, (g, w) in enumerate(zip(got, want)):
        scale = float(np.max(np.abs(w)))
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol * scale,
                                   err_msg=f"gradient of parameter {k + 1}")


def rnn(np_: Any, l: Any, reverse: bool) -> Callable[..., Any]:
    """A tanh RNN over xs [T, B, D] by lax.scan, a linear readout at each step, a squared
    error against targets and a penalty on the last state."""
    def net(xs, h0, wx, wh, b, wo, targets):
        def cell(h, x):
            h = np_.tanh(x @ wx + h @ wh + b)
            return h, h @ wo
        h, ys = l.scan(cell, h0, xs, reverse=reverse)
        return np_.mean(np_.square(ys - targets)) + 0.1 * np_.mean(np_.square(h))
    return net


RNN_PARAMS = (1, 2, 3, 4, 5)  # h0, wx, wh, b, wo


def rnn_args(rng: np.random.Generator) -> list:
    """xs, h0, wx, wh, b, wo, targets: 12 steps of a batch of 4."""
    steps, batch, features, hidden, outputs = 12, 4, 5, 8, 3
    shapes = [(steps, batch, features), (batch, hidden), (features, hidden), (hidden, hidden),
              (hidden,), (hidden, outputs), (steps, batch, outputs)]
    return [(rng.standard_normal(s) * 0.5).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("reverse", [False, True])
def test_a_scan_rnn_has_jax_loss_and_gradients(client, reverse: bool) -> None:
    args = rnn_args(np.random.default_rng([SEED, 306, int(reverse)]))
    types = [atoll.f32[a.shape] for a in args]
    traced = client.function(client.slice(1), *types)(
        lambda *a: (rnn(anp, lax, reverse)(*a),) + tuple(
            atoll.grad(rnn(anp, lax, reverse), argnums=RNN_PARAMS)(*a)))
    got = [np.asarray(v) for v in client.run(traced, *args).result(timeout=120)]
    want_loss, want_grads = jax.jit(jax.value_and_grad(rnn(jax.numpy, jlax, reverse),
                                                       argnums=RNN_PARAMS))(*args)
    np.testing.assert_allclose(got[0], np.asarray(want_loss), rtol=1e-5)
    assert_gradients_close(got[1:], want_grads, rtol=1e-4, atol=1e-5)


def test_a_scan_rnn_with_its_batch_split_over_2_devices_has_jax_gradients(client) -> None:
    """xs, h0 and targets cut along the batch: each device scans its rows; the weights'
    gradients are sums over the batch, partial inside the loop and completed after it."""
    args = rnn_args(np.random.default_rng([SEED, 307]))
    batch_dim = [1, 0, -1, -1, -1, -1, 1]
    types = [atoll.f32[a.shape].split(d) if d >= 0 else atoll.f32[a.shape]
             for a, d in zip(args, batch_dim)]
    traced = client.function(client.slice(2), *types)(
        lambda *a: tuple(atoll.grad(rnn(anp, lax, False), argnums=RNN_PARAMS)(*a)))
    got = client.run(traced, *args).result(timeout=120)
    want = jax.jit(jax.grad(rnn(jax.numpy, jlax, False), argnums=RNN_PARAMS))(*args)
    assert_gradients_close(got, want, rtol=1e-4, atol=1e-5)
