"""atoll.jax on the 2x2 slice, in both forms, against jax.jit on CPU: sort, gather, scatter,
conversions, jax.random and windows (pooling, convolutions, cumulative ops) with both mesh
axes cutting the operands. The global form is compared with jax.jit of the function on the
whole arrays; the per-shard form with jax.jit of jax.shard_map of the same function over a
2x2 mesh of JAX's CPU devices. What the global form cannot partition is refused naming the
primitive, the mesh axis and the user's line; dimensions cut over two mesh axes at once
(P(("data", "model"))) likewise.
"""

from __future__ import annotations

import os
from typing import Any, Callable, List, Sequence

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

try:  # the per-shard oracle: jax.shard_map over 4 CPU devices (before JAX's backend starts)
    jax.config.update("jax_num_cpu_devices", 4)
except RuntimeError:  # started already (this module run with others in one process)
    pass

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax import lax as jlax  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import atoll.jax as aj  # noqa: E402
from test_jax import SEED, compare, outputs, refused  # noqa: E402
from test_lax import UNARY, check_equal, draw  # noqa: E402

HERE = os.path.basename(__file__)
GRID = P("data", "model")


@pytest.fixture(scope="module")
def grid(cluster) -> Any:
    with cluster.connect(name="pytest-jax-mesh") as c:
        yield aj.Mesh(c, (2, 2), ("data", "model"))


@pytest.fixture(scope="module")
def cpu_grid() -> jax.sharding.Mesh:
    devices = jax.devices("cpu")
    if len(devices) < 4:
        pytest.skip("JAX's CPU backend started with fewer than 4 devices: run this module in "
                    "a process of its own (ctest python_jax_mesh does)")
    return jax.sharding.Mesh(np.array(devices[:4]).reshape(2, 2), ("data", "model"))


def both_forms(grid: aj.Mesh, cpu_grid: Any, fn: Callable[..., Any], args: Sequence[Any],
               in_specs: Any, out_specs: Any, ulps: float, what: str,
               forms: Sequence[str] = ("global", "per shard"), rtol: float = 0.0) -> None:
    """fn on the 2x2 slice in global form (against jax.jit of fn) and per shard (against
    jax.jit of jax.shard_map of fn on the CPU mesh); floats within ``ulps``, or where sums
    run in another order than XLA's, within ``rtol`` (and as much absolutely)."""
    for form in forms:
        per_shard = form == "per shard"
        oracle = jax.shard_map(fn, mesh=cpu_grid, in_specs=in_specs,
                               out_specs=out_specs) if per_shard else fn
        if not rtol:
            compare(fn, args, grid, ulps, f"{what} ({form})", in_specs=in_specs,
                    out_specs=out_specs, per_shard=per_shard, oracle=oracle)
            continue
        want = outputs(jax.jit(oracle)(*args))
        got = outputs(aj.jit(fn, mesh=grid, in_specs=in_specs, out_specs=out_specs,
                             per_shard=per_shard)(*args))
        assert len(got) == len(want), what
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, err_msg=f"{what} ({form})")


def with_edges(rng: np.random.Generator, shape: Sequence[int]) -> np.ndarray:
    """f32 values with NaNs, infinities and signed zeros in every row."""
    x = draw(rng, "f32", tuple(shape))
    flat = x.reshape(-1, x.shape[-1])
    for row in flat:
        row[rng.integers(0, len(row))] = np.nan
    flat[0, :4] = [np.inf, -np.inf, -0.0, 0.0][:flat.shape[1]]
    return flat.reshape(x.shape)


def shape3(rng: np.random.Generator) -> tuple:
    """A random shape whose dimensions 0 and 1 divide over the 2x2 mesh."""
    return (2 * int(rng.integers(1, 3)), 2 * int(rng.integers(1, 4)), int(rng.integers(2, 7)))


# -- sort ---------------------------------------------------------------------------------------

