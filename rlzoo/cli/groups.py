"""The config groups Hydra sees (``rlzoo/conf`` and any ``hydra.searchpath`` additions), listed
for the messages of ``rlzoo.cli.check``: a group's choices, the top-level groups, every group.
"""

from __future__ import annotations

from hydra.core.global_hydra import GlobalHydra
from hydra.core.object_type import ObjectType


class ConfigGroups:
    """Listings of Hydra's config groups, under the same search path as the composition
    (``searchpath``: the ``hydra.searchpath=...`` override lines, or none). Hydra must be
    initialized (inside ``hydra.initialize_config_module``)."""

    def __init__(self, searchpath: list[str]) -> None:
        self.searchpath = searchpath

    def choices(self, group: str) -> list[str]:
        """Every config of ``group`` and its subgroups (``mpe/simple_spread``), sorted."""
        loader = GlobalHydra.instance().config_loader()

        def options(name: str, kind: ObjectType) -> list[str]:
            return loader.get_group_options(name, results_filter=kind, overrides=self.searchpath)

        found: list[str] = []
        pending = [""]
        while pending:
            sub = pending.pop()
            name = f"{group}/{sub}" if sub else group
            prefix = f"{sub}/" if sub else ""
            found += [prefix + c for c in options(name, ObjectType.CONFIG)]
            pending += [prefix + g for g in options(name, ObjectType.GROUP)]
        return sorted(found, key=lambda c: (c.count("/"), c.lower()))

    def top(self) -> list[str]:
        """The top-level config groups (``algo``, ``env``, ...)."""
        loader = GlobalHydra.instance().config_loader()
        return loader.get_group_options(
            "", results_filter=ObjectType.GROUP, overrides=self.searchpath
        )

    def all(self) -> list[str]:
        """Every config group, nested ones included (``env/mpe``, ``hydra/launcher``)."""
        loader = GlobalHydra.instance().config_loader()
        found: list[str] = []
        pending = [""]
        while pending:
            parent = pending.pop()
            subs = loader.get_group_options(
                parent, results_filter=ObjectType.GROUP, overrides=self.searchpath
            )
            names = [f"{parent}/{g}" if parent else g for g in subs]
            found += names
            pending += names
        return found
