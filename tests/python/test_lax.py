"""atoll.lax against jax.lax on CPU, the oracle, on a real cluster: for every primitive that
atoll has so far, a seeded generator draws shapes (rank 0 to 3, sizes 1 to 5), every dtype
the primitive takes, and values with the edge cases (NaN, infinities, signed zeros,
subnormals, integer minima and maxima, shifts past the width); atoll runs each case as a
compiled function and jax.jit computes the same. Integer, boolean and layout results are
equal bit for bit; float results are within the ulp bound stated per primitive (NaN where
JAX has NaN). Refused cases (a bad permutation, a shape that does not reshape, a split
dimension a primitive cannot take) are refused naming what was wrong.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Sequence, Tuple

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax import lax as jlax  # noqa: E402

import atoll  # noqa: E402
from atoll import lax  # noqa: E402
from atoll._types import dtype_of_numpy  # noqa: E402

jax.config.update("jax_enable_x64", True)

SEED = int(os.environ.get("ATOLL_LAX_SEED", "20261206"))
CASES = int(os.environ.get("ATOLL_LAX_CASES", "12"))

FLOATS = ["f32", "f64", "bf16", "f16"]
SIGNED = ["i32", "i64", "i8"]
UNSIGNED = ["u8", "u32"]
INTS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ["bool"]
NUMPY = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "f16": np.float16,
         "i32": np.int32, "i64": np.int64, "i8": np.int8, "u8": np.uint8, "u32": np.uint32,
         "bool": np.bool_}


def draw(rng: np.random.Generator, dtype: str, shape: Tuple[int, ...]) -> np.ndarray:
    """Random values of `dtype` with its edge cases mixed in."""
    np_type = NUMPY[dtype]
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype in INTS:
        info = np.iinfo(np_type)
        v = rng.integers(info.min, int(info.max) + 1, n, dtype=np.int64 if dtype != "u32"
                         else np.uint64).astype(np_type)
        edges = np.array([0, 1, info.max, info.min, 2, 7], dtype=np.int64 if dtype != "u32"
                         else np.uint64).astype(np_type)
        small = rng.integers(-9 if dtype in SIGNED else 0, 10, n).astype(np_type)
        pick = rng.random(n)
        v = np.where(pick < 0.4, small, v)
        v = np.where(pick > 0.85, edges[rng.integers(0, len(edges), n)], v)
        return v.reshape(shape)
    v = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3, n)
    # No subnormals: XLA on CPU flushes them to zero (docs/design-notes.md, "The jax.lax
    # primitives"), which atoll does not.
    edges = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -1.5, 2.5, 1.0])
    v = np.where(rng.random(n) > 0.85, edges[rng.integers(0, len(edges), n)], v)
    return v.astype(np_type).reshape(shape)


def draw_dims(rng: np.random.Generator, high: int = 6, min_rank: int = 0,
              max_rank: int = 3) -> Tuple[int, ...]:
    """Sizes 1 to high - 1 of rank min_rank to max_rank; one case in six has a dimension of
    size 0, which every primitive takes as jax.lax does."""
    dims = [int(s) for s in rng.integers(1, high, rng.integers(min_rank, max_rank + 1))]
    if dims and rng.random() < 1 / 6:
        dims[int(rng.integers(0, len(dims)))] = 0
    return tuple(dims)


def draw_shape(rng: np.random.Generator, max_rank: int = 3) -> Tuple[int, ...]:
    return draw_dims(rng, 6, 0, max_rank)


def flush_subnormals(v: np.ndarray, info: Any) -> np.ndarray:
    return np.where(np.abs(v) < float(info.tiny), np.copysign(0.0, v), v)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| in units of the last place of b's dtype at b, per element (0 where both are
    NaN or equal, infinities included)."""
    info = ml_dtypes.finfo(b.dtype)
    # XLA on CPU flushes subnormal results to zero; atoll keeps them: both count as zero.
    a64 = flush_subnormals(a.astype(np.float64), info)
    b64 = flush_subnormals(b.astype(np.float64), info)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        exponent = np.floor(np.log2(np.maximum(np.abs(b64), float(info.tiny))))
        spacing = np.exp2(exponent - info.nmant)
        d = np.abs(a64 - b64) / spacing
    same = (np.isnan(a64) & np.isnan(b64)) | (a64 == b64)
    return np.where(same, 0.0, np.where(np.isnan(d), np.inf, d))


