"""atoll.jax's user-facing side: meshes, jit / shard_map over them, and arrays that stay in
the object stores."""

from __future__ import annotations

import collections
import contextvars
import functools
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec

from .. import _atoll
from .._client import Client, Future, Slice
from .._tracing import Function, Program, tracing_function
from .._types import TensorType, dtype_named
from ._lowering import Lowering, LoweringError, V, atoll_dtype, spec_axes

P = PartitionSpec

# How many times an Array's value was read back into this process (np.asarray and the
# like): a training loop's parameters should never be.
fetches = collections.Counter()



def _contiguous(a: np.ndarray) -> np.ndarray:
    """C-contiguous, keeping a 0-d array 0-d (np.ascontiguousarray makes it 1-d)."""
    return np.require(a, requirements="C")

# ---------------------------------------------------------------------------------------------
# Meshes

@dataclass(frozen=True)
class Device:
    """One of a mesh's atoll virtual devices: its slice and coordinates on the mesh."""
    slice_id: int
    coords: Tuple[int, ...]
    id: int

    def __repr__(self) -> str:
        return f"atoll.jax.Device(slice {self.slice_id}, {self.coords})"


class Mesh:
    """Devices of one atoll slice (asked of the RM) as a named mesh, as jax.sharding.Mesh::

        mesh = atoll.jax.Mesh(client, (2, 2), ("data", "model"))

    ``shape`` maps axis names to sizes (an OrderedDict, as jax's), ``axis_names`` is the
    names, ``devices`` a numpy array of Device of the mesh's shape."""

    def __init__(self, client: Client, shape: Union[int, Sequence[int]],
                 axis_names: Union[str, Sequence[str]], island: Optional[str] = None,
                 *, slice: Optional[Slice] = None) -> None:  # noqa: A002
        shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if len(shape) != len(names) or len(set(names)) != len(names):
            raise ValueError(f"Mesh: {len(shape)} sizes {shape} need as many distinct axis "
                             f"names, got {names}")
        self.client = client
        self.slice = slice if slice is not None else client.mesh(shape, island)
        self.axis_names = names
        self.axis_sizes = shape
        self.shape = collections.OrderedDict(zip(names, shape))
        self.size = int(np.prod(shape))
        devices = np.empty(shape, dtype=object)
        for i, coords in enumerate(np.ndindex(*shape)):
            devices[coords] = Device(self.slice.id, tuple(coords), i)
        self.devices = devices
        self.abstract_mesh = jax.sharding.AbstractMesh(shape, names)

    @property
    def island(self) -> str:
        return self.slice.island

    def __repr__(self) -> str:
        return (f"atoll.jax.Mesh({dict(self.shape)}, slice {self.slice.id} on "
                f"{self.slice.island})")


@dataclass(frozen=True)
class NamedSharding:
    """How an Array is laid over a mesh: jax.sharding.NamedSharding's mesh and spec."""
    mesh: Mesh
    spec: PartitionSpec

    def __repr__(self) -> str:
        return f"NamedSharding(mesh={dict(self.mesh.shape)}, spec={self.spec})"


# ---------------------------------------------------------------------------------------------
# Layouts: how an Array's global value is stored.
#  "natural": the stored tensor is the global value, dimension d cut along axes[d].
#  "stacked": [mesh size of each cut dimension's axis..., *block shape], the leading
#             dimensions cut along those axes: each device's block (what shard_map's body
#             takes and gives, with no communication).

