"""rlzoo's layers and sizes, checked statically from the source (docs/architecture.md).

Arrows run one way: ``train -> launch -> run``; ``evaluate / policy / cli_check -> run``;
``run -> algos -> nets | buffers | tuners``; ``run -> envs``; ``analysis`` reads run dirs only;
the checkout's ``tools/`` (the results tool, not in the package nor its wheel) sits above the
package, which never imports it, and ``stable_baselines3`` (an extra) is imported only lazily, by
its SB3 peer. Every module under ``rlzoo/`` and ``tools/`` is parsed with ``ast``
(imports inside functions count too), so a new module or a lazy import is checked without
importing anything; a top-level module that belongs to no layer below fails, so a new one is
placed before it can import anything. No import circle among the modules. No module (of rlzoo/
or tools/) over
``MAX_LINES`` lines and no function over ``MAX_FUNCTION_LINES`` (the ``ALLOWANCE`` lists the ones
still over, each at its size: they may shrink, never grow).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "rlzoo"
TOOLS = REPO / "tools"  # the checkout's tools, above the package (not shipped in its wheel)

# The house, top to bottom: each folder (or root module) of rlzoo/ -> what it may import of
# rlzoo besides itself (docs/architecture.md, "Folders"). A name with a dot is one module of a
# folder with a rule of its own (the longest name that matches places a module).
ALLOWED: dict[str, tuple[str, ...]] = {
    # the package's __init__: the BLAS settings before torch's first product
    "": ("config.threads",),
    # the public faces: `python -m rlzoo.train / evaluate / compare`
    "train": ("launch", "run", "config", "store", "conf", "errors"),
    "evaluate": ("policy", "run", "config", "algos", "envs", "store", "errors"),
    "compare": ("analysis", "policy.floors", "store", "errors"),  # floors lazily, for --floors
    "launch": ("cli", "policy", "run", "config", "envs", "store", "errors"),  # policy: lazily
    "cli": ("config", "store", "errors"),
    "policy": ("run", "config", "algos", "envs", "store", "errors", ""),
    "run": ("config", "algos", "buffers", "envs", "nets", "optim", "store", "errors"),
    "config": ("algos", "buffers", "envs", "nets", "optim", "store", "conf", "errors"),
    "algos": ("nets", "buffers", "optim", "store.state_match", "errors"),
    "nets": ("errors",),
    "buffers": ("store.state_match", "errors"),
    "optim": ("errors",),
    "envs": ("errors",),
    "store": ("store", "errors"),  # its leaves (below) import nothing of rlzoo but errors
    "errors": (),
    "analysis": ("store.bounded", "store.readers", "store.writer", "conf", "errors"),
}
# the store's leaves: import nothing of rlzoo but errors, so any layer may read and write run
# dirs through them
STORE_LEAVES = ("store.writer", "store.bounded", "store.readers", "store.state_match",
                "store.mp4", "store.nonfinite")
for _leaf in STORE_LEAVES:
    ALLOWED[_leaf] = ("errors",)
ALLOWED["store.bounded"] = ("store.readers", "errors")  # the bounded readers over the file readers
LAYER_OF = {name: name for name in ALLOWED}
# The loop is reached only by the entry point that runs it; factories live in rlzoo.config.build.
LOOP = "rlzoo.run.loop"
LOOP_IMPORTERS = ("rlzoo.launch.execute", "rlzoo.launch.api")
# The one reader of the env config's ``kind``.
KIND_READER = PACKAGE / "config" / "build.py"
# The checkout's tools/ (the results tool) sit above the package, a layer of their own outside
# it: nothing in rlzoo/ imports them, ...
TOOL = "tools"
# ... and reaches rlzoo only through its public API (docs/architecture.md), imported at the top of
# its modules: these modules, or a module of these packages.
TOOL_API = ("rlzoo", "rlzoo.store.for_tools", "rlzoo.errors", "rlzoo.store.writer",
            "rlzoo.store.bounded", "rlzoo.analysis", "rlzoo.policy.floors")
# Packages of an extra, not of rlzoo's dependencies: imported only inside a function of these
# modules (so that importing any rlzoo module works without them).
OPTIONAL = {"stable_baselines3": ("tools.reproduce.peer", "tools.reproduce.peer_cells",
                                   "tools.reproduce.peer_kinds"),
            "sb3_contrib": ("tools.reproduce.peer", "tools.reproduce.peer_kinds")}


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported rlzoo module (a submodule when ``from pkg import sub`` names one)
    path: Path
    line: int
    module_level: bool  # executed when the module is imported (not in a function, not typing)
    in_function: bool = False  # inside a function or lambda (a ``TYPE_CHECKING`` one is not)

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
    """Every module of the package (its Hydra configs aside) and of the checkout's tools/."""
    return {**{module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "conf" not in
               p.relative_to(PACKAGE).parts[:1]},
            **{module_name(p): p for p in sorted(TOOLS.rglob("*.py"))}}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _lazy_nodes(tree: ast.Module, typing: bool = True) -> set[int]:
    """ids of the import nodes that do not run at import time: inside a function (or a lambda)
    or (``typing``) under ``if TYPE_CHECKING:``."""
    lazy: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) or (
                typing and isinstance(node, ast.If) and _is_type_checking(node)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    lazy.add(id(inner))
    return lazy


def imports(modules: dict[str, Path]) -> list[Import]:
    """Every import of an rlzoo or tools module by one of ``modules``, anywhere in its
    source."""
    found: list[Import] = []
    for source, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        lazy, in_function = _lazy_nodes(tree), _lazy_nodes(tree, typing=False)
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
                if base in modules and modules[base].name == "__init__.py":
                    targets.append(base)  # ... and runs the package's ``__init__`` first
            for target in targets:
                if target.split(".")[0] in ("rlzoo", TOOL):
                    found.append(Import(source, target, path, node.lineno,
                                        id(node) not in lazy, id(node) in in_function))
    return found


def layer(module: str) -> str:
    """The entry of :data:`ALLOWED` that places ``module``: its longest name that is one
    (:data:`TOOL` for a module of the checkout's tools/)."""
    if module.split(".")[0] == TOOL:
        return TOOL
    parts = module.split(".")[1:]
    if not parts:
        return ""
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYER_OF:
            return ".".join(parts[:n])
    return f"<no layer: rlzoo.{parts[0]}>"


def allowed(source: str, target: str) -> bool:
    """Whether ``source`` may import ``target`` (both modules) under :data:`ALLOWED`."""
    mine, theirs = layer(source), layer(target)
    if mine == theirs or theirs.startswith("<no layer"):
        return True
    if target.startswith("rlzoo.conf.") or target == "rlzoo.conf":
        theirs = "conf"
    if mine == TOOL:  # above the package: what of it, test_the_results_tool_uses_only_... says
        return True
    rules = ALLOWED.get(mine, ())
    return "*" in rules or any(theirs == rule or target == f"rlzoo.{rule}"
                               or target.startswith(f"rlzoo.{rule}.") for rule in rules)


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in sources() if layer(m).startswith("<no layer"))
    assert not unplaced, ("modules in no layer of tests/test_layers.py's LAYER_OF (place them, "
                          "and say in docs/architecture.md what they may import):\n"
                          + "\n".join(unplaced))


