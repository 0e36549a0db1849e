"""Models of bench/onnx, built with onnx.helper from seeded random weights (torchvision's
exports need Debian's python3-torch, which this machine lacks): resnet18's architecture
(torchvision's layers: conv 7x7/2, max pool, four stages of two basic blocks, global
average pool, fc; batch norms kept as nodes) and a 2-layer transformer encoder (post-norm,
as torch.nn.TransformerEncoderLayer: attention, residual, LayerNorm, GELU feed-forward)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def weight(self, shape, scale=None) -> str:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        w = (self.rng.standard_normal(shape) * (scale or np.sqrt(2.0 / fan_in))).astype(np.float32)
        n = self.name("w")
        self.inits.append(numpy_helper.from_array(w, n))
        return n

    def const(self, array) -> str:
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(array), n))
        return n

    def node(self, op, inputs, **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def model(self, inputs, outputs, opset=17) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "bench", inputs, outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return onnx.shape_inference.infer_shapes(m)


def _conv_bn(b: _Builder, x: str, cin: int, cout: int, k: int, stride: int, relu: bool) -> str:
    y = b.node("Conv", [x, b.weight((cout, cin, k, k))], kernel_shape=[k, k],
               strides=[stride, stride], pads=[k // 2] * 4)
    bn = [b.const(np.ones(cout, np.float32)), b.const(np.zeros(cout, np.float32)),
          b.const(b.rng.standard_normal(cout).astype(np.float32) * 0.1),
          b.const(np.ones(cout, np.float32))]
    y = b.node("BatchNormalization", [y, *bn])
    return b.node("Relu", [y]) if relu else y


def resnet18(batch: int, size: int = 224, classes: int = 1000, seed: int = 0) -> onnx.ModelProto:
    b = _Builder(seed)
    y = _conv_bn(b, "x", 3, 64, 7, 2, True)
    y = b.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            s = stride if block == 0 else 1
            h = _conv_bn(b, y, cin, cout, 3, s, True)
            h = _conv_bn(b, h, cout, cout, 3, 1, False)
            short = _conv_bn(b, y, cin, cout, 1, s, False) if (s != 1 or cin != cout) else y
            y = b.node("Relu", [b.node("Add", [h, short])])
            cin = cout
    y = b.node("Flatten", [b.node("GlobalAveragePool", [y])])
    y = b.node("Gemm", [y, b.weight((512, classes), 0.05),
                        b.const(np.zeros(classes, np.float32))])
    b.nodes[-1].output[0] = "logits"
    return b.model(
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])])


def encoder(batch: int, seq: int = 64, d: int = 128, heads: int = 4, ff: int = 512,
            layers: int = 2, seed: int = 0) -> onnx.ModelProto:
    b = _Builder(seed)
    x = "x"
    hd = d // heads
    for _ in range(layers):
        def proj(v, n_out=d):
            return b.node("Add", [b.node("MatMul", [v, b.weight((d, n_out), 0.08)]),
                                  b.const(np.zeros(n_out, np.float32))])

        def split_heads(v):
            r = b.node("Reshape", [v, b.const(np.array([0, seq, heads, hd], np.int64))])
            return b.node("Transpose", [r], perm=[0, 2, 1, 3])
        q, k, v = split_heads(proj(x)), split_heads(proj(x)), split_heads(proj(x))
        kt = b.node("Transpose", [k], perm=[0, 1, 3, 2])
        s = b.node("Mul", [b.node("MatMul", [q, kt]),
                           b.const(np.array(1 / np.sqrt(hd), np.float32))])
        p = b.node("Softmax", [s], axis=-1)
        o = b.node("Transpose", [b.node("MatMul", [p, v])], perm=[0, 2, 1, 3])
        o = b.node("Reshape", [o, b.const(np.array([0, seq, d], np.int64))])
        x = b.node("LayerNormalization", [b.node("Add", [x, proj(o)]),
                                          b.const(np.ones(d, np.float32)),
                                          b.const(np.zeros(d, np.float32))], axis=-1)
        h = b.node("Relu", [b.node("Add", [b.node("MatMul", [x, b.weight((d, ff), 0.08)]),
                                           b.const(np.zeros(ff, np.float32))])])
        h = b.node("Add", [b.node("MatMul", [h, b.weight((ff, d), 0.05)]),
                           b.const(np.zeros(d, np.float32))])
        x = b.node("LayerNormalization", [b.node("Add", [x, h]), b.const(np.ones(d, np.float32)),
                                          b.const(np.zeros(d, np.float32))], axis=-1)
    b.nodes[-1].output[0] = "y"
    return b.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, d])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, d])])
