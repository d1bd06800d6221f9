"""Networks: MLPs, the batched-ensemble layer, actors and critics."""

from rlzoo.nets.actors import DeterministicActor, TanhGaussianActor
from rlzoo.nets.categorical import CategoricalCritic, DiscreteReturn
from rlzoo.nets.critics import (
    ActionSequenceCritic,
    Critic,
    EnsembleCritic,
    TwinCritic,
)
from rlzoo.nets.distributional import DistributionalCritic
from rlzoo.nets.ensemble import EnsembleLinear, EnsembleMLP, make_network
from rlzoo.nets.gaussian import GaussianCritic
from rlzoo.nets.hyperspherical import HypersphericalMLP
from rlzoo.nets.unit_norm import UnitNormMLP

__all__ = [
    "ActionSequenceCritic", "CategoricalCritic", "Critic", "DeterministicActor", "DiscreteReturn",
    "DistributionalCritic", "EnsembleCritic", "EnsembleLinear", "EnsembleMLP", "GaussianCritic",
    "HypersphericalMLP", "TanhGaussianActor", "TwinCritic", "UnitNormMLP", "make_network",
]
