"""Running input and reward normalizers (SimbaV2, Lee et al., ICML 2025; FlashSAC).

Both follow SimbaV2's ``scale_rl/agents/wrappers/normalization.py`` and ``utils.py``
(github.com/dojeon-ai/SimbaV2, commit 14fafb2): a running mean and variance merged batch by batch
with Chan et al.'s parallel update (gymnasium's ``RunningMeanStd``), starting from mean 0,
variance 1 and a prior count of ``1e-4``; no clipping. The statistics are float64, as they end
up in SimbaV2 (numpy promotes its float32 statistics to float64 at the first float64
observation or return), and the normalized values are computed in float64 and returned in the
input's dtype. FlashSAC (github.com/Holiday-Robot/FlashSAC, commit 87edc90,
``flash_rl/agents/utils/reward_normalization.py``) has the same reward rule in float32 with the
prior count entering only the variance term; it has no observation normalizer.

* :class:`ObservationNormalizer`: ``(x - mean) / sqrt(var + epsilon)`` per feature.
* :class:`RewardScaler`: ``r / max(sqrt(var(G) + epsilon), max|G| / G_max)``, where ``G`` is a
  running discounted return per training env, ``G <- gamma (1 - done) G + r``, and ``var(G)``
  its running variance over envs and steps.

The statistics are buffers, so they live in the algorithm's ``state_dict`` (checkpoints,
``policy.pt``, the exported graph) like any other tensor of it. They change only through
``update``, which the training loop calls with collected data (``rlzoo.config.normalization``), in
place (the buffers are never reassigned: CUDA graphs keep pointing at them); applying them
never changes them, so evaluation and a loaded ``Policy`` see frozen statistics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

# SimbaV2's (and gymnasium's) RunningMeanStd starts from mean 0, variance 1 and this count.
PRIOR_COUNT = 1e-4


def _check_loaded(state_dict: dict[str, Any], prefix: str,
                  rules: dict[str, tuple[str, Callable[[torch.Tensor], torch.Tensor]]]) -> None:
    """``ValueError`` naming the first tensor ``prefix + name`` of ``state_dict`` (being
    loaded) whose elements are not all ``rules[name]``."""
    for name, (what, ok) in rules.items():
        value = state_dict.get(prefix + name)
        if torch.is_tensor(value) and value.is_floating_point() and not bool(ok(value).all()):
            raise ValueError(f"normalizer statistic {prefix + name} is not {what} in every "
                             "entry; no update produces that")


class RunningMeanStd(nn.Module):
    """Running mean and (population) variance of ``[*shape]`` samples.

    Buffers: ``mean``, ``var`` ``[*shape]`` (0 and 1 at the start), ``count`` ``[]``
    (``PRIOR_COUNT`` at the start), all float64.

    Args:
        shape: the shape of one sample (``()`` for scalars).
    """

    def __init__(self, shape: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.shape = tuple(int(s) for s in shape)
        self.register_buffer("mean", torch.zeros(self.shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(self.shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(PRIOR_COUNT, dtype=torch.float64))

    def extra_repr(self) -> str:
        return f"shape={self.shape}"

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str,
                              *args: Any, **kwargs: Any) -> None:
        """Refuse statistics no update could produce before any is loaded (``ValueError``
        naming the buffer): ``mean`` not finite, ``var`` negative or not finite, ``count``
        not positive or not finite."""
        rules = {"mean": ("finite", lambda t: torch.isfinite(t)),
                 "var": ("finite and >= 0", lambda t: torch.isfinite(t) & (t >= 0)),
                 "count": ("finite and > 0", lambda t: torch.isfinite(t) & (t > 0))}
        _check_loaded(state_dict, prefix, rules)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge the samples ``x [n, *shape]`` (``n >= 1``) into the statistics, in place::

            delta = mean(x) - mean;  total = count + n
            mean += delta n / total
            var = (var count + var(x) n + delta^2 count n / total) / total;  count = total

        (SimbaV2's ``update_mean_var_count_from_moments``; ``var(x)`` is the population
        variance).
        """
        x = x.to(torch.float64)
        n = x.shape[0]
        batch_mean = x.mean(dim=0)
        batch_var = x.var(dim=0, unbiased=False)
        total = self.count + n
        ratio = n / total
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * n + delta.square() * self.count * ratio
        self.mean.add_(delta * ratio)
        self.var.copy_(m2 / total)
        self.count.copy_(total)