@dataclass(frozen=True)
class Layout:
    kind: str  # "natural" or "stacked"
    axes: Tuple[int, ...]  # per global dimension, the mesh axis it is cut along, or -1

    def __post_init__(self) -> None:
        if self.kind == "stacked" and all(a < 0 for a in self.axes):
            object.__setattr__(self, "kind", "natural")  # one layout when nothing is cut

    def cut(self) -> List[int]:
        return [d for d, a in enumerate(self.axes) if a >= 0]

    def stored(self, shape: Tuple[int, ...], mesh_shape: Tuple[int, ...]
               ) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
        """The stored shape and split."""
        if self.kind == "natural" or not self.cut():
            return shape, self.axes
        cut = self.cut()
        block = tuple(s // mesh_shape[self.axes[d]] if self.axes[d] >= 0 else s
                      for d, s in enumerate(shape))
        return (tuple(mesh_shape[self.axes[d]] for d in cut) + block,
                tuple(self.axes[d] for d in cut) + (-1,) * len(shape))

    def to_stored(self, array: np.ndarray, mesh_shape: Tuple[int, ...]) -> np.ndarray:
        if self.kind == "natural" or not self.cut():
            return array
        cut = self.cut()
        split_shape: List[int] = []
        for d, s in enumerate(array.shape):
            if self.axes[d] >= 0:
                n = mesh_shape[self.axes[d]]
                split_shape += [n, s // n]
            else:
                split_shape.append(s)
        a = array.reshape(split_shape)
        # positions of the mesh dims in split_shape
        pos, mesh_pos, block_pos = 0, [], []
        for d in range(array.ndim):
            if self.axes[d] >= 0:
                mesh_pos.append(pos)
                block_pos.append(pos + 1)
                pos += 2
            else:
                block_pos.append(pos)
                pos += 1
        del cut
        return _contiguous(a.transpose(mesh_pos + block_pos))

    def from_stored(self, stored: np.ndarray, shape: Tuple[int, ...]) -> np.ndarray:
        if self.kind == "natural" or not self.cut():
            return stored
        k = len(self.cut())
        rank = len(shape)
        # stored: [m_0 .. m_k-1, b_0 .. b_rank-1] -> interleave m_j before its block dim.
        order, j = [], 0
        for d in range(rank):
            if self.axes[d] >= 0:
                order.append(j)
                j += 1
            order.append(k + d)
        return _contiguous(stored.transpose(order)).reshape(shape)


# ---------------------------------------------------------------------------------------------
# Arrays

class Array:
    """A result of an atoll.jax function: a future whose shards stay in the object stores.

    Passing it to a later call feeds the stores' shards to that computation directly;
    ``np.asarray(a)`` (or ``jax.device_get``) reads it back. ``.shape``, ``.dtype``,
    ``.sharding``, ``.block_until_ready()``, ``.delete()``."""

    def __init__(self, future: Future, shape: Tuple[int, ...], dtype: np.dtype, mesh: Mesh,
                 spec: PartitionSpec, layout: Layout) -> None:
        self._future: Optional[Future] = future
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.mesh = mesh
        self.spec = spec
        self.layout = layout
        self._value: Optional[np.ndarray] = None

    @property
    def sharding(self) -> NamedSharding:
        return NamedSharding(self.mesh, self.spec)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def future(self) -> Future:
        if self._future is None:
            raise RuntimeError("this atoll.jax.Array was deleted (or donated to a call)")
        return self._future

    def _fetch(self, timeout: Optional[float] = None) -> np.ndarray:
        if self._value is None:
            stored = self.future.result(timeout)
            fetches["arrays"] += 1
            value = self.layout.from_stored(np.asarray(stored), self.shape)
            self._value = value.reshape(self.shape).astype(self.dtype, copy=False)
        return self._value

    def block_until_ready(self) -> "Array":
        """Waits until the value exists (it is read back: atoll's futures have no wait
        without a read)."""
        self._fetch()
        return self

    def delete(self) -> None:
        """Lets the stores free the value (once no other reference to its run is left)."""
        self._future = None
        self._value = None

    def is_deleted(self) -> bool:
        return self._future is None

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        value = self._fetch()
        return value if dtype is None else value.astype(dtype)

    def __jax_array__(self) -> Any:
        """jnp functions on an Array read it back (jnp.asarray(a), jnp.sum(a), ...)."""
        return jnp.asarray(self._fetch())

    def __len__(self) -> int:
        return self.shape[0]

    def __float__(self) -> float:
        return float(self._fetch())

    def __int__(self) -> int:
        return int(self._fetch())

    def item(self) -> Any:
        return self._fetch().item()

    def __repr__(self) -> str:
        return (f"atoll.jax.Array({self.dtype}{list(self.shape)}, spec={self.spec}, "
                f"{'deleted' if self._future is None else 'in the stores'})")


# ---------------------------------------------------------------------------------------------
# jit

@dataclass
class _Compiled:
    function: Function
    in_layouts: List[Layout]
    in_dtypes: List[np.dtype]
    in_shapes: List[Tuple[int, ...]]
    hidden: List[np.ndarray]
    out_tree: Any
    out_avals: List[Any]
    out_layouts: List[Layout]
    out_specs: List[PartitionSpec]
    num_outputs: int
    jaxpr: Any
    collectives: Tuple[str, ...]  # the collectives of one run, in order (Lowering.collectives)


def _is_spec(x: Any) -> bool:
    return x is None or isinstance(x, PartitionSpec)


def _spec_leaves(specs: Any, tree: Any, what: str) -> List[PartitionSpec]:
    """The spec of each leaf of ``tree``: ``specs`` is a pytree prefix of it (jax's rule;
    None means P())."""
    try:
        full = jax.tree.broadcast(specs, tree, is_leaf=_is_spec)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{what} {specs!r} is not a pytree prefix of the values: {e}") from None
    flat = jax.tree_util.tree_leaves(full, is_leaf=_is_spec)
    if len(flat) != len(jax.tree_util.tree_leaves(tree)):
        raise ValueError(f"{what} {specs!r} is not a pytree prefix of the values")
    return [s if s is not None else P() for s in flat]


class Jitted:
    """A function traced with JAX and lowered to atoll once per input signature (see
    atoll.jax.jit)."""

    def __init__(self, fun: Callable[..., Any], mesh: Mesh, in_specs: Any, out_specs: Any,
                 static_argnums: Sequence[int], donate_argnums: Sequence[int], per_shard: bool,
                 check_vma: bool) -> None:
        self.fun = fun
        self.mesh = mesh
        self.in_specs = in_specs
        self.out_specs = out_specs
        self.static_argnums = tuple(static_argnums)
        self.donate_argnums = tuple(donate_argnums)
        self.per_shard = per_shard
        self.check_vma = check_vma
        self._cache: Dict[Any, _Compiled] = {}
        self._lock = threading.Lock()
        functools.update_wrapper(self, fun)  # type: ignore[arg-type]

    # -- tracing --------------------------------------------------------------------------------
    def _split_args(self, args: Sequence[Any]) -> Tuple[Tuple[Any, ...], List[Any]]:
        static = tuple((i, args[i]) for i in self.static_argnums if i < len(args))
        dynamic = [a for i, a in enumerate(args) if i not in self.static_argnums]
        return static, dynamic

    def _dyn_fun(self, static: Tuple[Tuple[int, Any], ...], nargs: int) -> Callable[..., Any]:
        static_at = dict(static)

        def dyn(*dynamic: Any) -> Any:
            it = iter(dynamic)
            full = [static_at[i] if i in static_at else next(it) for i in range(nargs)]
            return self.fun(*full)

        return dyn

    def _in_specs_for(self, dynamic: List[Any]) -> List[PartitionSpec]:
        specs = self.in_specs
        if isinstance(specs, list):
            specs = tuple(specs)
        if _is_spec(specs):
            return _spec_leaves(specs, dynamic, "in_specs")
        if isinstance(specs, tuple) and len(specs) != len(dynamic):
            raise ValueError(f"in_specs has {len(specs)} entries for {len(dynamic)} (non-static) "
                             "arguments")
        out: List[PartitionSpec] = []
        for s, a in zip(specs, dynamic):
            out += _spec_leaves(s, a, "in_specs")
        return out

    def lower(self, *args: Any) -> _Compiled:
        """The compiled function for these arguments (traced and registered on a miss)."""
        static, dynamic = self._split_args(args)
        leaves, treedef = jax.tree_util.tree_flatten(dynamic)
        in_specs = self._in_specs_for(dynamic)
        sig = []
        for leaf, spec in zip(leaves, in_specs):
            shape, dtype = _aval_of(leaf)
            sig.append((shape, str(dtype), tuple(spec)))
        try:
            key = (static, treedef, tuple(sig))
            hash(key)
        except TypeError:
            key = (repr(static), treedef, tuple(sig))
        with self._lock:
            compiled = self._cache.get(key)
            if compiled is None:
                compiled = self._trace(static, len(args), dynamic, leaves, treedef, in_specs)
                self._cache[key] = compiled
        return compiled

    def _trace(self, static: Tuple[Tuple[int, Any], ...], nargs: int, dynamic: List[Any],
               leaves: List[Any], treedef: Any, in_specs: List[PartitionSpec]) -> _Compiled:
        mesh = self.mesh
        avals = []
        for leaf in leaves:
            shape, dtype = _aval_of(leaf)
            avals.append(jax.ShapeDtypeStruct(shape, dtype))
        abstract = jax.tree_util.tree_unflatten(treedef, avals)
        dyn = self._dyn_fun(static, nargs)
        name = getattr(self.fun, "__name__", "jitted")
        if self.per_shard:
            spec_tree = jax.tree_util.tree_unflatten(treedef, in_specs)
            target = jax.shard_map(dyn, mesh=mesh.abstract_mesh, in_specs=tuple(spec_tree),
                                   out_specs=self.out_specs, check_vma=self.check_vma)
        else:
            target = dyn
        closed, out_shape = jax.make_jaxpr(target, return_shape=True)(*abstract)
        out_leaves, out_tree = jax.tree_util.tree_flatten(out_shape)
        out_specs = _spec_leaves(self.out_specs, out_shape, "out_specs")

        builder = _atoll.FunctionBuilder(name)
        ctx = Lowering(builder, mesh.axis_sizes, mesh.axis_names)
        token = tracing_function.set(None)
        try:
            args: List[V] = []
            in_layouts: List[Layout] = []
            in_types: List[TensorType] = []
            in_stored: List[Tuple[Tuple[int, ...], np.dtype]] = []
            for i, (aval, spec) in enumerate(zip(avals, in_specs)):
                axes = spec_axes(ctx, spec, len(aval.shape), f"argument {i} (in_specs)")
                _check_divides(mesh, aval.shape, axes, "argument")
                data_shape, data_dtype = _data_aval(aval)  # a PRNG key array: its u32 data
                axes = axes + (-1,) * (len(data_shape) - len(aval.shape))
                in_stored.append((data_shape, data_dtype))
                layout = Layout("stacked" if self.per_shard else "natural", axes)
                shape, split = layout.stored(data_shape, mesh.axis_sizes)
                dtype = atoll_dtype(data_dtype)
                value = ctx.input(dtype, shape, split)
                in_layouts.append(layout)
                in_types.append(TensorType(dtype_named(dtype), shape).axes(
                    *[None if a < 0 else a for a in split]))
                if layout.kind == "stacked" and layout.cut():
                    args.append(V(None, local=ctx.local_from_stacked(value, len(layout.cut())),
                                  spec=axes))
                elif self.per_shard:
                    args.append(V(value, local=value, spec=axes))
                else:
                    args.append(V(value))
            outs = ctx.lower_jaxpr(closed.jaxpr, closed.consts, args)
            out_layouts: List[Layout] = []
            for i, (o, aval, spec) in enumerate(zip(outs, out_leaves, out_specs)):
                axes = spec_axes(ctx, spec, len(aval.shape), f"result {i} (out_specs)")
                _check_divides(mesh, aval.shape, axes, "result")
                axes = axes + (-1,) * (len(_data_aval(aval)[0]) - len(aval.shape))
                if o.local is not None and tuple(o.spec or ()) == axes:
                    # A shard_map's result: the devices' blocks, stacked (no communication).
                    builder.output(ctx.stacked_from_local(o.local, axes))
                    out_layouts.append(Layout("stacked", axes))
                else:
                    value = ctx.get(o)
                    if tuple(value.split) != axes:
                        value = ctx.relayout(o, axes)
                    builder.output(value)
                    out_layouts.append(Layout("natural", axes))
            hidden = [h.array for h in ctx.hidden]
            for h in ctx.hidden:
                in_types.append(TensorType(dtype_named(atoll_dtype(h.array.dtype)),
                                           tuple(h.array.shape)).axes(
                    *[None if a < 0 else a for a in h.axes]))
            collectives = ctx.collectives()
        finally:
            tracing_function.reset(token)
        compiled_fn = mesh.client._client.register(builder, mesh.slice._slice)
        function = Function(compiled_fn, mesh.slice, tuple(in_types), len(outs), True)
        return _Compiled(function, in_layouts, [d for _, d in in_stored],
                         [s for s, _ in in_stored], hidden, out_tree,
                         [jax.ShapeDtypeStruct(*_data_aval(a)) for a in out_leaves],
                         out_layouts, out_specs, len(outs), closed, collectives)

    # -- calls ----------------------------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        state = _program_state.get()
        if state is not None:
            return state.call(self, args)
        compiled = self.lower(*args)
        _, dynamic = self._split_args(args)
        leaves = jax.tree_util.tree_leaves(dynamic)
        wire: List[Any] = []
        for leaf, layout, dtype, shape in zip(leaves, compiled.in_layouts, compiled.in_dtypes,
                                              compiled.in_shapes):
            wire.append(self._argument(leaf, layout, dtype, shape))
        wire += compiled.hidden
        client = self.mesh.client
        run = client.run(compiled.function, *wire)
        outs = []
        for i, (aval, layout, spec) in enumerate(zip(compiled.out_avals, compiled.out_layouts,
                                                     compiled.out_specs)):
            outs.append(Array(run.output(i), tuple(aval.shape), np.dtype(aval.dtype), self.mesh,
                              spec, layout))
        if self.donate_argnums:
            for i in self.donate_argnums:
                if i < len(args):
                    for leaf in jax.tree_util.tree_leaves(args[i]):
                        if isinstance(leaf, Array):
                            leaf.delete()
        return jax.tree_util.tree_unflatten(compiled.out_tree, outs)

    def _argument(self, leaf: Any, layout: Layout, dtype: np.dtype,
                  shape: Tuple[int, ...]) -> Any:
        if isinstance(leaf, Array):
            if leaf.mesh.slice.id == self.mesh.slice.id:
                if leaf.layout == layout:
                    return leaf.future
                return _relaid(leaf, layout)  # another layout: converted in the stores
            value = np.asarray(leaf)  # another slice: through this process
        elif _is_key_array(leaf):
            value = np.asarray(jax.random.key_data(leaf))
        else:
            value = np.asarray(leaf)
        if value.dtype != dtype:
            value = value.astype(dtype)
        return _contiguous(layout.to_stored(value.reshape(shape), self.mesh.axis_sizes))

    def trace(self, *args: Any) -> Any:
        """The jaxpr this function lowers for these arguments."""
        return self.lower(*args).jaxpr

    def collectives(self, *args: Any) -> Tuple[str, ...]:
        """The collectives (atoll.ops names: all_reduce_sum, all_gather, ...) one call with
        these arguments runs, in order: what the partitioning or the body's psums cost."""
        return self.lower(*args).collectives


@dataclass(frozen=True)
class _Converter:
    function: Function
    hidden: List[np.ndarray]
    collectives: Tuple[str, ...]


_converters: Dict[Any, _Converter] = {}


def _converter(mesh: Mesh, shape: Tuple[int, ...], dtype: np.dtype, src_layout: Layout,
               layout: Layout) -> _Converter:
    """A small compiled function on ``mesh`` that takes a value stored as ``src_layout`` and
    gives it stored as ``layout`` (cached per shape, dtype and layouts), its hidden inputs
    and collectives. Stacked -> natural is local (a max and a gather); natural -> stacked
    gathers the cut dimensions (all_gather) and slices each device's block."""
    key = (mesh.slice.id, tuple(shape), str(dtype), src_layout, layout)
    entry = _converters.get(key)
    if entry is not None:
        return entry
    builder = _atoll.FunctionBuilder("relayout")
    ctx = Lowering(builder, mesh.axis_sizes, mesh.axis_names)
    token = tracing_function.set(None)
    try:
        stored, split = src_layout.stored(tuple(shape), mesh.axis_sizes)
        name = atoll_dtype(dtype)
        value = ctx.input(name, stored, split)
        types = [TensorType(dtype_named(name), stored).axes(
            *[None if a < 0 else a for a in split])]
        if src_layout.kind == "stacked" and src_layout.cut():
            local = ctx.local_from_stacked(value, len(src_layout.cut()))
            whole = ctx.natural_from_local(local, src_layout.axes)
        else:
            whole = value
        if layout.kind == "stacked" and layout.cut():
            out = ctx.stacked_from_local(ctx.local_from_global(whole, layout.axes), layout.axes)
        else:
            out = ctx.relayout(V(whole), layout.axes)
        builder.output(out)
        for h in ctx.hidden:
            types.append(TensorType(dtype_named(atoll_dtype(h.array.dtype)),
                                    tuple(h.array.shape)).axes(
                *[None if a < 0 else a for a in h.axes]))
        collectives = ctx.collectives()
    finally:
        tracing_function.reset(token)
    compiled = mesh.client._client.register(builder, mesh.slice._slice)
    entry = _Converter(Function(compiled, mesh.slice, tuple(types), 1, True),
                       [h.array for h in ctx.hidden], collectives)
    _converters[key] = entry
    return entry


def _relaid(array: Array, layout: Layout) -> Future:
    """``array``'s value stored as ``layout`` on its own slice, converted in the stores (it
    never leaves them)."""
    conv = _converter(array.mesh, array.shape, array.dtype, array.layout, layout)
    run = array.mesh.client.run(conv.function, array.future, *conv.hidden)
    return run.output(0)


def _is_key_array(leaf: Any) -> bool:
    try:
        return jax.dtypes.issubdtype(getattr(leaf, "dtype", None), jax.dtypes.prng_key)
    except TypeError:
        return False


def _data_aval(aval: Any) -> Tuple[Tuple[int, ...], np.dtype]:
    """The shape and dtype stored for a value of ``aval``: itself, or for an array of typed
    PRNG keys, their key data (uint32 [..., 2] for threefry)."""
    try:
        is_key = jax.dtypes.issubdtype(aval.dtype, jax.dtypes.prng_key)
    except TypeError:
        is_key = False
    if not is_key:
        return tuple(aval.shape), np.dtype(aval.dtype)
    data = jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct(aval.shape, aval.dtype))
    return tuple(data.shape), np.dtype(data.dtype)


