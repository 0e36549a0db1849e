"""Shapes and data movement: Reshape, Transpose, Concat, Slice, Gather, Squeeze, Unsqueeze,
Flatten, Expand, Pad, Tile, Split, Shape, Size, Constant, ConstantOfShape, Range, ..."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from onnx import numpy_helper

from .. import lax
from .. import numpy as anp
from ._context import numpy_dtype
from ._ops import op
from ._util import Value, axis, scalar


def _shape(x):
    return [int(s) for s in x.shape]


@op("Shape")
def _shape_op(ctx, x):
    s = np.array(_shape(x), np.int64)
    start, end = ctx.attr("start", 0), ctx.attr("end", None)
    return s[start:end] if end is not None else s[start:]


@op("Size")
def _size(ctx, x):
    return np.array(int(np.prod(_shape(x))), np.int64)


@op("Constant")
def _constant(ctx):
    for name in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if name in ctx.attrs:
            v = ctx.attrs[name]
            if name == "value":
                return numpy_helper.to_array(v)
            return np.array(v, np.float32 if "float" in name else np.int64)
    raise ctx.refuse(f"attribute {sorted(ctx.attrs)} is not supported (sparse or string "
                     "constants)")


@op("ConstantOfShape")
def _constant_of_shape(ctx, shape):
    s = [int(d) for d in ctx.static(shape, "input 'input' (the shape)")]
    v = ctx.attr("value", None)
    fill = numpy_helper.to_array(v).ravel() if v is not None else np.zeros(1, np.float32)
    return np.full(s, fill[0], fill.dtype)


@op("EyeLike")
def _eye_like(ctx, x):
    from ._context import atoll_dtype_of_onnx, numpy_dtype, dtype_name
    to = ctx.attr("dtype", None)
    d = numpy_dtype(atoll_dtype_of_onnx(to, "attribute 'dtype'") if to else dtype_name(x))
    n, m = _shape(x)
    return np.eye(n, m, ctx.attr("k", 0), dtype=d)


@op("Range")
def _range(ctx, start, limit, delta):
    a, b, d = (ctx.static(v, "an input") for v in (start, limit, delta))
    return np.arange(a, b, d).astype(a.dtype)


@op("Reshape")
def _reshape(ctx, x, shape=None):
    target = ctx.attr("shape") if ctx.opset < 5 else ctx.static(shape, "input 'shape'")
    src = _shape(x)
    out = [int(d) for d in np.asarray(target).ravel()]
    if not ctx.attr("allowzero", 0):
        out = [src[i] if d == 0 else d for i, d in enumerate(out)]
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1]))
        out[out.index(-1)] = int(np.prod(src)) // max(known, 1)
    if int(np.prod(out)) != int(np.prod(src)):
        raise ctx.refuse(f"shape {out} does not hold the {int(np.prod(src))} elements of {src}")
    return lax.reshape(ctx.value(x), out)


@op("Transpose")
def _transpose(ctx, x):
    v = ctx.value(x)
    perm = ctx.attr("perm", None)
    perm = list(range(len(v.shape)))[::-1] if perm is None else list(perm)
    return lax.transpose(v, perm)


@op("Concat")
def _concat(ctx, *xs):
    vals = [ctx.value(x) for x in xs if int(np.prod(_shape(x))) > 0 or len(xs) == 1]
    a = axis(ctx.attr("axis", 0), len(vals[0].shape), ctx)
    return vals[0] if len(vals) == 1 else lax.concatenate(vals, a)


@op("Squeeze")
def _squeeze(ctx, x, axes=None):
    shape = _shape(x)
    ax = ctx.attr("axes") if ctx.opset < 13 else (
        None if axes is None else ctx.static(axes, "input 'axes'"))
    if ax is None:
        drop = {i for i, s in enumerate(shape) if s == 1}
    else:
        drop = {axis(int(a), len(shape), ctx) for a in np.asarray(ax).ravel()}
    return lax.reshape(ctx.value(x), [s for i, s in enumerate(shape) if i not in drop])


@op("Unsqueeze")
def _unsqueeze(ctx, x, axes=None):
    shape = _shape(x)
    ax = ctx.attr("axes") if ctx.opset < 13 else ctx.static(axes, "input 'axes'")
    rank = len(shape) + len(np.asarray(ax).ravel())
    out = list(shape)
    for a in sorted(axis(int(a), rank, ctx) for a in np.asarray(ax).ravel()):
        out.insert(a, 1)
    return lax.reshape(ctx.value(x), out)


@op("Flatten")
def _flatten(ctx, x):
    shape = _shape(x)
    a = ctx.attr("axis", 1)
    a = a + len(shape) if a < 0 else a
    return lax.reshape(ctx.value(x), [int(np.prod(shape[:a])), int(np.prod(shape[a:]))])


@op("Expand")
def _expand(ctx, x, shape):
    s = tuple(int(d) for d in ctx.static(shape, "input 'shape'"))
    v = ctx.value(x)
    out = anp._broadcast_shapes(tuple(v.shape), s)
    return anp.broadcast_to(v, out) if tuple(v.shape) != out else lax.reshape(v, list(out))


def _slice_axis(v, a, start, stop, step):
    n = v.shape[a]
    rank = len(v.shape)
    start, stop, step = slice(start, stop, step).indices(n)
    count = len(range(start, stop, step))
    if step < 0:
        v = lax.rev(v, [a])
        start, step = n - 1 - start, -step
    lo, hi, st = [0] * rank, list(v.shape), [1] * rank
    lo[a], hi[a], st[a] = start, start + (count - 1) * step + 1, step
    return v, lo, hi, st, count


@op("Slice")
def _slice(ctx, x, starts=None, ends=None, axes=None, steps=None):
    v = ctx.value(x)
    rank = len(v.shape)
    if ctx.opset < 10:
        st, en = ctx.attr("starts"), ctx.attr("ends")
        ax = ctx.attr("axes", list(range(len(st))))
        sp = [1] * len(st)
    else:
        st = ctx.static(starts, "input 'starts'").ravel().tolist()
        en = ctx.static(ends, "input 'ends'").ravel().tolist()
        ax = list(range(len(st))) if axes is None else \
            ctx.static(axes, "input 'axes'").ravel().tolist()
        sp = [1] * len(st) if steps is None else ctx.static(steps, "input 'steps'").ravel().tolist()
    for s, e, a, p in zip(st, en, ax, sp):
        a = axis(int(a), rank, ctx)
        big = 2 ** 62
        s, e = max(min(int(s), big), -big), max(min(int(e), big), -big)
        v, lo, hi, strides, count = _slice_axis(v, a, s, e, int(p))
        if count == 0:  # no elements: known at load
            shape = list(v.shape)
            shape[a] = 0
            return np.zeros(shape, numpy_dtype(v.dtype))
        v = lax.slice(v, lo, hi, strides)
    return v


def _norm_indices(ctx, idx, n):
    i = ctx.value(idx)
    if i.dtype not in ("i32", "i64"):
        i = lax.convert_element_type(i, "i64")
    return lax.select_n(lax.lt(i, scalar(i, 0)), i, lax.add(i, scalar(i, n)))


@op("Gather")
def _gather(ctx, x, indices):
    v = ctx.value(x)
    shape = _shape(v)
    a = axis(ctx.attr("axis", 0), len(shape), ctx)
    return _take(v, a, _norm_indices(ctx, indices, shape[a]))


@op("Compress")
def _compress(ctx, x, condition):
    """The condition decides the output's shape, so it must be known at load: a Gather of
    the positions it keeps."""
    keep = ctx.static(condition, "input 'condition' (it decides the output's shape)")
    v = ctx.value(x)
    if ctx.attr("axis") is None:  # over the flattened input
        v = lax.reshape(v, [int(np.prod(_shape(v)))])
    shape = _shape(v)
    a = axis(ctx.attr("axis", 0), len(shape), ctx)
    kept = np.nonzero(keep.astype(bool).ravel()[: shape[a]])[0]
    if kept.size == 0:  # no elements: known at load
        return np.zeros(shape[:a] + [0] + shape[a + 1:], numpy_dtype(v.dtype))
    return _take(v, a, ctx.value(kept.astype(np.int64)))


def _take(v, a, i):
    """v's entries at indices i (non-negative) along axis a, as numpy.take."""
    shape = _shape(v)
    ishape = list(i.shape)
    start = lax.reshape(i, ishape + [1])
    r, k = len(shape), len(ishape)
    dims = SimpleNamespace(offset_dims=tuple(range(a)) + tuple(range(a + k, r - 1 + k)),
                           collapsed_slice_dims=(a,), start_index_map=(a,))
    sizes = [1 if d == a else s for d, s in enumerate(shape)]
    return lax.gather(v, start, dims, sizes, mode="clip")


