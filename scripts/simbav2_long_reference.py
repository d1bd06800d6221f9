"""SimbaV2 over thousands of updates at its default widths: the official JAX code against
``algo=simbav2``, from the same weights, on the same batches with the same noise.

tests/fixtures/simbav2_reference.npz checks two updates of tiny networks weight by weight; this
checks the curves of a long run at the widths a run uses (Hopper-v5's dims, obs 11, act 3; actor
1 block of 128, critic 2 blocks of 512, 101 bins, clipped double Q; gamma 0.995, tau 0.005,
temperature 0.01 at start, target entropy -0.5 x 3, learning rates 1e-4 -> 5e-5 over ``UPDATES``
updates). Three steps, the middle one in the reference's own stack:

1. ``replay OUT`` (rlzoo's environment): ``REPLAY`` transitions of an rlzoo Hopper env under
   uniform random actions (seed 0) and rlzoo's initial weights (``torch.manual_seed(0)``), with
   the observations standardized and the rewards divided once by the replay's own statistics
   (the normalizers' job in a run, frozen here so that both codes see the same inputs).
2. ``record CHECKOUT REPLAY FIXTURE`` (github dojeon-ai/SimbaV2 at commit
   14fafb27e6f78f0b65d19b8873b4433547a2193c and its pinned stack, see scripts/
   simbav2_reference.py): loads those weights into ``_init_simbav2_networks``'s networks and
   calls ``_update_simbav2_networks`` unchanged ``UPDATES`` times on the batches
   :func:`batch_indices` picks, recording each update's critic loss, actor loss, mean Q (both
   critics at the batch's actions, before the step), temperature (before the step), entropy,
   temperature loss and learning rate, and the PRNG keys its two policy samples use. The one
   substitution: tfp's normal sampler draws ``numpy.random.default_rng(key)`` instead of JAX's
   threefry, so that rlzoo can draw the same noise from the recorded keys (checked against the
   reference's own sample at the first update).
3. ``check FIXTURE [N]`` (rlzoo's environment): rlzoo's run of the first N updates against the
   curves, with the relative differences at updates 10, 100, 1000, ... (tests/
   test_simbav2_long.py runs the first ``TEST_UPDATES`` of them).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

OBS, ACT, BATCH = 11, 3, 256
REPLAY, UPDATES, TEST_UPDATES = 20_000, 1_000, 100
GAMMA, G_MAX = 0.995, 5.0
CURVES = ("critic_loss", "actor_loss", "q_mean", "temperature", "entropy", "temperature_loss",
          "lr")


def batch_indices(updates: int, size: int = REPLAY) -> np.ndarray:
    """``[updates, BATCH]`` replay rows of each update (uniform with replacement, seed 1)."""
    return np.random.default_rng(1).integers(0, size, size=(updates, BATCH))


def key_noise(key: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Standard normal float32 noise of ``shape`` drawn from a PRNG key's two uint32 words."""
    words = [int(w) for w in np.asarray(key, dtype=np.uint32).reshape(-1)]
    count = int(np.prod(shape))
    return np.random.default_rng(words).standard_normal(count, dtype=np.float32).reshape(shape)


def policy_noise(key: np.ndarray) -> np.ndarray:
    """The ``[BATCH, ACT]`` unit noise of a policy sample with ``key``: tfp's diagonal normal
    draws ``[ACT, BATCH]`` and transposes it."""
    return np.ascontiguousarray(key_noise(key, (ACT, BATCH)).T)


def digest(*arrays: np.ndarray) -> np.ndarray:
    """float64 sums and sums of squares of each array: a check that two builds agree."""
    return np.array([f(np.asarray(a, np.float64)) for a in arrays
                     for f in (np.sum, lambda x: np.sum(x * x))])


def rlzoo_transitions() -> dict[str, np.ndarray]:
    """``REPLAY`` raw transitions (obs, action, reward, next_obs, terminated) of an rlzoo Hopper
    env under uniform random actions; the steps that only reset (next-step autoreset) dropped."""
    from hydra import compose, initialize_config_module

    from rlzoo.config.build import make_env

    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=["algo=simbav2", "env=Hopper"])
    env = make_env(cfg, 1, 0)
    rng = np.random.default_rng(0)
    obs = env.reset(seed=0)[0][0]
    rows: dict[str, list[Any]] = {k: [] for k in ("obs", "action", "reward", "next_obs",
                                                  "terminated")}
    while len(rows["obs"]) < REPLAY:
        action = rng.uniform(-1.0, 1.0, size=(1, ACT)).astype(np.float32)
        result = env.step(action)
        if not result.reset_step[0]:
            for key, value in (("obs", obs), ("action", action[0]), ("reward", result.reward[0]),
                               ("next_obs", result.obs[0]),
                               ("terminated", result.terminated[0])):
                rows[key].append(value)
        obs = result.obs[0]
    env.close()
    return {k: np.asarray(v, dtype=np.float32) for k, v in rows.items()}