def check_equal(got: np.ndarray, want: np.ndarray, ulps: float, what: str) -> None:
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, JAX {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, JAX {want.dtype}"
    if want.dtype.kind in "fV" or want.dtype in (ml_dtypes.bfloat16,):
        if want.dtype.itemsize == 2:
            ulps += 1  # computed in f32 and rounded once, where XLA may round twice
        d = ulp_distance(got, want)
        worst = float(d.max()) if d.size else 0.0
        assert worst <= ulps, (f"{what}: {worst} ulps from JAX (bound {ulps})\n"
                               f"atoll {got.ravel()[:8]}\nJAX   {want.ravel()[:8]}")
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def run_atoll(client: atoll.Client, slice_: atoll.Slice, fn: Callable[..., Any],
              args: Sequence[np.ndarray]) -> np.ndarray:
    types = [dtype_of_numpy(a.dtype)[tuple(a.shape)] for a in args]
    traced = client.function(slice_, *types)(fn)
    return np.asarray(client.run(traced, *args).result(timeout=60))


@pytest.fixture()
def one_device(client: atoll.Client) -> atoll.Slice:
    return client.slice(1)


# name: (atoll's, JAX's, dtypes, ulp bound for floats)
BINARY: Dict[str, Tuple[Callable, Callable, List[str], float]] = {
    "add": (lax.add, jlax.add, ["f32", "f64", "i32", "i64"], 0),
    "sub": (lax.sub, jlax.sub, ["f32", "f64", "i32", "i64"], 0),
    "mul": (lax.mul, jlax.mul, ["f32", "f64", "i32", "i64"], 0),
    "div": (lax.div, jlax.div, ["f32", "f64"], 0),
    "max": (lax.max, jlax.max, ALL, 0),
    "min": (lax.min, jlax.min, ALL, 0),
    "rem": (lax.rem, jlax.rem, NUMERIC, 0),
    "pow": (lax.pow, jlax.pow, FLOATS, 2),
    "atan2": (lax.atan2, jlax.atan2, FLOATS, 2),
    "nextafter": (lax.nextafter, jlax.nextafter, ["f32", "f64"], 0),
    "and": (lax.bitwise_and, jlax.bitwise_and, INTS + ["bool"], 0),
    "or": (lax.bitwise_or, jlax.bitwise_or, INTS + ["bool"], 0),
    "xor": (lax.bitwise_xor, jlax.bitwise_xor, INTS + ["bool"], 0),
    "shift_left": (lax.shift_left, jlax.shift_left, INTS, 0),
    "shift_right_logical": (lax.shift_right_logical, jlax.shift_right_logical, INTS, 0),
    "shift_right_arithmetic": (lax.shift_right_arithmetic, jlax.shift_right_arithmetic, INTS, 0),
    "eq": (lax.eq, jlax.eq, ALL, 0),
    "ne": (lax.ne, jlax.ne, ALL, 0),
    "lt": (lax.lt, jlax.lt, ALL, 0),
    "le": (lax.le, jlax.le, ALL, 0),
    "gt": (lax.gt, jlax.gt, ALL, 0),
    "ge": (lax.ge, jlax.ge, ALL, 0),
}

UNARY: Dict[str, Tuple[Callable, Callable, List[str], float]] = {
    "neg": (lax.neg, jlax.neg, ["f32", "f64", "bf16", "f16"], 0),
    "exp": (lax.exp, jlax.exp, ["f32", "f64"], 2),
    "log": (lax.log, jlax.log, ["f32", "f64"], 2),
    # XLA's f32 tanh is a rational approximation up to 4.1 ulps from tanh in f64 (200,000
    # draws); atoll's is within 1 ulp of it.
    "tanh": (lax.tanh, jlax.tanh, ["f32", "f64"], 5),
    "sqrt": (lax.sqrt, jlax.sqrt, FLOATS, 0),
    "logistic": (lax.logistic, jlax.logistic, ["f32", "f64"], 3),
    "not": (lax.bitwise_not, jlax.bitwise_not, INTS + ["bool"], 0),
    "population_count": (lax.population_count, jlax.population_count, INTS, 0),
    "abs": (lax.abs, jlax.abs, ["f32", "f64", "bf16", "f16", "i32", "i64", "i8"], 0),
    "sign": (lax.sign, jlax.sign, NUMERIC, 0),
    "floor": (lax.floor, jlax.floor, FLOATS, 0),
    "ceil": (lax.ceil, jlax.ceil, FLOATS, 0),
    "round_away": (lambda x: lax.round(x, 0),
                   lambda x: jlax.round(x, jlax.RoundingMethod.AWAY_FROM_ZERO), FLOATS, 0),
    "round_even": (lambda x: lax.round(x, 1),
                   lambda x: jlax.round(x, jlax.RoundingMethod.TO_NEAREST_EVEN), FLOATS, 0),
    "is_finite": (lax.is_finite, jlax.is_finite, FLOATS, 0),
    # XLA computes exp2 as its own exp of x ln 2, rounded in the operand's dtype first.
    "exp2": (lax.exp2, jlax.exp2, FLOATS, 64),
    "log1p": (lax.log1p, jlax.log1p, FLOATS, 2),
    "expm1": (lax.expm1, jlax.expm1, FLOATS, 2),
    "sin": (lax.sin, jlax.sin, FLOATS, 2),
    "cos": (lax.cos, jlax.cos, FLOATS, 2),
    "tan": (lax.tan, jlax.tan, FLOATS, 4),
    "asin": (lax.asin, jlax.asin, FLOATS, 2),
    "acos": (lax.acos, jlax.acos, FLOATS, 2),
    "atan": (lax.atan, jlax.atan, FLOATS, 4),
    # XLA's sinh and cosh of large arguments go through exp in f32: up to 32 ulps off.
    "sinh": (lax.sinh, jlax.sinh, FLOATS, 32),
    "cosh": (lax.cosh, jlax.cosh, FLOATS, 32),
    "asinh": (lax.asinh, jlax.asinh, FLOATS, 3),
    "acosh": (lax.acosh, jlax.acosh, FLOATS, 3),
    "atanh": (lax.atanh, jlax.atanh, FLOATS, 3),
    "cbrt": (lax.cbrt, jlax.cbrt, FLOATS, 2),
    "erf": (lax.erf, jlax.erf, FLOATS, 3),
    "erf_inv": (lax.erf_inv, jlax.erf_inv, FLOATS, 16),
    "erfc": (lax.erfc, jlax.erfc, FLOATS, 64),  # XLA's f64 tails: 54 ulps seen
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_primitive_matches_jax(client: atoll.Client, one_device: atoll.Slice,
                                      name: str) -> None:
    ours, theirs, dtypes, ulps = BINARY[name]
    rng = np.random.default_rng([SEED, len(name), sum(map(ord, name))])
    for case in range(CASES):
        dtype = dtypes[case % len(dtypes)]
        shape = draw_shape(rng)
        x, y = draw(rng, dtype, shape), draw(rng, dtype, shape)
        if name.startswith("shift"):  # amounts around the width, negative ones too
            bits = np.dtype(NUMPY[dtype]).itemsize * 8
            y = rng.integers(-2, bits + 3, shape).astype(NUMPY[dtype])
        if name == "rem" and dtype in INTS:
            y = np.where(y == 0, np.ones_like(y), y)  # XLA's x % 0 is its own; tested below
        want = np.asarray(jax.jit(theirs)(x, y))
        got = run_atoll(client, one_device, ours, [x, y])
        check_equal(got, want, ulps, f"{name} {dtype}{list(shape)} case {case}")


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_primitive_matches_jax(client: atoll.Client, one_device: atoll.Slice,
                                     name: str) -> None:
    ours, theirs, dtypes, ulps = UNARY[name]
    rng = np.random.default_rng([SEED, 1, sum(map(ord, name))])
    for case in range(CASES):
        dtype = dtypes[case % len(dtypes)]
        shape = draw_shape(rng)
        x = draw(rng, dtype, shape)
        want = np.asarray(jax.jit(theirs)(x))
        got = run_atoll(client, one_device, ours, [x])
        check_equal(got, want, ulps, f"{name} {dtype}{list(shape)} case {case}")


def test_conversions_match_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    rng = np.random.default_rng([SEED, 2])
    for case in range(CASES * 4):
        src, dst = ALL[rng.integers(len(ALL))], ALL[rng.integers(len(ALL))]
        shape = draw_shape(rng)
        x = draw(rng, src, shape)
        if src in FLOATS and dst in INTS:
            # Out-of-range and NaN float -> int conversions are implementation-defined in XLA;
            # compare in range here (saturation is the documented atoll choice).
            info = np.iinfo(NUMPY[dst])
            x = np.where(np.isfinite(x.astype(np.float64)) &
                         (x.astype(np.float64) > info.min) & (x.astype(np.float64) < info.max),
                         x, np.zeros_like(x))
        want = np.asarray(jax.jit(lambda v: jlax.convert_element_type(v, NUMPY[dst]))(x))
        got = run_atoll(client, one_device, lambda v: lax.convert_element_type(v, dst), [x])
        check_equal(got, want, 0, f"convert {src}{list(shape)} -> {dst} case {case}")


def test_layout_primitives_match_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    rng = np.random.default_rng([SEED, 3])
    for case in range(CASES * 2):
        dtype = ALL[case % len(ALL)]
        shape = draw_dims(rng, 5, 1, 3)
        x = draw(rng, dtype, shape)
        rank = len(shape)
        perm = [int(p) for p in rng.permutation(rank)]
        start = [int(rng.integers(0, s + 1)) for s in shape]
        limit = [int(rng.integers(b, s + 1)) for b, s in zip(start, shape)]
        strides = [int(rng.integers(1, 3)) for _ in shape]
        dims = sorted(int(d) for d in rng.choice(rank, rng.integers(0, rank + 1), replace=False))
        new_shape = [int(np.prod(shape))] if case % 2 else list(shape[::-1])
        bshape = [int(s) for s in rng.integers(1, 4, 1)] + list(shape)
        cases = [
            ("transpose", lambda v: lax.transpose(v, perm), lambda v: jlax.transpose(v, perm)),
            ("slice", lambda v: lax.slice(v, start, limit, strides),
             lambda v: jlax.slice(v, start, limit, strides)),
            ("rev", lambda v: lax.rev(v, dims), lambda v: jlax.rev(v, dims)),
            ("broadcast_in_dim", lambda v: lax.broadcast_in_dim(v, bshape, range(1, rank + 1)),
             lambda v: jlax.broadcast_in_dim(v, bshape, tuple(range(1, rank + 1)))),
            ("concatenate", lambda v: lax.concatenate([v, v], rank - 1),
             lambda v: jlax.concatenate([v, v], rank - 1)),
            ("expand_dims", lambda v: lax.expand_dims(v, [0]), lambda v: jlax.expand_dims(v, [0])),
        ]
        if int(np.prod(shape)) == int(np.prod(new_shape)):
            cases.append(("reshape", lambda v: lax.reshape(v, new_shape),
                          lambda v: jlax.reshape(v, new_shape)))
        for what, ours, theirs in cases:
            want = np.asarray(jax.jit(theirs)(x))
            got = run_atoll(client, one_device, ours, [x])
            check_equal(got, want, 0, f"{what} {dtype}{list(shape)} case {case}")


def test_pad_select_clamp_iota_match_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    rng = np.random.default_rng([SEED, 4])
    for case in range(CASES):
        dtype = NUMERIC[case % len(NUMERIC)]
        shape = draw_dims(rng, 5, 1, 2)
        x, lo, hi = (draw(rng, dtype, shape) for _ in range(3))
        value = draw(rng, dtype, ())
        config = [(int(rng.integers(-1, 3)), int(rng.integers(-1, 3)), int(rng.integers(0, 2)))
                  for _ in shape]
        config = [(max(l, -s // 2), max(h, -s // 2), i) for (l, h, i), s in zip(config, shape)]
        want = np.asarray(jax.jit(lambda v, p: jlax.pad(v, p, config))(x, value))
        got = run_atoll(client, one_device, lambda v, p: lax.pad(v, p, config), [x, value])
        check_equal(got, want, 0, f"pad {dtype}{list(shape)} {config}")
        which = draw(rng, "bool", shape)
        want = np.asarray(jax.jit(jlax.select_n)(which, x, lo))
        got = run_atoll(client, one_device, lax.select_n, [which, x, lo])
        check_equal(got, want, 0, f"select_n {dtype}{list(shape)}")
        if dtype in FLOATS:
            lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
        else:
            lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
        want = np.asarray(jax.jit(jlax.clamp)(lo, x, hi))
        got = run_atoll(client, one_device, lax.clamp, [lo, x, hi])
        check_equal(got, want, 0, f"clamp {dtype}{list(shape)}")
        dim = int(rng.integers(0, len(shape)))
        want = np.asarray(jax.jit(lambda v: jlax.broadcasted_iota(NUMPY[dtype], shape, dim))(x))
        got = run_atoll(client, one_device, lambda v: lax.broadcasted_iota(dtype, shape, dim), [x])
        check_equal(got, want, 0, f"iota {dtype}{list(shape)} dimension {dim}")


def test_reductions_match_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    rng = np.random.default_rng([SEED, 5])
    reductions = [("reduce_max", lax.reduce_max, jlax.reduce_max, NUMERIC),
                  ("reduce_min", lax.reduce_min, jlax.reduce_min, NUMERIC),
                  ("reduce_prod", lax.reduce_prod, jlax.reduce_prod, ["i32", "i64", "u32"]),
                  ("reduce_and", lax.reduce_and, jlax.reduce_and, ["bool"] + INTS),
                  ("reduce_or", lax.reduce_or, jlax.reduce_or, ["bool"] + INTS)]
    for case in range(CASES * 2):
        name, ours, theirs, dtypes = reductions[case % len(reductions)]
        dtype = dtypes[rng.integers(len(dtypes))]
        shape = draw_dims(rng, 5, 1, 3)
        axes = sorted(int(a) for a in rng.choice(len(shape), rng.integers(1, len(shape) + 1),
                                                 replace=False))
        x = draw(rng, dtype, shape)
        want = np.asarray(jax.jit(lambda v: theirs(v, axes))(x))
        got = run_atoll(client, one_device, lambda v: ours(v, axes), [x])
        check_equal(got, want, 0, f"{name} {dtype}{list(shape)} axes {axes}")
        if dtype in NUMERIC:
            axis = axes[0]
            for arg, jarg in ((lax.argmax, jlax.argmax), (lax.argmin, jlax.argmin)):
                if shape[axis] == 0:  # jax refuses too: no position to give
                    with pytest.raises(atoll.InvalidArgument, match=f"axis {axis} is empty"):
                        run_atoll(client, one_device, lambda v: arg(v, axis, np.int32), [x])
                    continue
                want = np.asarray(jax.jit(lambda v: jarg(v, axis, np.int32))(x))
                got = run_atoll(client, one_device, lambda v: arg(v, axis, np.int32), [x])
                check_equal(got, want, 0, f"{arg.__name__} {dtype}{list(shape)} axis {axis}")


def test_dot_general_matches_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    rng = np.random.default_rng([SEED, 6])
    for case in range(CASES * 2):
        dtype = ["f32", "f64", "i32", "i64", "bf16"][case % 5]
        b, m, k, n = draw_dims(rng, 6, 4, 4)
        batched = case % 3 != 0
        lhs_shape = (b, m, k) if batched else (m, k)
        rhs_shape = (b, n, k) if batched else (k, n)
        x = draw(rng, dtype, lhs_shape)
        y = draw(rng, dtype, rhs_shape)
        if dtype in FLOATS:  # finite values: inf * 0 order effects are not what is tested
            x = np.nan_to_num(x.astype(np.float32), posinf=3, neginf=-3).astype(NUMPY[dtype])
            y = np.nan_to_num(y.astype(np.float32), posinf=3, neginf=-3).astype(NUMPY[dtype])
        dims = (((2,), (2,)), ((0,), (0,))) if batched else (((1,), (0,)), ((), ()))
        want = np.asarray(jax.jit(lambda p, q: jlax.dot_general(p, q, dims))(x, y))
        got = run_atoll(client, one_device, lambda p, q: lax.dot_general(p, q, dims), [x, y])
        if dtype in INTS:
            check_equal(got, want, 0, f"dot_general {dtype} {lhs_shape} x {rhs_shape}")
        else:
            # Sums in another order: within k ulps of the largest product, relative to it.
            scale = np.maximum(np.abs(want.astype(np.float64)), 1e-30)
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol={"bf16": 2e-2, "f32": 1e-5, "f64": 1e-12}[dtype],
                                       atol=float(scale.max(initial=0.0)) * 1e-6,
                                       err_msg=f"dot_general {dtype} {lhs_shape} x {rhs_shape}")
    # preferred_element_type: i8 operands accumulate in i32, as JAX does.
    x = draw(rng, "i8", (3, 4))
    y = draw(rng, "i8", (4, 2))
    dims = (((1,), (0,)), ((), ()))
    want = np.asarray(jax.jit(lambda p, q: jlax.dot_general(
        p, q, dims, preferred_element_type=np.int32))(x, y))
    got = run_atoll(client, one_device,
                    lambda p, q: lax.dot_general(p, q, dims, preferred_element_type=np.int32),
                    [x, y])
    check_equal(got, want, 0, "dot_general i8 -> i32")


def test_dot_general_layouts_match_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    """Batch, free and contracting dimensions at any positions and in any order (an einsum's
    `bqhd,bkhd->bhqk`): the kernel reads an operand in place when its groups lie evenly in
    memory and copies it otherwise; both must give JAX's product."""
    rng = np.random.default_rng([SEED, 61])
    for case in range(CASES * 2):
        dtype = ["f32", "i32", "f64"][case % 3]
        groups = {g: [int(s) for s in rng.choice([1, 2, 3, 5], int(rng.integers(lo, hi)))]
                  for g, lo, hi in (("batch", 0, 3), ("k", 1, 3), ("m", 0, 3), ("n", 0, 3))}

        def layout(free: str) -> Tuple[Tuple[int, ...], Dict[str, List[int]]]:
            """A random order of the operand's dimensions: its shape and where each went."""
            named = [(g, i) for g in ("batch", free, "k") for i in range(len(groups[g]))]
            order = rng.permutation(len(named))
            shape = tuple(groups[named[j][0]][named[j][1]] for j in order)
            at: Dict[str, List[int]] = {g: [0] * len(groups[g]) for g in ("batch", free, "k")}
            for pos, j in enumerate(order):
                at[named[j][0]][named[j][1]] = pos
            return shape, at

        (ls, la), (rs, ra) = layout("m"), layout("n")
        dims = ((tuple(la["k"]), tuple(ra["k"])), (tuple(la["batch"]), tuple(ra["batch"])))
        x, y = draw(rng, dtype, ls), draw(rng, dtype, rs)
        if dtype != "i32":
            x, y = (np.nan_to_num(v, posinf=3, neginf=-3) for v in (x, y))
        want = np.asarray(jax.jit(lambda p, q: jlax.dot_general(p, q, dims))(x, y))
        got = run_atoll(client, one_device, lambda p, q: lax.dot_general(p, q, dims), [x, y])
        what = f"dot_general {dtype} {ls} x {rs} dims {dims}"
        if dtype == "i32":
            check_equal(got, want, 0, what)
        else:
            scale = float(np.abs(want).max(initial=0.0))
            np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "f32" else 1e-12,
                                       atol=scale * 1e-6, err_msg=what)


def test_integer_division_edges_match_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    """rem by zero and MIN % -1, where C++ would trap."""
    for dtype in SIGNED:
        info = np.iinfo(NUMPY[dtype])
        x = np.array([7, -7, info.min, info.min, 5], NUMPY[dtype])
        y = np.array([0, 0, -1, 0, 3], NUMPY[dtype])
        want = np.asarray(jax.jit(jlax.rem)(x, y))
        got = run_atoll(client, one_device, lax.rem, [x, y])
        check_equal(got, want, 0, f"rem {dtype} edges")


def test_refusals_name_what_was_wrong(client: atoll.Client, one_device: atoll.Slice) -> None:
    def refused(fn: Callable[..., Any], types: Sequence[atoll.TensorType], *says: str) -> None:
        with pytest.raises(atoll.InvalidArgument) as e:
            client.function(one_device, *types)(fn)
        for s in says:
            assert s in str(e.value), f"{str(e.value)!r} does not say {s!r}"

    refused(lambda v: lax.transpose(v, [0, 0]), [atoll.f32[2, 3]], "transpose_nd",
            "permutation")
    refused(lambda v: lax.reshape(v, [5]), [atoll.f32[2, 3]], "reshape", "[5]")
    refused(lambda v: lax.sin(v), [atoll.i32[2]], "sin takes", "i32")
    refused(lambda a, b: lax.max(a, b), [atoll.f32[2], atoll.f64[2]], "max", "differ")
    refused(lambda v: lax.slice(v, [0], [5]), [atoll.f32[4]], "slice", "limit 5")
    refused(lambda a, b: lax.dot_general(a, b, (((1,), (1,)), ((), ()))),
            [atoll.f32[2, 3], atoll.f32[4, 2]], "dot_general", "differ in size")
    refused(lambda v: lax.convert_element_type(v, "f32") if False else
            atoll.ops.primitive("no_such_primitive", [v]), [atoll.f32[2]],
            "no_such_primitive")


def test_split_operands_keep_their_cut_or_are_refused(client: atoll.Client) -> None:
    """On a 2-device slice: a primitive that keeps a split dimension whole runs per shard
    and equals JAX on the whole array; one that would need the other shard's data is
    refused at build, naming the dimension and the mesh axis."""
    two = client.slice(2)
    rng = np.random.default_rng([SEED, 7])
    x = draw(rng, "f32", (4, 3))
    y = draw(rng, "f32", (4, 3))
    split = atoll.f32[4, 3].split(0)

    @atoll.function(two, split, split)
    def elementwise(a, b):
        return lax.max(lax.sin(a), b)

    got = np.asarray(client.run(elementwise, x, y).result(timeout=60))
    want = np.asarray(jax.jit(lambda a, b: jlax.max(jlax.sin(a), b))(x, y))
    check_equal(got, want, 2, "max(sin) on a split operand")

    @atoll.function(two, split)
    def layout(a):
        t = lax.broadcast_in_dim(a, (4, 3, 2), (0, 1))
        return lax.reduce_max(lax.slice(t, [0, 1, 0], [4, 3, 2]), [2])

    got = np.asarray(client.run(layout, x).result(timeout=60))
    want = np.asarray(jax.jit(lambda a: jlax.reduce_max(
        jlax.slice(jlax.broadcast_in_dim(a, (4, 3, 2), (0, 1)), [0, 1, 0], [4, 3, 2]), [2]))(x))
    check_equal(got, want, 0, "broadcast, slice and reduce keeping the split dimension")

    with pytest.raises(atoll.InvalidArgument, match="dimension 0 is cut along mesh axis 0"):
        client.function(two, split)(lambda a: lax.rev(a, [0]))
    with pytest.raises(atoll.InvalidArgument, match="dimension 0 is cut along mesh axis 0"):
        client.function(two, split)(lambda a: lax.slice(a, [1, 0], [4, 3]))


def test_integer_pow_cumulative_and_bitcast_match_jax(client: atoll.Client,
                                                      one_device: atoll.Slice) -> None:
    rng = np.random.default_rng([SEED, 8])
    for case in range(CASES):
        dtype = ["f32", "f64", "i32", "i64", "u8"][case % 5]
        shape = draw_dims(rng, 5, 1, 3)
        x = draw(rng, dtype, shape)
        y = int(rng.integers(-3 if dtype in FLOATS else 0, 7))
        want = np.asarray(jax.jit(lambda v: jlax.integer_pow(v, y))(x))
        got = run_atoll(client, one_device, lambda v: lax.integer_pow(v, y), [x])
        check_equal(got, want, 0, f"integer_pow {dtype}{list(shape)} ^ {y}")
        axis = int(rng.integers(0, len(shape)))
        reverse = bool(rng.integers(0, 2))
        for name in ("cumsum", "cumprod", "cummax", "cummin"):
            v = x if dtype in INTS or name in ("cummax", "cummin") else \
                np.nan_to_num(x.astype(np.float64), posinf=9, neginf=-9).clip(-3, 3).astype(x.dtype)
            theirs = getattr(jlax, name)
            ours = getattr(lax, name)
            want = np.asarray(jax.jit(lambda u: theirs(u, axis, reverse))(v))
            got = run_atoll(client, one_device, lambda u: ours(u, axis, reverse), [v])
            if dtype in FLOATS and name in ("cumsum", "cumprod"):  # XLA may associate otherwise
                np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "f32" else 1e-12,
                                           atol=1e-6, err_msg=f"{name} {dtype}{list(shape)}")
            else:
                check_equal(got, want, 0, f"{name} {dtype}{list(shape)} axis {axis} "
                                          f"reverse {reverse}")
    for src, dst in (("f32", "i32"), ("f32", "u32"), ("i64", "f64"), ("u32", "f32")):
        x = draw(rng, src, (5,))
        want = np.asarray(jax.jit(lambda v: jlax.bitcast_convert_type(v, NUMPY[dst]))(x))
        got = run_atoll(client, one_device, lambda v: lax.bitcast_convert_type(v, dst), [x])
        assert got.tobytes() == want.tobytes(), f"bitcast {src} -> {dst}"


def test_dynamic_slices_clamp_as_jax_does(client: atoll.Client, one_device: atoll.Slice) -> None:
    rng = np.random.default_rng([SEED, 9])
    for case in range(CASES):
        dtype = ALL[case % len(ALL)]
        shape = draw_dims(rng, 6, 1, 3)
        x = draw(rng, dtype, shape)
        sizes = [int(rng.integers(0, s + 1)) for s in shape]
        # Starts in and out of range, negative ones too: jax clamps them.
        starts = [np.array(rng.integers(-3, s + 3), np.int32) for s in shape]
        update = draw(rng, dtype, tuple(sizes))

        def ours_slice(v, *s):
            return lax.dynamic_slice(v, s, sizes)

        def ours_update(v, u, *s):
            return lax.dynamic_update_slice(v, u, s)

        want = np.asarray(jax.jit(lambda v, *s: jlax.dynamic_slice(v, s, sizes))(x, *starts))
        if 0 not in sizes:
            got = run_atoll(client, one_device, ours_slice, [x, *starts])
            check_equal(got, want, 0, f"dynamic_slice {dtype}{list(shape)} {sizes} at "
                                      f"{[int(s) for s in starts]}")
        if 0 not in update.shape:
            want = np.asarray(jax.jit(lambda v, u, *s: jlax.dynamic_update_slice(v, u, s))(
                x, update, *starts))
            got = run_atoll(client, one_device, ours_update, [x, update, *starts])
            check_equal(got, want, 0, f"dynamic_update_slice {dtype}{list(shape)} at "
                                      f"{[int(s) for s in starts]}")


def test_gather_and_scatter_match_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    """Embedding lookups (rows by id) and windows at 2-D starts, in clip and fill modes, with
    indices in and out of range (negative ones too); scatter, scatter-add/mul/min/max with
    repeated indices, in clip and drop modes."""
    rng = np.random.default_rng([SEED, 10])
    modes = [jlax.GatherScatterMode.CLIP, jlax.GatherScatterMode.FILL_OR_DROP]
    for case in range(CASES):
        dtype = ALL[case % len(ALL)]
        mode = modes[case % 2]
        width, k = draw_dims(rng, 6, 2, 2)
        rows = int(rng.integers(1, 6))  # a row to gather: jax refuses a slice of 1 from 0
        table = draw(rng, dtype, (rows, width))
        ids = rng.integers(-2, rows + 2, (k, 1)).astype(np.int32)
        rows_dims = jlax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                                start_index_map=(0,))
        want = np.asarray(jax.jit(lambda t, i: jlax.gather(t, i, rows_dims, (1, width),
                                                           mode=mode))(table, ids))
        got = run_atoll(client, one_device,
                        lambda t, i: lax.gather(t, i, rows_dims, (1, width), mode=mode),
                        [table, ids])
        check_equal(got, want, 0, f"gather rows {dtype} {mode}")
        # Windows of 2x2 at 2-D starts.
        grid = draw(rng, dtype, (4, 5))
        starts = rng.integers(-1, 5, (k, 2)).astype(np.int64)
        window_dims = jlax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                                  start_index_map=(0, 1))
        want = np.asarray(jax.jit(lambda g, s: jlax.gather(g, s, window_dims, (2, 2),
                                                           mode=mode))(grid, starts))
        got = run_atoll(client, one_device,
                        lambda g, s: lax.gather(g, s, window_dims, (2, 2), mode=mode),
                        [grid, starts])
        check_equal(got, want, 0, f"gather windows {dtype} {mode}")
        # Scatters of rows at repeated ids.
        scatter_dims = jlax.ScatterDimensionNumbers(update_window_dims=(1,),
                                                    inserted_window_dims=(0,),
                                                    scatter_dims_to_operand_dims=(0,))
        updates = draw(rng, dtype, (k, width))
        for name in ("scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max"):
            if name in ("scatter_add", "scatter_mul") and dtype == "bool":
                continue
            if dtype in FLOATS and name in ("scatter_add", "scatter_mul", "scatter"):
                continue  # order of repeated updates: compared on integers and in the next loop
            theirs, ours = getattr(jlax, name), getattr(lax, name)
            want = np.asarray(jax.jit(lambda t, i, u: theirs(t, i, u, scatter_dims, mode=mode))(
                table, ids, updates))
            got = run_atoll(client, one_device,
                            lambda t, i, u: ours(t, i, u, scatter_dims, mode=mode),
                            [table, ids, updates])
            check_equal(got, want, 0, f"{name} {dtype} {mode}")
    # Float scatter-add and scatter at distinct ids: no order to disagree on.
    table = draw(rng, "f32", (6, 3))
    ids = rng.permutation(8)[:4].reshape(4, 1).astype(np.int32) - 1
    updates = draw(rng, "f32", (4, 3))
    dims = jlax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
    for name in ("scatter", "scatter_add", "scatter_mul"):
        theirs, ours = getattr(jlax, name), getattr(lax, name)
        for mode in modes:
            want = np.asarray(jax.jit(lambda t, i, u: theirs(t, i, u, dims, mode=mode))(
                table, ids, updates))
            got = run_atoll(client, one_device,
                            lambda t, i, u: ours(t, i, u, dims, mode=mode), [table, ids, updates])
            check_equal(got, want, 0, f"{name} f32 distinct ids {mode}")


