"""The batched-ensemble primitive: E independent linear layers applied with one batched matmul.

One kernel for E networks serves twin critics (E=2), N-critic ensembles (E=10) and per-agent
actors (E=agents). Inputs carry the member dimension first: ``x`` is ``[E, B, in]`` (or ``[B, in]``,
which is broadcast to every member) and the output is ``[E, B, out]``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence

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


def check_dropout(dropout: float, key: str = "dropout") -> float:
    """``dropout`` if it is a usable drop probability, ``0 <= p < 1``; ``key`` names the setting
    in the message (``critic.dropout``, ``algo.actor.dropout``)."""
    if not 0.0 <= dropout < 1.0:
        raise ValueError(
            f"{key} must be in [0, 1), got {dropout}; set it to 0 (off) or a probability below 1"
        )
    return dropout


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
        dropout: drop probability of a ``nn.Dropout`` after each hidden activation (0: none;
            DroQ and STAC use 0.01). Active in training mode, so also in target networks;
            actors switch it off for their deterministic ``mode`` (``dropout_off``).
        heads: how many separate predictions ``out_features`` holds (e.g. 2 for an actor's mean
            and log std). Accepted for the network contract (``make_network``); a plain MLP's
            last linear layer already gives each output its own weights, so it changes nothing.

    Layer order per hidden size: ``Linear -> [LayerNorm] -> act -> [Dropout]`` (DroQ's order is
    ``Linear -> Dropout -> LayerNorm -> act``; both are "dropout and layer norm per layer").
    """

    def __init__(
        self,
        members: int,
        in_features: int,
        hidden: Sequence[int],
        out_features: int,
        act: str,
        layer_norm: bool,
        dropout: float,
        heads: int = 1,
    ) -> None:
        super().__init__()
        check_dropout(dropout)
        sizes = [in_features, *hidden]
        layers: list[nn.Module] = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            layers.append(EnsembleLinear(members, n_in, n_out))
            if layer_norm:
                layers.append(nn.LayerNorm(n_out, elementwise_affine=False))
            layers.append(activation(act))
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
        layers.append(EnsembleLinear(members, sizes[-1], out_features))
        self.members = members
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[E, B, in]`` or ``[B, in]`` -> ``[E, B, out]``."""
        return self.layers(x)

    @property
    def output_layer(self) -> EnsembleLinear:
        return self.layers[-1]  # type: ignore[return-value]


NetworkFactory = Callable[..., nn.Module]
"""``network(members, in_features, out_features, heads=1) -> module`` mapping ``[E, B, in]``
(or a shared ``[B, in]``) to ``[E, B, out]``: what an actor or critic builds its trunk with
(``EnsembleMLP`` by default; ``rlzoo.nets.HypersphericalMLP`` is SimbaV2's). A module may define
``project_parameters()``; the algorithm calls it after every optimizer step that moved its
parameters (``Algorithm.step``)."""


def make_network(
    network: NetworkFactory | None,
    members: int,
    in_features: int,
    out_features: int,
    heads: int,
    hidden: Sequence[int],
    activation: str,
    layer_norm: bool,
    dropout: float,
    key: str = "critic",
) -> nn.Module:
    """The trunk of an actor or critic: ``network(members, in_features, out_features,
    heads=heads)`` when a network is configured (``critic.network``, ``algo.actor.network``,
    e.g. ``net=simbav2``), else an ``EnsembleMLP`` of ``hidden``/``activation``/``layer_norm``/
    ``dropout`` (which then configure nothing else). ``key``: where its settings live in the
    config (``critic``, ``algo.actor``), for the messages."""
    check_dropout(dropout, f"{key}.dropout")
    if network is None:
        return EnsembleMLP(
            members, in_features, hidden, out_features, activation, layer_norm, dropout, heads
        )
    return network(members, in_features, out_features, heads=heads)


@contextlib.contextmanager
def dropout_off(module: nn.Module) -> Iterator[nn.Module]:
    """Within the block every ``nn.Dropout`` inside ``module`` is in eval mode (the identity);
    their modes are restored after. A no-op for a module without dropout."""
    layers = [m for m in module.modules() if isinstance(m, nn.Dropout) and m.training]
    for m in layers:
        m.training = False
    try:
        yield module
    finally:
        for m in layers:
            m.training = True
