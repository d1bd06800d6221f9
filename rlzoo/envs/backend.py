"""The single-agent env backend contract: how the vector env of a single-agent env config is made.

A single-agent env config names a task (``env.id``, e.g. ``Hopper-v5``) and the *backend* that
simulates it (``env.backend``): gymnasium's envs stepped one after another, MuJoCo Warp's worlds
stepped together as tensors, or yours. Everything that differs between backends lives in one
:class:`Backend` subclass, in a file of its own; ``rlzoo.config.build`` asks the backend and never
tests its name (as it asks a multi-agent env family, ``rlzoo.envs.family``).

rlzoo's own backends are ``rlzoo/envs/backends/<name>.py`` (found by ``rlzoo.envs.backends``, one
``BACKEND`` object per file). A backend of your own is a subclass in your package, named by its
config as ``backend: {_target_: my_pkg.my_backend.MyBackend}``, or registered by name from Python
(``rlzoo.envs.backends.register_backend``; docs/extending.md, "A new single-agent backend").

This module imports nothing of rlzoo, so a backend file needs only this contract (and what it
returns: an ``rlzoo.envs.base.VecEnv``).
"""

from __future__ import annotations

from typing import Any


class Backend:
    """One way to simulate the tasks of single-agent env configs (gymnasium, MuJoCo Warp, yours).

    Attributes:
        name: ``env.backend`` in configs (e.g. ``"gymnasium"``).
        on_run_device: :meth:`make` gets ``device=`` (the run's ``torch.device``) and keeps its
            worlds there (MuJoCo Warp); default False.

    A subclass implements :meth:`make`; :meth:`check` has a default that accepts every id.
    """

    name: str = ""
    on_run_device: bool = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    def check(self, env_id: str) -> None:
        """Raise ``ValueError`` (one line, naming what exists) for a task ``env_id`` this backend
        cannot make; called once before anything of a run is built. Default: accept every id."""

    def make(self, env_id: str, num_envs: int, seed: int, **kwargs: Any) -> Any:
        """The vector env (an ``rlzoo.envs.base.VecEnv``) of ``num_envs`` envs of ``env_id``, env
        ``e`` seeded ``seed + e`` at the first reset; ``kwargs`` are the config's ``env.kwargs``
        and the caller's extras (``render_mode="rgb_array"`` to film; ``device`` when
        :attr:`on_run_device`).

        Raises:
            ValueError: one line, shown to the user as it is, for what the config asks that this
                backend cannot make (a task it lacks, a keyword it does not take, its simulator
                not installed: name the ``pip install`` that brings it). Any other exception is
                the env's own constructor failing, reported with its type.
        """
        raise NotImplementedError(f"{type(self).__name__}.make")
