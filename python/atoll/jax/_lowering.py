"""Lowering jaxprs to atoll compiled functions: one table (RULES) from a jaxpr primitive's
name to the function that emits it through atoll.lax / atoll.ops into the function being
built.

Two modes, chosen per (nested) jaxpr:
- "global" (jax.jit with shardings): a value is the whole array, laid over the mesh as
  atoll's types say (Value.split: per dimension, the mesh axis it is cut along). Elementwise
  operands are brought to one layout (a replicated operand is cut locally with a gather,
  no communication), reductions and contractions over a cut dimension are completed with
  the all-reduce along its axis, and what atoll cannot run on a cut dimension is refused
  naming the primitive, the axis and the user's line.
- "local" (the body of a shard_map): a value is one device's block; atoll types it as
  replicated (each device holds its own, as atoll's PARTIAL values are), so that every
  primitive lowers as on one device, and the collectives (psum, all_gather, ...) become
  atoll's along the named mesh axis.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

import jax
from jax.extend import core as jcore
from jax._src import source_info_util
from jax._src.interpreters import partial_eval as pe

from .. import _atoll
from .. import lax as alax
from .._lax_random import iota_2x32
from .._tracing import tracing_function
from .._types import dtype_of_numpy

Value = _atoll.Value

# The collectives of atoll.ops. A loop or branch body may hold none (it runs per shard, and
# the shards need not agree on trip counts), so the lowering notes the function each one lands
# in: a body that made one falls back to the unrolled (scan) or computed-and-selected (cond)
# form, or is refused (while).
_COLLECTIVES = frozenset({"all_gather", "all_reduce_sum", "all_reduce_max", "all_reduce_min",
                          "all_reduce_mean", "reduce_scatter", "all_to_all",
                          "collective_permute"})
_collectives_made: List[Tuple[str, str]] = []  # (function name, collective), in order
_open_bodies = [0]  # bodies being traced (the log is cleared when a lowering starts outside one)


class _NotingOps:
    """atoll.ops, noting each collective made (and the function it landed in)."""

    def __getattr__(self, name: str) -> Any:
        fn = getattr(_atoll.ops, name)
        if name not in _COLLECTIVES:
            return fn

        def noted(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            _collectives_made.append((out.function, name))
            return out
        return noted


_ops = _NotingOps()


class _NeedsCollective(Exception):
    """A body being traced made a collective (or its carry changes its cut, which would need
    one): the loop or branch cannot run natively."""


class LoweringError(_atoll.InvalidArgument):
    """A jaxpr atoll cannot lower (a primitive, dtype, host callback or sharding it lacks),
    refused at trace time; the message names the primitive and the user's source line."""



def _contiguous(a: np.ndarray) -> np.ndarray:
    """C-contiguous, keeping a 0-d array 0-d (np.ascontiguousarray makes it 1-d)."""
    return np.require(a, requirements="C")

# ---------------------------------------------------------------------------------------------
# dtypes

_ATOLL_DTYPES = ("f32", "i32", "bf16", "f16", "f64", "i64", "bool", "i8", "u8", "u32")


def atoll_dtype(dtype: Any) -> str:
    """The atoll dtype name of a numpy/JAX dtype; LoweringError for one atoll lacks."""
    try:
        return dtype_of_numpy(np.dtype(dtype)).name
    except (TypeError, ValueError):
        raise LoweringError(f"atoll has no dtype {dtype} (it has bool, int8, uint8, int32, "
                            "uint32, int64, bfloat16, float16, float32, float64)") from None


def prim(name: str, *operands: Value, params: Sequence[int] = (), attr: float = 0.0) -> Value:
    return _ops.primitive(name, list(operands), [int(p) for p in params], float(attr))


def full(shape: Sequence[int], value: Any, dtype: str) -> Value:
    if dtype == "bool":
        value = 1 if bool(value) else 0
    elif dtype in ("f32", "f64", "bf16", "f16"):
        value = float(value)
    else:
        value = int(value)
    return alax.full(tuple(int(s) for s in shape), value, dtype)


def cut_of(v: Value) -> Tuple[int, ...]:
    return tuple(v.split)


def is_replicated(v: Value) -> bool:
    return all(a < 0 for a in v.split)


# ---------------------------------------------------------------------------------------------
# The lowering context

@dataclass
class Hidden:
    """An input the caller does not see: a constant of the jaxpr, or an index table for the
    layout tricks (cut along mesh axes)."""
    array: np.ndarray
    axes: Tuple[int, ...]
    value: Value


@dataclass
class V:
    """A jaxpr variable's value. ``bcast`` (global mode): it is broadcast_in_dim(src, shape,
    dims) of a replicated src, which a cut layout can be made of cheaply. ``local``: the
    device's block of a global value made by a shard_map, with its spec (mesh axis per
    dimension, -1 for none)."""
    value: Optional[Value] = None
    bcast: Optional[Tuple[Value, Tuple[int, ...], Tuple[int, ...]]] = None
    local: Optional[Value] = None
    spec: Optional[Tuple[int, ...]] = None


@dataclass
class _GatherDims:
    """jax.lax.GatherDimensionNumbers' fields, without batching dimensions."""
    offset_dims: Tuple[int, ...]
    collapsed_slice_dims: Tuple[int, ...]
    start_index_map: Tuple[int, ...]
    operand_batching_dims: Tuple[int, ...] = ()
    start_indices_batching_dims: Tuple[int, ...] = ()


class Lowering:
    def __init__(self, builder: _atoll.FunctionBuilder, mesh_shape: Tuple[int, ...],
                 axis_names: Tuple[str, ...]) -> None:
        self.builder = builder
        self.mesh_shape = tuple(mesh_shape)
        self.axis_names = tuple(axis_names)
        self.hidden: List[Hidden] = []
        self._hidden_cache: Dict[Any, Value] = {}
        self.mode = "global"
        self.eqn: Any = None  # the equation being lowered, for messages
        self.eqn_stack: List[Any] = []  # it and the equations whose jaxprs it is in
        self._any_value: Optional[Value] = None
        # The functions values may belong to: the one built (depth 0) and the bodies of loops
        # and branches traced inside it, by name: (depth, a value of it, or None).
        self.functions: Dict[str, Tuple[int, Optional[Value]]] = {builder.name: (0, None)}
        self._bodies = 0
        self._defer: set = set()  # see deferring
        self.deferred: Dict[Any, List[int]] = {}
        if _open_bodies[0] == 0:
            _collectives_made.clear()

    # -- inputs -------------------------------------------------------------------------------
    def input(self, dtype: str, shape: Sequence[int], axes: Sequence[int]) -> Value:
        v = self.builder.input(dtype, [int(s) for s in shape], [int(a) for a in axes])
        if self._any_value is None:
            self._any_value = v
            tracing_function.set(v)
        return v

    def hidden_input(self, array: np.ndarray, axes: Sequence[int], key: Any = None) -> Value:
        axes = tuple(int(a) for a in axes) + (-1,) * (array.ndim - len(axes))
        if key is not None and key in self._hidden_cache:
            return self._hidden_cache[key]
        v = self.input(atoll_dtype(array.dtype), array.shape, axes)
        self.hidden.append(Hidden(_contiguous(array), axes, v))
        if key is not None:
            self._hidden_cache[key] = v
        return v

    def ensure_value(self) -> None:
        """lax.full and iota need a value of the function: a hidden one when there is none."""
        if self._any_value is None:
            self.hidden_input(np.zeros((), np.int32), (), key="anchor")

    # -- bodies of loops and branches ------------------------------------------------------------
    def scope_of(self, values: Sequence[Value]) -> Tuple[int, Value]:
        """The deepest function the values belong to (a structured op on them is made there,
        and its bodies are traced inside it): its depth and a value of it."""
        self.ensure_value()
        assert self._any_value is not None
        depth, anchor = 0, self._any_value
        for v in values:
            d, a = self.functions.get(v.function, (0, None))
            if d > depth and a is not None:
                depth, anchor = d, a
        return depth, anchor

    @contextlib.contextmanager
    def body(self, kind: str, scope: Tuple[int, Value],
             types: Sequence[Tuple[str, Sequence[int], Sequence[int]]]) -> Any:
        """A body (of a while, scan or cond) traced inside the function of ``scope``, with
        inputs of ``types``: yields (its builder, its inputs). The outer values its jaxpr
        uses become its consts (the builder lifts them)."""
        depth, anchor = scope
        self._bodies += 1
        name = f"{kind}.{self._bodies}"  # '.': no Python function is named so
        builder = _atoll.FunctionBuilder(name, anchor)
        inputs = [builder.input(dtype, [int(s) for s in shape], [int(a) for a in axes])
                  for dtype, shape, axes in types]
        mine = inputs[0] if inputs else None
        self.functions[name] = (depth + 1, mine)
        token = tracing_function.set(mine if mine is not None else anchor)
        _open_bodies[0] += 1
        try:
            yield builder, inputs
        finally:
            _open_bodies[0] -= 1
            tracing_function.reset(token)

    @staticmethod
    def mark() -> int:
        return len(_collectives_made)

    def collectives(self) -> Tuple[str, ...]:
        """The collectives the function built holds, in the order made (a loop's or branch's
        body holds none; one traced and then given up for the unrolled form is not counted)."""
        return tuple(c for f, c in _collectives_made if f == self.builder.name)

    def no_collective_since(self, mark: int, depth: int) -> None:
        """_NeedsCollective when a collective made since ``mark`` landed in a body deeper than
        ``depth`` (the function the structured op is made in)."""
        made = [c for f, c in _collectives_made[mark:]
                if self.functions.get(f, (0, None))[0] > depth]
        if made:
            raise _NeedsCollective(", ".join(sorted(set(made))))

    # -- messages -----------------------------------------------------------------------------
    def where(self) -> str:
        """The user's source line of the equation being lowered (or of the nearest enclosing
        one that has a line outside JAX)."""
        for eqn in reversed(self.eqn_stack):
            try:
                text = source_info_util.summarize(eqn.source_info)
            except Exception:  # noqa: BLE001
                text = ""
            if text and "/jax/" not in text.split(" ")[0]:
                return text
        return "an unknown line"

    def refuse(self, what: str, suggest_per_shard: bool = False) -> LoweringError:
        name = self.eqn.primitive.name if self.eqn is not None else "?"
        text = f"atoll.jax cannot lower '{name}' at {self.where()}: {what}"
        if suggest_per_shard:
            text += (" (write this part per shard: atoll.jax.shard_map or jit(..., "
                     "per_shard=True), with explicit collectives)")
        return LoweringError(text)

    def axis_name(self, axis: int) -> str:
        return repr(self.axis_names[axis]) if 0 <= axis < len(self.axis_names) else str(axis)

    def axes_of(self, v: Value) -> str:
        """The mesh axes that cut ``v``, named ('-' for none)."""
        return ", ".join(self.axis_name(a) for a in sorted({a for a in v.split if a >= 0})) or "-"

    def axis_of(self, name: Any) -> int:
        if isinstance(name, (tuple, list)):
            if len(name) != 1:
                raise self.refuse(f"collectives over several mesh axes at once ({name}) are "
                                  "not supported: name one axis")
            name = name[0]
        if name not in self.axis_names:
            raise self.refuse(f"no mesh axis named {name!r} (the mesh has {self.axis_names})")
        return self.axis_names.index(name)

    # -- values -------------------------------------------------------------------------------
    def get(self, v: V) -> Value:
        """A value's atoll Value in the current mode."""
        if v.value is None:
            assert v.local is not None and v.spec is not None
            v.value = self.natural_from_local(v.local, v.spec)
        return v.value

    def literal(self, lit: Any) -> V:
        aval = lit.aval
        dtype = atoll_dtype(aval.dtype)
        self.ensure_value()
        val = np.asarray(lit.val)
        if val.shape == ():
            return V(full((), val.item(), dtype))
        return V(self.constant(val))

    def constant(self, array: Any) -> Value:
        array = np.asarray(array)
        atoll_dtype(array.dtype)
        self.ensure_value()
        if array.shape == ():
            return full((), array.item(), atoll_dtype(array.dtype))
        return self.hidden_input(array, (), key=("const", id(array)))

    # -- layout tricks --------------------------------------------------------------------------
    def coordinate(self, axis: int) -> Value:
        """This device's coordinate along mesh ``axis``: a local i32 []."""
        key = ("coordinate", axis)
        if key in self._hidden_cache:
            return self._hidden_cache[key]
        n = self.mesh_shape[axis]
        stacked = self.hidden_input(np.arange(n, dtype=np.int32), (axis,), key=("coords", axis))
        local = alax.reduce_max(stacked, [0])
        self._hidden_cache[key] = local
        return local

    def _gather_cut(self, operand: Value, cut_dims: Sequence[int], sizes: Sequence[int],
                    index_kinds: Sequence[str], axes: Sequence[int]) -> Value:
        """gather(operand) with an index table cut along ``axes`` on its batch dimensions: the
        result's dimension cut_dims[j] has size sizes[j] and is cut along axes[j]; each
        device reads its indices (index_kinds[j]: "arange" -> i, "zeros" -> 0, ("mod", L)
        -> i % L), so that it gathers its own block from its own operand: no communication."""
        grids = np.meshgrid(*[np.arange(s, dtype=np.int32) for s in sizes], indexing="ij")
        cols = []
        for g, kind in zip(grids, index_kinds):
            if kind == "zeros":
                cols.append(np.zeros_like(g))
            elif kind == "arange":
                cols.append(g)
            else:
                cols.append(g % kind[1])
        table = np.stack(cols, axis=-1).astype(np.int32)
        key = ("gather", tuple(sizes), tuple(str(x) for x in index_kinds), tuple(axes))
        indices = self.hidden_input(table, tuple(axes) + (-1,), key=key)
        shape = tuple(operand.shape)
        rank = len(shape)
        offset = [d for d in range(rank) if d not in cut_dims]
        dims = _GatherDims(tuple(offset), tuple(cut_dims), tuple(cut_dims))
        slice_sizes = [1 if d in cut_dims else shape[d] for d in range(rank)]
        return alax.gather(operand, indices, dims, slice_sizes, mode="clip")

    def natural_from_local(self, local: Value, spec: Sequence[int]) -> Value:
        """The global value, cut as ``spec`` says, whose blocks are the devices' ``local``."""
        cut = [d for d, a in enumerate(spec) if a >= 0]
        if not cut:
            return local
        shape = tuple(local.shape)
        sizes = [shape[d] * self.mesh_shape[spec[d]] for d in cut]
        kinds = [("mod", shape[d]) for d in cut]
        # The operand is the local block; the index i % L picks row i of the global block.
        return self._gather_cut(local, cut, sizes, kinds, [spec[d] for d in cut])

    def stacked_from_local(self, local: Value, spec: Sequence[int]) -> Value:
        """[mesh sizes of the cut dimensions..., *local shape], the leading ones cut along
        their axes: the devices' blocks side by side."""
        cut = [d for d, a in enumerate(spec) if a >= 0]
        if not cut:
            return local
        k = len(cut)
        shape = tuple(local.shape)
        operand = alax.reshape(local, (1,) * k + shape)
        return self._gather_cut(operand, list(range(k)),
                                [self.mesh_shape[spec[d]] for d in cut], ["zeros"] * k,
                                [spec[d] for d in cut])

    def local_from_stacked(self, stacked: Value, k: int) -> Value:
        if k == 0:
            return stacked
        dims = list(range(k))
        if stacked.dtype == "bool":
            return alax.reduce_or(stacked, dims)
        return alax.reduce_max(stacked, dims)

    def local_from_global(self, v: Value, spec: Sequence[int]) -> Value:
        """The device's block of a global value for a shard_map taking it as ``spec``: cut
        dimensions are gathered whole (all_gather) and the block sliced at the device's
        coordinate."""
        for d, a in enumerate(v.split):
            if a >= 0:
                v = _ops.all_gather(v, int(a))
        cut = [d for d, a in enumerate(spec) if a >= 0]
        if not cut:
            return v
        shape = list(v.shape)
        starts = []
        sizes = list(shape)
        for d in range(len(shape)):
            if spec[d] >= 0:
                n = self.mesh_shape[spec[d]]
                sizes[d] = shape[d] // n
                starts.append(alax.mul(self.coordinate(spec[d]),
                                       full((), sizes[d], "i32")))
            else:
                starts.append(full((), 0, "i32"))
        return prim("dynamic_slice", v, *starts, params=sizes)

    def relayout(self, v: V, target: Sequence[int]) -> Value:
        """``v`` laid out as ``target`` (a mesh axis per dimension, -1 for none)."""
        value = self.get(v)
        target = tuple(int(a) for a in target)
        if cut_of(value) == target:
            return value
        # Cuts that the target does not keep: made whole first.
        if not is_replicated(value) and v.bcast is None:
            for d, a in enumerate(value.split):
                if a >= 0:
                    value = _ops.all_gather(value, int(a))
        cut = [d for d, a in enumerate(target) if a >= 0]
        if not cut:
            return value
        shape = tuple(value.shape)
        if v.bcast is not None:
            src, bshape, bdims = v.bcast
            op_shape = list(bshape)
            src_dim_of = {o: i for i, o in enumerate(bdims)}
            for d in cut:
                op_shape[d] = src.shape[src_dim_of[d]] if d in src_dim_of else 1
            operand = alax.broadcast_in_dim(src, op_shape, bdims) if tuple(op_shape) != tuple(
                src.shape) or list(bdims) != list(range(len(op_shape))) else src
        else:
            operand = value
            op_shape = list(shape)
        kinds = ["arange" if op_shape[d] == shape[d] else "zeros" for d in cut]
        return self._gather_cut(operand, cut, [shape[d] for d in cut], kinds,
                                [target[d] for d in cut])

    def whole(self, value: Value) -> Value:
        """``value`` replicated: each dimension cut along a mesh axis gathered whole."""
        for a in value.split:
            if a >= 0:
                value = _ops.all_gather(value, int(a))
        return value

    # -- collectives completing partial values (global mode) ------------------------------------
    @contextlib.contextmanager
    def deferring(self, variables: Any) -> Any:
        """While a scan's body is traced: the sums that ``variables`` (jaxpr variables of
        the body) are made by are left partial (see _accumulators); their mesh axes are
        noted in ``self.deferred``."""
        outer = self._defer
        self._defer = set(variables)
        try:
            yield
        finally:
            self._defer = outer

    def complete(self, value: Value, axes: Sequence[int], how: str) -> Value:
        if how == "sum" and self.eqn is not None and self.eqn.outvars and \
                self.eqn.outvars[0] in self._defer:
            self.deferred[self.eqn.outvars[0]] = list(axes)
            return value
        if not axes:
            return value
        dtype = value.dtype
        if dtype in ("bool", "i8", "u8", "u32"):  # the all-reduces compute in i32/i64
            wide = "i32" if dtype == "bool" else "i64"
            r = self.complete(alax.convert_element_type(value, wide), axes, how)
            if dtype == "bool":
                return alax.convert_element_type(r, "bool")
            return _narrow(self, r, dtype)
        for a in sorted(set(axes)):
            if how == "sum":
                value = _ops.all_reduce_sum(value, a)
            elif how == "max":
                value = _ops.all_reduce_max(value, a)
            elif how == "min":
                value = _ops.all_reduce_min(value, a)
            else:
                raise self.refuse(f"a {how} over dimensions cut along mesh axis "
                                  f"{self.axis_name(a)} has no all-reduce in atoll",
                                  suggest_per_shard=True)
        return value

    # -- lowering -----------------------------------------------------------------------------
    def read(self, env: Dict[Any, V], var: Any) -> V:
        if isinstance(var, jcore.Literal):
            return self.literal(var)
        return env[var]

    def lower_jaxpr(self, jaxpr: Any, consts: Sequence[Any], args: Sequence[V]) -> List[V]:
        env: Dict[Any, V] = {}
        for var, c in zip(jaxpr.constvars, consts):
            env[var] = V(self.constant(c))
        for var, a in zip(jaxpr.invars, args):
            env[var] = a
        try:
            jaxpr, _ = pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars), instantiate=True)
        except Exception:  # noqa: BLE001  (effects: keep the jaxpr as it is)
            pass
        for eqn in jaxpr.eqns:
            invals = [self.read(env, x) for x in eqn.invars]
            outer = self.eqn
            self.eqn = eqn
            self.eqn_stack.append(eqn)
            try:
                outs = self.lower_eqn(eqn, invals)
            finally:
                self.eqn = outer
                self.eqn_stack.pop()
            for var, out in zip(eqn.outvars, outs):
                if not isinstance(var, jcore.DropVar):
                    env[var] = out
        return [self.read(env, x) for x in jaxpr.outvars]

    def lower_eqn(self, eqn: Any, invals: List[V]) -> List[V]:
        name = eqn.primitive.name
        for out in eqn.outvars:
            aval = out.aval
            if hasattr(aval, "dtype") and not _is_key(aval.dtype):
                if aval.dtype not in (None,):
                    try:
                        atoll_dtype(aval.dtype)
                    except LoweringError as e:
                        raise self.refuse(str(e)) from None
            if any(not isinstance(s, (int, np.integer)) for s in getattr(aval, "shape", ())):
                raise self.refuse("a shape that depends on the data")
        if name in _KEY_LAYOUT and any(_is_key(getattr(v.aval, "dtype", None))
                                       for v in eqn.invars):
            return [V(o) for o in _key_layout(self, eqn, invals)]
        rule = RULES.get(name)
        if rule is None:
            reason = MISSING.get(name)
            if reason is None and getattr(eqn.primitive, "name", "").endswith("callback"):
                reason = "a host callback"
            raise self.refuse(reason or "atoll has no lowering for this primitive")
        try:
            out = rule(self, eqn, *invals)
        except LoweringError:
            raise
        except _atoll.InvalidArgument as e:
            cuts = [self.get(v).split for v in invals if v.value is not None or v.local is not None]
            axes = sorted({a for s in cuts for a in s if a >= 0})
            if self.mode == "global" and axes:
                raise self.refuse(f"{e} (operands cut along mesh axis "
                                  f"{', '.join(self.axis_name(a) for a in axes)})",
                                  suggest_per_shard=True) from None
            raise self.refuse(str(e)) from None
        if isinstance(out, V):
            return [out]
        if isinstance(out, Value):
            return [V(out)]
        return [o if isinstance(o, V) else V(o) for o in out]