@op("GatherElements")
def _gather_elements(ctx, x, indices):
    v = ctx.value(x)
    shape = _shape(v)
    a = axis(ctx.attr("axis", 0), len(shape), ctx)
    i = _norm_indices(ctx, indices, shape[a])
    ishape = list(i.shape)
    cols = []
    for d in range(len(shape)):
        c = i if d == a else lax.broadcasted_iota(i.dtype, ishape, d)
        cols.append(lax.reshape(c, ishape + [1]))
    start = lax.concatenate(cols, len(ishape))
    dims = SimpleNamespace(offset_dims=(), collapsed_slice_dims=tuple(range(len(shape))),
                           start_index_map=tuple(range(len(shape))))
    return lax.gather(v, start, dims, [1] * len(shape), mode="clip")


@op("Tile")
def _tile(ctx, x, repeats):
    reps = [int(r) for r in ctx.static(repeats, "input 'repeats'")]
    v = ctx.value(x)
    shape = _shape(v)
    inter = []
    for r, s in zip(reps, shape):
        inter += [r, s]
    b = lax.broadcast_in_dim(v, inter, [2 * d + 1 for d in range(len(shape))])
    return lax.reshape(b, [r * s for r, s in zip(reps, shape)])


@op("Split")
def _split(ctx, x, split=None):
    v = ctx.value(x)
    shape = _shape(v)
    a = axis(ctx.attr("axis", 0), len(shape), ctx)
    n = len(ctx.node.output)
    if ctx.opset < 13:
        sizes = ctx.attr("split", None)
    else:
        sizes = None if split is None else ctx.static(split, "input 'split'").ravel().tolist()
    if sizes is None:
        parts = ctx.attr("num_outputs", n)
        each = -(-shape[a] // parts)
        sizes = [min(each, shape[a] - each * k) for k in range(parts)]
    outs, at = [], 0
    for s in sizes:
        lo, hi = [0] * len(shape), list(shape)
        lo[a], hi[a] = at, at + int(s)
        if int(s) <= 0:  # no elements: known at load
            empty = list(shape)
            empty[a] = 0
            outs.append(np.zeros(empty, numpy_dtype(v.dtype)))
        else:
            outs.append(lax.slice(v, lo, hi))
        at += int(s)
    return outs


def _pad_edges(v, a, lo, hi, mode):
    n = v.shape[a]
    rank = len(v.shape)

    def part(start, stop):
        s, e = [0] * rank, list(v.shape)
        s[a], e[a] = start, stop
        return lax.slice(v, s, e)
    pieces = []
    if mode == "edge":
        pieces = [part(0, 1)] * lo + [v] + [part(n - 1, n)] * hi
    elif mode == "reflect":
        pieces = ([lax.rev(part(1, lo + 1), [a])] if lo else []) + [v] + (
            [lax.rev(part(n - 1 - hi, n - 1), [a])] if hi else [])
    else:  # wrap
        pieces = ([part(n - lo, n)] if lo else []) + [v] + ([part(0, hi)] if hi else [])
    return lax.concatenate(pieces, a) if len(pieces) > 1 else v


@op("Pad")
def _pad(ctx, x, pads=None, value=None, axes=None):
    v = ctx.value(x)
    rank = len(v.shape)
    mode = ctx.attr("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if ctx.opset < 11:
        p = list(ctx.attr("pads", ctx.attr("paddings")))
        fill = ctx.attr("value", 0.0)
        ax = list(range(rank))
    else:
        p = ctx.static(pads, "input 'pads'").ravel().tolist()
        fill = 0 if value is None else value
        ax = list(range(rank)) if axes is None else [
            axis(int(a), rank, ctx) for a in ctx.static(axes, "input 'axes'").ravel()]
    k = len(ax)
    lo, hi = [0] * rank, [0] * rank
    for j, a in enumerate(ax):
        lo[a], hi[a] = int(p[j]), int(p[j + k])
    if mode == "constant":
        fv = ctx.value(fill) if isinstance(fill, Value) else None
        if fv is None:
            f = np.asarray(fill).ravel()
            fv = lax.full((), f[0].item() if f.size else 0, v.dtype)
        elif fv.shape:
            fv = lax.reshape(fv, [])
        return lax.pad(v, fv, [(lo[d], hi[d], 0) for d in range(rank)])
    if mode not in ("edge", "reflect", "wrap"):
        raise ctx.refuse(f"mode {mode!r} is not supported")
    if any(x < 0 for x in lo + hi):
        raise ctx.refuse(f"negative pads in mode {mode!r}")
    for a in range(rank):
        if lo[a] or hi[a]:
            v = _pad_edges(v, a, lo[a], hi[a], mode)
    return v


@op("Trilu")
def _trilu(ctx, x, k=None):
    v = ctx.value(x)
    kk = 0 if k is None else int(ctx.static(k, "input 'k'").ravel()[0])
    shape = _shape(v)
    r = len(shape)
    rows = lax.broadcasted_iota("i64", shape, r - 2)
    cols = lax.broadcasted_iota("i64", shape, r - 1)
    diff = lax.sub(cols, rows)
    bound = scalar(diff, kk)
    keep = lax.ge(diff, bound) if ctx.attr("upper", 1) else lax.le(diff, bound)
    return lax.select_n(keep, lax.full(shape, 0, v.dtype), v)


@op("DepthToSpace")
def _depth_to_space(ctx, x):
    v = ctx.value(x)
    n, c, h, w = _shape(v)
    b = ctx.attr("blocksize")
    mode = ctx.attr("mode", b"DCR")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode == "DCR":
        t = lax.transpose(lax.reshape(v, [n, b, b, c // (b * b), h, w]), [0, 3, 4, 1, 5, 2])
    else:
        t = lax.transpose(lax.reshape(v, [n, c // (b * b), b, b, h, w]), [0, 1, 4, 2, 5, 3])
    return lax.reshape(t, [n, c // (b * b), h * b, w * b])


@op("SpaceToDepth")
def _space_to_depth(ctx, x):
    v = ctx.value(x)
    n, c, h, w = _shape(v)
    b = ctx.attr("blocksize")
    mode = ctx.attr("mode", b"DCR")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    perm = [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4]
    t = lax.transpose(lax.reshape(v, [n, c, h // b, b, w // b, b]), perm)
    return lax.reshape(t, [n, c * b * b, h // b, w // b])


@op("Dropout")
def _dropout(ctx, x, ratio=None, training=None):
    if training is not None and bool(ctx.static(training, "input 'training_mode'").ravel()[0]):
        raise ctx.refuse("training_mode=True (random masks) is not supported: inference only")
    v = ctx.value(x)
    mask = lax.full(_shape(v), 1, "bool")
    return v, mask


def _known_at_load(ctx, *args):
    raise ctx.refuse("its inputs must be known at load (it is evaluated there, by onnx's "
                     "reference implementation)")


# Ops whose outputs are functions of shapes and attributes only: folded at load.
for _name in ("HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix"):
    op(_name)(_known_at_load)
