"""FlashSAC's repeated exploration noise (official PyTorch code github Holiday-Robot/FlashSAC at
commit 87edc90, ``flash_rl/agents/flashSAC/agent.py``: ``_sample_flashsac_actions``).

A training action is ``tanh(mean(s) + std(s) * noise)`` with standard normal ``noise [E, A]``
(one row per training env) that is *held* for ``n`` consecutive steps, ``n`` drawn from a
zeta (power-law) distribution truncated to ``1..n_max``: ``P(n) ~ n^-mu``. When the count of
steps under the current noise reaches ``n`` (or at the very first step) a fresh ``noise`` and a
fresh ``n`` are drawn; all envs of one run share the count (as the reference does). With
``n_max = 1`` every step draws fresh noise: SAC's own exploration.

The state (``noise``, ``count``, ``repeat``) is in buffers, so it is checkpointed (resume stays
bit-exact) and stacked with the weights when seeds train as one group (``rlzoo.algos.seed_axis``),
each drawing its own noise and its own ``n``.
"""

from __future__ import annotations

import torch
from torch import nn


class RepeatedNoise(nn.Module):
    """Standard normal noise ``[E, A]`` repeated for a zeta-distributed number of steps.

    Args:
        envs: E, the training envs (one noise row each).
        act_dim: A.
        zeta_mu: mu > 0, the power of the zeta distribution (the reference: 2.0).
        zeta_max: n_max >= 1, the longest repetition (16; 1 = fresh noise every step).
    """

    def __init__(self, envs: int, act_dim: int, zeta_mu: float, zeta_max: int) -> None:
        super().__init__()
        if envs < 1:
            raise ValueError(f"algo.noise_envs must be >= 1, got {envs}")
        if not zeta_mu > 0.0:
            raise ValueError(f"algo.noise_zeta_mu must be > 0, got {zeta_mu}")
        if zeta_max < 1:
            raise ValueError(f"algo.noise_zeta_max must be >= 1, got {zeta_max}")
        n = torch.arange(1, int(zeta_max) + 1, dtype=torch.float32)
        pmf = n ** (-float(zeta_mu))
        # the CDF follows from the config: not saved
        self.register_buffer("cdf", torch.cumsum(pmf / pmf.sum(), 0), persistent=False)
        self.register_buffer("noise", torch.zeros(int(envs), int(act_dim)))
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))  # steps under noise
        self.register_buffer("repeat", torch.ones((), dtype=torch.int64))  # n of that noise

    def draw(self, like: torch.Tensor) -> torch.Tensor:
        """The noise for one training step, shaped like ``like [E, A]`` (advances the state);
        a batch of another shape (e.g. ``Policy(deterministic=False)`` on any batch) gets fresh
        noise and leaves the state alone."""
        if like.shape != self.noise.shape:
            return torch.randn_like(like)
        renew = (self.count == 0) | (self.count >= self.repeat)
        fresh = torch.randn_like(like)
        u = torch.rand((), device=like.device)
        n = torch.argmax((u < self.cdf).to(torch.int64)) + 1
        noise = torch.where(renew, fresh, self.noise)
        self.noise.copy_(noise)
        self.repeat.copy_(torch.where(renew, n, self.repeat))
        self.count.copy_(torch.where(renew, torch.zeros_like(self.count), self.count) + 1)
        return noise
