"""rlzoo's single-agent env backends, one file each, found by name (``env.backend``).

Every module of this package defines ``BACKEND``, an ``rlzoo.envs.backend.Backend``; importing the
package imports them all (they import their simulators only when an env is made) and registers
each under its ``name`` in :data:`BACKENDS`. Adding a backend to rlzoo is one file here; a backend
outside rlzoo is a ``_target_`` in its env config instead (docs/extending.md), or
:func:`register_backend` from Python.
"""

from __future__ import annotations

import importlib
import pkgutil

from rlzoo.envs.backend import Backend

__all__ = ["BACKENDS", "get_backend", "register_backend"]

BACKENDS: dict[str, Backend] = {}  # name -> backend, rlzoo's own in file-name order


def register_backend(backend: Backend) -> Backend:
    """Add ``backend`` to :data:`BACKENDS` under its ``name`` (replacing one of that name) so that
    configs (``env.backend=<name>``) and :func:`get_backend` find it; returns it.

    Raises:
        TypeError: ``backend`` is not a ``Backend`` instance or has no ``name``.
    """
    if not isinstance(backend, Backend) or not backend.name:
        raise TypeError(f"an env backend is a named rlzoo.envs.backend.Backend, got {backend!r}")
    BACKENDS[backend.name] = backend
    return backend


def get_backend(backend: str | Backend) -> Backend:
    """The backend ``backend``: a ``Backend`` is returned as is, a name is looked up in
    :data:`BACKENDS`.

    Raises:
        ValueError: one line naming the registered backends, for an unknown name.
        TypeError: neither a name nor a ``Backend``.
    """
    if isinstance(backend, Backend):
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"env.backend must be a backend name or an rlzoo.envs.backend.Backend, "
                        f"got {backend!r}")
    if backend not in BACKENDS:
        raise ValueError(f"env.backend of a single-agent env must be one of "
                         f"{', '.join(BACKENDS)}, got {backend!r}; or your own: "
                         "env.backend={_target_: my_pkg.MyBackend} (docs/extending.md)")
    return BACKENDS[backend]


def _discover() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        register_backend(importlib.import_module(f"{__name__}.{info.name}").BACKEND)


_discover()
