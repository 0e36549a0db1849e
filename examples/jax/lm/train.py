"""Trains the byte-level decoder-only LM (model.py) on Debian's fortunes (data.py), in one of
four layouts (layouts.py):

    python examples/jax/lm/train.py --layout jit                  # jax.jit on this CPU
    python examples/jax/lm/train.py --layout spmd                 # 4 devices of island0
    python examples/jax/lm/train.py --layout megatron             # 2x2 (data x model)
    python examples/jax/lm/train.py --layout pipeline --stages 2 --micro 4

The atoll layouts need a cluster (`atoll up`; ATOLL_HOME or --state-dir names it). Each step
is submitted before the previous step's loss is read. --checkpoint-every K saves the
parameters and optimizer state through the object stores every K steps; --resume starts
from the latest complete one; --elastic goes on by itself from it when a host of the
training slice is lost (atoll.jax.elastic). Prints one JSON object at the end: the losses,
the held-out loss in bits per byte, samples of generated text."""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import sys
import time
from typing import Any, Callable, Dict, List, Optional

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import data  # noqa: E402
import layouts  # noqa: E402
import model  # noqa: E402


def parse(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layout", choices=["jit", "spmd", "pipeline", "megatron"], default="jit")
    size = p.add_argument_group("model and data")
    size.add_argument("--layers", type=int, default=4)
    size.add_argument("--d-model", type=int, default=256)
    size.add_argument("--heads", type=int, default=8)
    size.add_argument("--context", type=int, default=128)
    size.add_argument("--batch", type=int, default=16)
    size.add_argument("--lr", type=float, default=3e-3)
    size.add_argument("--warmup", type=int, default=50)
    size.add_argument("--seed", type=int, default=0)
    # 120: what a full run of the default size does in about 40 minutes of steps on atoll on
    # 2 cores (20-30 s a step; README, "A full run")
    size.add_argument("--steps", type=int, default=120)
    lay = p.add_argument_group("layouts")
    lay.add_argument("--devices", type=int, default=4, help="spmd: devices of island0")
    lay.add_argument("--stages", type=int, default=2, help="pipeline: stages S")
    lay.add_argument("--micro", type=int, default=4, help="pipeline: micro-batches M")
    lay.add_argument("--stage-devices", type=int, default=1,
                     help="pipeline: devices of each stage (the micro-batch split over them)")
    lay.add_argument("--islands", type=int, choices=[1, 2], default=2,
                     help="pipeline: stages on island0 only (1) or half on island1 (2)")
    run = p.add_argument_group("running")
    run.add_argument("--state-dir", default=None, help="the cluster (default: ATOLL_HOME)")
    run.add_argument("--checkpoint", default="lm", help="checkpoints' path under the stores' "
                     "root (one directory per saved step below it)")
    run.add_argument("--checkpoint-every", type=int, default=0, help="K: save every K steps")
    run.add_argument("--resume", action="store_true", help="start from the latest checkpoint")
    run.add_argument("--elastic", action="store_true",
                     help="on a lost host of the slice, resume from the last checkpoint")
    run.add_argument("--eval-every", type=int, default=0,
                     help="held-out loss every E steps (0: at the end only)")
    run.add_argument("--eval-batches", type=int, default=8)
    run.add_argument("--samples", type=int, default=0, help="texts to generate at the end")
    run.add_argument("--sample-bytes", type=int, default=200)
    run.add_argument("--json", default=None, help="also write the result to this file")
    run.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def config(args: argparse.Namespace) -> model.Config:
    return model.Config(layers=args.layers, d_model=args.d_model, heads=args.heads,
                        context=args.context, batch=args.batch, lr=args.lr, warmup=args.warmup,
                        seed=args.seed)


def make_layout(args: argparse.Namespace, cfg: model.Config, client: Any) -> Any:
    options: Dict[str, Any] = {}
    if args.layout == "spmd":
        options = {"devices": args.devices}
    elif args.layout == "pipeline":
        options = {"stages": args.stages, "micro": args.micro,
                   "stage_devices": args.stage_devices, "islands": args.islands}
    return layouts.make(args.layout, cfg, client, **options)


# -- held-out loss and samples (on this machine's CPU, from the parameters read back) -----------

_loss = jax.jit(model.loss)  # compiled once per shape, for every evaluation
_logits = jax.jit(model.logits)


def held_out_bits_per_byte(params: Any, held: np.ndarray, cfg: model.Config,
                           batches: int) -> float:
    total = sum(float(_loss(params, *data.batch(held, j, cfg.batch, cfg.context, seed=1)))
                for j in range(batches))
    return total / batches / math.log(2)


def sample(params: Any, cfg: model.Config, prompt: bytes, length: int, seed: int) -> str:
    """``length`` bytes drawn after ``prompt`` (temperature 0.8), the window sliding once it
    is full; causal attention makes the zeros after the last byte irrelevant."""
    rng = np.random.default_rng(seed)
    text = list(prompt)
    for _ in range(length):
        window = text[-cfg.context:]
        tokens = np.zeros((1, cfg.context), np.int32)
        tokens[0, :len(window)] = window
        z = np.asarray(_logits(params, tokens))[0, len(window) - 1] / 0.8
        p = np.exp(z - z.max())
        text.append(int(rng.choice(256, p=p / p.sum())))
    return bytes(text).decode("utf-8", errors="replace")


# -- checkpoints -----------------------------------------------------------------------------------

def checkpoint_path(args: argparse.Namespace, step: int) -> str:
    return f"{args.checkpoint}/step-{step:07d}"


def latest_checkpoint(args: argparse.Namespace, client: Any, layout: Any, like: Any
                      ) -> Optional[tuple]:
    """The latest complete checkpoint (probing the multiples of K downwards: a save cut
    short has no index and is skipped): (step, state as numpy)."""
    import atoll  # noqa: PLC0415
    import atoll.jax as aj  # noqa: PLC0415
    k = args.checkpoint_every
    if k <= 0:
        raise ValueError("--resume and --elastic need --checkpoint-every K")
    for step in range(args.steps // k * k, 0, -k):
        try:
            loaded = aj.load(client, checkpoint_path(args, step),
                             {"state": like, "step": np.int32(0)}, layout.meshes[0])
        except atoll.NotFound:
            continue
        if int(loaded["step"]) != step:
            raise ValueError(f"checkpoint {checkpoint_path(args, step)} says step "
                             f"{int(loaded['step'])}")
        return step, loaded["state"]
    return None


# -- the loop ------------------------------------------------------------------------------------

def main(argv: Optional[List[str]] = None, *, client: Any = None,
         after_step: Optional[Callable[[int, float], None]] = None) -> Dict[str, Any]:
    """Trains as ``argv`` says; returns {"losses": {step: loss}, ...}. ``after_step(step,
    loss)`` is called as each loss is read (tests use it to kill a host mid-run)."""
    args = parse(argv)
    cfg = config(args)
    train_text, held = data.corpus()
    if args.layout != "jit" and client is None:
        import atoll  # noqa: PLC0415
        client = atoll.connect(state_dir=args.state_dir)
    if args.layout == "jit" and (args.checkpoint_every or args.resume or args.elastic):
        raise ValueError("--layout jit runs without a cluster: no checkpoints through the stores")
    layout = make_layout(args, cfg, client)
    tx = model.optimizer(cfg)
    params = model.init(cfg)
    like = layout.state(params, tx.init(params))
    log = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))
    losses: Dict[int, float] = {}
    resumed_from: List[int] = []
    evals: List[Dict[str, float]] = []
    times: List[float] = []

    def loop(resume: bool) -> Any:
        start, state = 0, like
        if resume:
            found = latest_checkpoint(args, client, layout, like)
            if found is not None:
                start, state = found
                log(f"resumed from step {start}")
            resumed_from.append(start)
        pending = None

        def read(entry: tuple) -> None:
            step, loss = entry
            losses[step] = float(loss)
            times.append(time.perf_counter())
            if not args.quiet and (step % 10 == 0 or step == args.steps - 1):
                log(f"step {step}: loss {losses[step]:.4f}")
            if after_step is not None:
                after_step(step, losses[step])

        for step in range(start, args.steps):
            tokens, targets = data.batch(train_text, step, cfg.batch, cfg.context, cfg.seed)
            state, loss = layout.step(state, tokens, targets)
            if pending is not None:
                read(pending)
            pending = (step, loss)
            done = step + 1
            if args.checkpoint_every and done % args.checkpoint_every == 0:
                import atoll.jax as aj  # noqa: PLC0415
                aj.save(client, {"state": state, "step": np.int32(done)},
                        checkpoint_path(args, done))
            if args.eval_every and done % args.eval_every == 0 and done < args.steps:
                evals.append({"step": done, "bits_per_byte": held_out_bits_per_byte(
                    layout.host(state)[0], held, cfg, args.eval_batches)})
                log(f"step {done}: held-out {evals[-1]['bits_per_byte']:.3f} bits/byte")
        if pending is not None:
            read(pending)
        return state

    if args.elastic:
        import atoll.jax as aj  # noqa: PLC0415
        state = aj.elastic(lambda resume: loop(resume or args.resume), log=log)
    else:
        state = loop(args.resume)
    params = layout.host(state)[0]
    evals.append({"step": args.steps, "bits_per_byte": held_out_bits_per_byte(
        params, held, cfg, args.eval_batches)})
    log(f"held-out loss after {args.steps} steps: {evals[-1]['bits_per_byte']:.3f} bits/byte")
    samples = [sample(params, cfg, prompt, args.sample_bytes, seed)
               for seed, prompt in enumerate([b"The ", b"A man ", b"Q: ", b"Life is "]
                                             [:args.samples])]
    for s in samples:
        log("---\n" + s)
    steady = np.diff(times[len(times) // 4:]) if len(times) > 8 else np.array([])
    result = {"layout": args.layout, "config": vars(args),
              "losses": [losses[i] for i in sorted(losses)], "first_step": min(losses, default=0),
              "resumed_from": resumed_from, "held_out": evals, "samples": samples,
              "seconds_per_step": float(np.median(steady)) if steady.size else None}
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    out = main()
    print(json.dumps({k: out[k] for k in ("layout", "held_out", "seconds_per_step")}))
