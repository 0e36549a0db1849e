"""Two tenants on one island (issue 46): while examples/jax/lm's model trains data-parallel on
the 4 devices of island0 (client "train"), a second client ("infer") runs an inference loop
of the same model's forward at batch 1, greedy, one byte at a time, on a 1-device slice of
island0, which must overlap the training slice (island0 has 4 devices). Once both have run
their first step (traced, lowered, registered), `atoll trace` records a window of the
cluster's gangs; this script then stops both tenants and works out, from the trace alone, the
fraction of the window each device was busy, in all and per tenant (the union of its gangs'
intervals over the window), and how many gangs each tenant ran there.

Writes the trace (bench/lm/two_tenants_trace.json: open it in ui.perfetto.dev; one track
per device, slices coloured by client) and bench/results/lm_tenants.json (bench/report.py
draws its bars). Starts a cluster of its own (bench.toml) unless --state-dir names one.

    ATOLL_PYTHON_DIR=... ATOLL_BIN_DIR=... python bench/lm/two_tenants.py [--window-s 60]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import queue
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Tuple

from lm_paths import HERE, SOURCE  # first: sets JAX_PLATFORMS and the import paths

import numpy as np  # noqa: E402

import data  # noqa: E402
import model  # noqa: E402
from result import cluster, result, row  # noqa: E402

READY_TIMEOUT_S = 600  # tracing and lowering the training step on 2 loaded cores


def size(args: argparse.Namespace) -> model.Config:
    return model.Config(layers=args.layers, d_model=args.d_model, heads=args.heads,
                        context=args.context, batch=args.batch)


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


# -- the tenants (each a process of its own: a client of its own) -------------------------------

def tenant_train(args: argparse.Namespace, client: Any) -> None:
    import layouts  # noqa: PLC0415
    cfg = size(args)
    layout = layouts.Spmd(cfg, client, devices=4, island="island0")
    params = model.init(cfg)
    state = layout.state(params, model.optimizer(cfg).init(params))
    text = data.corpus()[0]
    pending = None
    for step in range(args.max_steps):  # until the parent stops it
        state, loss = layout.step(state, *data.batch(text, step, cfg.batch, cfg.context))
        if pending is not None:
            say(tenant="train", step=step - 1, loss=float(pending))
        pending = loss


def tenant_infer(args: argparse.Namespace, client: Any) -> None:
    import atoll.jax as aj  # noqa: PLC0415
    from jax.sharding import PartitionSpec as P  # noqa: PLC0415
    cfg = size(args)
    mesh = aj.Mesh(client, (1,), ("data",), island="island0")
    forward = aj.jit(model.logits, mesh=mesh, in_specs=(P(), P()), out_specs=P())
    params = model.init(cfg)
    text = list(b"The ")
    for step in range(args.max_steps):
        window = text[-cfg.context:]
        tokens = np.zeros((1, cfg.context), np.int32)
        tokens[0, :len(window)] = window
        logits = np.asarray(forward(params, tokens))
        text.append(int(logits[0, len(window) - 1].argmax()))
        say(tenant="infer", step=step)


def run_tenant(args: argparse.Namespace) -> int:
    import atoll  # noqa: PLC0415
    client = atoll.connect(state_dir=args.state_dir, name=f"lm-{args.role}")
    say(tenant=args.role, client=client.id)
    (tenant_train if args.role == "train" else tenant_infer)(args, client)
    return 0


# -- the trace's utilisation ---------------------------------------------------------------------

def busy(intervals: List[Tuple[float, float]]) -> float:
    """The length of the union of ``intervals``."""
    total, end = 0.0, -float("inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def utilisation(trace: Dict[str, Any], tenants: Dict[int, str]
                ) -> Tuple[float, Dict[str, Dict[str, Dict[str, float]]]]:
    """(window in s, {device: {tenant or "all": {"busy": fraction, "gangs": n}}}, "all"
    also with "switches"): the window runs from the trace's first gang's start to its last
    gang's end. A gang counts as busy from its start to its end on its device, waits for
    peers' tuples and collectives included (what the trace shows)."""
    names: Dict[int, str] = {}
    gangs: Dict[Tuple[int, int], List[Tuple[float, float, str]]] = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "process_name":
            names[e["pid"]] = e["args"]["name"].replace(" ", "")
        elif e["ph"] == "X":
            who = tenants.get(e["args"]["client"], f"client {e['args']['client']}")
            gangs.setdefault((e["pid"], e["tid"]), []).append(
                (e["ts"], e["ts"] + e["dur"], who))
    if not gangs:
        raise RuntimeError("the trace holds no gangs")
    start = min(a for g in gangs.values() for a, _, _ in g)
    end = max(b for g in gangs.values() for _, b, _ in g)
    out: Dict[str, Dict[str, Dict[str, float]]] = {}
    for (pid, tid), g in sorted(gangs.items()):
        device = f"{names.get(pid, pid)}/d{tid}"
        order = [w for _, _, w in sorted(g)]
        out[device] = {"all": {"busy": busy([(a, b) for a, b, _ in g]) / (end - start),
                               "gangs": len(g),
                               # interleaving: consecutive gangs of different tenants
                               "switches": sum(x != y for x, y in zip(order, order[1:]))}}
        for who in sorted({w for _, _, w in g}):
            mine = [(a, b) for a, b, w in g if w == who]
            out[device][who] = {"busy": busy(mine) / (end - start), "gangs": len(mine)}
    return (end - start) / 1e6, out


