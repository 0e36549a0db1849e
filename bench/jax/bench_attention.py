"""The attention block's forward and backward step (examples/python/attention.py: B=4,
T=64, d=128, 4 heads) on atoll against `jax.jit` of the same function on CPU, in one run.

Each step computes the block's output and the 8 weight gradients of a loss summing the
output against fixed weights: atoll traces it with `atoll.numpy` and `atoll.grad` into one
compiled function on one device; JAX jits `jax.grad` of the same code. JAX runs twice: with
its default threads, and on one thread, which is what one atoll device has on this machine
(1 matmul thread per device, 2 cores, 2 devices). The results are checked against each
other before timing. `--interleave N` then alternates one jax.jit step (one thread) and one
atoll step N times and gives the medians: on a loaded machine both see the same load.

Two ways of calling each step, both measured:
- host: numpy arguments in, every result awaited; atoll also reads every result back to the
  client (1 MB of arguments and 0.9 MB of results through the object store, over CURVE
  on a default cluster), where jax leaves its results on its device;
- resident: the arguments already where the step runs (jax: device arrays; atoll: futures
  in the cluster, placed once by a first run, as a training loop keeps its weights), and
  the results awaited where they are (jax: block_until_ready; atoll: Run.wait), as a
  training step's gradients feed the next step's update there.
Needs a cluster (`atoll up`, or ATOLL_HOME naming one).

    python bench/jax/bench_attention.py [--steps 20] [--interleave 40] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "python"))
sys.path.insert(0, str(ROOT / "bench" / "onnx"))  # result.py: bench/results' JSON form

import numpy as np  # noqa: E402

from attention import ATTENTION, attention_args, attention_block, tanh_gelu  # noqa: E402
from result import result, row  # noqa: E402

WEIGHTS = tuple(range(1, 9))  # the block's arguments after x


def time_calls(call, steps):
    """The first call's time (trace, compile, run) and the mean of `steps` more: each call
    awaits its step."""
    start = time.perf_counter()
    out = call()
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(steps):
        call()
    return first, (time.perf_counter() - start) / steps, out


def bench_args():
    """The block's arguments and the loss's fixed weights, as numpy arrays."""
    xs = attention_args(np.random.default_rng(0))
    return xs + [np.random.default_rng(1).standard_normal(xs[0].shape).astype(np.float32)]


def jax_steps():
    """Calls of the jitted step (mode -> call), each awaited, on the bench's arguments."""
    import jax
    import jax.numpy as jnp
    args = bench_args()
    block = attention_block(jnp, tanh_gelu(jnp), ATTENTION["heads"])

    def step(*a):
        loss = lambda *p: (block(*p[:-1]) * p[-1]).sum()  # noqa: E731
        return (block(*a[:-1]),) + tuple(jax.grad(loss, argnums=WEIGHTS)(*a))

    fn = jax.jit(step)
    on_device = [jax.device_put(a) for a in args]
    return {"host": lambda: jax.block_until_ready(fn(*args)),
            "resident": lambda: jax.block_until_ready(fn(*on_device))}


def jax_times(steps: int) -> dict:
    """JAX's times in this process (its thread count is fixed when it starts)."""
    calls = jax_steps()
    first, mean, out = time_calls(calls["host"], steps)
    _, resident, _ = time_calls(calls["resident"], steps)
    return {"first_s": first, "step_s": mean, "resident_step_s": resident,
            "out": [np.asarray(o).tolist() for o in out]}


