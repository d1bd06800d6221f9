"""FlashSAC over a thousand updates at its default widths, with the reward scaler on: the
official PyTorch code against ``algo=flashsac``, from the same weights, on the same batches of
the same growing replay, with the same noise.

tests/fixtures/flashsac_reference.npz checks three updates of tiny networks weight by weight,
normalizers off; this checks the curves of a run at the settings of conf/algo/flashsac.yaml
(Hopper-v5's dims, obs 11, act 3; actor 2 blocks of 128, critic 2 blocks of 256, 101 bins on
[-5, 5], clipped double Q; batch 512, gamma 0.99, tau 0.01, temperature 0.01 at start, target
std 0.15, actor every 2nd update, rates 3e-4 cosine to 1.5e-4 at optimizer step ``UPDATES``, no
warm-up; the reward scaler with G_max 5; no observation normalizer, the networks' batch norms
keep the observation statistics). Everything runs in rlzoo's environment (torch):

1. the replay: ``START + UPDATES`` raw transitions of an rlzoo Hopper env under uniform random
   actions (seed 0; the steps that only reset dropped), as ``algo.learning_starts`` random steps
   would collect them; rlzoo's initial weights (``torch.manual_seed(0)``).
2. ``record CHECKOUT FIXTURE [N]`` (github Holiday-Robot/FlashSAC at commit
   87edc9061150ae9e962dd84e6544e27a1554b3ab, only ``flash_rl/`` read; run on the CPU as
   scripts/flashsac_reference.py explains: a stub ``jax`` module, TorchDynamo disabled): loads
   those weights into ``_init_flashsac_networks``'s networks and runs the official loop's part
   after collection, as ``FlashSACAgent.process_transition`` and ``update`` do: before update u
   the buffer holds the first ``START + u`` transitions, the official ``RewardNormalizer`` has
   been fed their rewards and end flags one by one, the batch (rows :func:`batch_indices`)
   has its rewards scaled by it, and ``_update_networks`` runs unchanged
   (``do_actor_update = u % 2 == 0``). Recorded per update: the :data:`CURVES`; the policy
   samples' unit noise is drawn in order from ``torch.Generator().manual_seed(1)`` (the
   fixture keeps a digest of it, not the noise).
3. ``check FIXTURE [N]``: rlzoo's first N updates against the curves, with the largest relative
   gaps over the first 1, 10, 100, ... updates (tests/test_flashsac_long.py runs the first
   ``TEST_UPDATES``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

OBS, ACT, BATCH = 11, 3, 512
START, UPDATES, TEST_UPDATES = 10_000, 1_000, 100
GAMMA, G_MAX = 0.99, 5.0
# curves: losses, mean Q (both critics at the batch's actions, batch statistics, before the
# step), temperature and entropy (the actor's updates only: NaN at the others), each
# optimizer's learning rate, the reward scaler's divisor, var(G) and max|G| (before the update)
# and batch norms' running statistics (:data:`NORMS`; means over entries, after the update)
CURVES = ("critic_loss", "q_mean", "actor_loss", "temperature", "entropy", "temperature_loss",
          "lr_critic", "lr_actor", "reward_scale", "return_var", "return_max",
          "actor_in_mean", "actor_in_var", "critic_in_mean", "critic_in_var",
          "critic_out_mean", "critic_out_var", "target_out_mean", "target_out_var")
# the batch norms recorded (official name -> rlzoo's): the actor's and the critic's input norms
# (the observation statistics; the target's input norm sees the critic's inputs) and the last
# block's output norm of the critic and of the target critic
NORMS = {"actor": ("embedder.norm", "actor.net.input_norm"),
         "critic": ("embedder.norm", "critic.net.input_norm"),
         "critic_out": ("encoder.1.norm2", "critic.net.blocks.1.down_norm"),
         "target": ("encoder.1.norm2", "target_critic.net.blocks.1.down_norm")}


def batch_indices(updates: int) -> np.ndarray:
    """``[updates, BATCH]`` replay rows: update u draws uniformly from the first ``START + u``
    rows (seed 1)."""
    highs = START + np.arange(updates)[:, None]
    return np.random.default_rng(1).integers(0, highs, size=(updates, BATCH))


def digest(*arrays: Any) -> np.ndarray:
    """float64 sums and sums of squares of each array: a check that two builds agree."""
    return np.array([f(np.asarray(a, np.float64)) for a in arrays
                     for f in (np.sum, lambda x: np.sum(x * x))])


def replay(size: int = START + UPDATES) -> dict[str, np.ndarray]:
    """``size`` raw transitions (obs, action, reward, next_obs, terminated, truncated) of an
    rlzoo Hopper env under uniform random actions; the steps that only reset dropped."""
    from hydra import compose, initialize_config_module

    from rlzoo.config.build import make_env

    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=["algo=flashsac", "env=Hopper"])
    env = make_env(cfg, 1, 0)
    rng = np.random.default_rng(0)
    obs = env.reset(seed=0)[0][0]
    names = ("obs", "action", "reward", "next_obs", "terminated", "truncated")
    rows: dict[str, list[Any]] = {k: [] for k in names}
    while len(rows["obs"]) < size:
        action = rng.uniform(-1.0, 1.0, size=(1, ACT)).astype(np.float32)
        r = env.step(action)
        if not r.reset_step[0]:
            for key, value in zip(names, (obs, action[0], r.reward[0], r.obs[0],
                                          r.terminated[0], r.truncated[0])):
                rows[key].append(value)
        obs = r.obs[0]
    env.close()
    return {k: np.asarray(v, dtype=np.float32) for k, v in rows.items()}


def rlzoo_flashsac(updates: int = UPDATES) -> Any:
    """``algo=flashsac`` at its defaults (reward scaler on) for Hopper's dims, the cosine
    ending at step ``updates``, no warm-up, weights from ``torch.manual_seed(0)``."""
    import torch
    from hydra import compose, initialize_config_module

    from rlzoo.algos.base import EnvSpec
    from rlzoo.config.build import build_algorithm

    overrides = ["algo=flashsac", "env=Hopper", f"algo.lr_decay_updates={updates}",
                 "algo.lr_warmup_updates=0"]
    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    assert cfg.normalize.reward and not cfg.normalize.obs and cfg.algo.batch_size == BATCH
    torch.manual_seed(0)
    spec = EnvSpec(obs_dim=OBS, act_dim=ACT, max_episode_steps=1000)
    return build_algorithm(cfg, spec, torch.device("cpu"))


def weights(algo: Any) -> dict[str, np.ndarray]:
    """The trained networks' parameters and batch-norm statistics (and log temperature), by
    rlzoo's state-dict names: no exploration, reward-scaler or constant entries."""
    modules = algo.state_dict()["modules"]
    return {k: v.numpy().copy() for k, v in modules.items() if k != "tuner.log_prob_shift"
            and not k.startswith(("exploration.", "reward_scaler."))}