def test_sort_on_the_2x2_mesh(grid, cpu_grid) -> None:
    rng = np.random.default_rng([SEED, 101])
    spec = P("data", "model", None)
    for dtype in ("f32", "i32", "u8"):
        shape = shape3(rng)
        x = with_edges(rng, shape) if dtype == "f32" else draw(rng, dtype, shape)
        y = draw(rng, "i32", shape)
        cases = {
            "sort": lambda v, w: jnp.sort(v, axis=2),
            "argsort": lambda v, w: jnp.argsort(v, axis=2, stable=True),
            "descending": lambda v, w: jnp.sort(v, axis=-1, descending=True),
            "two keys": lambda v, w: jlax.sort((w % 3, v, w), dimension=2, num_keys=2),
            "top_k": lambda v, w: jlax.top_k(jnp.nan_to_num(v.astype(jnp.float32)), 2),
        }
        for name, fn in cases.items():
            both_forms(grid, cpu_grid, fn, [x, y], (spec, spec), spec, 0,
                       f"{name} {dtype}{list(shape)}")
    # Per shard a sort of a cut dimension sorts each device's block.
    x = with_edges(rng, (4, 6, 3))
    both_forms(grid, cpu_grid, lambda v: jnp.sort(v, axis=0), [x], spec, spec, 0,
               "sort of each block", forms=("per shard",))
    # Globally it needs the dimension whole: refused, naming the axis and the line.
    refused(lambda v: jnp.sort(v, axis=1), [x], grid, "'sort'", "'model'", HERE, "per shard",
            in_specs=spec, out_specs=spec)


# -- gather and scatter ---------------------------------------------------------------------------

def test_gather_on_the_2x2_mesh(grid, cpu_grid) -> None:
    rng = np.random.default_rng([SEED, 102])
    table = with_edges(rng, (7, 5))
    for mode in ("clip", "fill", None):
        # Rows of a replicated table at indices cut over both axes (out of range included).
        b0, b1, n = shape3(rng)
        ids = rng.integers(-9, 10, (b0, b1)).astype(np.int32)
        both_forms(grid, cpu_grid, lambda t, i: jnp.take(t, i, axis=0, mode=mode), [table, ids],
                   (P(), GRID), P("data", "model", None), 0, f"take rows mode={mode}")
        # Along the last axis of an operand cut on the others (batching dimensions).
        x = with_edges(rng, (b0, b1, n))
        idx = rng.integers(-n - 2, n + 3, (b0, b1, 3)).astype(np.int32)
        spec = P("data", "model", None)
        both_forms(grid, cpu_grid,
                   lambda v, i: jnp.take_along_axis(v, i, axis=2, mode=mode), [x, idx],
                   (spec, spec), spec, 0, f"take_along_axis mode={mode}")
    # Indexing with a traced scalar (dynamic_slice), and per shard from each block.
    x = with_edges(rng, (4, 6, 5))
    spec = P("data", "model", None)
    both_forms(grid, cpu_grid, lambda v, i: v[:, :, i], [x, np.int32(3)], (spec, P()), P(
        "data", "model"), 0, "x[:, :, i]")
    both_forms(grid, cpu_grid, lambda v, i: jnp.take(v, i, axis=0, mode="clip"),
               [x, rng.integers(-3, 5, (3,)).astype(np.int32)], (spec, P()), spec, 0,
               "rows of each block", forms=("per shard",))
    # Globally, rows at indices from an operand cut along the indexed dimension: refused.
    refused(lambda v, i: jnp.take(v, i, axis=0), [x, np.array([0, 3], np.int32)], grid,
            "'gather'", "'data'", HERE, "per shard", in_specs=(spec, P()),
            out_specs=P(None, "model"))


