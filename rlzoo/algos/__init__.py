"""Algorithms: each reads like its paper's update equations."""

from rlzoo.algos.base import Algorithm, EnvSpec
from rlzoo.algos.coma import COMA
from rlzoo.algos.dsac_t import DSACT
from rlzoo.algos.flashsac import FlashSAC
from rlzoo.algos.hasac import HASAC
from rlzoo.algos.maddpg import MADDPG
from rlzoo.algos.sac import SAC
from rlzoo.algos.simbav2 import SimbaV2
from rlzoo.algos.td3 import TD3

__all__ = [
    "COMA", "DSACT", "FlashSAC", "HASAC", "MADDPG", "SAC", "TD3", "SimbaV2", "Algorithm",
    "EnvSpec",
]
