"""Actors: a tanh-squashed Gaussian policy (SAC family), a deterministic tanh policy (TD3, MADDPG).

Actions live in ``[-1, 1]``; scaling to an environment's bounds happens once, at the env boundary.
An actor with ``members > 1`` holds one independent network per member (e.g. per agent) as a
batched ensemble and maps ``[E, B, obs_dim]`` to ``[E, B, act_dim]``; with ``members == 1``
it maps ``[B, obs_dim]`` to ``[B, act_dim]``.

The trunk is an ``EnsembleMLP`` (``hidden``, ``activation``, ``layer_norm``, ``dropout``) unless
``network`` builds another one (``rlzoo.nets.ensemble.make_network``; e.g. SimbaV2's
``HypersphericalMLP``). Dropout is active when the actor samples (collection, losses) and off in
``mode``, the deterministic action used for evaluation and export.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from rlzoo.nets.ensemble import NetworkFactory, dropout_off, make_network

LOG_2 = math.log(2.0)
HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def tanh_log_abs_det_jacobian(pre_tanh: torch.Tensor) -> torch.Tensor:
    """``log(1 - tanh(u)^2)`` computed stably as ``2 (log 2 - u - softplus(-2u))``, elementwise."""
    return 2.0 * (LOG_2 - pre_tanh - F.softplus(-2.0 * pre_tanh))


def tanh_gaussian_log_prob(
    noise: torch.Tensor, log_std: torch.Tensor, pre_tanh: torch.Tensor
) -> torch.Tensor:
    """Elementwise log-density ``[..., A]`` of ``a = tanh(u)``, ``u = mean + noise * std``:
    ``log N(u; mean, std)`` (with ``(u - mean) / std = noise``) minus the tanh change of
    variables. Sum it over the action dimension for the action's log-probability."""
    log_normal = -(0.5 * noise.pow(2) + log_std + HALF_LOG_2PI)
    return log_normal - tanh_log_abs_det_jacobian(pre_tanh)


LOG_STD_SQUASHES = ("clamp", "tanh", "softplus")


class _EnsembleActorBase(nn.Module):
    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        out_features: int,
        heads: int,
        hidden: Sequence[int],
        activation: str,
        members: int,
        layer_norm: bool,
        dropout: float,
        network: NetworkFactory | None,
    ) -> None:
        super().__init__()
        self.obs_dim, self.act_dim, self.members = obs_dim, act_dim, members
        self.net = make_network(
            network, members, obs_dim, out_features, heads, hidden, activation, layer_norm,
            dropout, key="algo.actor",
        )

    def _trunk(self, obs: torch.Tensor) -> torch.Tensor:
        out = self.net(obs)
        return out.squeeze(0) if self.members == 1 and obs.dim() == 2 else out