def load_into_official(init: dict[str, np.ndarray], nets: dict[str, Any]) -> None:
    """rlzoo's ``init`` into the official networks ``nets`` (actor, critic, target: their
    ``nn.Module``), inverting scripts/flashsac_reference.py's name maps: each official tensor
    is probed with its element ids to find where the map puts each element."""
    import torch
    from flashsac_reference import actor_to_rlzoo, critic_to_rlzoo

    maps = {"actor": actor_to_rlzoo, "critic": lambda t: critic_to_rlzoo(t, "critic"),
            "target": lambda t: critic_to_rlzoo(t, "target_critic")}
    for name, net in nets.items():
        tensors = net.state_dict()
        for key, value in tensors.items():
            probe = {k: torch.zeros_like(v, dtype=torch.float32) for k, v in tensors.items()}
            probe[key] = torch.arange(1, value.numel() + 1, dtype=torch.float32).view(
                value.shape)
            flat = torch.zeros(value.numel(), dtype=torch.float32)
            found = 0
            for out_name, ids in maps[name](probe).items():
                mask = ids != 0
                found += int(mask.sum())
                flat[torch.from_numpy(ids[mask].astype(np.int64) - 1)] = torch.from_numpy(
                    init[out_name][mask])
            if found == 0:  # not rlzoo's (the critic's support, bin_values): kept
                continue
            assert found == value.numel(), key
            with torch.no_grad():
                value.copy_(flat.view(value.shape))


