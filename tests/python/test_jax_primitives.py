"""atoll.jax, one small JAX function per jax.lax primitive of the compiled-functions issue,
on a 2-device slice and on a 2x2 slice, in global form (against jax.jit of the function on
CPU) and per shard (against jax.jit of jax.shard_map of it over a mesh of JAX's CPU devices
of the same shape). Operands are cut along "data" (and "model" on the 2x2 slice) on the
dimensions the primitive keeps whole per shard; cond, switch, while and scan run on both
slices too. The elementwise rows of test_lax.py's BINARY and UNARY tables run on both slices
in both forms in test_jax.py; a last test checks that this table and those cover every
primitive, by the names in the functions' jaxprs.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Sequence, Set, Tuple

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
from jax._src.lax.windowed_reductions import _select_and_scatter_add  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import atoll.jax as aj  # noqa: E402
from test_jax import SEED, outputs  # noqa: E402
from test_lax import BINARY, UNARY, check_equal, draw  # noqa: E402

jax.config.update("jax_enable_x64", True)

X = P("data", "model")  # the main operand [4, 6, 5]: dimensions 0 and 1 cut
F32 = jnp.float32


def finite(rng: np.random.Generator, shape: Sequence[int], dtype: Any = np.float32
           ) -> np.ndarray:
    return rng.standard_normal(tuple(shape)).astype(dtype)


def rows(rng: np.random.Generator) -> Dict[str, Tuple[Callable[..., Any], List[Any], Any, Any,
                                                      float, float]]:
    """name: (fn, args, in_specs, out_specs on the 2x2 slice, ulps, rtol for sums in another
    order than XLA's). On the 2-device slice "model" is not cut."""
    x = draw(rng, "f32", (4, 6, 5))  # NaN, infinities, signed zeros
    smooth = finite(rng, (4, 6, 5))
    ints = draw(rng, "i32", (4, 6, 5))
    bools = draw(rng, "bool", (4, 6, 5))
    idx = rng.integers(-6, 7, (4, 6, 3)).astype(np.int32)
    w = finite(rng, (5, 3))
    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(9)))
    i = np.int32(rng.integers(-2, 7))
    nhwc = finite(rng, (4, 5, 6, 4))
    hwio = finite(rng, (3, 2, 4, 6))
    xs = (X, X)
    return {
        "rsqrt": (lambda v: jlax.rsqrt(jnp.abs(v)), [x], X, X, 2, 0),
        "integer_pow": (lambda v: jlax.integer_pow(v, 3), [x], X, X, 0, 0),
        "clamp": (lambda v: jlax.clamp(F32(-1), v, F32(2)), [x], X, X, 0, 0),
        "select_n": (lambda v, b: jlax.select_n(b, v, -v), [x, bools], xs, X, 0, 0),
        "convert_element_type": (lambda v: jnp.clip(v, -9, 9).astype(jnp.int8), [smooth * 3],
                                 X, X, 0, 0),
        "bitcast_convert_type": (lambda v: jlax.bitcast_convert_type(v, jnp.int32), [x], X, X,
                                 0, 0),
        "reduce_precision": (lambda v: jlax.reduce_precision(v, 5, 10), [x], X, X, 0, 0),
        "reshape": (lambda v: v.reshape(*v.shape[:2], 5, 1), [x], X, X, 0, 0),
        "broadcast_in_dim": (lambda v: jlax.broadcast_in_dim(v, (*v.shape, 2), (0, 1, 2)), [x],
                             X, X, 0, 0),
        "transpose": (lambda v: jnp.transpose(v, (1, 0, 2)), [x], X, P("model", "data"), 0, 0),
        "squeeze": (lambda v: jlax.squeeze(v[:, :, 2:3], (2,)), [x], X, X, 0, 0),
        "expand_dims": (lambda v: jlax.expand_dims(v, (2,)), [x], X, X, 0, 0),
        "slice": (lambda v: v[:, :, 1:5:2], [x], X, X, 0, 0),
        "dynamic_slice": (lambda v, s: jlax.dynamic_slice_in_dim(v, s, 2, axis=2), [x, i],
                          (X, P()), X, 0, 0),
        "dynamic_update_slice": (lambda v, s: jlax.dynamic_update_slice_in_dim(
            v, v[:, :, :2] * 2, s, axis=2), [x, i], (X, P()), X, 0, 0),
        "concatenate": (lambda v: jnp.concatenate([v, v[:, :, :2]], axis=2), [x], X, X, 0, 0),
        "pad": (lambda v: jlax.pad(v, F32(7), ((0, 0, 0), (0, 0, 0), (1, -1, 1))), [x], X, X,
                0, 0),
        "rev": (lambda v: jlax.rev(v, (2,)), [x], X, X, 0, 0),
        "iota": (lambda v: v + jlax.broadcasted_iota(F32, v.shape, 2), [x], X, X, 0, 0),
        "gather": (lambda v, j: jnp.take_along_axis(v, j, axis=2, mode="clip"), [x, idx], xs, X,
                   0, 0),
        **{f"scatter {op}": (lambda v, j, op=op: jax.vmap(jax.vmap(
            lambda a, k: getattr(a.at[k], op)(F32(2.5), mode="drop")))(v, j), [smooth, idx],
            xs, X, 0, 0) for op in ("set", "add", "multiply", "min", "max")},
        "sort": (lambda v: jnp.sort(v, axis=2), [x], X, X, 0, 0),
        "top_k": (lambda v: tuple(jlax.top_k(v, 2)), [smooth], X, (X, X), 0, 0),
        "argmax": (lambda v: jnp.argmax(v, axis=2), [x], X, X, 0, 0),
        "argmin": (lambda v: jnp.argmin(v, axis=2), [x], X, X, 0, 0),
        "cumsum": (lambda v: jnp.cumsum(v, axis=2), [ints], X, X, 0, 0),
        "cumprod": (lambda v: jnp.cumprod(v, axis=2), [ints], X, X, 0, 0),
        "cummax": (lambda v: jlax.cummax(v, axis=2), [x], X, X, 0, 0),
        "cummin": (lambda v: jlax.cummin(v, axis=2, reverse=True), [x], X, X, 0, 0),
        "dot_general": (lambda v, m: jnp.einsum("abk,kn->abn", v, m), [smooth, w], (X, P()), X,
                        0, 1e-5),
        "conv_general_dilated": (lambda a, k: jlax.conv_general_dilated(
            a, k, (2, 1), ((1, 0), (2, 1)), rhs_dilation=(2, 1),
            dimension_numbers=("NHWC", "HWIO", "NHWC")), [nhwc, hwio],
            (P("data"), P(None, None, None, "model")), P("data", None, None, "model"), 0, 2e-5),
        "reduce_sum": (lambda v: jnp.sum(v, axis=2), [smooth], X, X, 0, 1e-5),
        "reduce_max": (lambda v: jnp.max(v, axis=2), [x], X, X, 0, 0),
        "reduce_min": (lambda v: jnp.min(v, axis=2), [x], X, X, 0, 0),
        "reduce_prod": (lambda v: jnp.prod(v, axis=2), [ints], X, X, 0, 0),
        "reduce_and": (lambda v: jnp.all(v, axis=2), [bools], X, X, 0, 0),
        "reduce_or": (lambda v: jnp.any(v, axis=2), [bools], X, X, 0, 0),
        "reduce_window_sum": (lambda v: jlax.reduce_window(v, np.float32(0), jlax.add, (1, 1, 2),
                                                           (1, 1, 1), "VALID"), [smooth], X, X,
                              0, 1e-6),
        "reduce_window_max": (lambda v: jlax.reduce_window(v, -jnp.inf, jlax.max, (1, 1, 3),
                                                           (1, 1, 2), "SAME"), [x], X, X, 0, 0),
        "reduce_window_min": (lambda v: jlax.reduce_window(v, jnp.inf, jlax.min, (1, 1, 2),
                                                           (1, 1, 1), "VALID",
                                                           window_dilation=(1, 1, 2)), [x], X,
                              X, 0, 0),
        "select_and_scatter_add": (lambda s, v: _select_and_scatter_add(
            s, v, jlax.ge_p, (1, 1, 2), (1, 1, 2), ((0, 0),) * 3), [finite(rng, (4, 6, 2)), smooth],
            xs, X, 0, 1e-6),
        "random_bits": (lambda k, v: v + jax.random.uniform(k, v.shape, F32), [key, smooth],
                        (P(), X), X, 0, 0),
        "cond": (lambda p, v: jlax.cond(p, lambda u: jnp.log(jnp.abs(u)), lambda u: u * 2.0,
                                        v), [np.bool_(True), x], (P(), X), X, 2, 0),
        "switch": (lambda n, v: jlax.switch(n, [jnp.sin, jnp.cos, lambda u: u - 1.0], v),
                   [i, x], (P(), X), X, 2, 0),
        "while": (lambda n, v: jlax.while_loop(lambda c: c[1] < n, lambda c: (
            c[0] * 1.5 + 0.25, c[1] + 1), (v, jnp.int32(0)))[0], [i, smooth], (P(), X), X, 0,
            1e-6),  # XLA may fuse the multiply-add
        "scan": (lambda v: jlax.scan(lambda c, r: (c * 0.5 + r, c * 2.0), v[:, :, 0] * 0.5,
                                     jnp.moveaxis(v, 2, 0)), [smooth], X,
                 (X, P(None, "data", "model")), 0, 1e-6),
    }


