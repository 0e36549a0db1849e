"""atoll.onnx against onnxruntime (the oracle): small models built with onnx.helper, run on
random inputs by both; models exported by torch.onnx.export (torchvision's resnet18,
mobilenet_v3_small, efficientnet_b0, vit_b_16, shufflenet_v2_x0_5 and a TransformerEncoder),
against torch's outputs and onnxruntime's; the refusals, read by their messages; a smoke run
of onnx's own node conformance cases (their expected outputs are the oracle)."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import atoll
import atoll.onnx as aonnx

ort = pytest.importorskip("onnxruntime")

F = TensorProto.FLOAT


@pytest.fixture(scope="module")
def onnx_client(cluster):
    with cluster.connect(name="pytest-onnx") as c:
        yield c


@pytest.fixture(scope="module")
def one(onnx_client):
    return onnx_client.slice(1)


def make(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)  # the outputs' shapes, which the checker wants
    onnx.checker.check_model(model)
    return model


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def oracle(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check(model, client, slice, feeds, rtol=1e-5, atol=1e-6):
    got = aonnx.load(model, client, slice).run(feeds)
    want = oracle(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


rng = np.random.default_rng(0)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_mlp_with_initializers(onnx_client, one):
    w1, b1, w2 = randn(8, 16), randn(16), randn(16, 4)
    model = make(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]),
         helper.make_node("Add", ["h", "b1"], ["hb"]),
         helper.make_node("Gelu", ["hb"], ["a"]),
         helper.make_node("Gemm", ["a", "w2"], ["y"], alpha=0.5, transB=0),
         helper.make_node("Softmax", ["y"], ["p"], axis=-1)],
        [vi("x", [3, 8])], [vi("p", [3, 4])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2")], opset=20)
    check(model, onnx_client, one, {"x": randn(3, 8)})


def test_conv_pool_batchnorm(onnx_client, one):
    c = 3
    inits = [numpy_helper.from_array(randn(4, c, 3, 3), "w"),
             numpy_helper.from_array(randn(4), "b")]
    for name in ("scale", "bias", "mean"):
        inits.append(numpy_helper.from_array(randn(4), name))
    inits.append(numpy_helper.from_array(np.abs(randn(4)) + 0.5, "var"))
    model = make(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
         helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["n"]),
         helper.make_node("Relu", ["n"], ["r"]),
         helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("AveragePool", ["m"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                          count_include_pad=0),
         helper.make_node("GlobalAveragePool", ["a"], ["g"]),
         helper.make_node("Flatten", ["g"], ["y"])],
        [vi("x", [2, c, 8, 8])], [vi("y", [2, 4])], inits)
    check(model, onnx_client, one, {"x": randn(2, c, 8, 8)}, rtol=1e-4, atol=1e-5)


def conv_model(w):
    """x [1, 16, 12, 12] convolved by the initializer w, then relu; w itself as a second
    output (a run that gives back a weight it read in place)."""
    return make(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"]),
         helper.make_node("Identity", ["w"], ["w_out"])],
        [vi("x", [1, 16, 12, 12])], [vi("y", [1, 16, 12, 12]), vi("w_out", list(w.shape))],
        [numpy_helper.from_array(w, "w")])


def test_weights_read_in_place_stay_unchanged_and_alive(onnx_client, one):
    """The executor reads a model's weights in place from its object store (pinned for the
    run, through a read-only mapping): every run leaves them as they were put, one that gives
    them back included; runs still going when the model is dropped read them to the end while
    other weights take memory; another model's weights of the same shape are never confused
    with them (oneDNN's reordered weights are kept by the stored bytes' version)."""
    w1, w2 = randn(16, 16, 3, 3), randn(16, 16, 3, 3)
    xs = [randn(1, 16, 12, 12) for _ in range(3)]
    want1 = [oracle(conv_model(w1), {"x": x})[0] for x in xs]
    m1 = aonnx.load(conv_model(w1), onnx_client, one)
    for x, want in zip(xs, want1):
        y, w_back = m1.run({"x": x})
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(w_back, w1)
    m2 = aonnx.load(conv_model(w2), onnx_client, one)
    y2, w2_back = m2.run({"x": xs[0]})
    np.testing.assert_allclose(y2, oracle(conv_model(w2), {"x": xs[0]})[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(w2_back, w2)

    # Submitted, not waited for; then the model's handles go and other weights are put.
    runs = [onnx_client.run(m1.function, x, *m1._hidden) for x in xs]
    del m1
    others = [aonnx.load(conv_model(randn(16, 16, 3, 3)), onnx_client, one) for _ in range(3)]
    for run, want in zip(runs, want1):
        y, w_back = run.result(120)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(w_back, w1)
    assert len(others) == 3


def test_shapes_from_constants(onnx_client, one):
    shape = numpy_helper.from_array(np.array([2, -1], np.int64), "shape")
    model = make(
        [helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("Reshape", ["x", "shape"], ["r"]),
         helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
         helper.make_node("Slice", ["t", "starts", "ends", "axes", "steps"], ["sl"]),
         helper.make_node("Unsqueeze", ["sl", "ax0"], ["u"]),
         helper.make_node("Concat", ["u", "u"], ["cc"], axis=0),
         helper.make_node("Gather", ["cc", "idx"], ["g"], axis=1),
         helper.make_node("ReduceMean", ["g"], ["y"], axes=[2], keepdims=1),
         helper.make_node("ArgMax", ["g"], ["am"], axis=1, keepdims=0),
         helper.make_node("Cast", ["s"], ["sf"], to=F)],
        [vi("x", [4, 3])],
        [vi("y", None), vi("am", None, TensorProto.INT64), vi("sf", None)],
        [shape, numpy_helper.from_array(np.array([5, 0], np.int64), "starts"),
         numpy_helper.from_array(np.array([-100, 2], np.int64), "ends"),
         numpy_helper.from_array(np.array([0, 1], np.int64), "axes"),
         numpy_helper.from_array(np.array([-2, 1], np.int64), "steps"),
         numpy_helper.from_array(np.array([0], np.int64), "ax0"),
         numpy_helper.from_array(np.array([[2, 0], [1, 1]], np.int64), "idx")], opset=13)
    check(model, onnx_client, one, {"x": randn(4, 3)})


def test_layernorm_where_topk_clip_cumsum(onnx_client, one):
    model = make(
        [helper.make_node("LayerNormalization", ["x", "g", "b"], ["ln"], axis=-1, epsilon=1e-5),
         helper.make_node("Greater", ["ln", "zero"], ["pos"]),
         helper.make_node("Where", ["pos", "ln", "x"], ["w"]),
         helper.make_node("Clip", ["w", "lo", "hi"], ["c"]),
         helper.make_node("CumSum", ["c", "axis"], ["cs"], exclusive=1),
         helper.make_node("TopK", ["cs", "k"], ["tv", "ti"], axis=1),
         helper.make_node("Einsum", ["x", "x"], ["e"], equation="ij,kj->ik"),
         helper.make_node("Tile", ["tv", "reps"], ["tt"]),
         helper.make_node("Expand", ["g", "eshape"], ["ex"]),
         helper.make_node("Split", ["x", "split"], ["s1", "s2"], axis=1),
         helper.make_node("Pad", ["s1", "pads"], ["pd"], mode="reflect")],
        [vi("x", [3, 6])],
        [vi("ti", None, TensorProto.INT64), vi("e", None), vi("tt", None), vi("ex", None),
         vi("s2", None), vi("pd", None)],
        [numpy_helper.from_array(randn(6), "g"), numpy_helper.from_array(randn(6), "b"),
         numpy_helper.from_array(np.array(0, np.float32), "zero"),
         numpy_helper.from_array(np.array(-0.5, np.float32), "lo"),
         numpy_helper.from_array(np.array(1.5, np.float32), "hi"),
         numpy_helper.from_array(np.array(1, np.int64), "axis"),
         numpy_helper.from_array(np.array([3], np.int64), "k"),
         numpy_helper.from_array(np.array([2, 2], np.int64), "reps"),
         numpy_helper.from_array(np.array([2, 6], np.int64), "eshape"),
         numpy_helper.from_array(np.array([2, 4], np.int64), "split"),
         numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads")], opset=18)
    check(model, onnx_client, one, {"x": randn(3, 6)}, rtol=1e-5, atol=1e-5)


def test_row_kernels_where_the_nodes_are_theirs(onnx_client, one):
    """The nodes that go to atoll's row kernels (a row bias on either side of Add, scalar
    arithmetic, Relu, LayerNormalization and Softmax over the last axis, Gemm's constant
    transposed at load) and, beside them, those that keep the decompositions (a LayerNorm
    whose statistics are read, a Softmax over another axis)."""
    model = make(
        [helper.make_node("Add", ["bias", "x"], ["a"]),
         helper.make_node("Add", ["a", "row"], ["a2"]),
         helper.make_node("Mul", ["half", "a2"], ["m"]),
         helper.make_node("Div", ["m", "three"], ["d"]),
         helper.make_node("Sub", ["d", "one"], ["s"]),
         helper.make_node("Relu", ["s"], ["r"]),
         helper.make_node("LayerNormalization", ["r", "g", "b"], ["ln"], axis=-1),
         helper.make_node("Softmax", ["ln"], ["sm"], axis=-1),
         helper.make_node("Softmax", ["ln"], ["sm1"], axis=1),
         helper.make_node("LayerNormalization", ["x", "g"], ["ln2", "mu", "inv"], axis=-1),
         helper.make_node("Gemm", ["x2", "w", "c"], ["gm"], transB=1)],
        [vi("x", [4, 6, 8]), vi("x2", [4, 8])],
        [vi("sm", [4, 6, 8]), vi("sm1", [4, 6, 8]), vi("ln2", [4, 6, 8]), vi("mu", None),
         vi("inv", None), vi("gm", [4, 5])],
        [numpy_helper.from_array(randn(8), "bias"), numpy_helper.from_array(randn(1, 8), "row"),
         numpy_helper.from_array(np.array(0.5, np.float32), "half"),
         numpy_helper.from_array(np.array(3.0, np.float32), "three"),
         numpy_helper.from_array(np.array([1.0], np.float32), "one"),
         numpy_helper.from_array(randn(8), "g"), numpy_helper.from_array(randn(8), "b"),
         numpy_helper.from_array(randn(5, 8), "w"), numpy_helper.from_array(randn(5), "c")])
    check(model, onnx_client, one, {"x": randn(4, 6, 8), "x2": randn(4, 8)}, rtol=1e-5,
          atol=1e-5)


def test_lstm_resize_attention(onnx_client, one):
    """Ops with more machinery: an LSTM unrolled over 5 steps (both directions), a linear
    Resize (interpolation matrices from onnx's reference), ConvTranspose, and a causal
    Attention (opset 23)."""
    hidden, feat = 4, 3
    lstm = make(
        [helper.make_node("LSTM", ["x", "w", "r", "b"], ["y", "yh", "yc"], hidden_size=hidden,
                          direction="bidirectional")],
        [vi("x", [5, 2, feat])],
        [vi("y", [5, 2, 2, hidden]), vi("yh", [2, 2, hidden]), vi("yc", [2, 2, hidden])],
        [numpy_helper.from_array(randn(2, 4 * hidden, feat), "w"),
         numpy_helper.from_array(randn(2, 4 * hidden, hidden), "r"),
         numpy_helper.from_array(randn(2, 8 * hidden), "b")])
    check(lstm, onnx_client, one, {"x": randn(5, 2, feat)}, rtol=1e-5, atol=1e-5)
    resize = make(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear",
                          coordinate_transformation_mode="half_pixel"),
         helper.make_node("ConvTranspose", ["y", "w"], ["z"], strides=[2, 2], pads=[1, 1, 0, 0])],
        [vi("x", [1, 2, 3, 4])], [vi("z", None)],
        [numpy_helper.from_array(np.array([1, 1, 2, 1.5], np.float32), "scales"),
         numpy_helper.from_array(randn(2, 3, 3, 3), "w")], opset=19)
    check(resize, onnx_client, one, {"x": randn(1, 2, 3, 4)}, rtol=1e-5, atol=1e-5)
    attention = make(
        [helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1)],
        [vi("q", [2, 2, 5, 8]), vi("k", [2, 2, 5, 8]), vi("v", [2, 2, 5, 8])],
        [vi("y", [2, 2, 5, 8])], opset=23)
    feeds = {n: randn(2, 2, 5, 8) for n in "qkv"}
    check(attention, onnx_client, one, feeds, rtol=1e-5, atol=1e-5)


def test_symbolic_dimension_takes_input_shapes(onnx_client, one):
    model = make([helper.make_node("Tanh", ["x"], ["y"])], [vi("x", ["N", 4])], [vi("y", ["N", 4])])
    x = randn(5, 4)
    with pytest.raises(aonnx.OnnxError,
                       match=r"graph input 'x' has the symbolic dimension 0 \(N\)"):
        aonnx.load(model, onnx_client, one)
    got = aonnx.load(model, onnx_client, one, input_shapes={"x": (5, 4)}).run({"x": x})
    np.testing.assert_allclose(got[0], oracle(model, {"x": x})[0], rtol=1e-6)


def test_initializers_are_put_once(onnx_client, one):
    w = randn(4, 4)
    model = make([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [2, 4])],
                 [vi("y", [2, 4])], [numpy_helper.from_array(w, "w")])
    m = aonnx.load(model, onnx_client, one)
    assert m.input_names == ["x"]
    assert all(isinstance(h, atoll.Future) for h in m._hidden)
    for _ in range(2):
        x = randn(2, 4)
        np.testing.assert_allclose(m.run([x])[0], oracle(model, {"x": x})[0], rtol=1e-5)


def test_dtypes_atoll_holds_wider(onnx_client, one):
    """int16 held in i32, float8 in f32 (a Cast into it rounds as onnxruntime does)."""
    model = make([helper.make_node("Add", ["a", "b"], ["s"]),
                  helper.make_node("Neg", ["s"], ["y"])],
                 [vi("a", [5], TensorProto.INT16), vi("b", [5], TensorProto.INT16)],
                 [vi("y", [5], TensorProto.INT16)])
    a = rng.integers(-1000, 1000, 5).astype(np.int16)
    b = rng.integers(-1000, 1000, 5).astype(np.int16)
    check(model, onnx_client, one, {"a": a, "b": b})
    model = make([helper.make_node("Cast", ["x"], ["q"], to=TensorProto.FLOAT8E4M3FN),
                  helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)],
                 [vi("x", [64])], [vi("y", [64])], opset=19)
    x = (randn(64) * 100).astype(np.float32)
    x[:4] = [1000.0, -1000.0, 1e-4, 0.0]
    check(model, onnx_client, one, {"x": x}, rtol=0, atol=0)


def test_batch_split_over_two_devices(onnx_client):
    """Data-parallel inference: the batch of x cut over a slice of 2 devices, each running the
    model on its share (conv, batch norm, pooling, softmax)."""
    inits = [numpy_helper.from_array(randn(4, 3, 3, 3), "w"),
             numpy_helper.from_array(randn(4), "b"), numpy_helper.from_array(randn(4, 5), "fc")]
    model = make(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("GlobalAveragePool", ["r"], ["g"]),
         helper.make_node("Flatten", ["g"], ["f"]),
         helper.make_node("MatMul", ["f", "fc"], ["l"]),
         helper.make_node("Softmax", ["l"], ["y"], axis=-1)],
        [vi("x", ["N", 3, 6, 6])], [vi("y", ["N", 5])], inits)
    x = randn(6, 3, 6, 6)
    m = aonnx.load(model, onnx_client, onnx_client.slice(2), input_shapes={"x": x.shape},
                   batch_split="x:0")
    np.testing.assert_allclose(m.run({"x": x})[0], oracle(model, {"x": x})[0], rtol=1e-5,
                               atol=1e-6)
    with pytest.raises(aonnx.OnnxError, match="no dimension 0 that the 2 devices divide"):
        aonnx.load(model, onnx_client, onnx_client.slice(2), input_shapes={"x": (5, 3, 6, 6)},
                   batch_split="x:0")


def test_maxpool_indices_det_and_quantized_matmul(onnx_client, one):
    """MaxPool's Indices (both storage orders, padding and strides), Det of a batch, and
    QLinearMatMul's requantized product, against onnxruntime."""
    for order in (0, 1):
        model = make([helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3],
                                       strides=[2, 2], pads=[1, 1, 1, 1], storage_order=order)],
                     [vi("x", [2, 3, 7, 6])],
                     [vi("y", [2, 3, 4, 3]), vi("i", [2, 3, 4, 3], TensorProto.INT64)])
        check(model, onnx_client, one, {"x": randn(2, 3, 7, 6)})
    model = make([helper.make_node("Det", ["x"], ["y"])], [vi("x", [5, 4, 4])], [vi("y", [5])])
    x = randn(5, 4, 4)
    x[1, 2] = x[1, 0]  # a singular one
    check(model, onnx_client, one, {"x": x}, rtol=1e-4, atol=1e-5)
    U8 = TensorProto.UINT8
    model = make([helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"],
                                   ["y"])],
                 [vi("a", [3, 8], U8), vi("b", [8, 5], U8)], [vi("y", [3, 5], U8)],
                 [numpy_helper.from_array(np.array(v, d), n) for n, v, d in (
                     ("sa", 0.02, np.float32), ("za", 120, np.uint8), ("sb", 0.01, np.float32),
                     ("zb", 130, np.uint8), ("sy", 0.05, np.float32), ("zy", 128, np.uint8))])
    check(model, onnx_client, one, {"a": rng.integers(0, 256, (3, 8), dtype=np.uint8),
                                    "b": rng.integers(0, 256, (8, 5), dtype=np.uint8)},
          rtol=0, atol=0)


