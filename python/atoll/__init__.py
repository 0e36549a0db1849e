"""atoll: a Pathways-style runtime for islands of accelerators, from Python.

Connect to a cluster, get slices of devices, trace plain Python functions into compiled
functions and programs, and run them on numpy arrays::

    import numpy as np
    import atoll

    client = atoll.connect()                    # the cluster `atoll up` started
    s = client.slice(2)

    @atoll.function(s, atoll.f32[2])
    def double(x):
        return x * 2

    @atoll.program(atoll.f32[2])
    def f(v):
        return double(v)

    print(client.run(f, np.array([1, 2], np.float32)).result(timeout=10))  # [2. 4.]

Errors are exceptions, one class per status code (atoll.InvalidArgument, atoll.NotFound,
...), all subclasses of atoll.Error.
"""

from . import lax, ops
from ._atoll import __version__
from ._atoll import (Cancelled, DeadlineExceeded, Error, FailedPrecondition, Internal,
                     InvalidArgument, NotFound, OutOfMemory, PermissionDenied,
                     ResourceExhausted, Traced, Unavailable, Value)
from ._client import Client, Future, Run, Slice, connect
from ._tracing import Function, Program, function, grad, program, route, value_and_grad
from ._types import (DType, Sharding, TensorType, axes, bf16, bool_, f16, f32, f64, i8, i32, i64,
                     replicated, split, u8, u32)

__all__ = [
    "Cancelled", "Client", "DType", "DeadlineExceeded", "Error", "FailedPrecondition",
    "Function", "Future", "Internal", "InvalidArgument", "NotFound", "OutOfMemory",
    "PermissionDenied", "Program", "ResourceExhausted", "Run", "Sharding", "Slice",
    "TensorType", "Traced", "Unavailable", "Value", "axes", "bf16", "bool_", "connect", "f16", "f32",
    "f64", "function", "grad", "i8", "i32", "i64", "lax", "ops", "program", "replicated",
    "route", "split", "u8", "u32",
    "value_and_grad", "__version__",
]