def _is_key(dtype: Any) -> bool:
    try:
        return jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    except Exception:  # noqa: BLE001
        return False


_KEY_LAYOUT = {"slice", "squeeze", "reshape", "broadcast_in_dim", "concatenate", "transpose",
               "expand_dims", "copy", "copy_p", "select_n"}


def _key_layout(ctx: Lowering, eqn: Any, invals: List[V]) -> List[Value]:
    """Layout primitives on arrays of threefry keys, whose data has a trailing [2] of u32."""
    name = eqn.primitive.name
    p = eqn.params
    vals = [ctx.get(v) for v in invals]
    x = vals[0]
    out_shape = tuple(_out_aval(eqn).shape) + (2,)
    if name == "slice":
        strides = list(p["strides"] or [1] * len(p["start_indices"]))
        return [alax.slice(x, list(p["start_indices"]) + [0], list(p["limit_indices"]) + [2],
                           strides + [1])]
    if name in ("squeeze", "reshape", "expand_dims"):
        return [alax.reshape(x, out_shape)]
    if name == "broadcast_in_dim":
        dims = tuple(p["broadcast_dimensions"]) + (len(out_shape) - 1,)
        return [alax.broadcast_in_dim(x, out_shape, dims)]
    if name == "concatenate":
        return [alax.concatenate(vals, p["dimension"])]
    if name == "transpose":
        return [alax.transpose(x, tuple(p["permutation"]) + (len(out_shape) - 1,))]
    if name in ("copy", "copy_p"):
        return [x]
    raise ctx.refuse("a select between arrays of PRNG keys")


# ---------------------------------------------------------------------------------------------
# The rules

Rule = Callable[..., Any]
RULES: Dict[str, Rule] = {}

# Primitives atoll does not have yet, with the reason the refusal gives.
_NO_IR = "atoll's IR has no {} primitive yet (the compiled-functions issue)"
MISSING: Dict[str, str] = {
    "select_and_gather_add": _NO_IR.format("select_and_gather_add"),
    "rng_bit_generator": _NO_IR.format("rng_bit_generator"),
    "rng_uniform": _NO_IR.format("rng_uniform"),
    "debug_callback": "a host callback (jax.debug.print / jax.debug.callback) cannot run "
                      "inside an atoll compiled function",
    "pure_callback": "a host callback (jax.pure_callback) cannot run inside an atoll "
                     "compiled function",
    "io_callback": "a host callback (io_callback) cannot run inside an atoll compiled function",
    "debug_print": "a host callback (jax.debug.print) cannot run inside an atoll compiled "
                   "function",
}


