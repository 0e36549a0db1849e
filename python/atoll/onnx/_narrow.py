"""ONNX's narrow dtypes (float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz, float4 e2m1, int4/uint4,
int2/uint2), which atoll has no row for: held in f32 or i32, exactly (every value of them
is one of f32/i32). A Cast into one rounds in the function as ml_dtypes (onnx's reference)
does, so that the held value is always one the narrow dtype has; the outputs are converted
to the narrow dtype on the host (exact)."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper

from .. import lax

T = onnx.TensorProto
# name: (mantissa bits, smallest normal exponent, largest finite, has inf, NaN when
# overflowing without saturation)
FLOATS = {
    T.FLOAT8E4M3FN: (3, -6, 448.0, False),
    T.FLOAT8E4M3FNUZ: (3, -7, 240.0, False),
    T.FLOAT8E5M2: (2, -14, 57344.0, True),
    T.FLOAT8E5M2FNUZ: (2, -15, 57344.0, False),
    T.FLOAT4E2M1: (1, 0, 6.0, False),
}
INTS = {T.INT4: (-8, 7), T.UINT4: (0, 15), T.INT2: (-2, 1), T.UINT2: (0, 3)}

HELD = {**{t: "f32" for t in FLOATS}, **{t: "i32" for t in INTS}}
HELD_NUMPY = {np.dtype(helper.tensor_dtype_to_np_dtype(t)): (np.float32 if t in FLOATS
                                                               else np.int32) for t in HELD}


def _full(like, v, dtype=None):
    return lax.full(tuple(like.shape), v, dtype or like.dtype)


def _pow2(k):
    """2**k for an i32 value k (within f32's normal exponents), exactly."""
    return lax.bitcast_convert_type(lax.shift_left(lax.add(k, _full(k, 127)), _full(k, 23)),
                                    "f32")


def round_float(x, elem_type: int, saturate: bool):
    """An f32 value rounded (to nearest even) to a narrow float dtype, kept in f32."""
    m, emin, top, has_inf = FLOATS[elem_type]
    a = lax.abs(x)
    bits = lax.bitcast_convert_type(a, "i32")
    e = lax.sub(lax.shift_right_logical(bits, _full(bits, 23)), _full(bits, 127))
    k = lax.sub(lax.max(e, _full(e, emin)), _full(e, m))
    q = _pow2(k)
    finite = lax.is_finite(a)
    safe = lax.select_n(finite, _full(a, 1.0), a)
    r = lax.mul(lax.round(lax.div(safe, q), 1), q)
    over = lax.gt(r, _full(r, top))
    isnan = lax.ne(x, x)
    isinf = lax.bitwise_and(lax.bitwise_not(finite), lax.bitwise_not(isnan))
    if elem_type == T.FLOAT4E2M1:  # no NaN, no inf: always saturates; NaN -> -0 (ml_dtypes)
        r = lax.select_n(lax.bitwise_or(over, isinf), r, _full(r, top))
        signed = lax.select_n(lax.lt(x, _full(x, 0)), r, lax.neg(r))
        return lax.select_n(isnan, signed, _full(r, -0.0))
    if saturate:
        r = lax.select_n(lax.bitwise_or(over, isinf), r, _full(r, top))
    else:
        big = math.inf if has_inf else math.nan
        r = lax.select_n(lax.bitwise_or(over, isinf), r, _full(r, big))
    signed = lax.select_n(lax.lt(x, _full(x, 0)), r, lax.neg(r))
    return lax.select_n(isnan, signed, _full(r, math.nan))


def round_int(x, elem_type: int):
    """A value converted to a narrow integer dtype, kept in i32: truncated toward zero, and
    0 where out of range or NaN (as ml_dtypes converts)."""
    lo, hi = INTS[elem_type]
    t = x if x.dtype == "i32" else lax.convert_element_type(x, "i32")
    if x.dtype in ("f32", "f64", "f16", "bf16"):
        f = lax.convert_element_type(x, "f64")
        inside = lax.bitwise_and(lax.gt(f, _full(f, lo - 1.0)), lax.lt(f, _full(f, hi + 1.0)))
    else:
        inside = lax.bitwise_and(lax.ge(t, _full(t, lo)), lax.le(t, _full(t, hi)))
    return lax.select_n(inside, _full(t, 0), t)


def cast(v, elem_type: int, saturate: bool):
    if elem_type in FLOATS:
        x = v if v.dtype == "f32" else lax.convert_element_type(v, "f32")
        return round_float(x, elem_type, saturate)
    return round_int(v, elem_type)
