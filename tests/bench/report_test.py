#!/usr/bin/env python3
"""Tests bench/report.py on synthetic result files kept in a temporary directory (never in
bench/results). Run by ctest as `bench_report`; finds the script through $ATOLL_SOURCE_DIR,
else relative to this file."""

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

SOURCE_DIR = os.environ.get(
    "ATOLL_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
)
sys.path.insert(0, os.path.join(SOURCE_DIR, "bench"))
import report  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def machine():
    return {"cores": 2, "cpu": "Synthetic CPU @ 1.00GHz", "date": "2026-11-21"}


def row(series, params, metric, unit, samples):
    s = sorted(samples)
    n = len(s)
    median = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    return {"series": series, "params": params, "metric": metric, "unit": unit,
            "runs": n, "min": s[0], "median": median, "max": s[-1]}


def dispatch_result():
    rows = []
    for series, scale in (("chained", 1.0), ("op-by-op", 0.1)):
        for hosts in (2, 4, 16):
            for compute_us in (0, 100, 1000, 10000):
                base = scale * 1e6 / (compute_us + 50) * hosts
                rows.append(row(series, {"hosts": hosts, "compute_us": compute_us},
                                "computations_per_s", "1/s", [base * 0.9, base, base * 1.2]))
    return {"bench": "dispatch", "commit": "abc1234", "machine": machine(), "quick": True,
            "rows": rows, "derived": {"breakeven_compute_ms_hosts_8": 0.7}}


def dispatch_with_sim_hosts():
    """The committed shape plus the simulated hosts' series (16..512 hosts, own derived)."""
    result = dispatch_result()
    for series in ("chained_sim", "op_by_op_sim", "multi_controller_sim"):
        for hosts in (16, 64, 512):
            for compute_us in (0, 1000):
                rate = 1e5 / hosts / (compute_us + 1)
                result["rows"].append(row(series, {"hosts": hosts, "compute_us": compute_us},
                                          "computations_per_s", "1/s", [rate]))
    result["derived"].update({"breakeven_compute_ms_hosts_4": 1.5,
                              "breakeven_compute_ms_sim_hosts_16": 0.5,
                              "breakeven_compute_ms_sim_hosts_512": 4.0,
                              "chained_over_sequential_hosts_4_compute_0": 2.0})
    return result


def peers_result():
    rows = [row(series, {"workload": w, "tasks": 1000}, "tasks_per_s", "1/s", [rate])
            for w in ("independent", "chain", "op_by_op")
            for series, rate in (("atoll", 5000), ("dask", 200))]
    return {"bench": "peers", "commit": "abc1234", "machine": machine(), "quick": True,
            "rows": rows, "derived": {"atoll_over_dask_chain": 25.0}}


def multitenant_result():
    rows = []
    for series in ("fifo", "fair"):
        for clients in (1, 2, 4, 8, 16):
            rows.append(row(series, {"clients": clients}, "utilisation", "fraction",
                            [0.5, 0.6, 0.7, 0.8]))
            rows.append(row(series, {"clients": clients}, "jain_fairness", "",
                            [0.9, 0.95]))
    return {"bench": "multitenant", "commit": "abc1234", "machine": machine(), "quick": False,
            "rows": rows, "derived": {}}