def rule(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for n in names:
            RULES[n] = fn
        return fn
    return register


def _out_aval(eqn: Any, i: int = 0) -> Any:
    return eqn.outvars[i].aval


def _out_dtype(eqn: Any, i: int = 0) -> str:
    return atoll_dtype(_out_aval(eqn, i).dtype)


# -- elementwise ------------------------------------------------------------------------------

def align(ctx: Lowering, eqn: Any, vals: Sequence[V], shape: Tuple[int, ...]) -> List[Value]:
    """The operands of an elementwise primitive, rank-0 ones broadcast to ``shape`` and, in
    global mode, all laid out alike (a replicated one cut locally to match a cut one)."""
    rank = len(shape)
    target = [-1] * rank
    if ctx.mode == "global":
        for v in vals:
            value = ctx.get(v)
            if len(value.shape) != rank:
                continue
            for d, a in enumerate(value.split):
                if a < 0:
                    continue
                if target[d] >= 0 and target[d] != a:
                    raise ctx.refuse(f"operands cut along different mesh axes "
                                     f"({ctx.axis_name(target[d])} and {ctx.axis_name(a)}) on "
                                     f"dimension {d}", suggest_per_shard=True)
                if a in target and target.index(a) != d:
                    raise ctx.refuse(f"mesh axis {ctx.axis_name(a)} cuts different dimensions "
                                     "of the operands", suggest_per_shard=True)
                target[d] = a
    out = []
    for v in vals:
        value = ctx.get(v)
        if tuple(value.shape) != tuple(shape):
            # jaxprs broadcast rank-0 operands and dimensions of size 1 implicitly.
            dims = () if len(value.shape) == 0 else tuple(range(rank))
            if len(value.shape) not in (0, rank):
                raise ctx.refuse(f"operand shapes {tuple(value.shape)} and {shape}")
            wide = alax.broadcast_in_dim(value, shape, dims)
            v = V(wide, bcast=(value, shape, dims) if is_replicated(value) else None)
            value = wide
        if any(a >= 0 for a in target) and tuple(value.split) != tuple(target):
            value = ctx.relayout(v, target)
        out.append(value)
    return out


def _widened(dtype: str) -> Optional[str]:
    """The dtype in which atoll's add/sub/mul/div compute a dtype they lack."""
    return {"bf16": "f32", "f16": "f32", "i8": "i64", "u8": "i64", "u32": "i64",
            "bool": None}.get(dtype)




@rule("div")
def _div(ctx: Lowering, eqn: Any, x: V, y: V) -> Value:
    a, b = align(ctx, eqn, [x, y], tuple(_out_aval(eqn).shape))
    dtype = a.dtype
    if dtype in ("f32", "f64"):
        return alax.div(a, b)
    if dtype in ("bf16", "f16"):
        return alax.convert_element_type(
            alax.div(alax.convert_element_type(a, "f32"), alax.convert_element_type(b, "f32")),
            dtype)
    # Integers: XLA's x / 0 is -1 (all ones) and MIN / -1 wraps to MIN; atoll's integer
    # division fails on 0, so divide by 1 there and select.
    wide = "i64"
    aw, bw = alax.convert_element_type(a, wide), alax.convert_element_type(b, wide)
    is_zero = alax.eq(bw, _full_like(ctx, bw, 0, wide))
    q = alax.div(aw, alax.select_n(is_zero, bw, _full_like(ctx, bw, 1, wide)))
    q = alax.select_n(is_zero, q, _full_like(ctx, bw, -1, wide))
    return _narrow(ctx, q, dtype)


def _narrow(ctx: "Lowering", r: Value, dtype: str) -> Value:
    """An i64 result as the integer ``dtype``, wrapping as XLA's narrow integers do."""
    if dtype == "i64":
        return r
    bits = {"i32": 32, "u32": 32, "i8": 8, "u8": 8}[dtype]
    mask = (1 << bits) - 1
    r = alax.bitwise_and(r, _full_like(ctx, r, mask, "i64"))
    if dtype in ("i32", "i8"):
        half = _full_like(ctx, r, 1 << (bits - 1), "i64")
        r = alax.sub(alax.bitwise_xor(r, half), half)
    return alax.convert_element_type(r, dtype)


def _binary(fn: Callable[[Value, Value], Value]) -> Rule:
    def lower(ctx: Lowering, eqn: Any, x: V, y: V) -> Value:
        a, b = align(ctx, eqn, [x, y], tuple(_out_aval(eqn).shape))
        return fn(a, b)
    return lower


# atoll.lax's add, sub and mul take every dtype jax's do (computing narrow ones wider).
RULES["add"] = _binary(alax.add)
RULES["add_any"] = RULES["add"]
RULES["sub"] = _binary(alax.sub)
RULES["mul"] = _binary(alax.mul)


@rule("pow")
def _pow(ctx: Lowering, eqn: Any, x: V, y: V) -> Value:
    """x ** y; an integer y is converted to x's dtype first, as jax lowers it."""
    out = _out_dtype(eqn)
    yv = ctx.get(y)
    if yv.dtype != out:
        y = V(alax.convert_element_type(yv, out))
    a, b = align(ctx, eqn, [x, y], tuple(_out_aval(eqn).shape))
    return alax.pow(a, b)


for _name, _fn in [("max", alax.max), ("min", alax.min), ("rem", alax.rem),
                   ("atan2", alax.atan2), ("nextafter", alax.nextafter),
                   ("and", alax.bitwise_and), ("or", alax.bitwise_or),
                   ("xor", alax.bitwise_xor), ("shift_left", alax.shift_left),
                   ("shift_right_logical", alax.shift_right_logical),
                   ("shift_right_arithmetic", alax.shift_right_arithmetic),
                   ("eq", alax.eq), ("ne", alax.ne), ("lt", alax.lt), ("le", alax.le),
                   ("gt", alax.gt), ("ge", alax.ge)]:
    RULES[_name] = _binary(_fn)


def _unary(fn: Callable[[Value], Value], narrow_floats: bool = False) -> Rule:
    def lower(ctx: Lowering, eqn: Any, x: V) -> V:
        v = ctx.get(x)
        if narrow_floats and v.dtype in ("bf16", "f16"):
            r = alax.convert_element_type(fn(alax.convert_element_type(v, "f32")), v.dtype)
        else:
            r = fn(v)
        return V(r)
    return lower


for _name, _fn in [("exp", alax.exp), ("log", alax.log), ("tanh", alax.tanh),
                   ("sqrt", alax.sqrt), ("rsqrt", alax.rsqrt), ("logistic", alax.logistic),
                   ("not", alax.bitwise_not), ("population_count", alax.population_count),
                   ("abs", alax.abs), ("sign", alax.sign), ("floor", alax.floor),
                   ("ceil", alax.ceil), ("is_finite", alax.is_finite), ("exp2", alax.exp2),
                   ("log1p", alax.log1p), ("expm1", alax.expm1), ("sin", alax.sin),
                   ("cos", alax.cos), ("tan", alax.tan), ("asin", alax.asin),
                   ("acos", alax.acos), ("atan", alax.atan), ("sinh", alax.sinh),
                   ("cosh", alax.cosh), ("asinh", alax.asinh), ("acosh", alax.acosh),
                   ("atanh", alax.atanh), ("cbrt", alax.cbrt), ("erf", alax.erf),
                   ("erfc", alax.erfc), ("lgamma", alax.lgamma), ("erf_inv", alax.erf_inv)]:
    RULES[_name] = _unary(_fn)


@rule("neg")
def _neg(ctx: Lowering, eqn: Any, x: V) -> Value:
    v = ctx.get(x)
    if v.dtype in ("f32", "f64", "bf16", "f16"):
        return alax.neg(v)
    if v.dtype in ("i32", "i64"):  # 0 - v wraps MIN to MIN, as XLA's negation
        return alax.sub(_full_like(ctx, v, 0, v.dtype), v)
    wide = alax.convert_element_type(v, "i64")
    return _narrow(ctx, alax.sub(_full_like(ctx, v, 0, "i64"), wide), v.dtype)


@rule("square")
def _square(ctx: Lowering, eqn: Any, x: V) -> Value:
    return alax.integer_pow(ctx.get(x), 2)


@rule("integer_pow")
def _integer_pow(ctx: Lowering, eqn: Any, x: V) -> Value:
    return alax.integer_pow(ctx.get(x), eqn.params["y"])


@rule("round")
def _round(ctx: Lowering, eqn: Any, x: V) -> Value:
    return alax.round(ctx.get(x), int(eqn.params["rounding_method"]))


@rule("copy", "copy_p", "stop_gradient", "optimization_barrier", "pvary", "device_put",
      "layout_constraint", "name", "random_clone", "reduced_vary_cast_p", "mesh_cast")
def _identity(ctx: Lowering, eqn: Any, *xs: V) -> List[V]:
    return list(xs)


@rule("reduce_precision")
def _reduce_precision(ctx: Lowering, eqn: Any, x: V) -> Value:
    """The IR's reduce_precision (XLA's bit recipe, any exponent and mantissa bits)."""
    return alax.reduce_precision(ctx.get(x), int(eqn.params["exponent_bits"]),
                                 int(eqn.params["mantissa_bits"]))


@rule("convert_element_type")
def _convert(ctx: Lowering, eqn: Any, x: V) -> V:
    dtype = atoll_dtype(eqn.params["new_dtype"])
    v = ctx.get(x)
    if v.dtype == dtype:
        return x
    return V(alax.convert_element_type(v, dtype))


@rule("bitcast_convert_type")
def _bitcast(ctx: Lowering, eqn: Any, x: V) -> Value:
    return alax.bitcast_convert_type(ctx.get(x), atoll_dtype(eqn.params["new_dtype"]))


@rule("select_n")
def _select_n(ctx: Lowering, eqn: Any, which: V, *cases: V) -> Value:
    shape = tuple(_out_aval(eqn).shape)
    w = ctx.get(which)
    if len(w.shape) == 0 and len(shape) > 0:
        cs = align(ctx, eqn, list(cases), shape)
        if ctx.mode == "global" and not is_replicated(w):
            w = _ops.all_reduce_max(w, 0)
        return alax.select_n(w, *cs)
    vals = align(ctx, eqn, [which, *cases], shape)
    return alax.select_n(*vals)


@rule("clamp")
def _clamp(ctx: Lowering, eqn: Any, lo: V, x: V, hi: V) -> Value:
    shape = tuple(_out_aval(eqn).shape)
    lo_v, hi_v = ctx.get(lo), ctx.get(hi)
    if len(lo_v.shape) == 0 and len(hi_v.shape) == 0:
        return alax.clamp(lo_v, ctx.get(x), hi_v)
    a, b, c = align(ctx, eqn, [lo, x, hi], shape)
    return alax.clamp(a, b, c)


# -- shapes -----------------------------------------------------------------------------------

@rule("reshape")
def _reshape(ctx: Lowering, eqn: Any, x: V, *dyn: V) -> Value:
    if dyn:
        raise ctx.refuse("a reshape to a shape that depends on the data")
    v = ctx.get(x)
    dims = eqn.params.get("dimensions")
    if dims is not None and tuple(dims) != tuple(range(len(v.shape))):
        v = alax.transpose(v, dims)
    new = tuple(eqn.params["new_sizes"])
    if tuple(v.shape) == new:
        return v
    # A cut value reshapes where its cut leads the dimensions it is merged or split with
    # (atoll's rule); other cuts are refused naming the axis.
    return alax.reshape(v, new)


@rule("broadcast_in_dim")
def _broadcast_in_dim(ctx: Lowering, eqn: Any, x: V, *dyn: V) -> V:
    if dyn:
        raise ctx.refuse("a broadcast to a shape that depends on the data")
    v = ctx.get(x)
    shape = tuple(eqn.params["shape"])
    dims = tuple(eqn.params["broadcast_dimensions"])
    if tuple(v.shape) == shape and dims == tuple(range(len(shape))):
        return x
    out = alax.broadcast_in_dim(v, shape, dims)
    if ctx.mode == "global" and is_replicated(v):
        return V(out, bcast=(v, shape, dims))
    return V(out)


@rule("transpose")
def _transpose(ctx: Lowering, eqn: Any, x: V) -> Value:
    perm = tuple(eqn.params["permutation"])
    v = ctx.get(x)
    if perm == tuple(range(len(perm))):
        return v
    return alax.transpose(v, perm)


@rule("squeeze", "expand_dims")
def _squeeze(ctx: Lowering, eqn: Any, x: V) -> Value:
    v = ctx.get(x)
    new = tuple(_out_aval(eqn).shape)
    return alax.reshape(v, new)


@rule("slice")
def _slice(ctx: Lowering, eqn: Any, x: V) -> Value:
    p = eqn.params
    strides = p["strides"] if p["strides"] is not None else [1] * len(p["start_indices"])
    return alax.slice(ctx.get(x), p["start_indices"], p["limit_indices"], strides)


@rule("split")
def _split(ctx: Lowering, eqn: Any, x: V) -> List[Value]:
    v = ctx.get(x)
    axis = eqn.params["axis"] % len(v.shape)
    outs, at = [], 0
    for size in eqn.params["sizes"]:
        start = [0] * len(v.shape)
        limit = list(v.shape)
        start[axis], limit[axis] = at, at + size
        outs.append(alax.slice(v, start, limit))
        at += size
    return outs


@rule("stack")
def _stack(ctx: Lowering, eqn: Any, *xs: V) -> Value:
    axis = eqn.params.get("axis", 0)
    shape = tuple(_out_aval(eqn).shape)
    dims = tuple(d for d in range(len(shape)) if d != axis)
    parts = []
    for x in xs:
        v = ctx.get(x)
        one = list(shape)
        one[axis] = 1
        parts.append(alax.broadcast_in_dim(v, one, dims))
    return parts[0] if len(parts) == 1 else alax.concatenate(parts, axis)


@rule("unstack")
def _unstack(ctx: Lowering, eqn: Any, x: V) -> List[Value]:
    v = ctx.get(x)
    axis = eqn.params["axis"] % len(v.shape)
    outs = []
    for i in range(v.shape[axis]):
        start = [0] * len(v.shape)
        limit = list(v.shape)
        start[axis], limit[axis] = i, i + 1
        piece = alax.slice(v, start, limit)
        new = tuple(s for d, s in enumerate(v.shape) if d != axis)
        outs.append(alax.reshape(piece, new))
    return outs


@rule("tile")
def _tile(ctx: Lowering, eqn: Any, x: V) -> Value:
    """jnp.tile: a broadcast to [r_0, s_0, r_1, s_1, ...] and a reshape."""
    v = ctx.get(x)
    reps = list(eqn.params["reps"])
    shape = list(v.shape)
    wide, dims = [], []
    for d, (r, s) in enumerate(zip(reps, shape)):
        wide += [r, s]
        dims.append(2 * d + 1)
    b = alax.broadcast_in_dim(v, wide, dims)
    return alax.reshape(b, [r * s for r, s in zip(reps, shape)])


@rule("empty", "empty2")
def _empty(ctx: Lowering, eqn: Any, *dyn: V) -> Value:
    """An array jax leaves uninitialized (a residual of a cond branch's gradient): zeros."""
    aval = _out_aval(eqn)
    ctx.ensure_value()
    return full(tuple(aval.shape), 0, atoll_dtype(aval.dtype))


@rule("zeros_like")
def _zeros_like(ctx: Lowering, eqn: Any, x: V) -> Value:
    v = ctx.get(x)
    return _full_like(ctx, v, 0, v.dtype)


@rule("sharding_constraint", "reshard")
def _sharding_constraint(ctx: Lowering, eqn: Any, x: V) -> Value:
    """with_sharding_constraint / reshard: in global form the value is laid out as the
    sharding's spec says (names of this mesh's axes); per shard nothing moves."""
    v = ctx.get(x)
    sharding = eqn.params.get("sharding", eqn.params.get("dst_sharding"))
    spec = getattr(sharding, "spec", None)
    if ctx.mode != "global" or spec is None:
        return v
    target = spec_axes(ctx, spec, len(v.shape), "a sharding constraint")
    if tuple(v.split) == target:
        return v
    return ctx.relayout(x, target)


def same_cut(ctx: Lowering, xs: Sequence[V]) -> List[Value]:
    """Operands of one rank laid out alike in global form: each dimension cut as any of them
    cuts it (a replicated or less cut operand is cut locally, no communication; where they
    disagree, the later operand's cut wins and the others are regathered)."""
    vals = [ctx.get(x) for x in xs]
    if ctx.mode != "global" or len({tuple(v.split) for v in vals}) <= 1:
        return vals
    target = [-1] * len(vals[0].shape)
    for v in vals:
        for d, a in enumerate(v.split):
            if a >= 0:
                target = [-1 if t == a else t for t in target]
                target[d] = a
    return [v if list(v.split) == target else ctx.relayout(x, target) for v, x in zip(vals, xs)]


@rule("concatenate")
def _concatenate(ctx: Lowering, eqn: Any, *xs: V) -> Value:
    return alax.concatenate(same_cut(ctx, xs), eqn.params["dimension"])


@rule("pad")
def _pad(ctx: Lowering, eqn: Any, x: V, value: V) -> Value:
    return alax.pad(ctx.get(x), ctx.get(value), eqn.params["padding_config"])


@rule("rev")
def _rev(ctx: Lowering, eqn: Any, x: V) -> Value:
    return alax.rev(ctx.get(x), eqn.params["dimensions"])


@rule("iota")
def _iota(ctx: Lowering, eqn: Any) -> Value:
    p = eqn.params
    ctx.ensure_value()
    return alax.broadcasted_iota(atoll_dtype(p["dtype"]), tuple(p["shape"]), p["dimension"])


def _start(ctx: Lowering, v: V) -> Value:
    s = ctx.get(v)
    if s.dtype not in ("i32", "i64"):
        s = alax.convert_element_type(s, "i64" if s.dtype == "u32" else "i32")
    if ctx.mode == "global" and not is_replicated(s):
        raise ctx.refuse("a start index cut along a mesh axis", suggest_per_shard=True)
    return s


@rule("dynamic_slice")
def _dynamic_slice(ctx: Lowering, eqn: Any, x: V, *starts: V) -> Value:
    return prim("dynamic_slice", ctx.get(x), *[_start(ctx, s) for s in starts],
                params=eqn.params["slice_sizes"])


@rule("dynamic_update_slice")
def _dynamic_update_slice(ctx: Lowering, eqn: Any, x: V, update: V, *starts: V) -> Value:
    return prim("dynamic_update_slice", ctx.get(x), ctx.get(update),
                *[_start(ctx, s) for s in starts])


def _indices(ctx: Lowering, v: V) -> Value:
    s = ctx.get(v)
    if s.dtype not in ("i32", "i64"):
        s = alax.convert_element_type(s, "i64" if s.dtype == "u32" else "i32")
    return s


def _default_fill(fill: Any, dtype: str) -> bool:
    """Whether ``fill`` is jax's default fill value of gather's FILL_OR_DROP mode."""
    if fill is None:
        return True
    f = np.asarray(fill)
    if dtype in ("f32", "f64", "bf16", "f16"):
        return bool(np.isnan(f))
    if dtype == "bool":
        return bool(f)
    info = np.iinfo(NUMPY_OF[dtype])
    return int(f) == (info.min if info.min < 0 else info.max)


NUMPY_OF = {"i32": np.int32, "i64": np.int64, "i8": np.int8, "u8": np.uint8, "u32": np.uint32}


def _lowest(dtype: str) -> Any:
    if dtype in ("f32", "f64", "bf16", "f16"):
        return -np.inf
    if dtype == "bool":
        return 0
    return int(np.iinfo(NUMPY_OF[dtype]).min)


def _fill_of(dtype: str) -> Any:
    if dtype in ("f32", "f64", "bf16", "f16"):
        return np.nan
    if dtype == "bool":
        return 1
    info = np.iinfo(NUMPY_OF[dtype])
    return int(info.min if info.min < 0 else info.max)


@rule("gather")
def _gather(ctx: Lowering, eqn: Any, operand: V, indices: V) -> Value:
    p = eqn.params
    dn = p["dimension_numbers"]
    op = ctx.get(operand)
    if not _default_fill(p.get("fill_value"), op.dtype):
        raise ctx.refuse(f"gather with fill_value {p.get('fill_value')!r} (atoll fills with "
                         "jax's default)")
    idx = ctx.get(indices)
    if len(idx.shape) == 1 and not tuple(dn.operand_batching_dims) and is_replicated(idx):
        return _gather_one_window(ctx, eqn, op, _indices(ctx, indices))
    if tuple(dn.operand_batching_dims) and (ctx.mode == "local" or (
            is_replicated(op) and is_replicated(idx))):
        return _gather_batched(ctx, eqn, op, _indices(ctx, indices))
    if tuple(dn.operand_batching_dims) or (ctx.mode == "global" and not is_replicated(op)):
        return _gather_by_mask(ctx, eqn, operand, indices)
    return alax.gather(op, _indices(ctx, indices), _without_batching(dn, _GATHER_FIELDS), p["slice_sizes"],
                       mode=p.get("mode"))


def _without_batching(dn: Any, fields: Sequence[str]) -> Any:
    """`dn`'s dimension numbers `fields` as tuples, without the batching ones (which the
    caller checked empty): what atoll.lax.gather and scatter take."""
    return SimpleNamespace(**{f: tuple(getattr(dn, f)) for f in fields})


_GATHER_FIELDS = ("offset_dims", "collapsed_slice_dims", "start_index_map")
_SCATTER_FIELDS = ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims")


def _gather_batched(ctx: Lowering, eqn: Any, op: Value, idx: Value) -> Value:
    """A gather with batching dimensions (vmap of dynamic_slice or of indexing): atoll.lax's
    takes them as jax.lax's does."""
    p = eqn.params
    return alax.gather(op, idx, p["dimension_numbers"], p["slice_sizes"], mode=p.get("mode"))


def _gather_one_window(ctx: Lowering, eqn: Any, op: Value, idx: Value) -> Value:
    """A gather at one start (indices [k]: x[i], take(0)) as a dynamic_slice, which takes a
    cut dimension whole; FILL_OR_DROP gives the fill value where the window does not fit."""
    p = eqn.params
    dn = p["dimension_numbers"]
    sizes = list(p["slice_sizes"])
    rank = len(op.shape)
    itype = idx.dtype
    starts = [full((), 0, itype) for _ in range(rank)]
    ok = None
    mode = getattr(p.get("mode"), "name", str(p.get("mode"))).lower()
    for j, d in enumerate(dn.start_index_map):
        s = alax.reshape(alax.slice(idx, [j], [j + 1]), ())
        starts[d] = s
        if not ("clip" in mode or "promise" in mode):
            fits = alax.bitwise_and(alax.ge(s, full((), 0, itype)),
                                    alax.le(s, full((), op.shape[d] - sizes[d], itype)))
            ok = fits if ok is None else alax.bitwise_and(ok, fits)
    window = prim("dynamic_slice", op, *starts, params=sizes)
    out_shape = tuple(_out_aval(eqn).shape)
    if tuple(window.shape) != out_shape:
        window = alax.reshape(window, out_shape)
    if ok is not None:
        fill = alax.broadcast_in_dim(full((), _fill_of(op.dtype), op.dtype), out_shape, ())
        if not is_replicated(window):
            fill = ctx.relayout(V(fill, bcast=(full((), _fill_of(op.dtype), op.dtype),
                                               out_shape, ())), window.split)
        window = alax.select_n(ok, fill, window)
    return window


def _gather_by_mask(ctx: Lowering, eqn: Any, operand: V, indices: V) -> Value:
    """A gather of single elements (take_along_axis, with batching dimensions, or from a cut
    operand) as a select over the indexed dimensions and a max: elementwise on the batch, so
    it keeps the batch's cut. out[b] = operand[batch coordinates of b, indices[b]]."""
    p = eqn.params
    dn = p["dimension_numbers"]
    op = ctx.get(operand)
    idx = _indices(ctx, indices)
    ob, ib = tuple(dn.operand_batching_dims), tuple(dn.start_indices_batching_dims)
    smap = tuple(dn.start_index_map)
    rank = len(op.shape)
    if (tuple(dn.offset_dims) or set(ob) | set(smap) != set(range(rank)) or
            any(p["slice_sizes"][d] != 1 for d in smap)):
        raise ctx.refuse("a gather of windows (offset dimensions) with batching dimensions or "
                         f"from an operand cut along mesh axis {ctx.axes_of(op)} (atoll's "
                         "gather takes neither)", suggest_per_shard=not is_replicated(op))
    batch_shape = tuple(idx.shape[:-1])
    nb = len(batch_shape)
    sizes = [op.shape[d] for d in smap]
    shape = batch_shape + tuple(sizes)
    # The operand broadcast over the batch: its batching dims at their index dims, the
    # indexed dims last.
    order = list(ob) + list(smap)
    op_t = alax.transpose(op, order) if order != list(range(rank)) else op
    bdims = tuple(ib) + tuple(range(nb, nb + len(smap)))
    if list(bdims) != sorted(bdims):
        raise ctx.refuse("batching dimensions out of order")
    wide = V(alax.broadcast_in_dim(op_t, shape, bdims),
             bcast=(op_t, shape, bdims) if is_replicated(op_t) else None)
    mode = getattr(p.get("mode"), "name", str(p.get("mode"))).lower()
    cols, in_range = [], None
    itype = idx.dtype
    for j, size in enumerate(sizes):
        col = alax.slice(idx, [0] * nb + [j], list(batch_shape) + [j + 1])
        col = _drop_last_unit(ctx, col)
        cshape = tuple(col.shape)
        if "clip" in mode or "promise" in mode:
            col = alax.clamp(full((), 0, itype), col, full((), size - 1, itype))
        else:
            c, lo, hi = align(ctx, eqn, [V(col), V(full((), 0, itype)),
                                         V(full((), size, itype))], cshape)
            ok = alax.bitwise_and(alax.ge(c, lo), alax.lt(c, hi))
            in_range = ok if in_range is None else alax.bitwise_and(in_range, ok)
        cols.append(V(alax.broadcast_in_dim(col, shape, tuple(range(nb)))))
    mask = None
    for j, col in enumerate(cols):
        iota = alax.broadcasted_iota(itype, shape, nb + j)
        line = alax.broadcasted_iota(itype, (sizes[j],), 0)
        a, b = align(ctx, eqn, [V(iota, bcast=(line, shape, (nb + j,))), col], shape)
        m = alax.eq(a, b)
        mask = m if mask is None else alax.bitwise_and(mask, m)
    lowest = _lowest(op.dtype)
    mv, ov, lv = align(ctx, eqn, [V(mask), wide, V(full((), lowest, op.dtype))], shape)
    picked = alax.select_n(mv, lv, ov)
    red = list(range(nb, nb + len(sizes)))
    out = alax.reduce_or(picked, red) if op.dtype == "bool" else alax.reduce_max(picked, red)
    if in_range is not None:
        fv, ov2, rv = align(ctx, eqn, [V(full((), _fill_of(op.dtype), op.dtype)), V(out),
                                       V(in_range)], batch_shape)
        out = alax.select_n(rv, fv, ov2)
    return out


def _like(ctx: Lowering, v: Value, value: Any) -> Value:
    return full((), value, v.dtype)


def _drop_last_unit(ctx: Lowering, v: Value) -> Value:
    """v [..., 1] -> [...], keeping cuts (a max over the unit dimension)."""
    if v.dtype == "bool":
        return alax.reduce_or(v, [len(v.shape) - 1])
    return alax.reduce_max(v, [len(v.shape) - 1])


def _scatter_rule(name: str) -> Rule:
    fn = getattr(alax, name)

    def lower(ctx: Lowering, eqn: Any, operand: V, indices: V, updates: V) -> Value:
        p = eqn.params
        dn = p["dimension_numbers"]
        cut = ctx.mode == "global" and not all(
            is_replicated(ctx.get(v)) for v in (operand, indices, updates))
        if tuple(dn.operand_batching_dims) and not cut:
            return fn(ctx.get(operand), _indices(ctx, indices), ctx.get(updates), dn,
                      mode=p.get("mode"))
        op = ctx.get(operand)
        if cut and is_replicated(op) and not tuple(dn.operand_batching_dims):
            # A replicated operand updated from indices and updates cut on their batch (a
            # data-parallel embedding's gradient): both gathered whole, so every device
            # applies all the updates in jax's order (bit for bit as XLA, for add too).
            return fn(op, ctx.whole(_indices(ctx, indices)), ctx.whole(ctx.get(updates)),
                      _without_batching(dn, _SCATTER_FIELDS), mode=p.get("mode"))
        if tuple(dn.operand_batching_dims) or cut:
            if name == "scatter" or name in _SCATTER_COMBINE:
                return _scatter_by_mask(ctx, eqn, operand, indices, updates, name)
            raise ctx.refuse(f"{name} with batching dimensions or into an operand cut along "
                             f"mesh axis {ctx.axes_of(op)} (atoll's {name} takes neither)",
                             suggest_per_shard=cut)
        return fn(ctx.get(operand), _indices(ctx, indices), ctx.get(updates),
                  _without_batching(dn, _SCATTER_FIELDS), mode=p.get("mode"))
    return lower



def _scatter_by_mask(ctx: Lowering, eqn: Any, operand: V, indices: V, updates: V,
                     name: str) -> Value:
    """A scatter of single elements (the gradient of take_along_axis: batching dimensions,
    or cut operands) as masks: each update lands where the iota of the indexed dimensions
    equals its index; elementwise on the batch, so it keeps the batch's cut. Indices out of
    range are dropped (FILL_OR_DROP) or clamped (CLIP)."""
    p = eqn.params
    dn = p["dimension_numbers"]
    op = ctx.get(operand)
    idx = _indices(ctx, indices)
    upd = ctx.get(updates)
    ob, ib = tuple(dn.operand_batching_dims), tuple(dn.scatter_indices_batching_dims)
    smap = tuple(dn.scatter_dims_to_operand_dims)
    rank = len(op.shape)
    if (tuple(dn.update_window_dims) or set(ob) | set(smap) != set(range(rank)) or
            list(ob) != sorted(ob)):
        raise ctx.refuse(f"{name} of windows with batching dimensions or into an operand cut "
                         f"along mesh axis {ctx.axes_of(op)} (atoll's scatter takes neither)",
                         suggest_per_shard=True)
    batch_shape = tuple(idx.shape[:-1])
    nb = len(batch_shape)
    sizes = [op.shape[d] for d in smap]
    shape = batch_shape + tuple(sizes)
    itype = idx.dtype
    mode = getattr(p.get("mode"), "name", str(p.get("mode"))).lower()
    mask = None
    for j, size in enumerate(sizes):
        col = _drop_last_unit(ctx, alax.slice(idx, [0] * nb + [j], list(batch_shape) + [j + 1]))
        if "clip" in mode or "promise" in mode:
            col = alax.clamp(full((), 0, itype), col, full((), size - 1, itype))
        colw = V(alax.broadcast_in_dim(col, shape, tuple(range(nb))))
        iota = alax.broadcasted_iota(itype, shape, nb + j)
        line = alax.broadcasted_iota(itype, (size,), 0)
        a, b = align(ctx, eqn, [V(iota, bcast=(line, shape, (nb + j,))), colw], shape)
        m = alax.eq(a, b)
        mask = m if mask is None else alax.bitwise_and(mask, m)
    u = V(alax.broadcast_in_dim(upd, shape, tuple(range(nb))))
    zero = V(full((), 0, op.dtype))
    mv, uv, zv = align(ctx, eqn, [V(mask), u, zero], shape)
    placed = alax.select_n(mv, zv, uv)  # [batch..., indexed...]
    # The batch dimensions that are not the operand's batching dimensions hold several updates
    # per element: applied one position after the other (row-major), as XLA's loop does, so
    # sums round as jax's and the last set wins; past _SEQUENTIAL positions, summed at once.
    extra = [d for d in range(nb) if d not in ib]
    if ctx.mode == "global" and any(placed.split[d] >= 0 for d in extra):
        placed, mv = ctx.whole(placed), ctx.whole(mv)  # updates from other devices' indices
    positions = int(np.prod([shape[d] for d in extra], dtype=np.int64))
    if extra and positions > _SEQUENTIAL:
        if name != "scatter_add" or op.dtype not in _FLOATS:
            raise ctx.refuse(f"{name} of {positions} updates per element (atoll.jax applies up "
                             f"to {_SEQUENTIAL} in order)")
        steps = [(alax.reduce_sum(placed, extra), alax.reduce_or(mv, extra))]
    elif extra:
        steps = [(_drop_units(_at(placed, extra, at), extra),
                  _drop_units(_at(mv, extra, at), extra))
                 for at in np.ndindex(*[shape[d] for d in extra])]
    else:
        steps = [(placed, mv)]
    # Each step is [ib dims in order..., indexed...]: the operand's dims ob..., smap...
    order = list(ob) + list(smap)
    inverse = [order.index(d) for d in range(rank)]
    total = ctx.get(operand)
    for placed, hit in steps:
        if inverse != list(range(rank)):
            placed = alax.transpose(placed, inverse)
            hit = alax.transpose(hit, inverse)
        pv, hv, ov = align(ctx, eqn, [V(placed), V(hit), V(total)], tuple(op.shape))
        if name in _SCATTER_COMBINE:
            pv = _combine_values(ctx, _SCATTER_COMBINE[name], ov, pv)
        total = alax.select_n(hv, ov, pv)
    return total


_SEQUENTIAL = 64
# How each scatter but the plain one combines an update with the operand's element.
_SCATTER_COMBINE = {"scatter_add": alax.add, "scatter_mul": alax.mul, "scatter_min": alax.min,
                    "scatter_max": alax.max}


def _at(v: Value, dims: Sequence[int], at: Sequence[int]) -> Value:
    """The slice of ``v`` at position ``at`` of dimensions ``dims`` (kept, of size 1)."""
    start, limit = [0] * len(v.shape), list(v.shape)
    for d, i in zip(dims, at):
        start[d], limit[d] = int(i), int(i) + 1
    return alax.slice(v, start, limit)


def _drop_units(v: Value, units: Sequence[int]) -> Value:
    """``v`` without its (uncut) dimensions ``units`` of size 1: a max over them keeps the
    other dimensions' cuts."""
    units = list(units)
    return alax.reduce_or(v, units) if v.dtype == "bool" else alax.reduce_max(v, units)


RULES["scatter"] = _scatter_rule("scatter")
RULES["scatter-add"] = _scatter_rule("scatter_add")
RULES["scatter_add"] = RULES["scatter-add"]
RULES["scatter-mul"] = _scatter_rule("scatter_mul")
RULES["scatter_mul"] = RULES["scatter-mul"]
RULES["scatter-min"] = _scatter_rule("scatter_min")
RULES["scatter_min"] = RULES["scatter-min"]
RULES["scatter-max"] = _scatter_rule("scatter_max")


@rule("scatter-sub", "scatter_sub")
def _scatter_sub(ctx: Lowering, eqn: Any, operand: V, indices: V, updates: V) -> Value:
    """operand.at[i].subtract(u): a scatter-add of -u."""
    neg = RULES["neg"](ctx, eqn, updates)
    return RULES["scatter-add"](ctx, eqn, operand, indices, neg if isinstance(neg, V) else V(neg))
RULES["scatter_max"] = RULES["scatter-max"]


def refuse_cut_dim(ctx: Lowering, v: Value, dim: int, what: str) -> None:
    """Global form: refuses ``what`` along dimension ``dim`` of ``v`` when a mesh axis cuts
    it (the primitive needs the dimension whole on every device)."""
    if ctx.mode == "global" and v.split[dim] >= 0:
        raise ctx.refuse(f"{what} along dimension {dim}, which is cut along mesh axis "
                         f"{ctx.axis_name(v.split[dim])} (it needs the dimension whole on "
                         "each device: constrain it to be replicated first)",
                         suggest_per_shard=True)


@rule("sort")
def _sort(ctx: Lowering, eqn: Any, *xs: V) -> List[Value]:
    vals = same_cut(ctx, xs)
    dim = eqn.params["dimension"]
    refuse_cut_dim(ctx, vals[0], dim, "a sort")
    out = alax.sort(tuple(vals), dim, True, eqn.params["num_keys"])
    return list(out)


@rule("top_k")
def _top_k(ctx: Lowering, eqn: Any, x: V) -> List[Value]:
    v = ctx.get(x)
    axis = eqn.params.get("axis", len(v.shape) - 1)
    if axis % max(len(v.shape), 1) != len(v.shape) - 1:
        raise ctx.refuse("top_k along a dimension other than the last")
    return list(alax.top_k(v, eqn.params["k"]))


@rule("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp")
def _cumulative(ctx: Lowering, eqn: Any, x: V) -> Value:
    fn = getattr(alax, eqn.primitive.name)
    return fn(ctx.get(x), eqn.params["axis"], bool(eqn.params["reverse"]))


# -- reductions and contractions ----------------------------------------------------------------

def _cut_axes(v: Value, dims: Sequence[int]) -> List[int]:
    return [v.split[d] for d in dims if v.split[d] >= 0]


@rule("reduce_sum")
def _reduce_sum(ctx: Lowering, eqn: Any, x: V) -> Value:
    v = ctx.get(x)
    axes = [a % len(v.shape) for a in eqn.params["axes"]]
    partial = _cut_axes(v, axes) if ctx.mode == "global" else []
    if not axes:
        return v
    if v.dtype in ("f32", "f64", "bf16", "f16"):
        r = alax.reduce_sum(v, axes)
    else:
        # Integers: a contraction with ones (exact, wrapping as XLA's sums do).
        wide = v.dtype if v.dtype in ("i32", "i64") else "i64"
        w = v if wide == v.dtype else alax.convert_element_type(v, wide)
        keep = [d for d in range(len(v.shape)) if d not in axes]
        ones_shape = [v.shape[d] for d in axes]
        ones = full(ones_shape, 1, wide)
        ones_v = V(ones, bcast=(full((), 1, wide), tuple(ones_shape), ()))
        if ctx.mode == "global" and partial:
            ones = ctx.relayout(ones_v, [v.split[d] for d in axes])
        # The kept dimensions stay in order: dot_general gives lhs's free dims in order.
        r = alax.dot_general(w, ones, ((tuple(axes), tuple(range(len(axes)))), ((), ())))
        r = r if wide == v.dtype else _narrow(ctx, r, v.dtype)
    return ctx.complete(r, partial, "sum")


def _reduce_axes(how: Optional[str]) -> Rule:
    def lower(ctx: Lowering, eqn: Any, x: V) -> Value:
        v = ctx.get(x)
        axes = [a % len(v.shape) for a in eqn.params["axes"]]
        if not axes:
            return v
        fn = getattr(alax, eqn.primitive.name)
        partial = _cut_axes(v, axes) if ctx.mode == "global" else []
        r = fn(v, axes)
        if partial and how is None:
            raise ctx.refuse(f"{eqn.primitive.name} over a dimension cut along mesh axis "
                             f"{', '.join(ctx.axis_name(a) for a in partial)} (atoll has no "
                             "all-reduce for it)", suggest_per_shard=True)
        if partial and how in ("and", "or"):
            how2 = "min" if how == "and" else "max"
            return ctx.complete(r, partial, how2)
        return ctx.complete(r, partial, how or "")
    return lower


RULES["reduce_max"] = _reduce_axes("max")
RULES["reduce_min"] = _reduce_axes("min")
RULES["reduce_prod"] = _reduce_axes(None)
RULES["reduce_and"] = _reduce_axes("and")
RULES["reduce_or"] = _reduce_axes("or")


@rule("argmax", "argmin")
def _argreduce(ctx: Lowering, eqn: Any, x: V) -> Value:
    (axis,) = eqn.params["axes"]
    fn = getattr(alax, eqn.primitive.name)
    return fn(ctx.get(x), axis, atoll_dtype(eqn.params["index_dtype"]))


@rule("dot_general")
def _dot_general(ctx: Lowering, eqn: Any, x: V, y: V) -> Value:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    pref = eqn.params.get("preferred_element_type")
    return _dot(ctx, x, y, ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))), pref,
                atoll_dtype(_out_aval(eqn).dtype))


