"""A ``_target_`` that cannot be imported or built (README: ``algo.actor._target_=my_pkg.MyActor``)
is one ``rlzoo: error:`` line, exit status 2, no run dir; from Python a ``UserError``, not
Hydra's ``InstantiationException``."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from conftest import TINY, assert_user_error, run_cli

import rlzoo
from rlzoo.errors import UserError

SHORT = ["env=Pendulum", "total_steps=200", "algo.learning_starts=100", "eval.episodes=1",
         "log.progress=false", *TINY]

USER_PKG = textwrap.dedent('''
    from rlzoo.nets import TanhGaussianActor


    class RaisingActor(TanhGaussianActor):
        def __init__(self, *args, **kwargs):
            raise RuntimeError("my actor is broken")


    class NotAModule:
        def __init__(self, *args, **kwargs):
            pass


    def make_actor(*args, **kwargs):  # a factory function: Hydra calls it like a class
        return TanhGaussianActor(*args, **kwargs)


    VALUE = 3
''')


@pytest.fixture
def user_pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tmp_path/user_pkg/`` on ``sys.path`` (importable in this process); returns tmp_path."""
    (tmp_path / "user_pkg").mkdir()
    (tmp_path / "user_pkg" / "__init__.py").write_text(USER_PKG)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("user_pkg", None)


def train_error(tmp_path: Path, *overrides: str) -> str:
    run_dir = tmp_path / "run"
    with pytest.raises(UserError) as info:
        rlzoo.train(*overrides, *SHORT, run_dir=run_dir)
    assert not run_dir.exists(), sorted(p.name for p in run_dir.iterdir())
    message = str(info.value)
    assert "\n" not in message, message
    return message


@pytest.mark.parametrize(("target", "fragments"), [
    ("no_such_pkg_xyz.MyActor", ["algo.actor._target_=no_such_pkg_xyz.MyActor cannot be imported",
                                 "no module named 'no_such_pkg_xyz' is importable from",
                                 "PYTHONPATH"]),
    ("user_pkg.Missing", ["cannot be imported", "user_pkg has no attribute or submodule "
                          "'Missing'"]),
    ("user_pkg.NotAModule", ["is a class but not a torch.nn.Module subclass",
                             "make it a subclass of torch.nn.Module"]),
    ("user_pkg.VALUE", ["is an object of type int, not a class"]),
    ("user_pkg", ["algo.actor._target_=user_pkg is a module, not a class"]),
    ("user_pkg.RaisingActor", ["cannot build algo=sac: RuntimeError: my actor is broken",
                               "user_pkg/__init__.py:7 in RaisingActor.__init__"]),
])
def test_python_a_bad_actor_target_is_a_user_error(user_pkg: Path, target: str,
                                                   fragments: list[str]) -> None:
    message = train_error(user_pkg, "algo=sac", f"algo.actor._target_={target}")
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_python_other_slots_are_checked_too(user_pkg: Path) -> None:
    assert "critic._target_=user_pkg.NotAModule is a class but not" in train_error(
        user_pkg, "algo=sac", "critic._target_=user_pkg.NotAModule")
    assert "algo._target_=user_pkg.NotAModule is a class but not an rlzoo Algorithm" in \
        train_error(user_pkg, "algo=sac", "algo._target_=user_pkg.NotAModule")


def test_a_factory_function_still_builds(user_pkg: Path) -> None:
    run = rlzoo.train("algo=sac", "algo.actor._target_=user_pkg.make_actor", *SHORT,
                      run_dir=user_pkg / "run")
    assert run.summary["total_steps"] == 200


def test_cli_readme_example_from_a_folder_without_the_package(tmp_path: Path) -> None:
    proc = run_cli(["algo=sac", "algo.actor._target_=my_pkg.MyActor", *SHORT], cwd=tmp_path)
    assert_user_error(proc, "algo.actor._target_=my_pkg.MyActor cannot be imported",
                      f"no module named 'my_pkg' is importable from {tmp_path}")
    assert proc.stdout == ""
    assert list(tmp_path.iterdir()) == []  # no runs/, no .hydra, no lock, no train.log


def test_cli_a_raising_constructor_leaves_no_run_dir(tmp_path: Path) -> None:
    (tmp_path / "user_pkg").mkdir()
    (tmp_path / "user_pkg" / "__init__.py").write_text(USER_PKG)
    proc = run_cli(["algo=sac", "algo.actor._target_=user_pkg.RaisingActor", *SHORT],
                   cwd=tmp_path)
    assert_user_error(proc, "RuntimeError: my actor is broken",
                      "user_pkg/__init__.py:7 in RaisingActor.__init__")
    assert not (tmp_path / "runs").exists()