def test_scatter_on_the_2x2_mesh(grid, cpu_grid) -> None:
    rng = np.random.default_rng([SEED, 103])
    ops = ("set", "add", "mul", "min", "max", "subtract")
    for dtype in ("f32", "i32"):
        table = draw(rng, dtype, (7, 5))
        b0, b1, _ = shape3(rng)
        ids = rng.integers(-9, 10, (b0, b1)).astype(np.int32)
        upd = draw(rng, dtype, (b0, b1, 5))
        for op in ops:
            for mode in ("drop", "clip"):
                # A replicated operand updated at indices (and by updates) cut over both axes:
                # the gradient of a data-parallel embedding lookup, for add.
                both_forms(grid, cpu_grid,
                           lambda t, i, u: getattr(t.at[i], op)(u, mode=mode),
                           [table, ids, upd], (P(), GRID, P("data", "model", None)), P(), 0,
                           f"{op} {dtype} mode={mode} into a replicated operand",
                           forms=("global",))
        # Per shard each device updates its own block of the table at its own indices.
        spec = P("data", "model")
        x = draw(rng, dtype, (4, 6))
        i2 = rng.integers(-3, 5, (3, 1)).astype(np.int32)
        u2 = draw(rng, dtype, (3, 6))
        for op in ops:
            both_forms(grid, cpu_grid, lambda v, i, u: getattr(v.at[i[:, 0]], op)(u, mode="drop"),
                       [x, i2, u2], (spec, P(), P(None, "model")), spec, 0,
                       f"{op} {dtype} into each block", forms=("per shard",))
    # Along the last axis of an operand cut on the others (batching dimensions).
    b0, b1, n = shape3(rng)
    x = draw(rng, "f32", (b0, b1, n))
    idx = rng.integers(-n - 1, n + 2, (b0, b1, 2)).astype(np.int32)
    vals = draw(rng, "f32", (b0, b1, 2))
    spec = P("data", "model", None)

    def put(v, i, u, op):
        rows = jax.vmap(jax.vmap(lambda a, j, w: getattr(a.at[j], op)(w, mode="drop")))
        return rows(v, i, u)

    for op in ("set", "add"):
        both_forms(grid, cpu_grid, lambda v, i, u: put(v, i, u, op), [x, idx, vals],
                   (spec, spec, spec), spec, 0, f"{op} along the last axis")
    # The gradient of a gather from cut indices (scatter-add of windows), in global form.
    table = rng.standard_normal((7, 5)).astype(np.float32)
    ids = rng.integers(0, 7, (4, 6)).astype(np.int32)
    grad = jax.grad(lambda t, i: jnp.sum(jnp.sin(jnp.take(t, i, axis=0))))
    compare(grad, [table, ids], grid, 0, "embedding gradient (global)", in_specs=(P(), GRID),
            out_specs=P())
    # Globally, a scatter into an operand cut along the indexed dimension: refused.
    refused(lambda v, i, u: v.at[i].set(u), [x, np.array([1], np.int32),
                                            np.ones((1,) + x.shape[1:], np.float32)], grid,
            "'scatter'", "'data'", HERE, "per shard", in_specs=(spec, P(), P()),
            out_specs=spec)


# -- conversions -----------------------------------------------------------------------------------

