"""atoll.onnx.Backend: onnx.backend.base.Backend over an atoll cluster, found as
atoll.connect() finds one (ATOLL_RM, the state dir); each model on a slice of its own.
Graph inputs that decide shapes (Reshape's shape, Slice's starts, ...) are folded in from
the first run's values; a later run with other values of them compiles again."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend as _Base, BackendRep as _BaseRep

from ._model import Model, OnnxError, load

# Per op type, the input positions whose values decide shapes (they must be known at load).
STATIC_INPUTS = {
    "Reshape": (1,), "Slice": (1, 2, 3, 4), "Expand": (1,), "Tile": (1,), "Pad": (1, 3),
    "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,), "TopK": (1,), "CumSum": (1,),
    "ConstantOfShape": (0,), "Range": (0, 1, 2), "Trilu": (1,), "Dropout": (1, 2),
    "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,),
    "ReduceProd": (1,), "ReduceL1": (1,), "ReduceL2": (1,), "ReduceLogSum": (1,),
    "ReduceLogSumExp": (1,), "ReduceSumSquare": (1,), "OneHot": (1,), "Resize": (1, 2, 3),
    "CumProd": (1,), "HannWindow": (0,), "HammingWindow": (0,), "BlackmanWindow": (0,),
    "MelWeightMatrix": (0, 1, 2, 3, 4), "Upsample": (1,), "CenterCropPad": (1,),
    "RNN": (4,), "GRU": (4,), "LSTM": (4,), "Loop": (0, 1), "Compress": (1,),
    "AffineGrid": (1,),
}


# Inputs whose value a node does not read (only its shape or dtype).
SHAPE_ONLY = {"Shape": (0,), "Size": (0,), "CastLike": (1,), "EyeLike": (0,)}


def static_input_names(model: onnx.ModelProto) -> List[str]:
    """The graph inputs whose values decide shapes: those that reach a static input
    position of a node (through any chain of nodes)."""
    graph_inputs = {vi.name for vi in model.graph.input}
    needed = set()
    for node in model.graph.node:
        for i in STATIC_INPUTS.get(node.op_type, ()):
            if i < len(node.input) and node.input[i]:
                needed.add(node.input[i])
    for node in reversed(model.graph.node):
        if any(o in needed for o in node.output):
            skip = SHAPE_ONLY.get(node.op_type, ())
            needed.update(n for i, n in enumerate(node.input) if n and i not in skip)
    return sorted(needed & graph_inputs)


class _Cluster:
    client: Any = None

    @classmethod
    def get(cls) -> Any:
        if cls.client is None:
            import atoll
            cls.client = atoll.connect(name="onnx-backend")
        return cls.client


class BackendRep(_BaseRep):
    def __init__(self, model: onnx.ModelProto, client: Any, device: str) -> None:
        self.model = model
        self.client = client
        self.static = static_input_names(model)
        self._compiled: Dict[Tuple, Tuple[Model, List[str]]] = {}
        self._slice = None

    def _load(self, consts: Dict[str, np.ndarray], shapes: Dict[str, Any]) -> Any:
        if self._slice is None:
            self._slice = self.client.slice(1)
        m = load(self.model, self.client, self._slice, input_shapes=shapes or None,
                 constants=consts or None)
        return m

    def run(self, inputs: Any, **kwargs: Any) -> Tuple[np.ndarray, ...]:
        names = [vi.name for vi in self.model.graph.input
                 if vi.name not in {t.name for t in self.model.graph.initializer}]
        if isinstance(inputs, dict):
            feed = dict(inputs)
        else:
            feed = dict(zip(names, inputs))
        for k, v in feed.items():
            if isinstance(v, (list, dict)) or v is None:
                raise OnnxError(f"graph input '{k}': sequences, maps and optionals are not "
                                "supported (tensors only)")
        feed = {k: numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v)
                for k, v in feed.items()}
        consts = {n: np.asarray(feed[n]) for n in self.static if n in feed}
        key = tuple((n, consts[n].tobytes(), consts[n].shape) for n in sorted(consts))
        shapes = {n: np.shape(feed[n]) for n in names if n not in consts}
        key += tuple(sorted(shapes.items()))
        if key not in self._compiled:
            self._compiled[key] = self._load(consts, shapes)
        model = self._compiled[key]
        outs = model.run({n: feed[n] for n in model.input_names})
        return tuple(outs)


class Backend(_Base):
    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return True

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> BackendRep:
        super().prepare(model, device, **kwargs)
        return BackendRep(model, kwargs.get("client") or _Cluster.get(), device)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> Tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Optional[Any] = None, **kwargs: Any) -> Tuple[np.ndarray, ...]:
        from onnx import helper
        arrays = [np.asarray(a) for a in inputs]
        names = [n for n in node.input]
        graph_inputs = [helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in zip(names, arrays) if n]
        graph_outputs = [helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None)
                         for n in node.output if n]
        graph = helper.make_graph([node], "run_node", graph_inputs, graph_outputs)
        model = helper.make_model(graph)
        return cls.run_model(model, [a for n, a in zip(names, arrays) if n], device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper().startswith("CPU")
