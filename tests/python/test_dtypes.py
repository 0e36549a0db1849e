"""numpy arrays of every dtype atoll has, both ways, on a real cluster: float16, float64 and
int64 map to f16, f64 and i64 and come back as themselves; numpy has no bfloat16, so bf16
values go in as float32 with an explicit cast and come back as float32."""

from __future__ import annotations

import numpy as np
import pytest

import atoll
from atoll import ops


@pytest.mark.parametrize("dtype,numpy", [(atoll.f16, np.float16), (atoll.f64, np.float64),
                                         (atoll.i64, np.int64), (atoll.f32, np.float32),
                                         (atoll.i32, np.int32)])
def test_numpy_dtypes_map_both_ways(client: atoll.Client, dtype: atoll.DType, numpy) -> None:
    assert dtype.numpy == np.dtype(numpy)
    s = client.slice(2)

    @atoll.function(s, dtype[4].split(0))
    def twice(x):
        return x + x

    x = np.array([1, -2, 3, 2**11 + 1], numpy)  # 2049: f16 rounds it, the others hold it
    out = client.run(twice, x).result(timeout=30)
    assert out.dtype == np.dtype(numpy)
    np.testing.assert_array_equal(out, x + x)


def test_f64_keeps_double_precision(client: atoll.Client) -> None:
    s = client.slice(2)

    @atoll.function(s, atoll.f64[2].split(0))
    def step(x):
        return x * (1 + 1e-12) - x

    out = client.run(step, np.array([1.0, 3.0])).result(timeout=30)
    np.testing.assert_allclose(out, [1e-12, 3e-12], rtol=1e-3)  # f32 would give 0


def test_i64_holds_what_i32_cannot(client: atoll.Client) -> None:
    s = client.slice(2)

    @atoll.function(s, atoll.i64[2].split(0))
    def shift(x):
        return x * 2**33

    out = client.run(shift, np.array([3, -1], np.int64)).result(timeout=30)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [3 * 2**33, -(2**33)])


def test_bf16_goes_in_by_a_cast_and_comes_back_as_float32(client: atoll.Client) -> None:
    s = client.slice(2)

    @atoll.function(s, atoll.f32[4].split(0))
    def to_bf16(x):
        return ops.cast(x, atoll.bf16) * 2

    assert atoll.bf16.numpy is None
    run = client.run(to_bf16, np.array([1.0, 0.1, 300.7, -2.5], np.float32))
    assert run.output(0).dtype == atoll.bf16
    out = run.result(timeout=30)
    assert out.dtype == np.float32
    # bf16 keeps 8 significant bits: 0.1 -> 0.10009765625, 300.7 -> 300, each exactly doubled.
    np.testing.assert_array_equal(out, [2.0, 0.2001953125, 600.0, -5.0])

    # A bf16 result feeds a bf16 argument as a future; an array cannot be one.
    @atoll.function(s, atoll.bf16[4].split(0))
    def widen(x):
        return ops.cast(x, "f32")

    again = client.run(widen, run.output(0)).result(timeout=30)
    assert again.dtype == np.float32
    np.testing.assert_array_equal(again, out)
    with pytest.raises(atoll.InvalidArgument, match="numpy has no bfloat16"):
        client.run(widen, np.zeros(4, np.float32))


def test_arrays_of_other_dtypes_are_refused_naming_what_is_taken(client: atoll.Client) -> None:
    s = client.slice(1)

    @atoll.function(s, atoll.f32[2])
    def same(x):
        return x + 0

    with pytest.raises(atoll.InvalidArgument, match="float16 .f16., float64 .f64."):
        client.run(same, np.zeros(2, np.uint8))
    with pytest.raises(atoll.InvalidArgument, match="f64"):
        client.run(same, np.zeros(2, np.float64))  # an f64 array for an f32 argument


def test_ops_refuse_a_dtype_they_do_not_take_when_traced(client: atoll.Client) -> None:
    s = client.slice(1)
    with pytest.raises(atoll.InvalidArgument, match="sgd_update takes f32 or f64"):
        @atoll.function(s, atoll.f32[2], atoll.f32[2])
        def update(p, g):
            return ops.sgd_update(ops.cast(p, atoll.bf16), ops.cast(g, atoll.bf16), 0.1)
    with pytest.raises(atoll.InvalidArgument, match="unknown dtype 'bf17'"):
        @atoll.function(s, atoll.f32[2])
        def bad(x):
            return ops.cast(x, "bf17")
