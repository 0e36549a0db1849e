"""atoll.lax on sharded operands (shard_map semantics: each device computes on its block)
against jax.lax on CPU, the oracle. test_lax.py's seeded generators (every primitive, its
dtypes, size-0 dimensions, NaN and the other edges) run here on a 2-device slice with one
dimension of the arguments cut and on a 2x2 mesh with two cut (drawn per case, sizes even so
that they divide): where the primitive keeps the cut, atoll gives the global result JAX
computes (a reduction over a cut dimension leaves partial results, completed here by the
all-reduce a user would add); where it would need another shard's data, the function is
refused when it is built, naming the mesh axis. Then a few curated compositions.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax import lax as jlax  # noqa: E402

import atoll  # noqa: E402
from atoll import lax, ops  # noqa: E402
from atoll._types import dtype_of_numpy  # noqa: E402
import test_lax as gen  # noqa: E402
import test_lax_control as ctl  # noqa: E402
from test_lax import SEED, Case, check_equal, draw  # noqa: E402

jax.config.update("jax_enable_x64", True)

MESHES = [(2,), (2, 2)]
MESH_IDS = ["2 devices", "2x2 mesh"]
# Cases per generator and mesh (elementwise tables: per primitive); the two meshes draw
# different case numbers, so that together they cycle through more dtypes.
MESH_CASES = int(os.environ.get("ATOLL_LAX_MESH_CASES", "2"))
COMPLETE = {"sum": ops.all_reduce_sum, "max": ops.all_reduce_max, "min": ops.all_reduce_min}


def cases_for(mesh: Tuple[int, ...], count: int) -> range:
    first = count * MESHES.index(mesh)
    return range(first, first + count)


# A generator by name: f(rng, case numbers) -> cases, and its number of cases per
# MESH_CASES: test_lax.py's (SHARDED_GENERATORS) and test_lax_control.py's.
GENERATORS: Dict[str, Tuple[Callable[[np.random.Generator, range], Iterable[Case]], int]] = {
    **gen.SHARDED_GENERATORS,
    **{f"reduce_window_{k}": (lambda rng, c, k=k: ctl.reduce_window_cases(k, rng, c, True), 2)
       for k in ("sum", "max", "min")},
    "select_and_scatter_add": (lambda rng, c: ctl.select_and_scatter_add_cases(rng, c, True), 2),
    "conv_general_dilated": (lambda rng, c: ctl.conv_cases(rng, c, True), 3),
    **{f"scan {d}": (lambda rng, c, d=d: ctl.scan_rnn_cases(d == "reversed", rng, c, True), 1)
       for d in ("forward", "reversed")},
    "cond switch": (lambda rng, c: ctl.cond_switch_cases(rng, True), 1),
}


def arg_dims(case: Case) -> List[Tuple[Optional[str], ...]]:
    """The names of each argument's dimensions (Case.dims, or its default)."""
    if case.dims is not None:
        return case.dims
    first = case.args[0].shape
    return [tuple(f"d{d}" for d in range(a.ndim)) if a.shape == first else (None,) * a.ndim
            for a in case.args]


def run_cut(client: atoll.Client, slice_: atoll.Slice, mesh: Tuple[int, ...], case: Case,
            rng: np.random.Generator) -> str:
    """``case`` on ``slice_`` with up to one named dimension cut per mesh axis (drawn among
    those of even size): "ran" (and equal to JAX's global result) or "refused" (naming the
    mesh axis of a dimension the primitive needs whole)."""
    sizes = {n: s for a, ds in zip(case.args, arg_dims(case)) for n, s in zip(ds, a.shape)
             if n is not None}
    candidates = sorted(n for n, s in sizes.items()
                        if s % 2 == 0 and case.partial.get(n, "keeps") is not None)
    kept = [n for n in candidates if n not in case.whole]
    if kept and rng.random() < 0.5:  # half the cases among the cuts the primitive keeps
        candidates = kept
    chosen = [str(n) for n in rng.permutation(candidates)[:len(mesh)]]
    axis_of = {n: a for a, n in enumerate(chosen)}
    cuts = [[axis_of.get(n) if n is not None else None for n in ds] for ds in arg_dims(case)]
    completions = [(COMPLETE[str(case.partial[n])], axis_of[n]) for n in chosen
                   if n in case.partial]

    def ours(*a: Any) -> Any:
        out = case.ours(*a)
        for reduce, axis in completions:
            out = reduce(out, axis)
        return out

    what = f"{case.what} on mesh {mesh}, cut {axis_of}"
    expect = [f"mesh axis {axis_of[n]}" for n in chosen if n in case.whole]
    if expect or case.refused:
        try:
            run(client, slice_, ours, case.args, cuts)
        except atoll.InvalidArgument as e:
            says = expect + ([case.refused] if case.refused else [])
            assert any(re.search(s, str(e)) for s in says), f"{what}: {e} names none of {says}"
            return "refused"
        pytest.fail(f"{what}: ran, though a cut of {chosen} needs another shard's data")
    want = np.asarray(jax.jit(case.theirs)(*case.args))
    case.compare(run(client, slice_, ours, case.args, cuts)[0], want, what)
    return "ran"


