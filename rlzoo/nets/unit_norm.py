"""FlashSAC's norm-bounded residual network (official PyTorch code github Holiday-Robot/FlashSAC
at commit 87edc90, ``flash_rl/agents/flashSAC/layer.py`` and ``network.py``).

Every weight matrix has no bias and unit-norm rows into each output unit (``UnitLinear``, here
``HyperLinear``); every normalization layer's gain (and bias) is kept at norm ``sqrt(d)``; the
features are batch-normalized inside each residual block:

* embedder: ``h_0 = W_e BN(x)`` (the input's batch norm does the work of an observation
  normalizer);
* block (``num_blocks`` of them): ``h <- h + relu(BN_2(W_2 relu(BN_1(W_1 h))))`` (``W_1``: h ->
  ``expansion`` h);
* ``RMSNorm(h)``, then one head ``y = W_o h + b`` (an actor's mean and log std are its two
  halves, each row with its own unit norm, as the reference's two ``UnitLinear``\\ s; a
  categorical critic's logits).

``project_parameters()`` (called by the algorithm after every optimizer step): weight rows to
unit norm; each batch norm's ``(gain, bias)`` jointly to norm ``sqrt(d)``; each RMS norm's gain
to norm ``sqrt(d)`` (the reference's ``normalize_parameters``). It acts on the last axes, so per
member and per slice of any leading axis.

**Batch statistics.** A batch norm normalizes with the running statistics (mean 0 and variance 1
at the start) unless it is inside :func:`batch_statistics`: there it normalizes with the batch's
own mean and (biased) variance over ``B`` and moves its running statistics towards them,
``m <- m + momentum (batch - m)`` (the variance unbiased, ``B / (B - 1)``). Acting, evaluation,
``Policy`` and the exported graph read the running statistics; the algorithms use and update
batch statistics in the passes that train a network (``rlzoo/nets/batch_norm.py``: SAC's and
TD3's losses; ``algo=flashsac``'s joint ``(s, s')`` passes).

Members are independent networks evaluated as one batched matmul: ``[E, B, in]`` (or a shared
``[B, in]``) -> ``[E, B, out]``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from rlzoo.nets.batch_norm import EnsembleBatchNorm, batch_statistics
from rlzoo.nets.hyperspherical import HyperLinear

__all__ = ["UnitBatchNorm", "UnitNormMLP", "UnitRMSNorm", "batch_statistics"]

NORM_EPS = 1e-8  # the reference's floor inside rsqrt when it rescales a gain to norm sqrt(d)


def _rescale_to_sqrt_dim(*tensors: torch.Tensor) -> None:
    """Scale ``tensors`` (same shape, ``[..., d]``) jointly so that their entries over the last
    axis have squared norm ``d``: ``t <- t sqrt(d) / sqrt(sum_t ||t||^2 + 1e-8)``."""
    dim = tensors[0].shape[-1]
    squares = sum((t * t).sum(-1, keepdim=True) for t in tensors)
    factor = math.sqrt(dim) * torch.rsqrt(squares + NORM_EPS)
    for t in tensors:
        t.copy_(t * factor)


class UnitBatchNorm(EnsembleBatchNorm):
    """Per-member batch norm (``rlzoo.nets.batch_norm.EnsembleBatchNorm``: parameters
    ``weight``, ``bias`` and buffers ``running_mean``, ``running_var``, ``[E, 1, d]``) whose affine
    map's ``(gain, bias)`` is kept at norm ``sqrt(d)``. See the module docstring for when the
    batch's statistics are used.

    Args:
        members: E.
        dim: d, features.
        momentum: rate of the running statistics (``batch_norm_momentum``).
        eps: added to the variance under the square root (``batch_norm_eps``).
    """

    @torch.no_grad()
    def project_parameters(self) -> None:
        """``(gain, bias) <- (gain, bias) sqrt(d) / ||(gain, bias)||`` per member."""
        _rescale_to_sqrt_dim(self.weight, self.bias)


class UnitRMSNorm(nn.Module):
    """Per-member RMS norm ``x / sqrt(mean(x^2) + eps) * g`` with ``||g|| = sqrt(d)``
    (``g [E, 1, d]``, 1 at the start)."""

    def __init__(self, members: int, dim: int, eps: float) -> None:
        super().__init__()
        if not eps > 0.0:
            raise ValueError(f"network rms_norm_eps must be > 0, got {eps}")
        self.eps = float(eps)
        self.weight = nn.Parameter(torch.ones(members, 1, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    @torch.no_grad()
    def project_parameters(self) -> None:
        """``g <- g sqrt(d) / ||g||`` per member."""
        _rescale_to_sqrt_dim(self.weight)


class UnitNormBlock(nn.Module):
    """``h + relu(BN_2(W_2 relu(BN_1(W_1 h))))`` on ``[E, B, hidden]``."""

    def __init__(self, members: int, hidden_dim: int, expansion: int, momentum: float,
                 eps: float) -> None:
        super().__init__()
        wide = hidden_dim * expansion
        self.up = HyperLinear(members, hidden_dim, wide)
        self.up_norm = UnitBatchNorm(members, wide, momentum, eps)
        self.down = HyperLinear(members, wide, hidden_dim)
        self.down_norm = UnitBatchNorm(members, hidden_dim, momentum, eps)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.up_norm(self.up(h)))
        return h + F.relu(self.down_norm(self.down(x)))


class UnitNormMLP(nn.Module):
    """FlashSAC's network (module docstring) as E members: ``[E, B, in]`` -> ``[E, B, out]``.

    Args:
        members: E (twin critic members, ...).
        in_features: input size.
        out_features: output size.
        heads: predictions in the output (accepted for the network contract: each output unit
            already has its own unit-norm row, so 2 heads equal the reference's two layers).
        hidden_dim: width h (reference: actor 128, critic 256).
        num_blocks: residual blocks (reference: 2 for both).
        expansion: width factor of a block's inner layer.
        batch_norm_momentum: rate of the batch norms' running statistics.
        batch_norm_eps: batch norm's epsilon.
        rms_norm_eps: the final RMS norm's epsilon.

    Each value is declared once, in ``conf/net/flashsac.yaml`` (with the reference's names).
    """

    def __init__(
        self,
        members: int,
        in_features: int,
        out_features: int,
        hidden_dim: int,
        num_blocks: int,
        expansion: int,
        batch_norm_momentum: float,
        batch_norm_eps: float,
        rms_norm_eps: float,
        heads: int = 1,
    ) -> None:
        super().__init__()
        if hidden_dim < 1 or num_blocks < 0 or expansion < 1:
            raise ValueError(
                f"network needs hidden_dim >= 1, num_blocks >= 0 and expansion >= 1, got "
                f"{hidden_dim}, {num_blocks}, {expansion}"
            )
        if heads < 1 or out_features % heads:
            raise ValueError(f"network output {out_features} cannot be split into {heads} heads")
        self.members, self.in_features, self.out_features = members, in_features, out_features
        self.input_norm = UnitBatchNorm(members, in_features, batch_norm_momentum,
                                        batch_norm_eps)
        self.embedder = HyperLinear(members, in_features, hidden_dim)
        self.blocks = nn.Sequential(*[
            UnitNormBlock(members, hidden_dim, expansion, batch_norm_momentum, batch_norm_eps)
            for _ in range(num_blocks)
        ])
        self.post_norm = UnitRMSNorm(members, hidden_dim, rms_norm_eps)
        self.head = HyperLinear(members, hidden_dim, out_features)
        self.head_bias = nn.Parameter(torch.zeros(members, 1, out_features))
        self._bounded = [m for m in self.modules()
                         if isinstance(m, (HyperLinear, UnitBatchNorm, UnitRMSNorm))]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[E, B, in]`` or ``[B, in]`` (shared by all members) -> ``[E, B, out]``."""
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(self.members, -1, -1)
        h = self.blocks(self.embedder(self.input_norm(x)))
        return self.head(self.post_norm(h)) + self.head_bias

    @torch.no_grad()
    def project_parameters(self) -> None:
        """Weight rows to unit norm, norm gains (and biases) to norm ``sqrt(d)``."""
        for module in self._bounded:
            module.project_parameters()
