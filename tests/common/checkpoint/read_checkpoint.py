"""Reads an atoll checkpoint with numpy alone, as README's "Checkpoints" shows, and prints
each tensor as JSON: {name: {"descr", "shape", "values"}}. The tests run it on what the
object stores wrote.

usage: read_checkpoint.py DIR
"""
import json
import sys

import ml_dtypes  # noqa: F401 (registers "bfloat16", the descr of bf16 files, with numpy)
import numpy as np


# The lines README quotes.
def load(path):
    index = json.load(open(f"{path}/index.json"))
    tensors = {}
    for t in index["tensors"]:
        a = np.empty(t["shape"], dtype=t["descr"])
        for b in t["blocks"]:
            a[tuple(slice(o, o + n) for o, n in zip(b["offset"], b["shape"]))] = np.load(
                f"{path}/{b['file']}")
        tensors[t["name"]] = a
    return tensors


if __name__ == "__main__":
    def values(a):  # JSON numbers: integers exact, bool as 0 and 1, bfloat16 widened
        if a.dtype.kind == "b":
            return a.astype(np.int64).ravel().tolist()
        if a.dtype.kind in "iu":
            return a.ravel().tolist()
        return a.astype(np.float64).ravel().tolist()

    print(json.dumps({name: {"descr": a.dtype.str, "shape": list(a.shape), "values": values(a)}
                      for name, a in load(sys.argv[1]).items()}))
