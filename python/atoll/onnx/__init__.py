"""ONNX models on atoll: an ONNX graph lowered onto atoll's compiled functions (the jax.lax
primitives, through atoll.lax and atoll.numpy)::

    import atoll, atoll.onnx
    client = atoll.connect()
    model = atoll.onnx.load("model.onnx", client, client.slice(1))
    (y,) = model.run({"x": x})

One table (``_ops.OPS``, filled by _ops_*.py) maps an op type to its lowering. Shapes are
static: symbolic dimensions take ``input_shapes``; values that decide shapes (Reshape's
shape, Slice's starts, ...) must be constants (initializers, Constant nodes, or what folds
from them and from static shapes). Initializers become inputs of the function whose values
are put once and stay in the object stores. What the lowering lacks (an op, an attribute
value, a dtype) and malformed or truncated models are refused at load with an
``OnnxError`` (an atoll.InvalidArgument) naming the node, its op type and what is
unsupported; nothing reaches the cluster.

``Backend`` is an onnx.backend.base.Backend over a cluster found as atoll.connect() finds
one (bench/onnx/conformance.py runs onnx's node tests with it).
"""

from ._model import Model, OnnxError, load
from ._backend import Backend

__all__ = ["Backend", "Model", "OnnxError", "load"]
