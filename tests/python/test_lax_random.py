"""atoll.lax.random_bits and threefry2x32 against jax.random on CPU, the oracle, on a real
cluster: the same key's data gives jax.random.bits' bits, over seeded random keys (split
and folded ones too) and shapes with size-0 and size-1 dimensions."""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.extend.random  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import atoll  # noqa: E402
from atoll import lax  # noqa: E402
from atoll._types import dtype_of_numpy  # noqa: E402
from test_lax import SEED  # noqa: E402


def run(client: atoll.Client, fn: Callable[..., Any], args: Sequence[np.ndarray]) -> np.ndarray:
    types = [dtype_of_numpy(a.dtype)[tuple(a.shape)] for a in args]
    traced = client.function(client.slice(1), *types)(fn)
    return np.asarray(client.run(traced, *args).result(timeout=60))


def keys(rng: np.random.Generator, count: int) -> list:
    """Raw keys (u32 [2]) as users make them: seeded, split and folded in."""
    out = []
    for i in range(count):
        key = jax.random.PRNGKey(int(rng.integers(0, 2**31)))
        if i % 3 == 1:
            key = jax.random.split(key, 3)[2]
        elif i % 3 == 2:
            key = jax.random.fold_in(key, int(rng.integers(0, 1000)))
        out.append(np.asarray(key, np.uint32))
    return out


def test_random_bits_are_jax_randoms(client: atoll.Client) -> None:
    assert jax.config.jax_threefry_partitionable, "jax's default draw changed"
    rng = np.random.default_rng([SEED, 30])
    shapes = [(), (1,), (0,), (3, 0, 2), (5,), (4, 7), (2, 3, 5), (1, 1, 9)]
    for i, key in enumerate(keys(rng, 12)):
        shape = shapes[i % len(shapes)]
        for width, dtype in ((32, np.uint32), (8, np.uint8)):
            want = np.asarray(jax.random.bits(jax.random.wrap_key_data(key), shape, dtype))
            got = run(client, lambda k: lax.random_bits(k, width, shape), [key])
            assert got.dtype == want.dtype and got.shape == want.shape, (shape, width)
            np.testing.assert_array_equal(got, want, err_msg=f"key {key} shape {shape}")


def test_threefry2x32_is_jaxs(client: atoll.Client) -> None:
    rng = np.random.default_rng([SEED, 31])
    for n in (0, 1, 6, 33):
        key = rng.integers(0, 2**32, 2, dtype=np.uint32)
        x0, x1 = (rng.integers(0, 2**32, n, dtype=np.uint32) for _ in range(2))
        want = jax.extend.random.threefry_2x32(key, np.concatenate([x0, x1]))
        for i in range(2):
            got = run(client, lambda k, a, b, i=i: lax.threefry2x32(
                lax.broadcast_in_dim(lax.reshape(lax.slice(k, [0], [1]), ()), (n,), ()),
                lax.broadcast_in_dim(lax.reshape(lax.slice(k, [1], [2]), ()), (n,), ()),
                a, b)[i], [key, x0, x1])
            np.testing.assert_array_equal(got, np.asarray(want)[i * n:(i + 1) * n])


def test_random_bits_refuse_what_they_cannot_draw(client: atoll.Client) -> None:
    key = np.zeros(2, np.uint32)
    for fn, says in ((lambda k: lax.random_bits(k, 16, (2,)), "no u16"),
                     (lambda k: lax.random_bits(k, 32, (2**40, 2**30)), r"2\*\*63"),
                     (lambda k: lax.random_bits(lax.convert_element_type(k, "i32"), 32, (2,)),
                      r"u32 \[2\], got i32")):
        with pytest.raises(atoll.InvalidArgument, match=says):
            run(client, fn, [key])
