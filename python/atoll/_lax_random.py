"""jax's random bits on traced atoll values: threefry2x32 (Random123's Threefry-2x32 with
20 rounds, as jax.random's default PRNG) written with the IR's u32 primitives, and
random_bits as jax draws them from a key's data (u32 [2], what jax.random.key_data or a
raw jax.random.PRNGKey holds), so that dropout masks and initialisations in a traced
function are jax.random's bits for the same key."""

from __future__ import annotations

import math
from typing import Sequence, Tuple

from . import _atoll

Value = _atoll.Value

__all__ = ["iota_2x32", "random_bits", "threefry2x32"]

# Threefry-2x32's rotation distances, the two alternating groups of four rounds.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA  # the key schedule's third word is k0 ^ k1 ^ this


def threefry2x32(k0: Value, k1: Value, x0: Value, x1: Value) -> Tuple[Value, Value]:
    """Threefry-2x32 of the counter words (x0, x1) under the key words (k0, k1), elementwise
    over u32 values of one shape: jax's threefry2x32 primitive."""
    from . import lax  # atoll.lax imports this module

    shape = tuple(x0.shape)

    def const(c: int) -> Value:
        return lax.full(shape, c, "u32")

    def rotl(v: Value, r: int) -> Value:
        return lax.bitwise_or(lax.shift_left(v, const(r)),
                              lax.shift_right_logical(v, const(32 - r)))

    keys = (k0, k1, lax.bitwise_xor(lax.bitwise_xor(k0, k1), const(_PARITY)))
    x0, x1 = lax.add(x0, keys[0]), lax.add(x1, keys[1])
    for group in range(5):
        for r in _ROTATIONS[group % 2]:
            x0 = lax.add(x0, x1)
            x1 = lax.bitwise_xor(rotl(x1, r), x0)
        x0 = lax.add(x0, keys[(group + 1) % 3])
        x1 = lax.add(lax.add(x1, keys[(group + 2) % 3]), const(group + 1))
    return x0, x1


def iota_2x32(shape: Sequence[int]) -> Tuple[Value, Value]:
    """Each element's row-major position in ``shape`` as 64 bits: (high, low) u32 words, the
    counters of jax's default draw (its iota_2x32_shape)."""
    from . import lax  # atoll.lax imports this module

    shape = tuple(int(s) for s in shape)
    position = lax.full(shape, 0, "i64")
    stride = 1
    for d in range(len(shape) - 1, -1, -1):
        step = lax.mul(lax.broadcasted_iota("i64", shape, d), lax.full(shape, stride, "i64"))
        position = lax.add(position, step)
        stride *= shape[d]
    low = lax.convert_element_type(
        lax.bitwise_and(position, lax.full(shape, 0xFFFFFFFF, "i64")), "u32")
    high = lax.convert_element_type(
        lax.shift_right_logical(position, lax.full(shape, 32, "i64")), "u32")
    return high, low


def random_bits(key: Value, bit_width: int = 32, shape: Sequence[int] = ()) -> Value:
    """jax.random.bits(key, shape, uint8 or uint32) for a key's data ``key`` (u32 [2]), as
    jax draws them by default (jax_threefry_partitionable): element i's bits come from the
    counter (i >> 32, i & 0xFFFFFFFF), i its row-major position."""
    from . import lax  # atoll.lax imports this module

    if tuple(key.shape) != (2,) or str(key.dtype) != "u32":
        raise _atoll.InvalidArgument(
            f"random_bits: the key must be a threefry key's data, u32 [2], got "
            f"{key.dtype} {list(key.shape)}")
    if bit_width not in (8, 32):
        raise _atoll.InvalidArgument(
            f"random_bits: bit_width must be 8 or 32, got {bit_width} (atoll has no u16 or "
            "u64 dtype)")
    shape = tuple(int(s) for s in shape)
    if math.prod(shape) >= 2 ** 63:
        raise _atoll.InvalidArgument(f"random_bits: {list(shape)} has 2**63 elements or more")
    words = [lax.broadcast_in_dim(lax.reshape(lax.slice(key, [i], [i + 1]), ()), shape, ())
             for i in range(2)]
    high, low = iota_2x32(shape)
    bits0, bits1 = threefry2x32(words[0], words[1], high, low)
    mixed = lax.bitwise_xor(bits0, bits1)
    return mixed if bit_width == 32 else lax.convert_element_type(mixed, f"u{bit_width}")
