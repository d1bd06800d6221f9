"""What a training launch ran on (commit, command, versions, CPU, threads), recorded beside
each cell and exported with every seed as ``provenance.json``."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlzoo.store.bounded import load_json
from tools.reproduce.files import CHECKOUT, RECORDS_LIMIT, repo_relative, write_text_atomic


def launch_record(env: dict[str, str], command: Sequence[str]) -> dict[str, Any]:
    """What a training launch ran on: the time (UTC), this checkout's git commit and whether
    rlzoo/ or scripts/ had uncommitted changes, the command (checkout paths relative), Python
    and package versions, the platform, CPU model (its name, family/model numbers and the SIMD
    level of torch's CPU kernels) and core count, and ``OMP_NUM_THREADS`` of the child's
    environment ``env``. Parts that cannot be read are None."""
    import platform
    from importlib import metadata

    def git(*args: str) -> str | None:  # None outside a checkout
        if CHECKOUT is None:
            return None
        try:
            out = subprocess.run(["git", *args], cwd=CHECKOUT, capture_output=True, text=True,
                                 timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    import torch

    try:
        info = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        info = []

    def cpuinfo(key: str) -> str | None:  # the first CPU's ``key``
        return next((line.split(":", 1)[1].strip() for line in info
                     if line.split(":", 1)[0].strip() == key), None)

    family, model = cpuinfo("cpu family"), cpuinfo("model")
    changes = git("status", "--porcelain", "--untracked-files=no", "--",
                  "rlzoo", "tools", "scripts")
    return {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": git("rev-parse", "HEAD"),
        "uncommitted_changes": None if changes is None else bool(changes),
        "command": [repo_relative(arg) for arg in command],
        "python": platform.python_version(),
        "packages": {name: version(name) for name in
                     ("torch", "numpy", "gymnasium", "mujoco", "pettingzoo", "mpe2",
                      "gymnasium-robotics", "stable-baselines3")},
        "platform": platform.platform(),
        "cpu": cpuinfo("model name") or platform.processor() or None,
        # one "model name" (e.g. "AMD EPYC") can cover CPU generations whose float kernels round
        # differently: the family/model numbers and the SIMD level torch's CPU kernels dispatch
        # to (AVX512, AVX2, ...) tell them apart
        "cpu_family_model": f"{family}/{model}" if family and model else None,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cores": os.cpu_count(),
        "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS"),
    }


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Add ``record`` to the JSON list in ``path`` (a cell's launches, oldest first)."""
    try:
        records = load_json(path, RECORDS_LIMIT)  # bounded: a regular file, no link followed
    except (OSError, ValueError):
        records = []
    records = records if isinstance(records, list) else []
    write_text_atomic(path, json.dumps([*records, record], indent=2) + "\n")
