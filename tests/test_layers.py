"""rlzoo's layers, checked statically from the source (docs/architecture.md).

Arrows run one way: ``train / evaluate / policy -> run -> algos -> nets | buffers | tuners``;
``run -> envs``; ``analysis`` reads run dirs only. Every module under ``rlzoo/`` is parsed with
``ast`` (imports inside functions count too), so a new module or a lazy import is checked without
importing anything.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "rlzoo"

# layer -> the layers it must not import (a layer is the name after ``rlzoo.``).
FORBIDDEN = {
    "nets": ("algos", "run", "envs", "train", "evaluate", "policy", "analysis"),
    "buffers": ("algos", "run", "envs", "train", "evaluate", "policy", "analysis"),
    "tuners": ("algos", "run", "envs", "train", "evaluate", "policy", "analysis"),
    "algos": ("envs", "run", "train", "evaluate", "policy"),
    "envs": ("algos", "run", "buffers", "nets"),
    "run": ("train", "evaluate", "policy", "analysis"),
    "analysis": ("run", "algos", "envs", "nets", "buffers", "tuners", "train", "evaluate",
                 "policy"),
}
# The loop is reached only by the entry point that runs it; factories live in rlzoo.run.build.
LOOP = "rlzoo.run.loop"
LOOP_IMPORTERS = ("rlzoo.train",)
# The one reader of the env config's ``kind``.
KIND_READER = PACKAGE / "run" / "build.py"


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported rlzoo module (a submodule when ``from pkg import sub`` names one)
    path: Path
    line: int
    module_level: bool  # executed when the module is imported (not in a function, not typing)

    def __str__(self) -> str:
        where = "" if self.module_level else " (inside a function or TYPE_CHECKING)"
        return (f"{self.path.relative_to(REPO)}:{self.line}: {self.source} imports "
                f"{self.target}{where}")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "conf" not in
            p.relative_to(PACKAGE).parts[:1]}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _lazy_nodes(tree: ast.Module) -> set[int]:
    """ids of the import nodes that do not run at import time: inside a function (or a lambda)
    or under ``if TYPE_CHECKING:``."""
    lazy: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) or (
                isinstance(node, ast.If) and _is_type_checking(node)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    lazy.add(id(inner))
    return lazy


def imports(modules: dict[str, Path]) -> list[Import]:
    """Every import of an rlzoo module by an rlzoo module, anywhere in its source."""
    found: list[Import] = []
    for source, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        lazy = _lazy_nodes(tree)
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package of this module
                    package = source.split(".")
                    if not is_package:
                        package.pop()
                    package = package[: len(package) - (node.level - 1)]
                    base = ".".join([*package, base] if base else package)
                for alias in node.names:  # ``from pkg import sub`` imports the submodule sub
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                if target == "rlzoo" or target.startswith("rlzoo."):
                    found.append(Import(source, target, path, node.lineno,
                                        id(node) not in lazy))
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_module_parses_and_some_imports_are_found() -> None:
    modules = sources()
    assert {"rlzoo.run.loop", "rlzoo.run.build", "rlzoo.envs.base", "rlzoo.algos.base",
            "rlzoo.nets.critics", "rlzoo.train"} <= set(modules)
    found = imports(modules)
    # a parser that found nothing would pass every rule below
    assert any(i.source == "rlzoo.run.loop" and i.target == "rlzoo.run.assemble" for i in found)
    assert any(i.source == "rlzoo.train" and i.target == "rlzoo.policy" and not i.module_level
               for i in found)  # Run.load_policy's lazy import


def test_layers_import_only_downward() -> None:
    bad = [str(i) for i in imports(sources())
           if layer(i.target) in FORBIDDEN.get(layer(i.source), ())]
    assert not bad, "imports against the layers (docs/architecture.md):\n" + "\n".join(bad)


def test_nothing_but_the_entry_point_imports_the_loop() -> None:
    bad = [str(i) for i in imports(sources())
           if i.target == LOOP and i.source not in (LOOP, *LOOP_IMPORTERS)]
    assert not bad, ("the loop is imported to reach something that belongs in rlzoo.run.build "
                     "(or rlzoo.run.state):\n" + "\n".join(bad))


def test_no_import_circles() -> None:
    modules = sources()
    graph: dict[str, dict[str, Import]] = {m: {} for m in modules}
    for i in imports(modules):
        if i.module_level and i.target in modules and i.target != i.source:
            graph[i.source].setdefault(i.target, i)
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for nxt in sorted(graph[module]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    lines = []
    for cycle in cycles:
        lines.append(" -> ".join(cycle))
        lines += [f"    {graph[a][b]}" for a, b in zip(cycle, cycle[1:])]
    assert not cycles, "import circles among rlzoo modules:\n" + "\n".join(lines)


def _reads_kind(node: ast.AST) -> bool:
    """``<...>.env.kind``, ``env.kind``, ``<x>.get("kind"...)``, ``<x>["kind"]`` or a
    ``"env.kind"`` select."""
    if isinstance(node, ast.Attribute) and node.attr == "kind":
        value = node.value
        return (isinstance(value, ast.Name) and value.id == "env") or (
            isinstance(value, ast.Attribute) and value.attr == "env")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in ("get", "select") and node.args:
        return any(isinstance(a, ast.Constant) and a.value in ("kind", "env.kind")
                   for a in node.args)
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    return False


def test_only_build_reads_env_kind() -> None:
    readers: list[str] = []
    for path in sources().values():
        if path == KIND_READER:
            continue
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if _reads_kind(node):
                line = text.splitlines()[node.lineno - 1].strip()
                readers.append(f"{path.relative_to(REPO)}:{node.lineno}: {line}")
    assert not readers, ("env.kind is read outside rlzoo/run/build.py (ask build.py, e.g. "
                         "env_kind(cfg) or make_env):\n" + "\n".join(readers))


def test_build_reads_env_kind() -> None:
    """The rule above would pass vacuously if the reader moved: it must be where the docs say."""
    tree = ast.parse(KIND_READER.read_text())
    assert any(_reads_kind(node) for node in ast.walk(tree))


# ----------------------------------------------------------------------------- one shape (issue 26)
# Files that hold one job each: small enough to read (about 400 lines), no function over 80.
SMALL = [*sorted((PACKAGE / "run").glob("*.py")), PACKAGE / "envs" / "base.py",
         PACKAGE / "algos" / "seeds.py", PACKAGE / "algos" / "base.py", PACKAGE / "optim.py"]
MAX_LINES, MAX_FUNCTION_LINES = 410, 80


def test_the_run_modules_are_small() -> None:
    too_long = []
    for path in SMALL:
        text = path.read_text()
        if len(text.splitlines()) > MAX_LINES:
            too_long.append(f"{path.relative_to(REPO)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if size > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.name} is "
                                    f"{size} lines")
    assert not too_long, "\n".join(too_long)


def seed_count_tests(path: Path) -> list[str]:
    """Comparisons that read a ``seeds`` attribute or name (``self.seeds == 1``) in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            names = {n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(node)
                     if isinstance(n, (ast.Attribute, ast.Name))}
            if "seeds" in names:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_neither_the_algorithms_nor_the_loop_branch_on_the_number_of_seeds() -> None:
    """A single run is a group of one: the seed count is tested only in algos/seeds.py (and by
    MemberAdam, which stack_seeds tells it), never in an algorithm or in the loop."""
    files = [p for p in sorted((PACKAGE / "algos").glob("*.py")) if p.name != "seeds.py"]
    found = [hit for p in [*files, PACKAGE / "run" / "loop.py"] for hit in seed_count_tests(p)]
    assert not found, found
