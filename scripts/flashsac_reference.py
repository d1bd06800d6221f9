"""Record three FlashSAC updates of the official PyTorch code, for tests/test_flashsac.py.

Writes ``tests/fixtures/flashsac_reference.npz``: the official networks' initial weights, a batch,
the Gaussian noise of each policy sample, the losses of each of three updates (the first and
third step the actor, all three the critic), and every weight, batch-norm running statistic and
Adam first moment (the running mean of the gradients) after the three, all under rlzoo's names
and shapes. tests/test_flashsac.py loads the initial weights into ``rlzoo.algos.FlashSAC``, runs
the same updates with the same noise and checks every tensor and loss; the test needs only this
file.

Run (not part of the test suite) with a checkout of github Holiday-Robot/FlashSAC at commit
87edc9061150ae9e962dd84e6544e27a1554b3ab (or ``git archive`` of that commit: only ``flash_rl/``
is read) in rlzoo's own environment (torch, gymnasium, numpy)::

    python scripts/flashsac_reference.py /path/to/FlashSAC tests/fixtures/flashsac_reference.npz

It imports the reference's ``_init_flashsac_networks`` and ``_update_networks``
(``flash_rl/agents/flashSAC/agent.py``) and runs them unchanged on the CPU, with
``use_compile=False``, ``use_amp=False`` and TorchDynamo disabled (the reference decorates its
target-projection helpers with ``torch.compile``; disabled, they run eagerly as written). Two
things are this script's own: ``flash_rl/types.py`` imports ``jax.numpy`` only to name a type
in a ``Union``, so a stub ``jax`` module with an ``ndarray`` class is put in ``sys.modules``
first (jax is not installed here and nothing of it runs); and ``torch.distributions.Normal``'s
standard-normal draw is replaced by one that hands out pre-drawn noise and records it, so that
rlzoo's test can feed its own sampler the same noise.
"""

from __future__ import annotations

import math
import os
import sys
import types
from typing import Any

os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")  # before torch is imported

import numpy as np  # noqa: E402
import torch  # noqa: E402

OBS, ACT, BATCH = 3, 2, 16
ACTOR_BLOCKS, ACTOR_HIDDEN, CRITIC_BLOCKS, CRITIC_HIDDEN, BINS = 2, 8, 2, 16, 21
UPDATES = 3
SETTINGS: dict[str, Any] = dict(
    seed=0, normalize_reward=False, normalized_G_max=5.0, asymmetric_observation=False,
    device_type="cpu", buffer_max_length=100, buffer_min_length=10, buffer_device_type="cpu",
    sample_batch_size=BATCH,
    # a schedule that moves at every step: warm-up from 2e-4 to 3e-4, cosine to 1.5e-4 at step 4
    learning_rate_init=2e-4, learning_rate_peak=3e-4, learning_rate_end=1.5e-4,
    learning_rate_warmup_rate=0.0, learning_rate_warmup_step=1, learning_rate_decay_rate=0.0,
    learning_rate_decay_step=4,
    actor_num_blocks=ACTOR_BLOCKS, actor_hidden_dim=ACTOR_HIDDEN, actor_bc_alpha=0.0,
    actor_noise_zeta_mu=2.0, actor_noise_zeta_max=16, actor_update_period=2,
    critic_num_blocks=CRITIC_BLOCKS, critic_hidden_dim=CRITIC_HIDDEN, critic_num_bins=BINS,
    critic_min_v=-5.0, critic_max_v=5.0, critic_target_update_tau=0.01,
    temp_initial_value=0.01, temp_target_sigma=0.15,
    temp_target_entropy=0.5 * ACT * math.log(2 * math.pi * math.e * 0.15**2),
    gamma=0.99, n_step=1, use_compile=False, compile_mode="default", use_amp=False,
    load_optimizer=True, load_reward_normalizer=False,
)


def block_names(prefix: str, blocks: int) -> dict[str, str]:
    """reference module path -> rlzoo module path, for the parts both networks share."""
    names = {"embedder.norm": "net.input_norm", "post_norm": "net.post_norm"}
    for i in range(blocks):
        names.update({f"encoder.{i}.w1": f"net.blocks.{i}.up",
                      f"encoder.{i}.w2": f"net.blocks.{i}.down",
                      f"encoder.{i}.norm1": f"net.blocks.{i}.up_norm",
                      f"encoder.{i}.norm2": f"net.blocks.{i}.down_norm"})
    return {f"{prefix}{k}": v for k, v in names.items()}


