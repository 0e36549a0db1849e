"""The attention block's forward and backward step (examples/python/attention.py: B=4,
T=64, d=128, 4 heads) on atoll against `jax.jit` of the same function on CPU, in one run.

Each step computes the block's output and the 8 weight gradients of a loss summing the
output against fixed weights: atoll traces it with `atoll.numpy` and `atoll.grad` into one
compiled function on one device; JAX jits `jax.grad` of the same code. JAX runs twice: with
its default threads, and on one thread, which is what one atoll device has on this machine
(1 matmul thread per device, 2 cores, 2 devices). The results are checked against each
other before timing. `--interleave N` then alternates one jax.jit step (one thread) and one
atoll step N times and gives the medians: on a loaded machine both see the same load.
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


def time_calls(call, wait, steps):
    """The first call's time (trace, compile, run) and the mean of `steps` more."""
    start = time.perf_counter()
    out = wait(call())
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(steps):
        wait(call())
    return first, (time.perf_counter() - start) / steps, out


def jax_step():
    """A call of the jitted step on the bench's arguments, and its wait."""
    import jax
    import jax.numpy as jnp
    args = attention_args(np.random.default_rng(0))
    w = np.random.default_rng(1).standard_normal(args[0].shape).astype(np.float32)
    block = attention_block(jnp, tanh_gelu(jnp), ATTENTION["heads"])

    def step(*a):
        loss = lambda *p: (block(*p[:-1]) * p[-1]).sum()  # noqa: E731
        return (block(*a[:-1]),) + tuple(jax.grad(loss, argnums=WEIGHTS)(*a))

    fn = jax.jit(step)
    return lambda: fn(*args, w), jax.block_until_ready


def jax_times(steps: int) -> dict:
    """JAX's times in this process (its thread count is fixed when it starts)."""
    call, wait = jax_step()
    first, mean, out = time_calls(call, wait, steps)
    return {"first_s": first, "step_s": mean, "out": [np.asarray(o).tolist() for o in out]}


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
    xs = attention_args(np.random.default_rng(0))
    w = np.random.default_rng(1).standard_normal(xs[0].shape).astype(np.float32)
    block = attention_block(anp, tanh_gelu(anp), ATTENTION["heads"])

    def step(*a):
        loss = lambda *p: anp.sum(block(*p[:-1]) * p[-1])  # noqa: E731
        return (block(*a[:-1]),) + tuple(atoll.grad(loss, argnums=WEIGHTS)(*a))

    types = [atoll.f32[a.shape] for a in xs + [w]]
    state = {}

    def call():
        if "fn" not in state:
            state["fn"] = client.function(client.slice(1), *types)(step)
        return client.run(state["fn"], *xs, w)

    def wait(run):
        return [np.asarray(r) for r in run.result(timeout=300)]

    first, mean, out = time_calls(call, wait, args.steps)
    for k, (got, want) in enumerate(zip(out, jax_default["out"])):
        want = np.asarray(want, np.float32)
        scale = float(np.max(np.abs(want))) or 1.0
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * scale,
                                   err_msg=f"result {k} differs from JAX's")
    times = {"jax_jit_default_threads": [jax_default["step_s"]],
             "jax_jit_one_thread": [jax_one["step_s"]], "atoll_1_device": [mean]}
    derived = {"atoll_over_jax_one_thread": jax_one["step_s"] / mean,
               "atoll_over_jax_default_threads": jax_default["step_s"] / mean}
    rows = [row(name, {"mode": "phases"}, "step_s", "s", samples)
            for name, samples in times.items()]
    rows.append(row("atoll_1_device", {"mode": "first call"}, "step_s", "s", [first]))
    if args.interleave:
        jax_call, jax_wait = jax_step()
        jax_wait(jax_call())
        steps = interleaved(lambda: jax_wait(jax_call()), lambda: wait(call()), args.interleave)
        rows += [row(name, {"mode": "interleaved"}, "step_s", "s", samples)
                 for name, samples in steps.items()]
        derived["atoll_over_jax_one_thread_interleaved"] = (
            float(np.median(steps["jax_jit_one_thread"])) /
            float(np.median(steps["atoll_1_device"])))
    for r in rows:
        print(f"{r['series']:26s} {r['params']['mode']:12s} median {r['median'] * 1e3:8.2f} ms")
    for name, value in derived.items():
        print(f"{name:40s} {value:.3f}")
    if args.json:
        out = result("attention", rows, derived, quick=False, steps=args.steps,
                     interleave=args.interleave)
        pathlib.Path(args.json).write_text(json.dumps(out, indent=2) + "\n")

if __name__ == "__main__":
    main()
