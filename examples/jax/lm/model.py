"""A GPT-style decoder-only language model in plain jax.numpy: token and position embeddings,
pre-layer-norm blocks (causal multi-head attention, a GELU MLP), a final layer norm and the
output tied to the token embedding. Byte-level (256 tokens). Parameters are a dict whose
names say how the megatron layout cuts them (model.MEGATRON); pipeline stages are slices of
its blocks (model.stages)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P

VOCAB = 256  # bytes


@dataclass(frozen=True)
class Config:
    layers: int = 4
    d_model: int = 256
    heads: int = 8
    context: int = 128
    batch: int = 16
    lr: float = 3e-3
    warmup: int = 50
    weight_decay: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} does not divide into {self.heads} heads")


def init(cfg: Config) -> Dict[str, Any]:
    """Parameters drawn from one seed (numpy, float32), the same for every layout."""
    rng = np.random.default_rng(cfg.seed)
    d = cfg.d_model

    def normal(*shape: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    out_std = 0.02 / math.sqrt(2 * cfg.layers)  # GPT-2's scaling of the residual writes
    h, e = cfg.heads, d // cfg.heads
    # Attention weights are [d, heads, head dim] (and wo [heads, head dim, d]): the heads are
    # a dimension of their own, so the megatron layout cuts it without a reshape of a cut
    # dimension (atoll.jax refuses one that moves a cut).
    blocks = [{"ln1_g": np.ones(d, np.float32), "ln1_b": np.zeros(d, np.float32),
               "wq": normal(d, h, e), "wk": normal(d, h, e), "wv": normal(d, h, e),
               "wo": normal(h, e, d, std=out_std),
               "ln2_g": np.ones(d, np.float32), "ln2_b": np.zeros(d, np.float32),
               "w1": normal(d, 4 * d), "b1": np.zeros(4 * d, np.float32),
               "w2": normal(4 * d, d, std=out_std), "b2": np.zeros(d, np.float32)}
              for _ in range(cfg.layers)]
    return {"wte": normal(VOCAB, d), "wpe": normal(cfg.context, d), "blocks": blocks,
            "lnf_g": np.ones(d, np.float32), "lnf_b": np.zeros(d, np.float32)}


def optimizer(cfg: Config) -> optax.GradientTransformation:
    """AdamW after a linear warm-up from 0 to cfg.lr over cfg.warmup steps."""
    schedule = optax.linear_schedule(0.0, cfg.lr, max(cfg.warmup, 1))
    return optax.adamw(schedule, b1=0.9, b2=0.95, weight_decay=cfg.weight_decay)


# -- the network ---------------------------------------------------------------------------------

def layer_norm(x: jax.Array, g: jax.Array, b: jax.Array) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g + b


def block(p: Dict[str, jax.Array], x: jax.Array) -> jax.Array:
    t = x.shape[1]
    h = layer_norm(x, p["ln1_g"], p["ln1_b"])
    q = jnp.einsum("btd,dhe->bthe", h, p["wq"])
    k = jnp.einsum("btd,dhe->bthe", h, p["wk"])
    v = jnp.einsum("btd,dhe->bthe", h, p["wv"])
    att = jnp.einsum("bthe,bshe->bhts", q, k) / math.sqrt(q.shape[-1])
    causal = jnp.tril(jnp.ones((t, t), bool))
    att = jax.nn.softmax(jnp.where(causal, att, -1e9), axis=-1)
    x = x + jnp.einsum("bhts,bshe,hed->btd", att, v, p["wo"])
    h = layer_norm(x, p["ln2_g"], p["ln2_b"])
    return x + jax.nn.gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def embed(p: Dict[str, Any], tokens: jax.Array) -> jax.Array:
    # A one-hot product rather than a gather: the same numbers, and its gradient is a matmul.
    return jax.nn.one_hot(tokens, VOCAB, dtype=jnp.float32) @ p["wte"] + p["wpe"][:tokens.shape[1]]


def head(p: Dict[str, Any], x: jax.Array) -> jax.Array:
    return layer_norm(x, p["lnf_g"], p["lnf_b"]) @ p["wte"].T  # tied output embedding


def cross_entropy(logits: jax.Array, targets: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


def logits(params: Dict[str, Any], tokens: jax.Array) -> jax.Array:
    x = embed(params, tokens)
    for p in params["blocks"]:
        x = block(p, x)
    return head(params, x)


def loss(params: Dict[str, Any], tokens: jax.Array, targets: jax.Array) -> jax.Array:
    return cross_entropy(logits(params, tokens), targets)


def train_step(cfg: Config):
    """(params, opt_state, tokens, targets) -> (params, opt_state, loss): the step every layout
    but the pipeline runs (each with its own jit wrapper)."""
    tx = optimizer(cfg)

    def step(params, opt_state, tokens, targets):
        value, grads = jax.value_and_grad(loss)(params, tokens, targets)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return step


# -- megatron: how the 2-D (data x model) mesh cuts each parameter -------------------------------

MEGATRON = {"wq": P(None, "model"), "wk": P(None, "model"), "wv": P(None, "model"),
            "wo": P("model"), "w1": P(None, "model"), "b1": P("model"),
            "w2": P("model", None)}


def megatron_specs(params: Dict[str, Any]) -> Dict[str, Any]:
    """Per parameter, its PartitionSpec: attention heads and MLP columns cut along "model"
    (Megatron-LM's cut), everything else replicated."""
    return jax.tree_util.tree_map_with_path(
        lambda path, _: MEGATRON.get(getattr(path[-1], "key", None), P()), params)


def optimizer_specs(tx: optax.GradientTransformation, opt_state: Any, param_specs: Any) -> Any:
    """The optimizer state's specs: its parameter-shaped parts as the parameters, the rest
    (step counts) replicated."""
    return optax.tree_map_params(tx, lambda _, spec: spec, opt_state, param_specs,
                                 transform_non_params=lambda _: P(),
                                 is_leaf=lambda x: isinstance(x, P))


# -- pipeline stages -----------------------------------------------------------------------------

def stage_bounds(layers: int, stages: int) -> List[range]:
    if stages < 2 or layers % stages:
        raise ValueError(f"a pipeline of {stages} stages needs at least 2 stages and a number "
                         f"of layers ({layers}) they divide evenly")
    per = layers // stages
    return [range(s * per, (s + 1) * per) for s in range(stages)]


def stages(params: Dict[str, Any], count: int) -> List[Dict[str, Any]]:
    """The parameters cut into ``count`` stages of equal numbers of blocks: the first holds
    the embeddings, the last the final norm and a copy of the tied token embedding (its
    gradient is the sum of both stages', so the copies stay equal)."""
    bounds = stage_bounds(len(params["blocks"]), count)
    out = [{"blocks": [params["blocks"][i] for i in r]} for r in bounds]
    out[0].update(wte=params["wte"], wpe=params["wpe"])
    out[-1].update(wte=params["wte"], lnf_g=params["lnf_g"], lnf_b=params["lnf_b"])
    return out


def merge(stage_params: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The inverse of stages (the first stage's copy of the token embedding)."""
    first, last = stage_params[0], stage_params[-1]
    return {"wte": first["wte"], "wpe": first["wpe"],
            "blocks": [b for s in stage_params for b in s["blocks"]],
            "lnf_g": last["lnf_g"], "lnf_b": last["lnf_b"]}


def stage_forward(p: Dict[str, Any], x: jax.Array, first: bool, last: bool) -> jax.Array:
    """One stage: tokens (first) or activations in, activations or logits (last) out."""
    if first:
        x = embed(p, x)
    for b in p["blocks"]:
        x = block(b, x)
    return head(p, x) if last else x