@pytest.mark.parametrize("mesh", MESHES, ids=MESH_IDS)
@pytest.mark.parametrize("name", list(GENERATORS))
def test_generated_cases_on_cut_operands_match_jax(client, name: str,
                                                   mesh: Tuple[int, ...]) -> None:
    """test_lax.py's generator ``name`` on the mesh: each case ran and equal to JAX, or
    refused naming the axis where that is what a cut of its dimensions must give."""
    make, scale = GENERATORS[name]
    slice_ = client.mesh(mesh)
    rng = np.random.default_rng([SEED, 403, len(mesh), sum(map(ord, name))])
    cuts = np.random.default_rng([SEED, 404, len(mesh), sum(map(ord, name))])
    outcomes = [run_cut(client, slice_, mesh, case, cuts)
                for case in make(rng, cases_for(mesh, MESH_CASES * scale))]
    assert "ran" in outcomes, f"{name}: every case refused ({len(outcomes)})"


# -- curated compositions ------------------------------------------------------------------------

SHAPE = (4, 6, 3)
DOT = (((2,), (2,)), ((0,), (0,)))

# name: (f(lax, *args), dtype, number of arguments, ulp bound; sums by relative tolerance)
CASES: Dict[str, Tuple[Callable[..., Any], str, int, float]] = {
    "add max": (lambda l, x, y: l.max(l.add(x, y), y), "f32", 2, 0),
    "pow atan2": (lambda l, x, y: l.atan2(l.pow(l.abs(x), y), x), "f64", 2, 4),
    "sin exp": (lambda l, x: l.exp(l.sin(x)), "f32", 1, 2),
    "integers": (lambda l, x, y: l.shift_left(l.bitwise_xor(x, y), l.rem(y, x)), "i32", 2, 0),
    "select_n convert": (lambda l, x, y: l.convert_element_type(
        l.select_n(l.lt(x, y), x, y), np.int64), "f32", 2, 0),
    "broadcast_in_dim": (lambda l, x: l.broadcast_in_dim(x, (4, 6, 2, 3), (0, 1, 3)), "f32", 1, 0),
    "transpose": (lambda l, x: l.transpose(x, (2, 0, 1)), "u8", 1, 0),
    "slice pad rev": (lambda l, x: l.rev(l.pad(l.slice(x, (0, 0, 1), (4, 6, 3)), l.full(
        (), 7, np.int8), [(0, 0, 0), (0, 0, 0), (1, 2, 1)]), (2,)), "i8", 1, 0),
    "concatenate": (lambda l, x, y: l.concatenate([x, y, x], 2), "bool", 2, 0),
    "reduce_max cumsum": (lambda l, x: l.reduce_max(l.cumsum(x, 2), (2,)), "i64", 1, 0),
    "argmax sort": (lambda l, x: l.argmax(l.sort(x, 2), 2, np.int32), "f64", 1, 0),
    "dot_general": (lambda l, x, y: l.dot_general(x, y, DOT), "f64", 2, -1),
    "reduce_window": (lambda l, x: l.reduce_window(x, -np.inf, l.max, (1, 1, 2), (1, 1, 1),
                                                   "SAME"), "f32", 1, 0),
    "scan over the last dimension": (lambda l, x: l.scan(
        lambda c, r: (l.add(c, r), l.mul(c, r)), l.reduce_max(x, (2,)),
        l.transpose(x, (2, 0, 1))), "f64", 1, 4),
}
# On the 2x2 mesh, where the arguments are cut otherwise than (0, 1): dot_general's free
# dimensions must be cut along different mesh axes.
AXES_2X2 = {"dot_general": [(0, 1), (0,)]}


def run(client: atoll.Client, slice_: atoll.Slice, fn: Callable[..., Any],
        args: Sequence[np.ndarray], axes: Sequence[Sequence[Optional[int]]]
        ) -> Tuple[np.ndarray, ...]:
    types = [dtype_of_numpy(a.dtype)[tuple(a.shape)].axes(*cut) for a, cut in zip(args, axes)]
    traced = client.function(slice_, *types)(fn)
    result = client.run(traced, *args).result(timeout=60)
    return tuple(np.asarray(r) for r in result) if isinstance(result, tuple) else (
        np.asarray(result),)