def test_every_module_parses_and_some_imports_are_found() -> None:
    modules = sources()
    assert {"rlzoo.run.loop", "rlzoo.config.build", "rlzoo.envs.base", "rlzoo.algos.base",
            "rlzoo.nets.critics", "rlzoo.train"} <= set(modules)
    found = imports(modules)
    # a parser that found nothing would pass every rule below
    assert any(i.source == "rlzoo.run.loop" and i.target == "rlzoo.run.assemble" for i in found)
    assert any(i.source == "rlzoo.launch.api" and i.target == "rlzoo.policy.policy"
               and not i.module_level for i in found)  # Run.load_policy's lazy import


def test_layers_import_only_downward() -> None:
    bad = [str(i) for i in imports(sources()) if not allowed(i.source, i.target)]
    assert not bad, "imports against the layers (docs/architecture.md):\n" + "\n".join(bad)


def test_nothing_but_the_entry_point_imports_the_loop() -> None:
    bad = [str(i) for i in imports(sources())
           if i.target == LOOP and i.source not in (LOOP, *LOOP_IMPORTERS)]
    assert not bad, ("the loop is imported to reach something that belongs in rlzoo.config.build "
                     "(or rlzoo.store.extras):\n" + "\n".join(bad))


def test_no_import_circles() -> None:
    """No circle among the imports at module level, type-only ones (``TYPE_CHECKING``) included:
    two modules that need each other's types are one job, or share a third module."""
    modules = sources()
    graph: dict[str, dict[str, Import]] = {m: {} for m in modules}
    for i in imports(modules):
        if not i.in_function and i.target in modules and i.target != i.source:
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
    assert not readers, ("env.kind is read outside rlzoo/config/build.py (ask build.py, e.g. "
                         "env_kind(cfg) or make_env):\n" + "\n".join(readers))