# -- models exported by torch --------------------------------------------------------------
# Debian's torch, run by Debian's interpreter (bench/onnx/export_torch.py): the venv has none.
TORCH_PYTHON = "/usr/bin/python3"
# shufflenet_v2's channel shuffle is a 5-d Transpose between Reshapes whose shapes torch
# computes from Shape/Gather/Div, and its channel split is a pair of Slices.
TORCH_MODELS = ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "vit_b_16",
                "shufflenet_v2_x0_5", "encoder"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The models exported at 64x64 (the encoder: 64 tokens of 128), batch 4, with torch's
    outputs for a fixed input."""
    from conftest import SOURCE_DIR
    if not os.access(TORCH_PYTHON, os.X_OK) or subprocess.run(
            [TORCH_PYTHON, "-c", "import torch, torchvision"], capture_output=True).returncode:
        pytest.skip(f"{TORCH_PYTHON} lacks torch or torchvision (Debian's python3-torch and "
                    "python3-torchvision: scripts/setup.sh)")
    out = tmp_path_factory.mktemp("torch")
    r = subprocess.run([TORCH_PYTHON, str(SOURCE_DIR / "bench" / "onnx" / "export_torch.py"),
                        "--out", str(out), "--size", "64", "--batch", "4",
                        "--models", ",".join(TORCH_MODELS)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


@pytest.fixture(scope="module")
def models_cluster():
    """A cluster with room for the exported weights: one island of 4 devices."""
    from conftest import SOURCE_DIR, Cluster
    c = Cluster(SOURCE_DIR / "tests" / "python" / "onnx_models.toml")
    try:
        yield c.start()
    finally:
        c.remove()


@pytest.mark.parametrize("name", TORCH_MODELS)
def test_torch_exports_give_torchs_outputs(exported, models_cluster, name):
    """Within 1e-4 of torch's outputs (relative to their largest magnitude) and of
    onnxruntime's, on one device and with the batch split over 4."""
    path = str(exported / f"{name}.onnx")
    x = np.load(exported / f"{name}.input.npy")
    want = {"torch": np.load(exported / f"{name}.torch.npy"), "onnxruntime":
            oracle(onnx.load(path), {"x": x})[0]}
    with models_cluster.connect(name="pytest-onnx-torch") as c:
        for devices in (1, 4):
            m = aonnx.load(path, c, c.slice(devices), input_shapes={"x": x.shape},
                           batch_split="x:0" if devices > 1 else None)
            (got,) = m.run({"x": x})
            for oracle_name, w in want.items():
                assert got.dtype == w.dtype and got.shape == w.shape
                np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4 * np.abs(w).max(),
                                           err_msg=f"{name} on {devices} devices vs {oracle_name}")


