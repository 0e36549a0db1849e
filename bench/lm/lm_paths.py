"""Imported first by bench/lm's scripts (their own directory is on sys.path): JAX on this
machine's CPU, and the paths of what they import next: the atoll build (ATOLL_PYTHON_DIR),
the example's model (examples/jax/lm) and bench/results' JSON form (bench/onnx/result.py)."""

import os
import pathlib
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE.parents[1]
if "ATOLL_PYTHON_DIR" in os.environ:
    sys.path.insert(0, os.environ["ATOLL_PYTHON_DIR"])
sys.path.insert(0, str(SOURCE / "examples" / "jax" / "lm"))
sys.path.insert(0, str(SOURCE / "bench" / "onnx"))
