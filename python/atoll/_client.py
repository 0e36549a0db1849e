"""Connecting to a cluster, slices, running programs on numpy arrays, results and futures."""

from __future__ import annotations

import atexit
import os
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _atoll
from ._tracing import Function, Program, trace_function
from ._types import DType, Sharding, TensorType, dtype_named

Array = np.ndarray
Results = Union[np.ndarray, Tuple[np.ndarray, ...]]

_open_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()


@atexit.register
def _close_open_clients() -> None:
    # Says goodbye for the clients still open, while the interpreter is whole.
    for client in list(_open_clients):
        client.close()


def connect(endpoint: Optional[str] = None, *, state_dir: Optional[str] = None,
            keys: Optional[str] = None, key: Optional[str] = None, name: str = "python",
            timeout: float = 10.0, weight: float = 1.0) -> "Client":
    """Connects to a cluster, found as the ``atoll`` command finds it.

    endpoint: the RM's endpoint ("tcp://host:5550"); else $ATOLL_RM; else the RM that the
        state dir records (the cluster ``atoll up`` started).
    state_dir: where ``atoll up`` records its cluster; else $ATOLL_HOME, else ~/.atoll.
    keys: the CURVE keys directory, or "plain"; else $ATOLL_KEYS, else <state dir>/keys when
        the cluster made its keys there, else plain text.
    key: which client key of that directory; else $ATOLL_CLIENT_KEY, else "default".
    name: this client's name in the cluster's events and views.
    timeout: seconds each request to a service may take (not waits for results).
    weight: this client's share of devices under proportional-share scheduling.

    Raises atoll.Unavailable when no cluster runs, atoll.PermissionDenied when the cluster
    refuses the key.
    """
    endpoint = endpoint or os.environ.get("ATOLL_RM", "")
    keys = keys or os.environ.get("ATOLL_KEYS", "")
    rm, keys_dir = _atoll.find_cluster(state_dir or "", endpoint, keys)
    return Client(_atoll.connect(rm, keys_dir, key or "", name, timeout, weight), rm)


class Slice:
    """Devices the RM mapped for a client, all on one island, seen as a mesh (row-major;
    1-D unless made by Client.mesh)."""

    def __init__(self, client: "Client", slice: _atoll.Slice) -> None:
        self.client = client
        self._slice = slice

    @property
    def id(self) -> int:
        return self._slice.id

    @property
    def island(self) -> str:
        return self._slice.island

    @property
    def num_devices(self) -> int:
        return self._slice.num_devices

    @property
    def mesh(self) -> Tuple[int, ...]:
        return self._slice.mesh

    def __repr__(self) -> str:
        return f"<atoll.Slice {self.id}: mesh {self.mesh} on {self.island}>"


class Client:
    """A connection to a cluster (see atoll.connect). Usable from several threads, one call at
    a time; every blocking call releases the GIL. ``with atoll.connect() as client:`` closes
    it at the end of the block."""

    def __init__(self, client: _atoll.Client, endpoint: str) -> None:
        self._client = client
        self.endpoint = endpoint
        _open_clients.add(self)

    @property
    def id(self) -> int:
        return self._client.id

    def slice(self, devices: int, island: Optional[str] = None) -> Slice:
        """A 1-D slice of ``devices`` devices on ``island`` (None: any island)."""
        return self.mesh((devices,), island)

    def mesh(self, shape: Sequence[int], island: Optional[str] = None) -> Slice:
        """A slice whose devices form a mesh of ``shape``: (2, 2) is 4 devices, 2 rows of 2."""
        return Slice(self, self._client.create_slice(list(shape), island or ""))

    def function(self, slice: Slice, *inputs: TensorType,
                 name: Optional[str] = None) -> Callable[[Callable[..., Any]], Function]:
        """Decorator: traces a function over ``inputs`` and registers it on ``slice`` with
        this client (see atoll.function). A slice of another client raises atoll.NotFound."""

        def decorate(fn: Callable[..., Any]) -> Function:
            builder, num_outputs, as_tuple = trace_function(fn, inputs, name)
            compiled = self._client.register(builder, slice._slice)
            return Function(compiled, slice, tuple(inputs), num_outputs, as_tuple)

        return decorate

    def run(self, program: Union[Program, Function], *args: Any,
            sequential: bool = False) -> "Run":
        """Submits ``program`` (or one call of a Function) on ``args`` and returns at once.

        Each argument is a numpy array of the argument's dtype (float32, float16,
        ml_dtypes.bfloat16, float64, int32 or int64; a C-contiguous array crosses without a
        copy and must not change until run() returns),
        a Future of an earlier run (its value stays in the cluster), or anything numpy turns
        into an array (a list, a number), converted to the argument's dtype. sequential:
        each call's host-side work starts only once the previous one finished.

        Raises atoll.InvalidArgument for a wrong argument (count, dtype, shape), naming it.
        """
        if isinstance(program, Function):
            program = program.as_program()
        if not isinstance(program, Program):
            raise TypeError(f"client.run takes a Program or a Function, got {program!r}")
        wire: List[Any] = []
        for i, arg in enumerate(args):
            if isinstance(arg, Future):
                wire.append(arg._future)
            elif isinstance(arg, np.ndarray) or i >= len(program.args):
                wire.append(arg)
            else:
                try:
                    wire.append(np.asarray(arg, dtype=program.args[i].dtype.numpy))
                except (TypeError, ValueError) as e:
                    raise _atoll.InvalidArgument(f"argument {i}: {e}") from None
        run = self._client.submit(program._compiled, wire, sequential)
        return Run(self, run, program._returns_tuple)

    def save(self, tensors: Mapping[str, Any], path: str, *, timeout: float = 60.0) -> None:
        """Saves ``tensors`` (name -> Future of a run, or numpy array) as the checkpoint
        ``path``: a directory relative to each object store's checkpoint root, one numpy .npy
        file per block written by the store that holds it, and an index (index.json) written
        last; numpy alone reads it back (README, "Checkpoints"). At least one tensor is a
        Future; arrays are of a dtype atoll takes (float32, float16, ml_dtypes.bfloat16,
        float64, int32, int64); a bf16 tensor's files say "bfloat16" in their descr, which
        numpy reads once ml_dtypes is imported (README). Waits for the futures' runs (at most ``timeout``
        seconds in all).

        Raises atoll.InvalidArgument for a bad name or path, atoll.PermissionDenied for a
        path that leaves the root ('..', a symbolic link), the error of a failed run.
        """
        wire = []
        for name, value in tensors.items():
            if isinstance(value, Future):
                wire.append((name, value._future))
            else:
                wire.append((name, np.asarray(value)))
        self._client.save(wire, path, timeout)

    def load(self, path: str, slice: Slice, names: Optional[Sequence[str]] = None, *,
             shardings: Optional[Mapping[str, Sharding]] = None,
             timeout: float = 60.0) -> Dict[str, "Future"]:
        """Loads the checkpoint ``path`` onto ``slice``: name -> Future, in ``names`` order
        (None: every tensor, in the order saved). Each future feeds later runs (its shards are
        in the slice's object stores) or is read with .result(). A tensor is laid out as it
        was saved unless ``shardings`` names it (atoll.split(0), atoll.replicated, ...).

        Raises atoll.NotFound for a checkpoint without an index (never saved, or a save that
        did not finish) or a missing file, atoll.InvalidArgument for a corrupt one or a
        layout that does not fit the slice.
        """
        wire_shardings = {name: [-1 if a is None else a for a in s.axes]
                          for name, s in (shardings or {}).items()}
        loaded, run = self._client.load(path, slice._slice, list(names or []), wire_shardings,
                                        timeout)
        checkpoint = Run(self, run, returns_tuple=True)
        return {name: checkpoint.output(i) for i, name in enumerate(loaded)}

    def close(self) -> None:
        """Says goodbye: the cluster frees this client's slices and objects. Its runs and
        futures stop working. Closing again does nothing."""
        self._client.close()
        _open_clients.discard(self)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<atoll.Client of {self.endpoint}>"