def replay() -> dict[str, np.ndarray]:
    """:func:`rlzoo_transitions` as the normalizers would hand them, with frozen statistics:
    observations ``(o - mean) / sqrt(var + 1e-8)`` over the replay's observations, rewards
    divided by ``max(std(G), max|G| / G_max)``, ``G`` the discounted return so far of each
    episode (the reward scaler's divisor)."""
    raw = rlzoo_transitions()
    mean, var = raw["obs"].mean(0), raw["obs"].var(0)
    out = {k: (raw[k] - mean) / np.sqrt(var + 1e-8) for k in ("obs", "next_obs")}
    returns, g = [], 0.0
    for r, done in zip(raw["reward"], raw["terminated"]):
        g = GAMMA * g + float(r)
        returns.append(g)
        g = 0.0 if done else g
    divisor = max(float(np.std(returns)), float(np.max(np.abs(returns))) / G_MAX)
    out.update(action=raw["action"], reward=raw["reward"] / divisor,
               terminated=raw["terminated"])
    return {k: v.astype(np.float32) for k, v in out.items()}


def rlzoo_simbav2(updates: int = UPDATES) -> Any:
    """``algo=simbav2`` at its defaults for Hopper's dims (normalizers off: the replay is
    normalized already), rates decaying over ``updates``, weights from ``torch.manual_seed(0)``."""
    import torch
    from hydra import compose, initialize_config_module

    from rlzoo.algos.base import EnvSpec
    from rlzoo.config.build import build_algorithm

    overrides = ["algo=simbav2", "env=Hopper", f"algo.lr_decay_updates={updates}",
                 "normalize.obs=false", "normalize.reward=false"]
    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    torch.manual_seed(0)
    spec = EnvSpec(obs_dim=OBS, act_dim=ACT, max_episode_steps=1000)
    return build_algorithm(cfg, spec, torch.device("cpu"))


def initial_weights() -> dict[str, np.ndarray]:
    """rlzoo's initial actor, critic, target and log temperature, by state-dict name."""
    modules = rlzoo_simbav2().state_dict()["modules"]
    return {k: v.numpy() for k, v in modules.items()
            if k != "tuner.log_prob_shift" and not k.endswith("running_std")}


def official_tree(weights: dict[str, np.ndarray], prefix: str, table: dict[str, str],
                  members: bool) -> dict[str, Any]:
    """rlzoo's ``prefix.*`` weights as a nested flax params tree (scripts/simbav2_reference.py's
    name tables, read backwards): ``[E, in, out]`` kernels and ``[E, 1, d]`` vectors become
    ``[in, out]``/``[d]`` (the actor, one member) or ``[2, in, out]``/``[2, d]`` (the critic)."""
    tree: dict[str, Any] = {}
    for path, name in table.items():
        value = weights[f"{prefix}.{name}"]
        value = value if "kernel" in path else value[:, 0]
        node = tree
        *parents, leaf = path.split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value if members else value[0]
    return {"VmapSimbaV2Critic_0": tree} if members else tree


def sample_from_keys() -> None:
    """tfp's normal sampler (JAX substrate) draws :func:`key_noise` of its seed instead of
    threefry normals: the one change to the reference's run (module docstring)."""
    import jax
    import jax.numpy as jnp
    from tensorflow_probability.substrates.jax.internal import samplers

    def normal(shape, mean=0.0, stddev=1.0, dtype=jnp.float32, seed=None, name=None):  # type: ignore[no-untyped-def]
        shape = tuple(int(s) for s in shape)
        key = samplers.sanitize_seed(seed)
        noise = jax.pure_callback(lambda k: key_noise(np.asarray(k), shape),
                                  jax.ShapeDtypeStruct(shape, jnp.float32), key)
        return (noise * stddev + mean).astype(dtype)

    samplers.normal = normal