def test_build_reads_env_kind() -> None:
    """The rule above would pass vacuously if the reader moved: it must be where the docs say."""
    tree = ast.parse(KIND_READER.read_text())
    assert any(_reads_kind(node) for node in ast.walk(tree))


def test_nothing_imports_the_results_tool() -> None:
    """No module of rlzoo/ imports tools/ (an installed rlzoo has no tools/), nor names a tools
    module in a string (``importlib.import_module("tools...")``, ``python -m tools...``)."""
    bad = [str(i) for i in imports(sources())
           if layer(i.target) == TOOL and layer(i.source) != TOOL]
    for module, path in sources().items():
        if layer(module) != TOOL:
            bad += [f"{path.relative_to(REPO)}:{node.lineno}: {module} names {node.value!r}"
                    for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
                    if isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and node.value.split(".")[0] == TOOL]
    assert not bad, (f"the checkout's {TOOL}/ sit above the package (docs/architecture.md); "
                     "nothing in rlzoo/ imports them:\n" + "\n".join(bad))
    assert any(layer(i.source) == TOOL and layer(i.target) == "analysis"
               for i in imports(sources()))  # the rule sees the tool's own imports


def test_the_results_tool_uses_only_the_public_api_imported_at_the_top() -> None:
    """``tools.reproduce`` reaches rlzoo through :data:`TOOL_API` only (never ``rlzoo.run``'s
    internals), and at the top of its modules (no import inside a function)."""
    def public(target: str) -> bool:
        return target == "rlzoo" or any(target == api or target.startswith(api + ".")
                                        or api.startswith(target + ".")  # a package on the way
                                        for api in TOOL_API[1:])

    bad = [str(i) for i in imports(sources()) if layer(i.source) == TOOL
           and layer(i.target) != TOOL and (i.in_function or not public(i.target))]
    assert not bad, ("the results tool reaches rlzoo only through its public API "
                     f"({', '.join(TOOL_API)}), imported at module level:\n" + "\n".join(bad))
    assert any(layer(i.source) == TOOL and i.target == "rlzoo.store.for_tools"
               for i in imports(sources()))  # the rule sees the tool's imports of the API


def test_optional_packages_are_imported_lazily_where_allowed() -> None:
    """``stable_baselines3`` (the ``test`` extra) is imported only inside functions of the SB3
    peer's modules, never when a module is imported."""
    bad = []
    seen = set()
    for module, path in sources().items():
        tree = ast.parse(path.read_text(), filename=str(path))
        lazy = _lazy_nodes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                package = name.split(".")[0]
                if package in OPTIONAL:
                    seen.add(package)
                    if module not in OPTIONAL[package] or id(node) not in lazy:
                        where = "" if id(node) in lazy else " at module level"
                        bad.append(f"{path.relative_to(REPO)}:{node.lineno}: {module} imports "
                                   f"{name}{where}")
    assert not bad, ("an optional package is imported where rlzoo must work without it:\n"
                     + "\n".join(bad))
    assert seen == set(OPTIONAL)  # the rule would pass vacuously if the peer moved


# What every command-line module defines under the same name, meaning the same thing.
SHARED_NAMES = ("main", "build_parser")


def test_each_public_name_is_defined_once() -> None:
    """A public module-level function or class name (no leading ``_``) is defined in one module
    only, so a name says what it holds: two modules that need one helper share it, two helpers
    of different meaning get names that tell them apart (issue 43: ``one_line``, ``say``,
    ``listing``, ...). Re-exports (``from x import name``) are not definitions."""
    where: dict[str, list[str]] = {}
    for module, path in sources().items():
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and not node.name.startswith("_") and node.name not in SHARED_NAMES:
                where.setdefault(node.name, []).append(module)
    twice = {name: modules for name, modules in where.items() if len(modules) > 1}
    assert not twice, ("names defined in more than one module (rename one to say what it "
                       f"holds):\n{twice}")
    assert len(where) > 300  # the rule sees the definitions


# --------------------------------------------------------------------------- sizes

MAX_LINES = 400  # a module's lines (as wc -l counts them)
MAX_FUNCTION_LINES = 80  # a function's or method's lines, from its def to its last line
# What is still over, at its size when the rule came (helper "shape" splits these; the lead
# empties the dicts after merging): a file or function here may shrink, never grow.
ALLOWANCE: dict[str, int] = {}
FUNCTION_ALLOWANCE: dict[str, int] = {}