class ObservationNormalizer(RunningMeanStd):
    """SimbaV2's observation normalizer: ``(x - mean) / sqrt(var + epsilon)`` per feature.

    Applying it (``forward``) never changes the statistics; the loop updates them from the
    observations the training envs hand the policy (``rlzoo.config.normalization``).

    Args:
        shape: one observation's shape: ``(O,)``; per agent ``(N, O)`` for a multi-agent env
            (each agent its own statistics; zero padding stays exactly 0); ``(S,)`` for a
            global state.
        epsilon: added to the variance under the square root (SimbaV2: 1e-8).
    """

    def __init__(self, shape: tuple[int, ...], epsilon: float) -> None:
        super().__init__(shape)
        if not epsilon > 0.0:
            raise ValueError(f"normalize.epsilon must be > 0, got {epsilon}")
        self.epsilon = float(epsilon)

    def extra_repr(self) -> str:
        return f"shape={self.shape}, epsilon={self.epsilon}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [..., *shape]`` (raw) -> normalized, same shape and dtype."""
        return ((x.to(torch.float64) - self.mean) / torch.sqrt(self.var + self.epsilon)).to(x.dtype)


class RewardScaler(nn.Module):
    """SimbaV2's reward normalizer (``RewardNormalizer``; FlashSAC's is the same rule).

    Per training env a running discounted return ``G <- gamma (1 - done) G + r`` (``done`` is
    the transition's own end flag, as in SimbaV2 and gymnasium's ``NormalizeReward``: the reward
    that ends an episode starts a fresh ``G``); after each step the envs' ``G`` are merged into a
    running variance ``var(G)`` and ``max|G|`` is tracked. A reward is scaled by

        ``r / max(sqrt(var(G) + epsilon), max|G| / G_max)``

    so the scaled returns are of order 1 and at most about ``G_max`` in size (SimbaV2 pairs it
    with a categorical critic on ``[-G_max, G_max]``). It is applied at update time to the
    sampled batch (``Algorithm.normalized_inputs``), with the statistics as they are then; the
    replay buffer keeps raw rewards (as SimbaV2 and FlashSAC do).

    Buffers (float64): ``ret [E]`` (``G`` per training env), ``ret_max []`` (``max|G|``), and
    ``ret_stats`` (a :class:`RunningMeanStd` of ``G``).

    Args:
        num_envs: E, the training envs (``G`` is kept per env).
        gamma: the discount of ``G`` (the algorithm's).
        g_max: ``G_max`` (SimbaV2 and FlashSAC: 5).
        epsilon: added to ``var(G)`` under the square root (1e-8).
    """

    def __init__(self, num_envs: int, gamma: float, g_max: float, epsilon: float) -> None:
        super().__init__()
        if not g_max > 0.0:
            raise ValueError(f"normalize.reward_g_max must be > 0, got {g_max}")
        if not epsilon > 0.0:
            raise ValueError(f"normalize.epsilon must be > 0, got {epsilon}")
        self.gamma, self.g_max, self.epsilon = float(gamma), float(g_max), float(epsilon)
        self.register_buffer("ret", torch.zeros(int(num_envs), dtype=torch.float64))
        self.register_buffer("ret_max", torch.zeros((), dtype=torch.float64))
        self.ret_stats = RunningMeanStd(())

    def extra_repr(self) -> str:
        return f"gamma={self.gamma}, g_max={self.g_max}, epsilon={self.epsilon}"

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str,
                              *args: Any, **kwargs: Any) -> None:
        """Refuse a running return or ``max|G|`` that is not finite, or a negative ``max|G|``
        (``ValueError``), before anything is loaded (``ret_stats`` checks its own)."""
        rules = {"ret": ("finite", lambda t: torch.isfinite(t)),
                 "ret_max": ("finite and >= 0", lambda t: torch.isfinite(t) & (t >= 0))}
        _check_loaded(state_dict, prefix, rules)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def scale(self) -> torch.Tensor:
        """The divisor ``max(sqrt(var(G) + epsilon), max|G| / G_max)`` (``[]``)."""
        return torch.maximum(torch.sqrt(self.ret_stats.var + self.epsilon),
                             self.ret_max / self.g_max)

    def forward(self, reward: torch.Tensor) -> torch.Tensor:
        """``reward [...]`` -> scaled, same shape and dtype."""
        return (reward.to(torch.float64) / self.scale()).to(reward.dtype)

    @torch.no_grad()
    def update(self, reward: torch.Tensor, done: torch.Tensor, envs: torch.Tensor) -> None:
        """Fold one vector step into the statistics, in place.

        Args:
            reward: ``[E]`` the step's (team) rewards.
            done: ``[E]`` bool, the step ended the episode (terminated or truncated).
            envs: ``[n]`` int64, ``n >= 1``: the envs whose step was a transition (a reset call
                is none and leaves that env's ``G`` alone).
        """
        ret, ret_max = self.ret, self.ret_max
        new = self.gamma * (1.0 - done.to(ret.dtype)) * ret + reward.to(ret.dtype)
        seen = new[envs]
        ret[envs] = seen
        self.ret_stats.update(seen)
        ret_max.copy_(torch.maximum(ret_max, seen.abs().max()))
