"""atoll.jax against jax.jit on CPU, the oracle, on a real cluster: for every primitive that
atoll has, a JAX function using it is lowered through atoll.jax.jit and compared with jax.jit
of the same function (integer, boolean and layout results bit for bit, floats within the
ulp bounds of test_lax.py's tables), in global form and per shard on a 1-device, a 2-device
and a 2x2 slice; collectives per shard; gradients of a transformer block and a scan RNN;
Arrays that stay in the stores; and the refusals, by their messages.
"""

from __future__ import annotations

import os
from typing import Any, Callable, List, Sequence

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax import lax as jlax  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import atoll  # noqa: E402
import atoll.jax as aj  # noqa: E402
from test_lax import (ALL, BINARY, FLOATS, INTS, NUMERIC, NUMPY, SIGNED, UNARY,  # noqa: E402
                      check_equal, draw)

# test_lax.py's bounds, but where values drawn here landed further from XLA's own
# approximation (atoll's kernels are the same; the values differ).
ULPS = {"expm1": 3}

SEED = int(os.environ.get("ATOLL_JAX_SEED", "20261206"))


@pytest.fixture(scope="module")
def jclient(cluster) -> Any:
    with cluster.connect(name="pytest-jax") as c:
        yield c


@pytest.fixture(scope="module")
def one(jclient) -> aj.Mesh:
    return aj.Mesh(jclient, (1,), ("data",))


@pytest.fixture(scope="module")
def two(jclient) -> aj.Mesh:
    return aj.Mesh(jclient, (2,), ("data",))


@pytest.fixture(scope="module")
def grid(jclient) -> aj.Mesh:
    return aj.Mesh(jclient, (2, 2), ("data", "model"))


def outputs(tree: Any) -> List[np.ndarray]:
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def compare(fn: Callable[..., Any], args: Sequence[np.ndarray], mesh: aj.Mesh, ulps: float,
            what: str, in_specs: Any = P(), out_specs: Any = P(), per_shard: bool = False,
            oracle: Callable[..., Any] = None, check_vma: bool = True) -> None:
    """fn through atoll.jax.jit on ``mesh`` against jax.jit (of ``oracle``, by default fn
    itself) on CPU."""
    want = outputs(jax.jit(oracle or fn)(*args))
    lowered = aj.jit(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                     per_shard=per_shard, check_vma=check_vma)
    got = outputs(lowered(*args))
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want)):
        check_equal(g, w, ulps, f"{what} result {i}")


def shape_for(rng: np.random.Generator, rank: int = 2) -> tuple:
    """A shape whose dimensions 0 and 1 divide over 2 devices (for the split forms)."""
    return tuple(int(2 * rng.integers(1, 4)) for _ in range(rank))


# -- elementwise: every row of test_lax's tables, each dtype, one device; then split ------------

@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_primitive_lowers_as_jax(one, two, grid, name: str) -> None:
    _, theirs, dtypes, ulps = BINARY[name]
    rng = np.random.default_rng([SEED, 1, sum(map(ord, name))])
    for dtype in dtypes:
        shape = shape_for(rng)
        x, y = draw(rng, dtype, shape), draw(rng, dtype, shape)
        if name.startswith("shift"):
            bits = np.dtype(NUMPY[dtype]).itemsize * 8
            y = rng.integers(-2, bits + 3, shape).astype(NUMPY[dtype])
        if name == "rem" and dtype in INTS:
            y = np.where(y == 0, np.ones_like(y), y)
        compare(theirs, [x, y], one, ulps, f"{name} {dtype}{list(shape)}")
    # Split: the batch over 2 devices (global form and per shard), and both dimensions over a
    # 2x2 mesh.
    dtype = dtypes[0]
    x, y = draw(rng, dtype, (4, 6)), draw(rng, dtype, (4, 6))
    if name.startswith("shift"):
        y = rng.integers(0, 8, (4, 6)).astype(NUMPY[dtype])
    if name == "rem" and dtype in INTS:
        y = np.where(y == 0, np.ones_like(y), y)
    for mesh, spec in ((two, P("data")), (grid, P("data", "model"))):
        for per_shard in (False, True):
            compare(theirs, [x, y], mesh, ulps, f"{name} {dtype} on {mesh.axis_sizes} "
                    f"{'per shard' if per_shard else 'global'}", in_specs=(spec, spec),
                    out_specs=spec, per_shard=per_shard)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_primitive_lowers_as_jax(one, two, grid, name: str) -> None:
    _, theirs, dtypes, ulps = UNARY[name]
    ulps = max(ulps, ULPS.get(name, 0))
    rng = np.random.default_rng([SEED, 2, sum(map(ord, name))])
    for dtype in dtypes:
        shape = shape_for(rng, int(rng.integers(0, 4)))
        x = draw(rng, dtype, shape)
        compare(theirs, [x], one, ulps, f"{name} {dtype}{list(shape)}")
    x = draw(rng, dtypes[0], (4, 6))
    for mesh, spec in ((two, P("data")), (grid, P("data", "model"))):
        for per_shard in (False, True):
            compare(theirs, [x], mesh, ulps, f"{name} on {mesh.axis_sizes} per_shard={per_shard}",
                    in_specs=spec, out_specs=spec, per_shard=per_shard)


def test_arithmetic_in_every_dtype_jax_takes(one) -> None:
    """add/sub/mul/div/neg/square where atoll's own rows lack the dtype (bf16, f16, i8, u8,
    u32: computed wider and rounded or wrapped as XLA does), integer division by 0 and
    MIN / -1."""
    rng = np.random.default_rng([SEED, 3])
    for dtype in NUMERIC:
        x, y = draw(rng, dtype, (3, 5)), draw(rng, dtype, (3, 5))
        ops = [jlax.add, jlax.sub, jlax.mul, lambda a, b: jlax.neg(a), lambda a, b: a * a]
        if dtype in INTS:
            ops.append(jlax.div)
        elif dtype in FLOATS:
            ops.append(jlax.div)
        for i, op in enumerate(ops):
            compare(op, [x, y], one, 0, f"arithmetic {i} {dtype}")
    for dtype in SIGNED:
        info = np.iinfo(NUMPY[dtype])
        x = np.array([7, -7, info.min, 5, 0], NUMPY[dtype])
        y = np.array([0, 2, -1, -3, 0], NUMPY[dtype])
        compare(jlax.div, [x, y], one, 0, f"div {dtype} edges")


def test_conversions_lower_as_jax(one) -> None:
    rng = np.random.default_rng([SEED, 4])
    for src in ALL:
        x = draw(rng, src, (6,))
        if src in FLOATS:  # in range of every integer (out of range: XLA's own)
            x = np.nan_to_num(x.astype(np.float64), nan=1, posinf=3, neginf=-3).clip(
                -100, 100).astype(x.dtype)
        for dst in ALL:
            if src in FLOATS and dst in ("u8", "u32"):
                xx = np.abs(x)
            else:
                xx = x
            compare(lambda v: jlax.convert_element_type(v, NUMPY[dst]), [xx], one, 0,
                    f"convert {src} -> {dst}")
    for src, dst in (("f32", "i32"), ("f32", "u32"), ("i64", "f64"), ("u32", "f32")):
        x = draw(rng, src, (5,))
        want = np.asarray(jax.jit(lambda v: jlax.bitcast_convert_type(v, NUMPY[dst]))(x))
        got = np.asarray(aj.jit(lambda v: jlax.bitcast_convert_type(v, NUMPY[dst]), mesh=one)(x))
        assert got.tobytes() == want.tobytes(), f"bitcast {src} -> {dst}"
    x = draw(rng, "f32", (7,))
    for bits in ((8, 7), (5, 10)):
        compare(lambda v: jlax.reduce_precision(v, *bits), [x], one, 0, f"reduce_precision {bits}")


# -- layout primitives ---------------------------------------------------------------------------