def _aval_of(leaf: Any) -> Tuple[Tuple[int, ...], Any]:
    if isinstance(leaf, (Array, TracedArray)):
        return leaf.shape, leaf.dtype
    if _is_key_array(leaf):
        return tuple(leaf.shape), leaf.dtype
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return tuple(leaf.shape), np.dtype(leaf.dtype)
    a = np.asarray(leaf)
    dtype = a.dtype
    if isinstance(leaf, bool):
        dtype = np.dtype(np.bool_)
    elif isinstance(leaf, int):
        dtype = np.dtype(np.int32)
    elif isinstance(leaf, float):
        dtype = np.dtype(np.float32)
    return tuple(a.shape), dtype


def _check_divides(mesh: Mesh, shape: Sequence[int], axes: Sequence[int], what: str) -> None:
    for d, a in enumerate(axes):
        if a >= 0 and shape[d] % mesh.axis_sizes[a]:
            raise LoweringError(f"{what} of shape {tuple(shape)}: dimension {d} ({shape[d]}) "
                                f"does not divide over mesh axis {mesh.axis_names[a]!r} "
                                f"({mesh.axis_sizes[a]} devices)")


def jit(fun: Optional[Callable[..., Any]] = None, *, mesh: Mesh, in_specs: Any = P(),
        out_specs: Any = P(), static_argnums: Union[int, Sequence[int]] = (),
        donate_argnums: Union[int, Sequence[int]] = (), per_shard: bool = False,
        check_vma: bool = True) -> Any:
    """jax.jit for atoll: ``fun`` is traced with JAX once per input signature, lowered to one
    atoll compiled function on ``mesh``'s slice, and run there on each call; results are
    atoll.jax.Arrays (pytrees of them, as ``fun`` returns).

    in_specs / out_specs: PartitionSpecs, as pytree prefixes of the (non-static) arguments
    and of the results (``P()`` for a whole dict of parameters). Global form (default):
    ``fun`` is written for whole arrays, atoll partitions it. ``per_shard=True``: ``fun`` is
    jax.shard_map's body (each device's block; collectives by axis name)."""
    statics = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    donates = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)

    def wrap(f: Callable[..., Any]) -> Jitted:
        return Jitted(f, mesh, in_specs, out_specs, statics, donates, per_shard, check_vma)

    return wrap if fun is None else wrap(fun)