def _dot(ctx: Lowering, x: V, y: V, dims: Any, pref: Any, out_dtype: str) -> Value:
    """dot_general; in global mode the paired dimensions are brought to one cut (a replicated
    operand cut locally to match) and a contraction over a cut dimension is completed with
    the all-reduce along its axis."""
    (lc, rc), (lb, rb) = dims
    a, b = ctx.get(x), ctx.get(y)
    partial: List[int] = []
    if ctx.mode == "global" and not (is_replicated(a) and is_replicated(b)):
        # Contracting and batch dimensions: cut alike in both operands.
        ta, tb = list(a.split), list(b.split)
        for da, db in list(zip(lc, rc)) + list(zip(lb, rb)):
            sa, sb = ta[da], tb[db]
            if sa == sb:
                continue
            if sa >= 0 and sb >= 0:
                raise ctx.refuse(f"dimensions {da} and {db} it pairs are cut along different "
                                 f"mesh axes ({ctx.axis_name(sa)} and {ctx.axis_name(sb)})",
                                 suggest_per_shard=True)
            if sa >= 0:
                tb[db] = sa
            else:
                ta[da] = sb
        if tuple(ta) != tuple(a.split):
            if not is_replicated(a):
                raise ctx.refuse("operands cut differently on the dimensions it pairs",
                                 suggest_per_shard=True)
            a = ctx.relayout(x, ta)
        if tuple(tb) != tuple(b.split):
            if not is_replicated(b):
                raise ctx.refuse("operands cut differently on the dimensions it pairs",
                                 suggest_per_shard=True)
            b = ctx.relayout(y, tb)
        partial = [a.split[d] for d in lc if a.split[d] >= 0]
    if a.dtype != b.dtype:  # jax allows mixed operands: compute in the result's dtype
        a = a if a.dtype == out_dtype else alax.convert_element_type(a, out_dtype)
        b = b if b.dtype == out_dtype else alax.convert_element_type(b, out_dtype)
    pref_dtype = None if pref is None else atoll_dtype(pref)
    if pref_dtype == a.dtype:
        pref_dtype = None
    r = alax.dot_general(a, b, ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))),
                         preferred_element_type=pref_dtype)
    if r.dtype != out_dtype:
        r = alax.convert_element_type(r, out_dtype)
    return ctx.complete(r, partial, "sum")


