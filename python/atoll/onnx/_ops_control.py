"""Control flow with shapes known at load: If (the branch a known condition picks; both
branches and a select where the condition is computed) and Scan (unrolled: its trip count is
a static dimension). Bodies are lowered inline, reading the enclosing graph's values."""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from .. import _atoll
from .. import lax
from ._ops import op


def lower_body(ctx, graph, inputs: List[Any], outer: Dict[str, Any]) -> List[Any]:
    env = dict(outer)
    from onnx import numpy_helper
    for t in graph.initializer:
        env[t.name] = numpy_helper.to_array(t)
    if len(inputs) != len(graph.input):
        raise ctx.refuse(f"body '{graph.name}' takes {len(graph.input)} inputs, given "
                         f"{len(inputs)}")
    for vi, v in zip(graph.input, inputs):
        env[vi.name] = v
    node, attrs = ctx.node, ctx.attrs
    try:
        ctx.lower_graph(graph.node, env)
    finally:
        ctx.node, ctx.attrs = node, attrs
    return [env[o.name] for o in graph.output]


@op("If", fold=False)
def _if(ctx, cond):
    then_g, else_g = ctx.attr("then_branch"), ctx.attr("else_branch")
    if not isinstance(cond, _atoll.Value):
        return lower_body(ctx, then_g if bool(np.asarray(cond).ravel()[0]) else else_g, [],
                          ctx.env)
    a = lower_body(ctx, then_g, [], ctx.env)
    b = lower_body(ctx, else_g, [], ctx.env)
    c = cond if not cond.shape else lax.reshape(cond, [])
    outs = []
    for x, y in zip(a, b):
        x, y = ctx.value(x), ctx.value(y)
        if tuple(x.shape) != tuple(y.shape) or x.dtype != y.dtype:
            raise ctx.refuse(f"branches give {x.dtype}{list(x.shape)} and {y.dtype}"
                             f"{list(y.shape)} on a condition computed at run time")
        outs.append(lax.select_n(lax.broadcast_in_dim(c, x.shape, []), y, x))
    return outs


@op("Scan", fold=False)
def _scan(ctx, *inputs):
    if ctx.opset < 9:
        raise ctx.refuse("Scan of opset 8 (sequence_lens, batch dimension) is not supported")
    body = ctx.attr("body")
    m = ctx.attr("num_scan_inputs")
    n = len(inputs) - m
    states = list(inputs[:n])
    xs = [ctx.value(x) for x in inputs[n:]]
    in_axes = list(ctx.attr("scan_input_axes", [0] * m))
    in_dirs = list(ctx.attr("scan_input_directions", [0] * m))
    k = len(body.output) - n
    out_axes = list(ctx.attr("scan_output_axes", [0] * k))
    out_dirs = list(ctx.attr("scan_output_directions", [0] * k))
    in_axes = [a % len(x.shape) for a, x in zip(in_axes, xs)]
    steps = {x.shape[a] for x, a in zip(xs, in_axes)}
    if len(steps) != 1:
        raise ctx.refuse(f"scan inputs of different lengths {sorted(steps)}")
    T = steps.pop()
    collected: List[List[Any]] = [[] for _ in range(k)]
    for t in range(T):
        sl = []
        for x, a, d in zip(xs, in_axes, in_dirs):
            i = T - 1 - t if d else t
            lo, hi = [0] * len(x.shape), list(x.shape)
            lo[a], hi[a] = i, i + 1
            piece = lax.slice(x, lo, hi)
            sl.append(lax.reshape(piece, [s for j, s in enumerate(x.shape) if j != a]))
        outs = lower_body(ctx, body, states + sl, ctx.env)
        states = outs[:n]
        for j in range(k):
            collected[j].append(ctx.value(outs[n + j]))
    results = list(states)
    for j in range(k):
        parts = collected[j][::-1] if out_dirs[j] else collected[j]
        rank = len(parts[0].shape) + 1
        a = out_axes[j] % rank
        expanded = [lax.reshape(p, list(p.shape[:a]) + [1] + list(p.shape[a:])) for p in parts]
        results.append(expanded[0] if len(expanded) == 1 else lax.concatenate(expanded, a))
    return results


@op("Loop", fold=False)
def _loop(ctx, trip=None, cond=None, *carried):
    """Unrolled where the trip count is known at load and the condition stays known (a
    body whose condition is computed at run time would need a loop in the function)."""
    body = ctx.attr("body")
    if trip is None:
        raise ctx.refuse("a loop without a trip count (M) is not supported")
    m = int(ctx.static(trip, "input 'M' (the trip count)").ravel()[0])
    go = True if cond is None else cond
    if isinstance(go, _atoll.Value):
        raise ctx.refuse("input 'cond' must be known at load")
    go = bool(np.asarray(go).ravel()[0])
    state = list(carried)
    n = len(state)
    k = len(body.output) - 1 - n
    collected: List[List[Any]] = [[] for _ in range(k)]
    i = 0
    while go and i < m:
        outs = lower_body(ctx, body, [np.array(i, np.int64), np.array(go)] + state, ctx.env)
        c = outs[0]
        if isinstance(c, _atoll.Value):
            raise ctx.refuse(f"the body's condition '{body.output[0].name}' is computed at run "
                             "time (a data-dependent loop)")
        go = bool(np.asarray(c).ravel()[0])
        state = outs[1:1 + n]
        for j in range(k):
            collected[j].append(outs[1 + n + j])
        i += 1
    results = list(state)
    for j in range(k):
        parts = collected[j]
        if not parts:
            raise ctx.refuse("a scan output of no iterations (size 0)")
        if all(not isinstance(p, _atoll.Value) for p in parts):
            results.append(np.stack([np.asarray(p) for p in parts]))
            continue
        vals = [ctx.value(p) for p in parts]
        vals = [lax.reshape(v, [1] + list(v.shape)) for v in vals]
        results.append(vals[0] if len(vals) == 1 else lax.concatenate(vals, 0))
    return results
