"""jax.lax's windowed primitives on traced atoll values: reduce_window (sum, max, min: the
pooling layers), select_and_scatter_add (max pooling's gradient), conv_general_dilated, and
reduce_precision, with jax.lax's signatures ('SAME' and 'VALID' padding, dimension numbers
as strings or tuples)."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from . import _atoll

Value = _atoll.Value
_ops = _atoll.ops

__all__ = ["conv_general_dilated", "reduce_precision", "reduce_window", "reduce_window_max",
           "reduce_window_min", "reduce_window_sum", "select_and_scatter_add"]


def _prim(name: str, *operands: Value, params: Sequence[int] = (), attr: float = 0.0) -> Value:
    return _ops.primitive(name, list(operands), [int(p) for p in params], float(attr))


def _ones(values: Optional[Sequence[int]], n: int) -> List[int]:
    return [1] * n if values is None else [int(v) for v in values]


def _pads(padding: Any, sizes: Sequence[int], windows: Sequence[int],
          strides: Sequence[int]) -> List[Tuple[int, int]]:
    """Padding pairs from jax's forms: 'VALID', 'SAME' (SAME_LOWER) or (low, high) pairs, for
    inputs of ``sizes`` under windows of ``windows`` (dilated) and ``strides``."""
    if isinstance(padding, str):
        kind = padding.upper()
        if kind == "VALID":
            return [(0, 0)] * len(sizes)
        if kind in ("SAME", "SAME_LOWER"):
            pads = []
            for size, window, stride in zip(sizes, windows, strides):
                out = -(-size // stride)
                total = max((out - 1) * stride + window - size, 0)
                low = total // 2 if kind == "SAME" else -(-total // 2)
                pads.append((low, total - low))
            return pads
        raise _atoll.InvalidArgument(f"padding '{padding}': expected 'SAME', 'SAME_LOWER', "
                                     "'VALID' or (low, high) pairs")
    return [(int(lo), int(hi)) for lo, hi in padding]


def _window_params(x: Value, window_dimensions: Sequence[int], window_strides: Sequence[int],
                   padding: Any, base_dilation: Optional[Sequence[int]],
                   window_dilation: Optional[Sequence[int]]) -> List[int]:
    n = len(x.shape)
    base = _ones(base_dilation, n)
    wdil = _ones(window_dilation, n)
    # As jax: 'SAME' is reckoned on the operand's own sizes and the dilated windows.
    dilated_w = [(w - 1) * d + 1 for w, d in zip(window_dimensions, wdil)]
    pads = _pads(padding, list(x.shape), dilated_w, window_strides)
    return ([int(w) for w in window_dimensions] + [int(s) for s in window_strides] +
            [lo for lo, _ in pads] + [hi for _, hi in pads] + base + wdil)


def _reduce_window_of(name: str) -> Any:
    def reduce(operand: Value, window_dimensions: Sequence[int], window_strides: Sequence[int],
               padding: Any, base_dilation: Optional[Sequence[int]] = None,
               window_dilation: Optional[Sequence[int]] = None) -> Value:
        return _prim(name, operand, params=_window_params(
            operand, window_dimensions, window_strides, padding, base_dilation, window_dilation))
    reduce.__name__ = name
    reduce.__doc__ = (f"The IR's {name}: jax.lax.reduce_window with its reduction, padded with "
                      "the reduction's identity.")
    return reduce


reduce_window_sum = _reduce_window_of("reduce_window_sum")
reduce_window_max = _reduce_window_of("reduce_window_max")
reduce_window_min = _reduce_window_of("reduce_window_min")


def reduce_window(operand: Value, init_value: Any, computation: Any,
                  window_dimensions: Sequence[int], window_strides: Sequence[int], padding: Any,
                  base_dilation: Optional[Sequence[int]] = None,
                  window_dilation: Optional[Sequence[int]] = None) -> Value:
    """jax.lax.reduce_window with computation atoll.lax.add, max or min (or jax.lax's), whose
    identity init_value must be (0, -inf or the lowest integer, +inf or the highest)."""
    name = getattr(computation, "__name__", str(computation))
    kinds = {"add": reduce_window_sum, "max": reduce_window_max, "min": reduce_window_min}
    if name not in kinds:
        raise _atoll.InvalidArgument(
            f"reduce_window: computation {name} is not add, max or min, the reductions atoll "
            "has")
    del init_value  # the reduction's identity, which the primitive pads with
    return kinds[name](operand, window_dimensions, window_strides, padding, base_dilation,
                       window_dilation)


def select_and_scatter_add(source: Value, operand: Value, select_prim: Any,
                           window_dimensions: Sequence[int], window_strides: Sequence[int],
                           padding: Any) -> Value:
    """jax's _select_and_scatter_add: max pooling's gradient (select_prim ge; le: min
    pooling's)."""
    select = getattr(select_prim, "name", select_prim)
    if select not in ("ge", "le"):
        raise _atoll.InvalidArgument(f"select_and_scatter_add: select {select} is not ge or le")
    params = _window_params(operand, window_dimensions, window_strides, padding, None, None)
    n = len(operand.shape)
    return _prim("select_and_scatter_add", source, operand,
                 params=params[:4 * n] + [0 if select == "ge" else 1])


def _specs(dimension_numbers: Any, rank: int) -> Tuple[List[int], List[int], List[int]]:
    """(lhs, rhs, out) dimension numbers from jax's forms: None (NC..., OI..., NC...),
    ConvDimensionNumbers or a tuple of three tuples, or three strings ('NHWC', 'HWIO',
    'NHWC')."""
    if dimension_numbers is None:
        default = list(range(rank))
        return default, default, default
    lhs, rhs, out = dimension_numbers
    if isinstance(lhs, str):
        spatial = [c for c in rhs if c not in "OI"]
        return ([lhs.index("N"), lhs.index("C")] + [lhs.index(c) for c in spatial],
                [rhs.index("O"), rhs.index("I")] + [rhs.index(c) for c in spatial],
                [out.index("N"), out.index("C")] + [out.index(c) for c in spatial])
    return [int(d) for d in lhs], [int(d) for d in rhs], [int(d) for d in out]


def conv_general_dilated(lhs: Value, rhs: Value, window_strides: Sequence[int], padding: Any,
                         lhs_dilation: Optional[Sequence[int]] = None,
                         rhs_dilation: Optional[Sequence[int]] = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1,
                         batch_group_count: int = 1, precision: Any = None,
                         preferred_element_type: Any = None) -> Value:
    """jax.lax.conv_general_dilated (``precision`` is accepted and ignored: products are
    summed in f64)."""
    from .lax import _dtype_code

    del precision
    rank = len(lhs.shape)
    n = rank - 2
    lhs_spec, rhs_spec, out_spec = _specs(dimension_numbers, rank)
    ldil = _ones(lhs_dilation, n)
    rdil = _ones(rhs_dilation, n)
    sizes = [lhs.shape[d] for d in lhs_spec[2:]]
    windows = [(rhs.shape[d] - 1) * r + 1 for d, r in zip(rhs_spec[2:], rdil)]
    pads = _pads(padding, sizes, windows, window_strides)
    params = ([n] + [int(s) for s in window_strides] + [lo for lo, _ in pads] +
              [hi for _, hi in pads] + ldil + rdil + lhs_spec + rhs_spec + out_spec +
              [int(feature_group_count), int(batch_group_count)])
    attr = -1 if preferred_element_type is None else _dtype_code(preferred_element_type)
    return _prim("conv_general_dilated", lhs, rhs, params=params, attr=attr)


def reduce_precision(operand: Value, exponent_bits: int, mantissa_bits: int) -> Value:
    return _prim("reduce_precision", operand, params=[int(exponent_bits), int(mantissa_bits)])
