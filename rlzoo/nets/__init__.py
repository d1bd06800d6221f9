"""Networks: MLPs, the batched-ensemble layer, batch norms, actors and critics."""

from rlzoo.nets.actors import DeterministicActor, TanhGaussianActor
from rlzoo.nets.batch_norm import BatchNormMLP, EnsembleBatchNorm, EnsembleBatchRenorm
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
from rlzoo.nets.quantile import TruncatedQuantileCritic
from rlzoo.nets.unit_norm import UnitNormMLP

__all__ = [
    "ActionSequenceCritic", "BatchNormMLP", "CategoricalCritic", "Critic", "DeterministicActor",
    "DiscreteReturn", "DistributionalCritic", "EnsembleBatchNorm", "EnsembleBatchRenorm",
    "EnsembleCritic", "EnsembleLinear", "EnsembleMLP", "GaussianCritic", "HypersphericalMLP",
    "TanhGaussianActor", "TruncatedQuantileCritic", "TwinCritic", "UnitNormMLP", "make_network",
]
