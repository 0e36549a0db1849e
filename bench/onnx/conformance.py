"""ONNX's node conformance tests (onnx.backend.test's node cases of the installed onnx; the
`real/` models, which download, are not node tests) against atoll.onnx.Backend, on ONE
cluster for the whole run. Each case's inputs and expected outputs are the ones onnx's
suite generates; outputs are compared as onnx's runner compares them (dtype equal, then
np.testing.assert_allclose with the case's rtol/atol). Writes bench/results/onnx_conformance.json:
passed/failed/skipped per op type and in total, the onnx version, a reason per failure.

    ATOLL_PYTHON_DIR=... ATOLL_BIN_DIR=... python bench/onnx/conformance.py [--filter SUBSTR]
        [--out PATH] [--state-dir DIR (a running cluster; else one is started)]
        [--min-percent P (exit 1 below it)]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import warnings

SOURCE = pathlib.Path(__file__).resolve().parents[2]
if "ATOLL_PYTHON_DIR" in os.environ:
    sys.path.insert(0, os.environ["ATOLL_PYTHON_DIR"])

import numpy as np  # noqa: E402
import onnx  # noqa: E402


def node_cases(substr: str = ""):
    import onnx.backend.test.case.node as node
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            cases = node.collect_testcases(None)
    return [c for c in cases if substr in c.name]


def op_type(case) -> str:
    """The op a case tests: its name's op (an _expanded case's graph is the op's function
    body, counted under the op)."""
    ops = [n.op_type for n in case.model.graph.node]
    name = case.name[len("test_"):].lower().replace("_", "")
    for o in sorted(set(ops), key=len, reverse=True):
        if name.startswith(o.lower()):
            return o
    return ops[-1] if ops else "?"


def compare(ref, out, rtol, atol) -> None:
    if isinstance(ref, onnx.TensorProto):
        from onnx import numpy_helper
        ref = numpy_helper.to_array(ref)
    ref, out = np.asarray(ref), np.asarray(out)
    if ref.dtype != out.dtype:
        raise AssertionError(f"dtype {out.dtype}, expected {ref.dtype}")
    if ref.dtype == object:
        np.testing.assert_array_equal(ref, out)
    else:
        np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)


def run_case(backend, case, client):
    for inputs, outputs in case.data_sets:
        rep = backend.prepare(case.model, "CPU", client=client)
        got = rep.run(inputs)
        if len(got) != len(outputs):
            raise AssertionError(f"{len(got)} outputs, expected {len(outputs)}")
        for r, o in zip(outputs, got):
            compare(r, o, case.rtol, case.atol)


def reason(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}"[:400]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--filter", default="")
    ap.add_argument("--out", default=str(SOURCE / "bench" / "results" / "onnx_conformance.json"))
    ap.add_argument("--state-dir", default="")
    ap.add_argument("--min-percent", type=float, default=0.0,
                    help="exit 1 when fewer cases pass (ctest's entry asks for the issue's 82)")
    args = ap.parse_args()

    import atoll
    from atoll.onnx import Backend

    bin_dir = pathlib.Path(os.environ.get("ATOLL_BIN_DIR", SOURCE / "build" / "bin"))
    state = args.state_dir
    started = False
    if not state:
        state = tempfile.mkdtemp(prefix="atoll-onnx-")
        up = subprocess.run([str(bin_dir / "atoll"), "up", "--config",
                             str(SOURCE / "tests" / "python" / "one_host.toml"), "--bin-dir",
                             str(bin_dir), "--state-dir", state], capture_output=True, text=True)
        if up.returncode:
            print(up.stdout, up.stderr)
            return 1
        started = True
    try:
        client = atoll.connect(state_dir=state, name="onnx-conformance")
        cases = node_cases(args.filter)
        per_op = collections.defaultdict(lambda: {"passed": 0, "failed": 0, "skipped": 0})
        failures = {}
        t0 = time.time()
        for i, case in enumerate(cases):
            op = op_type(case)
            try:
                with np.errstate(all="ignore"):
                    run_case(Backend, case, client)
                per_op[op]["passed"] += 1
            except Exception as e:  # noqa: BLE001 (each failure is recorded with its reason)
                per_op[op]["failed"] += 1
                failures[case.name] = reason(e)
            if (i + 1) % 100 == 0:
                done = sum(v["passed"] for v in per_op.values())
                print(f"{i + 1}/{len(cases)} run, {done} passed, {time.time() - t0:.0f}s",
                      flush=True)
        client.close()
    finally:
        if started:
            subprocess.run([str(bin_dir / "atoll"), "down", "--state-dir", state],
                           capture_output=True)
    passed = sum(v["passed"] for v in per_op.values())
    failed = sum(v["failed"] for v in per_op.values())
    total = passed + failed
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from result import result as bench_result, row
    pct = round(100.0 * passed / max(total, 1), 1)
    params = {"onnx": onnx.__version__}
    result = bench_result(
        "onnx_conformance",
        [row("node_cases", params, "percent_passed", "%", [pct]),
         row("node_cases", params, "passed", "cases", [float(passed)])],
        {"passed": passed, "failed": failed, "skipped": 0, "cases": total,
         "percent_passed": pct, "seconds": round(time.time() - t0, 1)},
        quick=bool(args.filter),
        onnx_version=onnx.__version__,
        suite="onnx.backend.test node cases (collect_testcases), real/ excluded",
        filter=args.filter,
        total={"passed": passed, "failed": failed, "skipped": 0, "cases": total,
               "percent_passed": pct},
        per_op={k: per_op[k] for k in sorted(per_op)},
        failures=dict(sorted(failures.items())))
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"onnx {onnx.__version__}: {passed}/{total} node cases passed "
          f"({pct}%), {result['derived']['seconds']}s -> {out}")
    if 100.0 * passed / max(total, 1) < args.min_percent:
        print(f"below the required {args.min_percent}%")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