def official_networks(checkout: str, updates: int) -> tuple[Any, Any, dict[str, np.ndarray]]:
    """The official config at conf/algo/flashsac.yaml's settings (rates decaying over
    ``updates``), its ``_init_flashsac_networks``' four networks loaded with rlzoo's initial
    weights (checked by mapping them back), and those weights: ``(cfg, (actor, critic,
    target, temperature), init)``."""
    import math
    import types

    import torch

    jax = types.ModuleType("jax")  # flash_rl/types.py names jax.numpy.ndarray in a Union only
    jax.numpy = types.ModuleType("jax.numpy")  # type: ignore[attr-defined]
    jax.numpy.ndarray = type("ndarray", (), {})  # type: ignore[attr-defined]
    sys.modules.setdefault("jax", jax)
    sys.modules.setdefault("jax.numpy", jax.numpy)  # type: ignore[attr-defined]
    sys.path[:0] = [checkout, os.path.dirname(__file__)]
    from flash_rl.agents.flashSAC.agent import FlashSACConfig, _init_flashsac_networks
    from flashsac_reference import SETTINGS, state

    cfg = FlashSACConfig(**{
        **SETTINGS, "normalize_reward": True, "normalized_G_max": G_MAX,
        "sample_batch_size": BATCH, "learning_rate_init": 3e-4, "learning_rate_peak": 3e-4,
        "learning_rate_end": 1.5e-4, "learning_rate_warmup_step": 0,
        "learning_rate_decay_step": updates, "actor_hidden_dim": 128, "critic_hidden_dim": 256,
        "critic_num_bins": 101, "critic_target_update_tau": 0.01, "gamma": GAMMA,
        "temp_target_entropy": 0.5 * ACT * math.log(2 * math.pi * math.e * 0.15**2)})
    nets = _init_flashsac_networks(OBS, OBS, ACT, cfg, torch.device("cpu"))
    actor, critic, target, temperature = nets
    init = weights(rlzoo_flashsac(updates))
    load_into_official(init, {"actor": actor.network, "critic": critic.network,
                              "target": target.network})
    with torch.no_grad():
        temperature.network.log_temp.fill_(float(init["tuner.log_alpha"]))
    loaded = state(actor, critic, target, temperature)
    assert loaded.keys() == init.keys()
    for key, value in init.items():
        np.testing.assert_array_equal(loaded[key], value, err_msg=key)
    return cfg, nets, init


