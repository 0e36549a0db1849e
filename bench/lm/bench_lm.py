"""The paper's Table 2 at this machine's scale: training throughput (tokens/s) of
examples/jax/lm's decoder-only LM in every layout, in one run against one cluster:

- spmd: data-parallel on 4 devices of island0 (and on 1 device);
- pipeline: GPipe, S = 2 (2 devices a stage) and S = 4 (1 device a stage), M = 4, 8, 16
  micro-batches, half the stages on each island; and at the largest M on one island;
- megatron: 2x2 (data x model) on island0;
- jax.jit on this machine's CPU (1 device).

Derived: pipeline over spmd at the same device count (4; the paper's Table 2 shape, target
>= 0.9 at the largest M), pipeline across two islands over pipeline on one (target >= 0.95),
atoll spmd at 1 device over jax.jit. Each pipeline is measured right after an spmd run
(4 devices) and divided by it; --rounds repeats everything, the derived figures are medians.
Starts a cluster of its own (bench.toml) unless --state-dir names one. Writes
bench/results/lm.json (--table2: spmd and the two-island pipelines only, lm_table2.json).

    ATOLL_PYTHON_DIR=... ATOLL_BIN_DIR=... python bench/lm/bench_lm.py [--steps 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import sys
import time
from typing import Any, Dict, List, Tuple

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
    ap.add_argument("--rounds", type=int, default=1,
                    help="times every configuration is measured (round after round)")
    ap.add_argument("--micro", default="4,8,16")
    ap.add_argument("--table2", action="store_true",
                    help="only spmd on 4 devices and the two-island pipelines (the paper's "
                         "Table 2 ratios); writes bench/results/lm_table2.json")
    ap.add_argument("--state-dir", default="")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    import atoll  # noqa: PLC0415
    cfg = model.Config(layers=args.layers, d_model=args.d_model, heads=args.heads,
                       context=args.context, batch=args.batch)
    micro = [int(m) for m in args.micro.split(",")]
    bench = "lm_table2" if args.table2 else "lm"
    out = pathlib.Path(args.out or SOURCE / "bench" / "results" / f"{bench}.json")
    text = data.corpus()[0]
    samples: Dict[str, List[float]] = collections.defaultdict(list)
    ratios: Dict[str, List[float]] = collections.defaultdict(list)
    described: Dict[str, Tuple[str, Dict[str, Any]]] = {}

    def measure(key: str, series: str, params: Dict[str, Any], layout: Any) -> float:
        # "config": the bar's label in bench/report.py's figure (one group per configuration)
        described[key] = (series, {"config": key, **params})
        rate = tokens_per_s(layout, cfg, text, args.steps)
        samples[key].append(rate)
        print(json.dumps({"series": series, "config": key, **params,
                          "tokens_per_s": round(rate, 1)}), flush=True)
        return rate

    with cluster(args.state_dir, HERE / "bench.toml", "atoll-lm-bench-") as state:
        client = atoll.connect(state_dir=state, name="lm-bench")
        spmd4 = layouts.Spmd(cfg, client, devices=4)
        others = [] if args.table2 else [
            ("jit", "jax_jit", {"devices": 1}, layouts.Jit(cfg)),
            ("spmd1", "spmd", {"devices": 1}, layouts.Spmd(cfg, client, devices=1)),
            ("megatron", "megatron", {"devices": 4}, layouts.Megatron(cfg, client))]
        pipelines = []  # (key, series, params, layout, islands)
        for stages in (2, 4):
            for islands in (2, 1):
                for m in (micro if islands == 2 else micro[-1:]):
                    if islands == 1 and args.table2:
                        continue
                    pipelines.append((
                        f"pipe{islands}_s{stages}_m{m}",
                        "pipeline_2_islands" if islands == 2 else "pipeline_1_island",
                        {"devices": 4, "stages": stages, "micro_batches": m},
                        layouts.Pipeline(cfg, client, stages=stages, micro=m,
                                         stage_devices=4 // stages, islands=islands)))
        for _ in range(args.rounds):
            for config in others:
                measure(*config)
            # The load of the others on these cores changes by tens of percent within
            # minutes: each pipeline is measured right after an spmd run of its own, and
            # compared with that one.
            for key, series, params, layout in pipelines:
                base = measure("spmd4", "spmd", {"devices": 4}, spmd4)
                ratios[key].append(measure(key, series, params, layout) / base)
        client.close()
    rows = [row(*described[key], "tokens_per_s", "tokens/s", rates)
            for key, rates in samples.items()]
    derived = derived_figures(samples, ratios, micro, args.table2)
    out.parent.mkdir(parents=True, exist_ok=True)
    model_text = (f"{cfg.layers} layers, d_model {cfg.d_model}, {cfg.heads} heads, context "
                  f"{cfg.context}, batch {cfg.batch}")
    res = result(bench, rows, derived, quick=True, model=model_text, steps=args.steps,
                 rounds=args.rounds)
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(derived, indent=1))
    return 0


def derived_figures(samples: Dict[str, List[float]], ratios: Dict[str, List[float]],
                    micro: List[int], table2: bool) -> Dict[str, float]:
    """Medians over the rounds: each pipeline over the spmd run just before it (the paper's
    Table 2 shape), and the ratios of the other configurations' medians."""
    def med(values: List[float]) -> float:
        return float(np.median(values))

    derived: Dict[str, float] = {}
    if not table2:
        derived["spmd_1_device_over_jax_jit"] = round(med(samples["spmd1"]) /
                                                      med(samples["jit"]), 4)
        derived["megatron_over_spmd_4"] = round(med(samples["megatron"]) /
                                                med(samples["spmd4"]), 4)
    top = micro[-1]
    for stages in (2, 4):
        for m in micro:
            derived[f"pipeline_s{stages}_m{m}_over_spmd_4"] = round(
                med(ratios[f"pipe2_s{stages}_m{m}"]), 4)
        if not table2:
            derived[f"pipeline_s{stages}_m{top}_2_islands_over_1_island"] = round(
                med(samples[f"pipe2_s{stages}_m{top}"]) / med(samples[f"pipe1_s{stages}_m{top}"]),
                4)
    return derived


if __name__ == "__main__":
    sys.exit(main())
