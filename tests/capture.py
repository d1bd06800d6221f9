"""Every algorithm built as the CLI builds it (tiny networks), random batches for its update, and
an emulation of CUDA-graph capture that runs on the CPU.

``traced_updates`` is what ``rlzoo.run.accel.GraphedUpdate`` does on CUDA, with
``torch.fx.experimental.proxy_tensor.make_fx`` in place of ``torch.cuda.graph``: a few eager
warm-up updates per phase, then one update traced into an aten graph (the trace runs it once for
real), then every later update of that phase replays the graph on the new batch. Tensors the
update reads but does not take as inputs (weights, optimizer moments, step counters, learning
rates, normalizer statistics) enter the graph by reference, as a CUDA graph reads them by
address; a host-side value (a Python float learning rate, a ``.item()``, a ``.tolist()``, a
Python branch on a tensor) is frozen into the graph at trace time, as capture freezes it. So an
update that replays equal to its eager twin reads nothing from the host that changes between
updates; one that does not, diverges, and the test comparing them fails.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf, open_dict
from torch.fx.experimental.proxy_tensor import make_fx

from rlzoo.algos.base import Algorithm, EnvSpec
from rlzoo.buffers.batch import Batch
from rlzoo.buffers.rollout import Rollout
from rlzoo.config.build import build_algorithm
from rlzoo.config.normalization import attach_normalizers
from tests.from_yaml import composed

SINGLE = EnvSpec(obs_dim=5, act_dim=2, action_low=(-2.0, -1.0), action_high=(2.0, 1.0))
MULTI = EnvSpec(obs_dim=6, act_dim=3, n_agents=3, state_dim=10, act_dims=(3, 2, 3))
# name -> config overrides: every algorithm, the critic kinds and the normalizers
CASES: dict[str, tuple[str, ...]] = {
    "sac": ("algo=sac",),
    "td3": ("algo=td3",),
    "dsac_t": ("algo=dsac_t",),
    "redq": ("algo=redq",),
    "stac": ("algo=stac",),
    "sac-categorical": ("algo=sac", "critic=categorical"),
    "sac-tqc": ("algo=sac", "critic=tqc", "critic.quantiles=5"),
    "ddpg": ("algo=ddpg",),
    # batch renorm past its warm-up within the test (the switch is on the device counter)
    "crossq": ("algo=crossq", "critic.network.norm.warmup_steps=4",
               "algo.actor.network.norm.warmup_steps=1"),
    "sac-action_sequence": ("algo=sac", "critic=action_sequence"),
    "sac-normalized": ("algo=sac", "normalize.obs=true", "normalize.reward=true"),
    "simbav2": ("algo=simbav2", "algo.gamma=0.995", "algo.lr_decay_updates=6"),
    "flashsac": ("algo=flashsac", "algo.lr_decay_updates=9", "++algo.lr_warmup_updates=2",
                 "algo.lr_init_fraction=0.5"),
    "maddpg": ("algo=maddpg",),
    "hasac": ("algo=hasac",),
    "coma": ("algo=coma", "algo.critic_steps=3", "algo.target_update_every=4"),
}
MULTI_AGENT = ("maddpg", "hasac", "coma")


def _shrink(node: Any) -> None:
    """Every hidden size of a composed config down to 16 (fast tests, same code paths)."""
    if isinstance(node, DictConfig):
        for key in list(node.keys()):
            value = node[key]
            if key == "hidden" and OmegaConf.is_list(value):
                node[key] = [16] * max(1, min(2, len(value)))
            elif key == "hidden_dim" and isinstance(value, int):
                node[key] = 16
            elif key == "num_blocks" and isinstance(value, int):
                node[key] = 1
            else:
                _shrink(value)


def config(name: str, *extra: str) -> DictConfig:
    """The composed config of case ``name`` (and ``extra`` overrides), networks shrunk."""
    cfg = composed(*CASES[name], *extra)
    with open_dict(cfg):
        _shrink(cfg)
    return cfg


def spec_of(name: str) -> EnvSpec:
    return MULTI if name.split("-")[0] in MULTI_AGENT else SINGLE


def build(name: str, device: str | torch.device = "cpu", seed: int = 0, *extra: str
          ) -> Algorithm:
    """Case ``name``'s algorithm on ``device``, as ``rlzoo.run.assemble`` builds it (normalizers
    attached, with statistics of some random data so that they change the inputs)."""
    cfg, spec = config(name, *extra), spec_of(name)
    torch.manual_seed(seed)
    algo = build_algorithm(cfg, spec, torch.device(device))
    attach_normalizers(algo, cfg, spec)
    algo.to(device)
    g = torch.Generator().manual_seed(seed + 100)
    if algo.obs_normalizer is not None:
        shape = algo.obs_normalizer.shape
        algo.obs_normalizer.update((torch.randn(64, *shape, generator=g) * 3 + 1).to(device))
    if algo.reward_scaler is not None:
        for _ in range(5):
            envs = algo.reward_scaler.ret.shape[-1]
            algo.reward_scaler.update((torch.randn(envs, generator=g) * 4).to(device),
                                      torch.zeros(envs, dtype=torch.bool, device=device),
                                      torch.arange(envs, device=device))
    return algo


def batches(name: str, algo: Algorithm, n: int, device: str | torch.device = "cpu",
            size: int = 16, seed: int = 1) -> list[Any]:
    """``n`` random inputs of ``algo.update``: replay ``Batch``es, or ``Rollout``s (COMA)."""
    g = torch.Generator().manual_seed(seed)
    spec = spec_of(name)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g)

    out: list[Any] = []
    for _ in range(n):
        if algo.on_policy:
            T, E, N = 4, 2, spec.n_agents
            ended = (torch.rand(T, E, generator=g) < 0.3).float()
            pre = randn(T, E, N, spec.act_dim)
            item: Any = Rollout(
                obs=randn(T + 1, E, N, spec.obs_dim), state=randn(T + 1, E, spec.state_dim),
                action=torch.tanh(pre), pre_tanh=pre, reward=randn(T, E),
                agent_reward=randn(T, E, N), terminated=ended * (randn(T, E) > 0),
                ended=ended, valid=torch.ones(T, E))
        elif spec.multi_agent:
            N = spec.n_agents
            item = Batch(obs=randn(size, N, spec.obs_dim),
                         action=torch.rand(size, N, spec.act_dim, generator=g) * 2 - 1,
                         reward=randn(size), next_obs=randn(size, N, spec.obs_dim),
                         discount=torch.full((size,), 0.99), terminated=torch.zeros(size),
                         state=randn(size, spec.state_dim),
                         next_state=randn(size, spec.state_dim), agent_reward=randn(size, N))
        else:
            width = spec.act_dim * algo.action_horizon
            item = Batch(obs=randn(size, spec.obs_dim) * 2,
                         action=torch.rand(size, width, generator=g) * 2 - 1,
                         reward=randn(size), next_obs=randn(size, spec.obs_dim) * 2,
                         discount=0.99 * (torch.rand(size, generator=g) > 0.1).float(),
                         terminated=torch.zeros(size))
            if algo.action_horizon > 1:
                item.action_mask = torch.ones(size, algo.action_horizon)
        out.append(to_device(item, device))
    return out


def to_device(item: Any, device: str | torch.device) -> Any:
    """A ``Batch`` or ``Rollout`` with every tensor on ``device``."""
    return dataclasses.replace(item, **{
        f.name: getattr(item, f.name).to(device) for f in dataclasses.fields(item)
        if isinstance(getattr(item, f.name), torch.Tensor)})


def tensor_fields(item: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(item)
            if isinstance(getattr(item, f.name), torch.Tensor)]


class TracedUpdate:
    """``algo.update`` with CUDA-graph semantics, emulated on any device (module docstring).

    Args:
        algo: the algorithm (``make_capturable`` already applied, as ``cudagraphs`` does).
        warmup: eager updates per phase before its trace (``rlzoo.run.accel.WARMUP_UPDATES``).
    """

    def __init__(self, algo: Algorithm, warmup: int = 3) -> None:
        self.algo, self.warmup = algo, warmup
        self.graphs: dict[Hashable, Callable[..., Any]] = {}
        self.eager: dict[Hashable, int] = {}
        self.replays = 0

    def __call__(self, item: Any) -> dict[str, torch.Tensor]:
        phase = self.algo.update_phase()
        names = tensor_fields(item)
        values = [getattr(item, n) for n in names]
        if phase not in self.graphs and self.eager.get(phase, 0) < self.warmup:
            self.eager[phase] = self.eager.get(phase, 0) + 1
            return self.algo.update(item)
        if phase not in self.graphs:
            def update(*xs: torch.Tensor) -> dict[str, torch.Tensor]:
                return self.algo.update(dataclasses.replace(item, **dict(zip(names, xs))))

            self.graphs[phase] = make_fx(update)(*values)  # runs this update once, for real
            return {}
        with torch.no_grad():  # the trace holds the backward ops; a replay records nothing
            metrics = self.graphs[phase](*values)
        self.algo.updates += 1  # the update's one host-side effect, as GraphedUpdate replays it
        self.replays += 1
        return metrics


def state_tensors(algo: Algorithm) -> dict[str, torch.Tensor]:
    """Every tensor of ``algo``'s state: weights, buffers, optimizer state (flattened)."""
    out: dict[str, torch.Tensor] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            out[prefix] = value
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}/{k}", v)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(f"{prefix}/{i}", v)

    walk("", algo.state_dict())
    return out