LAYOUT = {
    "reshape": lambda v: v.reshape(v.shape[0] * v.shape[1], -1),
    "broadcast_in_dim": lambda v: jlax.broadcast_in_dim(v, (2,) + v.shape, (1, 2, 3)),
    "transpose": lambda v: jnp.transpose(v, (2, 0, 1)),
    "squeeze": lambda v: jlax.squeeze(v[:, :1], (1,)),
    "expand_dims": lambda v: jnp.expand_dims(v, (0, 2)),
    "slice": lambda v: jlax.slice(v, (0, 1, 0), (v.shape[0], v.shape[1], v.shape[2]), (1, 2, 1)),
    "split": lambda v: jnp.split(v, [1], axis=2),
    "concatenate": lambda v: jnp.concatenate([v, v[:, :1]], axis=1),
    "pad": lambda v: jlax.pad(v, jnp.zeros((), v.dtype), ((1, -1, 0), (0, 2, 1), (0, 0, 0))),
    "rev": lambda v: jlax.rev(v, (0, 2)),
    "iota": lambda v: jlax.broadcasted_iota(jnp.int32, v.shape, 1) + jnp.zeros(v.shape, jnp.int32),
    "select_n": lambda v: jlax.select_n(jnp.arange(v.size).reshape(v.shape) % 3 == 0, v,
                                        jnp.flip(v, 0)),
    "dynamic_slice": lambda v: jlax.dynamic_slice(v, (jnp.int32(1), jnp.int32(-1), jnp.int32(0)),
                                                  (1, 2, 1)),
    "dynamic_update_slice": lambda v: jlax.dynamic_update_slice(v, v[:1, :1], (1, 2, 0)),
    "gather": lambda v: v[jnp.array([1, 0, 1]), :, jnp.array([0, 1, 0])],
    "scatter": lambda v: v.at[jnp.array([0, 1])].set(v[1]),
    "copy": lambda v: jnp.array(v, copy=True),
    "tile": lambda v: jnp.tile(v, (1, 2, 3)),
    "unstack": lambda v: jnp.unstack(v, axis=1),
    "full_like": lambda v: jnp.zeros_like(v),
}


@pytest.mark.parametrize("name", sorted(LAYOUT))
def test_layout_primitive_lowers_bit_for_bit(one, two, grid, name: str) -> None:
    fn = LAYOUT[name]
    rng = np.random.default_rng([SEED, 5, sum(map(ord, name))])
    for dtype in ALL:
        x = draw(rng, dtype, (4, 4, 2))
        compare(fn, [x], one, 0, f"{name} {dtype}")
    x = draw(rng, "f32", (4, 4, 2))
    for mesh in (two, grid):
        compare(fn, [x], mesh, 0, f"{name} per shard on {mesh.axis_sizes}",
                in_specs=P(), out_specs=P(), per_shard=True)
        # Per shard on blocks of dimension 0; the oracle: the body on each block (vmap), the
        # results joined along dimension 0 as out_specs P("data") says.
        blocks = x.reshape(2, 2, 4, 2)
        per_block = jax.jit(jax.vmap(fn))(blocks)
        want = [np.concatenate(list(np.asarray(b)), axis=0)
                for b in jax.tree_util.tree_leaves(per_block)]
        got = outputs(aj.shard_map(fn, mesh=mesh, in_specs=P("data"), out_specs=P("data"))(x))
        for g, w in zip(got, want):
            check_equal(g, w, 0, f"{name} per shard on blocks, {mesh.axis_sizes}")
        # Global form on a split input: JAX's result, or refused naming the mesh axis and
        # suggesting the per-shard form.
        spec = P("data") if mesh is two else P("data", "model")
        try:
            got = outputs(aj.jit(fn, mesh=mesh, in_specs=spec, out_specs=P())(x))
        except aj.LoweringError as e:
            assert "'data'" in str(e) or "'model'" in str(e), str(e)
            assert "per shard" in str(e), str(e)
            assert "test_jax.py" in str(e), str(e)
        else:
            for g, w in zip(got, outputs(jax.jit(fn)(x))):
                check_equal(g, w, 0, f"{name} global on {spec}")


def test_clamp_and_integer_pow_and_friends(one) -> None:
    rng = np.random.default_rng([SEED, 6])
    for dtype in ("f32", "f64", "i32", "i64", "u8"):
        x = draw(rng, dtype, (3, 4))
        y = draw(rng, dtype, (3, 4))
        lo, hi = np.minimum(x, y), np.maximum(x, y)
        compare(lambda a, b, c: jlax.clamp(b, a, c), [x, lo, hi], one, 0, f"clamp {dtype}")
        compare(lambda a: jlax.clamp(NUMPY[dtype](1), a, NUMPY[dtype](5)), [x], one, 0,
                f"clamp scalars {dtype}")
        for y in (0, 1, 2, 3, 5) + ((-2,) if dtype in FLOATS else ()):
            compare(lambda a: jlax.integer_pow(a, y), [x], one, 0, f"integer_pow {dtype} {y}")


# -- reductions and contractions -------------------------------------------------------------------

REDUCTIONS = {
    "reduce_sum": (lambda v, ax: jnp.sum(v, axis=ax, dtype=v.dtype),
                   ["f32", "f64", "i32", "i64", "u8"]),
    "reduce_max": (lambda v, ax: jnp.max(v, axis=ax), NUMERIC),
    "reduce_min": (lambda v, ax: jnp.min(v, axis=ax), NUMERIC),
    "reduce_prod": (lambda v, ax: jnp.prod(v, axis=ax, dtype=v.dtype), ["i32", "i64", "u32"]),
    "reduce_and": (lambda v, ax: jnp.all(v, axis=ax), ["bool"]),
    "reduce_or": (lambda v, ax: jnp.any(v, axis=ax), ["bool"]),
    "argmax": (lambda v, ax: jnp.argmax(v, axis=ax[0]), NUMERIC),
    "argmin": (lambda v, ax: jnp.argmin(v, axis=ax[0]), NUMERIC),
    "cumsum": (lambda v, ax: jnp.cumsum(v, axis=ax[0]), ["i32", "i64"]),
    "cumprod": (lambda v, ax: jnp.cumprod(v, axis=ax[0]), ["i32"]),
    "cummax": (lambda v, ax: jlax.cummax(v, axis=ax[0]), NUMERIC),
    "cummin": (lambda v, ax: jlax.cummin(v, axis=ax[0], reverse=True), NUMERIC),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_lowers_as_jax(one, two, grid, name: str) -> None:
    fn, dtypes = REDUCTIONS[name]
    rng = np.random.default_rng([SEED, 7, sum(map(ord, name))])
    for dtype in dtypes:
        x = draw(rng, dtype, (4, 6))
        if dtype in FLOATS and name == "reduce_sum":
            x = np.nan_to_num(x.astype(np.float64), posinf=5, neginf=-5).astype(x.dtype)
            for axes in ((0,), (1,), (0, 1)):
                want = np.asarray(jax.jit(lambda v: fn(v, axes))(x))
                got = np.asarray(aj.jit(lambda v: fn(v, axes), mesh=one)(x))
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5,
                                           err_msg=f"{name} {dtype} {axes}")
            continue
        for axes in ((0,), (1,)):
            compare(lambda v: fn(v, axes), [x], one, 0, f"{name} {dtype} axes {axes}")
    # Over a cut dimension (global form: the all-reduce that completes it) and per shard.
    dtype = dtypes[0]
    x = draw(rng, dtype, (4, 6))
    if dtype in FLOATS:
        x = np.nan_to_num(x.astype(np.float64), posinf=5, neginf=-5).astype(x.dtype)
    tol = 1e-5 if dtype in FLOATS and name in ("reduce_sum", "cumsum") else 0
    if name.startswith("reduce") and name != "reduce_prod":
        for mesh, spec in ((two, P("data")), (grid, P("data", "model"))):
            for axes in ((0,), (1,), (0, 1)):
                want = np.asarray(jax.jit(lambda v: fn(v, axes))(x))
                got = np.asarray(aj.jit(lambda v: fn(v, axes), mesh=mesh, in_specs=spec,
                                        out_specs=P())(x))
                if tol:
                    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
                else:
                    check_equal(got, want, 0, f"{name} over cut {axes} on {mesh.axis_sizes}")
    for mesh in (two, grid):
        def per_shard(v):
            return fn(v, (1,))
        got = np.asarray(aj.shard_map(per_shard, mesh=mesh, in_specs=P("data"),
                                      out_specs=P("data"))(x))
        want = np.asarray(jax.jit(per_shard)(x))
        if tol:
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        else:
            check_equal(got, want, 0, f"{name} per shard on {mesh.axis_sizes}")