def draw_timeline(trace: Dict[str, Any], tenants: Dict[int, str], path: pathlib.Path,
                  zoom_s: float) -> None:
    """The trace's gangs, a row per device, coloured by tenant: the whole window above,
    below ``zoom_s`` seconds around the first switch from one tenant to another on a device
    (an inference gang is too short to see at full width)."""
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    names = {e["pid"]: e["args"]["name"].replace(" ", "") for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    gangs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    devices = sorted({(e["pid"], e["tid"]) for e in gangs})
    who = sorted({tenants.get(e["args"]["client"], "other") for e in gangs})
    colour = {w: f"C{i}" for i, w in enumerate(who)}
    start = min(e["ts"] for e in gangs)
    switches = []
    for dev in devices:
        mine = sorted((e["ts"], tenants.get(e["args"]["client"], "other")) for e in gangs
                      if (e["pid"], e["tid"]) == dev)
        switches += [b[0] for a, b in zip(mine, mine[1:]) if a[1] != b[1]]
    middle = (min(switches, default=start) - start) / 1e6
    fig, axes = plt.subplots(2, 1, figsize=(9, 5), dpi=100, layout="constrained")
    for ax, span in zip(axes, (None, zoom_s)):
        for y, dev in enumerate(devices):
            for w in who:
                bars = [((e["ts"] - start) / 1e6, max(e["dur"], 1) / 1e6) for e in gangs
                        if (e["pid"], e["tid"]) == dev
                        and tenants.get(e["args"]["client"], "other") == w]
                ax.broken_barh(bars, (y - 0.4, 0.8), color=colour[w], edgecolor="black",
                               linewidth=0.3)
        ax.set_yticks(range(len(devices)),
                      labels=[f"{names.get(p, p)}/d{t}" for p, t in devices])
        ax.set_xlabel("seconds")
        if span is not None:
            ax.set_xlim(max(middle - span / 2, 0), max(middle - span / 2, 0) + span)
            ax.set_title(f"{span:g} s around the first switch between tenants on a device")
        else:
            ax.set_title("gangs per device, by tenant (atoll trace)")
    from matplotlib.patches import Patch  # noqa: PLC0415
    axes[0].legend(handles=[Patch(color=colour[w], label=w) for w in who], fontsize="small",
                   loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.savefig(path)
    plt.close(fig)


# -- the parent: both tenants, the trace, the figure ---------------------------------------------

def start_tenant(role: str, args: argparse.Namespace, state: str, lines: "queue.Queue"
                 ) -> subprocess.Popen:
    cmd = [sys.executable, __file__, "--role", role, "--state-dir", state,
           "--layers", str(args.layers), "--d-model", str(args.d_model),
           "--heads", str(args.heads), "--context", str(args.context),
           "--batch", str(args.batch)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)

    def pump() -> None:  # the tenant's JSON lines, as they come
        for line in proc.stdout:
            lines.put(json.loads(line))
        lines.put({"tenant": role, "exited": proc.wait()})

    threading.Thread(target=pump, daemon=True).start()
    return proc


def measure(args: argparse.Namespace, state: str) -> Dict[str, Any]:
    bin_dir = pathlib.Path(os.environ.get("ATOLL_BIN_DIR", SOURCE / "build" / "bin"))
    lines: "queue.Queue" = queue.Queue()
    procs = {role: start_tenant(role, args, state, lines) for role in ("train", "infer")}
    clients: Dict[int, str] = {}
    steps = {"train": [], "infer": []}
    trace_file = pathlib.Path(args.trace)
    try:
        def take(until: float) -> None:  # the tenants' lines until then
            while time.monotonic() < until:
                try:
                    msg = lines.get(timeout=max(until - time.monotonic(), 0.01))
                except queue.Empty:
                    return
                if "exited" in msg:
                    raise RuntimeError(f"tenant {msg['tenant']} exited ({msg['exited']}) "
                                       "before the window ended")
                if "client" in msg:
                    clients[msg["client"]] = msg["tenant"]
                else:
                    steps[msg["tenant"]].append((time.monotonic(), msg["step"]))

        deadline = time.monotonic() + READY_TIMEOUT_S
        while not all(steps.values()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the tenants did not both run a step in "
                                   f"{READY_TIMEOUT_S} s")
            take(time.monotonic() + 1)
        opened = time.monotonic()
        tracer = subprocess.Popen([str(bin_dir / "atoll"), "--state-dir", state, "trace",
                                   "--timeout-s", str(args.window_s), "-o", str(trace_file)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        take(opened + args.window_s)
        out, _ = tracer.communicate(timeout=args.window_s + 60)
        if tracer.returncode:
            raise RuntimeError(f"atoll trace failed: {out}")
        closed = time.monotonic()
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    in_window = {t: sum(1 for when, _ in s if opened <= when <= closed)
                 for t, s in steps.items()}
    trace = json.loads(trace_file.read_text())
    window_s, util = utilisation(trace, clients)
    draw_timeline(trace, clients, pathlib.Path(args.timeline), args.zoom_s)
    return {"window_s": window_s, "utilisation": util, "steps_in_window": in_window,
            "clients": clients}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", choices=["train", "infer"], default=None,
                    help="(internal) run one tenant")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=32)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-steps", type=int, default=100000)
    ap.add_argument("--window-s", type=float, default=60)
    ap.add_argument("--state-dir", default="")
    ap.add_argument("--trace", default=str(HERE / "two_tenants_trace.json"))
    ap.add_argument("--timeline", default=str(SOURCE / "bench" / "lm_tenants_timeline.png"))
    ap.add_argument("--zoom-s", type=float, default=1)
    ap.add_argument("--out", default=str(SOURCE / "bench" / "results" / "lm_tenants.json"))
    args = ap.parse_args()
    if args.role:
        return run_tenant(args)
    with cluster(args.state_dir, HERE / "bench.toml", "atoll-lm-tenants-") as state:
        got = measure(args, state)
    rows = []
    for device, per in got["utilisation"].items():
        for who, u in per.items():
            rows.append(row(who, {"device": device}, "busy_fraction", "ratio", [u["busy"]]))
    for device, per in got["utilisation"].items():
        for who, u in per.items():
            rows.append(row(who, {"device": device}, "gangs", "gangs", [u["gangs"]]))
    derived = {f"{t}_steps_in_window": n for t, n in got["steps_in_window"].items()}
    derived["window_s"] = round(got["window_s"], 2)
    for device, per in got["utilisation"].items():
        if len(per) > 2:  # "all" and more than one tenant
            derived[f"{device}_tenant_switches"] = per["all"]["switches"]
    cfg = size(args)
    res = result("lm_tenants", rows, derived, quick=False,
                 model=(f"{cfg.layers} layers, d_model {cfg.d_model}, {cfg.heads} heads, "
                        f"context {cfg.context}; train: batch {cfg.batch} on island0's 4 "
                        f"devices; infer: batch 1 on 1 device of island0"),
                 clients={str(k): v for k, v in got["clients"].items()},
                 notes=[f"Two clients on island0 for {derived['window_s']} s "
                        f"(`bench/lm/two_tenants.py --window-s {args.window_s:g}`): \"train\" "
                        f"trains examples/jax/lm's model data-parallel on its 4 devices, "
                        f"\"infer\" runs the same model's forward at batch 1 on 1 of them. "
                        f"busy_fraction: the union of a tenant's gangs' intervals on a device "
                        f"over the window (a gang counts from its start to its end, waits for "
                        f"collectives included); gangs: how many ran there. The trace: "
                        f"[lm/two_tenants_trace.json](lm/two_tenants_trace.json) "
                        f"(ui.perfetto.dev)."],
                 figures=[{"file": pathlib.Path(args.timeline).name,
                           "title": "timeline of the trace"}])
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({"window_s": derived["window_s"], "steps_in_window": got["steps_in_window"],
                      "utilisation": got["utilisation"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