def on_two(spec: Any) -> Any:
    """A spec of the 2x2 slice for the 2-device one: "model" not cut."""
    if isinstance(spec, P):
        return P(*[None if a == "model" else a for a in spec])
    return jax.tree_util.tree_map(on_two, spec, is_leaf=lambda s: isinstance(s, P))


@pytest.fixture(scope="module")
def meshes(cluster) -> Any:
    devices = jax.devices("cpu")
    if len(devices) < 4:
        pytest.skip("JAX's CPU backend started with fewer than 4 devices: run this module in "
                    "a process of its own (ctest python_jax_primitives does)")
    with cluster.connect(name="pytest-jax-primitives") as c:
        yield {
            "2 devices": (aj.Mesh(c, (2,), ("data",)),
                          jax.sharding.Mesh(np.array(devices[:2]), ("data",))),
            "2x2": (aj.Mesh(c, (2, 2), ("data", "model")),
                    jax.sharding.Mesh(np.array(devices[:4]).reshape(2, 2), ("data", "model"))),
        }


ROWS = rows(np.random.default_rng([SEED, 201]))


@pytest.mark.parametrize("form", ["global", "per shard"])
@pytest.mark.parametrize("where", ["2 devices", "2x2"])
@pytest.mark.parametrize("name", list(ROWS))
def test_primitive_on_a_slice_matches_jax(meshes, name: str, where: str, form: str) -> None:
    fn, args, in_specs, out_specs, ulps, rtol = ROWS[name]
    mesh, cpu_mesh = meshes[where]
    if where == "2 devices":
        in_specs, out_specs = on_two(in_specs), on_two(out_specs)
    per_shard = form == "per shard"
    oracle = jax.shard_map(fn, mesh=cpu_mesh, in_specs=in_specs,
                           out_specs=out_specs) if per_shard else fn
    want = outputs(jax.jit(oracle)(*args))
    got = outputs(aj.jit(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                         per_shard=per_shard)(*args))
    what = f"{name} on {where} ({form})"
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        if rtol:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, err_msg=what)
        else:
            check_equal(g, w, ulps, what)


