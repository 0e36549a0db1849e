"""``python -m atoll.onnx run MODEL.onnx --input NAME=FILE.npy ... --out DIR`` (also
``atoll onnx run ...``, which runs this module with the interpreter that has the package):
an ONNX model run once on the cluster that atoll.connect() finds, each output written as
DIR/OUTPUT_NAME.npy and described on stdout.

Everything the command can check without the cluster (the model file, the inputs' names,
files, dtypes and shapes, --batch-split) is checked before it connects; a refusal prints one
line "atoll: ..." on stderr and exits 1."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import onnx

from .._atoll import Error
from ._model import OnnxError, _check, _read, _declared_numpy, load


class Refused(Exception):
    """What the command refuses before it connects: the message says what and where."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="atoll onnx", description="ONNX models on an atoll cluster")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run", help="run a model once on the cluster, writing each output as DIR/NAME.npy",
        description="Run MODEL once on the cluster (found as atoll.connect() finds it: --rm, "
                    "else $ATOLL_RM, else the cluster `atoll up` recorded in the state dir) and "
                    "write each output as DIR/OUTPUT_NAME.npy.")
    run.add_argument("model", metavar="MODEL.onnx")
    run.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE.npy",
                     help="a graph input's value (one per input; symbolic dimensions take the "
                          "file's shape)")
    run.add_argument("--out", "-o", required=True, metavar="DIR",
                     help="where the outputs go (made if missing)")
    run.add_argument("--devices", type=int, default=1, metavar="N",
                     help="devices of the slice the model runs on (default 1)")
    run.add_argument("--batch-split", metavar="NAME:DIM",
                     help="cut input NAME's dimension DIM over the devices (data-parallel)")
    run.add_argument("--rm", default=None, metavar="ENDPOINT", help="the RM to talk to")
    run.add_argument("--state-dir", default=None, metavar="DIR",
                     help="the state dir recording the cluster (default: $ATOLL_HOME, else "
                          "~/.atoll)")
    run.add_argument("--keys", default=None, metavar="DIR",
                     help="the CURVE keys directory, or \"plain\"")
    run.add_argument("--timeout", type=float, default=600.0, metavar="S",
                     help="seconds the run may take (default 600)")
    return p


def _graph_inputs(proto: onnx.ModelProto) -> Dict[str, onnx.ValueInfoProto]:
    """The inputs a caller gives: graph inputs that are not initializers."""
    initializers = {t.name for t in proto.graph.initializer}
    return {vi.name: vi for vi in proto.graph.input if vi.name not in initializers}


def _read_inputs(specs: Sequence[str], graph_inputs: Dict[str, onnx.ValueInfoProto]
                 ) -> Dict[str, np.ndarray]:
    values: Dict[str, np.ndarray] = {}
    for spec in specs:
        name, eq, path = spec.partition("=")
        if not eq or not name or not path:
            raise Refused(f"--input {spec!r}: expected NAME=FILE.npy")
        if name not in graph_inputs:
            raise Refused(f"--input {spec!r}: the model has no input '{name}' (its inputs: "
                          f"{', '.join(graph_inputs) or 'none'})")
        if name in values:
            raise Refused(f"--input {spec!r}: input '{name}' is given twice")
        values[name] = _read_npy(path, f"--input {spec!r}")
    missing = [n for n in graph_inputs if n not in values]
    if missing:
        raise Refused(f"the model's input{'s' * (len(missing) > 1)} {', '.join(missing)} "
                      f"{'are' if len(missing) > 1 else 'is'} not given (--input NAME=FILE.npy)")
    return values


