"""Tracing plain Python functions: compiled functions (``@atoll.function``) over symbolic
Values, and programs (``@atoll.program``) whose calls of compiled functions become one
dataflow graph. A function is traced once, when it is decorated: Python control flow runs at
trace time and cannot depend on the values.
"""

from __future__ import annotations

import contextvars
import functools
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Tuple, Union

from . import _atoll
from ._types import TensorType, wire_axes, wire_shape

if TYPE_CHECKING:
    from ._client import Slice

Traced = _atoll.Traced
Value = _atoll.Value

# The program being traced on this thread (or task), which calls of compiled functions join.
_tracing: contextvars.ContextVar[Optional[_atoll.ProgramBuilder]] = contextvars.ContextVar(
    "atoll_tracing", default=None)
# A value of the function being traced on this thread, for the primitives that take no
# operand (atoll.lax.iota) to know which function they belong to.
tracing_function: contextvars.ContextVar[Optional[_atoll.Value]] = contextvars.ContextVar(
    "atoll_tracing_function", default=None)


def _check_types(types: Sequence[Any], what: str) -> Tuple[TensorType, ...]:
    for i, t in enumerate(types):
        if not isinstance(t, TensorType):
            raise TypeError(f"{what} {i}: expected a type such as atoll.f32[2, 3], got {t!r}")
    return tuple(types)


def _outputs(result: Any, kind: type, what: str) -> Tuple[Tuple[Any, ...], bool]:
    """The values a traced function returned, and whether it returned a tuple."""
    as_tuple = isinstance(result, (tuple, list))
    values = tuple(result) if as_tuple else (result,)
    if not values:
        raise _atoll.InvalidArgument(f"{what} returns nothing")
    for i, v in enumerate(values):
        if not isinstance(v, kind):
            raise TypeError(f"{what} returns {type(v).__name__} as result {i}: it must return "
                            f"{kind.__name__}s it computed from its arguments")
    return values, as_tuple


class Function:
    """A Python function traced into a compiled function and registered on a slice.

    Call it on Traced values inside an ``@atoll.program`` function (it returns one Traced, or
    a tuple when the function returned one); run it alone with ``client.run(fn, *args)``.
    """

    def __init__(self, compiled: _atoll.CompiledFunction, slice: "Slice",
                 inputs: Tuple[TensorType, ...], num_outputs: int, returns_tuple: bool) -> None:
        self._compiled = compiled
        self.slice = slice
        self.inputs = inputs
        self.num_outputs = num_outputs
        self._returns_tuple = returns_tuple
        self._program: Optional[Program] = None

    @property
    def name(self) -> str:
        return self._compiled.name

    def __call__(self, *args: Traced) -> Union[Traced, Tuple[Traced, ...]]:
        builder = _tracing.get()
        if builder is None:
            raise TypeError(f"function '{self.name}' is called outside a program: call it "
                            "inside an @atoll.program function, or run it alone with "
                            "client.run(function, *arrays)")
        results = builder.call(self._compiled, list(args))
        return tuple(results) if self._returns_tuple else results[0]

    def as_program(self) -> "Program":
        """The program of one call of this function, taking its inputs as arguments."""
        if self._program is None:
            self._program = trace_program(self, self.inputs, self.name)
        return self._program

    def __repr__(self) -> str:
        return f"<atoll.Function '{self.name}' on slice {self.slice.id}>"


def trace_function(fn: Callable[..., Any], inputs: Sequence[TensorType],
                   name: Optional[str]) -> Tuple[_atoll.FunctionBuilder, int, bool]:
    """Runs ``fn`` on symbolic inputs of ``inputs``' types: the builder that recorded it, its
    number of outputs and whether it returned a tuple."""
    types = _check_types(inputs, "input")
    builder = _atoll.FunctionBuilder(name or getattr(fn, "__name__", "function"))
    values = [builder.input(t.dtype.name, wire_shape(t.shape), wire_axes(t)) for t in types]
    token = tracing_function.set(values[0] if values else None)
    try:
        result = fn(*values)
    finally:
        tracing_function.reset(token)
    outputs, as_tuple = _outputs(result, _atoll.Value, f"function '{builder.name}'")
    for v in outputs:
        builder.output(v)
    return builder, len(outputs), as_tuple


def function(slice: "Slice", *inputs: TensorType,
             name: Optional[str] = None) -> Callable[[Callable[..., Any]], Function]:
    """Decorator: traces the function on symbolic values of the ``inputs`` types and
    registers it on ``slice`` (on the slice's client)::

        @atoll.function(slice, atoll.f32[64, 32].split(0), atoll.f32[32, 8])
        def layer(x, w):
            return atoll.ops.gelu(x @ w)

    Errors: an op that does not fit its operands raises atoll.InvalidArgument naming the
    function and the op, at the line that made it; registering raises what the RM says.
    """
    return slice.client.function(slice, *inputs, name=name)


