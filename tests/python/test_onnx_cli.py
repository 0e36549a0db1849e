"""`atoll onnx run` end to end: the real `atoll` binary (which runs `python -m atoll.onnx`)
on the suite's cluster, its output files against onnxruntime's outputs for the same inputs
(the oracle), and its refusals read by their messages."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import BIN_DIR

ort = pytest.importorskip("onnxruntime")

rng = np.random.default_rng(7)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> pathlib.Path:
    """Conv, ReLU, global pooling, a dense layer and softmax over a symbolic batch, with a
    second input (a per-class bias) and two outputs (the logits and the probabilities)."""
    inits = [numpy_helper.from_array(randn(4, 3, 3, 3), "w"),
             numpy_helper.from_array(randn(4), "b"), numpy_helper.from_array(randn(4, 5), "fc")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["m"]),
             helper.make_node("Add", ["m", "bias"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=-1)]
    graph = helper.make_graph(
        nodes, "cli", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8]),
                       helper.make_tensor_value_info("bias", TensorProto.FLOAT, [5])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5]),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = tmp_path_factory.mktemp("model") / "small.onnx"
    onnx.save(model, str(path))
    return path


def atoll_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN_DIR / "atoll"), *args], capture_output=True, text=True,
                          timeout=300)


def save(tmp_path: pathlib.Path, name: str, a: np.ndarray) -> str:
    path = tmp_path / f"{name}.npy"
    np.save(path, a)
    return str(path)


def oracle(path: pathlib.Path, feeds):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


@pytest.mark.parametrize("devices", [1, 2])
def test_run_writes_each_output_as_onnxruntime_gives_it(cluster, model_file, tmp_path, devices):
    x, bias = randn(4, 3, 8, 8), randn(5)
    out = tmp_path / "out"
    args = ["run", str(model_file), "--input", f"x={save(tmp_path, 'x', x)}",
            "--input", f"bias={save(tmp_path, 'bias', bias)}", "--out", str(out)]
    if devices == 1:  # the state dir as the command's own option
        r = atoll_cli("onnx", *args, "--state-dir", cluster.state_dir)
    else:  # as `atoll`'s option, data-parallel over 2 devices
        r = atoll_cli("--state-dir", cluster.state_dir, "onnx", *args, "--devices", "2",
                      "--batch-split", "x:0")
    assert r.returncode == 0, r.stdout + r.stderr
    want = oracle(model_file, {"x": x, "bias": bias})
    assert sorted(p.name for p in out.iterdir()) == ["logits.npy", "probs.npy"]
    for name, w in want.items():
        got = np.load(out / f"{name}.npy")
        assert got.dtype == w.dtype and got.shape == w.shape
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
        line = next(ln for ln in r.stdout.splitlines() if ln.startswith(f"{name}: "))
        said = re.fullmatch(rf"{name}: shape \[4, 5\] float32, min (\S+) max (\S+) mean (\S+) "
                            rf"-> (.*)", line)
        assert said, r.stdout
        np.testing.assert_allclose([float(v) for v in said.groups()[:3]],
                                   [w.min(), w.max(), w.mean()], rtol=1e-4, atol=1e-5)
        assert said[4] == str(out / f"{name}.npy")


def test_atoll_onnx_without_a_cluster_says_so(model_file, tmp_path):
    r = atoll_cli("onnx", "run", str(model_file), "--input",
                  f"x={save(tmp_path, 'x', randn(2, 3, 8, 8))}", "--input",
                  f"bias={save(tmp_path, 'bias', randn(5))}", "--out", str(tmp_path / "o"),
                  "--state-dir", str(tmp_path / "no-cluster"))
    assert r.returncode == 1 and "atoll: no cluster running" in r.stderr, r.stderr
    assert not any((tmp_path / "o").iterdir())


REFUSALS = {
    "missing model": (["MODEL=absent.onnx"], r"model file '.*absent.onnx' cannot be read"),
    "truncated model": (["MODEL=cut.onnx"], r"model file '.*cut.onnx' is malformed or truncated"),
    "unknown input": (["--input", "y=X"],
                      r"--input 'y=.*x.npy': the model has no input 'y' \(its inputs: x, bias\)"),
    "input not given": ([], r"the model's input bias is not given \(--input NAME=FILE.npy\)"),
    "missing file": (["--input", "bias=nowhere.npy"], r"cannot read nowhere.npy"),
    "not npy": (["--input", "bias=MODEL"], r"small.onnx is not a .npy file"),
    "wrong shape": (["--input", "bias=SHAPE"],
                    r"input 'bias': the file holds shape \[6\], the model takes \[5\]"),
    "wrong rank": (["--input", "bias=RANK"],
                   r"input 'bias': the file holds shape \[1, 5\], the model takes \[5\]"),
    "wrong dtype": (["--input", "bias=DTYPE"],
                    r"input 'bias': the file holds float64, the model takes float32"),
    "split not dividing": (["--input", "bias=B", "--devices", "4", "--batch-split", "x:0"],
                           r"dimension 0 of input 'x' \(2\) is not a multiple of --devices 4"),
    "split unknown input": (["--input", "bias=B", "--batch-split", "z:0"],
                            r"--batch-split 'z:0': the model has no input 'z'"),
    "split malformed": (["--input", "bias=B", "--batch-split", "x"], r"expected NAME:DIM"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals_name_what_is_wrong(model_file, tmp_path, case):
    """Each refused before any cluster is reached: the state dir names none."""
    extra, message = REFUSALS[case]
    data = model_file.read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 2])
    files = {"X": save(tmp_path, "x", randn(2, 3, 8, 8)), "B": save(tmp_path, "b", randn(5)),
             "SHAPE": save(tmp_path, "shape", randn(6)), "RANK": save(tmp_path, "rank", randn(1, 5)),
             "DTYPE": save(tmp_path, "dtype", randn(5).astype(np.float64)),
             "MODEL": str(model_file)}
    model = str(model_file)
    args = []
    for a in extra:
        if a.startswith("MODEL="):
            model = str(tmp_path / a.split("=")[1])
            args += ["--input", f"bias={files['B']}"]
            continue
        name, eq, value = a.partition("=")
        args.append(f"{name}={files.get(value, value)}" if eq else a)
    out = tmp_path / "out"
    r = atoll_cli("onnx", "run", model, "--input", f"x={files['X']}", *args, "--out", str(out),
                  "--state-dir", str(tmp_path / "no-cluster"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.startswith("atoll: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert re.search(message, r.stderr), r.stderr
    assert not out.exists() or not any(out.iterdir())


def test_an_interpreter_that_cannot_run_is_named(model_file, tmp_path):
    """$ATOLL_PYTHON picks the interpreter; one that is not there fails naming it."""
    env = dict(os.environ, ATOLL_PYTHON=str(tmp_path / "no-python"))
    r = subprocess.run([str(BIN_DIR / "atoll"), "onnx", "run", str(model_file)],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"atoll: cannot run the Python interpreter {tmp_path / 'no-python'}" in r.stderr