def test_cumlogsumexp_lowers_as_jax(one, two) -> None:
    """Every float dtype, each axis either way, -inf, +inf and NaN among the values (the results
    are the larger term or more, so 2 ulps, as test_lax.py bounds them), and per shard along
    a whole axis of an operand cut over 2 devices; a cut axis is refused (global form)."""
    rng = np.random.default_rng([SEED, 41])
    for dtype in FLOATS:
        x = rng.uniform(0, 3, (4, 6))
        x[0, 2], x[1, 3], x[2, 1] = -np.inf, np.inf, np.nan
        x = x.astype(NUMPY[dtype])
        for axis in (0, 1):
            for reverse in (False, True):
                compare(lambda v: jlax.cumlogsumexp(v, axis=axis, reverse=reverse), [x], one, 2,
                        f"cumlogsumexp {dtype} axis {axis} reverse {reverse}")
    x = rng.uniform(-3, 3, (4, 6)).astype(np.float32)
    compare(lambda v: jlax.cumlogsumexp(v, axis=1, reverse=True), [x], two, 2,
            "cumlogsumexp per shard", in_specs=P("data"), out_specs=P("data"), per_shard=True)
    refused(lambda v: jlax.cumlogsumexp(v, axis=0), [x], two, "'cumlogsumexp'", "'data'",
            "per shard", in_specs=P("data"), out_specs=P("data"))


def test_dot_general_lowers_as_jax(one, two, grid) -> None:
    rng = np.random.default_rng([SEED, 8])
    for dtype in ("f32", "f64", "i32", "i64", "bf16"):
        a = draw(rng, dtype, (4, 3, 6))
        b = draw(rng, dtype, (4, 6, 2))
        if dtype in FLOATS:
            a = np.nan_to_num(a.astype(np.float32), posinf=3, neginf=-3).clip(-9, 9).astype(a.dtype)
            b = np.nan_to_num(b.astype(np.float32), posinf=3, neginf=-3).clip(-9, 9).astype(b.dtype)
        fns = [lambda p, q: jnp.einsum("bij,bjk->bik", p, q),
               lambda p, q: jnp.einsum("bij,bjk->ik", p, q),
               lambda p, q: p[0] @ q[1]]
        for i, fn in enumerate(fns):
            want = np.asarray(jax.jit(fn)(a, b))
            if dtype not in INTS:
                want = want.astype(np.float64)
            for mesh, specs in ((one, (P(), P())), (two, (P("data"), P("data"))),
                                (grid, (P("data", None, "model"), P("data", "model")))):
                if i == 2 and mesh is not one:  # a slice of the cut dimension: refused
                    continue
                got = np.asarray(aj.jit(fn, mesh=mesh, in_specs=specs, out_specs=P())(a, b))
                if dtype in INTS:
                    np.testing.assert_array_equal(got, want,
                                                  err_msg=f"dot {i} {dtype} {mesh.axis_sizes}")
                else:
                    np.testing.assert_allclose(got.astype(np.float64), want,
                                               rtol={"bf16": 2e-2, "f32": 1e-5,
                                                     "f64": 1e-12}[dtype],
                                               # bf16 partial sums (a cut contraction)
                                               # round once more
                                               atol=float(np.abs(want).max()) *
                                               (2e-2 if dtype == "bf16" else 1e-6) + 1e-6,
                                               err_msg=f"dot {i} {dtype} {mesh.axis_sizes}")
    x = draw(rng, "i8", (3, 4))
    y = draw(rng, "i8", (4, 2))
    compare(lambda p, q: jlax.dot_general(p, q, (((1,), (0,)), ((), ())),
                                          preferred_element_type=jnp.int32), [x, y], one, 0,
            "dot_general i8 -> i32")


def test_sort_top_k_argsort_gather_scatter(one) -> None:
    rng = np.random.default_rng([SEED, 9])
    for dtype in ("f32", "i32", "u8", "f64"):
        x = draw(rng, dtype, (3, 5))
        compare(lambda v: jnp.sort(v, axis=1), [x], one, 0, f"sort {dtype}")
        compare(lambda v: jnp.argsort(v, axis=0, stable=True), [x], one, 0, f"argsort {dtype}")
    x = np.nan_to_num(draw(rng, "f32", (3, 6)), nan=0.5)
    compare(lambda v: jlax.top_k(v, 3), [x], one, 0, "top_k")
    table = draw(rng, "f32", (5, 4))
    ids = rng.integers(-6, 8, (7,)).astype(np.int32)
    compare(lambda t, i: jnp.take(t, i, axis=0, mode="clip"), [table, ids], one, 0, "take clip")
    compare(lambda t, i: jnp.take(t, i, axis=0, mode="fill"), [table, ids], one, 0, "take fill")
    # Batching dimensions (vmap of dynamic_slice and of indexing) and their gradients.
    xs = draw(rng, "f32", (4, 5, 3))
    starts = rng.integers(-1, 6, 4).astype(np.int32)

    def windows(v, i):
        return jax.vmap(lambda a, j: jlax.dynamic_slice(a, (j, jnp.int32(0)), (2, 3)))(v, i)

    compare(windows, [xs, starts], one, 0, "vmap of dynamic_slice")
    finite = np.nan_to_num(xs, posinf=1, neginf=-1)
    compare(jax.grad(lambda v, i: jnp.sum(jnp.sin(windows(v, i)))), [finite, starts], one, 0,
            "its gradient (scatter-add with batching dims)")
    compare(lambda v, i: jax.vmap(lambda a, j: a[j])(v, i), [xs, starts % 5], one, 0,
            "vmap of indexing")
    upd = draw(rng, "i32", (7, 4))
    itable = draw(rng, "i32", (5, 4))
    for op in ("add", "mul", "min", "max", "set", "subtract"):
        compare(lambda t, i, u: getattr(t.at[i], op)(u, mode="drop"), [itable, ids, upd], one,
                0, f"scatter {op}")


# -- control flow, nested jaxprs, random --------------------------------------------------------

def test_nested_jaxprs_are_lowered_inline(one) -> None:
    @jax.custom_vjp
    def clip_grad(x):
        return jnp.sin(x)

    clip_grad.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (jnp.clip(g, -0.1, 0.1),))

    @jax.custom_jvp
    def softplus(x):
        return jnp.log1p(jnp.exp(x))

    softplus.defjvp(lambda p, t: (softplus(p[0]), t[0] * jax.nn.sigmoid(p[0])))

    def fn(x):
        y = jax.jit(lambda v: v * 2.0)(x)  # pjit
        y = jax.checkpoint(lambda v: jnp.tanh(v) + v)(y)  # remat
        y = jax.nn.relu(y) + softplus(y) + clip_grad(y)  # custom_jvp / custom_vjp
        y = jax.named_call(lambda v: v - 1.0, name="inner")(y)  # closed_call / pjit
        return jnp.sum(y * y)

    x = draw(np.random.default_rng([SEED, 10]), "f32", (3, 4))
    x = np.nan_to_num(x, posinf=2, neginf=-2).clip(-5, 5)
    for f in (fn, jax.grad(fn)):
        want = np.asarray(jax.jit(f)(x))
        got = np.asarray(aj.jit(f, mesh=one)(x))
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_cond_switch_and_scan_lower(one, two) -> None:
    rng = np.random.default_rng([SEED, 11])
    x = rng.standard_normal((4, 3)).astype(np.float32)

    def branches(i, v):
        return jlax.switch(i, [jnp.sin, jnp.cos, lambda u: u * 3.0], v)

    for i in (-1, 0, 1, 2, 5):
        compare(branches, [np.int32(i), x], one, 2, f"switch {i}")
    compare(lambda p, v: jlax.cond(p, jnp.exp, jnp.negative, v), [np.bool_(True), x], one, 2,
            "cond")

    def rnn(params, xs):
        w, u = params

        def step(h, x_t):
            h = jnp.tanh(h @ w + x_t @ u)
            return h, h.sum()

        h, sums = jlax.scan(step, jnp.zeros((4, 5), jnp.float32), xs)
        return jnp.mean(h ** 2) + jnp.mean(sums)

    params = (rng.standard_normal((5, 5)).astype(np.float32) * 0.3,
              rng.standard_normal((3, 5)).astype(np.float32) * 0.3)
    xs = rng.standard_normal((6, 4, 3)).astype(np.float32)
    for f in (rnn, jax.grad(rnn)):
        want = outputs(jax.jit(f)(params, xs))
        got = outputs(aj.jit(f, mesh=one)(params, xs))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
    # The batch of the scan split over 2 devices (global form).
    want = outputs(jax.jit(jax.grad(rnn))(params, xs))
    got = outputs(aj.jit(jax.grad(rnn), mesh=two, in_specs=(P(), P(None, "data")),
                         out_specs=P())(params, xs))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
    # fori_loop with static bounds is a scan.
    # (1 ulp: XLA may fuse the multiply-add)
    compare(lambda v: jlax.fori_loop(0, 4, lambda i, a: a * 1.5 + i, v), [x], one, 1, "fori")


