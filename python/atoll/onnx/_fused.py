"""atoll's row kernels (relu, softmax and layer norm over the last axis, a bias added to
every row, arithmetic with a scalar operand) where an ONNX node is one of them, in place of
its decomposition into lax primitives: each of those materializes the broadcasts and
constants that the decomposition spells out (a bias or a row statistic copied out to the
operand's shape, a zero tensor to compare with), and on the torch-exported transformer
encoder such copies took more of the time than its matmuls did. f32 values only (the
kernels take f32 and f64; the other dtypes keep the decompositions, which onnx's node
tests cover), and only where the last dimension is not cut across devices."""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from .. import _atoll
from .. import lax

_ops = _atoll.ops
Value = _atoll.Value


def _rows(v: Any) -> bool:
    """Whether v is an f32 value of rank >= 1 whose last dimension is whole on each device."""
    return (isinstance(v, Value) and v.dtype == "f32" and len(v.shape) >= 1
            and v.split[-1] < 0)


def relu(v: Value) -> Optional[Value]:
    return _ops.relu(v) if _rows(v) else None


def softmax(v: Value, axis: int) -> Optional[Value]:
    return _ops.softmax(v) if _rows(v) and axis == len(v.shape) - 1 else None


def layer_norm(ctx: Any, v: Value, axis: int, scale: Any, bias: Any, eps: float
               ) -> Optional[Value]:
    """LayerNormalization over the last axis with a scale and bias of that dimension's size,
    when nothing reads the node's mean and inverse deviation outputs (the kernel takes a
    positive epsilon only)."""
    if (not _rows(v) or axis != len(v.shape) - 1 or any(ctx.node.output[1:])
            or not 0 < eps < float("inf")):
        return None
    n = v.shape[-1]
    parts = []
    for p in (scale, bias if bias is not None else np.zeros(n, np.float32)):
        shape = tuple(p.shape) if isinstance(p, Value) else np.shape(p)
        if not shape or shape[-1] != n or any(d != 1 for d in shape[:-1]):
            return None  # a scalar or another broadcast shape
        pv = ctx.value(p)
        if pv.dtype != "f32":
            return None
        parts.append(pv if tuple(pv.shape) == (n,) else lax.reshape(pv, [n]))
    return _ops.layer_norm(v, parts[0], parts[1], float(eps))


def _scalar(x: Any) -> Optional[float]:
    """A float constant of one element, as a Python float."""
    if isinstance(x, Value):
        return None
    a = np.asarray(x)
    if a.size != 1 or a.dtype != np.float32:
        return None
    return float(a.reshape(()))


def arithmetic(ctx: Any, name: str, fn: Callable[[Value, Any], Value], x: Any, y: Any
               ) -> Optional[Value]:
    """Add, Sub, Mul or Div of an f32 value and a scalar constant (the scalar an operand of
    the op, not a filled tensor; either side for Add and Mul), or Add of a row bias."""
    for a, b in ((x, y), (y, x)) if name in ("Add", "Mul") else ((x, y),):
        s = _scalar(b)
        if s is not None and _rows(a) and len(a.shape) >= np.ndim(b):
            return fn(a, s)
    if name == "Add":
        for a, b in ((x, y), (y, x)):
            if _rows(a) and _is_row_bias(a, b):
                bv = ctx.value(b)
                n = a.shape[-1]
                return _ops.bias_add(a, bv if tuple(bv.shape) == (n,) else lax.reshape(bv, [n]))
    return None


def _is_row_bias(a: Value, b: Any) -> bool:
    """Whether b is f32 and broadcasts to a as one row of a's last dimension ([n], [1, n],
    ...)."""
    if isinstance(b, Value):
        shape, dtype, whole = tuple(b.shape), b.dtype, b.split[-1] < 0 if b.shape else True
    else:
        shape, dtype, whole = np.shape(b), "f32" if np.asarray(b).dtype == np.float32 else "", True
    n = a.shape[-1]
    return (dtype == "f32" and whole and 1 <= len(shape) <= len(a.shape) and shape[-1] == n
            and n > 1 and all(d == 1 for d in shape[:-1]))
