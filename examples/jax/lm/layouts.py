"""The four ways train.py runs the model's step, each behind one interface:

    layout.state(params, opt_state)   -> the training state, placed as the layout keeps it
    layout.step(state, tokens, targets) -> (state, loss): submitted, not waited for
    layout.host(state)                -> (params, opt_state) as numpy trees

- jit: jax.jit on this machine's CPU (the oracle of the others);
- spmd: atoll.jax.jit, data-parallel over the devices of one island (batch split);
- megatron: atoll.jax.jit on a 2-D (data x model) mesh, heads and MLP columns cut along
  "model" (model.MEGATRON);
- pipeline: GPipe over S stages (layers cut evenly), half the stages on island0 and half on
  island1 (or all on one island), M micro-batches; each step is one atoll.jax.program (every
  micro-batch's forward, then every backward, per shard, each device summing its own
  gradient, all-reduced once at the step's last backward, then each stage's AdamW
  update)."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P

import model
from model import Config


def to_host(tree: Any) -> Any:
    return jax.tree_util.tree_map(np.asarray, tree)


class Jit:
    name = "jit"

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._step = jax.jit(model.train_step(cfg))

    def state(self, params: Any, opt_state: Any) -> Any:
        return params, opt_state

    def step(self, state: Any, tokens: np.ndarray, targets: np.ndarray) -> Tuple[Any, Any]:
        params, opt_state, loss = self._step(*state, tokens, targets)
        return (params, opt_state), loss

    def host(self, state: Any) -> Tuple[Any, Any]:
        return to_host(state[0]), to_host(state[1])


class Spmd(Jit):
    """Data-parallel: parameters and optimizer state replicated, the batch split over
    ``devices`` devices of ``island``; atoll completes the gradient's partial sums."""
    name = "spmd"

    def __init__(self, cfg: Config, client: Any, devices: int = 4,
                 island: Optional[str] = "island0") -> None:
        import atoll.jax as aj  # noqa: PLC0415  (the jit layout runs without a cluster)
        self.cfg = cfg
        self.mesh = aj.Mesh(client, (devices,), ("data",), island=island)
        self.meshes = [self.mesh]
        self._step = aj.jit(model.train_step(cfg), mesh=self.mesh,
                            in_specs=(P(), P(), P("data"), P("data")), out_specs=P())


class Megatron(Jit):
    """A (data x model) mesh: the batch split along "data", attention heads and MLP columns
    along "model" (parameters and their optimizer moments alike)."""
    name = "megatron"

    def __init__(self, cfg: Config, client: Any, data: int = 2, model_axis: int = 2,
                 island: Optional[str] = "island0") -> None:
        import atoll.jax as aj  # noqa: PLC0415
        if cfg.heads % model_axis or (4 * cfg.d_model) % model_axis:
            raise ValueError(f"megatron: {cfg.heads} heads do not cut into {model_axis}")
        self.cfg = cfg
        self.mesh = aj.Mesh(client, (data, model_axis), ("data", "model"), island=island)
        self.meshes = [self.mesh]
        params = model.init(cfg)
        tx = model.optimizer(cfg)
        pspecs = model.megatron_specs(params)
        ospecs = model.optimizer_specs(tx, tx.init(params), pspecs)
        self._step = aj.jit(model.train_step(cfg), mesh=self.mesh,
                            in_specs=(pspecs, ospecs, P("data"), P("data")),
                            out_specs=(pspecs, ospecs, P()))


