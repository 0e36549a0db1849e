"""Programs traced from Python run on a real cluster: the paper's Figure 2, a sharded matmul
and collectives over a 2x2 mesh, futures fed to later runs, runs waited for without reading
their results back, and mixture-of-experts routing."""

from __future__ import annotations

import os
import subprocess
import sys

import figure2  # examples/python/figure2.py
import mlp  # examples/python/mlp.py
import numpy as np

import atoll
from atoll import ops


def test_figure2(client: atoll.Client) -> None:
    f = figure2.figure2(client)
    assert f.num_nodes == 4
    y, z = client.run(f, np.array([1, 2], np.float32)).result(timeout=30)
    np.testing.assert_array_equal(y, [2, 3])
    np.testing.assert_array_equal(z, [2, 4])
    assert y.dtype == np.float32


def test_figure2_example(cluster) -> None:
    example = cluster.source_dir / "examples" / "python" / "figure2.py"
    out = subprocess.run([sys.executable, str(example)], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "ATOLL_HOME": cluster.state_dir,
                                          "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "y = [2. 3.]\nz = [2. 4.]\n"


def test_sharded_matmul_over_a_2x2_mesh_equals_numpy(client: atoll.Client) -> None:
    mesh = client.mesh((2, 2))
    assert mesh.num_devices == 4 and mesh.mesh == (2, 2)

    # Rows of x along mesh axis 0, columns of w along mesh axis 1: each device makes one block.
    @atoll.function(mesh, atoll.f32[8, 6].axes(0, None), atoll.f32[6, 4].axes(None, 1))
    def matmul(x, w):
        return ops.relu(x @ w) - 0.5

    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 6), dtype=np.float32)
    w = rng.standard_normal((6, 4), dtype=np.float32)
    # A layout that cannot be adopted as it is: column-major, big-endian (copied, converted).
    w = np.asfortranarray(w).astype(">f4")
    got = client.run(matmul, x, w).result(timeout=30)
    np.testing.assert_allclose(got, np.maximum(x @ w, 0) - 0.5, rtol=1e-5, atol=1e-6)


def test_collectives_along_each_axis_of_a_2x2_mesh_equal_numpy(client: atoll.Client) -> None:
    mesh = client.mesh((2, 2))
    x = np.arange(2 * 2 * 4, dtype=np.float32).reshape(2, 2, 4) % 7 - 3

    for axis in (0, 1):
        # x[i, j] on device (i, j); summed over the dimension cut along `axis`, each device
        # holds its own row as a partial along that axis.
        @atoll.function(mesh, atoll.f32[2, 2, 4].axes(0, 1, None))
        def kinds(v):
            own = ops.reduce_sum(v, axis)
            return (ops.all_reduce_max(own, axis), ops.all_reduce_mean(own, axis),
                    ops.reduce_scatter(own, axis, 1), ops.all_gather(v, axis),
                    ops.all_to_all(v, axis, 2), ops.broadcast(own, axis, 1),
                    ops.collective_permute(v, axis, [(0, 1), (1, 0)]))

        top, mean, scattered, gathered, moved, root, swapped = client.run(kinds, x).result(
            timeout=30)
        np.testing.assert_array_equal(top, x.max(axis=axis))
        np.testing.assert_allclose(mean, x.mean(axis=axis), rtol=1e-6)
        np.testing.assert_array_equal(scattered, x.sum(axis=axis))
        np.testing.assert_array_equal(gathered, x)
        np.testing.assert_array_equal(moved, x)
        np.testing.assert_array_equal(root, np.take(x, 1, axis=axis))
        np.testing.assert_array_equal(swapped, np.flip(x, axis=axis))


def test_futures_feed_the_next_runs(client: atoll.Client) -> None:
    s = client.slice(2)

    @atoll.function(s, atoll.f32[4].split(0), atoll.f32[4].split(0))
    def axpy(x, y):
        return x * 3 + y, ops.spin(x, 20000)  # the second keeps the run going a little

    x = np.arange(4, dtype=np.float32)
    y = np.ones(4, np.float32)
    first = client.run(axpy, x, y)
    value = first.output(0)
    assert value.dtype == atoll.f32 and value.shape == (4,)
    # Submitted before the first run finished: the value goes device to device.
    second = client.run(axpy, value, first.output(1))
    third = client.run(axpy, second.output(0), y)
    np.testing.assert_array_equal(third.result(timeout=30)[0], (x * 3 + y) * 3 * 3 + x * 3 + y)
    np.testing.assert_array_equal(value.result(timeout=30), x * 3 + y)


