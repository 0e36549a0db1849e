"""Inference throughput of atoll.onnx against onnxruntime's CPU provider in the same run:
resnet18 (images/s, batch 1 and 16) and a 2-layer transformer encoder (sequences/s), on
atoll with 1 device and with the batch split over 2 devices of one island, onnxruntime with
the same number of threads. Models: bench/onnx/models.py (seeded random weights). Starts a
cluster of its own (bench.toml) unless --state-dir names one. Writes
bench/results/onnx_throughput.json.

    ATOLL_PYTHON_DIR=... ATOLL_BIN_DIR=... python bench/onnx/throughput.py [--size 224]
        [--seconds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE.parents[1]
if "ATOLL_PYTHON_DIR" in os.environ:
    sys.path.insert(0, os.environ["ATOLL_PYTHON_DIR"])
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
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


def measure(client, name, model, x, devices, seconds):
    import atoll.onnx as aonnx
    batch = x.shape[0]
    split = "x:0" if devices > 1 else None
    m = aonnx.load(model, client, client.slice(devices), batch_split=split)
    got = m.run([x])[0]
    so = ort.SessionOptions()
    so.intra_op_num_threads = devices
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    err = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))
    a = rate(lambda: m.run([x]), batch, seconds)
    o = rate(lambda: sess.run(None, {"x": x}), batch, seconds)
    print({"model": name, "batch": batch, "devices": devices, "atoll_per_s": round(a, 2),
           "onnxruntime_per_s": round(o, 2), "ratio": round(a / o, 3), "max_rel_err": err},
          flush=True)
    unit = "images/s" if name.startswith("resnet") else "sequences/s"
    params = {"model": name, "batch": batch, "devices": devices}
    return [row("atoll", params, "items_per_s", unit, [a]),
            row("onnxruntime", params, "items_per_s", unit, [o]),
            row("atoll_over_onnxruntime", params, "ratio", "x", [a / o]),
            row("atoll_vs_onnxruntime", params, "max_rel_err", "1", [err])]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--state-dir", default="")
    ap.add_argument("--out", default=str(SOURCE / "bench" / "results" / "onnx_throughput.json"))
    args = ap.parse_args()
    import atoll
    rows = []
    rng = np.random.default_rng(0)
    with cluster(args.state_dir, HERE / "bench.toml", "atoll-onnx-bench-") as state:
        client = atoll.connect(state_dir=state, name="onnx-bench")
        for batch in (1, 16):
            x = rng.standard_normal((batch, 3, args.size, args.size)).astype(np.float32)
            for devices in ((1,) if batch == 1 else (1, 2)):
                rows += measure(client, f"resnet18@{args.size}",
                                models.resnet18(batch, args.size), x, devices, args.seconds)
        x = rng.standard_normal((16, 64, 128)).astype(np.float32)
        for devices in (1, 2):
            rows += measure(client, "encoder2x128", models.encoder(16), x, devices,
                            args.seconds)
        client.close()
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ratios = {f"ratio_{r['params']['model']}_b{r['params']['batch']}_d{r['params']['devices']}":
              round(r["median"], 4) for r in rows if r["series"] == "atoll_over_onnxruntime"}
    res = result("onnx_throughput", rows, ratios, quick=args.size != 224, image_size=args.size,
                 threads="onnxruntime intra_op threads = atoll devices")
    out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
