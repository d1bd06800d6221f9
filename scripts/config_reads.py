"""Where rlzoo's code reads the raw config, counted (issue 53 item 4: settings read once).

    python scripts/config_reads.py [--list]

Two counts, by folder of ``rlzoo/`` (``--list`` names every function and call):

* **raw-config functions**: functions (and methods) whose parameters take the composed config
  object: a parameter annotated ``DictConfig`` (``DictConfig | None`` too) or named ``cfg``.
  The config-to-objects layer (``rlzoo/config``) and the entry points (``rlzoo/train.py``,
  ``rlzoo/evaluate.py``, ``rlzoo/launch``) read it by design; elsewhere a function takes the
  :class:`rlzoo.config.settings.Settings` object or the values it needs.
* **repeated YAML defaults**: calls ``X.get("key", literal)``, ``getattr(X, "key", literal)`` and
  ``OmegaConf.select(X, "a.key", default=literal)`` whose ``"key"`` is declared in ``rlzoo/conf``
  with the same value as ``literal``: a second copy of a default free to drift from the YAML.
  A run dir written before a key existed gets the value it ran with from
  ``rlzoo/conf/history.py`` (``rlzoo.config.added_keys``), not from a literal at the read.
  Calls whose literal differs from the YAML (a fallback for a key of another node with the same
  name, or a default the YAML does not declare) are listed apart as **other fallbacks**.

``tests/test_defaults_once.py`` imports :func:`repeated_defaults` and fails on any.
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "rlzoo"
CONF = PACKAGE / "conf"
MISSING = object()


def yaml_defaults(conf: Path = CONF) -> dict[str, list[Any]]:
    """``{key: [every value it is declared with]}`` over every YAML file of ``conf`` (a nested
    key under its own name, ``normalize.epsilon`` as ``epsilon``; Hydra's ``defaults`` and
    ``hydra`` blocks and private ``_target_`` keys left out)."""
    out: dict[str, list[Any]] = {}

    def walk(node: Any) -> None:
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            if not isinstance(key, str) or key.startswith("_") or key in ("defaults", "hydra"):
                continue
            if isinstance(value, dict):
                walk(value)
            else:
                out.setdefault(key, []).append(value)

    for path in sorted(conf.rglob("*.yaml")):
        walk(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    return out


@dataclass(frozen=True)
class Fallback:
    """One read with a literal fallback: where, which key, the literal, whether it repeats the
    YAML."""

    path: str
    line: int
    key: str
    literal: Any
    repeats: bool

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.key!r} -> {self.literal!r}"


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return MISSING


def _same(a: Any, b: Any) -> bool:
    """Equal as the YAML would compose them (``60`` and ``60.0`` alike; ``True`` is not 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _key_and_fallback(node: ast.AST) -> tuple[ast.expr | None, ast.expr | None]:
    """The key and the fallback of one read with a fallback (``None, None`` for any other node):
    ``x.get("key", fallback)``, ``getattr(x, "key", fallback)``, ``select(x, "a.key",
    default=fallback)`` and ``read(x, "key") if "key" in x else fallback``."""
    if isinstance(node, ast.IfExp) and isinstance(node.test, ast.Compare) \
            and isinstance(node.test.ops[0], ast.In):
        return node.test.left, node.orelse
    if not isinstance(node, ast.Call):
        return None, None
    func, args = node.func, node.args
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name == "get" and isinstance(func, ast.Attribute) and len(args) == 2:
        return args[0], args[1]
    if name == "getattr" and len(args) == 3:
        return args[1], args[2]
    if name == "select" and len(args) == 2:
        return args[1], next((k.value for k in node.keywords if k.arg == "default"), None)
    return None, None


def _reads(tree: ast.AST) -> Iterator[tuple[int, str, Any]]:
    """``(line, key, literal)`` of every read of ``tree`` with a literal fallback
    (:func:`_key_and_fallback`); ``key`` is the last part of a dotted key."""
    for node in ast.walk(tree):
        key_node, fallback = _key_and_fallback(node)
        if fallback is None or not isinstance(key_node, ast.Constant) \
                or not isinstance(key_node.value, str):
            continue
        literal = _literal(fallback)
        if literal is not MISSING:
            yield node.lineno, key_node.value.rsplit(".", 1)[-1], literal


def fallbacks(package: Path = PACKAGE) -> list[Fallback]:
    """Every read of a key ``rlzoo/conf`` declares with a literal fallback, in ``package``."""
    declared = yaml_defaults()
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = str(path.relative_to(package.parent))
        for line, key, literal in _reads(ast.parse(path.read_text(encoding="utf-8"))):
            if key in declared and literal is not None:
                repeats = any(_same(literal, value) for value in declared[key])
                out.append(Fallback(rel, line, key, literal, repeats))
    return out


def repeated_defaults(package: Path = PACKAGE) -> list[Fallback]:
    """The fallbacks whose literal is a value ``rlzoo/conf`` declares for that key."""
    return [f for f in fallbacks(package) if f.repeats]


def _takes_config(arg: ast.arg) -> bool:
    note = ast.unparse(arg.annotation) if arg.annotation is not None else ""
    return "DictConfig" in note or arg.arg == "cfg"


def raw_config_functions(package: Path = PACKAGE) -> list[tuple[str, str, int]]:
    """``(file, function, line)`` of every function of ``package`` with a parameter that takes
    the raw config (annotated ``DictConfig``, or named ``cfg``)."""
    out = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            params = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            if any(_takes_config(a) for a in params):
                out.append((str(path.relative_to(package.parent)), node.name, node.lineno))
    return out


def folder(path: str) -> str:
    """``rlzoo/run/loop.py`` -> ``run/``; a root module -> its file name."""
    parts = Path(path).relative_to("rlzoo").parts
    return f"{parts[0]}/" if len(parts) > 1 else parts[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="name every function and call")
    args = parser.parse_args()
    functions = raw_config_functions()
    by_folder = Counter(folder(f) for f, _, _ in functions)
    files = {f for f, _, _ in functions}
    print(f"raw-config functions: {len(functions)} in {len(files)} files")
    for name, count in sorted(by_folder.items()):
        print(f"  {name:<16} {count}")
    if args.list:
        for f, fn, line in functions:
            print(f"    {f}:{line} {fn}")
    reads = fallbacks()
    repeated = [r for r in reads if r.repeats]
    print(f"repeated YAML defaults: {len(repeated)}")
    for r in repeated:
        print(f"  {r}")
    others = [r for r in reads if not r.repeats]
    print(f"other fallbacks of declared keys: {len(others)}")
    for r in others:
        print(f"  {r}")


if __name__ == "__main__":
    main()
