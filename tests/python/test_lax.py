"""atoll.lax against jax.lax on CPU, the oracle, on a real cluster: for every primitive that
atoll has so far, a seeded generator draws shapes (rank 0 to 3, sizes 1 to 5), every dtype
the primitive takes, and values with the edge cases (NaN, infinities, signed zeros,
subnormals, integer minima and maxima, shifts past the width); atoll runs each case as a
compiled function and jax.jit computes the same. Integer, boolean and layout results are
equal bit for bit; float results are within the ulp bound stated per primitive (NaN where
JAX has NaN). Refused cases (a bad permutation, a shape that does not reshape, a split
dimension a primitive cannot take) are refused naming what was wrong. Each generator yields
Cases that also say how a cut of their arguments' dimensions reads, so that
test_lax_sharded.py runs the same draws on a 2-device slice and a 2x2 mesh.
"""

from __future__ import annotations

import dataclasses
import os
from types import SimpleNamespace
from typing import (Any, Callable, Dict, FrozenSet, Iterable, Iterator, List, Optional,
                    Sequence, Tuple)

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
              max_rank: int = 3, even: bool = False) -> Tuple[int, ...]:
    """Sizes 1 to high - 1 of rank min_rank to max_rank; one case in six has a dimension of
    size 0, which every primitive takes as jax.lax does. `even` doubles every size, so that
    any dimension divides over a mesh axis of 2 devices (test_lax_sharded.py)."""
    dims = [int(s) for s in rng.integers(1, high, rng.integers(min_rank, max_rank + 1))]
    if dims and rng.random() < 1 / 6:
        dims[int(rng.integers(0, len(dims)))] = 0
    return tuple(2 * d if even else d for d in dims)


def draw_shape(rng: np.random.Generator, max_rank: int = 3, even: bool = False
               ) -> Tuple[int, ...]:
    return draw_dims(rng, 6, 0, max_rank, even)


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


@dataclasses.dataclass
class Case:
    """One drawn case of a primitive: atoll's and JAX's function of the same arguments and
    how their results compare (``check``: within ``ulps``, by default). For the runs on cut
    operands (test_lax_sharded.py), how a cut of the arguments reads: ``dims`` names each
    argument's dimensions (equal names are cut alike; None: never cut; by default the
    arguments of the first one's shape have names "d0", "d1", ... and the others none),
    ``whole`` the names whose cut the primitive must refuse (it would need another shard's
    data), ``partial`` the names whose cut leaves each device a partial result, with the
    all-reduce that completes it (None: none does, so they are not cut). ``refused``: the
    message with which atoll refuses the case on any slice (as jax refuses it too)."""

    what: str
    ours: Callable[..., Any]
    theirs: Callable[..., Any]
    args: List[np.ndarray]
    ulps: float = 0
    check: Optional[Callable[[np.ndarray, np.ndarray, str], None]] = None
    dims: Optional[List[Tuple[Optional[str], ...]]] = None
    whole: FrozenSet[str] = frozenset()
    partial: Dict[str, Optional[str]] = dataclasses.field(default_factory=dict)
    refused: Optional[str] = None

    def compare(self, got: np.ndarray, want: np.ndarray, what: str) -> None:
        if self.check is not None:
            self.check(got, want, what)
        else:
            check_equal(got, want, self.ulps, what)


def names(*dims: int) -> FrozenSet[str]:
    """The default names of dimensions ``dims`` of the first argument (Case.dims)."""
    return frozenset(f"d{d}" for d in dims)


def close(rtol: float, atol: float) -> Callable[[np.ndarray, np.ndarray, str], None]:
    """A Case.check for sums in another order than XLA's."""
    def check(got: np.ndarray, want: np.ndarray, what: str) -> None:
        assert got.shape == want.shape and got.dtype == want.dtype, (
            f"{what}: {got.dtype}{got.shape}, JAX {want.dtype}{want.shape}")
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=atol, err_msg=what)
    return check