def test_conversions_on_the_2x2_mesh(grid, cpu_grid) -> None:
    rng = np.random.default_rng([SEED, 104])
    spec = P("data", "model")
    for src, dst in (("f32", "i32"), ("f32", "bf16"), ("i32", "f32"), ("u8", "f32"),
                     ("f64", "f32"), ("i64", "u32"), ("bool", "f32"), ("f32", "bool")):
        x = draw(rng, src, (4, 6))
        if src in ("f32", "f64") and dst in ("i32", "u32"):
            x = np.nan_to_num(x, nan=1, posinf=3, neginf=-3).clip(-100, 100).astype(x.dtype)
        dt = jnp.dtype({"i32": np.int32, "bf16": jnp.bfloat16, "f32": np.float32,
                        "u32": np.uint32, "bool": np.bool_}[dst])
        both_forms(grid, cpu_grid, lambda v: jlax.convert_element_type(v, dt), [x], spec, spec,
                   0, f"convert {src} -> {dst}")
    for src, dst in (("f32", np.int32), ("u32", np.float32), ("i64", np.float64)):
        x = draw(rng, src, (4, 6))
        fn = lambda v: jlax.bitcast_convert_type(v, dst)  # noqa: E731
        for form in ("global", "per shard"):
            oracle = jax.jit(fn if form == "global" else jax.shard_map(
                fn, mesh=cpu_grid, in_specs=spec, out_specs=spec))
            got = np.asarray(aj.jit(fn, mesh=grid, in_specs=spec, out_specs=spec,
                                    per_shard=form == "per shard")(x))
            assert got.tobytes() == np.asarray(oracle(x)).tobytes(), f"bitcast {src} {form}"


# -- random -------------------------------------------------------------------------------------------

def test_random_on_the_2x2_mesh(grid, cpu_grid) -> None:
    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(11)))
    normal_ulps = UNARY["erf_inv"][3]

    def draws(k):
        k1, k2 = jax.random.split(k)
        k3 = jax.random.fold_in(k2, 5)
        return (jax.random.uniform(k1, (4, 6), jnp.float32),
                jax.random.bits(k3, (4, 6), jnp.uint32),
                jax.random.normal(k2, (4, 6), jnp.float32))

    out = (GRID, GRID, GRID)
    compare(draws, [key], grid, normal_ulps, "random (global)", in_specs=P(), out_specs=out)

    # Per shard: a key folded with the device's coordinates draws each block on its own.
    def per_device(k):
        k = jax.random.fold_in(jax.random.fold_in(k, jlax.axis_index("data")),
                               jlax.axis_index("model"))
        return draws(k)

    oracle = jax.shard_map(per_device, mesh=cpu_grid, in_specs=P(), out_specs=out)
    compare(per_device, [key], grid, normal_ulps, "random (per shard)", in_specs=P(),
            out_specs=out, per_shard=True, oracle=oracle)
    # Arrays of keys, cut over both axes: one key per row of a batch.
    keys = np.asarray(jax.random.key_data(jax.random.split(jax.random.PRNGKey(3), 8))).reshape(
        2, 4, 2)
    spec = P("data", "model")

    def rows(ks):
        return (jax.vmap(jax.vmap(lambda c: jax.random.uniform(c, (3,), jnp.float32)))(ks),
                jax.vmap(jax.vmap(lambda c: jax.random.key_data(jax.random.split(c))))(ks))

    both_forms(grid, cpu_grid, rows, [keys], spec, (spec, spec), 0, "arrays of raw keys")
    typed = jax.random.split(jax.random.key(5), (2, 4))
    for form in ("global", "per shard"):
        fn = lambda ks: jax.vmap(jax.vmap(lambda c: jax.random.normal(c, (2,), jnp.float32)))(ks)  # noqa
        oracle = fn if form == "global" else jax.shard_map(fn, mesh=cpu_grid, in_specs=spec,
                                                           out_specs=spec)
        want = np.asarray(jax.jit(oracle)(typed))
        got = np.asarray(aj.jit(fn, mesh=grid, in_specs=spec, out_specs=spec,
                                per_shard=form == "per shard")(typed))
        check_equal(got, want, normal_ulps, f"typed keys cut over both axes ({form})")


# -- windows: pooling, convolutions, cumulative ops -------------------------------------------------