def shard_map(fun: Optional[Callable[..., Any]] = None, *, mesh: Mesh, in_specs: Any,
              out_specs: Any, check_vma: bool = True, static_argnums: Sequence[int] = (),
              donate_argnums: Sequence[int] = ()) -> Any:
    """jax.shard_map on an atoll mesh, compiled: ``jit(fun, per_shard=True, ...)``."""
    return jit(fun, mesh=mesh, in_specs=in_specs, out_specs=out_specs, per_shard=True,
               check_vma=check_vma, static_argnums=static_argnums,
               donate_argnums=donate_argnums)


# ---------------------------------------------------------------------------------------------
# Programs: several jitted functions, on several meshes (islands), as one submission

class TracedArray:
    """An array inside an ``atoll.jax.program`` being traced: a program value (an argument or
    a call's result) with its shape, dtype and how it is stored on which mesh; or a host
    value given to the program (``host``; no mesh), fed as each call that takes it lays it
    out."""

    def __init__(self, traced: Any, shape: Tuple[int, ...], dtype: np.dtype,
                 mesh: Optional[Mesh], spec: PartitionSpec, layout: Layout,
                 host: Optional[np.ndarray] = None) -> None:
        self.traced = traced
        self.host = host
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.mesh = mesh
        self.spec = spec
        self.layout = layout

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"atoll.jax.TracedArray({self.dtype}{list(self.shape)}, spec={self.spec})"