# -- windows: convolutions and pooling, the IR's primitives; the compositions of pads, strided
# slices and a dot_general they replaced stay for what the rows refuse (cuts, dtypes)

def _window_starts(window: Sequence[int], dilation: Sequence[int]) -> List[Tuple[int, ...]]:
    import itertools  # noqa: PLC0415
    return [tuple(k * d for k, d in zip(ks, dilation))
            for ks in itertools.product(*[range(w) for w in window])]


def _out_size(size: int, window: int, dilation: int, stride: int) -> int:
    return max(0, (size - (window - 1) * dilation - 1) // stride + 1)


def _strided(v: Value, lead: int, starts: Sequence[int], outs: Sequence[int],
             strides: Sequence[int]) -> Value:
    """The slice of v whose last dimensions (after ``lead`` whole ones) start at ``starts``,
    ``outs`` elements each, ``strides`` apart."""
    shape = list(v.shape)
    start = [0] * lead + list(starts)
    limit = shape[:lead] + [s + (o - 1) * st + 1 if o > 0 else s
                            for s, o, st in zip(starts, outs, strides)]
    return alax.slice(v, start, limit, [1] * lead + list(strides))


def _init_of(dtype: str, how: str) -> Any:
    if how == "sum":
        return 0
    if dtype in ("f32", "f64", "bf16", "f16"):
        return -np.inf if how == "max" else np.inf
    if dtype == "bool":
        return 0 if how == "max" else 1
    info = np.iinfo(NUMPY_OF[dtype])
    return int(info.min) if how == "max" else int(info.max)


def _add_values(ctx: "Lowering", a: Value, b: Value) -> Value:
    return _combine_values(ctx, alax.add, a, b)


def _combine_values(ctx: "Lowering", fn: Callable[[Value, Value], Value], a: Value,
                    b: Value) -> Value:
    """fn(a, b) in a's dtype, computed wider where atoll's kernel lacks the dtype (wrapping
    as the narrow integer does)."""
    wide = _widened(a.dtype)
    if wide is None:
        return fn(a, b)
    r = fn(alax.convert_element_type(a, wide), alax.convert_element_type(b, wide))
    return _narrow(ctx, r, a.dtype) if a.dtype in ("i8", "u8", "u32") else \
        alax.convert_element_type(r, a.dtype)


def _full_like(ctx: Lowering, like: Value, value: Any, dtype: str) -> Value:
    """A constant of ``like``'s shape and layout."""
    shape = tuple(like.shape)
    v = full(shape, value, dtype)
    if is_replicated(like):
        return v
    return ctx.relayout(V(v, bcast=(full((), value, dtype), shape, ())), like.split)


_FLOATS = ("f32", "f64", "bf16", "f16")


@rule("conv_general_dilated")
def _conv(ctx: Lowering, eqn: Any, lhs: V, rhs: V) -> Value:
    """conv_general_dilated as the IR's primitive (any dimension numbers, strides, padding,
    dilations, feature and batch groups). Its rule takes the lhs cut on its batch dimension
    alone and the kernel replicated; where global form cuts another dimension (the kernel's
    gradient contracts the batch: jax passes it as the lhs's feature dimension and the rhs's
    input one), or for integer operands, it is composed as before (_conv_im2col), whose
    dot_general completes the partial sums with the all-reduce."""
    p = eqn.params
    x, w = ctx.get(lhs), ctx.get(rhs)
    out_dtype = _out_dtype(eqn)
    dn = p["dimension_numbers"]
    batch_cut_only = all(a < 0 or (d == dn.lhs_spec[0] and p["batch_group_count"] == 1)
                         for d, a in enumerate(x.split)) and is_replicated(w)
    if out_dtype not in _FLOATS or not (ctx.mode == "local" or batch_cut_only):
        return _conv_im2col(ctx, eqn, lhs, rhs)
    if x.dtype != w.dtype:
        x = alax.convert_element_type(x, out_dtype)
        w = alax.convert_element_type(w, out_dtype)
    pref = p.get("preferred_element_type")
    pref_dtype = None if pref is None else atoll_dtype(pref)
    r = alax.conv_general_dilated(
        x, w, p["window_strides"], [(int(lo), int(hi)) for lo, hi in p["padding"]],
        lhs_dilation=p["lhs_dilation"], rhs_dilation=p["rhs_dilation"],
        dimension_numbers=(tuple(dn.lhs_spec), tuple(dn.rhs_spec), tuple(dn.out_spec)),
        feature_group_count=p["feature_group_count"], batch_group_count=p["batch_group_count"],
        preferred_element_type=pref_dtype if pref_dtype not in (None, x.dtype) else None)
    return r if r.dtype == out_dtype else alax.convert_element_type(r, out_dtype)


def _conv_im2col(ctx: Lowering, eqn: Any, lhs: V, rhs: V) -> Value:
    """conv_general_dilated as im2col: the lhs padded (and dilated by interior padding), one
    strided slice per kernel position stacked into [N, C, K, out...], and one dot_general
    with the kernel [O, C, K] (per feature group)."""
    p = eqn.params
    if p["batch_group_count"] != 1:
        raise ctx.refuse("batch_group_count > 1 (atoll.jax lowers feature groups only)")
    dn = p["dimension_numbers"]
    x, w = ctx.get(lhs), ctx.get(rhs)
    out_dtype = _out_dtype(eqn)
    if x.dtype != w.dtype:
        x = alax.convert_element_type(x, out_dtype)
        w = alax.convert_element_type(w, out_dtype)
    lhs_spec, rhs_spec, out_spec = dn.lhs_spec, dn.rhs_spec, dn.out_spec
    x = alax.transpose(x, lhs_spec) if tuple(lhs_spec) != tuple(range(len(lhs_spec))) else x
    w = alax.transpose(w, rhs_spec) if tuple(rhs_spec) != tuple(range(len(rhs_spec))) else w
    n, c = x.shape[0], x.shape[1]
    o, i = w.shape[0], w.shape[1]
    kernel = list(w.shape[2:])
    k = len(kernel)
    zero = full((), 0, x.dtype)
    config = [(0, 0, 0), (0, 0, 0)] + [
        (int(lo), int(hi), int(ld) - 1)
        for (lo, hi), ld in zip(p["padding"], p["lhs_dilation"])]
    if any(cfg != (0, 0, 0) for cfg in config):
        x = alax.pad(x, zero, config)
    spatial = list(x.shape[2:])
    strides = list(p["window_strides"])
    rd = list(p["rhs_dilation"])
    outs = [_out_size(s, kk, d, st) for s, kk, d, st in zip(spatial, kernel, rd, strides)]
    starts = _window_starts(kernel, rd)
    patches = []
    for st in starts:
        piece = _strided(x, 2, st, outs, strides)  # [N, C, out...]
        patches.append(alax.broadcast_in_dim(piece, [n, c, 1] + outs,
                                             [0, 1] + list(range(3, 3 + k))))
    stacked = patches[0] if len(patches) == 1 else alax.concatenate(patches, 2)
    kk = len(starts)
    wr = alax.reshape(w, [o, i, kk])
    groups = p["feature_group_count"]
    results = []
    og = o // groups
    for g in range(groups):
        xs = stacked if groups == 1 else alax.slice(
            stacked, [0, g * i, 0] + [0] * k, [n, (g + 1) * i, kk] + outs)
        ws = wr if groups == 1 else alax.slice(wr, [g * og, 0, 0], [(g + 1) * og, i, kk])
        results.append(_dot(ctx, V(xs), V(ws), (((1, 2), (1, 2)), ((), ())),
                            p.get("preferred_element_type"), out_dtype))  # [N, out..., Og]
    r = results[0] if groups == 1 else alax.concatenate(results, 1 + k)
    if r.dtype != out_dtype:
        r = alax.convert_element_type(r, out_dtype)
    # [N, out..., O] -> canonical [N, O, out...] -> the out_spec's order.
    canonical = alax.transpose(r, [0, 1 + k] + list(range(1, 1 + k)))
    perm = [0] * len(out_spec)
    for j, d in enumerate(out_spec):
        perm[d] = j
    return alax.transpose(canonical, perm) if perm != list(range(len(perm))) else canonical


def _reduce_window(how: str) -> Rule:
    def lower(ctx: Lowering, eqn: Any, x: V) -> Value:
        p = eqn.params
        v = ctx.get(x)
        dtype = v.dtype
        init = full((), _init_of(dtype, how), dtype)
        config = [(int(lo), int(hi), int(bd) - 1)
                  for (lo, hi), bd in zip(p["padding"], p["base_dilation"])]
        if any(c != (0, 0, 0) for c in config):
            v = alax.pad(v, init, config)
        window, strides = list(p["window_dimensions"]), list(p["window_strides"])
        wd = list(p["window_dilation"])
        outs = [_out_size(s, w, d, st) for s, w, d, st in zip(v.shape, window, wd, strides)]
        acc = None
        for st in _window_starts(window, wd):
            piece = _strided(v, 0, st, outs, strides)
            if acc is None:
                acc = piece
            elif how == "sum":
                acc = _add_values(ctx, acc, piece)
            elif how == "max":
                acc = alax.max(acc, piece)
            else:
                acc = alax.min(acc, piece)
        return acc
    return lower


def _window_pads(p: Any) -> List[Tuple[int, int]]:
    return [(int(lo), int(hi)) for lo, hi in p["padding"]]


def _native_reduce_window(how: str) -> Rule:
    """reduce_window_sum/max/min as the IR's primitives (padding is the reduction's
    identity); bool operands (which the rows lack) are composed (_reduce_window)."""
    composed = _reduce_window(how)
    fn = {"sum": alax.reduce_window_sum, "max": alax.reduce_window_max,
          "min": alax.reduce_window_min}[how]

    def lower(ctx: Lowering, eqn: Any, x: V) -> Value:
        p = eqn.params
        v = ctx.get(x)
        if v.dtype == "bool":
            return composed(ctx, eqn, x)
        return fn(v, p["window_dimensions"], p["window_strides"], _window_pads(p),
                  p["base_dilation"], p["window_dilation"])
    return lower


RULES["reduce_window_sum"] = _native_reduce_window("sum")
RULES["reduce_window_max"] = _native_reduce_window("max")
RULES["reduce_window_min"] = _native_reduce_window("min")


@rule("reduce_window")
def _reduce_window_generic(ctx: Lowering, eqn: Any, *xs: V) -> Value:
    """jax's generic reduce_window (an init value that is not the reduction's identity, or a
    traced one) with the computation add, max or min: as XLA on CPU computes it, the init
    folded once into the reduction of the window's real elements (padding and base
    dilation's holes count for nothing), so the IR's reduction (identity padding) combined
    with the init."""
    p = eqn.params
    if len(xs) != 2:
        raise ctx.refuse("a reduce_window over several operands at once")
    comp = p["jaxpr"]
    comp = getattr(comp, "jaxpr", comp)
    names = [e.primitive.name for e in comp.eqns]
    if len(names) != 1 or names[0] not in ("add", "max", "min"):
        raise ctx.refuse(f"reduce_window with the computation {names or 'of no equation'}: "
                         "atoll's windows reduce with add, max or min")
    how = {"add": "sum", "max": "max", "min": "min"}[names[0]]
    v, init = ctx.get(xs[0]), ctx.get(xs[1])
    if v.dtype == "bool":
        raise ctx.refuse("reduce_window of booleans with a computation of its own")
    args = (p["window_dimensions"], p["window_strides"], _window_pads(p), p["base_dilation"],
            p["window_dilation"])
    fn = {"sum": alax.reduce_window_sum, "max": alax.reduce_window_max,
          "min": alax.reduce_window_min}[how]
    r = fn(v, *args)
    shape = tuple(r.shape)
    if how == "max":
        return alax.max(*align(ctx, eqn, [V(r), V(init)], shape))
    if how == "min":
        return alax.min(*align(ctx, eqn, [V(r), V(init)], shape))
    return _add_values(ctx, *align(ctx, eqn, [V(r), V(init)], shape))


@rule("select_and_scatter_add")
def _select_and_scatter_add(ctx: Lowering, eqn: Any, source: V, operand: V) -> Value:
    """Max (min) pooling's gradient as the IR's primitive (select ge or le, float operands);
    gt/lt selections and integer operands, which its row lacks, are composed
    (_select_and_scatter_composed)."""
    p = eqn.params
    src, op = ctx.get(source), ctx.get(operand)
    select = getattr(p["select_prim"], "name", str(p["select_prim"]))
    if select in ("ge", "le") and op.dtype in _FLOATS and src.dtype == op.dtype:
        return alax.select_and_scatter_add(src, op, select, p["window_dimensions"],
                                           p["window_strides"], _window_pads(p))
    return _select_and_scatter_composed(ctx, eqn, source, operand)


def _select_and_scatter_composed(ctx: Lowering, eqn: Any, source: V, operand: V) -> Value:
    """Max (min) pooling's gradient: in each window, the first element that select_prim
    (ge: the largest) prefers gets the window's source value added, as XLA's SelectAndScatter.
    The winner's position per window is found by a pass over the window's positions; each
    position's share is padded back into place (interior padding = the stride)."""
    p = eqn.params
    src, op = ctx.get(source), ctx.get(operand)
    select = getattr(p["select_prim"], "name", str(p["select_prim"]))
    if select not in ("ge", "le", "gt", "lt"):
        raise ctx.refuse(f"select_and_scatter_add selecting with {select}")
    how = "max" if select in ("ge", "gt") else "min"
    dtype = op.dtype
    pads = [(int(lo), int(hi)) for lo, hi in p["padding"]]
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        raise ctx.refuse("select_and_scatter_add with negative padding")
    init = full((), _init_of(dtype, how), dtype)
    padded = alax.pad(op, init, [(lo, hi, 0) for lo, hi in pads]) if any(
        lo or hi for lo, hi in pads) else op
    window, strides = list(p["window_dimensions"]), list(p["window_strides"])
    outs = list(src.shape)
    starts = _window_starts(window, [1] * len(window))
    best = best_k = None
    cmp = {"ge": alax.ge, "gt": alax.gt, "le": alax.le, "lt": alax.lt}[select]
    for k, st in enumerate(starts):
        piece = _strided(padded, 0, st, outs, strides)
        here = _full_like(ctx, piece, k, "i32")
        if best is None:
            best, best_k = piece, here
            continue
        keep = cmp(best, piece)  # XLA: select(current, candidate) true keeps the current
        best = alax.select_n(keep, piece, best)
        best_k = alax.select_n(keep, here, best_k)
    total = None
    shape = list(padded.shape)
    zero = full((), 0, src.dtype)
    for k, st in enumerate(starts):
        mine = alax.eq(best_k, _full_like(ctx, best_k, k, "i32"))
        share = alax.select_n(mine, _full_like(ctx, src, 0, src.dtype), src)
        config = [(s, size - s - ((o - 1) * stride + 1) if o > 0 else size - s, stride - 1)
                  for s, size, o, stride in zip(st, shape, outs, strides)]
        placed = alax.pad(share, zero, config)
        total = placed if total is None else _add_values(ctx, total, placed)
    if any(lo or hi for lo, hi in pads):
        total = alax.slice(total, [lo for lo, _ in pads],
                           [size - hi for size, (_, hi) in zip(shape, pads)])
    return total


# -- nested jaxprs ------------------------------------------------------------------------------

def _inline(param_names: Sequence[str]) -> Rule:
    def lower(ctx: Lowering, eqn: Any, *xs: V) -> List[V]:
        for n in param_names:
            sub = eqn.params.get(n)
            if sub is not None:
                break
        else:
            raise ctx.refuse(f"no jaxpr among its parameters {sorted(eqn.params)}")
        if hasattr(sub, "jaxpr") and hasattr(sub, "consts"):
            jaxpr, consts = sub.jaxpr, sub.consts
        else:
            jaxpr, consts = sub, ()
        args = list(xs)
        if eqn.primitive.name in ("custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr",
                                  "custom_jvp_call_jaxpr"):
            args = args[len(args) - len(jaxpr.invars):]
        return ctx.lower_jaxpr(jaxpr, consts, args)
    return lower


RULES["pjit"] = _inline(["jaxpr"])
RULES["jit"] = RULES["pjit"]
RULES["closed_call"] = _inline(["call_jaxpr"])
RULES["core_call"] = RULES["closed_call"]
RULES["remat"] = _inline(["jaxpr"])
RULES["remat2"] = RULES["remat"]
RULES["checkpoint"] = RULES["remat"]
RULES["custom_jvp_call"] = _inline(["call_jaxpr"])
RULES["custom_vjp_call"] = _inline(["call_jaxpr", "fun_jaxpr"])
RULES["custom_vjp_call_jaxpr"] = _inline(["fun_jaxpr", "call_jaxpr"])
RULES["custom_jvp_call_jaxpr"] = _inline(["fun_jaxpr", "call_jaxpr"])


def _type_of(v: Value) -> Tuple[str, Tuple[int, ...], Tuple[int, ...]]:
    return (v.dtype, tuple(v.shape), tuple(v.split))


def _joined_cut(ctx: Lowering, a: Sequence[int], b: Sequence[int]) -> Tuple[int, ...]:
    """The layout that cuts every dimension that ``a`` or ``b`` cuts (global form): what a
    loop's carry or a branch's result is given so that each side reaches it with a local
    gather alone. _NeedsCollective where they cut a dimension along two axes (or one axis
    twice), which only an all-gather would reconcile."""
    out = list(a)
    for d, axis in enumerate(b):
        if axis < 0 or out[d] == axis:
            continue
        if out[d] >= 0 or axis in out:
            raise _NeedsCollective(f"a value cut along mesh axis {ctx.axis_name(out[d])} on one "
                                   f"side and {ctx.axis_name(axis)} on the other")
        out[d] = axis
    return tuple(out)


def _to_layout(ctx: Lowering, v: V, target: Sequence[int]) -> Value:
    value = ctx.get(v)
    if tuple(value.split) == tuple(target):
        return value
    return ctx.relayout(v, target)


def _loop_carry(ctx: Lowering, carry: List[Value], trace: Callable[..., Any]) -> Any:
    """Runs ``trace(carry types)`` (which traces a loop's bodies and returns their carry
    results as V, then what it wants kept) until the carry's layout is a fixed point (global
    form: a carry that the body cuts is cut before the loop, with a local gather), then has
    the body's carry results laid out as the carry. Returns (carry, trace's last result)."""
    while True:
        types = [_type_of(c) for c in carry]
        outs, kept = trace(types)
        joined = [_joined_cut(ctx, t[2], ctx.get(o).split) for t, o in zip(types, outs)]
        if all(j == t[2] for j, t in zip(joined, types)):
            return carry, kept
        carry = [c if tuple(c.split) == j else ctx.relayout(V(c), j)
                 for c, j in zip(carry, joined)]


def _dummy_carry(ctx: Lowering) -> Value:
    ctx.ensure_value()
    return full((), 0, "i32")


@rule("while")
def _while(ctx: Lowering, eqn: Any, *xs: V) -> List[Value]:
    """lax.while_loop as the IR's while: the cond and body jaxprs are lowered into bodies that
    run on the device, so the trip count may depend on the data. Their consts are the outer
    values they use (lifted). A body that needs a collective is refused: a while loop cannot
    be unrolled."""
    p = eqn.params
    cj, bj = p["cond_jaxpr"], p["body_jaxpr"]
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cconsts, bconsts = list(xs[:nc]), list(xs[nc:nc + nb])
    init = [ctx.get(x) for x in xs[nc + nb:]]
    dummy = not init
    if dummy:
        init = [_dummy_carry(ctx)]
    scope = ctx.scope_of([ctx.get(x) for x in xs] + init)
    mark = ctx.mark()

    def trace(types: Sequence[Any]) -> Any:
        with ctx.body("while_cond", scope, types) as (cb, ins):
            args = [V(i) for i in (ins[1:] if dummy else ins)]
            (pred,) = ctx.lower_jaxpr(cj.jaxpr, cj.consts, cconsts + args)
        with ctx.body("while_body", scope, types) as (bb, ins):
            args = [V(i) for i in (ins[1:] if dummy else ins)]
            outs = ctx.lower_jaxpr(bj.jaxpr, bj.consts, bconsts + args)
            if dummy:
                outs = [V(ins[0])] + outs
        return outs, (cb, pred, bb, outs, types)

    try:
        init, (cb, pred, bb, outs, types) = _loop_carry(ctx, init, trace)
        pv = ctx.get(pred)
        cb.output(pv)
        for o, t in zip(outs, types):
            bb.output(_to_layout(ctx, o, t[2]))
        ctx.no_collective_since(mark, scope[0])
    except _NeedsCollective as e:
        raise ctx.refuse(f"its cond or body needs a collective ({e}); a loop body runs per "
                         "shard on the device, where atoll allows none, and a while loop cannot "
                         "be unrolled (compute the collective outside the loop, or use lax.scan "
                         "or fori_loop with static bounds, which atoll unrolls then)") from None
    results = _ops.structured("while", [cb, bb], init + list(cb.captured) + list(bb.captured),
                              [len(cb.captured), len(bb.captured)])
    return list(results[1:] if dummy else results)


@rule("cond")
def _cond(ctx: Lowering, eqn: Any, index: V, *xs: V) -> List[Value]:
    """lax.cond and lax.switch as the IR's cond: each branch jaxpr is lowered into a body and
    only the one the index picks runs (an index out of range runs the last, as XLA's; jax
    clamps lax.switch's before). In global form the branches' results are laid out alike (the
    cuts of any, by local gathers). A branch that needs a collective falls back to computing
    every branch and selecting (_cond_selected)."""
    p = eqn.params
    branches = p["branches"]
    if not eqn.outvars:
        return []
    i = ctx.get(index)
    if ctx.mode == "global" and not is_replicated(i):
        raise ctx.refuse("a branch index cut along a mesh axis", suggest_per_shard=True)
    if i.dtype not in ("bool", "i32"):
        i = alax.convert_element_type(i, "i32")
    args = [ctx.get(x) for x in xs]
    types = [_type_of(a) for a in args]
    scope = ctx.scope_of([i] + args)
    mark = ctx.mark()
    try:
        built = []
        for k, b in enumerate(branches):
            with ctx.body(f"cond_branch{k}", scope, types) as (bb, ins):
                outs = ctx.lower_jaxpr(b.jaxpr, b.consts, [V(v) for v in ins])
            built.append((bb, outs))
        targets = []
        for k in range(len(eqn.outvars)):
            t = tuple(ctx.get(built[0][1][k]).split)
            for _, outs in built[1:]:
                t = _joined_cut(ctx, t, ctx.get(outs[k]).split)
            targets.append(t)
        for bb, outs in built:
            for o, t in zip(outs, targets):
                bb.output(_to_layout(ctx, o, t))
        ctx.no_collective_since(mark, scope[0])
    except _NeedsCollective:
        return _cond_selected(ctx, eqn, index, *xs)
    consts = [v for bb, _ in built for v in bb.captured]
    return list(_ops.structured("cond", [bb for bb, _ in built], [i] + args + consts,
                                [len(bb.captured) for bb, _ in built]))


def _cond_selected(ctx: Lowering, eqn: Any, index: V, *xs: V) -> List[Value]:
    """Every branch is computed and the index picks the results (select_n): the value of
    lax.cond and lax.switch, without skipping the branches not taken (the fallback for
    branches that need a collective, which a body of the IR's cond may not hold)."""
    branches = eqn.params["branches"]
    outs = [ctx.lower_jaxpr(b.jaxpr, b.consts, list(xs)) for b in branches]
    i = ctx.get(index)
    if ctx.mode == "global" and not is_replicated(i):
        raise ctx.refuse("a branch index cut along a mesh axis", suggest_per_shard=True)
    n = len(branches)
    if i.dtype not in ("bool", "i32"):
        i = alax.convert_element_type(i, "i32")
    if n == 2 and i.dtype == "i32":
        i = alax.ne(i, full((), 0, "i32"))
    if n > 2:  # select_n's index must be in range: clamp as lax.switch does
        i = alax.clamp(full((), 0, "i32"), i, full((), n - 1, "i32"))
    results = []
    for k in range(len(eqn.outvars)):
        cases = [outs[b][k] for b in range(n)]
        shape = tuple(_out_aval(eqn, k).shape)
        vals = align(ctx, eqn, cases, shape) if shape else [ctx.get(c) for c in cases]
        results.append(alax.select_n(i, *vals))
    return results


@rule("scan")
def _scan(ctx: Lowering, eqn: Any, *xs: V) -> List[Value]:
    """lax.scan (and fori_loop with static bounds) as the IR's scan: the body jaxpr is
    lowered once into a body that runs on the device for each of the length steps (from the
    last with reverse); its consts are the outer values it uses (lifted). In global form the
    carry keeps its cut through the loop (a carry the body cuts is cut before it). A body that
    needs a collective is first tried with its partial sums accumulated per shard
    (_accumulators), then unrolled (_scan_unrolled)."""
    try:
        return _scan_native(ctx, eqn, {}, *xs)
    except _NeedsCollective as e:
        why = str(e)
    accumulate = _accumulators(eqn) if ctx.mode == "global" else {}
    if accumulate:
        try:
            return _scan_native(ctx, eqn, accumulate, *xs)
        except _NeedsCollective as e:
            why = str(e)
    return _scan_unrolled(ctx, eqn, why, *xs)


def _accumulators(eqn: Any) -> Dict[int, Any]:
    """The carries of a scan's body updated as ``carry + t`` where t is a sum (dot_general or
    reduce_sum, through transposes) used nowhere else and the carry nowhere else either:
    the weights' gradient of a data-parallel scan. Global form completes such a sum over a
    cut dimension with an all-reduce per step, which a body may not hold; carried per shard
    un-reduced instead (from zeros), it is all-reduced once after the loop. Returns
    {carry index: the sum's jaxpr variable}."""
    p = eqn.params
    jaxpr = p["jaxpr"].jaxpr
    n_consts = p["num_consts"]
    uses: Dict[Any, int] = {}
    for v in [v for e in jaxpr.eqns for v in e.invars] + list(jaxpr.outvars):
        if not isinstance(v, jcore.Literal):
            uses[v] = uses.get(v, 0) + 1
    made_by = {v: e for e in jaxpr.eqns for v in e.outvars}
    found: Dict[int, Any] = {}
    for j in range(p["num_carry"]):
        carry, out = jaxpr.invars[n_consts + j], jaxpr.outvars[j]
        add = made_by.get(out)
        if (add is None or add.primitive.name not in ("add", "add_any") or
                carry not in add.invars or uses.get(carry) != 1 or uses.get(out) != 1 or
                np.dtype(carry.aval.dtype).kind != "f"):
            continue
        v = add.invars[1] if add.invars[0] is carry else add.invars[0]
        while (uses.get(v) == 1 and v in made_by and
               made_by[v].primitive.name == "transpose"):
            v = made_by[v].invars[0]
        if uses.get(v) == 1 and v in made_by and made_by[v].primitive.name in (
                "dot_general", "reduce_sum"):
            found[j] = v
    return found


def _scan_native(ctx: Lowering, eqn: Any, accumulate: Dict[int, Any], *xs: V) -> List[Value]:
    """The IR's scan (see _scan); the carries of ``accumulate`` start from zeros, their sums
    left partial in the body and completed (and added to the initial carry) after it.
    _NeedsCollective where the body still needs one."""
    p = eqn.params
    body = p["jaxpr"]
    n_consts, n_carry = p["num_consts"], p["num_carry"]
    length, reverse = int(p["length"]), bool(p["reverse"])
    consts = list(xs[:n_consts])
    init = [ctx.get(x) for x in xs[n_consts:n_consts + n_carry]]
    given = list(init)
    for j in accumulate:
        init[j] = full(tuple(init[j].shape), 0, init[j].dtype)
    seqs = [ctx.get(x) for x in xs[n_consts + n_carry:]]
    if ctx.mode == "global":
        for s in seqs:
            if len(s.shape) and s.split[0] >= 0:
                raise ctx.refuse(f"a scan over a dimension cut along mesh axis "
                                 f"{ctx.axis_name(s.split[0])}", suggest_per_shard=True)
    dummy = not init and not seqs
    if dummy:
        init = [_dummy_carry(ctx)]
    rows = [(s.dtype, tuple(s.shape[1:]), tuple(s.split[1:])) for s in seqs]
    scope = ctx.scope_of([ctx.get(x) for x in consts] + init + seqs)
    mark = ctx.mark()

    def trace(types: Sequence[Any]) -> Any:
        with ctx.body("scan_body", scope, list(types) + rows) as (bb, ins), \
                ctx.deferring(accumulate.values()):
            carry_in = ins[:len(types)]
            args = [V(v) for v in (carry_in[1:] if dummy else carry_in)]
            outs = ctx.lower_jaxpr(body.jaxpr, body.consts,
                                   consts + args + [V(v) for v in ins[len(types):]])
            if dummy:
                outs = [V(carry_in[0])] + outs
        n = len(types)
        return outs[:n], (bb, outs, types)

    init, (bb, outs, types) = _loop_carry(ctx, init, trace)
    n = len(types)
    for o, t in zip(outs[:n], types):
        bb.output(_to_layout(ctx, o, t[2]))
    for o in outs[n:]:
        bb.output(ctx.get(o))
    ctx.no_collective_since(mark, scope[0])
    results = list(_ops.structured("scan", [bb], init + seqs + list(bb.captured),
                                   [len(init), len(bb.captured), length, int(reverse)]))
    if dummy:
        results = results[1:]
    for j, var in accumulate.items():  # the per-shard sums, all-reduced once
        total = ctx.complete(results[j], ctx.deferred.get(var, []), "sum")
        shape = tuple(total.shape)
        results[j] = alax.add(*align(ctx, eqn, [V(given[j]), V(total)], shape))
    return results


def _scan_unrolled(ctx: Lowering, eqn: Any, why: str, *xs: V) -> List[Value]:
    """lax.scan unrolled: the body is lowered once per step (the length is static): the
    fallback for a body that needs a collective ``why``, which a body of the IR's scan may
    not hold."""
    p = eqn.params
    body = p["jaxpr"]
    n_consts, n_carry = p["num_consts"], p["num_carry"]
    length, reverse = p["length"], p["reverse"]
    consts = list(xs[:n_consts])
    carry = list(xs[n_consts:n_consts + n_carry])
    seqs = [ctx.get(x) for x in xs[n_consts + n_carry:]]
    if ctx.mode == "global":
        for s in seqs:
            if len(s.shape) and s.split[0] >= 0:
                raise ctx.refuse(f"a scan over a dimension cut along mesh axis "
                                 f"{ctx.axis_name(s.split[0])}", suggest_per_shard=True)
    if length > 4096:
        raise ctx.refuse(f"a scan of {length} steps whose body needs a collective ({why}): a "
                         "loop body runs per shard on the device, where atoll allows none, and "
                         "atoll.jax unrolls such scans only up to 4096 steps")
    ys_steps: List[List[Value]] = []
    order = range(length - 1, -1, -1) if reverse else range(length)
    for t in order:
        step_xs = []
        for s in seqs:
            shape = list(s.shape)
            start = [t] + [0] * (len(shape) - 1)
            limit = [t + 1] + shape[1:]
            piece = alax.slice(s, start, limit)
            step_xs.append(V(alax.reshape(piece, shape[1:])))
        outs = ctx.lower_jaxpr(body.jaxpr, body.consts, consts + carry + step_xs)
        carry = outs[:n_carry]
        ys_steps.append([ctx.get(o) for o in outs[n_carry:]])
    if reverse:
        ys_steps.reverse()
    ys = []
    for k in range(len(eqn.outvars) - n_carry):
        shape = tuple(_out_aval(eqn, n_carry + k).shape)
        parts = [alax.broadcast_in_dim(step[k], (1,) + shape[1:],
                                       tuple(range(1, len(shape)))) for step in ys_steps]
        if ctx.mode == "global":
            target = [-1] + list(parts[0].split[1:])
            parts = [p if tuple(p.split) == tuple(target) else ctx.relayout(V(p), target)
                     for p in parts]
        ys.append(parts[0] if len(parts) == 1 else alax.concatenate(parts, 0))
    return [ctx.get(c) for c in carry] + ys


# -- random numbers ------------------------------------------------------------------------------

@rule("random_wrap")
def _random_wrap(ctx: Lowering, eqn: Any, x: V) -> V:
    impl = eqn.params.get("impl")
    if "fry" not in str(impl):
        raise ctx.refuse(f"the PRNG implementation {impl} (atoll lowers threefry2x32 keys)")
    return x


@rule("random_unwrap")
def _random_unwrap(ctx: Lowering, eqn: Any, x: V) -> V:
    return x


@rule("random_seed")
def _random_seed(ctx: Lowering, eqn: Any, seed: V) -> List[V]:
    """jax.random.PRNGKey / key: threefry's seeding, traced from jax's implementation."""
    from jax._src.random import threefry2x32 as fry  # noqa: PLC0415
    impl = eqn.params.get("impl")
    if "fry" not in str(impl):
        raise ctx.refuse(f"the PRNG implementation {impl} (atoll lowers threefry2x32 keys)")
    aval = eqn.invars[0].aval
    closed = jax.make_jaxpr(fry.threefry_prng_impl.seed)(
        jax.ShapeDtypeStruct(tuple(aval.shape), aval.dtype))
    return ctx.lower_jaxpr(closed.jaxpr, closed.consts, [seed])


@rule("random_bits", "random_split", "random_fold_in")
def _random(ctx: Lowering, eqn: Any, *xs: V) -> List[V]:
    """The key's threefry2x32 computation, traced from jax's own implementation and lowered
    like any jaxpr (uint32 arithmetic), so the bits are jax.random's."""
    from jax._src.random import threefry2x32 as fry  # noqa: PLC0415
    impl = fry.threefry_prng_impl
    name = eqn.primitive.name
    p = eqn.params
    key_shape = tuple(ctx.get(xs[0]).shape)
    if key_shape[-1:] != (2,):
        raise ctx.refuse(f"keys of shape {key_shape[:-1]} with data {key_shape[-1:]} (atoll.jax "
                         "lowers threefry2x32 keys)")
    batch = key_shape[:-1]  # an array of keys (jax.vmap over keys): jax's rule, vmapped
    key = jax.ShapeDtypeStruct(key_shape, np.uint32)
    if name == "random_bits":
        fn = lambda k: impl.random_bits(k, p["bit_width"], p["shape"])  # noqa: E731
    elif name == "random_split":
        fn = lambda k: impl.split(k, p["shape"])  # noqa: E731
    else:
        fn = impl.fold_in
    if name == "random_fold_in":
        aval = eqn.invars[1].aval
        data_shape = tuple(aval.shape)
        if data_shape not in ((), batch):
            raise ctx.refuse(f"fold_in of data {data_shape} into keys {batch}")
        for _ in batch:  # one datum for all the keys, or one each
            fn = jax.vmap(fn, in_axes=(0, None if data_shape == () else 0))
        closed = jax.make_jaxpr(fn)(key, jax.ShapeDtypeStruct(data_shape, aval.dtype))
    else:
        for _ in batch:
            fn = jax.vmap(fn)
        closed = jax.make_jaxpr(fn)(key)
    return ctx.lower_jaxpr(closed.jaxpr, closed.consts, list(xs))


@rule("iota_2x32_shape")
def _iota_2x32_shape(ctx: Lowering, eqn: Any) -> List[Value]:
    """The row-major position of each element of ``shape`` as 64 bits: (high, low) u32."""
    ctx.ensure_value()
    return list(iota_2x32(eqn.params["shape"]))


@rule("threefry2x32")
def _threefry2x32(ctx: Lowering, eqn: Any, *xs: V) -> List[V]:
    from jax._src.random import threefry2x32 as fry  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    avals = [jax.ShapeDtypeStruct(tuple(v.aval.shape), v.aval.dtype) for v in eqn.invars]
    out_shape = tuple(_out_aval(eqn).shape)

    def traced(*args):  # noqa: ANN002, ANN202
        args = [jnp.broadcast_to(a, out_shape) for a in args]
        return fry._threefry2x32_lowering(*args, use_rolled_loops=False)

    closed = jax.make_jaxpr(traced)(*avals)
    return ctx.lower_jaxpr(closed.jaxpr, closed.consts, list(xs))


# -- collectives (local mode: the body of a shard_map) ---------------------------------------------

def _need_local(ctx: Lowering) -> None:
    if ctx.mode != "local":
        raise ctx.refuse("a collective outside a shard_map (write the function per shard: "
                         "atoll.jax.shard_map or jit(..., per_shard=True))")


def _axes_param(eqn: Any) -> Tuple[Any, ...]:
    axes = eqn.params.get("axes", eqn.params.get("axis_name"))
    return tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)


