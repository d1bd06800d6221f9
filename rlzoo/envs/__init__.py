"""Environments behind one vector-env contract (``rlzoo.envs.base``): gymnasium (``gym``) and
PettingZoo (``pettingzoo``) adapters, one file per single-agent backend (``backend``: the
contract, ``backends``: gymnasium, MuJoCo Warp) and per multi-agent env family (``family``: the
contract, ``families``: MPE, MaMuJoCo, VMAS), and env snapshots for exact resume (``snapshot``)."""

from rlzoo.envs.base import Episodes, StepResult, VecEnv, run_episodes

__all__ = ["Episodes", "StepResult", "VecEnv", "run_episodes"]
