"""VMAS (``pip install 'rlzoo[vmas]'``): the ``vmas`` env family, ``env=vmas/<scenario>``.

VMAS (Bettini et al. 2022, https://arxiv.org/abs/2207.03530) is a vectorized simulator: it has no
PettingZoo envs to step in turn, so the family runs on ``env.backend=batched`` only, one
``rlzoo.envs.vmas_batched.VmasVecEnv`` holding every env as rows of the same tensors, on the run's
device (CPU, or CUDA when ``device`` is). ``env.scenario`` is a name of ``vmas.scenarios`` or
``vmas.mpe_scenarios``; ``env.kwargs.max_steps`` is the episode limit (a truncation) and the other
kwargs are the scenario's own options (``n_agents``, ``shared_rew``, ...).
"""

from __future__ import annotations

from typing import Any

from rlzoo.envs.family import Family

INSTALL = "pip install 'rlzoo[vmas]'"


def _vmas() -> Any:
    try:
        import vmas
    except ImportError:
        raise ValueError(f"env family vmas needs the vmas package: {INSTALL}") from None
    return vmas


class VMAS(Family):
    """The ``vmas`` family (module docstring)."""

    name, title = "vmas", "VMAS"
    backends = ("batched",)
    on_run_device = True  # its vector env is made on the run's device (rlzoo.config.build)

    def scenarios(self) -> list[str]:
        """VMAS's scenarios and its MPE ones, sorted (all take continuous actions)."""
        vmas = _vmas()
        return sorted([*vmas.scenarios, *vmas.mpe_scenarios])

    def check(self, scenario: str, kwargs: dict[str, Any]) -> None:
        """``ValueError`` (one line) for a scenario VMAS does not have, an option rlzoo sets
        itself, or a ``max_steps`` that is not a positive int."""
        from rlzoo.envs.vmas_batched import VMAS_OWN_KWARGS

        names = self.scenarios()
        if scenario not in names:
            raise ValueError(f"unknown vmas scenario {scenario!r}; available: {', '.join(names)}")
        own = [k for k in kwargs if k in VMAS_OWN_KWARGS and k != "device"]
        if own:
            raise ValueError(f"env.kwargs.{own[0]} is set by rlzoo for vmas (continuous actions, "
                             f"num_envs, seed, device from the run); remove it")
        steps = kwargs.get("max_steps")  # absent: VmasVecEnv's own
        if "max_steps" in kwargs and (isinstance(steps, bool) or not isinstance(steps, int)
                                      or steps < 1):
            raise ValueError(f"env.kwargs.max_steps must be an int >= 1 (the episode limit), "
                             f"got {steps!r}")

    def make_env(self, scenario: str, kwargs: dict[str, Any]) -> Any:
        raise ValueError("env family vmas runs on env.backend=batched only (VMAS is vectorized)")

    def make_backend(self, backend: str, scenario: str, num_envs: int, seed: int,
                     **kwargs: Any) -> Any:
        """``rlzoo.envs.vmas_batched.VmasVecEnv`` (draws nothing)."""
        if kwargs.pop("render_mode", None) is not None:
            raise ValueError("env=vmas draws nothing in rlzoo; evaluate without --video")
        self.check(scenario, kwargs)
        from rlzoo.envs.vmas_batched import VmasVecEnv

        return VmasVecEnv(scenario, num_envs, seed, **kwargs)


FAMILY = VMAS()
