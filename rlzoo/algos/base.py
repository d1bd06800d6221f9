"""The algorithm contract shared by every method in the zoo.

An ``Algorithm`` is an ``nn.Module`` that owns its networks, optimizers and tuner. The loop
(``rlzoo.run.loop``) calls ``act`` to collect data and ``update`` with what the algorithm's
contract says: an off-policy algorithm gets a replay ``Batch`` drawn as its ``sampling`` declares
(n-step, action horizon, discount); an on-policy one (``on_policy = True``) collects with
``explore(obs) -> (action, pre_tanh)`` and gets each full ``Rollout`` once. ``update`` returns
tensors (never ``.item()``: the loop converts them, so CUDA never waits), each logged as its mean.

An algorithm's code is written for one run: every method that reads the weights (parameters and
buffers) inside ``update`` or ``act`` is called through ``Algorithm.compute``, losses are stepped
with ``Algorithm.step`` (or ``backward``), and a random draw made outside ``compute`` (e.g. a
permutation) through ``Algorithm.draw``. That is all ``Algorithm.seed_axis`` (a ``SeedAxis``)
needs to train K seeds of the algorithm as one group; the algorithm's code never sees the group.

Input normalizers (``rlzoo.nets.normalizers``; ``normalize.*`` in the config) are attached to an
algorithm by ``attach_normalizers`` and applied by the base class around every subclass's
``act``, ``explore`` and ``update``: those always receive *raw* observations (and rewards) and the
subclass code sees normalized ones, so an algorithm file stays written for the inputs its paper
uses and ``Policy`` / ``Policy.export`` take raw observations.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from rlzoo.algos.saved import check_weights, load_algorithm_state
from rlzoo.algos.schedules import ScheduledRates
from rlzoo.algos.seed_axis import SeedAxis
from rlzoo.buffers.batch import Batch
from rlzoo.buffers.sampling import Sampling
from rlzoo.nets.critics import Critic
from rlzoo.nets.normalizers import ObservationNormalizer, RewardScaler
from rlzoo.optim.adam import adam

__all__ = ["Algorithm", "EnvSpec", "adam", "check_tau", "log_action_scale"]


def check_tau(tau: float) -> float:
    """``tau``, the polyak rate of an algorithm's target networks, if ``0 < tau <= 1``."""
    if not 0.0 < tau <= 1.0:
        raise ValueError(f"algo.tau must be in (0, 1], got {tau}")
    return tau


@dataclass(frozen=True)
class EnvSpec:
    """What an algorithm needs to know about its environment.

    Attributes:
        obs_dim: observation size (per agent, padded to the largest, for multi-agent envs).
        act_dim: action size (per agent, padded likewise); actions live in ``[-1, 1]``.
        n_agents: N (1 for single-agent envs).
        state_dim: global state size (multi-agent; 0 otherwise).
        act_dims: true action size of each agent (multi-agent).
        action_low, action_high: the env's own action bounds, onto which the ``[-1, 1]`` actions
            are mapped affinely at the env boundary: ``act_dim`` entries (single-agent) or
            ``n_agents * act_dim`` entries, agent-major (multi-agent; padding entries are
            ignored). ``()`` (the default) means unknown, taken as ``[-1, 1]``.
        max_episode_steps: the env's episode limit in env steps (its time limit), or ``None``
            (none, or unknown).
    """

    obs_dim: int
    act_dim: int
    n_agents: int = 1
    state_dim: int = 0
    act_dims: tuple[int, ...] = ()
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()
    max_episode_steps: int | None = None

    def __post_init__(self) -> None:
        size = self.n_agents * self.act_dim if self.multi_agent else self.act_dim
        for name in ("action_low", "action_high"):
            bound = getattr(self, name)
            if bound and len(bound) != size:
                raise ValueError(f"EnvSpec.{name} has {len(bound)} entries, expected {size}")
        if bool(self.action_low) != bool(self.action_high):
            raise ValueError("EnvSpec needs both action_low and action_high, or neither")

    @property
    def multi_agent(self) -> bool:
        return self.n_agents > 1 or self.state_dim > 0