class Program:
    """A traced program: calls of compiled functions as one dataflow graph, run with
    ``client.run(program, *args)``."""

    def __init__(self, compiled: _atoll.Program, args: Tuple[TensorType, ...],
                 returns_tuple: bool, name: str) -> None:
        self._compiled = compiled
        self.args = args
        self._returns_tuple = returns_tuple
        self.name = name

    @property
    def num_nodes(self) -> int:
        """How many computations (calls) it has."""
        return self._compiled.num_nodes

    @property
    def num_results(self) -> int:
        return self._compiled.num_results

    def __repr__(self) -> str:
        return (f"<atoll.Program '{self.name}': {len(self.args)} args, {self.num_nodes} calls, "
                f"{self.num_results} results>")


def trace_program(fn: Callable[..., Any], args: Sequence[TensorType], name: str) -> Program:
    """Runs ``fn`` on Traced arguments of ``args``' types (their shardings do not matter:
    each call lays its inputs out as its function says) and builds the program."""
    types = _check_types(args, "argument")
    builder = _atoll.ProgramBuilder()
    values = [builder.arg(t.dtype.name, wire_shape(t.shape)) for t in types]
    token = _tracing.set(builder)
    try:
        result = fn(*values)
    finally:
        _tracing.reset(token)
    outputs, as_tuple = _outputs(result, _atoll.Traced, f"program '{name}'")
    return Program(builder.build(list(outputs)), types, as_tuple, name)


def program(*args: TensorType) -> Callable[[Callable[..., Any]], Program]:
    """Decorator: traces a function that calls compiled functions into one program::

        @atoll.program(atoll.f32[2])
        def f(v):
            x = a(v)
            return b(v), a(c(x))

    Nothing runs while tracing. Errors (a call whose arguments do not fit the function)
    raise atoll.InvalidArgument at the call."""

    def decorate(fn: Callable[..., Any]) -> Program:
        return trace_program(fn, args, getattr(fn, "__name__", "program"))

    return decorate


def route(values: Traced, destinations: Traced) -> Traced:
    """Inside a program: row i of ``values`` goes only to shard ``destinations[i]`` of the call
    that takes the result (mixture-of-experts routing). Both are outputs of one call,
    ``destinations`` i32 [n] for ``values`` [n, ...]; the consumer's input is
    ``f32[None, ...].split(0)``: each shard gets the rows sent to it, possibly none."""
    builder = _tracing.get()
    if builder is None:
        raise TypeError("atoll.route is called outside a program: call it inside an "
                        "@atoll.program function")
    return builder.route(values, destinations)


def _differentiated(fun: Callable[..., Any], argnums: Union[int, Sequence[int]],
                    keep_value: bool) -> Callable[..., Any]:
    nums = [argnums] if isinstance(argnums, int) else list(argnums)

    @functools.wraps(fun)
    def inside(*values: Value) -> Any:
        # fun is traced into a function of its own: primitives of no operand (full, iota)
        # belong there.
        token = tracing_function.set(values[0] if values else None)
        try:
            return fun(*values)
        finally:
            tracing_function.reset(token)

    @functools.wraps(fun)
    def differentiated(*args: Value) -> Any:
        outputs = _atoll.differentiate(inside, [n + len(args) if n < 0 else n for n in nums],
                                       list(args), keep_value)
        grads = outputs[1:] if keep_value else outputs
        g = grads[0] if isinstance(argnums, int) else tuple(grads)
        return (outputs[0], g) if keep_value else g

    return differentiated


def grad(fun: Callable[..., Any], argnums: Union[int, Sequence[int]] = 0) -> Callable[..., Any]:
    """The gradient of ``fun``, as jax.grad: a function of the same arguments, called on the
    values of a function being traced, that returns the gradient of fun's one float [] result
    with respect to argument ``argnums`` (a tuple of them for a tuple of indices), each with
    its argument's type and sharding::

        @atoll.function(s, atoll.f32[64, 16].split(0), atoll.i32[64].split(0), atoll.f32[16, 4])
        def step(x, labels, w):
            def loss(x, labels, w):
                return ops.all_reduce_sum(ops.cross_entropy(x @ w, labels)[0])
            return ops.sgd_update(w, atoll.grad(loss, argnums=2)(x, labels, w), 0.1)

    fun is traced into a function of its own, differentiated (include/atoll/grad.h: where
    the gradient of a replicated value sums over split rows, the all_reduce_sum is added),
    and inlined. Errors (an op that is not differentiable, an integer argument, a result
    that is not f32 []) raise atoll.InvalidArgument naming them."""
    return _differentiated(fun, argnums, keep_value=False)


def value_and_grad(fun: Callable[..., Any],
                   argnums: Union[int, Sequence[int]] = 0) -> Callable[..., Any]:
    """As atoll.grad, returning ``(value, gradient)``: fun's result, then its gradient
    (jax.value_and_grad)."""
    return _differentiated(fun, argnums, keep_value=True)
