"""A training run's curve as a bench result: reads the JSON that examples/jax/lm/train.py
writes (--json) and writes bench/results/lm_curve.json (bench/README.md's form), whose rows
are the training loss and the held-out loss in bits per byte against the step; bench/report.py
plots it (bench/lm_curve_bits_per_byte.png).

    python bench/lm/curve.py RUN.json [--out bench/results/lm_curve.json] [--every 10]
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "onnx"))  # result.py: bench/results' JSON form

from result import result, row  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--out", default=str(HERE.parent / "results" / "lm_curve.json"))
    ap.add_argument("--every", type=int, default=10, help="one training point per N steps "
                    "(the mean of those N losses)")
    args = ap.parse_args()
    run = json.loads(pathlib.Path(args.run).read_text())
    losses, first = run["losses"], run["first_step"]
    rows = []
    for start in range(0, len(losses) - args.every + 1, args.every):
        window = losses[start:start + args.every]
        rows.append(row("train", {"step": first + start + args.every}, "bits_per_byte",
                        "bits/byte", [sum(window) / len(window) / math.log(2)]))
    for e in run["held_out"]:
        rows.append(row("held_out", {"step": e["step"]}, "bits_per_byte", "bits/byte",
                        [e["bits_per_byte"]]))
    cfg = run["config"]
    final = run["held_out"][-1]["bits_per_byte"]
    per_step = run.get("seconds_per_step")
    notes = [f"`examples/jax/lm/train.py --layout {run['layout']}`: held-out loss "
             f"{final:.3f} bits per byte after {cfg['steps']} steps"
             + (f", {per_step:.1f} s a step" if per_step else "")
             + ". Samples of generated text at the end (temperature 0.8), one per prompt:",
             "", "```"]
    for i, text in enumerate(run["samples"]):
        # a fence inside a sample would end the block early
        notes += ([] if i == 0 else ["---"]) + text.replace("```", "'''").splitlines()
    notes.append("```")
    res = result("lm_curve", rows, {"held_out_bits_per_byte_final": round(final, 4)},
                 quick=False, layout=run["layout"],
                 model=(f"{cfg['layers']} layers, d_model {cfg['d_model']}, {cfg['heads']} "
                        f"heads, context {cfg['context']}, batch {cfg['batch']}, "
                        f"{cfg['steps']} steps"),
                 samples=run["samples"], notes=notes)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