# -- refusals -------------------------------------------------------------------------------
def test_refuses_an_unsupported_op_naming_the_node(onnx_client, one):
    model = make([helper.make_node("Relu", ["x"], ["r"], name="first"),
                  helper.make_node("NonMaxSuppression", ["r", "r"], ["y"], name="nms")],
                 [vi("x", [1, 4, 4])], [vi("y", None, TensorProto.INT64)])
    with pytest.raises(aonnx.OnnxError,
                       match=r"node 'nms' \(NonMaxSuppression\): the op type is not supported"):
        aonnx.load(model, onnx_client, one)


def test_refuses_an_unsupported_attribute_value(onnx_client, one):
    model = make([helper.make_node("Pad", ["x", "pads"], ["y"], name="p", mode="bogus")],
                 [vi("x", [2, 2])], [vi("y", None)],
                 [numpy_helper.from_array(np.array([1, 1, 1, 1], np.int64), "pads")])
    with pytest.raises(aonnx.OnnxError, match=r"node 'p' \(Pad\): mode 'bogus' is not supported"):
        aonnx.load(model, onnx_client, one)


def test_refuses_an_unsupported_dtype(onnx_client, one):
    model = make([helper.make_node("Identity", ["x"], ["y"])], [vi("x", [2], TensorProto.STRING)],
                 [vi("y", [2], TensorProto.STRING)])
    with pytest.raises(aonnx.OnnxError, match="graph input 'x': dtype STRING is not supported"):
        aonnx.load(model, onnx_client, one)
    model = make([helper.make_node("Cast", ["x"], ["y"], name="c", to=TensorProto.STRING)],
                 [vi("x", [2])], [vi("y", [2], TensorProto.STRING)])
    with pytest.raises(aonnx.OnnxError,
                       match=r"node 'c' \(Cast\): attribute 'to': dtype STRING is not supported"):
        aonnx.load(model, onnx_client, one)


