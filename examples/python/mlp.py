#!/usr/bin/env python3
"""Data-parallel training of a 2-layer MLP on synthetic data, from Python: the model of
examples/mlp (the C++ example) traced from a plain Python function, on the same data, so that
both print the same losses.

The batch is split over the slice's devices and the weights are replicated; the step's
gradients come from atoll.value_and_grad (each device computes its share, and the
all_reduce_sum it adds makes the batch's), and every device takes the same SGD step. Run it on the cluster `atoll up` started (or --rm EP):

    PYTHONPATH=build/python .venv/bin/python examples/python/mlp.py --steps 5
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from typing import Callable, List, Optional, Tuple

import numpy as np

import atoll
from atoll import ops


@dataclasses.dataclass
class MlpConfig:
    batch: int = 64  # global; a multiple of the slice's device count
    inputs: int = 16
    hidden: int = 32
    classes: int = 4
    steps: int = 30
    learning_rate: float = 2.0
    seed: int = 1  # of the initial weights and of the data


Params = Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # w1, b1, w2, b2


def uniform(seed: int, count_before: int, shape: Tuple[int, ...], bound: float) -> np.ndarray:
    """What the C++ examples' Uniform(std::mt19937(seed), shape, bound) draws, after
    `count_before` earlier draws of the same generator: libstdc++'s
    uniform_real_distribution<float>(-bound, bound), one 32-bit output per value."""
    state = np.random.RandomState(seed).get_state()  # seeded as std::mt19937(seed)
    bits = np.random.MT19937()
    bits.state = {"bit_generator": "MT19937", "state": {"key": state[1], "pos": state[2]}}
    count = int(np.prod(shape))
    raw = bits.random_raw(count_before + count)[count_before:]
    canonical = raw.astype(np.float32) / np.float32(2.0**32)
    canonical = np.minimum(canonical, np.nextafter(np.float32(1), np.float32(0)))
    low, high = np.float32(-bound), np.float32(bound)
    return (canonical * (high - low) + low).astype(np.float32).reshape(shape)


def init_mlp(c: MlpConfig) -> Params:
    """Small random weights and zero biases, from c.seed (examples/mlp's InitMlp)."""
    bound1 = np.float32(1) / np.sqrt(np.float32(c.inputs))
    bound2 = np.float32(1) / np.sqrt(np.float32(c.hidden))
    w1 = uniform(c.seed, 0, (c.inputs, c.hidden), bound1)
    w2 = uniform(c.seed, c.inputs * c.hidden, (c.hidden, c.classes), bound2)
    return w1, np.zeros(c.hidden, np.float32), w2, np.zeros(c.classes, np.float32)


def make_batch(c: MlpConfig, step: int) -> Tuple[np.ndarray, np.ndarray]:
    """Step `step`'s inputs, labelled by a fixed random linear teacher (MakeMlpBatch)."""
    teacher = uniform((c.seed ^ 0x7EAC4E7) & 0xFFFFFFFF, 0, (c.inputs, c.classes), 1.0)
    x = uniform((c.seed * 7919 + step) & 0xFFFFFFFF, 0, (c.batch, c.inputs), 1.0)
    # As the C++ code sums: float products, accumulated in double in input order.
    score = np.zeros((c.batch, c.classes), np.float64)
    for k in range(c.inputs):
        score += (x[:, k, None] * teacher[None, k, :]).astype(np.float64)
    return x, np.argmax(score, axis=1).astype(np.int32)


def train_step(client: atoll.Client, s: atoll.Slice, c: MlpConfig) -> atoll.Function:
    """One SGD step of logits = gelu(x w1 + b1) w2 + b2 under softmax cross-entropy: the
    updated w1, b1, w2, b2 and the loss before the update."""

    def loss_fn(x, labels, w1, b1, w2, b2):
        h = ops.gelu(ops.bias_add(x @ w1, b1))
        loss, _ = ops.cross_entropy(ops.bias_add(h @ w2, b2), labels)
        return ops.all_reduce_sum(loss)  # each device's share of the batch's mean

    @client.function(s, atoll.f32[c.batch, c.inputs].split(0), atoll.i32[c.batch].split(0),
                     atoll.f32[c.inputs, c.hidden], atoll.f32[c.hidden],
                     atoll.f32[c.hidden, c.classes], atoll.f32[c.classes],
                     name="mlp_train_step")
    def step(x, labels, w1, b1, w2, b2):
        # The gradients of the replicated weights, all-reduced over the devices' rows.
        loss, grads = atoll.value_and_grad(loss_fn, argnums=(2, 3, 4, 5))(x, labels, w1, b1,
                                                                          w2, b2)
        weights = (w1, b1, w2, b2)
        return (*(ops.sgd_update(w, g, c.learning_rate) for w, g in zip(weights, grads)), loss)

    return step


def train_mlp(client: atoll.Client, s: atoll.Slice, c: MlpConfig,
              on_step: Optional[Callable[[int, float, float], None]] = None,
              timeout: float = 30.0) -> Tuple[Params, List[float]]:
    """Trains c.steps steps on slice `s`; calls on_step(step, loss, seconds) after each.
    Returns the weights and the losses."""
    if c.steps < 1 or c.batch % s.num_devices != 0:
        raise ValueError(f"need steps >= 1 and a batch ({c.batch}) that divides over "
                         f"{s.num_devices} devices")
    step_fn = train_step(client, s, c)
    params = init_mlp(c)
    losses: List[float] = []
    for step in range(1, c.steps + 1):
        start = time.perf_counter()
        x, labels = make_batch(c, step)
        *new_params, loss = client.run(step_fn, x, labels, *params).result(timeout=timeout)
        params = (new_params[0], new_params[1], new_params[2], new_params[3])
        losses.append(float(loss))
        if on_step:
            on_step(step, losses[-1], time.perf_counter() - start)
    return params, losses


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rm", help="the RM's endpoint (default: the cluster `atoll up` "
                        "started, or $ATOLL_RM)")
    parser.add_argument("--devices", type=int, default=4, help="devices in the slice")
    parser.add_argument("--island", default="island0", help="the island of the slice")
    parser.add_argument("--steps", type=int, default=30, help="training steps")
    parser.add_argument("--batch", type=int, default=64, help="examples per step")
    parser.add_argument("--hidden", type=int, default=32, help="hidden units")
    parser.add_argument("--lr", type=float, default=2.0, help="SGD learning rate")
    parser.add_argument("--seed", type=int, default=1, help="weights and data")
    args = parser.parse_args(argv)
    c = MlpConfig(batch=args.batch, hidden=args.hidden, steps=args.steps,
                  learning_rate=args.lr, seed=args.seed)
    try:
        with atoll.connect(args.rm, name="example-mlp-python") as client:
            s = client.slice(args.devices, args.island)
            print(f"MLP {c.inputs}-{c.hidden}-{c.classes}, batch {c.batch} split over "
                  f"{args.devices} devices of {args.island}, {c.steps} steps of SGD "
                  f"(lr {c.learning_rate:g})")
            start = time.perf_counter()

            def report(step: int, loss: float, seconds: float) -> None:
                print(f"step {step:3}/{c.steps}  loss {loss:.4f}  "
                      f"{c.batch / seconds:8.0f} examples/s", flush=True)

            _, losses = train_mlp(client, s, c, report)
            elapsed = time.perf_counter() - start
    except atoll.Error as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"done: loss {losses[0]:.4f} -> {losses[-1]:.4f} in {c.steps} steps, "
          f"{c.batch * c.steps / elapsed:.0f} examples/s on average")
    return 0


if __name__ == "__main__":
    sys.exit(main())