def test_windows_on_the_2x2_mesh(grid, cpu_grid) -> None:
    rng = np.random.default_rng([SEED, 105])
    x = with_edges(rng, (4, 6, 7, 4))  # NHWC: N cut along "data", C along "model"
    spec = P("data", None, None, "model")
    pools = {
        "max_pool": lambda v: jlax.reduce_window(v, -jnp.inf, jlax.max, (1, 2, 3, 1),
                                                 (1, 2, 2, 1), "SAME"),
        "min_pool dilated": lambda v: jlax.reduce_window(v, jnp.inf, jlax.min, (1, 2, 2, 1),
                                                         (1, 1, 2, 1), "VALID",
                                                         window_dilation=(1, 2, 1, 1)),
        "init 1 max": lambda v: jlax.reduce_window(v, np.float32(1), jlax.max, (1, 3, 1, 1),
                                                   (1, 1, 1, 1), ((0, 0), (1, 1), (0, 0),
                                                                  (0, 0))),
    }
    for name, pool in pools.items():
        both_forms(grid, cpu_grid, pool, [x], spec, spec, 0, name)
    finite = np.nan_to_num(x, posinf=2.0, neginf=-2.0, nan=0.5)
    sum_pool = lambda v: jlax.reduce_window(v, np.float32(0), jlax.add, (1, 2, 2, 1), (1, 2, 2, 1),  # noqa
                                            "VALID")
    both_forms(grid, cpu_grid, sum_pool, [finite], spec, spec, 0, "sum_pool", rtol=1e-6)
    grad_pool = jax.grad(lambda v: jnp.sum(jnp.sin(pools["max_pool"](v))))
    smooth = rng.standard_normal((4, 6, 7, 4)).astype(np.float32)
    both_forms(grid, cpu_grid, grad_pool, [smooth], spec, spec, 0, "max_pool gradient",
               rtol=1e-6)
    # Convolutions: the batch cut along "data" and the kernel's output features along
    # "model" (tensor parallel); per shard each device convolves its block with its kernels.
    a = rng.standard_normal((4, 6, 7, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 4, 6)).astype(np.float32)  # HWIO
    dn = ("NHWC", "HWIO", "NHWC")
    convs = {
        "same": lambda p, q: jlax.conv_general_dilated(p, q, (1, 1), "SAME",
                                                       dimension_numbers=dn),
        "strided dilated": lambda p, q: jlax.conv_general_dilated(
            p, q, (2, 1), ((1, 0), (2, 1)), lhs_dilation=(1, 2), rhs_dilation=(2, 1),
            dimension_numbers=dn),
    }
    for name, conv in convs.items():
        for in_specs, out in (((P("data"), P()), P("data")),
                              ((P("data"), P(None, None, None, "model")),
                               P("data", None, None, "model"))):
            both_forms(grid, cpu_grid, conv, [a, w], in_specs, out, 0,
                       f"conv {name} {in_specs}", rtol=2e-5)
    # Cumulative ops along the uncut dimension of an operand cut on the others.
    y = draw(rng, "i32", (4, 6, 5))
    # Sums and products of moderate values (XLA's cumulative sums associate in another
    # order); maxima and minima with NaNs, infinities and signed zeros.
    smooth3 = rng.standard_normal((4, 6, 5)).astype(np.float32)
    edges3 = with_edges(rng, (4, 6, 5))
    spec3 = P("data", "model", None)
    for name in ("cumsum", "cumprod", "cummax", "cummin"):
        op = getattr(jlax, name)
        both_forms(grid, cpu_grid, lambda v: op(v, axis=2), [y], spec3, spec3, 0, f"{name} i32")
        f = smooth3 if name in ("cumsum", "cumprod") else edges3
        both_forms(grid, cpu_grid, lambda v: op(v, axis=2, reverse=True), [f], spec3, spec3,
                   0, f"{name} f32 reversed", rtol=1e-6 if name in ("cumsum", "cumprod") else 0)
        both_forms(grid, cpu_grid, lambda v: op(v, axis=1), [y], spec3, spec3, 0,
                   f"{name} of each block", forms=("per shard",))
    # Globally a window or a cumulative op over a cut dimension is refused.
    refused(lambda v: jnp.cumsum(v, axis=1), [y], grid, "'cumsum'", "'model'", HERE,
            "per shard", in_specs=spec3, out_specs=spec3)
    refused(pools["max_pool"], [x], grid, "'reduce_window_max'", "'data'", HERE, "per shard",
            in_specs=P(None, "data"), out_specs=P(None, "data"))