def record(checkout: str, out: str, updates: int = UPDATES) -> None:
    """Step 2 of the module docstring: the official code's ``updates`` updates -> ``out``."""
    import math

    import torch
    import torch.distributions.normal as normal

    cfg, (actor, critic, target, temperature), init = official_networks(checkout, updates)
    from flash_rl.agents.flashSAC.agent import _update_networks
    from flash_rl.agents.utils.reward_normalization import RewardNormalizer

    cpu = torch.device("cpu")
    noise = torch.Generator().manual_seed(1)
    draws = []

    def standard_normal(shape: Any, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        sample = torch.randn(tuple(shape), generator=noise, dtype=dtype)
        draws.append(digest(sample.numpy()))
        return sample

    normal._standard_normal = standard_normal  # type: ignore[assignment]
    q_means: list[float] = []

    def q_of_update(module: Any, args: Any, kwargs: Any, output: Any) -> None:
        if kwargs.get("training"):  # update_critic's pass over (s, a) and (s', a')
            q_means.append(float(output[0][:, :BATCH].detach().mean()))

    critic.network.register_forward_hook(q_of_update, with_kwargs=True)
    data = replay(START + updates)
    rows = batch_indices(updates)
    scaler = RewardNormalizer(gamma=GAMMA, G_max=G_MAX, load_rms=False, device=cpu)
    curves: dict[str, list[float]] = {k: [] for k in CURVES}
    seen = 0
    for u in range(updates):
        while seen < START + u:  # process_transition of each transition in the buffer
            scaler.update_reward_stats(*(torch.tensor(data[k][seen:seen + 1]) for k in (
                "reward", "terminated", "truncated")))
            seen += 1
        t = {k: torch.from_numpy(v[rows[u]]) for k, v in data.items()}
        batch = {"observation": t["obs"], "action": t["action"], "terminated": t["terminated"],
                 "next_observation": t["next_obs"], "actor_observation": t["obs"],
                 "actor_next_observation": t["next_obs"],
                 "reward": scaler.normalize_rewards(t["reward"])}
        lrs = [net.optimizer.param_groups[0]["lr"] for net in (critic, actor)]
        info = _update_networks(batch=batch, actor=actor, critic=critic, target_critic=target,
                                temperature=temperature, cfg=cfg, do_actor_update=u % 2 == 0,
                                device=cpu, grad_scaler=None)
        var, g_max = float(scaler.G_rms.var.reshape(())), float(scaler.G_r_max.reshape(()))
        scale = max(math.sqrt(var + scaler.epsilon), g_max / G_MAX)
        values = [info["critic/loss"], q_means[-1]] + [
            info.get(k, math.nan) for k in ("actor/loss", "temperature/value", "actor/entropy",
                                            "temperature/loss")] + lrs + [scale, var, g_max]
        for net, (path, _) in zip((actor, critic, critic, target), NORMS.values()):
            norm = net.network.get_submodule(path)
            values += [norm.running_mean.mean(), norm.running_var.mean()]
        for name, value in zip(CURVES, values):
            curves[name].append(float(value))
        if u % 100 == 0:
            print(u, {k: round(v[-1], 6) for k, v in curves.items()}, flush=True)
    assert len(q_means) == updates
    np.savez_compressed(
        out, **{k: np.asarray(v, np.float32) for k, v in curves.items()},
        updates=np.int64(updates), noise_digest=np.asarray(draws),
        replay_digest=digest(*data.values()), init_digest=digest(*(init[k] for k in sorted(init))),
        index_digest=digest(rows))
    print(f"wrote {out}")


def rlzoo_curves(fixture: dict[str, np.ndarray], updates: int,
                 algo: Any = None) -> dict[str, np.ndarray]:
    """rlzoo's first ``updates`` updates as the fixture's were made (module docstring, step 2,
    with rlzoo's reward scaler fed the same stream and its update scaling the raw batch): the
    :data:`CURVES` ``[updates]``. ``algo``: a built :func:`rlzoo_flashsac` (e.g. one broken on
    purpose); by default a fresh one. The replay, weights, rows and noise must be those the
    fixture was recorded with (digests)."""
    import torch

    from rlzoo.buffers.batch import Batch

    total = int(fixture["updates"])
    algo = rlzoo_flashsac(total) if algo is None else algo
    data = replay(START + total)
    rows = batch_indices(total)
    init = weights(algo)
    for name, value in (("replay", digest(*data.values())),
                        ("init", digest(*(init[k] for k in sorted(init)))),
                        ("index", digest(rows))):
        assert np.allclose(value, fixture[f"{name}_digest"]), f"not the fixture's {name}"
    noise = torch.Generator().manual_seed(1)
    draws: list[np.ndarray] = []

    def draw(like: torch.Tensor) -> torch.Tensor:
        sample = torch.randn(tuple(like.shape), generator=noise, dtype=like.dtype)
        draws.append(digest(sample.numpy()))
        return sample

    tensors = {k: torch.from_numpy(v) for k, v in data.items()}
    buffers = dict(algo.named_buffers())
    scaler, env = algo.reward_scaler, torch.zeros(1, dtype=torch.int64)
    curves: dict[str, list[float]] = {k: [] for k in CURVES}
    real, seen = torch.randn_like, 0
    torch.randn_like = draw  # type: ignore[assignment]
    try:
        for u in range(updates):
            while seen < START + u:
                scaler.update(tensors["reward"][seen:seen + 1],
                              (tensors["terminated"][seen:seen + 1] > 0)
                              | (tensors["truncated"][seen:seen + 1] > 0), env)
                seen += 1
            t = {k: v[torch.from_numpy(rows[u])] for k, v in tensors.items()}
            m = algo.update(Batch(obs=t["obs"], action=t["action"], reward=t["reward"],
                                  next_obs=t["next_obs"], terminated=t["terminated"],
                                  discount=algo.gamma * (1.0 - t["terminated"])))
            lrs = [algo.critic_optimizer.param_groups[0]["lr"],
                   algo.actor_optimizer.param_groups[0]["lr"]]
            values = [m["loss/critic"], m["stats/q_mean"]] + [
                m.get(k, torch.tensor(np.nan)) for k in ("loss/actor", "stats/alpha",
                                                         "stats/entropy", "loss/alpha")]
            values += lrs + [m["stats/reward_scale"], scaler.ret_stats.var, scaler.ret_max]
            for _, prefix in NORMS.values():
                values += [buffers[f"{prefix}.running_mean"].mean(),
                           buffers[f"{prefix}.running_var"].mean()]
            for name, value in zip(CURVES, values):  # a metric may come as [B]: its mean
                curves[name].append(float(torch.as_tensor(value, dtype=torch.float64).mean()))
    finally:
        torch.randn_like = real  # type: ignore[assignment]
    n = len(draws)
    assert np.allclose(np.asarray(draws), fixture["noise_digest"][:n]), "other noise drawn"
    return {k: np.asarray(v, np.float32) for k, v in curves.items()}


def relative_gap(mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """``|mine - theirs| / max(|theirs|, floor)`` per update, ``floor`` = max(1e-3, 5% of the
    mean ``|theirs|`` over the updates compared): entropy, Q, the actor and temperature losses
    cross zero, where a plain relative gap means nothing. 0 where both are NaN (an update
    without an actor step); inf where only one is."""
    floor = max(1e-3, 0.05 * float(np.nanmean(np.abs(theirs))))
    gap = np.abs(mine - theirs) / np.maximum(np.abs(theirs), floor)
    both = np.isnan(mine) & np.isnan(theirs)
    return np.where(both, 0.0, np.where(np.isnan(gap), np.inf, gap))


def check(fixture_file: str, updates: int) -> None:
    """Step 3 of the module docstring: prints the largest relative gap of each curve over the
    first 1, 10, 100, ... updates."""
    with np.load(fixture_file) as f:
        fixture = dict(f)
    mine = rlzoo_curves(fixture, updates)
    marks = sorted({n for n in (1, 10, 100, TEST_UPDATES, 500, 1000, updates) if n <= updates})
    print("max relative gap over the first N updates")
    print(f"{'curve':17s}" + "".join(f"{n:>10d}" for n in marks))
    for name in CURVES:
        gap = relative_gap(mine[name], fixture[name][:updates])
        print(f"{name:17s}" + "".join(f"{gap[:n].max():10.2e}" for n in marks))


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "record":  # TorchDynamo off before torch is imported (module docstring)
        os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
        record(*args[:2], *(int(a) for a in args[2:]))
    elif mode == "check":
        check(args[0], int(args[1]) if len(args) > 1 else UPDATES)
    else:
        raise SystemExit(f"unknown mode {mode!r}: record or check")