def interleaved(jax_call, atoll_call, steps: int) -> dict:
    """One jax.jit step, then one atoll step, `steps` times: on a machine whose load moves,
    both see the same load. Each one's step times, in seconds."""
    jax_s, atoll_s = [], []
    for _ in range(steps):
        for call, times in ((jax_call, jax_s), (atoll_call, atoll_s)):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
    return {"jax_jit_one_thread": jax_s, "atoll_1_device": atoll_s}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json", default="")
    parser.add_argument("--jax-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--interleave", type=int, default=0, metavar="N",
                        help="then N rounds of one jax.jit step (one thread, in this process) "
                             "and one atoll step, alternately: medians and their ratio")
    args = parser.parse_args()
    if args.jax_only:  # the child that measures JAX on the thread count it was started with
        print(json.dumps(jax_times(args.steps)))
        return

    def jax_child(env_extra: dict) -> dict:
        env = dict(os.environ, **env_extra)
        out = subprocess.run([sys.executable, __file__, "--jax-only", "--steps", str(args.steps)],
                             env=env, check=True, capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    one_thread = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false "
                               "intra_op_parallelism_threads=1", "OMP_NUM_THREADS": "1"}
    jax_default, jax_one = jax_child({}), jax_child(one_thread)
    if args.interleave:  # this process's JAX: one thread, fixed when jax is first imported
        os.environ.update(one_thread)

    import atoll
    import atoll.numpy as anp
    client = atoll.connect(name="bench-attention")
    args_np = bench_args()
    block = attention_block(anp, tanh_gelu(anp), ATTENTION["heads"])

    def step(*a):
        loss = lambda *p: anp.sum(block(*p[:-1]) * p[-1])  # noqa: E731
        return (block(*a[:-1]),) + tuple(atoll.grad(loss, argnums=WEIGHTS)(*a))

    types = [atoll.f32[a.shape] for a in args_np]
    device = client.slice(1)
    fn = client.function(device, *types)(step)
    # The arguments placed in the cluster by a first run (x * 1 is x, bit for bit).
    place = client.function(device, *types)(lambda *a: tuple(x * 1.0 for x in a))
    placed = client.run(place, *args_np)
    resident = [placed.output(i) for i in range(len(args_np))]
    atoll_calls = {
        "host": lambda: [np.asarray(r) for r in client.run(fn, *args_np).result(timeout=300)],
        "resident": lambda: client.run(fn, *resident).wait(timeout=300),
    }

    first, mean, out = time_calls(atoll_calls["host"], args.steps)
    _, resident_mean, _ = time_calls(atoll_calls["resident"], args.steps)
    for k, (got, want) in enumerate(zip(out, jax_default["out"])):
        want = np.asarray(want, np.float32)
        scale = float(np.max(np.abs(want))) or 1.0
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * scale,
                                   err_msg=f"result {k} differs from JAX's")
    rows, derived = [], {}
    for mode, key, atoll_s in (("phases", "step_s", mean),
                               ("resident phases", "resident_step_s", resident_mean)):
        times = {"jax_jit_default_threads": jax_default[key], "jax_jit_one_thread": jax_one[key],
                 "atoll_1_device": atoll_s}
        rows += [row(name, {"mode": mode}, "step_s", "s", [t]) for name, t in times.items()]
        suffix = "" if mode == "phases" else "_resident"
        derived["atoll_over_jax_one_thread" + suffix] = jax_one[key] / atoll_s
        derived["atoll_over_jax_default_threads" + suffix] = jax_default[key] / atoll_s
    rows.append(row("atoll_1_device", {"mode": "first call"}, "step_s", "s", [first]))
    if args.interleave:
        jax_calls = jax_steps()
        for mode in ("host", "resident"):
            jax_calls[mode]()
            steps = interleaved(jax_calls[mode], atoll_calls[mode], args.interleave)
            label = "interleaved" if mode == "host" else "resident interleaved"
            rows += [row(name, {"mode": label}, "step_s", "s", samples)
                     for name, samples in steps.items()]
            suffix = "_interleaved" if mode == "host" else "_resident_interleaved"
            derived["atoll_over_jax_one_thread" + suffix] = (
                float(np.median(steps["jax_jit_one_thread"])) /
                float(np.median(steps["atoll_1_device"])))
    for r in rows:
        print(f"{r['series']:26s} {r['params']['mode']:22s} median {r['median'] * 1e3:8.2f} ms")
    for name, value in derived.items():
        print(f"{name:50s} {value:.3f}")
    if args.json:
        out = result("attention", rows, derived, quick=False, steps=args.steps,
                     interleave=args.interleave)
        pathlib.Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
