"""rlzoo's env families, one adapter file each, found by name (``env.family``).

Every module of this package defines ``FAMILY``, an ``rlzoo.envs.family.Family``; importing the
package imports them all (they import their simulators only when an env is made) and registers
each under its ``name`` in :data:`FAMILIES`. Adding a family to rlzoo is one file here and one
config folder ``rlzoo/conf/env/<name>/``; a family outside rlzoo is a ``_target_`` in its config
instead (docs/extending.md), or :func:`register_family` from Python.
"""

from __future__ import annotations

import importlib
import pkgutil

from rlzoo.envs.family import PETTINGZOO, Family

__all__ = ["FAMILIES", "check_family_backend", "get_family", "register_family"]

FAMILIES: dict[str, Family] = {}  # name -> adapter, rlzoo's own in file-name order


def register_family(family: Family) -> Family:
    """Add ``family`` to :data:`FAMILIES` under its ``name`` (replacing one of that name) so that
    configs and :func:`get_family` find it by name; returns it.

    Raises:
        TypeError: ``family`` is not a ``Family`` instance or has no ``name``.
    """
    if not isinstance(family, Family) or not family.name:
        raise TypeError(f"an env family is a named rlzoo.envs.family.Family, got {family!r}")
    FAMILIES[family.name] = family
    return family


def get_family(family: str | Family) -> Family:
    """The adapter of ``family``: a ``Family`` is returned as is, a name is looked up in
    :data:`FAMILIES`.

    Raises:
        ValueError: one line naming the available families, for an unknown name.
        TypeError: neither a name nor a ``Family``.
    """
    if isinstance(family, Family):
        return family
    if not isinstance(family, str):
        raise TypeError(f"env.family must be a family name or a Family, got {family!r}")
    if family not in FAMILIES:
        raise ValueError(
            f"unknown multi-agent env family {family!r}; available: {', '.join(FAMILIES)}")
    return FAMILIES[family]


def check_family_backend(family: Family, backend: str) -> None:
    """``ValueError`` (one line) unless ``family`` runs on ``env.backend=backend``; the line
    names the families that do, or every backend known when none does."""
    if backend in family.backends:
        return
    known = [family, *(f for f in FAMILIES.values() if f is not family)]
    owners = [f.label for f in known if backend in f.backends]
    if not owners:
        names = list(dict.fromkeys(b for f in known for b in (PETTINGZOO, *f.backends)))
        raise ValueError(f"env.backend must be one of {', '.join(names)}, got {backend!r}")
    raise ValueError(f"env.backend={backend} simulates {' and '.join(owners)} only; env family "
                     f"{family.name} runs on env.backend={' or '.join(family.backends)}")


def _discover() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        register_family(importlib.import_module(f"{__name__}.{info.name}").FAMILY)


_discover()
