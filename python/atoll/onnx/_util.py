"""Helpers of the lowerings: broadcasting without promotion, float work for the storage
dtypes, axes."""

from __future__ import annotations

from typing import Any, Callable, List, Sequence

from .. import _atoll
from .. import lax
from .. import numpy as anp

Value = _atoll.Value
FLOATS = ("f32", "f64", "f16", "bf16")
INTS = ("i8", "u8", "u32", "i32", "i64")


def broadcast(ctx: Any, *xs: Any) -> List[Value]:
    vals = [ctx.value(x) for x in xs]
    shape = anp._broadcast_shapes(*(tuple(v.shape) for v in vals))
    return [anp.broadcast_to(v, shape) for v in vals]


def scalar(like: Value, v: Any) -> Value:
    """A constant of like's dtype and shape."""
    return lax.full(tuple(like.shape), v, like.dtype)


def in_float(fn: Callable[..., Value], *xs: Value) -> Value:
    """fn computed in f32 for f16/bf16 operands and rounded back (atoll's rows compute the
    storage dtypes in f32 as well); other dtypes as they are."""
    d = xs[0].dtype
    if d in ("f16", "bf16"):
        return lax.convert_element_type(fn(*[lax.convert_element_type(x, "f32") for x in xs]), d)
    return fn(*xs)


def wide(fn: Callable[..., Value], *xs: Value) -> Value:
    """add/sub/mul/div, whose rows take f32, f64, i32 and i64: other dtypes computed wider."""
    d = xs[0].dtype
    to = {"f16": "f32", "bf16": "f32", "i8": "i64", "u8": "i64", "u32": "i64"}.get(d)
    if to is None:
        return fn(*xs)
    return lax.convert_element_type(fn(*[lax.convert_element_type(x, to) for x in xs]), d)


def axis(a: int, rank: int, ctx: Any) -> int:
    if not -rank <= a < max(rank, 1):
        raise ctx.refuse(f"axis {a} is out of range for rank {rank}")
    return a % max(rank, 1)


def keep(x: Value, axes: Sequence[int], rank_shape: Sequence[int]) -> Value:
    """x reduced over axes, reshaped with those axes kept as 1."""
    shape = [1 if i in axes else s for i, s in enumerate(rank_shape)]
    return lax.reshape(x, shape)


def normalization_input(ctx: Any, x: Any) -> Any:
    """What a normalization over the trailing axes starts from: the value, its dtype, it in
    f32 when it is f16 or bf16 (statistics in f32, as onnx's reference), the first normalized
    axis, the axes from it to the last, and epsilon."""
    v = ctx.value(x)
    rank = len(v.shape)
    a = axis(ctx.attr("axis", -1), rank, ctx)
    d = v.dtype
    u = lax.convert_element_type(v, "f32") if d in ("f16", "bf16") else v
    return v, d, u, a, list(range(a, rank)), ctx.attr("epsilon", 1e-5)