class Pipeline:
    """GPipe: stage s holds layers [s L/S, (s+1) L/S) on a mesh of ``stage_devices``
    devices (the micro-batch split over them). The backward of a stage recomputes its
    forward from the stage's input (GPipe's rematerialisation). A stage's backward runs per
    shard: each device sums its own rows' parameter gradients over the micro-batches (kept
    as [devices, ...], cut along "data"), and the stage's last backward all-reduces that
    sum once a step (GPipe's accumulation; an all-reduce per micro-batch made S=2 slower
    than spmd). The tied token embedding lives on the first and the last stage; each adds
    the other's gradient to its own before the update, so both copies stay equal."""
    name = "pipeline"

    def __init__(self, cfg: Config, client: Any, stages: int = 2, micro: int = 4,
                 stage_devices: int = 1, islands: int = 2) -> None:
        import atoll.jax as aj  # noqa: PLC0415
        model.stage_bounds(cfg.layers, stages)
        if cfg.batch % micro or (cfg.batch // micro) % stage_devices:
            raise ValueError(f"pipeline: batch {cfg.batch} does not cut into {micro} "
                             f"micro-batches of a multiple of {stage_devices} rows")
        self.cfg, self.S, self.M = cfg, stages, micro
        self.meshes = [aj.Mesh(client, (stage_devices,), ("data",),
                               island="island1" if islands == 2 and s >= stages // 2
                               else "island0")
                       for s in range(stages)]
        self.tx = model.optimizer(cfg)
        split = P("data")
        self.forward = [aj.jit(_stage_forward(s == 0), mesh=mesh, in_specs=(P(), split),
                               out_specs=split)
                        if s < stages - 1 else None for s, mesh in enumerate(self.meshes)]
        # backward[s][(accumulates, reduces)]: the first micro-batch's starts the sum, the
        # last one's all-reduces it (both, when M = 1).
        self.backward = [{(acc, red): _stage_backward(aj, mesh, s == 0, s == stages - 1,
                                                      stage_devices, acc, red)
                          for acc in (False, True) for red in (False, True)}
                         for s, mesh in enumerate(self.meshes)]
        self.update = [aj.jit(self._update_fn(s == 0), mesh=mesh, in_specs=P(), out_specs=P())
                       for s, mesh in enumerate(self.meshes)]
        self._grads = aj.program(self._grads_body)
        self._step = aj.program(self._step_body)

    def _update_fn(self, first: bool):
        tx, M = self.tx, self.M

        def update(p, opt_state, acc, *other_wte):
            if other_wte:  # the tied embedding: both copies get the sum of both gradients
                # (first: own + other; last: other + own: IEEE addition commutes exactly)
                acc = dict(acc, wte=acc["wte"] + other_wte[0] if first
                           else other_wte[0] + acc["wte"])
            grads = jax.tree_util.tree_map(lambda g: g / M, acc)
            updates, opt_state = tx.update(grads, opt_state, p)
            return optax.apply_updates(p, updates), opt_state

        return update

    # -- one step ---------------------------------------------------------------------------
    def _grads_body(self, params: List[Any], xs: List[Any], ys: List[Any]) -> Tuple[Any, Any]:
        """Every micro-batch's forward (stage by stage), then every backward: each stage's
        parameter gradients summed over the micro-batches and all-reduced, and the summed
        losses."""
        S, M = self.S, self.M
        inputs = [[None] * S for _ in range(M)]
        for m in range(M):
            h = xs[m]
            for s in range(S):
                inputs[m][s] = h
                if s < S - 1:
                    h = self.forward[s](params[s], h)
        acc: List[Any] = [None] * S
        total = None
        for m in range(M):
            kind = (m > 0, m == M - 1)
            sums = () if m == 0 else (acc[-1], total)
            (acc[-1], total), g = self.backward[-1][kind](params[-1], inputs[m][-1], ys[m],
                                                         *sums)
            for s in reversed(range(S - 1)):
                sums = () if m == 0 else (acc[s],)
                out = self.backward[s][kind](params[s], inputs[m][s], g, *sums)
                if s == 0:
                    acc[0] = out
                else:
                    acc[s], g = out
        return acc, total

    def _step_body(self, state: List[Any], xs: List[Any], ys: List[Any]) -> Tuple[Any, Any]:
        params = [p for p, _ in state]
        acc, total = self._grads_body(params, xs, ys)
        new = []
        for s, (p, opt_state) in enumerate(state):
            other = ()
            if s == 0:
                other = (acc[-1]["wte"],)
            elif s == self.S - 1:
                other = (acc[0]["wte"],)
            new.append(self.update[s](p, opt_state, acc[s], *other))
        return new, total

    def _micro(self, a: np.ndarray) -> List[np.ndarray]:
        return list(np.split(np.asarray(a), self.M))

    def grads(self, params: Any, tokens: np.ndarray, targets: np.ndarray) -> Tuple[Any, Any]:
        """The pipeline's gradients of the whole model's mean loss (as jax.grad of
        model.loss gives them) and that loss: for the tests."""
        acc, total = self._grads(model.stages(params, self.S), self._micro(tokens),
                                 self._micro(targets))
        acc = [to_host(a) for a in acc]
        wte = acc[0]["wte"] + acc[-1]["wte"]
        grads = jax.tree_util.tree_map(lambda g: g / self.M, model.merge(acc))
        grads["wte"] = wte / self.M
        return grads, float(total) / self.M

    def state(self, params: Any, opt_state: Any) -> Any:
        del opt_state  # per stage: AdamW's state of each stage's parameters
        return [(p, self.tx.init(p)) for p in model.stages(params, self.S)]

    def step(self, state: Any, tokens: np.ndarray, targets: np.ndarray) -> Tuple[Any, Any]:
        new, total = self._step(state, self._micro(tokens), self._micro(targets))
        return new, _Scaled(total, 1.0 / self.M)

    def host(self, state: Any) -> Tuple[Any, Any]:
        params = model.merge([to_host(p) for p, _ in state])
        return params, [to_host(o) for _, o in state]


def _stage_forward(first: bool) -> Any:
    def forward(p, x):  # rows in, rows out: no communication
        return model.stage_forward(p, x, first, False)
    return forward


def _stage_backward(aj: Any, mesh: Any, first: bool, last: bool, devices: int,
                    accumulates: bool, reduces: bool) -> Any:
    """A stage's backward for one micro-batch, per shard: (params, the stage's input rows,
    the gradient of its output rows, or the targets on the last stage[, the running sums])
    -> (the sums[, the gradient of the input rows]). The sums are the parameter gradients
    (and on the last stage, with them, the loss): each device's own, [devices, ...] cut
    along "data", or all-reduced (replicated) when ``reduces``. The rows' gradients need no
    communication: each device's are its own. Unchecked replication (check_vma=False), so
    JAX differentiates the replicated parameters per device without a psum of its own."""
    stacked = devices > 1  # one device: its sums are the stage's, nothing to all-reduce

    def backward(p, x, g, *sums):
        if last:  # loss of the whole micro-batch = the mean of the devices' own means
            loss, (gp, gx) = jax.value_and_grad(
                lambda p, h: model.cross_entropy(model.stage_forward(p, h, first, True), g)
                / devices, argnums=(0, 1))(p, x)
            part = (gp, loss)
        elif first:  # tokens in: no gradient to pass on
            part = jax.vjp(lambda p: model.stage_forward(p, x, True, False), p)[1](g)[0]
        else:
            part, gx = jax.vjp(lambda p, x: model.stage_forward(p, x, False, False), p, x)[1](g)
        if sums:
            own = sums if last else sums[0]
            if stacked:
                own = jax.tree_util.tree_map(lambda a: a[0], own)
            part = jax.tree_util.tree_map(jnp.add, own, part)
        if reduces and stacked:
            part = jax.lax.psum(part, "data")
        elif stacked:
            part = jax.tree_util.tree_map(lambda a: a[None], part)
        return part if first else (part, gx)

    split, sums_spec = P("data"), P("data") if stacked and not reduces else P()
    in_sums = (() if not accumulates else
               (P("data") if stacked else P(),) * (2 if last else 1))
    out = sums_spec if first else (sums_spec, split)
    return aj.shard_map(backward, mesh=mesh, in_specs=(P(), split, split) + in_sums,
                        out_specs=out, check_vma=False)


class _Scaled:
    """A loss still in the stores, read back (float()) times a factor."""

    def __init__(self, value: Any, factor: float) -> None:
        self.value, self.factor = value, factor

    def __float__(self) -> float:
        return float(self.value) * self.factor


def make(name: str, cfg: Config, client: Any = None, **options: Any) -> Any:
    if name == "jit":
        return Jit(cfg)
    if client is None:
        raise ValueError(f"the {name} layout runs on an atoll cluster: connect a client")
    layouts = {"spmd": Spmd, "megatron": Megatron, "pipeline": Pipeline}
    if name not in layouts:
        raise ValueError(f"--layout {name!r}: one of jit, spmd, pipeline, megatron")
    return layouts[name](cfg, client, **options)
