"""Checkpoints of pytrees of atoll.jax.Arrays through the object stores (Client.save: each
store writes the blocks it holds), and a training loop that goes on by itself after a host
of its slice was lost (elastic)."""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, TypeVar

import numpy as np

import jax

from .. import _atoll
from .._client import Client
from .._types import replicated
from ._api import Array, Mesh

T = TypeVar("T")

_LOST = re.compile(r"\bon host \S+ (was|were) lost\b|submit the run again")


def tensor_names(tree: Any) -> Tuple[list, Any]:
    """Each leaf's checkpoint name (its path in the tree, parts joined by '.': 'blocks.0.wq',
    '0.mu.wte'), the leaves, and the tree's structure."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
    names = []
    for path, _ in flat:
        parts = []
        for key in path:
            for attr in ("key", "idx", "name"):
                if hasattr(key, attr):
                    parts.append(str(getattr(key, attr)))
                    break
            else:
                parts.append(str(key))
        names.append(".".join(parts) or "value")
    return names, [leaf for _, leaf in flat], treedef


def save(client: Client, tree: Any, path: str, *, timeout: float = 600.0) -> None:
    """Saves every leaf of ``tree`` as the checkpoint ``path`` (Client.save): Arrays by the
    stores that hold them, without passing through this process; other leaves (numpy, JAX
    arrays, numbers) from here. At least one leaf is an atoll.jax.Array."""
    names, leaves, _ = tensor_names(tree)
    tensors: Dict[str, Any] = {}
    for name, leaf in zip(names, leaves):
        tensors[name] = leaf.future if isinstance(leaf, Array) else np.asarray(leaf)
    client.save(tensors, path, timeout=timeout)


def load(client: Client, path: str, like: Any, mesh: Mesh, *,
         timeout: float = 600.0) -> Any:
    """The checkpoint ``path`` as a tree shaped as ``like`` (whose leaves name the tensors,
    as save named them), each leaf a numpy array: loaded whole onto ``mesh``'s slice by its
    stores and read back, so that the caller places it as its layout wants (the layout of a
    resumed run may differ from the saved one's)."""
    names, leaves, treedef = tensor_names(like)
    futures = client.load(path, mesh.slice, names, shardings={n: replicated for n in names},
                          timeout=timeout)
    out = []
    for name, leaf in zip(names, leaves):
        value = futures[name].result(timeout)
        want = np.shape(leaf)
        if tuple(value.shape) != tuple(want):
            raise _atoll.InvalidArgument(f"checkpoint {path!r}: tensor {name!r} has shape "
                                         f"{tuple(value.shape)}, the tree wants {tuple(want)}")
        out.append(value)
    return jax.tree_util.tree_unflatten(treedef, out)


def host_lost(error: BaseException) -> bool:
    """Whether ``error`` is a run's failure because a host of its slice was lost (the
    executors' and schedulers' "device D on host H was lost: ...", "devices 2,3 on host H
    were lost: its executor restarted ..."), or a refusal while the RM remaps the slice
    ("submit the run again")."""
    return isinstance(error, _atoll.Error) and _LOST.search(str(error)) is not None


def elastic(loop: Callable[[bool], T], *, attempts: int = 3, within_s: float = 120.0,
            lost: Callable[[BaseException], bool] = host_lost,
            log: Optional[Callable[[str], None]] = print) -> T:
    """Runs ``loop(resume)`` and, when it fails because a host of its slice was lost, runs
    ``loop(True)`` again: the loop reloads its last checkpoint and continues from there.

    The RM remaps the slice onto live devices of the same island and the client takes the
    new mapping at its next submission (updating the slice's compiled functions in place:
    no re-trace is needed); a retry that comes before the remap fails the same way and is
    tried again, up to ``attempts`` retries within ``within_s`` seconds (the first at once,
    the next after 0.5 s, then twice longer each time: there is no event of the remap to
    wait on from Python). Any other error, and the last one, is raised."""
    deadline = time.monotonic() + within_s
    resume, tries, pause = False, 0, 0.5
    while True:
        try:
            return loop(resume)
        except Exception as e:  # noqa: BLE001  (re-raised unless lost says otherwise)
            tries += 1
            if not lost(e) or tries > attempts or time.monotonic() > deadline:
                raise
            if log is not None:
                log(f"atoll.jax.elastic: {e}; resuming from the last checkpoint "
                    f"(retry {tries} of {attempts})")
            if resume:  # the retry itself failed: give the RM time to finish the remap
                time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause *= 2
            resume = True


__all__: Sequence[str] = ("elastic", "host_lost", "load", "save", "tensor_names")
