#!/usr/bin/env python3
"""Turns every bench/results/*.json into bench/RESULTS.md and PNG plots beside it.

Each result file has the shape described in the shared BENCH.md (written by
bench/common/bench_result.h). RESULTS.md gets one section per bench: the machine, commit,
date and size (quick or full), a table of its rows, its derived figures, and one plot per
metric: x = a numeric param (chosen per bench in PLOTS below), y = the median with min/max
error bars, one line per series and per value of every other param that varies.

Usage:
  bench/report.py                       # bench/results/*.json -> bench/RESULTS.md, bench/*.png
  bench/report.py --results DIR --out DIR [--no-plots]

Exit status: 0 when written; 1 when a result file is malformed (nothing is written then; the
message names the file and the field) or matplotlib is missing (install python3-matplotlib,
see scripts/setup.sh, or pass --no-plots). Needs python3 and matplotlib only.
"""

import argparse
import json
import math
import os
import re
import sys

# How each bench is plotted. "x": the param on the x axis (default: the first numeric param
# of the bench's rows). "xscale"/"yscale": "linear", "log", "symlog" (log that admits 0),
# or "auto" (log when the values span at least LOG_SPREAD, symlog when they also include 0
# or less). "series": plot only these series (the table keeps every row). Benches not named
# here use DEFAULT_PLOT.
PLOTS = {
    "dispatch": {"x": "compute_us", "xscale": "symlog", "yscale": "log"},
    "multitenant": {"x": "clients", "xscale": "auto", "yscale": "auto"},
    "control": {"x": "shards", "xscale": "log", "yscale": "symlog", "series": ["total"]},
    "pipeline": {"x": "micro_batches", "xscale": "log", "yscale": "linear"},
}
DEFAULT_PLOT = {"x": None, "xscale": "auto", "yscale": "auto", "series": None}
LOG_SPREAD = 20.0  # max / min at which "auto" turns to a log scale
LINE_STYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D", "v"]

ROW_KEYS = ("series", "params", "metric", "unit", "runs", "min", "median", "max")
TOP_KEYS = ("bench", "commit", "machine", "quick", "rows", "derived")
MACHINE_KEYS = ("cores", "cpu", "date")


class ResultError(Exception):
    """A result file that does not have the documented shape."""


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def validate(result, where):
    """Raises ResultError naming `where` and the field when `result` is malformed."""
    if not isinstance(result, dict):
        raise ResultError(f"{where}: not a JSON object")
    for key in TOP_KEYS:
        if key not in result:
            raise ResultError(f"{where}: missing '{key}'")
    if not isinstance(result["bench"], str) or not result["bench"]:
        raise ResultError(f"{where}: 'bench' is not a non-empty string")
    if not isinstance(result["commit"], str):
        raise ResultError(f"{where}: 'commit' is not a string")
    machine = result["machine"]
    if not isinstance(machine, dict) or any(k not in machine for k in MACHINE_KEYS):
        raise ResultError(f"{where}: 'machine' needs {', '.join(MACHINE_KEYS)}")
    if not isinstance(result["quick"], bool):
        raise ResultError(f"{where}: 'quick' is not true or false")
    if not isinstance(result["rows"], list):
        raise ResultError(f"{where}: 'rows' is not a list")
    for i, row in enumerate(result["rows"]):
        at = f"{where}: rows[{i}]"
        if not isinstance(row, dict):
            raise ResultError(f"{at}: not an object")
        for key in ROW_KEYS:
            if key not in row:
                raise ResultError(f"{at}: missing '{key}'")
        for key in ("series", "metric", "unit"):
            if not isinstance(row[key], str):
                raise ResultError(f"{at}: '{key}' is not a string")
        if not isinstance(row["params"], dict):
            raise ResultError(f"{at}: 'params' is not an object")
        for name, value in row["params"].items():
            if not (is_number(value) or isinstance(value, str)):
                raise ResultError(f"{at}: param '{name}' is neither a number nor a string")
        for key in ("runs", "min", "median", "max"):
            if not is_number(row[key]):
                raise ResultError(f"{at}: '{key}' is not a number")
    if not isinstance(result["derived"], dict):
        raise ResultError(f"{where}: 'derived' is not an object")
    for name, value in result["derived"].items():
        if not is_number(value):
            raise ResultError(f"{where}: derived '{name}' is not a number")