def same_bytes(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.tobytes() == want.tobytes(), what


def run_cases(client: atoll.Client, slice_: atoll.Slice, cases: Iterable[Case]) -> int:
    """Each case on ``slice_`` with its arguments whole, against jax.jit: how many ran."""
    ran = 0
    for case in cases:
        if case.refused:
            with pytest.raises(atoll.InvalidArgument, match=case.refused):
                run_atoll(client, slice_, case.ours, case.args)
            continue
        want = np.asarray(jax.jit(case.theirs)(*case.args))
        case.compare(run_atoll(client, slice_, case.ours, case.args), want, case.what)
        ran += 1
    return ran


# name: (atoll's, JAX's, dtypes, ulp bound for floats)
BINARY: Dict[str, Tuple[Callable, Callable, List[str], float]] = {
    "add": (lax.add, jlax.add, NUMERIC, 0),
    "sub": (lax.sub, jlax.sub, NUMERIC, 0),
    "mul": (lax.mul, jlax.mul, NUMERIC, 0),
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
    # XLA's f64 atanh: 52 ulps off at -0.4007 (atoll's, the C library's, is correctly
    # rounded there, checked with decimal at 60 digits).
    "atanh": (lax.atanh, jlax.atanh, FLOATS, 64),
    "cbrt": (lax.cbrt, jlax.cbrt, FLOATS, 2),
    "erf": (lax.erf, jlax.erf, FLOATS, 3),
    "erf_inv": (lax.erf_inv, jlax.erf_inv, FLOATS, 16),
    # XLA's f64 tails: 186 ulps off at 17.98 (atoll's, the C library's, is correctly rounded).
    "erfc": (lax.erfc, jlax.erfc, FLOATS, 256),
}


def binary_cases(name: str, rng: np.random.Generator, cases: Iterable[int] = range(CASES),
                 even: bool = False) -> Iterator[Case]:
    ours, theirs, dtypes, ulps = BINARY[name]
    for case in cases:
        dtype = dtypes[case % len(dtypes)]
        shape = draw_shape(rng, even=even)
        x, y = draw(rng, dtype, shape), draw(rng, dtype, shape)
        if name.startswith("shift"):  # amounts around the width, negative ones too
            bits = np.dtype(NUMPY[dtype]).itemsize * 8
            y = rng.integers(-2, bits + 3, shape).astype(NUMPY[dtype])
        if name == "rem" and dtype in INTS:
            y = np.where(y == 0, np.ones_like(y), y)  # XLA's x % 0 is its own; tested below
        yield Case(f"{name} {dtype}{list(shape)} case {case}", ours, theirs, [x, y], ulps)


def unary_cases(name: str, rng: np.random.Generator, cases: Iterable[int] = range(CASES),
                even: bool = False) -> Iterator[Case]:
    ours, theirs, dtypes, ulps = UNARY[name]
    for case in cases:
        dtype = dtypes[case % len(dtypes)]
        shape = draw_shape(rng, even=even)
        yield Case(f"{name} {dtype}{list(shape)} case {case}", ours, theirs,
                   [draw(rng, dtype, shape)], ulps)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_primitive_matches_jax(client: atoll.Client, one_device: atoll.Slice,
                                      name: str) -> None:
    rng = np.random.default_rng([SEED, len(name), sum(map(ord, name))])
    run_cases(client, one_device, binary_cases(name, rng))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_primitive_matches_jax(client: atoll.Client, one_device: atoll.Slice,
                                     name: str) -> None:
    rng = np.random.default_rng([SEED, 1, sum(map(ord, name))])
    run_cases(client, one_device, unary_cases(name, rng))


def conversion_cases(rng: np.random.Generator, cases: Iterable[int] = range(CASES * 4),
                     even: bool = False) -> Iterator[Case]:
    for case in cases:
        src, dst = ALL[rng.integers(len(ALL))], ALL[rng.integers(len(ALL))]
        shape = draw_shape(rng, even=even)
        x = draw(rng, src, shape)
        if src in FLOATS and dst in INTS:
            # Out-of-range and NaN float -> int conversions are implementation-defined in XLA;
            # compare in range here (saturation is the documented atoll choice).
            info = np.iinfo(NUMPY[dst])
            x = np.where(np.isfinite(x.astype(np.float64)) &
                         (x.astype(np.float64) > info.min) & (x.astype(np.float64) < info.max),
                         x, np.zeros_like(x))
        yield Case(f"convert {src}{list(shape)} -> {dst} case {case}",
                   lambda v, dst=dst: lax.convert_element_type(v, dst),
                   lambda v, dst=dst: jlax.convert_element_type(v, NUMPY[dst]), [x])


def test_conversions_match_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    run_cases(client, one_device, conversion_cases(np.random.default_rng([SEED, 2])))


def kept_by_reshape(shape: Sequence[int], new_shape: Sequence[int]) -> List[int]:
    """The dimensions a cut of which a reshape keeps (atoll's rule): where every size is
    positive, the dimension that leads its group (the first bigger than 1 among the runs of
    dimensions whose products the reshape maps onto each other), when the group keeps a
    result dimension bigger than 1; without elements, d where dimensions 0 to d stay as
    they are."""
    if min(list(shape) + list(new_shape) + [1]) <= 0:
        return [d for d in range(len(shape))
                if d < len(new_shape) and list(shape[:d + 1]) == list(new_shape[:d + 1])]
    kept, i, j = [], 0, 0
    while i < len(shape) or j < len(new_shape):
        first_i, first_j = i, j
        size_in = shape[i] if i < len(shape) else 1
        size_out = new_shape[j] if j < len(new_shape) else 1
        i, j = min(i + 1, len(shape)), min(j + 1, len(new_shape))
        while size_in != size_out:
            if size_in < size_out:
                size_in, i = size_in * shape[i], i + 1
            else:
                size_out, j = size_out * new_shape[j], j + 1
        leads = [d for d in range(first_i, i) if shape[d] > 1][:1]
        if leads and any(new_shape[e] > 1 for e in range(first_j, j)):
            kept += leads
    return kept


def layout_cases(rng: np.random.Generator, cases: Iterable[int] = range(CASES * 2),
                 even: bool = False) -> Iterator[Case]:
    for case in cases:
        dtype = ALL[case % len(ALL)]
        shape = draw_dims(rng, 5, 1, 3, even)
        x = draw(rng, dtype, shape)
        rank = len(shape)
        perm = [int(p) for p in rng.permutation(rank)]
        start = [int(rng.integers(0, s + 1)) for s in shape]
        limit = [int(rng.integers(b, s + 1)) for b, s in zip(start, shape)]
        strides = [int(rng.integers(1, 3)) for _ in shape]
        dims = sorted(int(d) for d in rng.choice(rank, rng.integers(0, rank + 1), replace=False))
        new_shape = [int(np.prod(shape))] if case % 2 else list(shape[::-1])
        bshape = [int(s) for s in rng.integers(1, 4, 1)] + list(shape)
        sliced = [d for d in range(rank) if (start[d], limit[d], strides[d]) != (0, shape[d], 1)]
        cases_ = [
            ("transpose", lambda v: lax.transpose(v, perm), lambda v: jlax.transpose(v, perm), ()),
            ("slice", lambda v: lax.slice(v, start, limit, strides),
             lambda v: jlax.slice(v, start, limit, strides), sliced),
            ("rev", lambda v: lax.rev(v, dims), lambda v: jlax.rev(v, dims), dims),
            ("broadcast_in_dim", lambda v: lax.broadcast_in_dim(v, bshape, range(1, rank + 1)),
             lambda v: jlax.broadcast_in_dim(v, bshape, tuple(range(1, rank + 1))), ()),
            ("concatenate", lambda v: lax.concatenate([v, v], rank - 1),
             lambda v: jlax.concatenate([v, v], rank - 1), (rank - 1,)),
            ("expand_dims", lambda v: lax.expand_dims(v, [0]), lambda v: jlax.expand_dims(v, [0]),
             ()),
        ]
        if int(np.prod(shape)) == int(np.prod(new_shape)):
            kept = kept_by_reshape(shape, new_shape)
            cases_.append(("reshape", lambda v: lax.reshape(v, new_shape),
                           lambda v: jlax.reshape(v, new_shape),
                           [d for d in range(rank) if d not in kept]))
        for what, ours, theirs, whole in cases_:
            yield Case(f"{what} {dtype}{list(shape)} case {case}", ours, theirs, [x],
                       whole=names(*whole))


def test_layout_primitives_match_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    run_cases(client, one_device, layout_cases(np.random.default_rng([SEED, 3])))


def pad_select_clamp_iota_cases(rng: np.random.Generator, cases: Iterable[int] = range(CASES),
                                even: bool = False) -> Iterator[Case]:
    for case in cases:
        dtype = NUMERIC[case % len(NUMERIC)]
        shape = draw_dims(rng, 5, 1, 2, even)
        x, lo, hi = (draw(rng, dtype, shape) for _ in range(3))
        value = draw(rng, dtype, ())
        config = [(int(rng.integers(-1, 3)), int(rng.integers(-1, 3)), int(rng.integers(0, 2)))
                  for _ in shape]
        config = [(max(l, -s // 2), max(h, -s // 2), i) for (l, h, i), s in zip(config, shape)]
        padded = [d for d, c in enumerate(config) if c != (0, 0, 0)]
        yield Case(f"pad {dtype}{list(shape)} {config}", lambda v, p: lax.pad(v, p, config),
                   lambda v, p: jlax.pad(v, p, config), [x, value], whole=names(*padded))
        which = draw(rng, "bool", shape)
        yield Case(f"select_n {dtype}{list(shape)}", lax.select_n, jlax.select_n, [which, x, lo])
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
        yield Case(f"clamp {dtype}{list(shape)}", lax.clamp, jlax.clamp, [lo, x, hi])
        dim = int(rng.integers(0, len(shape)))
        yield Case(f"iota {dtype}{list(shape)} dimension {dim}",
                   lambda v: lax.broadcasted_iota(dtype, shape, dim),
                   lambda v: jlax.broadcasted_iota(NUMPY[dtype], shape, dim), [x])


def test_pad_select_clamp_iota_match_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    run_cases(client, one_device, pad_select_clamp_iota_cases(np.random.default_rng([SEED, 4])))


# name: atoll's, JAX's, dtypes, the all-reduce that completes it over a cut axis (or None)
REDUCTIONS = [("reduce_sum", lax.reduce_sum, jlax.reduce_sum, ["f32", "f64"], "sum"),
              ("reduce_max", lax.reduce_max, jlax.reduce_max, NUMERIC, "max"),
              ("reduce_min", lax.reduce_min, jlax.reduce_min, NUMERIC, "min"),
              ("reduce_prod", lax.reduce_prod, jlax.reduce_prod, ["i32", "i64", "u32"], None),
              ("reduce_and", lax.reduce_and, jlax.reduce_and, ["bool"] + INTS, None),
              ("reduce_or", lax.reduce_or, jlax.reduce_or, ["bool"] + INTS, None)]


def reduction_cases(rng: np.random.Generator, cases: Iterable[int] = range(CASES * 2),
                    even: bool = False) -> Iterator[Case]:
    for case in cases:
        name, ours, theirs, dtypes, completion = REDUCTIONS[case % len(REDUCTIONS)]
        dtype = dtypes[rng.integers(len(dtypes))]
        shape = draw_dims(rng, 5, 1, 3, even)
        axes = sorted(int(a) for a in rng.choice(len(shape), rng.integers(1, len(shape) + 1),
                                                 replace=False))
        x = draw(rng, dtype, shape)
        check = None
        if name == "reduce_sum":  # in another order than XLA's: finite values, within rounding
            x = np.nan_to_num(x, posinf=9, neginf=-9).clip(-9, 9)
            check = close(1e-5, 1e-3) if dtype == "f32" else close(1e-12, 1e-11)
        yield Case(f"{name} {dtype}{list(shape)} axes {axes}",
                   lambda v, ours=ours: ours(v, axes), lambda v, theirs=theirs: theirs(v, axes),
                   [x], check=check, partial={f"d{a}": completion for a in axes})
        if dtype in NUMERIC:
            axis = axes[0]
            for arg, jarg in ((lax.argmax, jlax.argmax), (lax.argmin, jlax.argmin)):
                # An empty axis: jax refuses too, as there is no position to give.
                yield Case(f"{arg.__name__} {dtype}{list(shape)} axis {axis}",
                           lambda v, arg=arg: arg(v, axis, np.int32),
                           lambda v, jarg=jarg: jarg(v, axis, np.int32), [x],
                           whole=names(axis),
                           refused=f"axis {axis} is empty" if shape[axis] == 0 else None)


def test_reductions_match_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    run_cases(client, one_device, reduction_cases(np.random.default_rng([SEED, 5])))


def dot_close(dtype: str) -> Callable[[np.ndarray, np.ndarray, str], None]:
    """Sums in another order: within k ulps of the largest product, relative to it."""
    def check(got: np.ndarray, want: np.ndarray, what: str) -> None:
        scale = np.maximum(np.abs(want.astype(np.float64)), 1e-30)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol={"bf16": 2e-2, "f32": 1e-5, "f64": 1e-12}[dtype],
                                   atol=float(scale.max(initial=0.0)) * 1e-6, err_msg=what)
    return check


def dot_general_cases(rng: np.random.Generator, cases: Iterable[int] = range(CASES * 2),
                      even: bool = False) -> Iterator[Case]:
    """Batched and plain; on cut operands the batch and free dimensions keep their cut and a
    cut contracting dimension leaves partial sums, completed by all_reduce_sum."""
    for case in cases:
        dtype = ["f32", "f64", "i32", "i64", "bf16"][case % 5]
        b, m, k, n = draw_dims(rng, 6, 4, 4, even)
        batched = case % 3 != 0
        lhs_shape = (b, m, k) if batched else (m, k)
        rhs_shape = (b, n, k) if batched else (k, n)
        x = draw(rng, dtype, lhs_shape)
        y = draw(rng, dtype, rhs_shape)
        if dtype in FLOATS:  # finite values: inf * 0 order effects are not what is tested
            x = np.nan_to_num(x.astype(np.float32), posinf=3, neginf=-3).astype(NUMPY[dtype])
            y = np.nan_to_num(y.astype(np.float32), posinf=3, neginf=-3).astype(NUMPY[dtype])
        dims = (((2,), (2,)), ((0,), (0,))) if batched else (((1,), (0,)), ((), ()))
        yield Case(f"dot_general {dtype} {lhs_shape} x {rhs_shape}",
                   lambda p, q, dims=dims: lax.dot_general(p, q, dims),
                   lambda p, q, dims=dims: jlax.dot_general(p, q, dims), [x, y],
                   check=None if dtype in INTS else dot_close(dtype),
                   dims=[("b", "m", "k"), ("b", "n", "k")] if batched else [("m", "k"),
                                                                              ("k", "n")],
                   partial={"k": "sum"})
    # preferred_element_type: i8 operands accumulate in i32, as JAX does.
    x = draw(rng, "i8", (4, 4) if even else (3, 4))
    y = draw(rng, "i8", (4, 2))
    dims = (((1,), (0,)), ((), ()))
    yield Case("dot_general i8 -> i32",
               lambda p, q: lax.dot_general(p, q, dims, preferred_element_type=np.int32),
               lambda p, q: jlax.dot_general(p, q, dims, preferred_element_type=np.int32),
               [x, y], dims=[("m", "k"), ("k", "n")], partial={"k": "sum"})


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


def test_dot_general_matches_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    run_cases(client, one_device, dot_general_cases(np.random.default_rng([SEED, 6])))


def integer_division_cases(even: bool = False) -> Iterator[Case]:
    """rem by zero and MIN % -1, where C++ would trap."""
    for dtype in SIGNED:
        info = np.iinfo(NUMPY[dtype])
        x = np.array([7, -7, info.min, info.min, 5, -9], NUMPY[dtype])
        y = np.array([0, 0, -1, 0, 3, 4], NUMPY[dtype])
        yield Case(f"rem {dtype} edges", lax.rem, jlax.rem, [x, y])


def test_integer_division_edges_match_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    run_cases(client, one_device, integer_division_cases())


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
    batched = SimpleNamespace(offset_dims=(), collapsed_slice_dims=(1,), start_index_map=(1,),
                              operand_batching_dims=(0,), start_indices_batching_dims=(0,))
    refused(lambda t, i: lax.gather(t, i, batched, (1, 1)), [atoll.f32[3, 4], atoll.i32[2, 1]],
            "gather", "operand batching dimension 0 has size 3",
            "indices batching dimension 0 has size 2")
    refused(lambda t, i: lax.gather(t, i, batched, (2, 1)), [atoll.f32[3, 4], atoll.i32[3, 1]],
            "gather", "slice_sizes[0] must be 1")
    lopsided = SimpleNamespace(**{**vars(batched), "start_indices_batching_dims": ()})
    refused(lambda t, i: lax.gather(t, i, lopsided, (1, 1)), [atoll.f32[3, 4], atoll.i32[3, 1]],
            "gather", "must be as many")
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


def integer_pow_cumulative_bitcast_cases(rng: np.random.Generator,
                                         cases: Iterable[int] = range(CASES),
                                         even: bool = False) -> Iterator[Case]:
    for case in cases:
        dtype = ["f32", "f64", "i32", "i64", "u8"][case % 5]
        shape = draw_dims(rng, 5, 1, 3, even)
        x = draw(rng, dtype, shape)
        y = int(rng.integers(-3 if dtype in FLOATS else 0, 7))
        yield Case(f"integer_pow {dtype}{list(shape)} ^ {y}", lambda v, y=y: lax.integer_pow(v, y),
                   lambda v, y=y: jlax.integer_pow(v, y), [x])
        axis = int(rng.integers(0, len(shape)))
        reverse = bool(rng.integers(0, 2))
        for name in ("cumsum", "cumprod", "cummax", "cummin"):
            v = x if dtype in INTS or name in ("cummax", "cummin") else \
                np.nan_to_num(x.astype(np.float64), posinf=9, neginf=-9).clip(-3, 3).astype(x.dtype)
            theirs, ours = getattr(jlax, name), getattr(lax, name)
            # XLA may associate float sums and products otherwise.
            check = close(1e-5 if dtype == "f32" else 1e-12, 1e-6) if (
                dtype in FLOATS and name in ("cumsum", "cumprod")) else None
            yield Case(f"{name} {dtype}{list(shape)} axis {axis} reverse {reverse}",
                       lambda u, ours=ours: ours(u, axis, reverse),
                       lambda u, theirs=theirs: theirs(u, axis, reverse), [v], check=check,
                       whole=names(axis))
    for src, dst in (("f32", "i32"), ("f32", "u32"), ("i64", "f64"), ("u32", "f32")):
        x = draw(rng, src, (6,) if even else (5,))
        yield Case(f"bitcast {src} -> {dst}", lambda v, dst=dst: lax.bitcast_convert_type(v, dst),
                   lambda v, dst=dst: jlax.bitcast_convert_type(v, NUMPY[dst]), [x],
                   check=same_bytes)


def test_integer_pow_cumulative_and_bitcast_match_jax(client: atoll.Client,
                                                      one_device: atoll.Slice) -> None:
    run_cases(client, one_device,
              integer_pow_cumulative_bitcast_cases(np.random.default_rng([SEED, 8])))


# cumlogsumexp's ulp bound per dtype (as logsumexp_ulps counts them). atoll folds logaddexp
# along the axis in order and XLA's reduce_window associates the steps its own way, with its
# own exp and log1p; bf16 and f16 are rounded once from f32 by atoll, at every step by XLA.
# The worst of 360 draws (3 other seeds) was 1 ulp in every dtype.
CUMLOGSUMEXP_ULPS = {"f32": 2, "f64": 2, "bf16": 2, "f16": 2}


def logsumexp_ulps(ulps: float) -> Callable[[np.ndarray, np.ndarray, str], None]:
    """A Case.check in ulps of the result, or of 1 where the result is smaller: a logaddexp
    whose result is near 0 had a larger term within log 2 of it, whose rounding it keeps."""
    def check(got: np.ndarray, want: np.ndarray, what: str) -> None:
        assert got.shape == want.shape and got.dtype == want.dtype, (
            f"{what}: {got.dtype}{got.shape}, JAX {want.dtype}{want.shape}")
        tiny = float(ml_dtypes.finfo(want.dtype).tiny)  # where ulp_distance's scale stops
        scale = np.floor(np.log2(np.maximum(np.abs(want.astype(np.float64)), tiny)))
        d = ulp_distance(got, want) * np.exp2(np.fmin(scale, 0))  # (NaN: 0)
        worst = float(d.max()) if d.size else 0.0
        assert worst <= ulps, (f"{what}: {worst} ulps from JAX (bound {ulps})\n"
                               f"atoll {got.ravel()[:8]}\nJAX   {want.ravel()[:8]}")
    return check


def cumlogsumexp_cases(rng: np.random.Generator, cases: Iterable[int] = range(CASES),
                       even: bool = False) -> Iterator[Case]:
    """Every float dtype, shapes of rank 1 to 3 with sizes 0 to 5, NaN and infinities mixed
    in (draw), each axis either way."""
    for case in cases:
        dtype = FLOATS[case % len(FLOATS)]
        shape = draw_dims(rng, 6, 1, 3, even)
        x = draw(rng, dtype, shape)
        axis = int(rng.integers(0, len(shape)))
        reverse = bool(rng.integers(0, 2))
        yield Case(f"cumlogsumexp {dtype}{list(shape)} axis {axis} reverse {reverse}",
                   lambda v, a=axis, r=reverse: lax.cumlogsumexp(v, a, r),
                   lambda v, a=axis, r=reverse: jlax.cumlogsumexp(v, a, r), [x],
                   check=logsumexp_ulps(CUMLOGSUMEXP_ULPS[dtype]), whole=names(axis))


def test_cumlogsumexp_matches_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    rng = np.random.default_rng([SEED, 31])
    assert run_cases(client, one_device, cumlogsumexp_cases(rng)) == CASES
    # The edge cases in one row each way: -inf adds nothing, +inf wins, NaN stays.
    edges = np.array([[-np.inf, -np.inf, 0.5, np.inf, -2.0, np.nan, 1.0],
                      [-np.inf, 3.0, -np.inf, 88.0, 89.0, -1e4, 0.0]], np.float32)
    run_cases(client, one_device, [Case(f"cumlogsumexp edges reverse {r}",
                                        lambda v, r=r: lax.cumlogsumexp(v, 1, r),
                                        lambda v, r=r: jlax.cumlogsumexp(v, 1, r), [edges], ulps=1)
                                   for r in (False, True)])
    # A cut axis is refused by name (each device would scan its block alone); another cut
    # dimension keeps its cut.
    two = client.slice(2)
    split = atoll.f32[4, 6].split(0)
    with pytest.raises(atoll.InvalidArgument, match="axis 0 is cut along mesh axis 0"):
        client.function(two, split)(lambda a: lax.cumlogsumexp(a, 0))
    x = rng.standard_normal((4, 6)).astype(np.float32)
    got = np.asarray(client.run(client.function(two, split)(
        lambda a: lax.cumlogsumexp(a, 1, True)), x).result(timeout=60))
    logsumexp_ulps(CUMLOGSUMEXP_ULPS["f32"])(
        got, np.asarray(jax.jit(lambda a: jlax.cumlogsumexp(a, 1, True))(x)),
        "cumlogsumexp along a whole axis of a cut operand")
    with pytest.raises(atoll.InvalidArgument, match="cumlogsumexp takes"):
        client.function(one_device, atoll.i32[3])(lambda a: lax.cumlogsumexp(a, 0))


def test_cumlogsumexp_grad_matches_jax_and_finite_differences(client: atoll.Client) -> None:
    """Grad's rule (both directions, cotangents of both signs from the loss's weights) against
    jax.grad in f32 and central finite differences in f64 (test_lax_grad.py's check)."""
    from test_lax_grad import check_grads  # it imports this module: not at the top
    rng = np.random.default_rng([SEED, 32])
    x, y = rng.uniform(-3, 3, (3, 5)), rng.uniform(-3, 3, (3, 5))
    check_grads(client, "cumlogsumexp", lambda l, a, b: l.add(
        l.cumlogsumexp(a, 1), l.mul(l.cumlogsumexp(b, 0, reverse=True), a)), x, y, rng)


def dynamic_slice_cases(rng: np.random.Generator, cases: Iterable[int] = range(CASES),
                        even: bool = False) -> Iterator[Case]:
    for case in cases:
        dtype = ALL[case % len(ALL)]
        shape = draw_dims(rng, 6, 1, 3, even)
        x = draw(rng, dtype, shape)
        sizes = [int(rng.integers(0, s + 1)) for s in shape]
        # Starts in and out of range, negative ones too: jax clamps them.
        starts = [np.array(rng.integers(-3, s + 3), np.int32) for s in shape]
        update = draw(rng, dtype, tuple(sizes))
        at = [int(s) for s in starts]
        part = [d for d in range(len(shape)) if sizes[d] != shape[d]]
        if 0 not in sizes:
            yield Case(f"dynamic_slice {dtype}{list(shape)} {sizes} at {at}",
                       lambda v, *s: lax.dynamic_slice(v, s, sizes),
                       lambda v, *s: jlax.dynamic_slice(v, s, sizes), [x, *starts],
                       whole=names(*part))
        if 0 not in update.shape:
            # The update's dimensions that x holds whole are cut alike; a cut of the others
            # (where the update writes part of x) is refused.
            update_dims = tuple(f"d{d}" if d not in part else f"u{d}" for d in range(len(shape)))
            yield Case(f"dynamic_update_slice {dtype}{list(shape)} at {at}",
                       lambda v, u, *s: lax.dynamic_update_slice(v, u, s),
                       lambda v, u, *s: jlax.dynamic_update_slice(v, u, s),
                       [x, update, *starts],
                       dims=[tuple(f"d{d}" for d in range(len(shape))), update_dims] +
                       [()] * len(starts),
                       whole=names(*part) | {f"u{d}" for d in part})


def test_dynamic_slices_clamp_as_jax_does(client: atoll.Client, one_device: atoll.Slice) -> None:
    run_cases(client, one_device, dynamic_slice_cases(np.random.default_rng([SEED, 9])))


def gather_scatter_cases(rng: np.random.Generator, cases: Iterable[int] = range(CASES),
                         even: bool = False) -> Iterator[Case]:
    """Embedding lookups (rows by id) and windows at 2-D starts, in clip and fill modes, with
    indices in and out of range (negative ones too); scatter, scatter-add/mul/min/max with
    repeated indices, in clip and drop modes. On cut operands: the indexed dimensions must
    be whole, and so must a scatter's indices (each device would update its replica of the
    operand with its block of the updates); a gather's indices may be cut on their batch."""
    modes = [jlax.GatherScatterMode.CLIP, jlax.GatherScatterMode.FILL_OR_DROP]
    # atoll's scatter takes replicated operands only (a cut of the window dimensions would
    # do, but the rule asks for the whole).
    scatter_whole = frozenset({"r", "k", "w"})
    for case in cases:
        dtype = ALL[case % len(ALL)]
        mode = modes[case % 2]
        width, k = draw_dims(rng, 6, 2, 2, even)
        rows = int(rng.integers(1, 6))  # a row to gather: jax refuses a slice of 1 from 0
        table = draw(rng, dtype, (rows, width))
        ids = rng.integers(-2, rows + 2, (k, 1)).astype(np.int32)
        rows_dims = jlax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                                start_index_map=(0,))
        yield Case(f"gather rows {dtype} {mode}",
                   lambda t, i, mode=mode: lax.gather(t, i, rows_dims, (1, width), mode=mode),
                   lambda t, i, mode=mode: jlax.gather(t, i, rows_dims, (1, width), mode=mode),
                   [table, ids], dims=[("r", "w"), ("k", None)],
                   # atoll's gather takes a replicated operand only (a cut of its offset
                   # dimensions would do, but the rule asks for the whole).
                   whole=frozenset({"r", "w"}))
        # Windows of 2x2 at 2-D starts.
        grid = draw(rng, dtype, (4, 6) if even else (4, 5))
        starts = rng.integers(-1, 5, (k, 2)).astype(np.int64)
        window_dims = jlax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                                  start_index_map=(0, 1))
        yield Case(f"gather windows {dtype} {mode}",
                   lambda g, s, mode=mode: lax.gather(g, s, window_dims, (2, 2), mode=mode),
                   lambda g, s, mode=mode: jlax.gather(g, s, window_dims, (2, 2), mode=mode),
                   [grid, starts], dims=[("g0", "g1"), ("k", None)],
                   whole=frozenset({"g0", "g1"}))
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
            yield Case(f"{name} {dtype} {mode}",
                       lambda t, i, u, ours=ours, mode=mode: ours(t, i, u, scatter_dims,
                                                                  mode=mode),
                       lambda t, i, u, theirs=theirs, mode=mode: theirs(t, i, u, scatter_dims,
                                                                        mode=mode),
                       [table, ids, updates], dims=[("r", "w"), ("k", None), ("k", "w")],
                       whole=scatter_whole)
        yield from batched_gather_scatter_cases(rng, dtype, mode, even)
    # Float scatter-add and scatter at distinct ids: no order to disagree on.
    table = draw(rng, "f32", (6, 4) if even else (6, 3))
    ids = rng.permutation(8)[:4].reshape(4, 1).astype(np.int32) - 1
    updates = draw(rng, "f32", (4, table.shape[1]))
    dims = jlax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
    for name in ("scatter", "scatter_add", "scatter_mul"):
        theirs, ours = getattr(jlax, name), getattr(lax, name)
        for mode in modes:
            yield Case(f"{name} f32 distinct ids {mode}",
                       lambda t, i, u, ours=ours, mode=mode: ours(t, i, u, dims, mode=mode),
                       lambda t, i, u, theirs=theirs, mode=mode: theirs(t, i, u, dims,
                                                                        mode=mode),
                       [table, ids, updates], dims=[("r", "w"), ("k", None), ("k", "w")],
                       whole=scatter_whole)


def batched_gather_scatter_cases(rng: np.random.Generator, dtype: str, mode: Any,
                                 even: bool) -> Iterator[Case]:
    """Batching dimensions (what vmap of indexing and of dynamic_slice makes): the batch
    leading the operand and either leading or following the indices' other dimension.
    Refused on cut operands: the batch becomes an indexed dimension, and the indices must be
    whole."""
    b, n = draw_dims(rng, 5, 2, 2, even)
    n = max(n, 1)  # jax refuses a slice of 1 from 0
    k = int(rng.integers(1, 4)) * (2 if even else 1)
    width = 2 if even else int(rng.integers(1, 4))
    x = draw(rng, dtype, (b, n, width))
    for batch_first in (True, False):
        shape = (b, k, 1) if batch_first else (k, b, 1)
        ids = rng.integers(-2, n + 2, shape).astype(np.int32)
        ib = 0 if batch_first else 1
        ids_dims = ("b", "k", None) if batch_first else ("k", "b", None)
        # Rows of width along dimension 1, one batch element each: out [b, k, w] or [k, b, w].
        gdims = jlax.GatherDimensionNumbers(
            offset_dims=(2,), collapsed_slice_dims=(1,), start_index_map=(1,),
            operand_batching_dims=(0,), start_indices_batching_dims=(ib,))
        yield Case(f"gather batched rows {dtype} {mode} batch {'first' if batch_first else 'second'}",
                   lambda t, i, d=gdims, mode=mode: lax.gather(t, i, d, (1, 1, width), mode=mode),
                   lambda t, i, d=gdims, mode=mode: jlax.gather(t, i, d, (1, 1, width),
                                                                mode=mode),
                   [x, ids], dims=[("b", "n", "w"), ids_dims],
                   whole=frozenset({"b", "n", "w", "k"}))
        sdims = jlax.ScatterDimensionNumbers(
            update_window_dims=(2,), inserted_window_dims=(1,), scatter_dims_to_operand_dims=(1,),
            operand_batching_dims=(0,), scatter_indices_batching_dims=(ib,))
        updates = draw(rng, dtype, shape[:2] + (width,))
        for name in ("scatter_min", "scatter_max") + (() if dtype == "bool" else ("scatter_add",)):
            if dtype in FLOATS and name == "scatter_add":
                continue  # the order of repeated updates: compared on integers
            theirs, ours = getattr(jlax, name), getattr(lax, name)
            yield Case(f"{name} batched {dtype} {mode} batch {'first' if batch_first else 'second'}",
                       lambda t, i, u, ours=ours, d=sdims, mode=mode: ours(t, i, u, d, mode=mode),
                       lambda t, i, u, theirs=theirs, d=sdims, mode=mode: theirs(t, i, u, d,
                                                                                 mode=mode),
                       [x, ids, updates], dims=[("b", "n", "w"), ids_dims, ids_dims[:2] + ("w",)],
                       whole=frozenset({"b", "n", "w", "k"}))


def test_gather_and_scatter_match_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    run_cases(client, one_device, gather_scatter_cases(np.random.default_rng([SEED, 10])))


def sort_top_k_cases(rng: np.random.Generator, cases: Iterable[int] = range(CASES),
                     even: bool = False) -> Iterator[Case]:
    for case in cases:
        dtype = NUMERIC[case % len(NUMERIC)]
        shape = draw_dims(rng, 6, 1, 3, even)
        dim = int(rng.integers(0, len(shape)))
        keys = draw(rng, dtype, shape)
        if keys.size:  # ties
            keys = np.where(rng.random(shape) < 0.3, keys.ravel()[0], keys).astype(keys.dtype)
        payload = draw(rng, "i32", shape)
        for i, what in enumerate(("keys", "payload by")):
            yield Case(f"sort {what} {dtype}{list(shape)} dim {dim}",
                       lambda a, b, i=i: lax.sort((a, b), dim)[i],
                       lambda a, b, i=i: jlax.sort((a, b), dimension=dim, num_keys=1)[i],
                       [keys, payload], whole=names(dim))
    for case in range(len(cases) // 2):
        dtype = ["f32", "f64"][case % 2]
        n = int(rng.integers(1, 8))
        x = np.nan_to_num(draw(rng, dtype, (4, 2 * n) if even else (3, n)), nan=0.5)
        k = int(rng.integers(1, n + 1))
        for i, what in enumerate(("values", "indices")):
            yield Case(f"top_k {what} {dtype} k={k}", lambda v, i=i: lax.top_k(v, k)[i],
                       lambda v, i=i: jlax.top_k(v, k)[i], [x], whole=names(1))
    # Signed zeros: XLA's top_k takes +0 before -0 (a total order), where sort keeps them
    # in place.
    zeros = np.array([[-0.0, 0.0, 1.0, -0.0], [0.0, -0.0, -0.0, 0.0]], np.float32)
    for i, what in enumerate(("values", "indices")):
        yield Case(f"top_k {what} of signed zeros", lambda v, i=i: lax.top_k(v, 3)[i],
                   lambda v, i=i: jlax.top_k(v, 3)[i], [zeros], whole=names(1))


def test_sort_and_top_k_match_jax(client: atoll.Client, one_device: atoll.Slice) -> None:
    run_cases(client, one_device, sort_top_k_cases(np.random.default_rng([SEED, 11])))


# The generators test_lax_sharded.py also runs on a 2-device slice and a 2x2 mesh, each
# drawing even sizes (so that they divide): name -> (f(rng, case numbers) -> cases, cases
# per ATOLL_LAX_MESH_CASES). A new primitive's generator joins here, so that its sharded
# draws need no other file.
SHARDED_GENERATORS: Dict[str, Tuple[Callable[[np.random.Generator, range], Iterable[Case]],
                                    int]] = {
    **{f"binary {n}": (lambda rng, c, n=n: binary_cases(n, rng, c, True), 1)
       for n in sorted(BINARY)},
    **{f"unary {n}": (lambda rng, c, n=n: unary_cases(n, rng, c, True), 1) for n in sorted(UNARY)},
    "conversions": (lambda rng, c: conversion_cases(rng, c, True), 4),
    "layout": (lambda rng, c: layout_cases(rng, c, True), 2),
    "pad select_n clamp iota": (lambda rng, c: pad_select_clamp_iota_cases(rng, c, True), 2),
    "reductions argmax argmin": (lambda rng, c: reduction_cases(rng, c, True), 3),
    "dot_general": (lambda rng, c: dot_general_cases(rng, c, True), 2),
    "integer division edges": (lambda rng, c: integer_division_cases(True), 1),
    "integer_pow cumulative bitcast": (
        lambda rng, c: integer_pow_cumulative_bitcast_cases(rng, c, True), 2),
    "cumlogsumexp": (lambda rng, c: cumlogsumexp_cases(rng, c, True), 3),
    "dynamic_slice dynamic_update_slice": (lambda rng, c: dynamic_slice_cases(rng, c, True), 3),
    "gather scatter": (lambda rng, c: gather_scatter_cases(rng, c, True), 2),
    "sort top_k": (lambda rng, c: sort_top_k_cases(rng, c, True), 2),
}