class _ProgramState:
    def __init__(self) -> None:
        self.builder = _atoll.ProgramBuilder()
        self.feeds: List[Any] = []  # what each program argument is fed, in order
        self.client: Optional[Client] = None
        self.calls = 0
        self.collectives: "collections.Counter[str]" = collections.Counter()
        # A host value's program argument per layout it is fed in (a per-shard call takes
        # its cut dimensions stacked), made on first use: (id of the value, layout, dtype).
        self._host_args: Dict[Tuple[int, Layout, str], Any] = {}

    def arg(self, value: Any, dtype: np.dtype, stored: Tuple[int, ...]) -> Any:
        self.feeds.append(value)
        return self.builder.arg(atoll_dtype(dtype), [int(s) for s in stored])

    def call(self, jitted: "Jitted", args: Sequence[Any]) -> Any:
        mesh = jitted.mesh
        if self.client is None:
            self.client = mesh.client
        elif self.client is not mesh.client:
            raise ValueError("an atoll.jax.program calls functions of one client")
        compiled = jitted.lower(*args)
        _, dynamic = jitted._split_args(args)
        leaves = jax.tree_util.tree_leaves(dynamic)
        wire = []
        for leaf, layout, dtype, shape in zip(leaves, compiled.in_layouts, compiled.in_dtypes,
                                              compiled.in_shapes):
            wire.append(self.operand(leaf, mesh, layout, dtype, shape))
        for h in compiled.hidden:
            wire.append(self.arg(h, h.dtype, tuple(h.shape)))
        outs = self.builder.call(compiled.function._compiled, wire)
        self.calls += 1
        self.collectives.update(compiled.collectives)
        arrays = [TracedArray(t, tuple(a.shape), np.dtype(a.dtype), mesh, spec, layout)
                  for t, a, spec, layout in zip(outs, compiled.out_avals, compiled.out_specs,
                                                compiled.out_layouts)]
        return jax.tree_util.tree_unflatten(compiled.out_tree, arrays)

    def operand(self, leaf: Any, mesh: Mesh, layout: Layout, dtype: np.dtype,
                shape: Tuple[int, ...]) -> Any:
        if isinstance(leaf, TracedArray) and leaf.host is not None:
            key = (id(leaf.host), layout, str(dtype))
            if key not in self._host_args:
                self._host_args[key] = self.host_arg(leaf.host, mesh, layout, dtype, shape)
            return self._host_args[key]
        if isinstance(leaf, TracedArray):
            if leaf.layout == layout:
                return leaf.traced  # stored as wanted
            if leaf.mesh.slice.id != mesh.slice.id and leaf.layout.kind == "natural" and \
                    layout.kind == "natural":
                return leaf.traced  # the program moves it, laid out as the call says
            source_mesh = leaf.mesh if leaf.mesh.slice.id == mesh.slice.id else mesh
            if leaf.mesh.slice.id != mesh.slice.id:
                # Natural on its own mesh first (the program moves a call's natural result to
                # any layout of the same shape; a future argument it cannot move), then
                # converted on the callee's.
                t = self.convert(_converter(leaf.mesh, leaf.shape, leaf.dtype, leaf.layout,
                                            Layout("natural", leaf.layout.axes)), leaf.traced)
                src_layout = Layout("natural", tuple(-1 for _ in leaf.shape))
            else:
                t, src_layout = leaf.traced, leaf.layout
            return self.convert(_converter(source_mesh, leaf.shape, leaf.dtype, src_layout,
                                           layout), t)
        return self.host_arg(leaf, mesh, layout, dtype, shape)

    def host_arg(self, leaf: Any, mesh: Mesh, layout: Layout, dtype: np.dtype,
                 shape: Tuple[int, ...]) -> Any:
        value = np.asarray(jax.random.key_data(leaf) if _is_key_array(leaf) else leaf)
        value = value.astype(dtype, copy=False).reshape(shape)
        stored = layout.to_stored(value, mesh.axis_sizes)
        return self.arg(_contiguous(stored), dtype, tuple(stored.shape))


    def convert(self, conv: _Converter, value: Any) -> Any:
        self.collectives.update(conv.collectives)
        return self.builder.call(conv.function._compiled, [value] + [
            self.arg(h, h.dtype, tuple(h.shape)) for h in conv.hidden])[0]


