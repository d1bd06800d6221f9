"""Environments behind one vector-env contract (``rlzoo.envs.base``): gymnasium (``gym``) and
PettingZoo (``pettingzoo``) adapters, one adapter file per multi-agent env family (``family``:
the contract, ``families``: MPE, MaMuJoCo), and env snapshots for exact resume (``snapshot``)."""

from rlzoo.envs.base import Episodes, StepResult, VecEnv, run_episodes

__all__ = ["Episodes", "StepResult", "VecEnv", "run_episodes"]