def _read_npy(path: str, what: str) -> np.ndarray:
    try:
        with open(path, "rb") as f:
            if f.read(6) != b"\x93NUMPY":
                raise Refused(f"{what}: {path} is not a .npy file (numpy.save writes one)")
            f.seek(0)
            return np.lib.format.read_array(f, allow_pickle=False)
    except OSError as e:
        raise Refused(f"{what}: cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:  # a truncated file, or an array of Python objects
        raise Refused(f"{what}: {path} is not a readable .npy array: {e}") from None


def _shapes(values: Dict[str, np.ndarray], graph_inputs: Dict[str, onnx.ValueInfoProto]
            ) -> Dict[str, Tuple[int, ...]]:
    """Each input's file checked against the model's declaration (dtype exactly; every
    static dimension); the shapes to load with (symbolic dimensions take the file's)."""
    shapes = {}
    for name, a in values.items():
        vi = graph_inputs[name]
        want = _declared_numpy(vi)
        if want is not None and a.dtype != want:
            raise Refused(f"input '{name}': the file holds {a.dtype}, the model takes {want}")
        t = vi.type.tensor_type
        if t.HasField("shape"):
            dims = ["?" if not d.HasField("dim_value") else int(d.dim_value) for d in t.shape.dim]
            declared = "[" + ", ".join(
                str(d) if d != "?" else (t.shape.dim[i].dim_param or "?")
                for i, d in enumerate(dims)) + "]"
            if len(dims) != a.ndim or any(d != "?" and d != n for d, n in zip(dims, a.shape)):
                raise Refused(f"input '{name}': the file holds shape {list(a.shape)}, the model "
                              f"takes {declared}")
        shapes[name] = tuple(a.shape)
    return shapes


def _check_split(spec: Optional[str], devices: int, values: Dict[str, np.ndarray]) -> None:
    if devices < 1:
        raise Refused(f"--devices {devices}: at least 1")
    if not spec:
        return
    name, colon, dim = spec.partition(":")
    if not colon or not re.fullmatch(r"-?\d+", dim):
        raise Refused(f"--batch-split {spec!r}: expected NAME:DIM (DIM a dimension's index)")
    if name not in values:
        raise Refused(f"--batch-split {spec!r}: the model has no input '{name}' (its inputs: "
                      f"{', '.join(values)})")
    shape = values[name].shape
    d = int(dim)
    if not 0 <= d < len(shape):
        raise Refused(f"--batch-split {spec!r}: input '{name}' of shape {list(shape)} has no "
                      f"dimension {d}")
    if shape[d] % devices:
        raise Refused(f"--batch-split {spec!r}: dimension {d} of input '{name}' ({shape[d]}) "
                      f"is not a multiple of --devices {devices}")


def _file_names(names: List[str]) -> List[str]:
    """OUTPUT_NAME.npy for each output; characters a file name cannot hold become '_'."""
    files = [re.sub(r"[/\\\0]", "_", n) + ".npy" for n in names]
    files = ["_" + f[1:] if f.startswith(".") else f for f in files]
    if len(set(files)) != len(files):
        raise Refused(f"outputs {names} would share a file name in the output directory")
    return files


def summary(a: np.ndarray) -> str:
    """Shape, dtype and the values at a glance."""
    head = f"shape {list(a.shape)} {a.dtype}"
    if a.size == 0:
        return head + ", no elements"
    if a.dtype == np.bool_:
        return head + f", {int(a.sum())} of {a.size} true"
    wide = a.astype(np.float64)
    finite = np.isfinite(wide)
    text = head
    if finite.any():
        f = wide[finite]
        text += f", min {f.min():.6g} max {f.max():.6g} mean {f.mean():.6g}"
    if not finite.all():
        text += f", {int(np.isnan(wide).sum())} nan, {int(np.isinf(wide).sum())} inf"
    return text


def run(args: argparse.Namespace) -> int:
    proto = _read(args.model)
    _check(proto)
    graph_inputs = _graph_inputs(proto)
    values = _read_inputs(args.input, graph_inputs)
    shapes = _shapes(values, graph_inputs)
    _check_split(args.batch_split, args.devices, values)
    files = _file_names([o.name for o in proto.graph.output])
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise Refused(f"--out {args.out}: exists and is not a directory")
    os.makedirs(args.out, exist_ok=True)

    import atoll
    with atoll.connect(args.rm, state_dir=args.state_dir, keys=args.keys,
                       name="atoll-onnx") as client:
        model = load(proto, client, client.slice(args.devices), input_shapes=shapes,
                     batch_split=args.batch_split, name=os.path.basename(args.model))
        outputs = model.run(values, timeout=args.timeout)
    for name, file, a in zip(model.output_names, files, outputs):
        path = os.path.join(args.out, file)
        np.save(path, a)
        print(f"{name}: {summary(a)} -> {path}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return run(args)
    except (Refused, OnnxError, Error) as e:
        print(f"atoll: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # the output directory or files
        print(f"atoll: {e}", file=sys.stderr)
        return 1
