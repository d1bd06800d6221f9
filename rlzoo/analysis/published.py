"""Published learning curves drawn beside rlzoo's (``--published DIR``): files in the format of
the repository's ``results/published/<source>.json`` (written by scripts/published_seeds.py from
the sources' repositories)::

    {"source": "td3-paper", "repo": "...", "commit": "...",
     "algos": {"TD3": {"Hopper": {"steps": [0, 5000, ...], "seeds": [[...], ...]}}}}

``steps`` in env steps, ``seeds`` one list of returns per seed (``[seeds][steps]``); tasks are
named as rlzoo names envs (``Hopper``). Files are read bounded (a regular file, no link
followed, at most :data:`PUBLISHED_BYTES_LIMIT` bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlzoo.analysis.messages import CompareError
from rlzoo.store.bounded import load_json

PUBLISHED_BYTES_LIMIT = 64 * 2**20


@dataclass(frozen=True)
class PublishedCurve:
    """One published algorithm's curve on one task: ``steps [S]``, ``seeds [n, S]``."""

    source: str
    algo: str
    task: str
    steps: np.ndarray
    seeds: np.ndarray

    @property
    def label(self) -> str:
        return f"{self.algo} ({self.source}), published"


def _curve(source: str, algo: str, task: str, entry: object, path: Path) -> PublishedCurve:
    try:
        steps = np.asarray(entry["steps"], dtype=np.int64)  # type: ignore[index]
        seeds = np.asarray(entry["seeds"], dtype=float)  # type: ignore[index]
    except (TypeError, KeyError, ValueError):
        raise CompareError(f"{path}: {algo}/{task} is not {{steps: [...], seeds: [[...], ...]}}; "
                           "pass files in results/published's format") from None
    if seeds.ndim != 2 or seeds.shape[1] != len(steps) or not np.isfinite(seeds).all():
        raise CompareError(f"{path}: {algo}/{task} has seeds of shape {seeds.shape} for "
                           f"{len(steps)} steps (or a value that is not finite)")
    return PublishedCurve(source, algo, task, steps, seeds)


def read_published(paths: list[Path]) -> list[PublishedCurve]:
    """Every curve of the files ``paths`` (a directory stands for its ``*.json``); CompareError
    (one line) for a file that is not in the format."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(path.glob("*.json"))
        elif path.is_file():
            files.append(path)
        else:
            raise CompareError(f"--published {path}: no such file or directory; pass "
                               "results/published or one of its files")
    curves = []
    for path in files:
        try:
            data = load_json(path, PUBLISHED_BYTES_LIMIT)
        except (OSError, ValueError) as err:
            raise CompareError(f"--published {path}: cannot read it ({err})") from None
        if not isinstance(data, dict) or not isinstance(data.get("algos"), dict):
            raise CompareError(f"--published {path}: no 'algos' mapping; pass files in "
                               "results/published's format")
        source = str(data.get("source", path.stem))
        for algo, tasks in data["algos"].items():
            for task, entry in (tasks.items() if isinstance(tasks, dict) else ()):
                curves.append(_curve(source, str(algo), str(task), entry, path))
    return curves