def _all_reduce(how: str) -> Rule:
    def lower(ctx: Lowering, eqn: Any, *xs: V) -> List[Value]:
        _need_local(ctx)
        if eqn.params.get("axis_index_groups") is not None:
            raise ctx.refuse("axis_index_groups (atoll's groups are whole mesh axes)")
        outs = []
        for x in xs:
            v = ctx.get(x)
            for name in _axes_param(eqn):
                if isinstance(name, int):
                    raise ctx.refuse("positional axes (vmap) in a collective")
                a = ctx.axis_of(name)
                if how == "sum":
                    if v.dtype == "bool":
                        raise ctx.refuse("psum of booleans")
                    v = _ops.all_reduce_sum(v, a)
                elif how == "max":
                    v = _ops.all_reduce_max(v, a)
                else:
                    v = _ops.all_reduce_min(v, a)
            outs.append(v)
        return outs
    return lower


RULES["psum"] = _all_reduce("sum")
RULES["psum_invariant"] = RULES["psum"]
RULES["psum2"] = RULES["psum"]
RULES["pmax"] = _all_reduce("max")
RULES["pmin"] = _all_reduce("min")


@rule("pbroadcast")
def _pbroadcast(ctx: Lowering, eqn: Any, *xs: V) -> List[V]:
    return list(xs)