@pytest.mark.parametrize("mesh", [(2,), (2, 2)], ids=["2 devices", "2x2 mesh"])
@pytest.mark.parametrize("name", list(CASES))
def test_primitive_on_cut_operands_matches_jax(client, name: str, mesh: Tuple[int, ...]) -> None:
    fn, dtype, arity, ulps = CASES[name]
    rng = np.random.default_rng([SEED, 401, list(CASES).index(name), len(mesh)])
    args = [draw(rng, dtype, SHAPE) for _ in range(arity)]
    if dtype == "i32":  # shifts by less than the width; no division by zero
        args = [np.where(a == 0, 3, np.abs(a) % 31).astype(np.int32) for a in args]
    if name.startswith("scan") or name == "dot_general":
        args = [rng.standard_normal(SHAPE) for _ in range(arity)]
    axes = [(0,) if len(mesh) == 1 else (0, 1)] * arity
    if len(mesh) == 2:
        axes = AXES_2X2.get(name, axes)
    got = run(client, client.mesh(mesh), lambda *a: fn(lax, *a), args, axes)
    want = jax.jit(lambda *a: fn(jlax, *a))(*args)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        w = np.asarray(w)
        if ulps < 0:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=name)
        else:
            check_equal(g, w, ulps, f"{name} on mesh {mesh}")


def test_a_reduction_over_a_cut_dimension_is_completed_by_its_all_reduce(client) -> None:
    rng = np.random.default_rng([SEED, 402])
    x = rng.standard_normal(SHAPE)
    got = run(client, client.mesh((2,)), lambda v: ops.all_reduce_max(lax.reduce_max(v, (0,))),
              [x], [(0,)])
    check_equal(got[0], np.asarray(jax.jit(lambda v: jlax.reduce_max(v, (0,)))(x)), 0,
                "reduce_max over the cut dimension, completed")


REFUSED = {
    "rev": lambda v: lax.rev(v, (0,)),
    "cumsum": lambda v: lax.cumsum(v, 0),
    "slice": lambda v: lax.slice(v, (1, 0, 0), (3, 6, 3)),
    "pad": lambda v: lax.pad(v, lax.full((), 0.0, np.float32), [(1, 0, 0), (0, 0, 0), (0, 0, 0)]),
    "sort": lambda v: lax.sort(v, 0),
    "reduce_window": lambda v: lax.reduce_window_max(v, (2, 1, 1), (1, 1, 1), "VALID"),
    "scan": lambda v: lax.scan(lambda c, r: (lax.add(c, r), c), lax.full((6, 3), 0.0, np.float32),
                               v),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_primitive_that_needs_other_shards_is_refused_naming_the_axis(client, name) -> None:
    with pytest.raises(atoll.InvalidArgument, match="mesh axis 0"):
        client.function(client.mesh((2,)), atoll.f32[4, 6, 3].split(0))(REFUSED[name])


# (shape, cut of each dimension (mesh axis or None), new shape, mesh): a reshape keeps a cut
# that leads the dimensions it is merged or split with, so each shard's block stays one run
# of elements; the shards' results must make JAX's global one.
RESHAPES = {
    "heads split off a cut model dimension": ((4, 6, 8), (None, None, 0), (4, 6, 4, 2), (2,)),
    "a cut batch merged with the sequence": ((4, 6, 8), (0, None, None), (24, 8), (2,)),
    "a size-1 dimension squeezed before the cut one": ((4, 1, 8), (None, None, 0), (4, 8), (2,)),
    "two cuts, each leading its group": ((4, 6, 8), (0, None, 1), (24, 4, 2), (2, 2)),
}


@pytest.mark.parametrize("name", list(RESHAPES))
def test_a_reshape_keeps_a_cut_that_leads_its_group(client, name: str) -> None:
    shape, cut, new_shape, mesh = RESHAPES[name]
    x = draw(np.random.default_rng([SEED, 405, list(RESHAPES).index(name)]), "f32", shape)
    got = run(client, client.mesh(mesh), lambda v: lax.reshape(v, new_shape), [x], [cut])
    check_equal(got[0], np.asarray(jlax.reshape(x, new_shape)), 0, name)


def test_a_reshape_that_merges_a_cut_behind_another_dimension_is_refused(client) -> None:
    with pytest.raises(atoll.InvalidArgument, match="mesh axis 0.*behind dimension 0"):
        client.function(client.mesh((2,)), atoll.f32[4, 6, 8].axes(None, 0, None))(
            lambda v: lax.reshape(v, (24, 8)))