def record(checkout: str, replay_file: str, out: str, updates: int = UPDATES) -> None:
    """Step 2 of the module docstring: the reference's ``updates`` updates -> ``out``."""
    sys.path.insert(0, checkout)
    import jax
    import jax.numpy as jnp
    import optax
    from scale_rl.agents.simbaV2.simbaV2_agent import (
        SimbaV2Config,
        _init_simbav2_networks,
        _update_simbav2_networks,
    )
    from simbav2_reference import ACTOR, CRITIC, SETTINGS

    sample_from_keys()
    with np.load(replay_file) as f:
        data = dict(f)
    weights = {k[len("init/"):]: v for k, v in data.items() if k.startswith("init/")}
    widths = dict(actor_hidden_dim=128, critic_hidden_dim=512, critic_num_bins=101)
    cfg = SimbaV2Config(**{
        **SETTINGS, **widths, "learning_rate_decay_step": updates, "gamma": GAMMA,
        "actor_scaler_init": (2 / 128) ** 0.5, "actor_scaler_scale": (2 / 128) ** 0.5,
        "actor_alpha_scale": 1 / 128 ** 0.5, "critic_scaler_init": (2 / 512) ** 0.5,
        "critic_scaler_scale": (2 / 512) ** 0.5, "critic_alpha_scale": 1 / 512 ** 0.5,
        "critic_min_v": -G_MAX, "critic_max_v": G_MAX, "temp_target_entropy": -0.5 * ACT})
    rng, actor, critic, target, temperature = _init_simbav2_networks(OBS, ACT, cfg)
    actor = actor.replace(params=jax.tree.map(jnp.asarray, official_tree(
        weights, "actor", ACTOR, False)))
    critic = critic.replace(params=jax.tree.map(jnp.asarray, official_tree(
        weights, "critic", CRITIC, True)))
    target = target.replace(params=jax.tree.map(jnp.asarray, official_tree(
        weights, "target_critic", CRITIC, True)))
    temperature = temperature.replace(params={"log_temp": jnp.asarray(weights["tuner.log_alpha"])})
    schedule = optax.linear_schedule(cfg.learning_rate_init, cfg.learning_rate_end, updates)
    curves: dict[str, list[float]] = {k: [] for k in CURVES}
    keys = []
    for u, rows in enumerate(batch_indices(updates, len(data["obs"]))):
        batch = {"observation": data["obs"][rows], "action": data["action"][rows],
                 "reward": data["reward"][rows], "terminated": data["terminated"][rows],
                 "next_observation": data["next_obs"][rows]}
        batch = {k: jnp.asarray(v) for k, v in batch.items()}
        _, actor_key, critic_key = jax.random.split(rng, 3)
        keys.append([np.asarray(actor_key), np.asarray(critic_key)])
        if u == 0:  # the reference's own sample is tanh(mean + std * key_noise(its key))
            dist, _ = actor(observations=batch["observation"])
            base = dist.distribution
            want = np.tanh(np.asarray(base.mean()) + np.asarray(base.stddev())
                           * policy_noise(keys[0][0]))
            np.testing.assert_allclose(np.asarray(dist.sample(seed=actor_key)), want, atol=1e-6)
        qs, _ = critic(observations=batch["observation"], actions=batch["action"])
        count = int(actor.opt_state[-1].count)  # optax's schedule step of this update
        rng, actor, critic, target, temperature, info = _update_simbav2_networks(
            rng=rng, actor=actor, critic=critic, target_critic=target, temperature=temperature,
            batch=batch, gamma=cfg.gamma, n_step=cfg.n_step, actor_bc_alpha=cfg.actor_bc_alpha,
            critic_use_cdq=cfg.critic_use_cdq, critic_min_v=cfg.critic_min_v,
            critic_max_v=cfg.critic_max_v, critic_num_bins=cfg.critic_num_bins,
            target_tau=cfg.target_tau, temp_target_entropy=cfg.temp_target_entropy)
        for name, value in (("critic_loss", info["critic/loss"]),
                            ("actor_loss", info["actor/loss"]), ("q_mean", jnp.mean(qs)),
                            ("temperature", info["temperature/value"]),
                            ("entropy", info["actor/entropy"]),
                            ("temperature_loss", info["temperature/loss"]),
                            ("lr", schedule(count))):
            curves[name].append(float(value))
        if u % 100 == 0:
            print(u, {k: round(v[-1], 6) for k, v in curves.items()}, flush=True)
    np.savez_compressed(
        out, **{k: np.asarray(v, np.float32) for k, v in curves.items()},
        keys=np.asarray(keys, np.uint32), decay_updates=np.int64(updates),
        replay_digest=digest(*(data[k] for k in ("obs", "action", "reward", "next_obs",
                                                 "terminated"))),
        init_digest=digest(*(weights[k] for k in sorted(weights))),
        index_digest=digest(batch_indices(updates, len(data["obs"]))))
    print(f"wrote {out}")