def other_result():
    # An unknown bench: a string param first, then the numeric one the default picks as x.
    rows = [row("raw|zmq", {"mode": "batch", "bytes": b}, "latency_us", "us", [b / 100 + 1])
            for b in (64, 4096, 1 << 20)]
    rows.append(row("text-only", {"mode": "x"}, "count", "", [3]))  # no numeric param
    return {"bench": "other", "commit": "unknown", "machine": machine(), "quick": True,
            "rows": rows, "derived": {"ratio_vs_raw": 1.25}}


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="atoll-report-test-")
        self.results = os.path.join(self.tmp.name, "results")
        self.out = os.path.join(self.tmp.name, "out")
        os.makedirs(self.results)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, result):
        with open(os.path.join(self.results, name), "w", encoding="utf-8") as f:
            json.dump(result, f)

    def run_report(self, *extra):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = report.main(["--results", self.results, "--out", self.out, *extra])
        return code, err.getvalue()

    def report_rows(self, bench, rows):
        """Writes a quick result of `bench` with `rows`, reports, and returns RESULTS.md."""
        self.write(f"{bench}.json", {"bench": bench, "commit": "abc1234", "machine": machine(),
                                     "quick": True, "rows": rows, "derived": {}})
        code, err = self.run_report()
        self.assertEqual(code, 0, err)
        return self.read_md()

    def read_md(self):
        with open(os.path.join(self.out, "RESULTS.md"), encoding="utf-8") as f:
            return f.read()

    def test_writes_a_section_table_and_plots_per_bench(self):
        self.write("dispatch.json", dispatch_result())
        self.write("multitenant.json", multitenant_result())
        self.write("other.json", other_result())
        code, err = self.run_report()
        self.assertEqual(code, 0, err)
        md = self.read_md()
        # Sections in bench order, each with its machine, commit, date and size.
        self.assertLess(md.index("## dispatch"), md.index("## multitenant"))
        self.assertLess(md.index("## multitenant"), md.index("## other"))
        self.assertIn("2 cores, Synthetic CPU @ 1.00GHz", md)
        self.assertIn("`abc1234`", md)
        self.assertIn("2026-11-21", md)
        self.assertIn("- size: quick", md)
        self.assertIn("- size: full", md)
        # One table line per row; params as columns.
        self.assertIn("| series | hosts | compute_us | metric | unit | runs | min | median | max |",
                      md)
        dispatch = md[md.index("## dispatch"):md.index("## multitenant")]
        self.assertEqual(dispatch.count("| chained |"), 12)
        self.assertEqual(dispatch.count("| op-by-op |"), 12)
        # Derived figures, and a "|" in a name does not break the table.
        self.assertIn("| breakeven_compute_ms_hosts_8 | 0.7 |", md)
        self.assertIn("| ratio_vs_raw | 1.25 |", md)
        self.assertIn("raw\\|zmq", md)
        # One plot per metric with a numeric param, embedded and present as a PNG.
        expected = ["dispatch_computations_per_s.png", "multitenant_utilisation.png",
                    "multitenant_jain_fairness.png", "other_latency_us.png"]
        for png in expected:
            self.assertIn(f"]({png})", md)
            with open(os.path.join(self.out, png), "rb") as f:
                self.assertEqual(f.read(8), PNG_MAGIC, png)
        self.assertNotIn("other_count.png", md)
        self.assertFalse(os.path.exists(os.path.join(self.out, "other_count.png")))

    def test_a_plot_keeps_only_its_configured_series(self):
        rows = [row(series, {"hosts": h, "shards": n}, "messages_per_computation", "1", [n])
                for series in ("total", "client->store") for h in (1, 2) for n in (8, 16)]
        md = self.report_rows("control", rows)
        self.assertEqual(md.count("| client->store |"), 4)  # the table keeps every row
        self.assertIn("](control_messages_per_computation.png)", md)
        self.assertEqual(report.PLOTS["control"]["series"], ["total"])

    def test_a_metric_of_one_point_is_a_table_line_without_a_plot(self):
        rows = [row("stream", {"calls": 100000}, "calls_per_s", "1/s", [8000, 9000]),
                row("a", {"n": 1}, "us", "us", [1]), row("a", {"n": 2}, "us", "us", [2])]
        md = self.report_rows("other", rows)
        self.assertIn("| stream |", md)
        self.assertNotIn("other_calls_per_s.png", md)
        self.assertIn("](other_us.png)", md)

    def test_no_plots(self):
        self.write("dispatch.json", dispatch_result())
        code, err = self.run_report("--no-plots")
        self.assertEqual(code, 0, err)
        self.assertIn("## dispatch", self.read_md())
        self.assertNotIn(".png", self.read_md())
        self.assertEqual([n for n in os.listdir(self.out) if n.endswith(".png")], [])

    def test_no_results(self):
        code, err = self.run_report()
        self.assertEqual(code, 0, err)
        self.assertIn("No results yet.", self.read_md())

    def test_malformed_file_is_named_and_nothing_is_written(self):
        self.write("dispatch.json", dispatch_result())
        bad = multitenant_result()
        del bad["rows"][3]["median"]
        self.write("multitenant.json", bad)
        code, err = self.run_report()
        self.assertEqual(code, 1)
        self.assertIn("multitenant.json", err)
        self.assertIn("rows[3]", err)
        self.assertIn("median", err)
        self.assertFalse(os.path.exists(os.path.join(self.out, "RESULTS.md")))

    def test_unparseable_file_and_duplicate_bench(self):
        with open(os.path.join(self.results, "broken.json"), "w", encoding="utf-8") as f:
            f.write("{not json")
        code, err = self.run_report()
        self.assertEqual(code, 1)
        self.assertIn("broken.json", err)
        os.remove(os.path.join(self.results, "broken.json"))
        self.write("a.json", dispatch_result())
        self.write("b.json", dispatch_result())
        code, err = self.run_report()
        self.assertEqual(code, 1)
        self.assertIn("'dispatch'", err)

    def test_notes_and_a_bench_s_own_figures_go_into_its_section(self):
        result = other_result()
        result["notes"] = ["A note with a [link](lm/trace.json)."]
        result["figures"] = [{"file": "other_timeline.png", "title": "timeline"}]
        self.write("other.json", result)
        code, err = self.run_report("--no-plots")
        self.assertEqual(code, 0, err)
        md = self.read_md()
        self.assertLess(md.index("- size: quick"), md.index("A note with a [link]"))
        self.assertLess(md.index("A note with a [link]"), md.index("| series |"))
        self.assertIn("![other: timeline](other_timeline.png)", md)
        result["figures"] = [{"file": "x.png"}]  # no title
        self.write("other.json", result)
        code, err = self.run_report("--no-plots")
        self.assertEqual(code, 1)
        self.assertIn("'figures'", err)
        result["figures"], result["notes"] = [], "not a list"
        self.write("other.json", result)
        code, err = self.run_report("--no-plots")
        self.assertEqual(code, 1)
        self.assertIn("'notes'", err)

    def test_script_runs_from_the_command_line(self):
        self.write("other.json", other_result())
        script = os.path.join(SOURCE_DIR, "bench", "report.py")
        done = subprocess.run([sys.executable, script, "--results", self.results,
                               "--out", self.out], capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("## other", self.read_md())


class FiguresTest(unittest.TestCase):
    """The figures drawn instead of lines against x (PLOTS' "figure")."""

    @classmethod
    def setUpClass(cls):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        cls.plt = plt

    def draw(self, figure, result):
        config = report.plot_config(result["bench"])
        self.assertEqual(config["figure"], figure)
        fig = report.FIGURES[figure](self.plt, result, result["rows"][0]["metric"],
                                     result["rows"], config)
        self.addCleanup(self.plt.close, fig)
        return fig

    def test_dispatch_is_modes_against_hosts_at_no_compute_and_breakeven_beside(self):
        result = dispatch_with_sim_hosts()
        fig = self.draw("against_hosts", result)
        rates, breakeven = fig.axes[0], fig.axes[1]
        handles, labels = rates.get_legend_handles_labels()
        data_lines = [h.lines[0] for h in handles]  # an errorbar's line, not its caps
        self.assertEqual(labels, ["chained", "op-by-op", "chained_sim", "op_by_op_sim",
                                  "multi_controller_sim"])
        # Every line holds the compute_us = 0 medians only, against hosts on a log axis.
        for line, series in zip(data_lines, labels):
            want = sorted((r["params"]["hosts"], r["median"]) for r in result["rows"]
                          if r["series"] == series and r["params"]["compute_us"] == 0)
            self.assertEqual(list(zip(*line.get_data())), want, series)
        self.assertEqual(rates.get_xscale(), "log")
        self.assertEqual(rates.get_yscale(), "log")
        self.assertIn(512, list(rates.get_xticks()))
        # A variant keeps its mode's colour in its own line style.
        by_label = dict(zip(labels, data_lines))
        self.assertEqual(by_label["chained_sim"].get_color(), by_label["chained"].get_color())
        self.assertNotEqual(by_label["chained_sim"].get_linestyle(),
                            by_label["chained"].get_linestyle())
        # The legend sits beside the data, not on it.
        self.assertGreaterEqual(rates.get_legend().get_bbox_to_anchor().x0,
                                rates.get_window_extent().x1)
        # Break-even: measured and simulated hosts, each a line of its own.
        lines = {l.get_label(): list(zip(*l.get_data())) for l in breakeven.get_lines()}
        self.assertEqual(lines, {"measured": [(4.0, 1.5), (8.0, 0.7)],
                                 "sim": [(16.0, 0.5), (512.0, 4.0)]})

    def test_dispatch_without_breakeven_is_one_panel(self):
        result = dispatch_result()
        result["derived"] = {}
        self.assertEqual(len(self.draw("against_hosts", result).axes), 1)

    def test_peers_is_a_bar_per_system_for_each_workload(self):
        fig = self.draw("bars", peers_result())
        ax = fig.axes[0]
        self.assertEqual([t.get_text() for t in ax.get_xticklabels()],
                         ["independent", "chain", "op_by_op"])
        self.assertEqual(ax.get_legend_handles_labels()[1], ["atoll", "dask"])
        self.assertEqual(sorted(p.get_height() for p in ax.patches), [200] * 3 + [5000] * 3)
        self.assertEqual(ax.get_yscale(), "log")

    def test_report_writes_both_figures(self):
        with tempfile.TemporaryDirectory(prefix="atoll-report-test-") as tmp:
            results = os.path.join(tmp, "results")
            os.makedirs(results)
            for result in (dispatch_with_sim_hosts(), peers_result()):
                with open(os.path.join(results, result["bench"] + ".json"), "w",
                          encoding="utf-8") as f:
                    json.dump(result, f)
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(report.main(["--results", results, "--out", tmp]), 0,
                                 err.getvalue())
            for png in ("dispatch_computations_per_s.png", "peers_tasks_per_s.png"):
                with open(os.path.join(tmp, png), "rb") as f:
                    self.assertEqual(f.read(8), PNG_MAGIC, png)


class ChoicesTest(unittest.TestCase):
    def test_a_series_variant_is_its_last_part_when_known(self):
        self.assertEqual(report.split_variant("chained_sim"), ("chained", "sim"))
        self.assertEqual(report.split_variant("op_by_op_curve"), ("op_by_op", "curve"))
        self.assertEqual(report.split_variant("op_by_op"), ("op_by_op", ""))
        self.assertEqual(report.split_variant("multi_controller"), ("multi_controller", ""))
        self.assertEqual(report.split_variant("sim"), ("sim", ""))

    def test_x_is_the_configured_param_else_the_first_numeric_one(self):
        rows = dispatch_result()["rows"]
        self.assertEqual(report.choose_x(rows, "compute_us"), "compute_us")
        self.assertEqual(report.choose_x(rows, None), "hosts")
        self.assertEqual(report.choose_x(rows, "missing"), "hosts")
        self.assertEqual(report.choose_x(other_result()["rows"][:3], None), "bytes")
        self.assertIsNone(report.choose_x(other_result()["rows"], None))

    def test_auto_scale_goes_log_only_for_a_wide_spread(self):
        self.assertEqual(report.choose_scale("auto", [1, 2, 3]), "linear")
        self.assertEqual(report.choose_scale("auto", [1, 10, 1000]), "log")
        self.assertEqual(report.choose_scale("auto", [0, 10, 1000]), "symlog")
        self.assertEqual(report.choose_scale("auto", [0, 0]), "linear")
        self.assertEqual(report.choose_scale("log", [1, 2]), "log")

    def test_numbers_are_short(self):
        self.assertEqual(report.fmt_value(3.0), "3")
        self.assertEqual(report.fmt_value(12345.678), "12346")
        self.assertEqual(report.fmt_value(1.5e-6), "1.5e-06")
        self.assertEqual(report.fmt_value(0.123456), "0.1235")
        self.assertEqual(report.fmt_value(7), "7")


if __name__ == "__main__":
    unittest.main()
