"""What a lax.scan whose body needs a collective costs on atoll (the IR's loop bodies may
hold none), against the same scan without one (the IR's native scan), in the same run:

- per shard: a scan on 2 devices whose body psums each step's input (``c * 0.5 +
  psum(x_t)``: unrolled), against the body without the psum;
- global form: jax.grad of a tanh RNN with the batch cut over 2 devices (the weights'
  gradient sums the cut batch inside the reverse scan: carried per shard and all-reduced
  after the loop, see docs/design-notes.md), against the same on 1 device, and with the
  input's features cut too (a sum feeding the next step: unrolled).

For each scan length: the first call (trace, lower, register, run) and the mean of 5 more,
each waited for. Needs a cluster (`atoll up`, or ATOLL_HOME naming one).

    python bench/jax/bench_scan_collective.py [--lengths 16 64 256] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import atoll  # noqa: E402
import atoll.jax  # noqa: E402


def timed(fn, *args):
    """(first call's seconds, mean seconds of 5 more), each call waited for."""
    start = time.perf_counter()
    jax.tree_util.tree_map(np.asarray, fn(*args))
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(5):
        jax.tree_util.tree_map(np.asarray, fn(*args))
    return first, (time.perf_counter() - start) / 5


def psum_scan(collective: bool):
    def body(c, x):
        s = jax.lax.psum(x, "data") if collective else x
        return c * 0.5 + s, c

    def fn(xs):
        return jax.lax.scan(body, jnp.zeros_like(xs[0]), xs)

    return fn


def rnn_loss(w, u, xs):
    def step(h, x):
        h = jnp.tanh(h @ w + x @ u)
        return h, h

    _, hs = jax.lax.scan(step, jnp.zeros((xs.shape[1], w.shape[0]), xs.dtype), xs)
    return jnp.mean(hs ** 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--json", help="write the rows there")
    args = ap.parse_args()
    client = atoll.connect(name="bench-scan-collective")
    one = atoll.jax.Mesh(client, (1,), ("data",))
    two = atoll.jax.Mesh(client, (2,), ("data",))
    rng = np.random.default_rng(0)
    rows = []
    for length in args.lengths:
        xs = rng.standard_normal((length, 2, 8)).astype(np.float32)
        for collective in (False, True):
            fn = atoll.jax.shard_map(psum_scan(collective), mesh=two, in_specs=P(None, "data"),
                                     out_specs=(P("data"), P(None, "data")))
            first, steady = timed(fn, xs)
            rows.append({"case": "per shard, psum in the body" if collective else
                         "per shard, no collective (native scan)", "length": length,
                         "first_s": first, "call_s": steady})
        w = (rng.standard_normal((16, 16)) * 0.3).astype(np.float32)
        u = (rng.standard_normal((8, 16)) * 0.3).astype(np.float32)
        batch = rng.standard_normal((length, 8, 8)).astype(np.float32)
        grad = jax.grad(rnn_loss, argnums=(0, 1))
        for mesh, u_spec, spec, case in (
                (one, P(), P(), "global, 1 device"),
                (two, P(), P(None, "data"), "global, batch cut on 2"),
                (two, P("data"), P(None, None, "data"), "global, features cut on 2 (unrolled)")):
            fn = atoll.jax.jit(grad, mesh=mesh, in_specs=(P(), u_spec, spec), out_specs=P())
            first, steady = timed(fn, w, u, batch)
            rows.append({"case": f"RNN gradient, {case}", "length": length, "first_s": first,
                         "call_s": steady})
        start = time.perf_counter()
        jax.tree_util.tree_map(np.asarray, jax.jit(grad)(w, u, batch))
        rows.append({"case": "RNN gradient, jax.jit on CPU", "length": length,
                     "first_s": time.perf_counter() - start,
                     "call_s": timed(jax.jit(grad), w, u, batch)[1]})
    print(f"{'case':50s} {'length':>6s} {'first call':>11s} {'next calls':>11s}")
    for r in rows:
        print(f"{r['case']:50s} {r['length']:6d} {r['first_s'] * 1e3:9.1f}ms "
              f"{r['call_s'] * 1e3:9.2f}ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
