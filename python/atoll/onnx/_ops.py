"""The one table from an ONNX op type to its lowering: ``OPS[op_type](ctx, *inputs)``, each
input a traced Value, a numpy array known at load, or None (an omitted optional input); it
returns the node's outputs. The rows live in _ops_math.py, _ops_shape.py and _ops_nn.py.
FOLDABLE: op types evaluated at load (by onnx's reference implementation) when every input
is known at load."""

from __future__ import annotations

from typing import Any, Callable, Dict, Set

OPS: Dict[str, Callable[..., Any]] = {}
FOLDABLE: Set[str] = set()


def op(*names: str, fold: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for name in names:
            OPS[name] = fn
            if fold:
                FOLDABLE.add(name)
        return fn
    return register


# The modules that fill the table.
from . import (_ops_attention, _ops_control, _ops_loss, _ops_math, _ops_more,  # noqa: E402,F401
               _ops_nn, _ops_quant, _ops_resize, _ops_rnn, _ops_scatter, _ops_shape)