def log_action_scale(spec: EnvSpec) -> torch.Tensor:
    """``log((high - low) / 2)`` per action entry of ``spec`` (float32): ``[act_dim]`` for a
    single-agent env, ``[n_agents, act_dim]`` for a multi-agent one with 0 on each agent's padding;
    all 0 when the bounds are unknown. ``-inf`` marks an entry with ``high == low``.

    A function, not a method: ``hydra.utils.instantiate`` hands an algorithm its ``spec`` as a
    structured config, which keeps the fields but not the methods.
    """
    multi_agent = spec.n_agents > 1 or spec.state_dim > 0
    shape = (spec.n_agents, spec.act_dim) if multi_agent else (spec.act_dim,)
    if not spec.action_low:
        return torch.zeros(shape)
    low = torch.tensor([float(x) for x in spec.action_low], dtype=torch.float64).reshape(shape)
    high = torch.tensor([float(x) for x in spec.action_high], dtype=torch.float64).reshape(shape)
    log_scale = torch.log((high - low) / 2)
    if multi_agent:
        dims = [int(d) for d in spec.act_dims] or [spec.act_dim] * spec.n_agents
        real = torch.arange(spec.act_dim)[None, :] < torch.tensor(dims)[:, None]
        log_scale = torch.where(real, log_scale, torch.zeros_like(log_scale))
    return log_scale.float()


