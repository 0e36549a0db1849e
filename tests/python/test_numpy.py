"""atoll.numpy against jax.numpy on CPU, the oracle, on a real cluster: numpy broadcasting
and jax's type promotion with Python and numpy constants, reductions with axis and keepdims,
batched matmul and einsum, numpy indexing of traced values, jax.nn's softmax family, and a
causal multi-head attention block (layer norm, GELU MLP, residuals) written once and run by
both.
"""

from __future__ import annotations

import os
from typing import Any, Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import atoll  # noqa: E402
import atoll.numpy as anp  # noqa: E402
import attention as attention_example  # noqa: E402 (examples/python, on conftest's path)
from attention import ATTENTION, attention_block, tanh_gelu  # noqa: E402
from test_lax import SEED, run_atoll as run  # noqa: E402

jax.config.update("jax_enable_x64", True)


@pytest.fixture()
def one_device(client: atoll.Client) -> atoll.Slice:
    return client.slice(1)


def same(client, slice_, f: Callable[[Any, Any], Callable[..., Any]], args, rtol=1e-6) -> None:
    """f(np_module, args...) run by atoll (anp) and by jax.jit (jax.numpy): equal dtype and
    shape, values within rtol."""
    got = run(client, slice_, f(anp), args)
    want = np.asarray(jax.jit(f(jjnp))(*args))
    assert got.dtype == want.dtype and got.shape == want.shape, (
        f"atoll {got.dtype}{got.shape}, JAX {want.dtype}{want.shape}")
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(got, want)


CASES = {
    "broadcast with constants": lambda np_: lambda x, b: (x + b) * 2.0 - np_.asarray(
        np.arange(4, dtype=np.float32)),
    "promotion of i32 with Python numbers": lambda np_: lambda x, i: (i * 3 - 1) // 2 + (
        x * 0.5 > 0.25),
    "comparisons and where": lambda np_: lambda x, b: np_.where(x > b, x, -b),
    "maximum clip square": lambda np_: lambda x, b: np_.clip(np_.maximum(x, 0.1) ** 2, -1, 2.5),
    "reductions with keepdims": lambda np_: lambda x, b: (
        x - np_.mean(x, axis=-1, keepdims=True)) / np_.max(x, axis=(0, 1), keepdims=True),
    "argmax and prod": lambda np_: lambda x, b: np_.argmax(x, axis=1).astype(np.int32) + np_.argmin(
        b).astype(np.int32) + np_.prod(b).astype(np.int32),
    "matmul batched with 1-D": lambda np_: lambda x, b: (x @ np_.ones((4, 3), np.float32)) @ np_.ones(
        3, np.float32),
    "einsum": lambda np_: lambda x, b: np_.einsum("bti,j->btj", x, b),
    "indexing": lambda np_: lambda x, b: x[1:, ::2, None, -1] + x[..., 0][:, :, None, None],
    "take and integer arrays": lambda np_: lambda x, b: x[:, np.array([2, 0, 1])][0] + np_.take(
        b, np.array([3, 1, 1, 0])),
    "softmax log_softmax one_hot": lambda np_: lambda x, b: (
        jax.nn.softmax(x, axis=-1) if np_ is jjnp else anp.softmax(x)) + (
        jax.nn.log_softmax(x) if np_ is jjnp else anp.log_softmax(x)),
    "tril triu concatenate stack": lambda np_: lambda x, b: np_.concatenate(
        [np_.tril(x[0]), np_.triu(x[1], 1)], axis=1).sum() + np_.stack([b, b], 1).sum(),
    "pad cumsum sort": lambda np_: lambda x, b: np_.sort(np_.cumsum(np_.pad(b, (1, 2))))
}


@pytest.mark.parametrize("name", list(CASES))
def test_jax_numpy_functions_match(client, one_device, name: str) -> None:
    rng = np.random.default_rng([SEED, 201, list(CASES).index(name)])
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    if "i32" in name:
        same(client, one_device, CASES[name], [x, rng.integers(-5, 5, (2, 3, 4)).astype(np.int32)])
    else:
        same(client, one_device, CASES[name], [x, b], rtol=1e-5)


def test_one_hot_matches_jax(client, one_device) -> None:
    labels = np.array([3, 0, 4, 1], np.int32)
    got = run(client, one_device, lambda v: anp.one_hot(v, 5), [labels])
    np.testing.assert_array_equal(got, np.asarray(jax.nn.one_hot(labels, 5)))


def attention_args(seed: int) -> list:
    return attention_example.attention_args(np.random.default_rng([SEED, seed]))


def attention_types(args: list, batch_cut: bool) -> list:
    return [atoll.f32[a.shape].axes(0) if batch_cut and i == 0 else atoll.f32[a.shape]
            for i, a in enumerate(args)]


def test_a_causal_attention_block_matches_jax_numpy(client, one_device) -> None:
    args = attention_args(202)
    heads = ATTENTION["heads"]
    got = run(client, one_device, attention_block(anp, tanh_gelu(anp), heads), args)
    want = np.asarray(jax.jit(attention_block(jjnp, tanh_gelu(jjnp), heads))(*args))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("devices", [1, 4])
def test_the_attention_block_and_its_gradients_match_jax_with_the_batch_cut(client, devices):
    """The batch over `devices` devices (x cut along dimension 0, the weights replicated):
    the output, and the weights' gradients of a loss summing it against fixed weights, which
    atoll.grad completes with an all-reduce over the cut batch."""
    args = attention_args(203)
    heads = ATTENTION["heads"]
    w = np.random.default_rng([SEED, 204]).standard_normal(args[0].shape).astype(np.float32)
    types = attention_types(args, devices > 1) + [atoll.f32[w.shape].axes(0) if devices > 1
                                                  else atoll.f32[w.shape]]
    block = attention_block(anp, tanh_gelu(anp), heads)

    def loss(*a):
        return anp.sum(block(*a[:-1]) * a[-1])

    def forward_and_grads(*a):
        return (block(*a[:-1]),) + tuple(atoll.grad(loss, argnums=tuple(range(1, 9)))(*a))

    traced = client.function(client.slice(devices), *types)(forward_and_grads)
    got = [np.asarray(r) for r in client.run(traced, *args, w).result(timeout=120)]
    jax_block = attention_block(jjnp, tanh_gelu(jjnp), heads)
    want_out = np.asarray(jax.jit(jax_block)(*args))
    want_grads = jax.jit(jax.grad(lambda *a: (jax_block(*a[:-1]) * a[-1]).sum(),
                                  argnums=tuple(range(1, 9))))(*args, w)
    np.testing.assert_allclose(got[0], want_out, rtol=1e-4, atol=1e-4)
    for k, (g, want) in enumerate(zip(got[1:], want_grads)):
        scale = float(np.max(np.abs(want))) or 1.0
        np.testing.assert_allclose(g, np.asarray(want), rtol=1e-3, atol=1e-4 * scale,
                                   err_msg=f"gradient of weight {k + 1} on {devices} devices")


def test_bad_numpy_calls_are_refused_naming_what_was_wrong(client, one_device) -> None:
    with pytest.raises(atoll.InvalidArgument, match="do not broadcast"):
        client.function(one_device, atoll.f32[2, 3], atoll.f32[4])(lambda x, y: x + y)
    with pytest.raises(IndexError, match="out of bounds"):
        client.function(one_device, atoll.f32[2, 3])(lambda x: x[5])
    with pytest.raises(atoll.InvalidArgument, match="einsum"):
        client.function(one_device, atoll.f32[2, 3])(lambda x: anp.einsum("...i->i", x))

