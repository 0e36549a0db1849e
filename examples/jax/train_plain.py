"""A Flax model trained with optax: the plain JAX script (jax.jit on this machine's CPU).
train_atoll.py is this script with the mesh line and the jit wrapper changed (README.md)."""

import json

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P  # noqa: F401  (the atoll script's specs)


class MLP(nn.Module):
    hidden: int = 64
    classes: int = 10

    @nn.compact
    def __call__(self, x):
        x = nn.gelu(nn.Dense(self.hidden)(x))
        x = nn.LayerNorm()(x)
        x = nn.relu(nn.Dense(self.hidden)(x))
        return nn.Dense(self.classes)(x)


def data(step, batch=64, features=32, classes=10):
    rng = np.random.default_rng(step)
    x = rng.standard_normal((batch, features)).astype(np.float32)
    y = (np.abs(x[:, :classes]).argmax(1)).astype(np.int32)
    return x, y


def setup():
    """The step function, the first parameters and the optimizer's state."""
    model = MLP()
    params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 32), jnp.float32))
    tx = optax.adam(1e-2)
    opt_state = tx.init(params)

    def train_step(params, opt_state, x, y):
        def loss_fn(p):
            logits = model.apply(p, x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return train_step, params, opt_state


def main(steps=10):
    train_step, params, opt_state = setup()
    step = jax.jit(train_step)
    losses = []
    for i in range(steps):
        x, y = data(i)
        params, opt_state, loss = step(params, opt_state, x, y)
        losses.append(float(loss))
    return losses


if __name__ == "__main__":
    print(json.dumps(main()))
