#!/usr/bin/env python3
"""The Dask side of bench/peers (peers_bench.cc runs it once, for the whole benchmark).

Starts a Dask distributed LocalCluster of 2 worker processes with 1 thread each, then
answers one request per line on stdin, one JSON line per answer on stdout:

  independent N   N tasks inc(i) submitted at once (client.map), all results gathered
  chain N         one graph of N tasks, each adding 1 to the previous (client.get on a dict)
  op_by_op N      N tasks submitted one by one, each given the previous task's future

Each answer is {"tasks_per_s": x} (N over the wall time from the first submission to the
last result in hand, results checked), or {"error": "..."}. The first line, once the
cluster is up, is {"ready": true, "dask": VERSION}, or {"missing": "distributed"} when the
package is not installed (then the script exits). End of input shuts the cluster down.
"""

import json
import sys
import time
import uuid


def inc(x):
    return x + 1


def independent(client, tasks):
    futures = client.map(inc, range(tasks), pure=False)
    results = client.gather(futures)
    if results != [i + 1 for i in range(tasks)]:
        raise RuntimeError("independent tasks returned wrong results")


def chain(client, tasks):
    # Keys unique per request, so that no repeat finds the previous one's results.
    prefix = f"inc-{uuid.uuid4().hex}-"
    graph = {prefix + "0": 0}
    for i in range(1, tasks + 1):
        graph[prefix + str(i)] = (inc, prefix + str(i - 1))
    result = client.get(graph, prefix + str(tasks))
    if result != tasks:
        raise RuntimeError(f"the chain computed {result}")


def op_by_op(client, tasks):
    future = client.submit(inc, 0, pure=False)
    for _ in range(tasks - 1):
        future = client.submit(inc, future, pure=False)
    result = future.result()
    if result != tasks:
        raise RuntimeError(f"the chain computed {result}")


WORKLOADS = {"independent": independent, "chain": chain, "op_by_op": op_by_op}


def answer(message):
    print(json.dumps(message), flush=True)


def serve(client):
    for line in sys.stdin:
        words = line.split()
        if len(words) != 2 or words[0] not in WORKLOADS or not words[1].isdigit():
            answer({"error": f"unknown request: {line.strip()}"})
            continue
        tasks = int(words[1])
        try:
            start = time.perf_counter()
            WORKLOADS[words[0]](client, tasks)
            answer({"tasks_per_s": tasks / (time.perf_counter() - start)})
        except Exception as e:  # the answer names it; the driver decides
            answer({"error": f"{words[0]} {tasks}: {e!r}"})


def main():
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        answer({"missing": "distributed"})
        return
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, silence_logs=40) as cluster, \
            Client(cluster) as client:
        answer({"ready": True, "dask": dask.__version__})
        serve(client)


if __name__ == "__main__":
    main()