# -- dimensions cut over two mesh axes ---------------------------------------------------------------

def test_a_dimension_cut_over_both_axes_is_refused_clearly(grid) -> None:
    x = np.ones((8, 4), np.float32)
    text = refused(lambda v: v * 2, [x], grid, "('data', 'model')", "dimension 0",
                   in_specs=P(("data", "model")), out_specs=P())
    assert "one mesh axis per dimension" in text, text
    refused(lambda v: v * 2, [x], grid, "('data', 'model')", in_specs=P(),
            out_specs=P(("data", "model")))
    refused(lambda v: v * 2, [x], grid, "('data', 'model')", in_specs=P(("data", "model")),
            out_specs=P(("data", "model")), per_shard=True)
    # Inside the function: a shard_map's specs, with the primitive and the line.
    inner = jax.shard_map(lambda v: v * 2, mesh=grid.abstract_mesh, in_specs=P(("data", "model")),
                          out_specs=P(("data", "model")))
    refused(lambda v: inner(v) + 1, [x], grid, "'shard_map'", "('data', 'model')", HERE,
            "operand 0", in_specs=P(), out_specs=P())


# -- a scan whose body sums over a cut dimension ------------------------------------------------------

def test_scan_gradient_sums_per_shard_and_all_reduces_after_the_loop(grid, monkeypatch) -> None:
    """jax.grad of a scan RNN with the batch cut (global form): the weights' gradient sums
    the cut batch at every step; carried per shard and all-reduced once after the loop, the
    reverse scan stays the IR's scan (nothing unrolled). A sum that feeds the body's next
    step (the input's features cut along "model") still needs the all-reduce inside: unrolled."""
    import atoll.jax._lowering as lowering  # noqa: PLC0415

    unrolled: List[str] = []
    unroll = lowering._scan_unrolled
    monkeypatch.setattr(lowering, "_scan_unrolled",
                        lambda *a: unrolled.append(a[2]) or unroll(*a))
    rng = np.random.default_rng([SEED, 106])
    w = (rng.standard_normal((6, 6)) * 0.3).astype(np.float32)
    u = (rng.standard_normal((4, 6)) * 0.3).astype(np.float32)

    def loss(w, u, xs):
        def step(h, x):
            h = jnp.tanh(h @ w + x @ u)
            return h, h.sum()

        h, sums = jlax.scan(step, jnp.zeros((xs.shape[1], 6), jnp.float32), xs)
        return jnp.mean(h ** 2) + jnp.mean(sums)

    grad = jax.grad(loss, argnums=(0, 1))
    for length in (1, 7, 200):
        xs = rng.standard_normal((length, 4, 4)).astype(np.float32)
        want = outputs(jax.jit(grad)(w, u, xs))
        got = outputs(aj.jit(grad, mesh=grid, in_specs=(P(), P(), P(None, "data")),
                             out_specs=P())(w, u, xs))
        for g, wv in zip(got, want):  # the batch summed per shard first: rounds otherwise
            np.testing.assert_allclose(g, wv, rtol=1e-4, atol=1e-5, err_msg=f"{length} steps")
    assert unrolled == [], unrolled
    xs = rng.standard_normal((5, 4, 4)).astype(np.float32)
    want = outputs(jax.jit(grad)(w, u, xs))
    got = outputs(aj.jit(grad, mesh=grid, in_specs=(P(), P("model"), P(None, "data", "model")),
                         out_specs=P())(w, u, xs))
    for g, wv in zip(got, want):
        np.testing.assert_allclose(g, wv, rtol=1e-4, atol=1e-5, err_msg="features cut")
    assert unrolled and all("all_reduce" in why for why in unrolled), unrolled