def rlzoo_curves(fixture: dict[str, np.ndarray], updates: int,
                 algo: Any = None) -> dict[str, np.ndarray]:
    """rlzoo's first ``updates`` updates on the fixture's batches, each policy sample drawing the
    noise of the reference's key (actor step, then the critic target's next action): the
    :data:`CURVES` ``[updates]``. ``algo``: a built :func:`rlzoo_simbav2` (e.g. one broken on
    purpose); by default a fresh one. The replay, weights and batch rows must be those the
    fixture was recorded from (digests)."""
    import torch

    from rlzoo.buffers.batch import Batch

    decay = int(fixture["decay_updates"])
    algo = rlzoo_simbav2(decay) if algo is None else algo
    data = replay()
    rows = batch_indices(decay)
    assert np.allclose(digest(*(data[k] for k in ("obs", "action", "reward", "next_obs",
                                                  "terminated"))), fixture["replay_digest"])
    weights = {k: v.numpy() for k, v in algo.state_dict()["modules"].items()
               if k != "tuner.log_prob_shift" and not k.endswith("running_std")}
    assert np.allclose(digest(*(weights[k] for k in sorted(weights))), fixture["init_digest"])
    assert np.allclose(digest(rows), fixture["index_digest"])
    tensors = {k: torch.from_numpy(v) for k, v in data.items()}
    noise: list[torch.Tensor] = []
    real = torch.randn_like
    torch.randn_like = lambda like: noise.pop(0).to(like.dtype)  # type: ignore[assignment]
    curves: dict[str, list[float]] = {k: [] for k in CURVES}
    try:
        for u in range(updates):
            noise.extend(torch.from_numpy(policy_noise(k)) for k in fixture["keys"][u])
            t = {k: v[torch.from_numpy(rows[u])] for k, v in tensors.items()}
            m = algo.update(Batch(obs=t["obs"], action=t["action"], reward=t["reward"],
                                  next_obs=t["next_obs"], terminated=t["terminated"],
                                  discount=algo.gamma * (1.0 - t["terminated"])))
            assert not noise, "an update drew other than two policy samples"
            lr = algo.actor_optimizer.param_groups[0]["lr"]
            for name, value in (("critic_loss", m["loss/critic"]), ("actor_loss", m["loss/actor"]),
                                ("q_mean", m["stats/q_mean"]), ("temperature", m["stats/alpha"]),
                                ("entropy", m["stats/entropy"]),
                                ("temperature_loss", m["loss/alpha"]), ("lr", lr)):
                curves[name].append(float(value))
    finally:
        torch.randn_like = real  # type: ignore[assignment]
    return {k: np.asarray(v, np.float32) for k, v in curves.items()}


def relative_gap(mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """``|mine - theirs| / max(|theirs|, 1e-3)`` per update: the agreement measure."""
    return np.abs(mine - theirs) / np.maximum(np.abs(theirs), 1e-3)


def check(fixture_file: str, updates: int) -> None:
    """Step 3 of the module docstring: prints the largest relative gap of each curve over the
    first 10, 100, 1000, ... updates."""
    with np.load(fixture_file) as f:
        fixture = dict(f)
    mine = rlzoo_curves(fixture, updates)
    marks = [n for n in (1, 10, 100, 200, 500, 1000, 2000, updates) if n <= updates]
    print("max relative gap over the first N updates")
    print(f"{'curve':17s}" + "".join(f"{n:>10d}" for n in sorted(set(marks))))
    for name in CURVES:
        gap = relative_gap(mine[name], fixture[name][:updates])
        print(f"{name:17s}" + "".join(f"{gap[:n].max():10.2e}" for n in sorted(set(marks))))


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "replay":  # rlzoo's environment
        np.savez(args[0], **replay(), **{f"init/{k}": v for k, v in initial_weights().items()})
    elif mode == "record":  # the reference's environment
        record(*args[:3], *(int(a) for a in args[3:]))
    elif mode == "check":  # rlzoo's environment
        check(args[0], int(args[1]) if len(args) > 1 else UPDATES)
    else:
        raise SystemExit(f"unknown mode {mode!r}: replay, record or check")
