"""numpy arrays of every dtype atoll has, both ways, on a real cluster: float16, float64,
int64 and ml_dtypes.bfloat16 map to f16, f64, i64 and bf16 and come back as themselves, bit
for bit (ml_dtypes' own conversion is the oracle of bf16's rounding)."""

from __future__ import annotations

import ml_dtypes
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


def bf16_bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).view(np.uint16)


def test_bf16_arrays_go_in_and_come_back_bit_for_bit(client: atoll.Client) -> None:
    s = client.slice(2)
    rng = np.random.default_rng(7)
    # Random values of every magnitude bf16 holds, rounding cases, signed zeros, infinities,
    # subnormals and NaN.
    x32 = np.concatenate([rng.standard_normal(10, np.float32) * np.float32(10.0) ** rng.integers(-30, 30, 10),
                          np.array([0.1, 300.7, -0.0, 0.0, np.inf, -np.inf, 1e-40, 3.4e38, np.nan,
                                    1.00390625, 1.01171875], np.float32)]).astype(np.float32)
    n = x32.size
    want = x32.astype(ml_dtypes.bfloat16)  # the oracle: ml_dtypes' round to nearest even

    @atoll.function(s, atoll.f32[n])
    def to_bf16(x):
        return ops.cast(x, atoll.bf16)

    assert atoll.bf16.numpy == np.dtype(ml_dtypes.bfloat16)
    run = client.run(to_bf16, x32)
    assert run.output(0).dtype == atoll.bf16
    out = run.result(timeout=30)
    assert out.dtype == ml_dtypes.bfloat16
    finite = ~np.isnan(x32)
    np.testing.assert_array_equal(bf16_bits(out)[finite], bf16_bits(want)[finite])
    assert np.isnan(out.astype(np.float32)[~finite]).all()

    # A bf16 array is an argument as it is, and comes back unchanged through a bf16 function;
    # a Future of a bf16 result feeds the same argument.
    @atoll.function(s, atoll.bf16[n])
    def twice(x):
        return x * 2

    doubled = (want.astype(np.float32) * 2).astype(ml_dtypes.bfloat16)
    for arg in (want, run.output(0)):
        got = client.run(twice, arg).result(timeout=30)
        assert got.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(bf16_bits(got)[finite], bf16_bits(doubled)[finite])

    @atoll.function(s, atoll.bf16[n])
    def widen(x):
        return ops.cast(x, "f32")

    wide = client.run(widen, want).result(timeout=30)
    assert wide.dtype == np.float32
    np.testing.assert_array_equal(wide[finite], want.astype(np.float32)[finite])
    # An array of another dtype is not silently converted into a bf16 argument.
    with pytest.raises(atoll.InvalidArgument, match="argument 0"):
        client.run(widen, np.zeros(n, np.float32))


def test_arrays_of_other_dtypes_are_refused_naming_what_is_taken(client: atoll.Client) -> None:
    s = client.slice(1)

    @atoll.function(s, atoll.f32[2])
    def same(x):
        return x + 0

    with pytest.raises(atoll.InvalidArgument, match="float16 .f16., .*uint32 .u32. arrays, got "
                       "a int16 array"):
        client.run(same, np.zeros(2, np.int16))  # a dtype atoll has none of
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
