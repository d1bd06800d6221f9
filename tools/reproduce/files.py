"""The reproduce tool's files: the checkout it runs from (if any), the names of the files it
writes, and small readers and writers of them (JSON, an atomic text write through
:func:`rlzoo.store.writer.write_atomic`, rlzoo's one atomic writer, and a folder put in place by
renames).

The tool lives in the checkout's ``tools/`` (not in the rlzoo wheel). Copied outside a checkout
(:data:`CHECKOUT` is None), the ``smoke`` suite and
any suite given ``--results`` and ``--page`` run anywhere, while the page suites' defaults (the
repository's ``results/`` and ``docs/results.md``) and the published seeds
(``results/published/``, data of the repository, not of the wheel) need a clone.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from rlzoo.store.bounded import MAX_CONFIG_BYTES, load_json
from rlzoo.store.writer import write_atomic


def find_checkout() -> Path | None:
    """The repository checkout this tool lives in (the folder holding ``tools/``, ``rlzoo/``,
    ``pyproject.toml`` and ``results/``), or None for a copy of the tool outside one."""
    root = Path(__file__).resolve().parents[2]
    found = all((root / name).exists() for name in ("pyproject.toml", "rlzoo", "results"))
    return root if found else None


CHECKOUT = find_checkout()  # None outside a checkout: see the module's docstring
REPORT_DIR = "report"
STATUS_FILE = "status.json"
PROVENANCE_FILE = "provenance.json"  # in an exported run dir: what trained it, on what
TRAIN_CSV = "train.csv"  # in an exported run dir: its DIAGNOSTIC_TAGS at every logged step
DIAGNOSTIC_TAGS = ("stats/alpha", "stats/entropy")  # and per agent: stats/alpha/agent_<i>
PUBLISHED_SUFFIX = "-published.png"  # RESULTS/<suite>/report/<figure stem>-published.png
PROFILE_GLOB = "profile-*.png"  # RESULTS/<suite>/report/: the performance profiles (profile_figure)
CELL_LOCK_SUFFIX = ".lock"
PARTIAL_SUFFIX = ".partial"
RECORDS_LIMIT = 16 * 2**20  # bytes read of a provenance.json (launch records: a few KiB each)


def profile_figure(steps: int, tasks: list[str] | None = None) -> str:
    """The file name of the performance profile at ``steps`` in RESULTS/<suite>/report/:
    ``profile-50k.png`` over every task of the aggregate, ``profile-50k-Hopper-HalfCheetah.png``
    over a smaller set of ``tasks`` (a second aggregate table)."""
    return f"profile-{steps // 1000}k" + "".join(f"-{t}" for t in tasks or ()) + ".png"


def is_diagnostic(tag: str) -> bool:
    """Whether a run's scalar ``tag`` is exported to :data:`TRAIN_CSV`: the entropy temperature
    (``stats/alpha``, or one per agent ``stats/alpha/agent_<i>``) and the policy's entropy."""
    return any(tag == t or tag.startswith(t + "/") for t in DIAGNOSTIC_TAGS)


def read_json(path: Path, limit: int = MAX_CONFIG_BYTES) -> dict[str, Any] | None:
    """``path`` as a JSON object, or None when missing or unreadable: read as every run-dir
    file is (:func:`rlzoo.store.bounded.load_json`: a regular file, no link followed, at most
    ``limit`` bytes read; a FIFO or a link to ``/dev/zero`` is unreadable, not waited on)."""
    try:
        data = load_json(path, limit)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8; its folders made first) through
    :func:`rlzoo.store.writer.write_atomic`: a reader sees the old or the new file; a failure is one
    ``UserError`` line, ``path`` unchanged."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)


def repo_relative(text: str) -> str:
    """``text`` with this checkout's absolute path written relative to it (``/x/repo/runs/a`` ->
    ``runs/a``, ``/x/repo`` -> ``.``), so exported configs carry no path of this machine;
    unchanged without a checkout (:data:`CHECKOUT`)."""
    if CHECKOUT is None:
        return text
    repo = re.escape(str(CHECKOUT))
    return re.sub(repo + r"(?![^/\s'\"])", ".", re.sub(repo + "/", "", text))


def summary_steps(run_dir: Path) -> int | None:
    """``total_steps`` of ``run_dir/summary.json`` (None without a usable one)."""
    summary = read_json(run_dir / "summary.json")
    steps = summary.get("total_steps") if summary else None
    return int(steps) if isinstance(steps, int) else None


def replace_dir(src: Path, dst: Path) -> None:
    """Put the finished folder ``src`` at ``dst`` (replacing what is there) by renames."""
    old = dst.with_name(f".{dst.name}.old-{os.getpid()}")
    if dst.exists():
        os.rename(dst, old)
    os.rename(src, dst)
    shutil.rmtree(old, ignore_errors=True)
