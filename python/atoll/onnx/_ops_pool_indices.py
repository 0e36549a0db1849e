"""MaxPool's Indices output: each window's elements gathered by a table worked out at load
(the flat spatial index of every window element, padding pointing at a -inf column), the max
over them and the table's entry at the first max, as onnx's reference numbers the input:
row-major (storage_order 0) or column-major (1) over the spatial dimensions, after the
batch and channel."""

from __future__ import annotations

import itertools

import numpy as np

from .. import lax
from ._ops_shape import _take
from ._util import in_float


def _window_table(spatial, out, kernel, strides, dil, pads):
    """[outputs, window] flat spatial indices (row-major), -1 where the window is padding."""
    table = np.full((int(np.prod(out)), int(np.prod(kernel))), -1, np.int64)
    for o, pos in enumerate(itertools.product(*[range(n) for n in out])):
        for k, off in enumerate(itertools.product(*[range(n) for n in kernel])):
            c = [p * st - lo + w * d for p, st, (lo, _), w, d in zip(pos, strides, pads, off, dil)]
            if all(0 <= ci < n for ci, n in zip(c, spatial)):
                table[o, k] = int(np.ravel_multi_index(c, spatial))
    return table


def max_pool_with_indices(ctx, v, kernel, strides, dil, pads):
    shape = [int(d) for d in v.shape]
    spatial = shape[2:]
    out = [(s + lo + hi - ((k - 1) * d + 1)) // st + 1
           for s, (lo, hi), k, d, st in zip(spatial, pads, kernel, dil, strides)]
    table = _window_table(spatial, out, kernel, strides, dil, pads)
    size = int(np.prod(spatial))
    n, c = shape[0], shape[1]

    def values(a):
        flat = lax.reshape(a, [n, c, size])
        lowest = lax.full([n, c, 1], -np.inf, a.dtype)
        padded = lax.concatenate([flat, lowest], 2)
        return _take(padded, 2, ctx.value(np.where(table < 0, size, table)))  # [n, c, O, K]
    windows = in_float(values, v)
    y = lax.reduce_max(windows, [3])
    first = lax.argmax(windows, 3, "i64")  # [n, c, O]: the first max of each window
    if ctx.attr("storage_order", 0):  # column-major over the spatial dimensions
        coords = np.unravel_index(np.maximum(table, 0), spatial)
        table = np.where(table < 0, 0, np.ravel_multi_index(coords, spatial, order="F"))
    at = lax.broadcast_in_dim(first, [n, c, len(table), table.shape[1]], [0, 1, 2])
    chosen = lax.eq(at, lax.broadcasted_iota("i64", [n, c, len(table), table.shape[1]], 3))
    entries = lax.broadcast_in_dim(ctx.value(table), [n, c, *table.shape], [2, 3])
    # The chosen entry (>= 0) is the max of the row once the others are zeroed.
    index = lax.reduce_max(lax.select_n(chosen, lax.full(entries.shape, 0, "i64"), entries), [3])
    base = (np.arange(n * c, dtype=np.int64) * size).reshape(n, c, 1)
    index = lax.add(index, lax.broadcast_in_dim(ctx.value(base), [n, c, len(table)], [0, 1, 2]))
    return lax.reshape(y, [n, c, *out]), lax.reshape(index, [n, c, *out])