@rule("axis_index")
def _axis_index(ctx: Lowering, eqn: Any) -> Value:
    _need_local(ctx)
    return ctx.coordinate(ctx.axis_of(eqn.params["axis_name"]))


def _move(v: Value, src: int, dst: int) -> Value:
    """Dimension src of v moved to position dst."""
    rank = len(v.shape)
    order = [d for d in range(rank) if d != src]
    order.insert(dst, src)
    if order == list(range(rank)):
        return v
    return alax.transpose(v, order)


@rule("all_gather")
def _all_gather(ctx: Lowering, eqn: Any, x: V) -> Value:
    _need_local(ctx)
    p = eqn.params
    if p.get("axis_index_groups") is not None:
        raise ctx.refuse("axis_index_groups (atoll's groups are whole mesh axes)")
    a = ctx.axis_of(p["axis_name"])
    v = ctx.get(x)
    n = ctx.mesh_shape[a]
    shape = tuple(v.shape)
    stacked = ctx.stacked_from_local(v, (a,) + (-1,) * len(shape))  # [n, *shape] cut on 0
    whole = _ops.all_gather(stacked, a)  # [n, *shape], each device all of them
    d = p["all_gather_dimension"]
    moved = _move(whole, 0, d)  # [..., n, shape[d], ...]
    if p["tiled"]:
        new = list(shape)
        new[d] = shape[d] * n
        return alax.reshape(moved, new)
    return moved


