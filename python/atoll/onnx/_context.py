"""The lowering's state: the function being built, constants (numpy arrays known at load)
beside traced values, and refusals that name the node."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import _atoll
from .. import lax
from . import _narrow as narrow
from .._tracing import tracing_function
from .._types import dtype_of_numpy

Value = _atoll.Value


class OnnxError(_atoll.InvalidArgument):
    """A model atoll.onnx refuses: the message names the node, its op type and what is
    unsupported."""


_ONNX_DTYPES = {
    onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.DOUBLE: "f64",
    onnx.TensorProto.FLOAT16: "f16", onnx.TensorProto.BFLOAT16: "bf16",
    onnx.TensorProto.INT32: "i32", onnx.TensorProto.INT64: "i64",
    onnx.TensorProto.BOOL: "bool", onnx.TensorProto.INT8: "i8",
    onnx.TensorProto.UINT8: "u8", onnx.TensorProto.UINT32: "u32",
}


# Integer dtypes atoll lacks, held in a wider one (values wrap back to the narrow dtype at
# the outputs, as numpy's astype does; arithmetic that leaves the narrow range differs).
_WIDENED = {onnx.TensorProto.INT16: "i32", onnx.TensorProto.UINT16: "i32",
            onnx.TensorProto.UINT64: "i64"}
_WIDENED_NUMPY = {np.dtype(np.int16): np.int32, np.dtype(np.uint16): np.int32,
                  np.dtype(np.uint64): np.int64}
_WIDENED.update(narrow.HELD)
_WIDENED_NUMPY.update(narrow.HELD_NUMPY)


def stored(a: np.ndarray) -> np.ndarray:
    """A numpy array in the dtype atoll holds it in."""
    to = _WIDENED_NUMPY.get(a.dtype)
    return a.astype(to) if to is not None else a


def atoll_dtype_of_onnx(elem_type: int, what: str) -> str:
    if elem_type in _WIDENED:
        return _WIDENED[elem_type]
    if elem_type not in _ONNX_DTYPES:
        name = onnx.TensorProto.DataType.Name(elem_type) if elem_type in \
            onnx.TensorProto.DataType.values() else str(elem_type)
        raise OnnxError(f"{what}: dtype {name} is not supported by atoll")
    return _ONNX_DTYPES[elem_type]


def numpy_dtype(name: str) -> np.dtype:
    from .._types import dtype_named
    return dtype_named(name).numpy


def dtype_name(x: Any) -> str:
    """The atoll dtype name of a Value or a numpy array."""
    if isinstance(x, Value):
        return x.dtype
    return dtype_of_numpy(stored(np.asarray(x)).dtype).name


def shape_of(x: Any) -> tuple:
    return tuple(x.shape)


class Context:
    def __init__(self, builder: _atoll.FunctionBuilder, opset: int) -> None:
        self.builder = builder
        self.opset = opset
        self.hidden: List[np.ndarray] = []
        self._hidden_values: Dict[int, Any] = {}  # id -> (the array, its input)
        self._anchor: Optional[Value] = None
        self._token: Any = None
        self.node: Optional[onnx.NodeProto] = None
        self.attrs: Dict[str, Any] = {}
        self.types: Dict[str, int] = {}  # declared ONNX dtypes of the graph's values

    # -- inputs ---------------------------------------------------------------------------
    def input(self, dtype: str, shape: Sequence[int], axes: Sequence[int]) -> Value:
        v = self.builder.input(dtype, [int(s) for s in shape], [int(a) for a in axes])
        if self._anchor is None:
            self._anchor = v
            self._token = tracing_function.set(v)
        return v

    def close(self) -> None:
        if self._token is not None:
            tracing_function.reset(self._token)
            self._token = None

    def hidden_input(self, array: np.ndarray) -> Value:
        # By identity (an initializer used by many nodes is put once); the cache holds the
        # array itself, so that its id is not reused by a later temporary while cached.
        key = id(array)
        if key in self._hidden_values:
            return self._hidden_values[key][1]
        given = array
        array = np.array(stored(np.asarray(array)), order="C")
        v = self.input(dtype_of_numpy(array.dtype).name, array.shape, [-1] * array.ndim)
        self.hidden.append(array)
        self._hidden_values[key] = (given, v)
        return v

    def value(self, x: Any) -> Value:
        """A traced value of x (a Value, or a constant: uniform ones are lax.full, others
        hidden inputs)."""
        if isinstance(x, Value):
            return x
        a = stored(np.asarray(x))
        try:
            name = dtype_of_numpy(a.dtype).name
        except Exception:  # noqa: BLE001
            raise self.refuse(f"a constant of dtype {a.dtype} is not supported by atoll") from None
        if 0 in a.shape:
            raise self.refuse(f"a constant of shape {list(a.shape)} (size-0 dimensions are not "
                              "supported by atoll)")
        if self._anchor is None:
            self.hidden_input(np.zeros((), np.int32))
        flat = a.ravel()
        uniform = (flat == flat[0]).all() and not np.isnan(flat[:1].astype(np.float64)).any()
        if a.ndim == 0 or uniform:
            return lax.full(a.shape, flat[0].item(), name)
        return self.hidden_input(a)

    def static(self, x: Any, what: str) -> np.ndarray:
        """x's value, which must be known at load."""
        if x is None:
            raise self.refuse(f"{what} is missing")
        if isinstance(x, Value):
            raise self.refuse(f"{what} must be known at load (an initializer, a Constant, or "
                              "computed from them and from shapes), it is computed at run time")
        return np.asarray(x)

    def elem_type(self, i: int, x: Any) -> int:
        """The ONNX dtype of the node's input i: as declared, else from its value."""
        name = self.node.input[i] if self.node is not None and i < len(self.node.input) else ""
        if name in self.types:
            return self.types[name]
        if isinstance(x, Value):
            return helper.np_dtype_to_tensor_dtype(numpy_dtype(x.dtype))
        return helper.np_dtype_to_tensor_dtype(np.asarray(x).dtype)

    # -- attributes and messages ----------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def refuse(self, what: str) -> OnnxError:
        n = self.node
        if n is None:
            return OnnxError(what)
        label = n.name or (n.output[0] if n.output else "?")
        return OnnxError(f"node '{label}' ({n.op_type}): {what}")

    # -- the graph ------------------------------------------------------------------------
    def lower_graph(self, nodes: Sequence[onnx.NodeProto], env: Dict[str, Any]) -> None:
        from ._ops import FOLDABLE, OPS
        outer_env = getattr(self, "env", None)
        self.env = env  # the values in scope, for the bodies of If and Scan
        for node in nodes:
            self.node = node
            if node.domain not in ("", "ai.onnx"):
                raise self.refuse(f"domain '{node.domain}' is not supported")
            rule = OPS.get(node.op_type)
            if rule is None:
                raise self.refuse("the op type is not supported by atoll.onnx")
            self.attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            for a in node.attribute:
                if node.op_type in ("If", "Scan", "Loop"):
                    break
                if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                    raise self.refuse(f"attribute '{a.name}' holds a subgraph (control flow "
                                      "is not supported)")
            args = []
            for name in node.input:
                if name == "":
                    args.append(None)
                elif name not in env:
                    raise self.refuse(f"input '{name}' is computed by no earlier node")
                else:
                    args.append(env[name])
            outs = None
            if node.op_type in FOLDABLE and all(not isinstance(a, Value) for a in args):
                outs = self._fold(node, args)
            if outs is None:
                try:
                    outs = rule(self, *args)
                except OnnxError as e:
                    if str(e).startswith("node '"):
                        raise
                    raise self.refuse(str(e)) from None
                except _atoll.InvalidArgument as e:
                    raise self.refuse(f"atoll refused the lowering: {e}") from None
            if not isinstance(outs, (tuple, list)):
                outs = (outs,)
            for name, v in zip(node.output, outs):
                if name:
                    env[name] = v
            for name in node.output[len(outs):]:
                if name:
                    raise self.refuse(f"output '{name}' is not supported")
            self.env = env
        self.node = None
        if outer_env is not None:
            self.env = outer_env

    def _fold(self, node: onnx.NodeProto, args: List[Any]) -> Optional[List[Any]]:
        """A node of constants evaluated at load by onnx's reference implementation, at the
        model's opset."""
        from onnx.reference import ReferenceEvaluator
        try:
            names = [f"in{i}" if a is not None else "" for i, a in enumerate(args)]
            outs = [f"out{i}" for i in range(len(node.output))]
            n = helper.make_node(node.op_type, names, outs, **self.attrs)
            feeds = {k: np.asarray(a) for k, a in zip(names, args) if k}
            graph = helper.make_graph(
                [n], "fold",
                [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(a.dtype),
                                               a.shape) for k, a in feeds.items()],
                [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None)
                 for o in outs])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
            with np.errstate(all="ignore"):
                return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, feeds)]
        except Exception:  # noqa: BLE001 (the lowering below decides)
            return None

    def output_value(self, x: Any, vi: onnx.ValueInfoProto) -> Value:
        """A graph output as a fresh value of the declared dtype."""
        self.node = None
        v = self.value(x)
        t = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if t is not None and t.elem_type:
            want = atoll_dtype_of_onnx(t.elem_type, f"graph output '{vi.name}'")
            if v.dtype != want:
                v = lax.convert_element_type(v, want)
        return lax.reshape(v, list(v.shape))
