#!/usr/bin/env python3
"""The Python side of bench/python (python_bench.cc runs it once per repeat): the same two
workloads as the C++ side, through the atoll package, on the cluster at --rm.

  chain       --chain one-call programs f(x) = x + 1, each fed the previous run's output as a
              future, submitted back to back; then the last result is read. Microseconds
              per run.
  round_trip  submit f on a numpy array, read the result; --round-trips times. Microseconds
              per round trip.

Prints one JSON object: {"chain_us_per_run": x, "round_trip_us": y}.
"""

import argparse
import json
import time

import numpy as np

import atoll


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rm", required=True)
    parser.add_argument("--floats", type=int, required=True)
    parser.add_argument("--chain", type=int, required=True)
    parser.add_argument("--round-trips", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    with atoll.connect(args.rm, keys="plain", name="bench-python") as client:
        @atoll.function(client.slice(1), atoll.f32[args.floats])
        def inc(x):
            return x + 1

        x = np.zeros(args.floats, np.float32)
        for _ in range(args.warmup):
            client.run(inc, x).result(timeout=30)

        start = time.perf_counter()
        run = client.run(inc, x)
        for _ in range(args.chain - 1):
            run = client.run(inc, run.output(0))
        last = run.result(timeout=60)
        chain_us = (time.perf_counter() - start) * 1e6 / args.chain
        assert last[0] == args.chain, last[0]

        start = time.perf_counter()
        for _ in range(args.round_trips):
            client.run(inc, x).result(timeout=30)
        round_trip_us = (time.perf_counter() - start) * 1e6 / args.round_trips
    print(json.dumps({"chain_us_per_run": chain_us, "round_trip_us": round_trip_us}))


if __name__ == "__main__":
    main()
