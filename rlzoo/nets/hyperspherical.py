"""SimbaV2's hyperspherical-normalized residual network (Lee et al., "Hyperspherical Normalization
for Scalable Deep Reinforcement Learning", ICML 2025; official JAX code github dojeon-ai/SimbaV2,
``scale_rl/agents/simbaV2/simbaV2_layer.py`` and ``simbaV2_update.py`` at commit 14fafb2).

Every weight matrix has no bias and unit-norm columns (the weights into each output unit lie on
the unit sphere); every feature vector is projected onto the unit sphere; learnable per-unit
``Scaler``s replace biases and gains. With ``||.||`` the l2 norm over features and
``n(x) = x / max(||x||, 1e-8)``:

* embedder: ``h_0 = n(s(W_e n([x, c_shift])))`` (the input gets a constant ``c_shift`` entry, so
  its norm, not only its direction, reaches the network);
* LERP block (``num_blocks`` of them): ``m = n(W_2 (relu(s_1(W_1 h)) + eps))`` (``W_1``: h -> 4h),
  ``h <- n(h + s_a(m - h))``, a learned per-unit interpolation from ``h`` towards ``m``;
* head (one per prediction, ``heads``): ``y = W_4 s_h(W_3 h) + b``, a linear map with a bias
  (the actor's mean and log std are two heads; a categorical critic's logits one).

``Scaler(dim, init, scale)`` holds a parameter initialised to ``scale`` and multiplies by
``param * init / scale``: its value starts at ``init`` and Adam moves it at a rate set by
``scale``. After every optimizer step the algorithm calls ``project_parameters()``, which
re-normalises every weight's columns; it acts on the last two axes only, so it is per member
(``[E, in, out]``) and per slice of any leading axis (``[K, E, in, out]``).

Members are independent networks evaluated as one batched matmul (``rlzoo.nets.ensemble``):
``[E, B, in]`` (or a shared ``[B, in]``) -> ``[E, B, out]``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

EPS = 1e-8  # the reference's floor of a norm (l2normalize) and offset after the relu


def l2_normalize(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``x / max(||x||_2, 1e-8)`` along ``dim`` (the reference's ``l2normalize``)."""
    return x / torch.linalg.vector_norm(x, dim=dim, keepdim=True).clamp(min=EPS)


