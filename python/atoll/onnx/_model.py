"""atoll.onnx.load: an ONNX model read, checked and traced into one compiled function."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import onnx
from onnx import numpy_helper

from .. import _atoll
from .._tracing import Function
from .._types import TensorType, dtype_named
from ._context import Context, OnnxError, atoll_dtype_of_onnx, numpy_dtype

__all__ = ["Model", "OnnxError", "load"]


def _read(model: Any) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray)):
        data, where = bytes(model), "the model's bytes"
    elif isinstance(model, (str, os.PathLike)):
        where = f"model file {os.fspath(model)!r}"
        try:
            with open(model, "rb") as f:
                data = f.read()
        except OSError as e:
            raise OnnxError(f"{where} cannot be read: {e}") from None
    else:
        raise OnnxError(f"atoll.onnx.load takes an onnx.ModelProto, bytes or a path, got "
                        f"{type(model).__name__}")
    try:
        proto = onnx.load_model_from_string(data)
    except Exception as e:  # noqa: BLE001 (protobuf's DecodeError and friends)
        raise OnnxError(f"{where} is malformed or truncated: {e}") from None
    if not proto.graph.node and not proto.graph.output:
        raise OnnxError(f"{where} is malformed or truncated: it has no graph")
    return proto


def _check(proto: onnx.ModelProto) -> int:
    """The default domain's opset (7 to the installed onnx's newest); the model checked."""
    try:
        onnx.checker.check_model(proto)
    except onnx.checker.ValidationError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else "invalid"
        raise OnnxError(f"the model is malformed: {first}") from None
    opset = None
    for imp in proto.opset_import:
        if imp.domain in ("", "ai.onnx"):
            opset = imp.version
    newest = onnx.defs.onnx_opset_version()
    if opset is None:
        raise OnnxError("the model imports no opset of the default domain")
    if 1 <= opset < 7:
        return _as_opset_7(proto, opset)
    if not 7 <= opset <= newest:
        raise OnnxError(f"opset {opset} is not supported (7 to {newest})")
    return opset


def _as_opset_7(proto: onnx.ModelProto, opset: int) -> int:
    """An opset below 7 is lowered as opset 7 where each of the graph's ops is defined there
    as at 7 (Not, Relu, ...); ops that changed since (Add's broadcast attribute, ...) refuse."""
    def since(op_type: str, version: int) -> int:
        try:
            return onnx.defs.get_schema(op_type, version, "").since_version
        except onnx.defs.SchemaError:
            return -1
    for node in proto.graph.node:
        if node.domain in ("", "ai.onnx") and since(node.op_type, opset) != since(node.op_type, 7):
            raise OnnxError(f"opset {opset} is not supported (7 to {onnx.defs.onnx_opset_version()};"
                            f" below 7 only where every op is as at opset 7, and "
                            f"{node.op_type} changed)")
    return 7


def _input_type(vi: onnx.ValueInfoProto, shapes: Mapping[str, Sequence[int]]
                ) -> Tuple[str, Tuple[int, ...]]:
    t = vi.type
    if not t.HasField("tensor_type"):
        raise OnnxError(f"graph input '{vi.name}': only tensors are supported, not "
                        f"{t.WhichOneof('value')}")
    dtype = atoll_dtype_of_onnx(t.tensor_type.elem_type, f"graph input '{vi.name}'")
    if vi.name in shapes:
        return dtype, tuple(int(d) for d in shapes[vi.name])
    if not t.tensor_type.HasField("shape"):
        raise OnnxError(f"graph input '{vi.name}' has no shape: give it in input_shapes")
    dims = []
    for i, d in enumerate(t.tensor_type.shape.dim):
        if not d.HasField("dim_value"):
            raise OnnxError(f"graph input '{vi.name}' has the symbolic dimension {i} "
                            f"({d.dim_param or 'unnamed'}): give its shape in input_shapes")
        dims.append(int(d.dim_value))
    return dtype, tuple(dims)


class Model:
    """A loaded ONNX model: ``run`` takes the graph inputs (a dict by name, or a sequence in
    the graph's order) as numpy arrays and gives the graph outputs as numpy arrays."""

    def __init__(self, client: Any, function: Function, input_names: List[str],
                 input_types: List[Tuple[str, Tuple[int, ...]]], output_names: List[str],
                 hidden: List[Any], output_dtypes: List[Optional[np.dtype]],
                 empty: Optional[Dict[int, np.ndarray]] = None,
                 split: Optional["_Split"] = None) -> None:
        self.client = client
        self.function = function
        self.input_names = input_names
        self.input_types = input_types
        self.output_names = output_names
        self._hidden = hidden
        self._output_dtypes = output_dtypes
        self._empty = empty or {}
        self._split = split

    def run(self, inputs: Union[Mapping[str, Any], Sequence[Any]],
            timeout: Optional[float] = 120.0) -> List[np.ndarray]:
        if isinstance(inputs, Mapping):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise OnnxError(f"run: graph inputs {missing} are not given")
            values = [inputs[n] for n in self.input_names]
        else:
            values = list(inputs)
            if len(values) != len(self.input_names):
                raise OnnxError(f"run: {len(values)} inputs given, the graph takes "
                                f"{len(self.input_names)} ({self.input_names})")
        wire = []
        for name, (dtype, shape), v in zip(self.input_names, self.input_types, values):
            if isinstance(v, onnx.TensorProto):
                v = numpy_helper.to_array(v)
            a = np.array(np.asarray(v).astype(dtype_named(dtype).numpy), order="C")
            if tuple(a.shape) != shape:
                raise OnnxError(f"run: graph input '{name}' has shape {list(a.shape)}, the "
                                f"model was loaded for {list(shape)}")
            wire.append(a if self._split is None or name != self._split.name
                        else self._split.stack(a))
        results = list(self.client.run(self.function, *wire, *self._hidden).result(timeout)) \
            if self.function is not None else []
        if self._split is not None:
            results = [self._split.join(r) for r in results]
        for i in sorted(self._empty):
            results.insert(i, self._empty[i])
        return [r if d is None or r.dtype == d else r.astype(d)
                for r, d in zip(results, self._output_dtypes)]


def _put(client: Any, slice: Any, arrays: List[np.ndarray]) -> List[Any]:
    """The arrays put once into the slice's object stores: Futures of a run of a function
    that gives back its inputs."""
    if not arrays:
        return []
    from .. import lax
    builder = _atoll.FunctionBuilder("onnx_initializers")
    types = []
    for a in arrays:
        t = TensorType(dtype_named(atoll_dtype_of_numpy(a.dtype)), tuple(a.shape))
        types.append(t)
        v = builder.input(t.dtype.name, list(a.shape), [-1] * a.ndim)
        builder.output(lax.reshape(v, list(a.shape)))
    compiled = client._client.register(builder, slice._slice)
    fn = Function(compiled, slice, tuple(types), len(arrays), True)
    run = client.run(fn, *arrays)
    return [run.output(i) for i in range(len(arrays))]


def atoll_dtype_of_numpy(dtype: Any) -> str:
    from .._types import dtype_of_numpy
    return dtype_of_numpy(dtype).name


def load(model: Any, client: Any, slice: Any,
         input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
         batch_split: Optional[str] = None,
         constants: Optional[Mapping[str, Any]] = None, name: str = "onnx") -> Model:
    """An ONNX model (a ModelProto, its bytes or a path) as a Model on ``slice``.

    input_shapes: the shapes of graph inputs (for their symbolic dimensions).
    batch_split: "NAME:DIM", an input dimension cut over the slice's devices (data-parallel
        inference; the ops must keep the cut, as atoll's type rules say).
    constants: values of graph inputs to fold in at load (for inputs that decide shapes,
        such as Reshape's shape); they are no longer inputs of the Model.
    Raises OnnxError naming the node, its op type and what is unsupported."""
    proto = _read(model)
    opset = _check(proto)
    graph = proto.graph
    shapes = dict(input_shapes or {})
    consts = {k: np.asarray(v) for k, v in (constants or {}).items()}
    split_name, split_dim = None, -1
    if batch_split:
        split_name, _, dim = batch_split.partition(":")
        split_dim = int(dim or 0)
    for imp in proto.opset_import:
        if imp.domain not in ("", "ai.onnx"):
            used = [n for n in graph.node if n.domain == imp.domain]
            if used:
                raise OnnxError(f"node '{used[0].name}' ({used[0].op_type}): domain "
                                f"'{imp.domain}' is not supported")
    initializers = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    builder = _atoll.FunctionBuilder(name)
    ctx = Context(builder, opset)
    env: Dict[str, Any] = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            ctx.types[vi.name] = vi.type.tensor_type.elem_type
    for t in graph.initializer:
        ctx.types[t.name] = t.data_type
    input_names: List[str] = []
    input_types: List[Tuple[str, Tuple[int, ...]]] = []
    split: Optional[_Split] = None
    stacked = None
    try:
        for vi in graph.input:
            if vi.name in initializers or vi.name in consts:
                continue
            dtype, shape = _input_type(vi, shapes)
            if 0 in shape:  # no elements: known at load
                env[vi.name] = np.zeros(shape, _declared_numpy(vi) or numpy_dtype(dtype))
                continue
            axes = [-1] * len(shape)
            if vi.name == split_name:
                devices = slice.num_devices
                if not 0 <= split_dim < len(shape) or shape[split_dim] % devices:
                    raise OnnxError(f"batch_split {batch_split!r}: input '{vi.name}' of shape "
                                    f"{list(shape)} has no dimension {split_dim} that the "
                                    f"{devices} devices divide")
                env[vi.name], stacked = _per_device(ctx, dtype, shape, split_dim, devices)
                split = _Split(vi.name, split_dim, devices)
            else:
                env[vi.name] = ctx.input(dtype, shape, axes)
            input_names.append(vi.name)
            input_types.append((dtype, shape))
        if split_name and split_name not in input_names:
            raise OnnxError(f"batch_split {batch_split!r}: no graph input '{split_name}'")
        for k, a in initializers.items():
            atoll_dtype_of_onnx_array(a, f"initializer '{k}'")
            env[k] = a
        for k, a in consts.items():
            env[k] = a
        ctx.lower_graph(graph.node, env)
        empty: Dict[int, np.ndarray] = {}
        for i, vo in enumerate(graph.output):
            if vo.name not in env:
                raise OnnxError(f"graph output '{vo.name}' is computed by no node")
            x = env[vo.name]
            if not isinstance(x, _atoll.Value) and 0 in np.shape(x):
                empty[i] = np.asarray(x)  # no elements: given by the host
                continue
            out = ctx.output_value(x, vo)
            builder.output(out if split is None else _stacked(out, stacked))
    finally:
        ctx.close()
    if len(empty) == len(graph.output):  # nothing to compute
        return Model(client, None, input_names, input_types, [o.name for o in graph.output],
                     [], [_declared_numpy(o) for o in graph.output], empty)
    compiled = client._client.register(builder, slice._slice)
    types = [TensorType(dtype_named(d), s if split is None or n != split.name else
                        split.stacked_shape(s)).axes(*([0] + [None] * len(s)) if split is not None
                                                      and n == split.name else [None] * len(s))
             for n, (d, s) in zip(input_names, input_types)]
    types += [TensorType(dtype_named(atoll_dtype_of_numpy(h.dtype)), tuple(h.shape))
              for h in ctx.hidden]
    fn = Function(compiled, slice, tuple(types), len(graph.output) - len(empty), True)
    return Model(client, fn, input_names, input_types, [o.name for o in graph.output],
                 _put(client, slice, ctx.hidden), [_declared_numpy(o) for o in graph.output],
                 empty, split)


class _Split:
    """batch_split: input ``name``'s dimension ``dim`` cut over ``devices``. The function
    takes it stacked, [devices, *block] (the host regroups it; dimension 0 cut), and runs on
    each device's block as on one device (atoll's per-shard form: the block is a max over the
    unit dimension, a local op); each output comes back stacked, and the host joins the
    blocks along ``dim``."""

    def __init__(self, name: str, dim: int, devices: int) -> None:
        self.name, self.dim, self.devices = name, dim, devices

    def stacked_shape(self, shape: Sequence[int]) -> Tuple[int, ...]:
        block = list(shape)
        block[self.dim] //= self.devices
        return (self.devices, *block)

    def stack(self, a: np.ndarray) -> np.ndarray:
        shape = list(a.shape)
        parts = shape[:self.dim] + [self.devices, shape[self.dim] // self.devices] + \
            shape[self.dim + 1:]
        return np.ascontiguousarray(np.moveaxis(a.reshape(parts), self.dim, 0))

    def join(self, r: np.ndarray) -> np.ndarray:
        return np.concatenate(list(r), axis=self.dim if r.ndim - 1 > self.dim else 0)


def _per_device(ctx: Context, dtype: str, shape: Tuple[int, ...], dim: int,
                devices: int) -> Tuple[Any, Any]:
    """The device's block of a stacked input, and the stacked input."""
    from .. import lax
    block = list(shape)
    block[dim] //= devices
    stacked = ctx.input(dtype, [devices, *block], [0] + [-1] * len(block))
    local = lax.reduce_or(stacked, [0]) if dtype == "bool" else lax.reduce_max(stacked, [0])
    return local, stacked


def _stacked(local: Any, stacked: Any) -> Any:
    """[devices, *local's shape], dimension 0 cut: each device's block (a gather from an index
    table of zeros cut along the devices, read locally)."""
    from types import SimpleNamespace
    from .. import lax
    d = stacked.shape[0]
    first = lax.slice(stacked, [0] * len(stacked.shape), [d] + [1] * (len(stacked.shape) - 1))
    zeros = lax.reshape(first, [d, 1])
    if zeros.dtype != "i32":
        zeros = lax.convert_element_type(zeros, "i32")
    zeros = lax.sub(zeros, zeros)  # 0, keeping the cut
    shape = list(local.shape)
    operand = lax.reshape(local, [1, *shape])
    dims = SimpleNamespace(offset_dims=tuple(range(1, len(shape) + 1)), collapsed_slice_dims=(0,),
                           start_index_map=(0,))
    return lax.gather(operand, zeros, dims, [1, *shape], mode="clip")


def _declared_numpy(vi: onnx.ValueInfoProto) -> Optional[np.dtype]:
    t = vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t)) if t else None


def atoll_dtype_of_onnx_array(a: np.ndarray, what: str) -> str:
    try:
        return atoll_dtype_of_numpy(a.dtype)
    except Exception:  # noqa: BLE001
        raise OnnxError(f"{what}: dtype {a.dtype} is not supported by atoll") from None