def function_sizes(path: Path) -> dict[str, int]:
    """``"<path>:<qualified name>" -> lines`` of every function and method in ``path`` (nested
    ones too, named ``outer.inner``)."""
    sizes: dict[str, int] = {}
    where = path.relative_to(REPO).as_posix()

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    sizes[f"{where}:{name}"] = child.end_lineno - child.lineno + 1
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(), filename=str(path)), "")
    return sizes


def test_the_size_rules_see_what_is_there() -> None:
    """The rules below would pass vacuously if nothing were measured."""
    sizes = function_sizes(PACKAGE / "train.py")
    assert function_sizes(TOOLS / "reproduce" / "cli.py")["tools/reproduce/cli.py:main"] > 10
    assert sizes["rlzoo/train.py:main"] > 10
    assert "rlzoo/train.py:_CallableModule.__call__" in sizes
    assert all(len((REPO / f).read_text().splitlines()) > MAX_LINES for f in ALLOWANCE)


def test_no_module_is_over_the_line_limit() -> None:
    over = []
    for path in sources().values():
        where = path.relative_to(REPO).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > max(MAX_LINES, ALLOWANCE.get(where, 0)):
            allowed = f" (allowance {ALLOWANCE[where]})" if where in ALLOWANCE else ""
            over.append(f"{where}: {lines} lines{allowed}")
    assert not over, (f"modules over {MAX_LINES} lines: split them by job (docs/architecture.md)"
                      ":\n" + "\n".join(over))


def test_no_function_is_over_the_line_limit() -> None:
    over = []
    for path in sources().values():
        for name, lines in function_sizes(path).items():
            if lines > max(MAX_FUNCTION_LINES, FUNCTION_ALLOWANCE.get(name, 0)):
                allowed = f" (allowance {FUNCTION_ALLOWANCE[name]})" \
                    if name in FUNCTION_ALLOWANCE else ""
                over.append(f"{name}: {lines} lines{allowed}")
    assert not over, (f"functions over {MAX_FUNCTION_LINES} lines: give their parts names of "
                      "their own:\n" + "\n".join(over))


# ----------------------------------------------------------------------------- one shape (issue 26)


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
    """A single run is a group of one: the seed count is tested only by the seed axis
    (algos/seed_axis.py, seed_records.py), never in an algorithm or in the loop."""
    files = [p for p in sorted((PACKAGE / "algos").glob("*.py"))
             if p.name not in ("seed_axis.py", "seed_records.py")]
    found = [hit for p in [*files, PACKAGE / "run" / "loop.py"] for hit in seed_count_tests(p)]
    assert not found, found


# the seed axis by name: the group's size, its per-seed helpers, the opt-in they replaced
SEED_NAMES = {"seeds", "K", "seed_groups"}
SEED_NAME_PARTS = ("per_seed", "seed_mean", "seed_shape")
SEED_TEXT = re.compile(r"per_seed|seed_mean|seed_shape|seed_groups|(?<!algos)\.seeds\b|seed axis")