def test_loops_and_branches_run_on_the_device(one, two) -> None:
    """while, scan and cond lower to the IR's structured ops: a trip count that depends on
    the data, a scan longer than the old unrolling limit (4096), a cond whose untaken branch
    would make NaN and inf, loops nested in loops and branches, reverse scans with xs and
    ys, per shard and in global form."""
    rng = np.random.default_rng([SEED, 30])
    x = np.abs(rng.standard_normal((4, 3)).astype(np.float32)) + 0.1

    def doubling(v):  # how many doublings until the sum passes 1000: depends on v
        return jlax.while_loop(lambda c: c[0].sum() < 1000.0,
                               lambda c: (c[0] * 2.0 + 0.5, c[1] + 1), (v, jnp.int32(0)))

    for scale in (1.0, 0.01, 300.0):
        compare(doubling, [x * scale], one, 0, f"while, data-dependent trip count x{scale}")
    compare(lambda v: (doubling(v)[0], doubling(v)[1][None]), [x], two, 0, "while per shard",
            in_specs=P("data"), out_specs=(P("data"), P("data")), per_shard=True,
            oracle=lambda v: (jnp.concatenate([doubling(v[:2])[0], doubling(v[2:])[0]]),
                              jnp.stack([doubling(v[:2])[1], doubling(v[2:])[1]])))

    # 5000 steps: more than the 4096 the unrolled lowering took, as one op.
    long = lambda v: jlax.fori_loop(0, 5000, lambda i, c: (c[0] * 0.5 + v, c[1] + i),  # noqa
                                    (v, jnp.int32(0)))
    compare(long, [x], one, 1, "fori_loop of 5000 steps")
    lowered = aj.jit(long, mesh=one)
    lowered(x)
    assert "scan" in str(jax.make_jaxpr(long)(x))

    # Only the branch taken runs: the other's log and 1/0 never reach the result (nor its
    # gradient, as jax's own).
    def guarded(v):
        return jlax.cond(jnp.all(v > 0), lambda u: jnp.log(u) / u, lambda u: 1.0 / (u - u),
                         v)

    for sign in (1.0, -1.0):
        compare(guarded, [sign * x], one, 2, f"cond sign {sign}")
        compare(jax.grad(lambda v: jnp.sum(guarded(v))), [sign * x], one, 4,
                f"cond gradient sign {sign}")
    compare(lambda i, v: jlax.switch(i, [jnp.sin, lambda u: jnp.sqrt(-u), jnp.cos], v),
            [np.int32(2), x], one, 2, "switch past a NaN branch")

    # Nested: a while inside a scan inside a fori_loop, with a cond inside, and consts from
    # each level; a reverse scan with several xs and ys.
    def nested(v, w):
        def outer(i, a):
            def step(c, row):
                n = jlax.while_loop(lambda k: k[1] < i + 2, lambda k: (k[0] + row * w[0, 0],
                                                                       k[1] + 1), (c, 0))[0]
                n = jlax.cond(n.sum() > 0, lambda u: u * 0.5, lambda u: u - a.mean(), n)
                return n, (n.sum(), row * i)
            c, (sums, rows) = jlax.scan(step, a[0], a, reverse=True)
            return a * 0.9 + c + sums[:, None] * 0.01 + rows * 0.001
        return jlax.fori_loop(0, 3, outer, v)

    w = rng.standard_normal((2, 2)).astype(np.float32)
    compare(nested, [x, w], one, 8, "nested loops and branches")
    compare(nested, [x, w], two, 8, "nested per shard", in_specs=(P(), P()), out_specs=P(),
            per_shard=True)
    # Global form: the carry takes the cut of the xs it is combined with.
    compare(lambda v: jlax.scan(lambda c, r: (c * 0.5 + r, c.sum()), jnp.zeros((4,)), v),
            [rng.standard_normal((6, 4)).astype(np.float32)], two, 2, "scan, carry cut",
            in_specs=P(None, "data"), out_specs=(P("data"), P()))


def test_loop_edge_cases_and_collective_fallbacks(one, two, monkeypatch) -> None:
    """Loops with PRNG keys in the carry, no carry, a traced bound; branches with no
    operands or results cut differently; and the fallbacks of a body that needs a
    collective: a scan with a psum per shard is unrolled, a cond reducing a cut dimension in
    global form computes both branches."""
    import atoll.jax._lowering as lowering  # noqa: PLC0415

    rng = np.random.default_rng([SEED, 33])
    x = rng.standard_normal((4, 3)).astype(np.float32)
    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(3)))

    def dropout_scan(k, v):
        def step(c, row):
            k, acc = c
            k, sub = jax.random.split(k)
            keep = jax.random.uniform(sub, row.shape, jnp.float32) < 0.5
            return (k, acc + jnp.where(keep, row, 0.0)), keep.sum()
        return jlax.scan(step, (k, jnp.zeros(3)), v)

    compare(dropout_scan, [key, x], one, 0, "scan carrying a PRNG key")
    compare(lambda p: jlax.cond(p, lambda: jnp.float32(1), lambda: jnp.float32(2)),
            [np.bool_(True)], one, 0, "cond of no operands")
    compare(lambda v: jlax.scan(lambda c, _: (c, v.sum()), None, length=3)[1], [x], one, 0,
            "scan of no carry and no xs")
    compare(lambda v, n: jlax.fori_loop(0, n, lambda i, a: a * 0.5 + i, v), [x, np.int32(7)],
            one, 1, "fori_loop with a traced bound (a while)")
    compare(lambda p, v, w: jlax.cond(p, lambda u, t: u * 2.0, lambda u, t: t, v, w),
            [np.bool_(False), x, x + 1], two, 0, "cond, branches cut differently",
            in_specs=(P(), P("data"), P()), out_specs=P("data"))

    fallbacks: List[str] = []
    unrolled, selected = lowering._scan_unrolled, lowering._cond_selected
    monkeypatch.setattr(lowering, "_scan_unrolled",
                        lambda *a: fallbacks.append("scan") or unrolled(*a))
    monkeypatch.setattr(lowering, "_cond_selected",
                        lambda *a: fallbacks.append("cond") or selected(*a))
    blocks = rng.standard_normal((2, 2, 3)).astype(np.float32)
    compare(lambda v: jlax.scan(lambda c, r: (c + jax.lax.psum(r[0], "data"), c.sum()),
                                jnp.zeros(3), v)[0], [blocks], two, 2, "psum in a scan body",
            in_specs=P(None, "data"), out_specs=P(), per_shard=True, check_vma=False,
            oracle=lambda v: jlax.scan(lambda c, r: (c + r.sum(0), c.sum()), jnp.zeros(3),
                                       v)[0])
    compare(lambda p, v: jlax.cond(p, lambda u: u.sum(0), lambda u: u.max(0), v),
            [np.bool_(True), x], two, 1, "cond reducing a cut dimension",
            in_specs=(P(), P("data")), out_specs=P())
    assert fallbacks == ["scan", "cond"], fallbacks


def test_scan_rnn_gradient_runs_natively(one, two) -> None:
    """jax.grad of a lax.scan RNN (JAX's transposition makes a reverse scan) on one device
    and per shard (each device its own batch), with a long sequence; and in global form,
    where the weights' gradient sums the cut batch inside the loop: carried per shard and
    all-reduced after it (test_jax_mesh.py checks that nothing is unrolled)."""
    rng = np.random.default_rng([SEED, 31])
    w = rng.standard_normal((5, 5)).astype(np.float32) * 0.3
    u = rng.standard_normal((3, 5)).astype(np.float32) * 0.3

    def rnn(params, xs):
        w, u = params

        def step(h, x_t):
            h = jnp.tanh(h @ w + x_t @ u)
            return h, h.sum()

        h, sums = jlax.scan(step, jnp.zeros((xs.shape[1], 5), jnp.float32), xs)
        return jnp.mean(h ** 2) + jnp.mean(sums)

    xs = rng.standard_normal((300, 4, 3)).astype(np.float32)
    jaxpr = str(jax.make_jaxpr(jax.grad(rnn))((w, u), xs))
    assert jaxpr.count("scan[") >= 2 and "reverse=True" in jaxpr
    for f in (rnn, jax.grad(rnn)):
        want = outputs(jax.jit(f)((w, u), xs))
        got = outputs(aj.jit(f, mesh=one)((w, u), xs))
        for g, wv in zip(got, want):
            np.testing.assert_allclose(g, wv, rtol=2e-4, atol=2e-6)
    grad = jax.grad(rnn)

    def per_shard(params, xs):
        g = grad(params, xs)
        return jax.tree_util.tree_map(lambda t: jax.lax.pmean(t, "data"), g)

    want = outputs(jax.jit(lambda p, v: jax.tree_util.tree_map(
        lambda a, b: (a + b) / 2, grad(p, v[:, :2]), grad(p, v[:, 2:])))((w, u), xs))
    got = outputs(aj.jit(per_shard, mesh=two, in_specs=(P(), P(None, "data")), out_specs=P(),
                         per_shard=True, check_vma=False)((w, u), xs))
    for g, wv in zip(got, want):
        np.testing.assert_allclose(g, wv, rtol=2e-4, atol=2e-6)
    short = xs[:8]
    want = outputs(jax.jit(grad)((w, u), short))
    got = outputs(aj.jit(grad, mesh=two, in_specs=(P(), P(None, "data")),
                         out_specs=P())((w, u), short))
    for g, wv in zip(got, want):
        np.testing.assert_allclose(g, wv, rtol=2e-5, atol=2e-6)


