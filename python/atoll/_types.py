"""What the inputs of compiled functions and programs are: dtypes, shapes and shardings.

``atoll.f32[64, 32]`` is an f32 value of shape (64, 32), replicated on every device of its
slice; ``.split(0)`` cuts dimension 0 into equal blocks over the slice's devices, ``.axes(0,
1)`` cuts dimension 0 along mesh axis 0 and dimension 1 along mesh axis 1 (a 2-D mesh slice).
A dimension ``None`` is known only from the data (routed rows, ``ops.filter``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union

import ml_dtypes
import numpy as np

Dim = Optional[int]


@dataclass(frozen=True)
class Sharding:
    """How a value is laid over a slice's device mesh.

    ``axes[d]`` is the mesh axis dimension ``d`` is cut along, into equal contiguous blocks,
    or None where it is not cut; missing trailing dimensions are not cut. Mesh axes that no
    dimension is cut along hold replicas.
    """

    axes: Tuple[Optional[int], ...] = ()

    def __repr__(self) -> str:
        cut = [(d, a) for d, a in enumerate(self.axes) if a is not None]
        if not cut:
            return "atoll.replicated"
        if len(cut) == 1:
            dim, axis = cut[0]
            return f"atoll.split({dim})" if axis == 0 else f"atoll.split({dim}, axis={axis})"
        return "atoll.axes(" + ", ".join(repr(a) for a in self.axes) + ")"


replicated = Sharding()
"""Every device of the slice holds the whole value."""


def split(dim: int = 0, axis: int = 0) -> Sharding:
    """Dimension ``dim`` cut into equal blocks along mesh axis ``axis`` (on a 1-D slice, block
    i on device i)."""
    if dim < 0 or axis < 0:
        raise ValueError("split(dim, axis): both are >= 0")
    return Sharding((None,) * dim + (axis,))


def axes(*mesh_axes: Optional[int]) -> Sharding:
    """Per dimension, the mesh axis it is cut along (None: not cut):
    ``atoll.axes(0, 1)`` cuts rows along mesh axis 0 and columns along mesh axis 1."""
    return Sharding(tuple(mesh_axes))


@dataclass(frozen=True)
class TensorType:
    """A value's dtype, global shape and sharding: what a compiled function's input is."""

    dtype: "DType"
    shape: Tuple[Dim, ...]
    sharding: Sharding = replicated

    def sharded(self, sharding: Sharding) -> "TensorType":
        """The same type laid out as ``sharding``."""
        return TensorType(self.dtype, self.shape, sharding)

    def split(self, dim: int = 0, axis: int = 0) -> "TensorType":
        """Cut dimension ``dim`` along mesh axis ``axis`` (see atoll.split)."""
        return self.sharded(split(dim, axis))

    def replicated(self) -> "TensorType":
        """Whole on every device."""
        return self.sharded(replicated)

    def axes(self, *mesh_axes: Optional[int]) -> "TensorType":
        """Per dimension, the mesh axis it is cut along (see atoll.axes)."""
        return self.sharded(axes(*mesh_axes))

    def __repr__(self) -> str:
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        text = f"atoll.{self.dtype.name}[{dims}]"
        if self.sharding == replicated:
            return text
        return text + "." + repr(self.sharding)[len("atoll."):]


class DType:
    """An element type: ``atoll.f32``, ``atoll.bf16``, ... Index it with a shape for a
    TensorType: ``atoll.f32[64, 32]``, ``atoll.f32[()]`` for a scalar.

    ``numpy`` is the numpy dtype of its arrays: numpy's own, and for bf16
    ``ml_dtypes.bfloat16`` (the type JAX's bfloat16 arrays have), bit for bit.
    """

    def __init__(self, name: str, numpy_dtype: type) -> None:
        self.name = name
        self.numpy = np.dtype(numpy_dtype)

    def __getitem__(self, shape: Union[Dim, Tuple[Dim, ...]]) -> TensorType:
        dims = shape if isinstance(shape, tuple) else (shape,)
        for d in dims:
            if d is not None and (not isinstance(d, (int, np.integer)) or d < 0):
                raise ValueError(f"a dimension is an int >= 0 or None, got {d!r}")
        return TensorType(self, tuple(None if d is None else int(d) for d in dims))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"atoll.{self.name}"


f32 = DType("f32", np.float32)
"""32-bit floats (numpy.float32)."""
i32 = DType("i32", np.int32)
"""32-bit signed integers (numpy.int32)."""
bf16 = DType("bf16", ml_dtypes.bfloat16)
"""bfloat16, a storage format computed on in f32 (ml_dtypes.bfloat16 arrays)."""
f16 = DType("f16", np.float16)
"""IEEE half precision, a storage format computed on in f32 (numpy.float16)."""
f64 = DType("f64", np.float64)
"""64-bit floats (numpy.float64)."""
i64 = DType("i64", np.int64)
"""64-bit signed integers (numpy.int64)."""

bool_ = DType("bool", np.bool_)
"""Booleans (numpy.bool_): what comparisons give, what select_n picks with."""
i8 = DType("i8", np.int8)
"""8-bit signed integers (numpy.int8)."""
u8 = DType("u8", np.uint8)
"""8-bit unsigned integers (numpy.uint8)."""
u32 = DType("u32", np.uint32)
"""32-bit unsigned integers (numpy.uint32): random bits, bit casts of f32."""

_DTYPES = {d.name: d for d in (f32, i32, bf16, f16, f64, i64, bool_, i8, u8, u32)}


def dtype_named(name: str) -> DType:
    """The DType called ``name`` ("f32", "i32", "bf16", "f16", "f64", "i64", "bool", "i8",
    "u8" or "u32")."""
    return _DTYPES[name]


def dtype_of_numpy(dtype) -> DType:
    """The DType whose arrays have numpy dtype ``dtype``; ValueError for one atoll lacks."""
    dtype = np.dtype(dtype)
    for d in _DTYPES.values():
        if d.numpy == dtype:
            return d
    raise ValueError(f"atoll has no dtype for numpy's {dtype}")


def wire_shape(shape: Tuple[Dim, ...]) -> list:
    """``shape`` as the C++ API takes it: -1 for a dimension known only from the data."""
    return [-1 if d is None else d for d in shape]


def wire_axes(t: TensorType) -> list:
    """``t``'s sharding as the C++ API takes it: per dimension a mesh axis, -1 for none."""
    return [-1 if a is None else a for a in t.sharding.axes]
