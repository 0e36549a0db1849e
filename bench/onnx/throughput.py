"""Inference throughput of atoll.onnx against onnxruntime's CPU provider in the same run:
resnet18 (images/s, batch 1 and 16) and a 2-layer transformer encoder (sequences/s), on
atoll with 1 device and with the batch split over 2 devices of one island, onnxruntime with
the same number of threads. Models (seeded random weights): torchvision's resnet18 and a
torch.nn.TransformerEncoder exported by torch.onnx.export (bench/onnx/export_torch.py, run
by Debian's /usr/bin/python3 with python3-torch); where that interpreter lacks torch, or with
--models helper, the onnx.helper stand-ins of bench/onnx/models.py. Starts a cluster of its
own (bench.toml) unless --state-dir names one. Writes bench/results/onnx_throughput.json.

    ATOLL_PYTHON_DIR=... ATOLL_BIN_DIR=... python bench/onnx/throughput.py [--size 224]
        [--seconds 5] [--models torch|helper]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE.parents[1]
if "ATOLL_PYTHON_DIR" in os.environ:
    sys.path.insert(0, os.environ["ATOLL_PYTHON_DIR"])
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

import models  # noqa: E402
from result import cluster, result, row  # noqa: E402


def rate(fn, items: int, seconds: float) -> float:
    fn()  # warm
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds or n < 2:
        fn()
        n += 1
    return items * n / (time.perf_counter() - t0)


TORCH_PYTHON = "/usr/bin/python3"
ROUNDS = 5


def torch_exports(size: int, where: str):
    """resnet18 and the encoder exported by torch (batch symbolic), or None, saying why."""
    if not os.access(TORCH_PYTHON, os.X_OK) or subprocess.run(
            [TORCH_PYTHON, "-c", "import torch, torchvision"], capture_output=True).returncode:
        print(f"{TORCH_PYTHON} lacks torch or torchvision (Debian's python3-torch and "
              "python3-torchvision): the onnx.helper stand-ins instead", flush=True)
        return None
    subprocess.run([TORCH_PYTHON, str(HERE / "export_torch.py"), "--out", where, "--size",
                    str(size), "--batch", "1", "--models", "resnet18,encoder"], check=True)
    return {n: onnx.load(os.path.join(where, f"{n}.onnx")) for n in ("resnet18", "encoder")}


def measure(client, name, model, x, devices, seconds):
    import atoll.onnx as aonnx
    batch = x.shape[0]
    split = "x:0" if devices > 1 else None
    m = aonnx.load(model, client, client.slice(devices), input_shapes={"x": x.shape},
                   batch_split=split)
    got = m.run([x])[0]
    so = ort.SessionOptions()
    so.intra_op_num_threads = devices
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    err = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))
    # Rounds that alternate the two, so that a machine whose load drifts (other work on its
    # cores) weighs on both alike; the ratio of each round, its median reported.
    a, o = [], []
    for _ in range(ROUNDS):
        a.append(rate(lambda: m.run([x]), batch, seconds / ROUNDS))
        o.append(rate(lambda: sess.run(None, {"x": x}), batch, seconds / ROUNDS))
    ratios = [p / q for p, q in zip(a, o)]
    print({"model": name, "batch": batch, "devices": devices,
           "atoll_per_s": round(float(np.median(a)), 2),
           "onnxruntime_per_s": round(float(np.median(o)), 2),
           "ratio": round(float(np.median(ratios)), 3), "max_rel_err": err}, flush=True)
    unit = "images/s" if name.startswith("resnet") else "sequences/s"
    params = {"model": name, "batch": batch, "devices": devices}
    return [row("atoll", params, "items_per_s", unit, a),
            row("onnxruntime", params, "items_per_s", unit, o),
            row("atoll_over_onnxruntime", params, "ratio", "x", ratios),
            row("atoll_vs_onnxruntime", params, "max_rel_err", "1", [err])]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--seconds", type=float, default=10.0,
                    help="per model and side, over the rounds")
    ap.add_argument("--state-dir", default="")
    ap.add_argument("--models", choices=("torch", "helper"), default="torch",
                    help="torch: exported by torch.onnx.export (where Debian's torch is); "
                         "helper: the onnx.helper stand-ins")
    ap.add_argument("--out", default=str(SOURCE / "bench" / "results" / "onnx_throughput.json"))
    args = ap.parse_args()
    import atoll
    rows = []
    rng = np.random.default_rng(0)
    exports = tempfile.mkdtemp(prefix="atoll-onnx-torch-")
    exported = torch_exports(args.size, exports) if args.models == "torch" else None
    source = "torch.onnx.export" if exported else "onnx.helper"
    with cluster(args.state_dir, HERE / "bench.toml", "atoll-onnx-bench-") as state:
        client = atoll.connect(state_dir=state, name="onnx-bench")
        for batch in (1, 16):
            x = rng.standard_normal((batch, 3, args.size, args.size)).astype(np.float32)
            model = exported["resnet18"] if exported else models.resnet18(batch, args.size)
            for devices in ((1,) if batch == 1 else (1, 2)):
                rows += measure(client, f"resnet18@{args.size}", model, x, devices, args.seconds)
        x = rng.standard_normal((16, 64, 128)).astype(np.float32)
        model = exported["encoder"] if exported else models.encoder(16)
        for devices in (1, 2):
            rows += measure(client, "encoder2x128", model, x, devices, args.seconds)
        client.close()
    shutil.rmtree(exports, ignore_errors=True)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ratios = {f"ratio_{r['params']['model']}_b{r['params']['batch']}_d{r['params']['devices']}":
              round(r["median"], 4) for r in rows if r["series"] == "atoll_over_onnxruntime"}
    res = result("onnx_throughput", rows, ratios, quick=args.size != 224, image_size=args.size,
                 models=source, threads="onnxruntime intra_op threads = atoll devices")
    out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