def actor_to_rlzoo(tensors: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """The actor's tensors (``FlashSACActor`` names) as rlzoo's ``actor.*`` entries: members
    first, ``[1, in, out]`` weights, ``[1, 1, d]`` gains, biases and statistics; the mean and
    log-std layers side by side in one head (mean first)."""
    names = block_names("", ACTOR_BLOCKS)
    out: dict[str, np.ndarray] = {}
    head_w, head_b = [], []
    for name, value in tensors.items():
        value = value.detach().float().clone()  # a copy: the updates change the tensors in place
        module, _, leaf = name.rpartition(".")
        if module in ("predictor.mean_w.w", "predictor.std_w.w"):
            head_w.append((module, value.T))
            continue
        if name in ("predictor.mean_bias", "predictor.std_bias"):
            head_b.append((name, value))
            continue
        if module == "embedder.w.w":
            out["actor.net.embedder.weight"] = value.T[None].numpy()
            continue
        module = module.removesuffix(".w")  # UnitLinear holds an nn.Linear named w
        target = names[module]
        if leaf == "weight" and ("w1" in module or "w2" in module):
            out[f"actor.{target}.weight"] = value.T[None].numpy()
        else:
            out[f"actor.{target}.{leaf}"] = value[None, None].numpy()
    head_w.sort(key=lambda t: t[0] != "predictor.mean_w.w")
    head_b.sort(key=lambda t: t[0] != "predictor.mean_bias")
    if head_w:
        out["actor.net.head.weight"] = torch.cat([w for _, w in head_w], 1)[None].numpy()
    if head_b:
        out["actor.net.head_bias"] = torch.cat([b for _, b in head_b])[None, None].numpy()
    return out


def critic_to_rlzoo(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, np.ndarray]:
    """A critic's tensors (``FlashSACDoubleCritic`` names, ``[2, ...]``) as rlzoo's
    ``{prefix}.*`` entries (``[2, in, out]`` weights, ``[2, 1, d]`` the rest)."""
    names = block_names("", CRITIC_BLOCKS)
    out: dict[str, np.ndarray] = {}
    for name, value in tensors.items():
        value = value.detach().float().clone()  # a copy: the updates change the tensors in place
        module, _, leaf = name.rpartition(".")
        if name == "predictor.bin_values":
            continue  # rlzoo's support follows from the config
        if name == "predictor.w.weight":
            out[f"{prefix}.net.head.weight"] = value.transpose(1, 2).numpy()
        elif name == "predictor.bias":
            out[f"{prefix}.net.head_bias"] = value[:, None].numpy()
        elif name == "embedder.w.weight":
            out[f"{prefix}.net.embedder.weight"] = value.transpose(1, 2).numpy()
        elif leaf == "weight" and (module.endswith(".w1") or module.endswith(".w2")):
            out[f"{prefix}.{names[module]}.weight"] = value.transpose(1, 2).numpy()
        else:
            out[f"{prefix}.{names[module]}.{leaf}"] = value[:, None].numpy()
    return out


def state(actor: Any, critic: Any, target: Any, temperature: Any) -> dict[str, np.ndarray]:
    """Every parameter and buffer of the four networks under rlzoo's names."""
    out = actor_to_rlzoo(actor.network.state_dict())
    out.update(critic_to_rlzoo(critic.network.state_dict(), "critic"))
    out.update(critic_to_rlzoo(target.network.state_dict(), "target_critic"))
    out["tuner.log_alpha"] = temperature.network.log_temp.detach().reshape(()).clone().numpy()
    return out


def moments(actor: Any, critic: Any, temperature: Any) -> dict[str, np.ndarray]:
    """Adam's first moments (``exp_avg``) of the three trained networks, under rlzoo's names."""
    def first_moments(net: Any) -> dict[str, torch.Tensor]:
        opt = net.optimizer
        return {name: opt.state[p]["exp_avg"] for name, p in net.network.named_parameters()}

    out = actor_to_rlzoo(first_moments(actor))
    out.update(critic_to_rlzoo(first_moments(critic), "critic"))
    out["tuner.log_alpha"] = first_moments(temperature)["log_temp"].reshape(()).clone().numpy()
    return out


def main(source: str, out: str) -> None:
    jax = types.ModuleType("jax")
    jax_numpy = types.ModuleType("jax.numpy")
    jax_numpy.ndarray = type("ndarray", (), {})  # type: ignore[attr-defined]
    jax.numpy = jax_numpy  # type: ignore[attr-defined]
    sys.modules.setdefault("jax", jax)
    sys.modules.setdefault("jax.numpy", jax_numpy)
    sys.path.insert(0, source)
    import torch.distributions.normal as normal
    from flash_rl.agents.flashSAC.agent import (
        FlashSACConfig,
        _init_flashsac_networks,
        _update_networks,
    )

    torch.manual_seed(0)
    cfg = FlashSACConfig(**SETTINGS)
    actor, critic, target, temperature = _init_flashsac_networks(
        OBS, OBS, ACT, cfg, torch.device("cpu"))
    data = np.random.default_rng(0)
    batch = {
        "observation": data.normal(size=(BATCH, OBS)).astype(np.float32) * 2 + 1,
        "action": np.tanh(data.normal(size=(BATCH, ACT))).astype(np.float32),
        "reward": data.uniform(-1, 1, size=BATCH).astype(np.float32),
        "terminated": (data.uniform(size=BATCH) < 0.25).astype(np.float32),
        "next_observation": data.normal(size=(BATCH, OBS)).astype(np.float32) * 2 + 1,
    }
    record: dict[str, np.ndarray] = {f"batch/{k}": v for k, v in batch.items()}
    record.update({f"init/{k}": v for k, v in state(actor, critic, target, temperature).items()})
    tensors = {k: torch.from_numpy(v) for k, v in batch.items()}
    tensors["actor_observation"] = tensors["observation"]
    tensors["actor_next_observation"] = tensors["next_observation"]

    draws: list[np.ndarray] = []
    noise = torch.Generator().manual_seed(1)

    def standard_normal(shape: Any, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        sample = torch.randn(tuple(shape), generator=noise, dtype=dtype)
        draws.append(sample.numpy().copy())
        return sample.to(device)

    normal._standard_normal = standard_normal  # type: ignore[assignment]
    for update in range(UPDATES):
        info = _update_networks(
            batch=dict(tensors), actor=actor, critic=critic, target_critic=target,
            temperature=temperature, cfg=cfg, do_actor_update=update % 2 == 0,
            device=torch.device("cpu"), grad_scaler=None,
        )
        for key, value in info.items():
            record[f"info{update}/{key}"] = np.asarray(value.detach())
    for i, draw in enumerate(draws):
        record[f"noise/{i}"] = draw
    record.update({f"after/{k}": v for k, v in state(actor, critic, target, temperature).items()})
    record.update({f"mu/{k}": v for k, v in moments(actor, critic, temperature).items()})
    np.savez_compressed(out, **record)
    print(f"wrote {out}: {len(record)} arrays, {len(draws)} noise draws")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
