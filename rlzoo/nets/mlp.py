"""The plain MLP builder used where a network has a single member."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from rlzoo.nets.ensemble import activation


def mlp(
    in_features: int,
    hidden: Sequence[int],
    out_features: int,
    act: str = "relu",
    layer_norm: bool = False,
) -> nn.Sequential:
    """``Linear -> act`` for each hidden size, then a final ``Linear`` (no output activation).

    Args:
        in_features: input size.
        hidden: hidden sizes, e.g. ``(256, 256)``; empty gives one linear layer.
        out_features: output size.
        act: activation name (``relu``, ``gelu``, ``tanh``, ``elu``, ``silu``, ``leaky_relu``).
        layer_norm: LayerNorm after each hidden linear layer.

    Maps ``[..., in_features]`` to ``[..., out_features]``.
    """
    sizes = [in_features, *hidden]
    layers: list[nn.Module] = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        layers.append(nn.Linear(n_in, n_out))
        if layer_norm:
            layers.append(nn.LayerNorm(n_out))
        layers.append(activation(act))
    layers.append(nn.Linear(sizes[-1], out_features))
    return nn.Sequential(*layers)
