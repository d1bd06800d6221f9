"""The batched-ensemble primitive: E independent linear layers applied with one batched matmul.

One kernel for E networks serves twin critics (E=2), N-critic ensembles (E=10) and per-agent
actors (E=agents). Inputs carry the member dimension first: ``x`` is ``[E, B, in]`` (or ``[B, in]``,
which is broadcast to every member) and the output is ``[E, B, out]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "tanh": nn.Tanh,
    "elu": nn.ELU,
    "silu": nn.SiLU,
    "leaky_relu": nn.LeakyReLU,
}


def activation(name: str) -> nn.Module:
    """Return a fresh activation module by name (a key of ``ACTIVATIONS``)."""
    try:
        return ACTIVATIONS[name]()
    except KeyError:
        raise ValueError(
            f"unknown activation {name!r}; use one of {sorted(ACTIVATIONS)}"
        ) from None


class EnsembleLinear(nn.Module):
    """E linear layers ``y_e = x_e W_e + b_e`` as one ``torch.baddbmm``.

    Args:
        members: E, the number of independent layers.
        in_features: input size.
        out_features: output size.

    Weights are ``[E, in, out]`` and biases ``[E, 1, out]``; each member is initialised like
    ``nn.Linear`` (Kaiming-uniform weights, uniform bias in ``±1/sqrt(in)``), independently.
    """

    def __init__(self, members: int, in_features: int, out_features: int) -> None:
        super().__init__()
        if members < 1:
            raise ValueError(f"an ensemble needs at least one member, got {members}")
        self.members, self.in_features, self.out_features = members, in_features, out_features
        self.weight = nn.Parameter(torch.empty(members, in_features, out_features))
        self.bias = nn.Parameter(torch.empty(members, 1, out_features))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        # kaiming_uniform_(a=sqrt(5)) as nn.Linear does reduces to U(-1/sqrt(in), 1/sqrt(in)).
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[E, B, in]`` or ``[B, in]`` (shared by all members) -> ``[E, B, out]``."""
        if self.out_features == 1:
            # A value head: a batched matrix-vector product is far slower than a multiply
            # and a row sum on CPU, forward and backward (its backward is an outer product).
            return (x * self.weight.transpose(1, 2)).sum(-1, keepdim=True) + self.bias
        if x.dim() == 2:
            # Shared input: one matmul against the weights laid side by side.
            out = x @ self.weight.transpose(0, 1).reshape(self.in_features, -1)
            out = out.view(x.shape[0], self.members, self.out_features).transpose(0, 1)
            return out + self.bias
        return torch.baddbmm(self.bias, x, self.weight)

    def extra_repr(self) -> str:
        return f"members={self.members}, in={self.in_features}, out={self.out_features}"


class EnsembleMLP(nn.Module):
    """E independent MLPs evaluated together: ``[E, B, in] -> [E, B, out]``.

    Args:
        members: E.
        in_features: input size.
        hidden: hidden layer sizes, e.g. ``(256, 256)``.
        out_features: output size.
        act: activation name between layers (none after the last layer).
        layer_norm: add a LayerNorm without affine parameters (so members stay independent)
            after each hidden linear layer.
    """

    def __init__(
        self,
        members: int,
        in_features: int,
        hidden: Sequence[int],
        out_features: int,
        act: str = "relu",
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        sizes = [in_features, *hidden]
        layers: list[nn.Module] = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            layers.append(EnsembleLinear(members, n_in, n_out))
            if layer_norm:
                layers.append(nn.LayerNorm(n_out, elementwise_affine=False))
            layers.append(activation(act))
        layers.append(EnsembleLinear(members, sizes[-1], out_features))
        self.members = members
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[E, B, in]`` or ``[B, in]`` -> ``[E, B, out]``."""
        return self.layers(x)

    @property
    def output_layer(self) -> EnsembleLinear:
        return self.layers[-1]  # type: ignore[return-value]
