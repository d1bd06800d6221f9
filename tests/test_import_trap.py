"""``import rlzoo`` from the folder holding a clone named ``rlzoo`` (docs/extending.md, "The
import trap"): one line names the folder, and the import works (the repository root's
``__init__.py``); without it Python makes the clone an empty namespace package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_import_from_the_folder_holding_a_clone_names_it_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "rlzoo").symlink_to(REPO, target_is_directory=True)  # ~/src/rlzoo, the clone
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", "import rlzoo; print(callable(rlzoo.load_policy))"],
        cwd=tmp_path, env={**env, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "True\n"
    assert proc.stderr == (
        f"rlzoo: warning: 'rlzoo' is the folder {tmp_path / 'rlzoo'} here (a clone), not the "
        f"installed package; the package inside it, {tmp_path / 'rlzoo' / 'rlzoo'}, is used; run "
        'from another folder to use the installed one (docs/extending.md, "The import trap")\n')


def test_the_shim_does_nothing_under_another_name(capsys) -> None:  # noqa: ANN001
    import importlib.util

    spec = importlib.util.spec_from_file_location("a_clone", REPO / "__init__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert capsys.readouterr().err == "" and not hasattr(module, "load_policy")
