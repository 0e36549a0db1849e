#!/usr/bin/env python3
"""The Pathways paper's Figure 2 from Python: three compiled functions on three slices of 2
devices, a(x) = x * 2, b(x) = x + 1, c(x) = x / 2, and one program f(v) that calls them,
traced into one dataflow graph and run on the cluster `atoll up` started (or --rm EP):

    PYTHONPATH=build/python .venv/bin/python examples/python/figure2.py
    y = [2. 3.]
    z = [2. 4.]
"""

import argparse
import sys

import numpy as np

import atoll


def figure2(client: atoll.Client) -> atoll.Program:
    """Traces f(v) = (b(v), a(c(a(v)))) with a, b and c each on a slice of its own."""

    @atoll.function(client.slice(2), atoll.f32[2])
    def a(x):
        return x * 2

    @atoll.function(client.slice(2), atoll.f32[2])
    def b(x):
        return x + 1

    @atoll.function(client.slice(2), atoll.f32[2])
    def c(x):
        return x / 2

    @atoll.program(atoll.f32[2])
    def f(v):
        x = a(v)
        y = b(v)
        z = a(c(x))
        return y, z

    return f


def main() -> int:
    parser = argparse.ArgumentParser(description="The Pathways paper's Figure 2 program")
    parser.add_argument("--rm", help="the RM's endpoint (default: the cluster `atoll up` "
                        "started, or $ATOLL_RM)")
    args = parser.parse_args()
    try:
        with atoll.connect(args.rm, name="figure2-python") as client:
            f = figure2(client)
            y, z = client.run(f, np.array([1, 2], np.float32)).result(timeout=30)
    except atoll.Error as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"y = {y}\nz = {z}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
