"""The env-family adapter contract: what rlzoo needs to know of a family of PettingZoo envs.

A multi-agent env config names a *family* (``env.family``) and a *scenario* (``env.scenario``);
everything that differs between families lives in one :class:`Family` subclass, in a file of its
own: how one PettingZoo parallel env of a scenario is made from the config's ``env.kwargs``,
which scenarios and kwargs it accepts, its episode limit, its state for exact resume and the
``env.backend`` values it can be simulated by. The vector env (``rlzoo.envs.pettingzoo``) and
``rlzoo.config.build`` ask the adapter and never test the family's name.

rlzoo's own families are ``rlzoo/envs/families/<name>.py`` (found by ``rlzoo.envs.families``,
one ``FAMILY`` object per file) with their configs in ``rlzoo/conf/env/<name>/``. A family of
your own is a subclass in your package, named by its config as
``family: {_target_: my_pkg.my_family.MyFamily}`` (docs/extending.md, "A new env family").

This module imports nothing of rlzoo, so an adapter file needs only this contract.
"""

from __future__ import annotations

from typing import Any

PETTINGZOO = "pettingzoo"  # the backend every family has: its PettingZoo envs, stepped in turn


class Family:
    """One family of PettingZoo parallel envs (MPE, MaMuJoCo, yours).

    Attributes:
        name: ``env.family`` in configs and ``family`` in saved env state (e.g. ``"mpe"``).
        title: how messages call it (e.g. ``"MPE"``; default: ``name``).
        backends: the ``env.backend`` values this family runs on; ``"pettingzoo"`` (the envs of
            :meth:`make_env`, stepped in turn by ``rlzoo.envs.pettingzoo.MultiAgentVecEnv``) is
            the default; any other is made by :meth:`make_backend`.
        on_run_device: :meth:`make_backend` gets ``device=`` (the run's ``torch.device``) and
            keeps its worlds there (VMAS); default False.

    A subclass implements :meth:`make_env`, and :meth:`get_state` / :meth:`set_state` when
    its runs are to be checkpointed (every run writes a checkpoint at its end); the other
    methods have defaults that fit most families.
    """

    name: str = ""
    title: str = ""
    backends: tuple[str, ...] = (PETTINGZOO,)
    on_run_device: bool = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    @property
    def label(self) -> str:
        """``title``, or ``name`` when it has none."""
        return self.title or self.name

    def check(self, scenario: str, kwargs: dict[str, Any]) -> None:
        """Raise ``ValueError`` (one line, naming what is accepted) for a scenario or kwargs this
        family cannot make; called once before any env is made. Default: accept everything."""

    def make_env(self, scenario: str, kwargs: dict[str, Any]) -> Any:
        """One PettingZoo *parallel* env of ``scenario`` built with the config's ``env.kwargs``
        (and extras such as ``render_mode``); its agents' action spaces are bounded 1-D Boxes."""
        raise NotImplementedError(f"{type(self).__name__}.make_env")

    def max_episode_steps(self, env: Any) -> int | None:
        """The episode limit of ``env`` (one env of :meth:`make_env`), None if it has none.
        Default: ``env.unwrapped.max_cycles`` or ``env.max_cycles`` when either is an int."""
        for owner in (getattr(env, "unwrapped", None), env):
            limit = getattr(owner, "max_cycles", None)
            if isinstance(limit, int):
                return limit
        return None

    def get_state(self, env: Any) -> dict[str, Any]:
        """Plain data (numpy arrays, Python scalars, lists, dicts; ``rlzoo.envs.snapshot``) from
        which :meth:`set_state` continues ``env`` bit-identically, mid-episode."""
        raise NotImplementedError(f"env family {self.name!r} cannot save its env state "
                                  f"({type(self).__name__}.get_state)")

    def set_state(self, env: Any, saved: dict[str, Any]) -> None:
        """Put back what :meth:`get_state` returned (after ``snapshot.restore_arrays``) into an
        env made with the same scenario and kwargs."""
        raise NotImplementedError(f"env family {self.name!r} cannot restore its env state "
                                  f"({type(self).__name__}.set_state)")

    def make_backend(self, backend: str, scenario: str, num_envs: int, seed: int,
                     **kwargs: Any) -> Any:
        """The vector env (an ``rlzoo.envs.base.VecEnv``) of a backend in :attr:`backends` other
        than ``"pettingzoo"``: ``num_envs`` envs, env e seeded ``seed + e`` at the first reset."""
        raise ValueError(f"env family {self.name!r} has no env.backend={backend}")
