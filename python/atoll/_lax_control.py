"""jax.lax's control flow on traced atoll values: while_loop, fori_loop, scan, cond and
switch. Each traces its Python functions once into bodies of the function being traced (the
IR's while, scan and cond rows run them on the device, inside one computation); a value of
the enclosing function that a body uses becomes one of its inputs (a const), as jax closes
over values. Carried values, xs and results are pytrees of tuples, lists, dicts and None.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

from . import _atoll
from ._tracing import tracing_function

Value = _atoll.Value
_ops = _atoll.ops

__all__ = ["cond", "fori_loop", "scan", "switch", "while_loop"]


def _flatten(tree: Any, what: str) -> Tuple[List[Value], Any]:
    """The values of a pytree, left to right (dict keys sorted, as jax.tree_util), and its
    structure."""
    leaves: List[Value] = []

    def build(t: Any) -> Any:
        if isinstance(t, Value):
            leaves.append(t)
            return None
        if isinstance(t, (tuple, list)):
            return (type(t), [build(x) for x in t])
        if isinstance(t, dict):
            keys = sorted(t)
            return (dict, keys, [build(t[k]) for k in keys])
        if t is None:
            return (type(None),)
        raise TypeError(f"{what}: {type(t).__name__} is not a traced value, tuple, list, dict "
                        "or None")

    return leaves, build(tree)


def _unflatten(spec: Any, leaves: Sequence[Value]) -> Any:
    it = iter(leaves)

    def build(s: Any) -> Any:
        if s is None:
            return next(it)
        if s[0] is dict:
            return {k: build(v) for k, v in zip(s[1], s[2])}
        if s[0] is type(None):
            return None
        return s[0](build(x) for x in s[1])

    return build(spec)


def _innermost(values: List[Value]) -> Value:
    """A value of the innermost function among those of `values` and the one being traced
    now (a loop called inside another loop's body runs in that body, whatever its operands):
    bodies taking these values are traced inside it, outer values lifted in as consts."""
    current = tracing_function.get()
    candidates = list(values) + ([current] if current is not None else [])
    return candidates[_atoll.innermost(candidates)]


def _type_of(v: Value) -> Tuple[str, List[int], List[int]]:
    return (v.dtype, list(v.shape), list(v.split))


def _trace_body(name: str, fn: Callable[..., Any], types: Sequence[Tuple[str, List[int], List[int]]],
                inside: Value) -> Tuple[_atoll.FunctionBuilder, Any]:
    """``fn`` traced as a body of the function ``inside`` belongs to, on inputs of ``types``:
    the builder, and what fn returned (values of the body)."""
    body = _atoll.FunctionBuilder(name, inside)
    inputs = [body.input(dtype, shape, axes) for dtype, shape, axes in types]
    token = tracing_function.set(inputs[0] if inputs else inside)
    try:
        result = fn(*inputs)
    finally:
        tracing_function.reset(token)
    return body, result


def _outputs(body: _atoll.FunctionBuilder, result: Any, what: str) -> Tuple[List[Value], Any]:
    leaves, spec = _flatten(result, what)
    for v in leaves:
        body.output(v)
    return leaves, spec


def while_loop(cond_fun: Callable[[Any], Value], body_fun: Callable[[Any], Any],
               init_val: Any) -> Any:
    """jax.lax.while_loop: ``body_fun`` applied to the carry while ``cond_fun`` gives true (a
    bool[]); the carry's types may not change. The trip count may depend on the data."""
    carry, spec = _flatten(init_val, "while_loop's init_val")
    if not carry:
        raise _atoll.InvalidArgument("while_loop: init_val holds no traced value")
    types = [_type_of(v) for v in carry]
    inside = _innermost(carry)
    cond_b, pred = _trace_body("cond", lambda *c: cond_fun(_unflatten(spec, c)), types, inside)
    _outputs(cond_b, pred, "while_loop's cond_fun")
    body_b, new = _trace_body("body", lambda *c: body_fun(_unflatten(spec, c)), types, inside)
    _, new_spec = _outputs(body_b, new, "while_loop's body_fun")
    if new_spec != spec:
        raise TypeError("while_loop: body_fun must return the carry's structure")
    operands = carry + list(cond_b.captured) + list(body_b.captured)
    results = _ops.structured("while", [cond_b, body_b], operands,
                              [len(cond_b.captured), len(body_b.captured)])
    return _unflatten(spec, results)


def fori_loop(lower: int, upper: int, body_fun: Callable[[Value, Any], Any], init_val: Any) -> Any:
    """jax.lax.fori_loop with whole-number bounds: ``body_fun(i, carry)`` for i from lower to
    upper - 1, over an i32 counter. As jax does for bounds known while tracing, it is a scan
    of upper - lower steps (so reverse-mode differentiation goes through it, where a
    while_loop's cannot)."""
    from .lax import full  # the module that re-exports this one

    carry, _ = _flatten(init_val, "fori_loop's init_val")
    if not carry:
        raise _atoll.InvalidArgument("fori_loop: init_val holds no traced value")
    token = tracing_function.set(_innermost(carry))
    try:
        start = full((), int(lower), "i32")
    finally:
        tracing_function.reset(token)
    (_, out), _ = scan(lambda c, _x: ((c[0] + 1, body_fun(c[0], c[1])), None), (start, init_val),
                       None, length=max(int(upper) - int(lower), 0))
    return out


def scan(f: Callable[[Any, Any], Tuple[Any, Any]], init: Any, xs: Any = None,
         length: Optional[int] = None, reverse: bool = False, unroll: int = 1) -> Tuple[Any, Any]:
    """jax.lax.scan: ``(carry, y) = f(carry, x)`` for each row x of xs along dimension 0 (from
    the last with ``reverse``); returns the last carry and the ys stacked along a new
    dimension 0. ``unroll`` is accepted and ignored (the loop runs on the device)."""
    del unroll
    carry, carry_spec = _flatten(init, "scan's init")
    x_leaves, x_spec = _flatten(xs, "scan's xs")
    lengths = {v.shape[0] if v.shape else None for v in x_leaves}
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1 or None in lengths:
        raise _atoll.InvalidArgument(
            f"scan: the xs must share their length along dimension 0 (and match length=), got "
            f"{sorted(str(n) for n in lengths) or 'no xs and no length'}")
    n = lengths.pop()
    if not carry + x_leaves:
        raise _atoll.InvalidArgument("scan: init and xs hold no traced value")
    types = [_type_of(v) for v in carry]
    for v in x_leaves:
        dtype, shape, axes = _type_of(v)
        types.append((dtype, shape[1:], axes[1:]))
    y_spec: List[Any] = []

    def body(*ins: Value) -> Any:
        c = _unflatten(carry_spec, ins[:len(carry)])
        x = _unflatten(x_spec, ins[len(carry):])
        new_c, y = f(c, x)
        return new_c, y

    body_b, (new_c, y) = _trace_body("scan_body", body, types, _innermost(carry + x_leaves))
    _, new_spec = _outputs(body_b, new_c, "scan's f (its carry)")
    if new_spec != carry_spec:
        raise TypeError("scan: f must return the carry's structure first")
    _, y_struct = _outputs(body_b, y, "scan's f (its y)")
    y_spec.append(y_struct)
    operands = carry + x_leaves + list(body_b.captured)
    results = _ops.structured("scan", [body_b], operands,
                              [len(carry), len(body_b.captured), n, int(bool(reverse))])
    return (_unflatten(carry_spec, results[:len(carry)]),
            _unflatten(y_spec[0], results[len(carry):]))


def _branches(index: Value, branches: Sequence[Callable[..., Any]], operands: Sequence[Any]) -> Any:
    args, spec = _flatten(tuple(operands), "cond's operands")
    types = [_type_of(v) for v in args]
    built = []
    out_spec: Any = None
    for b, fn in enumerate(branches):
        body, result = _trace_body(f"branch{b}", lambda *a, fn=fn: fn(*_unflatten(spec, a)), types,
                                   _innermost([index] + args))
        _, s = _outputs(body, result, f"branch {b}")
        if b > 0 and s != out_spec:
            raise TypeError(f"cond: branch {b} returns another structure than branch 0")
        out_spec = s
        built.append(body)
    consts = [v for body in built for v in body.captured]
    results = _ops.structured("cond", built, [index] + args + consts,
                              [len(body.captured) for body in built])
    return _unflatten(out_spec, results)


def cond(pred: Value, true_fun: Callable[..., Any], false_fun: Callable[..., Any],
         *operands: Any) -> Any:
    """jax.lax.cond: ``true_fun(*operands)`` where the bool[] ``pred`` holds, else
    ``false_fun(*operands)``; both return the same types."""
    return _branches(pred, [false_fun, true_fun], operands)


def switch(index: Value, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """jax.lax.switch: ``branches[index](*operands)``, the i32[] index clamped into range."""
    from .lax import clamp, full

    if not branches:
        raise _atoll.InvalidArgument("switch: no branches")
    token = tracing_function.set(index)
    try:
        clamped = clamp(full((), 0, "i32"), index, full((), len(branches) - 1, "i32"))
    finally:
        tracing_function.reset(token)
    return _branches(clamped, list(branches), operands)
