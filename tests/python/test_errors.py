"""Bad inputs raise the exception class of their status code, with a message that names
what is wrong; so does a run on a cluster that stopped."""

from __future__ import annotations

import numpy as np
import pytest

import atoll


@pytest.fixture()
def double(client: atoll.Client) -> atoll.Function:
    @atoll.function(client.slice(2), atoll.f32[2].split(0))
    def double(x):
        return x * 2

    return double


def test_wrong_shape(client: atoll.Client, double: atoll.Function) -> None:
    with pytest.raises(atoll.InvalidArgument, match=r"argument 0 is f32\[3\], the program "
                       r"takes f32\[2\]"):
        client.run(double, np.zeros(3, np.float32))
    # Found while tracing, at the op that does not fit.
    with pytest.raises(atoll.InvalidArgument, match=r"function 'bad': matmul .*\[2,3\] x \[2,3\]"):
        @atoll.function(client.slice(1), atoll.f32[2, 3], atoll.f32[2, 3])
        def bad(a, b):
            return a @ b


def test_wrong_dtype(client: atoll.Client, double: atoll.Function) -> None:
    with pytest.raises(atoll.InvalidArgument, match="argument 0: .* got a int16 array"):
        client.run(double, np.zeros(2, np.int16))
    with pytest.raises(atoll.InvalidArgument, match=r"argument 0 is f64\[2\], the program "
                       r"takes f32\[2\]"):
        client.run(double, np.zeros(2, np.float64))
    with pytest.raises(atoll.InvalidArgument, match=r"argument 0 is i32\[2\], the program "
                       r"takes f32\[2\]"):
        client.run(double, np.zeros(2, np.int32))
    # Also a ValueError, as Python code expects of a bad argument.
    assert issubclass(atoll.InvalidArgument, ValueError)


def test_unknown_slice(cluster, client: atoll.Client) -> None:
    with cluster.connect(name="other") as other:
        theirs = other.slice(2)
        with pytest.raises(atoll.NotFound, match=f"slice {theirs.id} was not made by this client"):
            @client.function(theirs, atoll.f32[2])
            def f(x):
                return x


def test_run_on_a_stopped_cluster(small_cluster) -> None:
    with small_cluster.connect(timeout=1.0) as client:
        @atoll.function(client.slice(2), atoll.f32[2].split(0))
        def double(x):
            return x * 2

        np.testing.assert_array_equal(client.run(double, [1, 2]).result(timeout=10), [2, 4])
        small_cluster.stop()
        # A small argument travels with the submission, which is not waited for: the
        # error comes with the result.
        with pytest.raises(atoll.Unavailable, match="not connected .*down or unreachable"):
            client.run(double, [1, 2]).result(timeout=10)
    with pytest.raises(atoll.Unavailable, match="no cluster running"):
        small_cluster.connect()