def test_random_bits_are_jax_random(one) -> None:
    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(42)))

    def draws(k):
        k1, k2 = jax.random.split(k)
        k3 = jax.random.fold_in(k2, 7)
        return (jax.random.bits(k1, (5,), jnp.uint32),
                jax.random.uniform(k2, (3, 2), jnp.float32),
                jax.random.randint(k1, (6,), 0, 10, jnp.int32),
                jax.random.permutation(k3, 6))

    compare(draws, [key], one, 0, "jax.random bits, bit for bit")
    # normal goes through erf_inv: test_lax.py's bound for it.
    erf_inv_ulps = UNARY["erf_inv"][3]
    compare(lambda k: jax.random.normal(jax.random.fold_in(k, 3), (4,), jnp.float32), [key],
            one, erf_inv_ulps, "jax.random.normal")
    typed = lambda k: jax.random.normal(jax.random.wrap_key_data(k), (3,), jnp.float32)  # noqa
    compare(lambda s: jax.random.key_data(jax.random.split(jax.random.PRNGKey(s))), [np.int32(42)],
            one, 0, "PRNGKey from a traced seed")
    # Typed keys as arguments (their key data travels); a key result comes back as its data.
    typed_key = jax.random.key(7)

    def typed_draws(k):
        k1, k2 = jax.random.split(k)
        return jax.random.uniform(k1, (4,), jnp.float32), k2

    want = jax.jit(typed_draws)(typed_key)
    got = aj.jit(typed_draws, mesh=one)(typed_key)
    check_equal(np.asarray(got[0]), np.asarray(want[0]), 0, "typed key argument")
    check_equal(np.asarray(got[1]), np.asarray(jax.random.key_data(want[1])), 0, "key result")
    compare(typed, [key], one, erf_inv_ulps, "typed key")


# -- windows: convolutions and pooling (the IR's primitives; composed where they refuse a cut) --

def test_convolutions_and_pooling_lower_as_jax(one, two) -> None:
    rng = np.random.default_rng([SEED, 16])
    a = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((6, 2, 2, 3)).astype(np.float32)
    convs = [
        lambda p, q: jlax.conv_general_dilated(p, q[:, :, :, :], (1, 1), "SAME",
                                               feature_group_count=2),
        lambda p, q: jlax.conv_general_dilated(p, q, (2, 1), ((1, 0), (2, 1)), lhs_dilation=(1, 2),
                                               rhs_dilation=(2, 1), feature_group_count=2,
                                               dimension_numbers=("NCHW", "OIHW", "NHWC")),
        lambda p, q: jlax.conv_general_dilated(jnp.transpose(p, (0, 2, 3, 1)), q[:4], (1, 2),
                                               "VALID", dimension_numbers=("NHWC", "OIHW", "NCHW"),
                                               feature_group_count=2),
    ]
    for i, conv in enumerate(convs):
        want = np.asarray(jax.jit(conv)(a, w))
        for mesh, spec in ((one, P()), (two, P("data"))):
            got = np.asarray(aj.jit(conv, mesh=mesh, in_specs=(spec, P()), out_specs=P())(a, w))
            # sums over the window in another order than XLA's
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5,
                                       err_msg=f"conv {i} on {mesh.axis_sizes}")
    x = draw(rng, "f32", (2, 6, 7, 3))
    pools = {
        "max_pool": lambda v: jlax.reduce_window(v, -jnp.inf, jlax.max, (1, 2, 3, 1), (1, 2, 2, 1),
                                                 "SAME"),
        "min_pool dilated": lambda v: jlax.reduce_window(v, jnp.inf, jlax.min, (1, 2, 2, 1),
                                                         (1, 1, 2, 1), "VALID",
                                                         window_dilation=(1, 2, 1, 1)),
        "sum_pool": lambda v: jlax.reduce_window(jnp.nan_to_num(v), 0.0, jlax.add, (1, 2, 2, 1),
                                                 (1, 2, 2, 1), "VALID"),
    }
    for name, pool in pools.items():
        if name == "sum_pool":  # sums in another order than XLA's
            want = np.asarray(jax.jit(pool)(x))
            for mesh, spec in ((one, P()), (two, P("data"))):
                got = np.asarray(aj.jit(pool, mesh=mesh, in_specs=spec, out_specs=spec)(x))
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=name)
            continue
        compare(pool, [x], one, 0, name)
        compare(pool, [x], two, 0, f"{name} split", in_specs=P("data"), out_specs=P("data"))
    xi = draw(rng, "i32", (2, 6, 6, 1))
    lowest = np.int32(np.iinfo(np.int32).min)
    compare(lambda v: jlax.reduce_window(v, lowest, jlax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                         "VALID"), [xi], one, 0, "max_pool i32")
    # max pooling's gradient: select_and_scatter_add.
    finite = rng.standard_normal((2, 6, 7, 3)).astype(np.float32)
    grad_pool = jax.grad(lambda v: jnp.sum(jnp.sin(pools["max_pool"](v))))
    compare(grad_pool, [finite], one, 0, "select_and_scatter_add")
    compare(grad_pool, [finite], two, 0, "select_and_scatter_add split", in_specs=P("data"),
            out_specs=P("data"))


def test_cnn_with_batch_norm_gradient_equals_jax(one, two, grid) -> None:
    nn = pytest.importorskip("flax.linen")

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            for features in (4, 8):
                x = nn.Conv(features, (3, 3), padding="SAME")(x)
                x = nn.BatchNorm(use_running_average=False)(x)
                x = nn.max_pool(nn.relu(x), (2, 2), (2, 2))
            return nn.Dense(3)(x.reshape(x.shape[0], -1))

    model = CNN()
    x = np.random.default_rng([SEED, 17]).standard_normal((4, 8, 8, 2)).astype(np.float32)
    variables = model.init(jax.random.PRNGKey(0), x)

    def loss(params, v):
        out, _ = model.apply({"params": params, "batch_stats": variables["batch_stats"]}, v,
                             mutable=["batch_stats"])
        return jnp.mean(out ** 2)

    want = outputs(jax.jit(jax.value_and_grad(loss))(variables["params"], x))
    for mesh in (one, two, grid):
        got = outputs(aj.jit(jax.value_and_grad(loss), mesh=mesh, in_specs=(P(), P("data")),
                             out_specs=P())(variables["params"], x))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6,
                                       err_msg=f"CNN grad on {mesh.axis_sizes}")