def _names(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """Every name ``tree``'s code uses or binds, with its line: variables, attributes,
    arguments, functions, classes, keywords and imported names."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id, node.lineno
        elif isinstance(node, ast.Attribute):
            yield node.attr, node.lineno
        elif isinstance(node, ast.arg):
            yield node.arg, node.lineno
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, node.lineno
        elif isinstance(node, ast.keyword) and node.arg:
            yield node.arg, node.lineno
        elif isinstance(node, ast.alias):
            yield from ((n, node.lineno) for n in (node.name, node.asname) if n)


def seed_axis_references(path: Path) -> list[str]:
    """Every reference to the seed axis in ``path``: a name in its code that is ``seeds``, ``K``
    or ``seed_groups`` or contains ``per_seed``, ``seed_mean`` or ``seed_shape`` (compared or
    not), and a comment or string that names them or the seed axis."""
    text, where = path.read_text(), path.relative_to(REPO)
    found = [f"{where}:{line} {name}" for name, line in _names(ast.parse(text))
             if name in SEED_NAMES or any(part in name for part in SEED_NAME_PARTS)]
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        hit = token.type in (tokenize.COMMENT, tokenize.STRING) and SEED_TEXT.search(token.string)
        if hit:
            found.append(f"{where}:{token.start[0]} {hit.group()!r}")
    return found


def test_algorithms_and_optimizers_never_see_the_seed_axis() -> None:
    """An algorithm (rlzoo/algos, the examples' PPO) and the optimizers are written for one run:
    weights are read through ``Algorithm.compute``, draws outside it made by ``Algorithm.draw``,
    metrics averaged by the base class; the group (its size, its generators, its per-seed
    helpers) is one object, ``SeedAxis`` in rlzoo/algos/seed_axis.py (its tensors' slicing and
    stacking in seed_records.py), which the base class holds (``Algorithm.seed_axis``) and hands
    those calls to, so no other file there names it (issue 43 item 2, issue 53 item 1). The
    base class's docstrings may say where the axis is; its code names none of it but the
    attribute."""
    algos = sorted((PACKAGE / "algos").glob("*.py"))
    files = [p for p in algos if p.name not in ("seed_axis.py", "seed_records.py", "base.py")]
    files += [PACKAGE / "optim/adam.py", REPO / "examples" / "ppo.py"]
    found = [hit for p in files for hit in seed_axis_references(p)]
    found += [hit for hit in seed_axis_references(PACKAGE / "algos" / "base.py")
              if not hit.endswith("'seed axis'")]
    assert not found, found
    seen = seed_axis_references(PACKAGE / "algos" / "seed_axis.py")  # the scan sees what is there
    assert any(hit.endswith(" seeds") for hit in seen), seen


# ------------------------------------------------------------------- the doc names what exists


def test_every_rlzoo_name_in_the_architecture_doc_exists() -> None:
    """Every backticked ``rlzoo.<module>[.<attribute>...]`` in docs/architecture.md resolves: the
    longest importable module, then attributes (a class's methods too)."""
    import importlib

    text = (REPO / "docs" / "architecture.md").read_text()
    names = sorted(set(re.findall(r"`(rlzoo(?:\.\w+)+)", text)))
    assert len(names) > 5  # the rule sees the doc's names
    missing = []
    for name in names:
        parts = name.split(".")
        for n in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:n]))
            except ImportError:
                continue
            try:
                for attr in parts[n:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                missing.append(name)
            break
        else:
            missing.append(name)
    assert not missing, "docs/architecture.md names what does not exist:\n" + "\n".join(missing)



def folder_list() -> list[str]:
    """The package's lines of docs/architecture.md's folder list: from ``rlzoo/`` to the next
    line at the margin, in the first code block after "## Folders"."""
    text = (REPO / "docs" / "architecture.md").read_text()
    block = text.split("## Folders", 1)[1].split("```", 2)[1].splitlines()
    start = block.index("rlzoo/")
    end = next(i for i in range(start + 1, len(block)) if block[i] and block[i][0] != " ")
    return block[start + 1:end]


def listed_modules(lines: list[str]) -> tuple[set[Path], list[str]]:
    """The modules the folder list names, and the ``.py`` names it gives that are no file. An
    entry (2 spaces: a root module or a folder; 4: a module or folder inside it) places the
    names of its description: a bare name is in the entry's folder (or subfolder), a name with
    a slash is under rlzoo/."""
    named: set[Path] = set()
    missing: list[str] = []
    folder = sub = PACKAGE
    for line in lines:
        indent = len(line) - len(line.lstrip())
        first = line.split()[0] if line.strip() else ""
        if indent == 2:
            folder = sub = PACKAGE / first if first.endswith("/") else PACKAGE
        elif indent == 4:
            sub = folder / first if first.endswith("/") else folder
        for name in re.findall(r"(?<![\w.])[\w/]*\w\.py\b", line):
            places = [sub / name, folder / name, PACKAGE / name]
            found = next((p for p in places if p.is_file()), None)
            if found is None:
                missing.append(f"{name}: {line.strip()}")
            else:
                named.add(found.resolve())
    return named, missing


def test_the_folder_list_is_the_package() -> None:
    """docs/architecture.md's folder list names every module of rlzoo/ (a package's
    ``__init__`` and the Hydra configs aside) and no module that is not there."""
    named, missing = listed_modules(folder_list())
    modules = {p.resolve() for p in PACKAGE.rglob("*.py")
               if "conf" not in p.relative_to(PACKAGE).parts[:1]
               and (p.name != "__init__.py" or p.parent == PACKAGE)}
    unnamed = sorted(str(p.relative_to(REPO)) for p in modules - named)
    assert not missing, "docs/architecture.md's folder list names no such module:\n" + \
        "\n".join(missing)
    assert not unnamed, "modules docs/architecture.md's folder list does not name:\n" + \
        "\n".join(unnamed)
    assert len(named & modules) > 100  # the list is read