def test_sort_and_top_k_match_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    rng = np.random.default_rng([SEED, 11])
    for case in range(CASES):
        dtype = NUMERIC[case % len(NUMERIC)]
        shape = draw_dims(rng, 6, 1, 3)
        dim = int(rng.integers(0, len(shape)))
        keys = draw(rng, dtype, shape)
        if keys.size:  # ties
            keys = np.where(rng.random(shape) < 0.3, keys.ravel()[0], keys).astype(keys.dtype)
        payload = draw(rng, "i32", shape)
        want = jax.jit(lambda a, b: jlax.sort((a, b), dimension=dim, num_keys=1))(keys, payload)
        got_keys = run_atoll(client, one_device, lambda a, b: lax.sort((a, b), dim)[0],
                             [keys, payload])
        got_payload = run_atoll(client, one_device, lambda a, b: lax.sort((a, b), dim)[1],
                                [keys, payload])
        check_equal(got_keys, np.asarray(want[0]), 0, f"sort keys {dtype}{list(shape)} dim {dim}")
        check_equal(got_payload, np.asarray(want[1]), 0,
                    f"sort payload by {dtype}{list(shape)} dim {dim}")
    for case in range(CASES // 2):
        dtype = ["f32", "f64"][case % 2]
        n = int(rng.integers(1, 8))
        x = np.nan_to_num(draw(rng, dtype, (3, n)), nan=0.5)
        k = int(rng.integers(1, n + 1))
        values, indices = jax.jit(lambda v: jlax.top_k(v, k))(x)
        got_values = run_atoll(client, one_device, lambda v: lax.top_k(v, k)[0], [x])
        got_indices = run_atoll(client, one_device, lambda v: lax.top_k(v, k)[1], [x])
        check_equal(got_values, np.asarray(values), 0, f"top_k values {dtype} k={k}")
        check_equal(got_indices, np.asarray(indices), 0, f"top_k indices {dtype} k={k}")