RULES["all_gather_invariant"] = _all_gather


@rule("reduce_scatter")
def _reduce_scatter(ctx: Lowering, eqn: Any, x: V) -> Value:
    _need_local(ctx)
    p = eqn.params
    if p.get("axis_index_groups") is not None:
        raise ctx.refuse("axis_index_groups (atoll's groups are whole mesh axes)")
    a = ctx.axis_of(p["axis_name"])
    v = ctx.get(x)
    n = ctx.mesh_shape[a]
    d = p["scatter_dimension"]
    shape = list(v.shape)
    moved = _move(v, d, 0)  # [shape[d], ...rest]
    rest = [s for i, s in enumerate(shape) if i != d]
    blocks = alax.reshape(moved, [n, shape[d] // n] + rest) if p["tiled"] else moved
    scattered = _ops.reduce_scatter(blocks, a, 0)  # cut on 0 along a: this device's block
    local = ctx.local_from_stacked(scattered, 1)  # [shape[d] // n, *rest] or [*rest]
    if p["tiled"]:
        return _move(local, 0, d)
    return local


@rule("ppermute")
def _ppermute(ctx: Lowering, eqn: Any, x: V) -> Value:
    _need_local(ctx)
    a = ctx.axis_of(eqn.params["axis_name"])
    pairs = [(int(s), int(t)) for s, t in eqn.params["perm"]]
    return _ops.collective_permute(ctx.get(x), a, pairs)


@rule("all_to_all")
def _all_to_all(ctx: Lowering, eqn: Any, x: V) -> Value:
    _need_local(ctx)
    p = eqn.params
    if p.get("axis_index_groups") is not None:
        raise ctx.refuse("axis_index_groups (atoll's groups are whole mesh axes)")
    a = ctx.axis_of(p["axis_name"])
    v = ctx.get(x)
    n = ctx.mesh_shape[a]
    s, c = p["split_axis"], p["concat_axis"]
    shape = list(v.shape)
    rank = len(shape)
    moved = _move(v, s, 0)
    rest = [shape[i] for i in range(rank) if i != s]
    chunks = alax.reshape(moved, [n, shape[s] // n] + rest)  # [n chunks, chunk, *rest]
    spec = (a,) + (-1,) * (rank + 1)
    stacked = ctx.stacked_from_local(chunks, spec)  # [n members, n chunks, chunk, *rest]
    swapped = _ops.all_to_all(stacked, a, 1)  # cut on the chunks: this device's chunk of all
    local = ctx.local_from_stacked(_move(swapped, 1, 0), 1)  # [n members, chunk, *rest]
    # local[j] is member j's chunk for this device: joined along the concat dimension.
    block = list(shape)
    block[s] = shape[s] // n  # one chunk, in the original dimension order
    # local is [n, chunk_s, *rest]; put the chunk dimension back at s: [n, *block]
    per_member = _move(local, 1, s + 1)  # [n, *block]
    joined = _move(per_member, 0, c)  # [..., n, block[c], ...]
    out = list(block)
    out[c] = block[c] * n
    return alax.reshape(joined, out)


# -- shard_map -------------------------------------------------------------------------------------

def spec_axes(ctx: Lowering, spec: Any, rank: int, what: str = "a value") -> Tuple[int, ...]:
    """A PartitionSpec as a mesh axis (or -1) per dimension. Refused (naming ``what``, and
    inside a function the primitive and the user's line): a dimension cut over several mesh
    axes at once (P(("data", "model"))), which atoll's types cannot say."""
    def refuse(text: str) -> LoweringError:
        text = f"{what} with PartitionSpec {spec}: {text}"
        return ctx.refuse(text) if ctx.eqn is not None else LoweringError(text)

    out = [-1] * rank
    for d, entry in enumerate(tuple(spec) if spec is not None else ()):
        if entry is None:
            continue
        names = entry if isinstance(entry, (tuple, list)) else (entry,)
        if len(names) == 0:
            continue
        if len(names) != 1:
            raise refuse(f"dimension {d} is cut over several mesh axes at once "
                         f"{tuple(names)}, which atoll does not support: it cuts a dimension "
                         "along one mesh axis per dimension (cut two dimensions, e.g. "
                         "P('data', 'model'), or reshape this one into two)")
        if names[0] not in ctx.axis_names:
            raise refuse(f"no mesh axis named {names[0]!r} (the mesh has {ctx.axis_names})")
        out[d] = ctx.axis_names.index(names[0])
    return tuple(out)


@rule("shard_map")
def _shard_map(ctx: Lowering, eqn: Any, *xs: V) -> List[V]:
    p = eqn.params
    body = p["jaxpr"]
    if ctx.mode != "global":
        raise ctx.refuse("a shard_map inside a shard_map")
    locals_ = []
    for i, (x, spec, var) in enumerate(zip(xs, p["in_specs"], eqn.invars)):
        axes = spec_axes(ctx, spec, len(var.aval.shape), f"the shard_map's operand {i}")
        rank = len((x.local if x.local is not None else ctx.get(x)).shape)
        axes += (-1,) * (rank - len(axes))  # an array of PRNG keys: its data's trailing [2]
        if x.local is not None and tuple(x.spec) == axes:
            locals_.append(V(x.local))
        else:
            locals_.append(V(ctx.local_from_global(ctx.get(x), axes)))
    consts = getattr(body, "consts", ())
    jaxpr = getattr(body, "jaxpr", body)
    ctx.mode = "local"
    try:
        outs = ctx.lower_jaxpr(jaxpr, consts, locals_)
    finally:
        ctx.mode = "global"
    results = []
    for i, (o, spec, var) in enumerate(zip(outs, p["out_specs"], eqn.outvars)):
        axes = spec_axes(ctx, spec, len(var.aval.shape), f"the shard_map's result {i}")
        local = ctx.get(o)
        results.append(V(None, local=local, spec=axes + (-1,) * (len(local.shape) - len(axes))))
    return results