_program_state: "contextvars.ContextVar[Optional[_ProgramState]]" = contextvars.ContextVar(
    "atoll_jax_program", default=None)


class ProgramFn:
    """See atoll.jax.program."""

    def __init__(self, fun: Callable[..., Any]) -> None:
        self.fun = fun
        self.last: Optional[Program] = None
        # How many of each collective the last program's calls run (one run of each call's
        # function): how a layout's communication per step shows without running it.
        self.last_collectives: "collections.Counter[str]" = collections.Counter()
        functools.update_wrapper(self, fun)  # type: ignore[arg-type]

    def __call__(self, *args: Any) -> Any:
        if _program_state.get() is not None:
            raise ValueError("an atoll.jax.program called inside another")
        leaves, treedef = jax.tree_util.tree_flatten(args)
        state = _ProgramState()
        traced_leaves = []
        for leaf in leaves:
            if isinstance(leaf, Array):
                stored, _ = leaf.layout.stored(leaf.shape, leaf.mesh.axis_sizes)
                t = state.arg(leaf.future, leaf.dtype, stored)
                traced_leaves.append(TracedArray(t, leaf.shape, leaf.dtype, leaf.mesh, leaf.spec,
                                                 leaf.layout))
            else:  # fed once per layout the calls that take it want (state.operand)
                shape, dtype = _aval_of(leaf)
                value = np.asarray(leaf).astype(dtype, copy=False)
                traced_leaves.append(TracedArray(None, shape, dtype, None, P(),
                                                 Layout("natural", (-1,) * len(shape)),
                                                 host=value))
        token = _program_state.set(state)
        try:
            result = self.fun(*jax.tree_util.tree_unflatten(treedef, traced_leaves))
        finally:
            _program_state.reset(token)
        out_leaves, out_tree = jax.tree_util.tree_flatten(result)
        for o in out_leaves:
            if not isinstance(o, TracedArray) or o.mesh is None:
                raise TypeError("an atoll.jax.program returns results of the atoll.jax "
                                "functions it calls")
        if state.client is None:
            raise ValueError("an atoll.jax.program calls at least one atoll.jax function")
        compiled = state.builder.build([o.traced for o in out_leaves])
        program = Program(compiled, tuple(), True, getattr(self.fun, "__name__", "program"))
        self.last = program
        self.last_collectives = state.collectives
        run = state.client.run(program, *state.feeds)
        arrays = [Array(run.output(i), o.shape, o.dtype, o.mesh, o.spec, o.layout)
                  for i, o in enumerate(out_leaves)]
        return jax.tree_util.tree_unflatten(out_tree, arrays)


def program(fun: Callable[..., Any]) -> ProgramFn:
    """Traces a Python function that calls atoll.jax functions (jit / shard_map, on one or
    several meshes, on one or several islands) into one atoll program, submitted as one run:
    the calls are dispatched together, each value flowing between them through the stores
    (a pipeline's stages run as Pathways runs them). Arguments are numpy arrays, JAX arrays or
    atoll.jax.Arrays (pytrees); results are atoll.jax.Arrays. Traced on every call (each
    function it calls is compiled once per signature); after a call, ``.last_collectives``
    counts the collectives its calls run (a Counter of atoll.ops names)."""
    return ProgramFn(fun)
