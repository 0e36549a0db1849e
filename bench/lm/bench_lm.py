"""The paper's Table 2 at this machine's scale: training throughput (tokens/s) of
examples/jax/lm's decoder-only LM in every layout, in one run against one cluster:

- spmd: data-parallel on 4 devices of island0 (and on 1 device);
- pipeline: GPipe, S = 2 (2 devices a stage) and S = 4 (1 device a stage), M = 4, 8, 16
  micro-batches, half the stages on each island; and at the largest M on one island;
- megatron: 2x2 (data x model) on island0;
- jax.jit on this machine's CPU (1 device).

Derived: pipeline over spmd at the same device count (4; the paper's Table 2 shape, target
>= 0.9 at the largest M), pipeline across two islands over pipeline on one (target >= 0.95),
atoll spmd at 1 device over jax.jit. Starts a cluster of its own (bench.toml) unless
--state-dir names one. Writes bench/results/lm.json.

    ATOLL_PYTHON_DIR=... ATOLL_BIN_DIR=... python bench/lm/bench_lm.py [--steps 5]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from typing import Any, Dict, List

from lm_paths import HERE, SOURCE  # first: sets JAX_PLATFORMS and the import paths

import numpy as np  # noqa: E402

import data  # noqa: E402
import layouts  # noqa: E402
import model  # noqa: E402
from result import cluster, result, row  # noqa: E402


def tokens_per_s(layout: Any, cfg: model.Config, text: np.ndarray, steps: int) -> float:
    """Steps submitted one after another, each loss read one step late (as train.py does);
    the first step (trace, lower, register) is not timed."""
    params = model.init(cfg)
    state = layout.state(params, model.optimizer(cfg).init(params))
    batches = [data.batch(text, i, cfg.batch, cfg.context) for i in range(steps + 1)]
    state, loss = layout.step(state, *batches[0])
    float(loss)
    start = time.perf_counter()
    pending = None
    for tokens, targets in batches[1:]:
        state, loss = layout.step(state, tokens, targets)
        if pending is not None:
            float(pending)
        pending = loss
    float(pending)
    return steps * cfg.batch * cfg.context / (time.perf_counter() - start)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=32)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per configuration")
    ap.add_argument("--micro", default="4,8,16")
    ap.add_argument("--state-dir", default="")
    ap.add_argument("--out", default=str(SOURCE / "bench" / "results" / "lm.json"))
    args = ap.parse_args()
    import atoll  # noqa: PLC0415
    cfg = model.Config(layers=args.layers, d_model=args.d_model, heads=args.heads,
                       context=args.context, batch=args.batch)
    micro = [int(m) for m in args.micro.split(",")]
    text = data.corpus()[0]
    rows: List[Dict[str, Any]] = []
    rates: Dict[str, float] = {}

    def measure(key: str, series: str, params: Dict[str, Any], layout: Any) -> None:
        # "config": the bar's label in bench/report.py's figure (one group per configuration)
        params = {"config": key, **params}
        rate = tokens_per_s(layout, cfg, text, args.steps)
        rates[key] = rate
        rows.append(row(series, params, "tokens_per_s", "tokens/s", [rate]))
        print(json.dumps({"series": series, **params, "tokens_per_s": round(rate, 1)}),
              flush=True)

    with cluster(args.state_dir, HERE / "bench.toml", "atoll-lm-bench-") as state:
        client = atoll.connect(state_dir=state, name="lm-bench")
        measure("jit", "jax_jit", {"devices": 1}, layouts.Jit(cfg))
        measure("spmd1", "spmd", {"devices": 1}, layouts.Spmd(cfg, client, devices=1))
        measure("spmd4", "spmd", {"devices": 4}, layouts.Spmd(cfg, client, devices=4))
        measure("megatron", "megatron", {"devices": 4}, layouts.Megatron(cfg, client))
        for stages in (2, 4):
            for m in micro:
                measure(f"pipe2_s{stages}_m{m}", "pipeline_2_islands",
                        {"devices": 4, "stages": stages, "micro_batches": m},
                        layouts.Pipeline(cfg, client, stages=stages, micro=m,
                                         stage_devices=4 // stages, islands=2))
            measure(f"pipe1_s{stages}_m{micro[-1]}", "pipeline_1_island",
                    {"devices": 4, "stages": stages, "micro_batches": micro[-1]},
                    layouts.Pipeline(cfg, client, stages=stages, micro=micro[-1],
                                     stage_devices=4 // stages, islands=1))
        client.close()
    top = micro[-1]
    derived = {"spmd_1_device_over_jax_jit": round(rates["spmd1"] / rates["jit"], 4),
               "megatron_over_spmd_4": round(rates["megatron"] / rates["spmd4"], 4)}
    for stages in (2, 4):
        for m in micro:
            derived[f"pipeline_s{stages}_m{m}_over_spmd_4"] = round(
                rates[f"pipe2_s{stages}_m{m}"] / rates["spmd4"], 4)
        derived[f"pipeline_s{stages}_m{top}_2_islands_over_1_island"] = round(
            rates[f"pipe2_s{stages}_m{top}"] / rates[f"pipe1_s{stages}_m{top}"], 4)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    model_text = (f"{cfg.layers} layers, d_model {cfg.d_model}, {cfg.heads} heads, context "
                  f"{cfg.context}, batch {cfg.batch}")
    res = result("lm", rows, derived, quick=True, model=model_text, steps=args.steps)
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(derived, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