class HyperLinear(nn.Module):
    """E bias-free linear maps ``y_e = x_e W_e`` with unit-norm columns (``W_e [in, out]``).

    Initialised orthogonal per member, then projected (the reference: orthogonal init, then
    ``l2normalize_network`` at creation). ``project_parameters`` re-normalises each column
    ``W[..., :, j]`` over the input axis.
    """

    def __init__(self, members: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.members, self.in_features, self.out_features = members, in_features, out_features
        self.weight = nn.Parameter(torch.empty(members, in_features, out_features))
        with torch.no_grad():
            for w in self.weight:
                nn.init.orthogonal_(w)
        self.project_parameters()

    @torch.no_grad()
    def project_parameters(self) -> None:
        """``W[..., :, j] <- W[..., :, j] / max(||W[..., :, j]||, 1e-8)`` for every column j."""
        self.weight.copy_(l2_normalize(self.weight, dim=-2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[E, B, in]`` or ``[B, in]`` (shared by all members) -> ``[E, B, out]``."""
        if x.dim() == 2:
            out = x @ self.weight.transpose(0, 1).reshape(self.in_features, -1)
            return out.view(x.shape[0], self.members, self.out_features).transpose(0, 1)
        return torch.bmm(x, self.weight)

    def extra_repr(self) -> str:
        return f"members={self.members}, in={self.in_features}, out={self.out_features}"


class Scaler(nn.Module):
    """Per-member, per-unit gain: ``x * p * (init / scale)``, ``p [E, 1, dim]`` starting at
    ``scale`` (so the gain starts at ``init``)."""

    def __init__(self, members: int, dim: int, init: float, scale: float) -> None:
        super().__init__()
        if scale <= 0:
            raise ValueError(f"a scaler's scale must be > 0, got {scale}")
        self.forward_scale = init / scale
        self.scaler = nn.Parameter(torch.full((members, 1, dim), float(scale)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scaler * self.forward_scale * x


class HyperEmbedder(nn.Module):
    """``n(s(W n([x, c_shift])))``: ``[E, B, in]`` or ``[B, in]`` -> ``[E, B, hidden]``."""

    def __init__(
        self, members: int, in_features: int, hidden_dim: int, c_shift: float,
        scaler_init: float, scaler_scale: float,
    ) -> None:
        super().__init__()
        self.c_shift = c_shift
        self.linear = HyperLinear(members, in_features + 1, hidden_dim)
        self.scaler = Scaler(members, hidden_dim, scaler_init, scaler_scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shift = torch.full((*x.shape[:-1], 1), self.c_shift, dtype=x.dtype, device=x.device)
        x = l2_normalize(torch.cat([x, shift], dim=-1))
        return l2_normalize(self.scaler(self.linear(x)))


class HyperLERPBlock(nn.Module):
    """``m = n(W_2 (relu(s_1(W_1 h)) + eps))``, ``h <- n(h + s_a(m - h))`` on ``[E, B, hidden]``.

    ``W_1`` widens to ``expansion * hidden``; ``s_1`` starts at ``scaler_init / sqrt(expansion)``
    (rate ``scaler_scale / sqrt(expansion)``), ``s_a`` at ``alpha_init`` (rate ``alpha_scale``).
    """

    def __init__(
        self, members: int, hidden_dim: int, scaler_init: float, scaler_scale: float,
        alpha_init: float, alpha_scale: float, expansion: int,
    ) -> None:
        super().__init__()
        wide = hidden_dim * expansion
        root = math.sqrt(expansion)
        self.up = HyperLinear(members, hidden_dim, wide)
        self.up_scaler = Scaler(members, wide, scaler_init / root, scaler_scale / root)
        self.down = HyperLinear(members, wide, hidden_dim)
        self.alpha = Scaler(members, hidden_dim, alpha_init, alpha_scale)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        m = l2_normalize(self.down(F.relu(self.up_scaler(self.up(h))) + EPS))
        return l2_normalize(h + self.alpha(m - h))


class HyperHead(nn.Module):
    """``W_2 s(W_1 h) + b``: ``[E, B, hidden]`` -> ``[E, B, out]`` (no activation; the reference's
    ``HyperNormalTanhPolicy`` branches and ``HyperCategoricalValue``; ``s`` starts at 1)."""

    def __init__(self, members: int, hidden_dim: int, out_features: int) -> None:
        super().__init__()
        self.inner = HyperLinear(members, hidden_dim, hidden_dim)
        self.scaler = Scaler(members, hidden_dim, 1.0, 1.0)
        self.outer = HyperLinear(members, hidden_dim, out_features)
        self.bias = nn.Parameter(torch.zeros(members, 1, out_features))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.outer(self.scaler(self.inner(h))) + self.bias


class HypersphericalMLP(nn.Module):
    """SimbaV2's network (module docstring) as E members: ``[E, B, in]`` -> ``[E, B, out]``.

    Args:
        members: E (twin critic members, agents, ...).
        in_features: input size.
        out_features: output size; ``heads`` equal parts, each from its own ``HyperHead``.
        heads: separate predictions in the output (2 for a Gaussian actor's mean and log std,
            whose branches the reference keeps apart; 1 for a critic).
        hidden_dim: width h of the embedding and the blocks (reference: actor 128, critic 512).
        num_blocks: LERP residual blocks (reference: actor 1, critic 2).
        c_shift: constant appended to the input before its projection.
        scaler_init, scaler_scale: initial value and rate of the embedder's and blocks' scalers
            (``None``: ``sqrt(2 / hidden_dim)``, the reference's).
        alpha_init, alpha_scale: initial value and rate of the LERP interpolation scalers
            (``None``: ``1 / (num_blocks + 1)`` and ``1 / sqrt(hidden_dim)``).
        expansion: width factor of a block's inner layer.

    Each value is declared once, in ``conf/net/simbav2.yaml`` (with the reference's names).
    """

    def __init__(
        self,
        members: int,
        in_features: int,
        out_features: int,
        hidden_dim: int,
        num_blocks: int,
        c_shift: float,
        scaler_init: float | None,
        scaler_scale: float | None,
        alpha_init: float | None,
        alpha_scale: float | None,
        expansion: int,
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
        root = math.sqrt(2.0 / hidden_dim)
        scaler_init = root if scaler_init is None else scaler_init
        scaler_scale = root if scaler_scale is None else scaler_scale
        alpha_init = 1.0 / (num_blocks + 1) if alpha_init is None else alpha_init
        alpha_scale = 1.0 / math.sqrt(hidden_dim) if alpha_scale is None else alpha_scale
        self.members, self.in_features, self.out_features = members, in_features, out_features
        self.embedder = HyperEmbedder(
            members, in_features, hidden_dim, c_shift, scaler_init, scaler_scale
        )
        self.blocks = nn.Sequential(*[
            HyperLERPBlock(members, hidden_dim, scaler_init, scaler_scale, alpha_init,
                           alpha_scale, expansion)
            for _ in range(num_blocks)
        ])
        self.heads = nn.ModuleList(
            HyperHead(members, hidden_dim, out_features // heads) for _ in range(heads)
        )
        self._linears = [m for m in self.modules() if isinstance(m, HyperLinear)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[E, B, in]`` or ``[B, in]`` -> ``[E, B, out]``."""
        h = self.blocks(self.embedder(x))
        if len(self.heads) == 1:
            return self.heads[0](h)
        return torch.cat([head(h) for head in self.heads], dim=-1)

    @torch.no_grad()
    def project_parameters(self) -> None:
        """Put every weight's columns back on the unit sphere (after an optimizer step)."""
        for linear in self._linears:
            linear.project_parameters()