def test_flax_cnn_runs_the_native_convolution(one, two, monkeypatch) -> None:
    """A Flax CNN's forward pass and gradient (conv, avg and max pooling: the input's, the
    kernel's and the pooling's gradients) through the IR's conv_general_dilated,
    reduce_window and select_and_scatter_add, on one device and per shard: the im2col
    composition is never used there."""
    nn = pytest.importorskip("flax.linen")
    import atoll.jax._lowering as lowering  # noqa: PLC0415

    def no_im2col(*args: Any) -> Any:
        raise AssertionError("conv_general_dilated was composed by im2col")

    monkeypatch.setattr(lowering, "_conv_im2col", no_im2col)

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Conv(6, (3, 3), strides=(1, 1), padding="SAME")(x))
            x = nn.avg_pool(x, (2, 2), (2, 2))
            x = nn.relu(nn.Conv(8, (3, 3), padding=((1, 0), (0, 1)), kernel_dilation=(2, 1),
                                feature_group_count=2)(x))
            x = nn.max_pool(x, (2, 2), (1, 1), padding="SAME")
            return nn.Dense(3)(x.reshape(x.shape[0], -1))

    model = CNN()
    x = np.random.default_rng([SEED, 32]).standard_normal((4, 10, 10, 2)).astype(np.float32)
    params = model.init(jax.random.PRNGKey(1), x)["params"]

    def loss(p, v):
        return jnp.mean(model.apply({"params": p}, v) ** 2)

    fwd = lambda p, v: model.apply({"params": p}, v)  # noqa: E731
    for f in (fwd, jax.value_and_grad(loss)):
        want = outputs(jax.jit(f)(params, x))
        got = outputs(aj.jit(f, mesh=one)(params, x))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6, err_msg="Flax CNN")
    # Per shard: each device its half of the batch, gradients averaged with pmean (check_vma
    # off, so that jax adds no psum of its own to the replicated parameters' gradients).
    vg = jax.value_and_grad(loss)
    want = outputs(jax.jit(lambda p, v: jax.tree_util.tree_map(
        lambda a, b: (a + b) / 2, vg(p, v[:2]), vg(p, v[2:])))(params, x))
    got = outputs(aj.jit(lambda p, v: jax.tree_util.tree_map(lambda t: jax.lax.pmean(t, "data"),
                                                             vg(p, v)),
                         mesh=two, in_specs=(P(), P("data")), out_specs=P(),
                         per_shard=True, check_vma=False)(params, x))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6, err_msg="Flax CNN per shard")


# -- collectives per shard ------------------------------------------------------------------------

def test_collectives_per_shard(two, grid) -> None:
    rng = np.random.default_rng([SEED, 12])
    x = rng.standard_normal((8, 4)).astype(np.float32)
    ix = rng.integers(-50, 50, (8, 4)).astype(np.int32)
    for mesh in (two, grid):
        n = mesh.shape["data"]

        def body(v, i):
            return (jlax.psum(i, "data"), jlax.pmax(v, "data"), jlax.pmin(i, "data"),
                    jlax.pmean(v, "data"), jlax.axis_index("data") + i,
                    jlax.all_gather(v, "data", tiled=True), jlax.all_gather(i, "data", axis=1),
                    jlax.psum_scatter(i, "data", scatter_dimension=0, tiled=True),
                    jlax.ppermute(i, "data", [(k, (k + 1) % n) for k in range(n)]),
                    jlax.all_to_all(i, "data", 0, 1, tiled=True))

        specs = (P("data"), P("data"))
        out_specs = (P(), P(), P(), P(), P("data"), P(), P(), P("data"), P("data"), P("data"))
        got = outputs(aj.shard_map(body, mesh=mesh, in_specs=specs, out_specs=out_specs,
                                   check_vma=False)(x, ix))
        # The oracle: the same per-shard body on n simulated devices (vmap with an axis name
        # is shard_map's semantics on one device).
        blocks_x = x.reshape(n, 8 // n, 4)
        blocks_i = ix.reshape(n, 8 // n, 4)
        per = jax.jit(jax.vmap(body, axis_name="data"))(blocks_x, blocks_i)
        per = [np.asarray(p) for p in per]
        want = [per[0][0], per[1][0], per[2][0], per[3][0],
                per[4].reshape(8, 4), per[5][0], per[6][0],
                per[7].reshape(-1, 4), per[8].reshape(8, 4),
                np.concatenate(list(per[9]), axis=0)]
        for k, (g, w) in enumerate(zip(got, want)):
            if g.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6,
                                           err_msg=f"collective {k} on {mesh.axis_sizes}")
            else:
                np.testing.assert_array_equal(g, w, err_msg=f"collective {k} on "
                                                            f"{mesh.axis_sizes}")


def test_tensor_parallel_matmul_per_shard(two, grid) -> None:
    """Megatron's pattern: rows over "data", the contraction over "model", a psum completing
    it; and its gradient, per shard."""
    rng = np.random.default_rng([SEED, 18])
    x = rng.standard_normal((8, 6)).astype(np.float32)
    w = rng.standard_normal((6, 5)).astype(np.float32)

    def body(a, b):
        return jlax.psum(a @ b, "model")

    got = np.asarray(aj.shard_map(body, mesh=grid, in_specs=(P("data", "model"), P("model")),
                                  out_specs=P("data"))(x, w))
    np.testing.assert_allclose(got, x @ w, rtol=1e-5, atol=1e-5)

    def loss(b, a):
        return jlax.psum(jnp.sum(jnp.tanh(a @ b)), "data") / 8.0

    g = aj.shard_map(jax.grad(loss), mesh=two, in_specs=(P(), P("data")), out_specs=P())(w, x)
    want = jax.grad(lambda b: jnp.sum(jnp.tanh(x @ b)) / 8.0)(w)
    np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-5, atol=1e-6)


def test_shard_map_nested_in_a_global_function(two, grid) -> None:
    """A jax.shard_map (over the mesh's abstract mesh) inside a global-form function: its
    operands are cut into blocks (all_gather and a slice at the device's coordinate where
    they arrive cut otherwise), its results joined back (a local gather)."""
    rng = np.random.default_rng([SEED, 20])
    x = rng.standard_normal((8, 4)).astype(np.float32)
    m = rng.standard_normal((4, 4)).astype(np.float32)
    for mesh in (two, grid):
        gram = jax.shard_map(lambda a, b: jlax.psum(a.T @ a, "data") + b,
                             mesh=mesh.abstract_mesh, in_specs=(P("data"), P()), out_specs=P())
        blockwise = jax.shard_map(lambda a: jnp.sin(a) * 3.0, mesh=mesh.abstract_mesh,
                                  in_specs=P("data"), out_specs=P("data"))

        def fn(v, b):
            h = jnp.tanh(v) * 2.0
            return gram(h, b) + 1.0, blockwise(h) - h

        def oracle(v, b):
            h = jnp.tanh(v) * 2.0
            return h.T @ h + b + 1.0, jnp.sin(h) * 3.0 - h

        want = outputs(jax.jit(oracle)(x, m))
        for spec in (P(), P("data")):
            got = outputs(aj.jit(fn, mesh=mesh, in_specs=(spec, P()), out_specs=(P(), spec))(
                x, m))
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5,
                                           err_msg=f"nested shard_map on {mesh.axis_sizes} "
                                                   f"{spec}")
    # h cut on dimension 1, the shard_map's result on dimension 0, along one axis: the
    # difference is refused (atoll.jax does not reshard operands for each other).
    with pytest.raises(aj.LoweringError, match="'sub'.*mesh axis 'data'.*per shard"):
        aj.jit(fn, mesh=grid, in_specs=(P(None, "data"), P()), out_specs=P())(x, m)


def test_psum_over_both_axes_of_a_2x2_mesh(grid) -> None:
    x = np.arange(32, dtype=np.float32).reshape(4, 8)

    def body(v):
        return jlax.psum(jnp.sum(v), ("data", "model")) * jnp.ones(()), jlax.psum(v, "model")

    got = outputs(aj.shard_map(body, mesh=grid, in_specs=P("data", "model"),
                               out_specs=(P(), P("data")), check_vma=False)(x))
    np.testing.assert_allclose(got[0], x.sum())
    np.testing.assert_allclose(got[1], x.reshape(4, 2, 4).sum(1))


# -- global form: shardings propagated ----------------------------------------------------------

def mlp_loss(params, batch):
    x, labels = batch
    h = jax.nn.gelu(x @ params["w1"] + params["b1"])
    logits = h @ params["w2"] + params["b2"]
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


def test_data_parallel_gradient_equals_jax(one, two, grid) -> None:
    rng = np.random.default_rng([SEED, 13])
    params = {"w1": rng.standard_normal((6, 16)).astype(np.float32) * 0.3,
              "b1": np.zeros(16, np.float32),
              "w2": rng.standard_normal((16, 4)).astype(np.float32) * 0.3,
              "b2": rng.standard_normal(4).astype(np.float32) * 0.1}
    batch = (rng.standard_normal((8, 6)).astype(np.float32),
             rng.integers(0, 4, 8).astype(np.int32))
    want = outputs(jax.jit(jax.value_and_grad(mlp_loss))(params, batch))
    for mesh in (one, two, grid):
        step = aj.jit(jax.value_and_grad(mlp_loss), mesh=mesh, in_specs=(P(), P("data")),
                      out_specs=P())
        got = outputs(step(params, batch))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6,
                                       err_msg=f"data parallel on {mesh.axis_sizes}")


