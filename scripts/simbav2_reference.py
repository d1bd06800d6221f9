"""Record two SimbaV2 updates of the official JAX code, for tests/test_simbav2.py.

Writes ``tests/fixtures/simbav2_reference.npz``: the official networks' initial weights, a batch,
the Gaussian noise each update's two policy samples use, the losses of each of two updates, and
the weights and Adam first moments (the running mean of the gradients) after both, all under
rlzoo's parameter names. tests/test_simbav2.py loads the initial weights into
``rlzoo.algos.SimbaV2``, runs the same two updates with the same noise and checks every weight,
moment and loss; CI needs neither JAX nor the reference code, only this file.

Run (not part of the test suite; it needs the reference's own stack) with a checkout of github
dojeon-ai/SimbaV2 at commit 14fafb27e6f78f0b65d19b8873b4433547a2193c and its pinned versions:

    python -m venv /tmp/jaxenv && /tmp/jaxenv/bin/pip install jax==0.4.25 jaxlib==0.4.25 \\
        flax==0.8.4 optax==0.2.2 tensorflow-probability==0.24.0 "numpy<2" "scipy<1.13" \\
        gymnasium omegaconf
    /tmp/jaxenv/bin/python scripts/simbav2_reference.py /path/to/SimbaV2 \
        tests/fixtures/simbav2_reference.npz

It calls the reference's ``_init_simbav2_networks`` and ``_update_simbav2_networks`` unchanged;
the only code of its own is the renaming of the weights and the draw of the noise the reference
samples, which it checks against the reference's own samples.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

OBS, ACT, BATCH = 3, 2, 16
SETTINGS: dict[str, Any] = dict(
    seed=0, normalize_observation=False, normalize_reward=False, normalized_g_max=5.0,
    load_only_param=True, load_param_key=None, load_observation_normalizer=False,
    load_reward_normalizer=False,
    learning_rate_init=1e-4, learning_rate_end=5e-5, learning_rate_decay_rate=1.0,
    learning_rate_decay_step=2,  # short, so that the second update sees a decayed rate
    actor_num_blocks=1, actor_hidden_dim=8, actor_c_shift=3.0,
    actor_scaler_init=math.sqrt(2 / 8), actor_scaler_scale=math.sqrt(2 / 8),
    actor_alpha_init=1 / 2, actor_alpha_scale=1 / math.sqrt(8), actor_bc_alpha=0.0,
    critic_use_cdq=True, critic_num_blocks=2, critic_hidden_dim=16, critic_c_shift=3.0,
    critic_num_bins=21, critic_scaler_init=math.sqrt(2 / 16),
    critic_scaler_scale=math.sqrt(2 / 16), critic_min_v=-5.0, critic_max_v=5.0,
    critic_alpha_init=1 / 3, critic_alpha_scale=1 / 4, target_tau=0.005,
    temp_initial_value=0.01, temp_target_entropy=-0.5 * ACT, temp_target_entropy_coef=-0.5,
    gamma=0.99, n_step=1,
)

# flax module path -> rlzoo module path, for the actor's and one critic member's trees
ACTOR = {
    "embedder/w/hyper_dense/kernel": "net.embedder.linear.weight",
    "embedder/scaler/scaler": "net.embedder.scaler.scaler",
    "encoder/layers_0/mlp/w1/hyper_dense/kernel": "net.blocks.0.up.weight",
    "encoder/layers_0/mlp/scaler/scaler": "net.blocks.0.up_scaler.scaler",
    "encoder/layers_0/mlp/w2/hyper_dense/kernel": "net.blocks.0.down.weight",
    "encoder/layers_0/alpha_scaler/scaler": "net.blocks.0.alpha.scaler",
    "predictor/mean_w1/hyper_dense/kernel": "net.heads.0.inner.weight",
    "predictor/mean_scaler/scaler": "net.heads.0.scaler.scaler",
    "predictor/mean_w2/hyper_dense/kernel": "net.heads.0.outer.weight",
    "predictor/mean_bias": "net.heads.0.bias",
    "predictor/std_w1/hyper_dense/kernel": "net.heads.1.inner.weight",
    "predictor/std_scaler/scaler": "net.heads.1.scaler.scaler",
    "predictor/std_w2/hyper_dense/kernel": "net.heads.1.outer.weight",
    "predictor/std_bias": "net.heads.1.bias",
}
CRITIC = {
    "embedder/w/hyper_dense/kernel": "net.embedder.linear.weight",
    "embedder/scaler/scaler": "net.embedder.scaler.scaler",
    "predictor/w1/hyper_dense/kernel": "net.heads.0.inner.weight",
    "predictor/scaler/scaler": "net.heads.0.scaler.scaler",
    "predictor/w2/hyper_dense/kernel": "net.heads.0.outer.weight",
    "predictor/value_bias": "net.heads.0.bias",
}
for i in range(2):
    CRITIC.update({
        f"encoder/layers_{i}/mlp/w1/hyper_dense/kernel": f"net.blocks.{i}.up.weight",
        f"encoder/layers_{i}/mlp/scaler/scaler": f"net.blocks.{i}.up_scaler.scaler",
        f"encoder/layers_{i}/mlp/w2/hyper_dense/kernel": f"net.blocks.{i}.down.weight",
        f"encoder/layers_{i}/alpha_scaler/scaler": f"net.blocks.{i}.alpha.scaler",
    })


def flatten(tree: Any, prefix: str = "") -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for key, value in tree.items():
        path = f"{prefix}/{key}" if prefix else key
        out.update(flatten(value, path) if hasattr(value, "items") else {path: np.asarray(value)})
    return out


def to_rlzoo(actor: Any, critic: Any, target: Any, temperature: Any,
             moments: bool = False) -> dict[str, np.ndarray]:
    """The four networks' weights as rlzoo state-dict entries ([E, in, out], [E, 1, d]); with
    ``moments``, the Adam first moments (optax's ``mu``) of the three trained ones instead."""
    def tree(net: Any) -> Any:
        return net.opt_state[0].mu if moments else net.params

    state: dict[str, np.ndarray] = {}
    for path, value in flatten(tree(actor)).items():
        value = value[None]  # members = 1
        state[f"actor.{ACTOR[path]}"] = value if value.ndim == 3 else value[:, None]
    for name, net in (("critic", critic), ("target_critic", target)):
        if moments and name == "target_critic":
            continue
        for path, value in flatten(tree(net)["VmapSimbaV2Critic_0"]).items():
            state[f"{name}.{CRITIC[path]}"] = value if value.ndim == 3 else value[:, None]
    state["tuner.log_alpha"] = np.asarray(tree(temperature)["log_temp"])
    return state


def main(source: str, out: str) -> None:
    sys.path.insert(0, source)
    import jax
    import jax.numpy as jnp
    from scale_rl.agents.simbaV2.simbaV2_agent import (
        SimbaV2Config,
        _init_simbav2_networks,
        _update_simbav2_networks,
    )
    from tensorflow_probability.substrates import jax as tfp

    cfg = SimbaV2Config(**SETTINGS)
    rng, actor, critic, target, temperature = _init_simbav2_networks(OBS, ACT, cfg)
    data = np.random.default_rng(0)
    batch = {
        "observation": data.normal(size=(BATCH, OBS)).astype(np.float32),
        "action": np.tanh(data.normal(size=(BATCH, ACT))).astype(np.float32),
        "reward": data.uniform(-1, 1, size=BATCH).astype(np.float32),
        "terminated": (data.uniform(size=BATCH) < 0.25).astype(np.float32),
        "next_observation": data.normal(size=(BATCH, OBS)).astype(np.float32),
    }
    record: dict[str, np.ndarray] = {f"batch/{k}": v for k, v in batch.items()}
    record.update({f"init/{k}": v for k, v in to_rlzoo(actor, critic, target, temperature).items()})
    unit = tfp.distributions.MultivariateNormalDiag(jnp.zeros((BATCH, ACT)), jnp.ones((BATCH, ACT)))
    for update in range(2):
        # the reference splits its key into (next rng, actor key, critic key) at every update
        _, actor_key, critic_key = jax.random.split(rng, 3)
        record[f"noise{update}/actor"] = np.asarray(unit.sample(seed=actor_key))
        record[f"noise{update}/critic"] = np.asarray(unit.sample(seed=critic_key))
        # the noise is the one the reference's policy draws: it samples tanh(mean + std * noise)
        dist, _ = actor(observations=jnp.asarray(batch["observation"]))
        base = dist.distribution
        mean, std = base.mean(), base.stddev()
        want = np.tanh(np.asarray(mean) + np.asarray(std) * record[f"noise{update}/actor"])
        np.testing.assert_allclose(np.asarray(dist.sample(seed=actor_key)), want, atol=1e-6)
        rng, actor, critic, target, temperature, info = _update_simbav2_networks(
            rng=rng, actor=actor, critic=critic, target_critic=target, temperature=temperature,
            batch={k: jnp.asarray(v) for k, v in batch.items()}, gamma=cfg.gamma,
            n_step=cfg.n_step, actor_bc_alpha=cfg.actor_bc_alpha,
            critic_use_cdq=cfg.critic_use_cdq, critic_min_v=cfg.critic_min_v,
            critic_max_v=cfg.critic_max_v, critic_num_bins=cfg.critic_num_bins,
            target_tau=cfg.target_tau, temp_target_entropy=cfg.temp_target_entropy,
        )
        if update == 1:  # the state after both updates (the losses are kept for each)
            state = to_rlzoo(actor, critic, target, temperature)
            record.update({f"after{update}/{k}": v for k, v in state.items()})
            moments = to_rlzoo(actor, critic, target, temperature, moments=True)
            record.update({f"mu{update}/{k}": v for k, v in moments.items()})
        for key in ("actor/loss", "critic/loss", "temperature/loss", "actor/entropy"):
            record[f"info{update}/{key}"] = np.asarray(info[key])
    np.savez_compressed(out, **record)
    print(f"wrote {out}: {len(record)} arrays")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
