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
message names the file and the field) or matplotlib is missing (scripts/setup.sh
installs it into .venv; or pass --no-plots). Needs python3 and matplotlib only.
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
# or less). "series": plot only these series (the table keeps every row). "figure": draw
# that figure of FIGURES instead of lines against x:
#   "against_hosts"  the paper's Figures 5 and 6: one panel of the metric against "x" with
#                    "fixed" at its smallest value, a line per series, a series named
#                    MODE_VARIANT drawn in MODE's colour with VARIANTS' line style; beside it
#                    the derived figures that "derived" matches (groups "variant", "x").
#   "bars"           a group of bars per value of the rows' first text param, one per series.
# Benches not named here use DEFAULT_PLOT.
PLOTS = {
    "dispatch": {"figure": "against_hosts", "x": "hosts", "fixed": "compute_us",
                 "xscale": "log", "yscale": "log",
                 "derived": r"^breakeven_compute_ms_(?:(?P<variant>[a-z]+)_)?hosts_(?P<x>\d+)$",
                 "derived_label": "break-even compute time (ms)"},
    "multitenant": {"x": "clients", "xscale": "auto", "yscale": "auto"},
    "control": {"x": "shards", "xscale": "log", "yscale": "symlog", "series": ["total"]},
    "pipeline": {"x": "micro_batches", "xscale": "log", "yscale": "linear"},
    "peers": {"figure": "bars", "yscale": "auto"},
    "lm": {"figure": "bars", "yscale": "log"},
    "lm_table2": {"figure": "bars", "yscale": "linear"},
    "lm_curve": {"x": "step", "xscale": "linear", "yscale": "linear"},
    "lm_tenants": {"figure": "bars", "yscale": "linear"},
    "collectives": {"x": "bytes_per_device", "xscale": "log", "yscale": "log"},
}
DEFAULT_PLOT = {"x": None, "xscale": "auto", "yscale": "auto", "series": None, "figure": None}
# A series' variant (its name's last "_" part) and its line style in "against_hosts"; a
# name whose last part is not here is a mode of its own, drawn solid.
VARIANTS = {"curve": "--", "sim": ":"}
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
    # Optional: "notes", Markdown lines under the section's header (what a figure means, a
    # link to a file the bench wrote); "figures", images the bench drew itself beside
    # RESULTS.md (a trace's timeline), each {"file": NAME.png, "title": TEXT}.
    notes = result.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise ResultError(f"{where}: 'notes' is not a list of strings")
    figures = result.get("figures", [])
    if not isinstance(figures, list) or not all(
            isinstance(f, dict) and isinstance(f.get("file"), str)
            and isinstance(f.get("title"), str) for f in figures):
        raise ResultError(f"{where}: 'figures' is not a list of {{\"file\", \"title\"}}")
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
    if result.get("notes"):
        out += result["notes"] + [""]
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
    for figure in result.get("figures", []):
        out += [f"![{result['bench']}: {figure['title']}]({figure['file']})", ""]
    return out