def load_results(results_dir):
    """Every *.json in results_dir, validated, sorted by bench name."""
    results = {}
    names = sorted(n for n in os.listdir(results_dir) if n.endswith(".json"))
    for name in names:
        path = os.path.join(results_dir, name)
        try:
            with open(path, encoding="utf-8") as f:
                result = json.load(f)
        except (OSError, ValueError) as e:
            raise ResultError(f"{path}: {e}") from e
        validate(result, path)
        bench = result["bench"]
        if bench in results:
            raise ResultError(f"{path}: bench '{bench}' also comes from {results[bench][0]}")
        results[bench] = (path, result)
    return [results[b][1] for b in sorted(results)]


# ---------------------------------------------------------------------------------------
# Markdown.


def fmt_value(v):
    """A number with 4 significant digits (whole from 1000 up), or a string as it is."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isfinite(v) and (v.is_integer() or abs(v) >= 1000) and abs(v) < 1e15:
            return str(int(round(v)))
        return f"{v:.4g}"
    return str(v)


def cell(v):
    return fmt_value(v).replace("|", "\\|").replace("\n", " ")


def param_names(rows):
    """Every param name of `rows`, in order of first appearance."""
    names = []
    for row in rows:
        for name in row["params"]:
            if name not in names:
                names.append(name)
    return names


def markdown_table(header, lines):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(line) + " |" for line in lines]
    return out


def bench_section(result, plots):
    """The Markdown of one bench; `plots` lists (metric, file name) of its plots."""
    machine = result["machine"]
    size = "quick (`--quick`)" if result["quick"] else "full"
    out = [
        f"## {result['bench']}",
        "",
        f"- machine: {fmt_value(machine['cores'])} cores, {machine['cpu']}",
        f"- commit: `{result['commit']}`, date: {machine['date']}",
        f"- size: {size}",
        "",
    ]
    rows = result["rows"]
    if rows:
        params = param_names(rows)
        header = ["series"] + params + ["metric", "unit", "runs", "min", "median", "max"]
        lines = []
        for row in rows:
            line = [cell(row["series"])]
            line += [cell(row["params"][p]) if p in row["params"] else "" for p in params]
            line += [cell(row[k]) for k in ("metric", "unit", "runs", "min", "median", "max")]
            lines.append(line)
        out += markdown_table(header, lines) + [""]
    else:
        out += ["No rows.", ""]
    if result["derived"]:
        out += ["Derived:", ""]
        out += markdown_table(
            ["figure", "value"], [[cell(k), cell(v)] for k, v in result["derived"].items()]
        )
        out += [""]
    for metric, file_name in plots:
        out += [f"![{result['bench']}: {metric}]({file_name})", ""]
    return out


def write_markdown(results, plots_by_bench, path):
    out = [
        "# atoll benchmark results",
        "",
        "Written by `bench/report.py` from `bench/results/*.json`; do not edit by hand (run",
        "`python3 bench/report.py` after a benchmark). Each row is the min/median/max over",
        "`runs` runs on the machine named in its section; compare series within one bench,",
        "as ratios, not absolute figures across machines.",
        "",
    ]
    if not results:
        out += ["No results yet.", ""]
    for result in results:
        out += bench_section(result, plots_by_bench.get(result["bench"], []))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out).rstrip("\n") + "\n")


# ---------------------------------------------------------------------------------------
# Plots.


def plot_config(bench):
    config = dict(DEFAULT_PLOT)
    config.update(PLOTS.get(bench, {}))
    return config


def choose_x(rows, configured):
    """The configured x param when every row has it as a number, else the first param that
    is a number in every row; None when there is none."""
    def numeric_everywhere(name):
        return all(is_number(r["params"].get(name)) for r in rows)

    if configured is not None and numeric_everywhere(configured):
        return configured
    for name in param_names(rows):
        if numeric_everywhere(name):
            return name
    return None


def choose_scale(setting, values):
    """The matplotlib scale for `values` under a PLOTS setting."""
    if setting != "auto":
        return setting
    finite = [v for v in values if math.isfinite(v)]
    positive = [v for v in finite if v > 0]
    if not positive or max(positive) / min(positive) < LOG_SPREAD:
        return "linear"
    return "log" if len(positive) == len(finite) else "symlog"


def set_scale(setter, scale, values):
    """Applies `scale`; a symlog axis is linear only below its smallest positive value, so
    that a 0 sits next to the first decade instead of decades away from it."""
    if scale == "symlog":
        positive = [v for v in values if v > 0]
        setter("symlog", linthresh=min(positive) if positive else 1.0)
    else:
        setter(scale)


def safe_name(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def sort_key(values):
    """Orders tuples of numbers and strings: numbers by value, before strings."""
    return tuple((0, v, "") if is_number(v) else (1, 0, str(v)) for v in values)


def line_label(key, varying):
    series, params = key[0], key[1:]
    parts = [series] + [f"{name}={fmt_value(v)}" for name, v in zip(varying, params)]
    return ", ".join(parts)


def plot_metric(plt, result, metric, rows, out_dir):
    """Plots one metric of a bench; returns the PNG's file name, or None when its rows have
    no numeric param to put on x."""
    bench = result["bench"]
    config = plot_config(bench)
    if config["series"] is not None:
        rows = [r for r in rows if r["series"] in config["series"]]
    x_name = choose_x(rows, config["x"]) if rows else None
    if x_name is None:
        return None
    # One line per series and per value of every other param that varies across the rows.
    others = [p for p in param_names(rows) if p != x_name]
    varying = [p for p in others if len({json.dumps(r["params"].get(p)) for r in rows}) > 1]
    lines = {}
    for row in rows:
        key = (row["series"],) + tuple(row["params"].get(p) for p in varying)
        lines.setdefault(key, []).append(row)

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    xs_all, ys_all = [], []
    # A colour per series; the other params' values change the line style and marker.
    series_order = []
    for row in rows:
        if row["series"] not in series_order:
            series_order.append(row["series"])
    drawn_per_series = {}
    for key in sorted(lines, key=sort_key):
        points = sorted(lines[key], key=lambda r: r["params"][x_name])
        xs = [r["params"][x_name] for r in points]
        med = [r["median"] for r in points]
        low = [max(r["median"] - r["min"], 0) for r in points]
        high = [max(r["max"] - r["median"], 0) for r in points]
        n = drawn_per_series.get(key[0], 0)
        drawn_per_series[key[0]] = n + 1
        ax.errorbar(xs, med, yerr=[low, high], color=f"C{series_order.index(key[0]) % 10}",
                    linestyle=LINE_STYLES[n % len(LINE_STYLES)],
                    marker=MARKERS[n % len(MARKERS)], markersize=4, capsize=3,
                    label=line_label(key, varying))
        xs_all += xs
        ys_all += [r["min"] for r in points] + [r["max"] for r in points]
    set_scale(ax.set_xscale, choose_scale(config["xscale"], xs_all), xs_all)
    set_scale(ax.set_yscale, choose_scale(config["yscale"], ys_all), ys_all)
    unit = rows[0]["unit"]
    ax.set_xlabel(x_name)
    ax.set_ylabel(f"{metric} ({unit})" if unit else metric)
    size = "quick" if result["quick"] else "full"
    ax.set_title(f"{bench}: {metric} (median, min-max; {size}, {result['commit']})")
    ax.grid(True, which="both", alpha=0.3)
    if len(lines) > 1:
        ax.legend(fontsize="small")
    fig.tight_layout()
    file_name = f"{safe_name(bench)}_{safe_name(metric)}.png"
    fig.savefig(os.path.join(out_dir, file_name))
    plt.close(fig)
    return file_name


def write_plots(results, out_dir):
    """Plots every (bench, metric); returns {bench: [(metric, png file name)]}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots = {}
    for result in results:
        metrics = []
        for row in result["rows"]:
            if row["metric"] not in metrics:
                metrics.append(row["metric"])
        for metric in metrics:
            rows = [r for r in result["rows"] if r["metric"] == metric]
            file_name = plot_metric(plt, result, metric, rows, out_dir)
            if file_name is not None:
                plots.setdefault(result["bench"], []).append((metric, file_name))
    return plots


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", default=os.path.join(here, "results"),
                        help="directory of NAME.json result files (default: bench/results)")
    parser.add_argument("--out", default=here,
                        help="where RESULTS.md and the plots go (default: bench/)")
    parser.add_argument("--no-plots", action="store_true", help="write RESULTS.md only")
    args = parser.parse_args(argv)

    try:
        results = load_results(args.results) if os.path.isdir(args.results) else []
    except ResultError as e:
        print(f"report: {e}", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    plots = {}
    if not args.no_plots:
        try:
            plots = write_plots(results, args.out)
        except ImportError:
            print("report: matplotlib is missing: install python3-matplotlib "
                  "(scripts/setup.sh) or pass --no-plots", file=sys.stderr)
            return 1
    write_markdown(results, plots, os.path.join(args.out, "RESULTS.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
