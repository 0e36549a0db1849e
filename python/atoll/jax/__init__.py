"""Existing JAX code on atoll: jaxprs lowered to atoll compiled functions on a mesh slice,
with results that stay in the object stores::

    import atoll, atoll.jax
    from jax.sharding import PartitionSpec as P

    client = atoll.connect()
    mesh = atoll.jax.Mesh(client, (4,), ("data",))

    @atoll.jax.jit(mesh=mesh, in_specs=(P(), P("data")), out_specs=P())
    def loss(params, batch):            # written for whole arrays, as for jax.jit
        ...

    value = loss(params, batch)         # an atoll.jax.Array; np.asarray(value) reads it

Two forms: global (jax.jit with shardings; atoll partitions the function, completing
partial sums with all-reduces) and per shard (``per_shard=True`` or
``atoll.jax.shard_map``: the function sees each device's block and calls psum, all_gather,
... by mesh axis name). What atoll cannot lower (a primitive it lacks, a host callback, a
dtype, a sharding it cannot partition) is refused when the function is traced, naming the
primitive and the user's source line (atoll.jax.LoweringError, an atoll.InvalidArgument).

Training state (pytrees of Arrays) is checkpointed by the stores that hold it
(``atoll.jax.save`` / ``load``), and ``atoll.jax.elastic(loop)`` runs a training loop again
from its last checkpoint when a host of its slice was lost.
"""

from jax.sharding import PartitionSpec

from ._api import (Array, Device, Jitted, Layout, Mesh, NamedSharding, TracedArray, fetches, jit,
                   program, shard_map)
from ._checkpoint import elastic, host_lost, load, save
from ._lowering import MISSING, RULES, LoweringError

P = PartitionSpec

__all__ = ["Array", "Device", "Jitted", "Layout", "LoweringError", "MISSING", "Mesh",
           "NamedSharding", "P", "PartitionSpec", "RULES", "TracedArray", "elastic", "fetches",
           "host_lost", "jit", "load", "program", "save", "shard_map"]
