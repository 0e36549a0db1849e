"""bench/results' JSON form (bench/README.md, checked by bench/report.py) for the Python
benchmarks of bench/onnx: bench, commit, machine, quick, rows, derived."""

from __future__ import annotations

import datetime
import os
import pathlib
import subprocess
from typing import Any, Dict, List

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
