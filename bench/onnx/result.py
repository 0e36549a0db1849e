"""bench/results' JSON form (bench/README.md, checked by bench/report.py) for the Python
benchmarks (bench/onnx, bench/lm): bench, commit, machine, quick, rows, derived; and the
cluster such a benchmark starts for itself."""

from __future__ import annotations

import contextlib
import datetime
import os
import pathlib
import subprocess
import tempfile
from typing import Any, Dict, Iterator, List

SOURCE = pathlib.Path(__file__).resolve().parents[2]


def _commit() -> str:
    if os.environ.get("ATOLL_COMMIT"):
        return os.environ["ATOLL_COMMIT"]
    try:
        return subprocess.run(["git", "-C", str(SOURCE), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _cpu() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def row(series: str, params: Dict[str, Any], metric: str, unit: str,
        samples: List[float]) -> Dict[str, Any]:
    s = sorted(samples)
    return {"series": series, "params": params, "metric": metric, "unit": unit,
            "runs": len(s), "min": s[0], "median": s[len(s) // 2], "max": s[-1]}


def result(bench: str, rows: List[Dict[str, Any]], derived: Dict[str, float], quick: bool,
           **extra: Any) -> Dict[str, Any]:
    out = {"bench": bench, "commit": _commit(),
           "machine": {"cores": os.cpu_count() or 0, "cpu": _cpu(),
                       "date": datetime.date.today().isoformat()},
           "quick": quick, "rows": rows, "derived": derived}
    out.update(extra)
    return out


@contextlib.contextmanager
def cluster(state_dir: str, config: pathlib.Path, prefix: str) -> Iterator[str]:
    """The state dir of the cluster to measure: ``state_dir`` when given (a running cluster),
    else one started with `atoll up --config config` (ATOLL_BIN_DIR's binaries, default
    build/bin) in a new temporary dir and stopped at the end. Raises RuntimeError with
    `atoll up`'s output when it fails."""
    if state_dir:
        yield state_dir
        return
    bin_dir = pathlib.Path(os.environ.get("ATOLL_BIN_DIR", SOURCE / "build" / "bin"))
    state = tempfile.mkdtemp(prefix=prefix)
    up = subprocess.run([str(bin_dir / "atoll"), "up", "--config", str(config), "--bin-dir",
                         str(bin_dir), "--state-dir", state], capture_output=True, text=True)
    if up.returncode:
        raise RuntimeError(f"atoll up failed: {up.stdout}{up.stderr}")
    try:
        yield state
    finally:
        subprocess.run([str(bin_dir / "atoll"), "down", "--state-dir", state],
                       capture_output=True)