# The jax.lax primitives of the compiled-functions issue, by their names in a jaxpr.
ISSUE_PRIMITIVES = {
    "add", "sub", "mul", "div", "rem", "pow", "max", "min", "neg", "abs", "sign", "floor",
    "ceil", "round", "exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos",
    "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt",
    "rsqrt", "cbrt", "erf", "erf_inv", "is_finite", "integer_pow", "clamp", "eq", "ne", "lt",
    "le", "gt", "ge", "and", "or", "xor", "not", "shift_left", "shift_right_logical",
    "shift_right_arithmetic", "population_count", "select_n", "convert_element_type",
    "bitcast_convert_type", "nextafter", "reshape", "broadcast_in_dim", "transpose", "squeeze",
    "slice", "dynamic_slice", "dynamic_update_slice", "concatenate", "pad", "rev", "iota",
    "gather", "scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max", "sort",
    "top_k", "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin", "reduce_precision",
    "dot_general", "conv_general_dilated", "reduce_sum", "reduce_max", "reduce_min",
    "reduce_prod", "reduce_and", "reduce_or", "reduce_window_sum", "reduce_window_max",
    "reduce_window_min", "select_and_scatter_add", "cond", "while", "scan", "random_bits",
}


def primitive_names(jaxpr: Any, into: Set[str]) -> Set[str]:
    for eqn in jaxpr.eqns:
        into.add(eqn.primitive.name)
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    primitive_names(inner, into)
    return into


def test_the_table_and_the_elementwise_tables_cover_every_primitive() -> None:
    seen: Set[str] = set()
    for fn, args, *_ in ROWS.values():
        primitive_names(jax.make_jaxpr(fn)(*args).jaxpr, seen)
    for table in (BINARY, UNARY):
        for _, theirs, dtypes, _ in table.values():
            arity = 2 if table is BINARY else 1
            args = [np.ones((2,), np.dtype(draw(np.random.default_rng(0), dtypes[0], ()).dtype))
                    ] * arity
            primitive_names(jax.make_jaxpr(theirs)(*args).jaxpr, seen)
    assert ISSUE_PRIMITIVES <= seen, sorted(ISSUE_PRIMITIVES - seen)
