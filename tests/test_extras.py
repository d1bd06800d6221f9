"""The test extra is light (no Ray, boto3 or sweep launcher); CI still installs the heavy sweep
extra and fails, rather than skips, the tests that need it; ``pytest -m smoke`` is a short set
named in the README (issue 57, item 3)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REQUIRE_EXTRAS, SMOKE, extra_missing

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
HEAVY = {"ray", "boto3", "hydra-ray-launcher", "hydra-joblib-launcher", "hydra-submitit-launcher",
         "joblib"}


def names(extra: str) -> set[str]:
    """The distributions an extra of rlzoo asks for, its own extras (``rlzoo[x]``) expanded."""
    found = set()
    for requirement in PYPROJECT["project"]["optional-dependencies"][extra]:
        name, extras = re.match(r"([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?", requirement).groups()
        if name == "rlzoo":
            for inner in (extras or "").split(","):
                found |= names(inner.strip())
        else:
            found.add(name.lower())
    return found


def test_the_test_extra_is_light_and_the_launchers_are_the_sweep_extras() -> None:
    test = names("test")
    assert not test & HEAVY, test & HEAVY
    assert {"pytest", "pytest-xdist", "rliable", "stable-baselines3"} <= test
    assert {"hydra-joblib-launcher", "hydra-ray-launcher", "ray"} <= names("sweep")


def test_ci_installs_the_sweep_extra_and_requires_it() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    lines = [line for line in ci.splitlines() if line and not line.startswith("#")]
    sweep = next(i for i, line in enumerate(lines) if re.search(r'-e "\.\[sweep\]"$', line))
    (required,) = re.findall(rf"^export {REQUIRE_EXTRAS}=(\S+)$", ci, flags=re.M)
    assert {"sweep", "compare"} <= set(required.split(",")), required
    # then the README's test command, verbatim, as the last line
    assert lines[-1] == 'python -m pip install -e ".[test]" && python -m pytest', lines
    assert sweep < len(lines) - 1


def test_a_missing_extra_is_skipped_with_its_install_line_or_failed_where_required() -> None:
    modules = {"x": ("json", "no_such_module_for_rlzoo"), "here": ("json",)}
    action, reason = extra_missing("x", {}, modules)
    assert action == "skip" and "pip install -e '.[x]'" in reason and "no_such_module" in reason
    action, reason = extra_missing("x", {REQUIRE_EXTRAS: "sweep, x"}, modules)
    assert action == "fail" and REQUIRE_EXTRAS in reason, reason
    assert extra_missing("here", {REQUIRE_EXTRAS: "here"}, modules) is None
    # a dotted module whose parent package is missing is missing, not an ImportError
    assert extra_missing("y", {}, {"y": ("no_such_parent_rlzoo.child",)})[0] == "skip"


def test_the_smoke_set_is_real_and_the_readme_names_it_with_its_time() -> None:
    for node in SMOKE:
        path, test = node.split("::")
        function = test.split("[")[0]
        assert f"def {function}(" in (REPO / path).read_text(), node
    assert 3 <= len(SMOKE) <= 10
    readme = (REPO / "README.md").read_text()
    paragraph = next(p for p in readme.split("\n\n") if "pytest -m smoke" in p)
    assert re.search(r"\d+ min \d+ s\b", paragraph), paragraph


def test_the_wheel_ships_the_package_not_the_tools() -> None:
    """pyproject's package list (``[tool.setuptools.packages.find]``, found as setuptools finds it
    for the wheel) holds rlzoo and its subpackages, never the checkout's tools/ (the results
    tool, which needs a checkout: docs/reproducing.md)."""
    from setuptools import find_namespace_packages

    find = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    found = find_namespace_packages(str(REPO), **find)
    assert {"rlzoo", "rlzoo.algos", "rlzoo.conf"} <= set(found), found
    assert not [name for name in found if name.split(".")[0] != "rlzoo"], found