def test_out_specs_reshard(two, grid) -> None:
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    for mesh, spec in ((two, P("data")), (two, P(None, "data")), (grid, P("data", "model")),
                       (grid, P("model", "data"))):
        f = aj.jit(lambda v: jnp.exp(v / 10.0), mesh=mesh, in_specs=P(), out_specs=spec)
        r = f(x)
        assert r.sharding.spec == spec
        check_equal(np.asarray(r), np.asarray(jax.jit(lambda v: jnp.exp(v / 10.0))(x)), 2,
                    f"reshard to {spec}")
        g = aj.jit(lambda v: v * 2.0, mesh=mesh, in_specs=spec, out_specs=P())
        check_equal(np.asarray(g(r)), np.asarray(jax.jit(lambda v: jnp.exp(v / 10.0) * 2.0)(x)),
                    2, f"from {spec} back to replicated")


def transformer_block(params, x):
    """Causal multi-head attention and a GELU MLP, pre-norm with residuals."""
    b, t, d = x.shape
    heads = 4

    def norm(v, g):
        mu = v.mean(-1, keepdims=True)
        var = ((v - mu) ** 2).mean(-1, keepdims=True)
        return (v - mu) * jax.lax.rsqrt(var + 1e-5) * g

    h = norm(x, params["g1"])
    q, k, v = (jnp.einsum("btd,de->bte", h, params[n]).reshape(b, t, heads, d // heads)
               for n in ("wq", "wk", "wv"))
    att = jnp.einsum("bthe,bshe->bhts", q, k) / float(np.sqrt(d // heads))
    mask = jnp.tril(jnp.ones((t, t), bool))
    att = jnp.where(mask, att, -1e9)
    att = jax.nn.softmax(att, axis=-1)
    o = jnp.einsum("bhts,bshe->bthe", att, v).reshape(b, t, d) @ params["wo"]
    x = x + o
    h = norm(x, params["g2"])
    return x + jax.nn.gelu(h @ params["w1"]) @ params["w2"]


def test_transformer_block_gradient_equals_jax(one, two, grid) -> None:
    rng = np.random.default_rng([SEED, 14])
    d = 16
    params = {n: rng.standard_normal(s).astype(np.float32) * 0.2 for n, s in
              [("wq", (d, d)), ("wk", (d, d)), ("wv", (d, d)), ("wo", (d, d)),
               ("w1", (d, 4 * d)), ("w2", (4 * d, d))]}
    params["g1"] = np.ones(d, np.float32)
    params["g2"] = np.ones(d, np.float32)
    x = rng.standard_normal((4, 8, d)).astype(np.float32)

    def loss(p, v):
        return jnp.mean(transformer_block(p, v) ** 2)

    want = outputs(jax.jit(jax.value_and_grad(loss))(params, x))
    for mesh in (one, two, grid):
        got = outputs(aj.jit(jax.value_and_grad(loss), mesh=mesh, in_specs=(P(), P("data")),
                             out_specs=P())(params, x))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5,
                                       err_msg=f"transformer grad on {mesh.axis_sizes}")


# -- Arrays ---------------------------------------------------------------------------------------

def test_arrays_stay_in_the_stores_between_calls(two) -> None:
    rng = np.random.default_rng([SEED, 15])
    w = rng.standard_normal((6, 3)).astype(np.float32)
    xs = rng.standard_normal((8, 6)).astype(np.float32)

    def sgd(w, x):
        g = jax.grad(lambda w: jnp.mean((x @ w) ** 2))(w)
        return w - 0.1 * g

    step = aj.jit(sgd, mesh=two, in_specs=(P(), P("data")), out_specs=P())
    before = aj.fetches["arrays"]
    params = w
    want = w
    for _ in range(5):
        params = step(params, xs)
        want = jax.jit(sgd)(want, xs)
    assert isinstance(params, aj.Array)
    assert aj.fetches["arrays"] == before, "the parameters were read back between steps"
    assert params.shape == (6, 3) and params.dtype == np.float32
    assert params.sharding.spec == P() and params.sharding.mesh is two
    assert params.block_until_ready() is params
    np.testing.assert_allclose(np.asarray(params), np.asarray(want), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jax.device_get(params), np.asarray(want), rtol=1e-5, atol=1e-6)
    assert aj.fetches["arrays"] == before + 1
    np.testing.assert_allclose(np.asarray(jnp.asarray(params)), np.asarray(want), rtol=1e-5,
                               atol=1e-6)
    params.delete()
    assert params.is_deleted()
    with pytest.raises(RuntimeError, match="deleted"):
        step(params, xs)


def test_per_shard_results_feed_per_shard_and_global_calls(two, grid) -> None:
    """An Array keeps its layout (per-shard results: the devices' blocks stacked); a call
    that wants another converts it in the stores, with no read back."""
    for mesh, spec in ((two, P("data")), (grid, P("data", "model")), (grid, P("model"))):
        x = np.arange(32, dtype=np.float32).reshape(8, 4)
        double = aj.shard_map(lambda v: v * 2.0, mesh=mesh, in_specs=spec, out_specs=spec)
        total = aj.jit(lambda v: jnp.sum(v, axis=0), mesh=mesh, in_specs=spec, out_specs=P())
        scale = aj.jit(lambda v: v * 3.0, mesh=mesh, in_specs=P(), out_specs=spec)
        before = aj.fetches["arrays"]
        y = double(x)
        z = double(y)  # stacked blocks straight from the stores
        s = total(y)  # stacked -> natural in the stores
        w = double(scale(x))  # natural -> stacked in the stores
        assert aj.fetches["arrays"] == before
        np.testing.assert_array_equal(np.asarray(z), x * 4)
        np.testing.assert_array_equal(np.asarray(s), (x * 2).sum(0))
        np.testing.assert_array_equal(np.asarray(w), x * 6)


def test_pytrees_and_static_arguments(one) -> None:
    def f(tree, n):
        return {"sum": tree["a"] * n + tree["b"][0], "list": [tree["b"][1] - n]}

    tree = {"a": np.ones(3, np.float32), "b": (np.full(3, 2, np.float32), np.zeros(2, np.int32))}
    g = aj.jit(f, mesh=one, static_argnums=1)
    out = g(tree, 3)
    assert set(out) == {"sum", "list"} and isinstance(out["list"], list)
    np.testing.assert_array_equal(np.asarray(out["sum"]), np.full(3, 5, np.float32))
    np.testing.assert_array_equal(np.asarray(out["list"][0]), np.full(2, -3, np.int32))
    assert len(g._cache) == 1
    g(tree, 3)
    assert len(g._cache) == 1
    g(tree, 4)
    assert len(g._cache) == 2


# -- refusals -------------------------------------------------------------------------------------

def refused(fn: Callable[..., Any], args: Sequence[Any], mesh: aj.Mesh, *says: str,
            **options: Any) -> str:
    with pytest.raises(aj.LoweringError) as e:
        aj.jit(fn, mesh=mesh, **options)(*args)
    text = str(e.value)
    for s in says:
        assert s in text, f"{text!r} does not say {s!r}"
    assert isinstance(e.value, atoll.InvalidArgument)
    return text


def test_refusals_name_the_primitive_and_the_line(one, two) -> None:
    x = np.ones((4, 4), np.float32)
    here = os.path.basename(__file__)
    refused(lambda v: jlax.reduce_window(v, np.float32(1), jlax.mul, (2, 2), (1, 1), "VALID"),
            [x], one, "'reduce_window'", "add, max or min", here)
    refused(lambda v: jnp.linalg.cholesky(v), [x], one, "cholesky", here)
    # A while loop whose body needs a collective (per shard: a psum) cannot run on the device
    # and cannot be unrolled.
    refused(lambda v: jlax.while_loop(lambda c: jax.lax.psum(c.sum(), "data") < 10,
                                      lambda c: c * 2, v), [x], two, "'while'", "collective",
            here, in_specs=P("data"), out_specs=P("data"), per_shard=True)

    def printing(v):
        jax.debug.print("v {}", v)
        return v * 2

    refused(printing, [x], one, "host callback", here)
    refused(lambda v: jax.pure_callback(np.sin, jax.ShapeDtypeStruct(v.shape, v.dtype), v), [x],
            one, "host callback", here)
    refused(lambda v: v.astype(jnp.int16) + 1, [x], one, "int16", here)
    # A shape that depends on the data: JAX itself refuses it while tracing.
    with pytest.raises(jax.errors.ConcretizationTypeError, match="nonzero"):
        aj.jit(lambda v: jnp.nonzero(v)[0], mesh=one)(x)
    # Global form: what atoll cannot partition names the primitive, the axis and the line,
    # and suggests the per-shard form.
    refused(lambda v: jnp.flip(v, 0), [x], two, "'rev'", "'data'", here, "per shard",
            in_specs=P("data"), out_specs=P("data"))
    refused(lambda v: jnp.cumsum(v, 0), [x], two, "'cumsum'", "'data'", here, "per shard",
            in_specs=P("data"), out_specs=P("data"))


# -- the example -----------------------------------------------------------------------------------

def load_example(name: str) -> Any:
    import importlib.util  # noqa: PLC0415
    from conftest import SOURCE_DIR  # noqa: PLC0415
    path = SOURCE_DIR / "examples" / "jax" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_differs_from_plain_jax_by_the_mesh_line_and_the_jit_wrapper() -> None:
    import difflib  # noqa: PLC0415
    from conftest import SOURCE_DIR  # noqa: PLC0415
    base = SOURCE_DIR / "examples" / "jax"
    plain = (base / "train_plain.py").read_text().splitlines()
    ported = (base / "train_atoll.py").read_text().splitlines()
    changed = [line[1:].strip() for line in difflib.unified_diff(plain, ported, lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    code = [c for c in changed if c and not c.startswith(('"""', "A Flax", "JAX script",
                                                         "train_atoll.py"))]
    assert code == ["import atoll.jax",
                    'mesh = atoll.jax.Mesh(atoll.connect(), (4,), ("data",))',
                    "step = jax.jit(train_step)",
                    'step = atoll.jax.jit(train_step, mesh=mesh, in_specs=(P(), P(), P("data"), '
                    'P("data")),', "out_specs=P())"], code


def test_example_trains_as_plain_jax_without_fetching_parameters(cluster, monkeypatch) -> None:
    """examples/jax: the Flax model trained with optax, data-parallel on 4 devices in global
    form, gives the plain JAX script's first 10 losses within 1e-5 relative; the only reads
    from the stores are the 10 losses (the parameters and optimizer state stay there)."""
    pytest.importorskip("flax")
    pytest.importorskip("optax")
    plain = load_example("train_plain").main(10)
    monkeypatch.setenv("ATOLL_HOME", cluster.state_dir)
    before = aj.fetches["arrays"]
    on_atoll = load_example("train_atoll").main(10)
    assert aj.fetches["arrays"] - before == 10
    np.testing.assert_allclose(on_atoll, plain, rtol=1e-5)


# -- programs across meshes and islands ------------------------------------------------------------

def test_program_runs_stages_on_two_islands_as_one_submission(jclient) -> None:
    """A two-stage pipeline: stage 1 (global form) on a mesh of island0, stage 2 (per shard)
    on a mesh of island1, traced by atoll.jax.program into one atoll program."""
    first = aj.Mesh(jclient, (2,), ("data",), island="island0")
    second = aj.Mesh(jclient, (2,), ("data",), island="island1")
    assert first.island == "island0" and second.island == "island1"
    rng = np.random.default_rng([SEED, 19])
    w1 = rng.standard_normal((6, 8)).astype(np.float32)
    w2 = rng.standard_normal((8, 3)).astype(np.float32)
    x = rng.standard_normal((4, 6)).astype(np.float32)

    stage1 = aj.jit(lambda w, v: jnp.tanh(v @ w), mesh=first, in_specs=(P(), P("data")),
                    out_specs=P("data"))
    stage2 = aj.shard_map(lambda w, h: jax.nn.relu(h @ w), mesh=second,
                          in_specs=(P(), P("data")), out_specs=P("data"))

    @aj.program
    def pipeline(w1, w2, v):
        return stage2(w2, stage1(w1, v))

    out = pipeline(w1, w2, x)
    assert isinstance(out, aj.Array) and out.mesh is second
    assert pipeline.last.num_nodes >= 2
    want = np.asarray(jax.jit(lambda a, b, v: jax.nn.relu(jnp.tanh(v @ a) @ b))(w1, w2, x))
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-6)
    # Arrays of earlier calls feed a program; its results feed later calls.
    h = stage1(w1, x)
    again = pipeline(w1, w2, x)
    np.testing.assert_allclose(np.asarray(stage2(w2, h)), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(again), want, rtol=1e-5, atol=1e-6)

    @aj.program
    def from_array(w2, h):
        return stage2(w2, h)

    np.testing.assert_allclose(np.asarray(from_array(w2, h)), want, rtol=1e-5, atol=1e-6)
    # A host value given to the program, taken by a per-shard call: fed as its blocks.
    np.testing.assert_allclose(np.asarray(from_array(w2, np.asarray(h))), want, rtol=1e-5,
                               atol=1e-6)


def test_donated_arrays_are_deleted_and_run_failures_raise_atolls_errors(two) -> None:
    x = np.arange(8, dtype=np.float32)
    inc = aj.jit(lambda v: v + 1.0, mesh=two, in_specs=P("data"), out_specs=P("data"),
                 donate_argnums=0)
    a = inc(x)
    b = inc(a)
    assert a.is_deleted() and not b.is_deleted()
    np.testing.assert_array_equal(np.asarray(b), x + 2)
    # Per shard, a result declared replicated (P()) that differs between devices: the run
    # fails and reading it raises the atoll error class with the service's message.
    differs = aj.shard_map(lambda v: v * 2.0, mesh=two, in_specs=P("data"), out_specs=P(),
                           check_vma=False)
    with pytest.raises(atoll.Error, match="differs between devices"):
        np.asarray(differs(x))


# -- checkpoints and elastic training --------------------------------------------------------------

def test_save_and_load_a_pytree_of_arrays_through_the_stores(jclient, grid) -> None:
    """atoll.jax.save writes a pytree whose Arrays are cut over a 2x2 mesh (by the stores
    that hold them) beside numpy leaves; atoll.jax.load gives it back whole, shaped as the
    tree it is given, and refuses a tree whose shapes differ."""
    rng = np.random.default_rng([SEED, 30])
    w = rng.standard_normal((4, 6)).astype(np.float32)
    scaled = aj.jit(lambda w: (w * 2.0, {"sum": w.sum(0)}), mesh=grid, in_specs=P(),
                    out_specs=(P("data", "model"), {"sum": P("model")}))(w)
    tree = {"state": scaled, "step": np.int32(7), "layers": [np.arange(3, dtype=np.float32)]}
    aj.save(jclient, tree, "pytest-jax/tree")
    names = aj._checkpoint.tensor_names(tree)[0]
    assert names == ["layers.0", "state.0", "state.1.sum", "step"], names
    like = jax.tree_util.tree_map(np.asarray, tree)
    got = aj.load(jclient, "pytest-jax/tree", like, grid)
    np.testing.assert_array_equal(got["state"][0], w * 2)
    np.testing.assert_allclose(got["state"][1]["sum"], w.sum(0), rtol=1e-6)
    assert int(got["step"]) == 7 and got["layers"][0].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(atoll.InvalidArgument, match="'state.0' has shape \\(4, 6\\)"):
        aj.load(jclient, "pytest-jax/tree", dict(like, state=(np.zeros((2, 2)), like["state"][1])),
                grid)


def test_elastic_resumes_only_after_a_lost_host() -> None:
    """atoll.jax.elastic runs the loop again with resume=True after a host-loss failure (as
    the services word it), at most ``attempts`` times; any other error passes through."""
    lost = atoll.Unavailable("devices 2,3 on host i0h1 were lost: its executor restarted")
    calls = []

    def loop(resume: bool) -> str:
        calls.append(resume)
        if len(calls) == 1:
            raise lost
        return "done"

    assert aj.elastic(loop, log=None) == "done" and calls == [False, True]
    assert aj.host_lost(atoll.Unavailable("device 4 on host i0h0 was lost: missed heartbeats"))
    assert not aj.host_lost(atoll.InvalidArgument("argument 0 has shape [2]"))
    assert not aj.host_lost(RuntimeError("devices on host h were lost"))  # not atoll's

    def always(resume: bool) -> None:
        raise lost

    with pytest.raises(atoll.Unavailable, match="were lost"):
        aj.elastic(always, attempts=2, within_s=30, log=None)

    def refused(resume: bool) -> None:
        raise atoll.InvalidArgument("bad input")

    with pytest.raises(atoll.InvalidArgument):
        aj.elastic(refused, log=None)
