"""A causal multi-head attention block (pre-layer-norm, GELU MLP, residuals) written once
against a numpy-like module: `atoll.numpy` traces it into a compiled function, `jax.numpy`
gives the oracle. tests/python/test_numpy.py checks its output and gradients against JAX;
bench/jax/bench_attention.py times its forward and backward step against `jax.jit`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List

import numpy as np

# issue 43's block: batch 4, 64 positions, width 128, 4 heads.
ATTENTION: Dict[str, int] = dict(b=4, t=64, d=128, heads=4)


def attention_block(np_: Any, gelu: Callable[[Any], Any], heads: int) -> Callable[..., Any]:
    """Causal multi-head self-attention and a GELU MLP, pre-layer-norm with residuals."""
    def layer_norm(x, g, b):
        mu = np_.mean(x, axis=-1, keepdims=True)
        var = np_.mean(np_.square(x - mu), axis=-1, keepdims=True)
        return (x - mu) / np_.sqrt(var + 1e-5) * g + b

    def block(x, wqkv, wo, w1, w2, g1, b1, g2, b2):
        bsz, t, d = x.shape
        h = layer_norm(x, g1, b1)
        qkv = (h @ wqkv).reshape(bsz, t, 3, heads, d // heads)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        scores = np_.einsum("bqhd,bkhd->bhqk", q, k) / float(np.sqrt(d // heads))
        causal = np_.tril(np_.ones((t, t), np.float32))
        scores = np_.where(causal > 0.5, scores, -1e9)
        weights = np_.exp(scores - np_.max(scores, axis=-1, keepdims=True))
        weights = weights / np_.sum(weights, axis=-1, keepdims=True)
        attn = np_.einsum("bhqk,bkhd->bqhd", weights, v).reshape(bsz, t, d)
        x = x + attn @ wo
        return x + gelu(layer_norm(x, g2, b2) @ w1) @ w2
    return block


def tanh_gelu(np_: Any) -> Callable[[Any], Any]:
    return lambda z: 0.5 * z * (1.0 + np_.tanh(0.7978845608028654 * (z + 0.044715 * z * z * z)))


def attention_args(rng: np.random.Generator, b: int = ATTENTION["b"], t: int = ATTENTION["t"],
                   d: int = ATTENTION["d"]) -> List[np.ndarray]:
    """The block's input x [b, t, d] and its weights, drawn as a model would start."""
    shapes = [(b, t, d), (d, 3 * d), (d, d), (d, 4 * d), (4 * d, d), (d,), (d,), (d,), (d,)]
    args = [(rng.standard_normal(s) * (0.02 if len(s) == 2 else 1.0)).astype(np.float32)
            for s in shapes]
    args[5] += 1.0
    args[7] += 1.0
    return args