def _raw_obs_in(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``act`` / ``explore`` taking raw observations: normalized first when the algorithm has an
    observation normalizer (once: a nested call, e.g. ``act`` calling ``explore``, passes them
    on as they are)."""

    @functools.wraps(fn)
    def call(self: Algorithm, obs: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if self.obs_normalizer is None or self._inputs_normalized:
            return fn(self, obs, *args, **kwargs)
        self._inputs_normalized = True
        try:
            return fn(self, self.obs_normalizer(obs), *args, **kwargs)
        finally:
            self._inputs_normalized = False

    call._raw_inputs = True  # type: ignore[attr-defined]
    return call


def _raw_batch_in(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``update`` taking a raw ``Batch`` / ``Rollout``: normalized first (once) when the
    algorithm has normalizers (``Algorithm.normalized_inputs``); with a reward scaler its
    metrics gain ``stats/reward_scale``, the divisor the batch's rewards were scaled by. Each
    metric that holds more than one value is reported as its mean (``SeedAxis.means``: per
    seed in a group)."""

    @functools.wraps(fn)
    def call(self: Algorithm, batch: Any, *args: Any, **kwargs: Any) -> Any:
        if self._inputs_normalized:  # a nested call: the outer one normalizes and reports
            return fn(self, batch, *args, **kwargs)
        if not self.normalizes:
            return self.seed_axis.means(fn(self, batch, *args, **kwargs))
        batch = self.normalized_inputs(batch)
        if self.reward_scaler is not None:
            scale = self.compute(self.reward_scaler.scale).float()  # before the update
        self._inputs_normalized = True
        try:
            metrics = fn(self, batch, *args, **kwargs)
        finally:
            self._inputs_normalized = False
        if self.reward_scaler is not None and isinstance(metrics, dict):
            metrics["stats/reward_scale"] = scale
        return self.seed_axis.means(metrics)

    call._raw_inputs = True  # type: ignore[attr-defined]
    return call


class Algorithm(nn.Module):
    """Base class. Subclasses set the class attributes and implement ``act`` and ``update``.

    Class attributes:
        supported_critics: critic classes this algorithm can train (checked at construction).
        on_policy: trains from fresh rollouts (``explore`` to act, ``update(Rollout)`` on each
            rollout of ``algo.rollout_steps`` vector steps per env) rather than from replay.
        multi_agent: expects multi-agent envs (``[B, N, ...]`` observations).
        graph_safe: ``update`` branches only as ``update_phase()`` says, draws its randomness
            on the device, reads no host value that changes between updates (learning-rate
            schedules are device tensors) and changes no host-side state but ``self.updates``,
            so ``cudagraphs`` can capture it (see ``rlzoo/run/accel.py``).
        graph_unsafe_reason: why a class that is not ``graph_safe`` cannot be captured (the
            line ``cudagraphs=auto`` prints at start and ``cudagraphs=true`` refuses with).
    """

    supported_critics: ClassVar[tuple[type[Critic], ...]] = (Critic,)
    on_policy: ClassVar[bool] = False
    multi_agent: ClassVar[bool] = False
    graph_safe: ClassVar[bool] = False
    graph_unsafe_reason: ClassVar[str] = (
        "its class does not declare graph_safe = True (its update may read host-side state "
        "that a captured graph would freeze; docs/extending.md)")

    def __init__(self, spec: EnvSpec, gamma: float, n_step: int) -> None:
        super().__init__()
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"algo.gamma must be in [0, 1], got {gamma}")
        if n_step < 1:
            raise ValueError(f"algo.n_step must be >= 1, got {n_step}")
        self.spec, self.gamma, self.n_step = spec, gamma, n_step
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self.updates = 0  # number of update() calls so far
        self.seed_axis = SeedAxis()  # one run (K seeds: rlzoo.algos.seed_axis.stack_seeds)
        self.obs_normalizer: ObservationNormalizer | None = None
        self.state_normalizer: ObservationNormalizer | None = None
        self.reward_scaler: RewardScaler | None = None
        self._inputs_normalized = False  # inside a wrapped call: inputs already normalized
        # learning rates set on the device from an update clock (SimbaV2, FlashSAC)
        self.lr_schedule: ScheduledRates | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, wrap in (("act", _raw_obs_in), ("explore", _raw_obs_in),
                           ("update", _raw_batch_in)):
            fn = cls.__dict__.get(name)
            if callable(fn) and not getattr(fn, "_raw_inputs", False):
                setattr(cls, name, wrap(fn))

    def attach_normalizers(
        self, obs: ObservationNormalizer | None = None,
        state: ObservationNormalizer | None = None, reward: RewardScaler | None = None,
    ) -> None:
        """Give this algorithm its input normalizers (before the first update); their
        statistics become part of its ``state_dict``."""
        if obs is not None:
            self.obs_normalizer = obs
        if state is not None:
            self.state_normalizer = state
        if reward is not None:
            self.reward_scaler = reward

    @property
    def normalizes(self) -> bool:
        """Whether any input normalizer is attached."""
        return (self.obs_normalizer is not None or self.state_normalizer is not None
                or self.reward_scaler is not None)

    def normalized_inputs(self, batch: Any) -> Any:
        """``batch`` (a ``Batch`` or ``Rollout``, raw, ``[K, ...]`` in a group) with ``obs`` and
        ``next_obs`` normalized by ``obs_normalizer``, ``state`` and ``next_state`` by
        ``state_normalizer`` and ``reward`` (and ``agent_reward``) divided by the reward scale,
        each seed with its own statistics; fields without a normalizer are left as they are."""
        return dataclasses.replace(batch, **self.compute(self._normalized_fields, batch))

    def _normalized_fields(self, batch: Any) -> dict[str, torch.Tensor]:
        """The normalized fields of ``batch`` (see :meth:`normalized_inputs`)."""
        out: dict[str, torch.Tensor] = {}
        for names, normalizer in ((("obs", "next_obs"), self.obs_normalizer),
                                  (("state", "next_state"), self.state_normalizer),
                                  (("reward", "agent_reward"), self.reward_scaler)):
            for name in names:
                value = getattr(batch, name, None)
                if normalizer is not None and value is not None:
                    out[name] = normalizer(value)
        return out

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def action_horizon(self) -> int:
        """H: how many consecutive env actions one call of ``act`` returns (action chunks)."""
        return 1

    @property
    def sampling(self) -> Sampling:
        """What this algorithm's ``update`` expects a replay batch to hold: ``n_step`` returns,
        ``action_horizon``-step action chunks, discounted with ``gamma``. The loop hands it to
        the storage unchanged (on-policy algorithms update on whole rollouts instead)."""
        return Sampling(n_step=self.n_step, horizon=self.action_horizon, gamma=self.gamma)

    def update_phase(self) -> Hashable:
        """Which branches the next ``update`` takes (e.g. TD3: whether the actor steps); one
        CUDA graph is captured per distinct value. Default: an update without branches."""
        return None

    def check_critic_factory(self, factory: Callable[..., Critic]) -> None:
        """Refuse an unsupported critic class in one line before building it (the critic kinds
        take different constructor arguments, so building first would fail less clearly)."""
        cls = getattr(factory, "func", factory)  # hydra hands a functools.partial of the class
        if isinstance(cls, type) and not issubclass(cls, self.supported_critics):
            raise ValueError(self.unsupported_critic(cls))

    def check_critic(self, critic: Critic) -> None:
        """Refuse a critic kind this algorithm cannot train, in one line."""
        if not isinstance(critic, self.supported_critics):
            raise ValueError(self.unsupported_critic(type(critic)))

    @classmethod
    def unsupported_critic(cls, critic: type) -> str:
        """The one line refusing critic class ``critic``: what this algorithm trains instead."""
        kinds = ", ".join(c.__name__ for c in cls.supported_critics)
        article = "an" if critic.__name__[:1] in "AEIOU" else "a"
        return (f"{cls.__name__} cannot train {article} {critic.__name__}; it trains: {kinds} "
                "(choose the critic=<kind> that builds one; docs/critics.md)")

    def forward(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``: how ``compute`` calls a method with the weights swapped in
        (``torch.func.functional_call`` calls ``forward``)."""
        return fn(*args)

    def compute(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` with this algorithm's weights: every method that reads them in
        ``update`` or ``act`` is called through here, so its code is written for one run.

        What it returns is handed on as it is (to ``step``, to other ``compute`` calls, to the
        metrics); its shapes are the seed axis's business: a single run's call is the plain
        call, a seed group's runs it for every seed (``SeedAxis.compute``: in turn on the CPU,
        each seed its single run bit for bit). Draw inside it with torch as a single run would
        (``torch.randn_like``, ``nn.Dropout``): each seed of a group draws its own."""
        return self.seed_axis.compute(self, fn, args)

    def draw(self, fn: Callable[[], torch.Tensor]) -> torch.Tensor:
        """``fn()``, a random draw made outside ``compute`` (e.g. ``torch.randperm``), as each
        run of a seed group draws it for itself (``SeedAxis.draw``); hand the result to
        ``compute`` as an argument."""
        return self.seed_axis.draw(fn)

    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """``obs [B, O]`` -> action ``[B, H * A]`` in ``[-1, 1]``, without gradient."""
        raise NotImplementedError

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One gradient update; returns scalar tensors keyed ``loss/...`` and ``stats/...``."""
        raise NotImplementedError

    def step(
        self, optimizer: torch.optim.Optimizer, loss: torch.Tensor,
        max_grad_norm: float | None = None,
    ) -> None:
        """``zero_grad -> backward -> [clip the gradients' global norm to max_grad_norm] -> step
        -> apply_constraints``.

        ``loss`` is what ``compute`` returned for a scalar loss (see :meth:`backward`); the clip
        is applied per run of a seed group (``SeedAxis.clip_grad_norm``).
        """
        optimizer.zero_grad(set_to_none=True)
        self.backward(loss)
        if max_grad_norm is not None:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            self.seed_axis.clip_grad_norm(params, max_grad_norm)
        optimizer.step()
        self.apply_constraints(optimizer)

    def backward(self, loss: torch.Tensor) -> None:
        """Differentiate ``loss``, a scalar loss as ``compute`` returned it: in a seed group one
        per seed, whose sum is differentiated (seed k's slice of the weights gets exactly seed
        k's gradient)."""
        (loss.sum() if loss.dim() else loss).backward()

    def apply_constraints(self, optimizer: torch.optim.Optimizer) -> None:
        """Call ``project_parameters()`` of every network whose parameters ``optimizer`` steps
        (e.g. SimbaV2's ``HypersphericalMLP``: weights back onto the unit sphere). ``step`` calls
        it after each optimizer step; an algorithm that steps an optimizer itself calls it too.
        Target copies are never projected (the reference's are not: they are polyak averages of
        projected weights). The projection acts on each tensor's last axes, so per member (and
        per seed of a group). The networks are found once per optimizer."""
        cache = self.__dict__.setdefault("_constrained", {})
        modules = cache.get(id(optimizer))
        if modules is None:
            stepped = {id(p) for group in optimizer.param_groups for p in group["params"]}
            modules, names = [], []
            for name, module in self.named_modules():
                if module is self or any(name.startswith(n + ".") for n in names):
                    continue
                if callable(getattr(module, "project_parameters", None)) and any(
                        id(p) in stepped for p in module.parameters()):
                    modules.append(module)
                    names.append(name)
            cache[id(optimizer)] = modules
        for module in modules:
            module.project_parameters()

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """Networks, targets, tuner and every optimizer, plus the update counter."""
        if args or kwargs:  # called as a submodule: behave like nn.Module
            return super().state_dict(*args, **kwargs)
        return {
            "modules": super().state_dict(),
            "optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()},
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> Any:  # type: ignore[override]
        """Put back :meth:`state_dict`, or module weights alone, checked first against this
        algorithm (``rlzoo.algos.saved``; ``ValueError``): nothing loads unless all of it fits."""
        if "modules" not in state:
            check_weights(self, state, "weights")
            return super().load_state_dict(state, strict=strict)
        load_algorithm_state(self, state)
        return None

    def optimizer_steps(self, updates: int) -> int:
        """The most steps one optimizer takes in ``updates`` updates (one each; override if more):
        a checkpoint whose step counts exceed it is refused."""
        return updates

    def _apply(self, fn: Callable[..., Any], recurse: bool = True) -> Any:
        """``nn.Module._apply`` (``to``, ``cuda``, ...), then the schedule's clock and rates
        follow the parameters (they are no buffers: a seed group stacks buffers)."""
        out = super()._apply(fn, recurse)
        schedule = self.__dict__.get("lr_schedule")
        if schedule is not None:
            schedule.to_device()
        return out