class TanhGaussianActor(_EnsembleActorBase):
    """``a = tanh(u)``, ``u ~ N(mean(s), std(s))``, with the exact tanh-corrected log-probability.

    Args:
        obs_dim: observation size.
        act_dim: action size |A| (for an action-chunk actor: H * |A|).
        hidden: hidden sizes.
        activation: hidden activation.
        log_std_min, log_std_max: range of the log standard deviation.
        layer_norm: LayerNorm (no affine) after each hidden layer of the MLP trunk.
        dropout: dropout probability after each hidden layer of the MLP trunk, in ``[0, 1)``
            (off in ``mode``).
        log_std_squash: how the raw output becomes the std: ``clamp``, log std
            ``clamp(raw, log_std_min, log_std_max)``; ``tanh``, log std ``min + (max - min)
            (1 + tanh(raw)) / 2`` (SimbaV2's ``HyperNormalTanhPolicy``); ``softplus``, std
            ``softplus(max(raw, log_std_min))``, unbounded above (``log_std_max`` unused; about
            0.69 at ``raw = 0``), STAC's author's ``SquashedGaussianHead`` (github
            ugurcanozalp/rl-warehouse ``rlwarehouse/nets/heads.py``).
        eval_samples: the evaluation action (``mode``): 0, ``tanh(mean)``; N, the mean of N
            sampled actions ``tanh(mean + std noise)`` (STAC's author averages 10).
        members: independent networks evaluated as one batched ensemble (the algorithm passes
            its N for per-agent actors; 1, one network, otherwise).
        network: builds the trunk instead of the MLP (``make_network``; ``None``: the MLP,
            unless ``net=...`` sets ``algo.actor.network``).

    The hyperparameters have no default here: each is declared once, with its meaning, in the
    ``algo.actor`` node of each ``conf/algo/*.yaml``. A run dir written before a key existed is
    built with the value it ran with (``rlzoo.config.added_keys``).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: Sequence[int],
        activation: str,
        log_std_min: float,
        log_std_max: float,
        layer_norm: bool,
        dropout: float,
        log_std_squash: str,
        eval_samples: int,
        members: int = 1,
        network: NetworkFactory | None = None,
    ) -> None:
        super().__init__(
            obs_dim, act_dim, 2 * act_dim, 2, hidden, activation, members, layer_norm, dropout,
            network,
        )
        if log_std_min >= log_std_max:
            raise ValueError(
                f"actor log_std_min ({log_std_min}) must be below log_std_max ({log_std_max})"
            )
        if log_std_squash not in LOG_STD_SQUASHES:
            raise ValueError(
                f"algo.actor.log_std_squash must be one of {', '.join(LOG_STD_SQUASHES)}, got "
                f"{log_std_squash!r}"
            )
        if isinstance(eval_samples, bool) or not isinstance(eval_samples, int) \
                or not 0 <= eval_samples <= 10_000:
            raise ValueError(f"algo.actor.eval_samples must be an integer in [0, 10000], got "
                             f"{eval_samples!r}")
        self.log_std_min, self.log_std_max = log_std_min, log_std_max
        self.log_std_squash, self.eval_samples = log_std_squash, eval_samples

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return the pre-squash ``mean`` and the ``log_std`` (bounded, or the log of the
        softplus std), each ``[..., B, act_dim]``."""
        mean, log_std = self._trunk(obs).chunk(2, dim=-1)
        if self.log_std_squash == "softplus":
            return mean, F.softplus(log_std.clamp(min=self.log_std_min)).log()
        if self.log_std_squash == "tanh":
            half_range = 0.5 * (self.log_std_max - self.log_std_min)
            return mean, self.log_std_min + half_range * (1.0 + torch.tanh(log_std))
        return mean, log_std.clamp(self.log_std_min, self.log_std_max)

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterized sample: ``action [..., B, act_dim]`` in (-1, 1), ``log_prob [..., B]``.
        """
        mean, log_std = self(obs)
        noise = torch.randn_like(mean)
        pre_tanh = mean + noise * log_std.exp()
        return torch.tanh(pre_tanh), tanh_gaussian_log_prob(noise, log_std, pre_tanh).sum(-1)

    def log_prob(self, obs: torch.Tensor, pre_tanh: torch.Tensor) -> torch.Tensor:
        """Log-probability ``[..., B]`` of the action ``tanh(pre_tanh)`` (exact, no clipping)."""
        mean, log_std = self(obs)
        noise = (pre_tanh - mean) * torch.exp(-log_std)
        return tanh_gaussian_log_prob(noise, log_std, pre_tanh).sum(-1)

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        """The evaluation action ``[..., B, act_dim]`` (no dropout): ``tanh(mean)``, or with
        ``eval_samples = N > 0`` the mean of N sampled actions (random, then)."""
        with dropout_off(self):
            mean, log_std = self(obs)
            if self.eval_samples == 0:
                return torch.tanh(mean)
            noise = torch.randn((self.eval_samples, *mean.shape), dtype=mean.dtype,
                                device=mean.device)
            return torch.tanh(mean + noise * log_std.exp()).mean(0)


class DeterministicActor(_EnsembleActorBase):
    """``a = tanh(f(s))`` (TD3, MADDPG). Exploration noise is the algorithm's business.

    Args:
        obs_dim, act_dim: sizes.
        hidden: hidden sizes.
        activation: hidden activation.
        layer_norm, dropout, members, network: as ``TanhGaussianActor``'s (each hyperparameter
            declared once, in the ``algo.actor`` node of ``conf/algo/*.yaml``).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: Sequence[int],
        activation: str,
        layer_norm: bool,
        dropout: float,
        members: int = 1,
        network: NetworkFactory | None = None,
    ) -> None:
        super().__init__(
            obs_dim, act_dim, act_dim, 1, hidden, activation, members, layer_norm, dropout,
            network,
        )

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs [..., B, obs_dim]`` -> action ``[..., B, act_dim]`` in (-1, 1)."""
        return torch.tanh(self._trunk(obs))

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        """``forward`` without dropout: the evaluation action."""
        with dropout_off(self):
            return self(obs)
