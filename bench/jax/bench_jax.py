"""atoll.jax against jax.jit on this machine's CPU, in the same run:

- the example's training step (examples/jax, a Flax MLP with optax's Adam): its time on
  atoll on 1 device and data-parallel on 4 devices, against jax.jit;
- dispatch: a 1,000-step loop of a tiny jitted step whose results feed the next step
  (atoll futures chained in the stores; JAX's asynchronous dispatch), waited for at the end;
- jax.grad of a lax.scan RNN (256 steps): the first call (trace, lower, register, run) and
  the next ones, on atoll's 1 device against jax.jit.

Reports each time and the ratios (atoll / JAX: above 1 is slower). Needs a cluster
(`atoll up`, or ATOLL_HOME naming one) and flax, optax.

    python bench/jax/bench_jax.py [--steps 50] [--loop 1000] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import atoll  # noqa: E402
import atoll.jax  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_example():
    spec = importlib.util.spec_from_file_location(
        "train_plain", ROOT / "examples" / "jax" / "train_plain.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_steps(step, params, opt_state, batches, wait):
    params, opt_state, loss = step(params, opt_state, *batches[0])  # trace, compile, warm
    wait(loss)
    start = time.perf_counter()
    for x, y in batches[1:]:
        params, opt_state, loss = step(params, opt_state, x, y)
    wait(loss)
    return (time.perf_counter() - start) / (len(batches) - 1)


def rnn_grad():
    """jax.grad of a lax.scan RNN (hidden 32, batch 16): a forward scan and JAX's reverse
    scan, which atoll.jax runs as loops on the device (unrolled before the IR had loops)."""
    def loss(params, xs):
        w, u = params

        def step(h, x_t):
            h = jnp.tanh(h @ w + x_t @ u)
            return h, h.sum()

        h, sums = jax.lax.scan(step, jnp.zeros((xs.shape[1], 32), jnp.float32), xs)
        return jnp.mean(h ** 2) + jnp.mean(sums)

    return jax.grad(loss)


def time_calls(fn, args, wait, calls):
    """(first call: trace, lower, register and run; then the mean of ``calls`` calls, each
    waited for)."""
    start = time.perf_counter()
    wait(fn(*args)[0])
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(calls):
        wait(fn(*args)[0])
    return first, (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--loop", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--json", default="")
    parser.add_argument("--rnn-steps", type=int, default=256,
                        help="the scan RNN's sequence length")
    args = parser.parse_args()

    example = load_example()
    train_step, params, opt_state = example.setup()
    batches = [example.data(i, batch=args.batch) for i in range(args.steps + 1)]
    client = atoll.connect(name="bench-jax")
    mesh1 = atoll.jax.Mesh(client, (1,), ("data",))
    mesh4 = atoll.jax.Mesh(client, (4,), ("data",))
    specs = dict(in_specs=(P(), P(), P("data"), P("data")), out_specs=P())

    def block(v):
        return jax.block_until_ready(v)

    def fetch(v):
        return np.asarray(v)

    rows = {}
    rows["step_jax_cpu_s"] = time_steps(jax.jit(train_step), params, opt_state, batches, block)
    rows["step_atoll_1_device_s"] = time_steps(
        atoll.jax.jit(train_step, mesh=mesh1, **specs), params, opt_state, batches, fetch)
    rows["step_atoll_4_devices_s"] = time_steps(
        atoll.jax.jit(train_step, mesh=mesh4, **specs), params, opt_state, batches, fetch)

    def tiny(x):
        return x * 1.0001 + 1.0

    x0 = np.ones((8,), np.float32)
    jt = jax.jit(tiny)
    v = jt(x0)
    block(v)
    start = time.perf_counter()
    for _ in range(args.loop):
        v = jt(v)
    block(v)
    rows["dispatch_jax_per_step_s"] = (time.perf_counter() - start) / args.loop
    at = atoll.jax.jit(tiny, mesh=mesh1)
    v = at(x0)
    fetch(v)
    start = time.perf_counter()
    for _ in range(args.loop):
        v = at(v)  # an atoll future feeds the next run
    fetch(v)
    rows["dispatch_atoll_per_step_s"] = (time.perf_counter() - start) / args.loop

    rng = np.random.default_rng(0)
    rnn_params = (rng.standard_normal((32, 32)).astype(np.float32) * 0.2,
                  rng.standard_normal((8, 32)).astype(np.float32) * 0.2)
    rnn_xs = rng.standard_normal((args.rnn_steps, 16, 8)).astype(np.float32)
    grad = rnn_grad()
    rows["rnn_grad_jax_first_s"], rows["rnn_grad_jax_s"] = time_calls(
        jax.jit(grad), (rnn_params, rnn_xs), block, 10)
    rows["rnn_grad_atoll_first_s"], rows["rnn_grad_atoll_s"] = time_calls(
        atoll.jax.jit(grad, mesh=mesh1), (rnn_params, rnn_xs), fetch, 10)

    rows["ratio_step_1_device"] = rows["step_atoll_1_device_s"] / rows["step_jax_cpu_s"]
    rows["ratio_step_4_devices"] = rows["step_atoll_4_devices_s"] / rows["step_jax_cpu_s"]
    rows["ratio_dispatch"] = rows["dispatch_atoll_per_step_s"] / rows["dispatch_jax_per_step_s"]
    rows["ratio_rnn_grad"] = rows["rnn_grad_atoll_s"] / rows["rnn_grad_jax_s"]
    rows["rnn_steps"] = args.rnn_steps
    rows["batch"] = args.batch
    rows["steps"] = args.steps
    rows["loop"] = args.loop
    for k, val in rows.items():
        print(f"{k:28s} {val:.6g}" if isinstance(val, float) else f"{k:28s} {val}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    client.close()


if __name__ == "__main__":
    main()
