"""Algorithms: each reads like its paper's update equations."""

from rlzoo.algos.base import Algorithm, EnvSpec
from rlzoo.algos.sac import SAC
from rlzoo.algos.td3 import TD3

__all__ = ["SAC", "TD3", "Algorithm", "EnvSpec"]