def write_markdown(results, plots_by_bench, path):
    out = [
        "# atoll benchmark results",
        "",
        "Written by `bench/report.py` from `bench/results/*.json`; do not edit by hand (run",
        "`.venv/bin/python bench/report.py` after a benchmark). Each row is the min/median/max over",
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


def series_order(rows):
    """Every series of `rows`, in order of first appearance."""
    order = []
    for row in rows:
        if row["series"] not in order:
            order.append(row["series"])
    return order


def figure_title(result, metric):
    size = "quick" if result["quick"] else "full"
    return f"{result['bench']}: {metric} (median, min-max; {size}, {result['commit']})"


def metric_label(metric, rows):
    unit = rows[0]["unit"]
    return f"{metric} ({unit})" if unit else metric


def error_bars(points):
    """(medians, [below, above]) of rows, for errorbar's and bar's yerr."""
    med = [r["median"] for r in points]
    return med, [[max(r["median"] - r["min"], 0) for r in points],
                 [max(r["max"] - r["median"], 0) for r in points]]


def plot_lines(plt, result, metric, rows, config):
    """The default figure: the metric against x, one line per series and per value of every
    other param that varies. None when the rows have no numeric param to put on x."""
    x_name = choose_x(rows, config["x"])
    if x_name is None:
        return None
    others = [p for p in param_names(rows) if p != x_name]
    varying = [p for p in others if len({json.dumps(r["params"].get(p)) for r in rows}) > 1]
    lines = {}
    for row in rows:
        key = (row["series"],) + tuple(row["params"].get(p) for p in varying)
        lines.setdefault(key, []).append(row)

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    xs_all, ys_all = [], []
    # A colour per series; the other params' values change the line style and marker.
    order = series_order(rows)
    drawn_per_series = {}
    for key in sorted(lines, key=sort_key):
        points = sorted(lines[key], key=lambda r: r["params"][x_name])
        xs = [r["params"][x_name] for r in points]
        med, yerr = error_bars(points)
        n = drawn_per_series.get(key[0], 0)
        drawn_per_series[key[0]] = n + 1
        ax.errorbar(xs, med, yerr=yerr, color=f"C{order.index(key[0]) % 10}",
                    linestyle=LINE_STYLES[n % len(LINE_STYLES)],
                    marker=MARKERS[n % len(MARKERS)], markersize=4, capsize=3,
                    label=line_label(key, varying))
        xs_all += xs
        ys_all += [r["min"] for r in points] + [r["max"] for r in points]
    set_scale(ax.set_xscale, choose_scale(config["xscale"], xs_all), xs_all)
    set_scale(ax.set_yscale, choose_scale(config["yscale"], ys_all), ys_all)
    ax.set_xlabel(x_name)
    ax.set_ylabel(metric_label(metric, rows))
    ax.set_title(figure_title(result, metric))
    ax.grid(True, which="both", alpha=0.3)
    if len(lines) > 1:
        ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def split_variant(series):
    """(mode, variant) of a series name: "chained_sim" -> ("chained", "sim"); a name whose
    last part is not a VARIANTS key is a mode with no variant."""
    mode, _, last = series.rpartition("_")
    return (mode, last) if mode and last in VARIANTS else (series, "")


def variant_style(variant):
    """Line style and marker of a variant: solid filled markers for none."""
    names = [""] + list(VARIANTS)
    return {"linestyle": VARIANTS.get(variant, "-"),
            "marker": MARKERS[names.index(variant) % len(MARKERS)],
            "markerfacecolor": "none" if variant else None}


def hosts_axis(ax, xs, label):
    """A log2 axis with a labelled tick at every value drawn (1, 2, 4, ... 512)."""
    ax.set_xscale("log", base=2)
    ticks = sorted(set(xs))
    ax.set_xticks(ticks, labels=[fmt_value(t) for t in ticks])
    ax.tick_params(axis="x", which="minor", bottom=False, labelbottom=False)
    ax.set_xlabel(label)


def derived_points(result, pattern):
    """{variant: [(x, value)]} of the derived figures whose names match `pattern` (groups
    "variant", possibly empty, and "x"); values of 0 or less (not reached) are left out."""
    points = {}
    for name, value in result["derived"].items():
        match = re.match(pattern, name)
        if match and value > 0:
            variant = match.group("variant") or ""
            points.setdefault(variant, []).append((float(match.group("x")), value))
    return {v: sorted(p) for v, p in sorted(points.items())}


def plot_against_hosts(plt, result, metric, rows, config):
    """The paper's Figures 5 and 6 (see PLOTS): the metric against hosts at the smallest
    value of the "fixed" param, a line per series; beside it the derived figures against
    hosts. None when no row has a numeric x."""
    x_name, fixed = config["x"], config["fixed"]
    rows = [r for r in rows if is_number(r["params"].get(x_name))]
    at = min((r["params"][fixed] for r in rows if is_number(r["params"].get(fixed))),
             default=None)
    if at is not None:
        rows = [r for r in rows if r["params"].get(fixed) == at]
    if not rows:
        return None
    derived = derived_points(result, config["derived"]) if config.get("derived") else {}
    panels = 2 if derived else 1
    fig, axes = plt.subplots(1, panels, figsize=(7 + 5 * (panels - 1), 4.8), dpi=100,
                             layout="constrained", squeeze=False,
                             gridspec_kw={"width_ratios": [1.5, 1][:panels]})
    ax = axes[0][0]
    modes, xs_all, ys_all = [], [], []
    for series in series_order(rows):
        mode, variant = split_variant(series)
        if mode not in modes:
            modes.append(mode)
        points = sorted((r for r in rows if r["series"] == series),
                        key=lambda r: r["params"][x_name])
        xs = [r["params"][x_name] for r in points]
        med, yerr = error_bars(points)
        ax.errorbar(xs, med, yerr=yerr, color=f"C{modes.index(mode) % 10}", markersize=5,
                    capsize=3, label=series, **variant_style(variant))
        xs_all += xs
        ys_all += [r["min"] for r in points] + [r["max"] for r in points]
    hosts_axis(ax, xs_all, x_name)
    set_scale(ax.set_yscale, choose_scale(config["yscale"], ys_all), ys_all)
    ax.set_ylabel(metric_label(metric, rows))
    ax.set_title(f"{metric} at {fixed} = {fmt_value(at)}" if at is not None else metric)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    if derived:
        ax = axes[0][1]
        xs_all, ys_all = [], []
        for variant, points in derived.items():
            xs, ys = [p[0] for p in points], [p[1] for p in points]
            ax.plot(xs, ys, color="black", markersize=5, label=variant or "measured",
                    **variant_style(variant))
            xs_all += xs
            ys_all += ys
        hosts_axis(ax, xs_all, x_name)
        set_scale(ax.set_yscale, choose_scale("auto", ys_all), ys_all)
        ax.set_ylabel(config.get("derived_label", "derived"))
        ax.set_title(config.get("derived_label", "derived"))
        ax.grid(True, which="both", alpha=0.3)
        if len(derived) > 1:
            ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle(figure_title(result, metric))
    return fig


def plot_bars(plt, result, metric, rows, config):
    """A group of bars per value of the rows' first text param, one bar per series. None
    when the rows have no param that is text in every row."""
    group = next((p for p in param_names(rows)
                  if all(isinstance(r["params"].get(p), str) for r in rows)), None)
    if group is None:
        return None
    groups = []
    for row in rows:
        if row["params"][group] not in groups:
            groups.append(row["params"][group])
    order = series_order(rows)
    width = 0.8 / len(order)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100, layout="constrained")
    ys_all = []
    for i, series in enumerate(order):
        points = [r for r in rows if r["series"] == series]
        xs = [groups.index(r["params"][group]) + (i - (len(order) - 1) / 2) * width
              for r in points]
        med, yerr = error_bars(points)
        ax.bar(xs, med, width, yerr=yerr, capsize=3, color=f"C{i % 10}", label=series)
        ys_all += [r["min"] for r in points] + [r["max"] for r in points]
    ax.set_xticks(range(len(groups)), labels=groups)
    ax.set_xlabel(group)
    set_scale(ax.set_yscale, choose_scale(config["yscale"], ys_all), ys_all)
    ax.set_ylabel(metric_label(metric, rows))
    ax.set_title(figure_title(result, metric))
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


FIGURES = {"against_hosts": plot_against_hosts, "bars": plot_bars}


def plot_metric(plt, result, metric, rows, out_dir):
    """Plots one metric of a bench as its PLOTS entry says; returns the PNG's file name, or
    None when its rows cannot be drawn that way (no numeric param to put on x) or are one
    point, which the table says as well."""
    bench = result["bench"]
    config = plot_config(bench)
    if config["series"] is not None:
        rows = [r for r in rows if r["series"] in config["series"]]
    if len(rows) < 2:
        return None
    fig = FIGURES.get(config["figure"], plot_lines)(plt, result, metric, rows, config)
    if fig is None:
        return None
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
            print("report: matplotlib is missing: scripts/setup.sh installs it into .venv "
                  "(run this with .venv/bin/python), or pass --no-plots", file=sys.stderr)
            return 1
    write_markdown(results, plots, os.path.join(args.out, "RESULTS.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