def test_refuses_a_shape_known_only_at_run_time(onnx_client, one):
    model = make([helper.make_node("Reshape", ["x", "s"], ["y"], name="r")],
                 [vi("x", [2, 3]), vi("s", [2], TensorProto.INT64)], [vi("y", None)])
    with pytest.raises(aonnx.OnnxError,
                       match=r"node 'r' \(Reshape\): input 'shape' must be known at load"):
        aonnx.load(model, onnx_client, one)


def test_refuses_truncated_and_malformed_files(onnx_client, one, tmp_path):
    model = make([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])],
                 [numpy_helper.from_array(randn(64), "unused")])
    data = model.SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(aonnx.OnnxError, match=r"model file '.*cut.onnx' is malformed or truncated"):
        aonnx.load(str(path), onnx_client, one)
    bad = make([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])])
    bad.graph.node[0].input[0] = "nowhere"
    with pytest.raises(aonnx.OnnxError, match="the model is malformed"):
        aonnx.load(bad, onnx_client, one)
    with pytest.raises(aonnx.OnnxError, match="cannot be read"):
        aonnx.load(str(tmp_path / "absent.onnx"), onnx_client, one)


# -- onnx's own node cases ------------------------------------------------------------------
SMOKE = ["test_add_bcast", "test_relu", "test_matmul_3d", "test_gemm_all_attributes",
         "test_conv_with_strides_padding", "test_maxpool_2d_pads", "test_softmax_axis_1",
         "test_reshape_negative_dim", "test_slice_neg_steps", "test_gather_1",
         "test_reduce_mean_default_axes_keepdims_example", "test_layer_normalization_4d_axis1",
         "test_top_k", "test_einsum_batch_matmul", "test_cumsum_1d_exclusive"]


def test_node_conformance_smoke(onnx_client):
    import onnx.backend.test.case.node as node
    with np.errstate(all="ignore"):
        cases = {c.name: c for c in node.collect_testcases(None) if c.name in SMOKE}
    assert sorted(cases) == sorted(SMOKE)
    for name in SMOKE:
        case = cases[name]
        for inputs, outputs in case.data_sets:
            got = aonnx.Backend.prepare(case.model, "CPU", client=onnx_client).run(inputs)
            for w, g in zip(outputs, got):
                assert g.dtype == w.dtype, name
                np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol, err_msg=name)
    assert aonnx.Backend.supports_device("CPU") and not aonnx.Backend.supports_device("CUDA")
