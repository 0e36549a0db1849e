#!/usr/bin/env bash
# `atoll dashboard` over plain HTTP (no browser): it serves on loopback by default, the
# page, /api/state (the cluster as JSON) and /api/stream (Server-Sent Events that follow
# the event stream).
source "$(dirname "$0")/lib.sh"
"$atoll" dashboard --help | grep -q '127.0.0.1:8470' || fail "the default is not loopback"
start_cluster
start_dashboard 200
start_spin_job http-job 100000
"${ATOLL_PYTHON:-python3}" - "$url" <<'PY' || fail "HTTP checks"
import json, sys, time, urllib.request

url = sys.argv[1]
page = urllib.request.urlopen(url, timeout=5).read().decode()
assert "<title>atoll dashboard</title>" in page and "EventSource" in page, "page"
deadline = time.time() + 20
while True:
    state = json.load(urllib.request.urlopen(url + "api/state", timeout=5))
    devices = [d for i in state["islands"] for h in i["hosts"] for d in h["devices"]]
    runs = [p for p in state["programs"] if "http-job" in p["client_label"]]
    if len(devices) == 4 and runs and state["spans"] and any(d["busy_pct"] > 0 for d in devices):
        break
    assert time.time() < deadline, f"no busy devices, programs and spans: {json.dumps(state)[:800]}"
    time.sleep(0.2)
print(f"/api/state: {len(devices)} devices, {len(state['programs'])} programs, "
      f"{len(state['spans'])} spans, span_seq {state['span_seq']}")
seq = state["span_seq"]
later = json.load(urllib.request.urlopen(f"{url}api/state?since={seq}", timeout=5))
assert all(s["seq"] > seq for s in later["spans"]), "?since= returned old spans"

stream = urllib.request.urlopen(url + "api/stream", timeout=5)
assert stream.headers["Content-Type"].startswith("text/event-stream"), stream.headers
events, ids = 0, []
for raw in stream:
    line = raw.decode().rstrip("\n")
    if line.startswith("id: "):
        ids.append(int(line[4:]))
    if line.startswith("data: "):
        json.loads(line[6:])
        events += 1
        if events == 3:
            break
assert ids == sorted(ids) and ids[-1] > ids[0], f"span seq ids do not advance: {ids}"
print(f"/api/stream: {events} state events, ids {ids}")
PY
echo "PASS"