class Run:
    """A submitted run: its results as numpy arrays (result) or as futures for later runs
    (output). Its objects stay in the cluster while the Run or a Future of it is alive."""

    def __init__(self, client: Client, run: _atoll.Run, returns_tuple: bool) -> None:
        self.client = client
        self._run = run
        self._returns_tuple = returns_tuple
        self._results: List[Optional[np.ndarray]] = [None] * run.num_results

    @property
    def id(self) -> int:
        return self._run.id

    @property
    def num_results(self) -> int:
        return self._run.num_results

    def result(self, timeout: Optional[float] = None) -> Results:
        """Waits for every result (at most ``timeout`` seconds in all; None: no bound) and
        returns them as numpy arrays: one array, or a tuple when the program returned one.
        Asking again returns the same arrays.

        Raises atoll.DeadlineExceeded when the time is up, the error of a refused or failed
        run (naming the call and shard), KeyboardInterrupt on Ctrl-C (the run goes on: cancel
        it to stop it).
        """
        if sum(r is None for r in self._results) > 1:
            # Every shard's read at once: one round trip for all, not one per result. An
            # array handed out before (a Future's result) stays the one returned.
            read = self._run.wait_all(timeout)
            self._results = [old if old is not None else new
                             for old, new in zip(self._results, read)]
        else:
            for i in range(self.num_results):
                self._result_at(i, timeout)
        results = tuple(self._results)
        return results if self._returns_tuple else results[0]  # type: ignore[return-value]

    def wait(self, timeout: Optional[float] = None) -> "Run":
        """Waits until every result is computed (at most ``timeout`` seconds; None: no bound)
        and reads none back: they stay in the cluster, for later runs (``output``) or a later
        ``result()`` (jax's ``block_until_ready``). Returns this run.

        Raises as result() does.
        """
        self._run.wait_done(timeout)
        return self

    def _result_at(self, index: int, timeout: Optional[float]) -> np.ndarray:
        array = self._results[index]
        if array is None:
            array = self._results[index] = self._run.wait(index, timeout)
        return array

    def output(self, index: int = 0) -> "Future":
        """A future for result ``index``: pass it to a later client.run, where the value is
        read in the cluster, without a round trip through this process."""
        return Future(self, index, self._run.output(index))

    def cancel(self) -> None:
        """Stops the run: queued computations are dropped, a running one stops at its next
        check; waiting on it then raises atoll.Cancelled."""
        self._run.cancel()

    def __repr__(self) -> str:
        return f"<atoll.Run {self.id}: {self.num_results} results>"


class Future:
    """A future for one result of a run: an argument of later runs, or waited for."""

    def __init__(self, run: Run, index: int, future: _atoll.Future) -> None:
        self.run = run
        self.index = index
        self._future = future

    @property
    def dtype(self) -> DType:
        return dtype_named(self._future.dtype)

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._future.shape

    def result(self, timeout: Optional[float] = None) -> np.ndarray:
        """Waits for this result alone (see Run.result) and returns it."""
        return self.run._result_at(self.index, timeout)

    def __repr__(self) -> str:
        return f"<atoll.Future: result {self.index} of run {self.run.id}, {self.dtype.name}{list(self.shape)}>"