def test_wait_leaves_the_results_in_the_cluster(client: atoll.Client) -> None:
    @atoll.function(client.slice(1), atoll.f32[4])
    def slow(x):
        return ops.spin(x * 2, 300_000), x + 1  # the first takes 0.3 s

    x = np.arange(4, dtype=np.float32)
    run = client.run(slow, x)
    try:
        run.wait(timeout=0.01)
    except atoll.DeadlineExceeded as e:
        assert "not ready" in str(e)
    else:
        raise AssertionError("a run still spinning was waited for within 10 ms")
    assert run.wait(timeout=30) is run
    later = client.run(slow, run.output(1))  # the waited-for values feed a later run
    np.testing.assert_array_equal(later.result(timeout=30)[1], x + 2)
    np.testing.assert_array_equal(run.result(timeout=30)[0], x * 2)

    cancelled = client.run(slow, x)
    cancelled.cancel()
    try:
        cancelled.wait(timeout=30)
    except atoll.Cancelled:
        pass
    else:
        raise AssertionError("waiting for a cancelled run returned")


def test_results_read_together_keep_the_arrays_handed_out_before(client: atoll.Client) -> None:
    @atoll.function(client.slice(1), atoll.f32[4], atoll.f32[4])
    def three(x, y):
        return x + y, x * y, x - y

    x = np.arange(4, dtype=np.float32)
    y = np.full(4, 2, np.float32)
    run = client.run(three, x, y)
    middle = run.output(1).result(timeout=30)  # read alone first
    results = run.result(timeout=30)  # the other two, read at once
    assert results[1] is middle
    for got, want in zip(results, (x + y, x * y, x - y)):
        np.testing.assert_array_equal(got, want)
    assert all(a is b for a, b in zip(run.result(timeout=30), results)), "asked again"


def test_routing_sends_each_row_to_its_experts(client: atoll.Client) -> None:
    tokens, width, experts = 8, 3, 3
    gate_slice, expert_slice = client.slice(4, "island0"), client.slice(experts, "island0")

    @atoll.function(gate_slice, atoll.f32[tokens, width].split(0), atoll.i32[tokens].split(0),
                    atoll.i32[tokens].split(0))
    def gate(x, first, second):
        return x * 2, first, second

    @atoll.function(expert_slice, atoll.f32[None, width].split(0),
                    atoll.f32[None, width].split(0))
    def expert(a, b):
        return a + 1, b * 3

    @atoll.program(atoll.f32[tokens, width], atoll.i32[tokens], atoll.i32[tokens])
    def moe(x, first, second):
        scaled, to_first, to_second = gate(x, first, second)
        return expert(atoll.route(scaled, to_first), atoll.route(scaled, to_second))

    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (tokens, width)).astype(np.float32)
    first = np.array([0, 0, 2, 0, 2, 2, 0, 0], np.int32)  # expert 1 gets nothing first
    second = (first + 1 + rng.integers(0, experts - 1, tokens)).astype(np.int32) % experts
    out_first, out_second = client.run(moe, x, first, second).result(timeout=30)

    def dense(choice, f):  # expert by expert, its tokens in token order
        return np.concatenate([f(x[choice == e] * 2) for e in range(experts)])

    np.testing.assert_array_equal(out_first, dense(first, lambda v: v + 1))
    np.testing.assert_array_equal(out_second, dense(second, lambda v: v * 3))


def test_mlp_losses_equal_the_cpp_example(cluster, client: atoll.Client) -> None:
    steps, devices = 5, 4
    _, losses = mlp.train_mlp(client, client.slice(devices, "island0"),
                              mlp.MlpConfig(steps=steps))
    cpp = subprocess.run(
        [str(cluster.bin_dir / "atoll-example-mlp"), "--rm", client.endpoint, "--steps",
         str(steps), "--devices", str(devices), "--loss-digits", "8"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "ATOLL_HOME": cluster.state_dir})  # its keys
    assert cpp.returncode == 0, cpp.stderr
    cpp_losses = [float(line.split()[3]) for line in cpp.stdout.splitlines()
                  if line.startswith("step ")]
    assert len(cpp_losses) == steps, cpp.stdout
    np.testing.assert_allclose(losses, cpp_losses, rtol=0, atol=1e-5)
    assert losses[-1] < losses[0]
