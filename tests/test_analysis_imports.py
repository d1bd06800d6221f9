"""rlzoo.analysis reads run dirs only: it never imports rlzoo's training code or torch, and its
modules import each other in one direction (no circles)."""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "rlzoo" / "analysis"
# Training code and torch: none of it may be imported by (or on behalf of) the analysis.
FORBIDDEN = (
    "torch", "rlzoo.run", "rlzoo.trainer", "rlzoo.trainer_multi", "rlzoo.train", "rlzoo.evaluate",
    "rlzoo.algos", "rlzoo.envs", "rlzoo.nets", "rlzoo.buffers", "rlzoo.optim.entropy",
)
# Every module is imported and a report is written; then sys.modules is checked.
CHECK = """
import importlib, json, sys
for name in {modules!r}:
    importlib.import_module(name)
imported = {{"after_import": sorted(sys.modules)}}
if {argv!r}:
    from rlzoo.analysis.cli import main
    assert main({argv!r}) == 0
imported["after_report"] = sorted(sys.modules)
print(json.dumps(imported))
"""


def analysis_modules() -> list[str]:
    """rlzoo.analysis and every module in it (found on disk, so a new module is checked too)."""
    names = [f"rlzoo.analysis.{m.name}" for m in pkgutil.iter_modules([str(PACKAGE)])]
    return ["rlzoo.analysis", *sorted(names)]


def forbidden_in(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]


def run_check(modules: list[str], argv: list[str]) -> dict[str, list[str]]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-c", CHECK.format(modules=modules, argv=argv)],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_package_is_found() -> None:
    found = set(analysis_modules())
    for name in ("cli", "curves", "groups", "pooling", "labels", "render", "report", "runs",
                 "stats"):
        assert f"rlzoo.analysis.{name}" in found


def test_importing_every_module_loads_no_training_code_nor_torch() -> None:
    modules = [*analysis_modules(), "rlzoo.compare"]
    imported = run_check(modules, [])["after_import"]
    assert set(modules) <= set(imported)
    assert forbidden_in(imported) == []


def test_writing_a_report_loads_no_training_code_nor_torch(tmp_path: Path) -> None:
    """The lazy imports too (OmegaConf, tensorboard's event reader, matplotlib)."""
    from torch.utils.tensorboard import SummaryWriter  # only to write the run's event file

    for seed in (0, 1):
        run_dir = tmp_path / "runs" / f"s{seed}"
        (run_dir / ".hydra").mkdir(parents=True)
        (run_dir / ".hydra" / "config.yaml").write_text(f"algo:\n  name: sac\nseed: {seed}\n")
        writer = SummaryWriter(log_dir=str(run_dir))
        for step in (0, 100, 200):
            writer.add_scalar("eval/return", float(step + seed), step)
        writer.close()
        summary = {"algo": "sac", "env": "Pendulum", "seed": seed, "total_steps": 200,
                   "final_eval_return": 200.0 + seed}
        (run_dir / "summary.json").write_text(json.dumps(summary))
    out = tmp_path / "report"
    imported = run_check(
        ["rlzoo.compare"], [str(tmp_path / "runs"), "--out", str(out), "--reps", "50"]
    )["after_report"]
    assert (out / "Pendulum.png").is_file()  # the event files were read and plotted
    assert "tensorboard" in imported and "omegaconf" in imported
    assert forbidden_in(imported) == []


def imports_of(path: Path) -> list[str]:
    """Every module a file imports, at module level or inside functions; for ``from rlzoo.analysis
    import stats`` both ``rlzoo.analysis`` and ``rlzoo.analysis.stats``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import; write rlzoo.analysis.<module>"
            assert node.module is not None
            found += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_no_import_of_training_code_anywhere_in_the_source(path: Path) -> None:
    """Imports inside functions count too: they run only when that code path does."""
    assert forbidden_in(imports_of(path)) == []


def test_no_import_circles_inside_the_package() -> None:
    modules = {f"rlzoo.analysis.{p.stem}": p for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    edges = {
        name: {m for m in imports_of(path) if m in modules and m != name}
        for name, path in modules.items()
    }
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == "done":
            return
        assert state.get(name) != "open", "import circle: " + " -> ".join([*trail, name])
        state[name] = "open"
        for other in sorted(edges[name]):
            visit(other, [*trail, name])
        state[name] = "done"
        order.append(name)

    for name in sorted(modules):
        visit(name, [])
    assert len(order) == len(modules)
    # the command line sits on top: nothing in the package imports it
    assert not any("rlzoo.analysis.cli" in targets for targets in edges.values())
