"""Reading files rlzoo did not write at bounded cost: a run dir may come from elsewhere, and a few
bytes can describe an enormous structure.

* A loaded ``torch.save`` payload (checkpoint, ``policy.pt``) or JSON record is a graph of dicts,
  lists and tuples: ``x = [t]`` doubled 45 times by ``x = [x, x]`` is 2 KB on disk and 2**45
  items to any walk that follows each reference. :func:`check_tree` visits each container once
  (by ``id``), refuses cycles, and counts the items a recursive walk would see (the expanded
  tree) and its depth against :data:`MAX_ITEMS` and :data:`MAX_DEPTH`, so every later walk
  (NaN checks, trust checks, ``OmegaConf.create``, ``load_state_dict``) is bounded too.
* A YAML config (``.hydra/config.yaml``, ``hydra.yaml``, ``overrides.yaml``) is read by
  :func:`load_yaml` (:func:`parse_yaml` for plain data, with libyaml's parser when PyYAML has
  it): at most :data:`MAX_CONFIG_BYTES`, aliases refused (an alias bomb: ``a: &a
  [x, x]; b: &b [*a, *a]; ...``), nesting at most :data:`MAX_DEPTH`, and its ``${...}``
  interpolations costed before OmegaConf resolves them (:func:`check_interpolations`:
  ``b: ${a}${a}`` doubles a string at each level just like an alias).
* JSON records (:func:`load_json`) are capped in size and checked as a tree.
* Every file is read by :func:`read_bytes`: opened without following a link at its name and
  checked after opening (``fstat``: a regular file, so a FIFO or a link to ``/dev/zero`` is
  refused, not waited on or read forever), at most a given number of bytes actually read.

Every refusal is a :class:`BoundError` (a ``ValueError``) whose message is a short clause
("it is larger than 1 MiB"); callers put it in their own one-line error naming the file.
This module imports nothing of rlzoo but :mod:`rlzoo.store.readers` (its file readers), so any layer
may use it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rlzoo.store.readers import MAX_CONFIG_BYTES, BoundError, read_bytes, read_tail, read_text

__all__ = ["BoundError", "MAX_CONFIG_BYTES", "check_tree", "read_bytes", "read_tail", "read_text",
           "load_json",
           "parse_yaml", "load_yaml", "plain_config", "check_interpolations"]

MAX_DEPTH = 32  # nesting of containers; rlzoo's checkpoints and configs reach about 8
MAX_ITEMS = 2_000_000  # items of the expanded tree; a checkpoint holds thousands (tensors count 1)
MAX_RESOLVED = 4_000_000  # characters and nodes a config's interpolations may resolve to
MAX_CHAIN = 8  # interpolations through interpolations; rlzoo's configs chain at most 2


def _children(value: Any) -> list[Any] | None:
    """The items a walk of ``value`` visits (dict keys and values, list and tuple items), or
    None for a leaf."""
    if isinstance(value, dict):
        return [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple)):
        return list(value)
    return None


def check_tree(value: Any, max_items: int = MAX_ITEMS, max_depth: int = MAX_DEPTH) -> int:
    """The number of items a recursive walk of ``value`` visits (containers and leaves, shared
    containers counted at every place they appear), checked without such a walk.

    Each container is visited once, by ``id``, iteratively (no recursion), so the cost is linear
    in the distinct containers however they are shared.

    Raises:
        BoundError: ``value`` contains itself (a cycle), expands to more than ``max_items``
            items, or nests deeper than ``max_depth`` containers.
    """
    sizes: dict[int, int] = {}  # id -> items of its expanded subtree
    depths: dict[int, int] = {}
    keep: list[Any] = []  # containers seen, so no id is reused while this runs
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        kids = _children(node)
        if kids is None:
            continue
        if done:
            on_path.discard(key)
            size = 1 + sum(sizes.get(id(k), 1) for k in kids)
            depth = 1 + max((depths.get(id(k), 0) for k in kids), default=0)
            if size > max_items:
                raise BoundError(f"it expands to more than {max_items:,} items (shared or "
                                 "repeated references); rlzoo never writes such a structure")
            if depth > max_depth:
                raise BoundError(f"it nests containers more than {max_depth} deep; rlzoo never "
                                 "writes such a structure")
            sizes[key], depths[key] = size, depth
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise BoundError("it contains itself (a reference cycle); rlzoo never writes one")
        on_path.add(key)
        keep.append(node)
        if len(on_path) > max_depth:
            raise BoundError(f"it nests containers more than {max_depth} deep; rlzoo never "
                             "writes such a structure")
        stack.append((node, True))
        for kid in kids:
            if _children(kid) is not None:
                if id(kid) in on_path:
                    raise BoundError("it contains itself (a reference cycle); rlzoo never "
                                     "writes one")
                if id(kid) not in sizes:
                    stack.append((kid, False))
    return sizes.get(id(value), 1)


def load_json(path: Path, limit: int = MAX_CONFIG_BYTES) -> Any:
    """``path`` parsed as JSON, at most ``limit`` bytes and :func:`check_tree`'s caps.

    Raises:
        BoundError, ValueError (not JSON), OSError: one short clause each.
    """
    import json

    try:
        value = json.loads(read_bytes(path, limit))
    except UnicodeDecodeError:
        raise BoundError("it is not UTF-8 JSON") from None
    except RecursionError:
        raise BoundError(f"it nests containers more than {MAX_DEPTH} deep") from None
    check_tree(value)
    return value


# --------------------------------------------------------------------------- YAML


def _loaders() -> tuple[Any, Any]:
    """``(parser, loader)`` classes for YAML read as OmegaConf reads it (its safe loader: its
    float syntax, no timestamps, duplicate keys refused): libyaml's C parser when PyYAML has it
    (about 20 times faster), else OmegaConf's own, pure Python."""
    global _LOADERS
    if _LOADERS is None:
        import yaml
        from omegaconf._utils import get_yaml_loader

        python = get_yaml_loader()
        if not getattr(yaml, "__with_libyaml__", False):
            _LOADERS = (python, python)
        else:
            class Fast(yaml.CSafeLoader):  # type: ignore[misc,name-defined]
                """libyaml's parser, OmegaConf's resolvers and constructors."""

                yaml_implicit_resolvers = python.yaml_implicit_resolvers
                yaml_constructors = python.yaml_constructors

                def construct_mapping(self, node: Any, deep: bool = False) -> Any:
                    keys = set()
                    for key_node, _ in node.value:
                        if key_node.tag == yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG:
                            if key_node.value in keys:
                                raise yaml.constructor.ConstructorError(
                                    "while constructing a mapping", node.start_mark,
                                    f"found duplicate key {key_node.value}", key_node.start_mark)
                            keys.add(key_node.value)
                    return super().construct_mapping(node, deep=deep)

            _LOADERS = (Fast, Fast)
    return _LOADERS


_LOADERS: tuple[Any, Any] | None = None


def _yaml_events(text: str) -> None:
    """Refuse aliases and deep nesting in ``text`` by reading its parser events (linear; no
    node is built, and libyaml's composer, which recurses, never sees a deep file)."""
    import yaml

    depth = 0
    for event in yaml.parse(text, Loader=_loaders()[0]):
        if isinstance(event, yaml.AliasEvent):
            raise BoundError(
                f"it uses a YAML alias (*{event.anchor}); rlzoo's configs have none, and "
                "aliases can expand a small file into an enormous config")
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise BoundError(f"it nests more than {MAX_DEPTH} levels deep")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def parse_yaml(text: str) -> Any:
    """``text`` (a YAML config) as plain data (dicts, lists, scalars; an empty text: ``{}``),
    read as OmegaConf reads it, at bounded cost: no aliases, nesting at most
    :data:`MAX_DEPTH`, checked on the parser's events before anything is built. Its ``${...}``
    interpolations are not costed here (:func:`check_interpolations`).

    Raises:
        BoundError: beyond a cap, or not a mapping or a list; ``yaml.YAMLError`` for text that
            is not YAML.
    """
    import yaml

    _yaml_events(text)
    plain = yaml.load(text, Loader=_loaders()[1])  # noqa: S506 - a safe loader (OmegaConf's)
    if plain is None:
        plain = {}
    if not isinstance(plain, (dict, list)):
        raise BoundError("it is not a mapping or a list")
    return plain


def load_yaml(path: Path, limit: int = MAX_CONFIG_BYTES) -> Any:
    """``path`` (a YAML config) as an OmegaConf ``DictConfig`` or ``ListConfig`` (an empty file:
    an empty ``DictConfig``), read at bounded cost: a regular file read without following a
    link (:func:`read_bytes`), at most ``limit`` bytes, no aliases, nesting at most
    :data:`MAX_DEPTH` (:func:`parse_yaml`), and interpolations that resolve to at most
    :data:`MAX_RESOLVED` characters (:func:`check_interpolations`).

    Raises:
        BoundError: beyond a cap; ``ValueError`` or ``yaml.YAMLError`` for text that is not a
            config; ``OSError`` when it cannot be read.
    """
    from omegaconf import OmegaConf

    plain = parse_yaml(read_text(path, limit))
    check_interpolations(plain)
    return OmegaConf.create(plain)


def plain_config(config: Any) -> Any:
    """A config given as plain data (``policy.pt``'s), checked as a tree
    (:func:`check_tree`) and for its interpolations' cost, as an OmegaConf container.

    Raises:
        BoundError: beyond a cap.
    """
    from omegaconf import OmegaConf

    check_tree(config)
    check_interpolations(config)
    return OmegaConf.create(config)


_OPEN = "${"


def _interpolations(text: str) -> list[str]:
    """The bodies of the top-level ``${...}`` of ``text`` (nested ones stay inside)."""
    found, i = [], text.find(_OPEN)
    while i >= 0:
        depth, j = 0, i
        while j < len(text):
            if text.startswith(_OPEN, j):
                depth, j = depth + 1, j + 2
                continue
            if text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        found.append(text[i + 2:j])
        i = text.find(_OPEN, j + 1)
    return found


_PART = re.compile(r"[^.\[\]]+")


def _lookup(plain: Any, path: tuple[Any, ...]) -> Any:
    """The node of ``plain`` at ``path`` (dict keys and list indices), or ``_MISSING``."""
    node = plain
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            return _MISSING
    return node


def _target(here: tuple[Any, ...], ref: str) -> tuple[Any, ...] | None:
    """The path ``${ref}`` at node ``here`` points to: absolute (``a.b``, ``a[0]``) or relative
    to the node's parent (``.x`` a sibling, ``..x`` one level up); None above the root."""
    dots = len(ref) - len(ref.lstrip("."))
    parts: list[Any] = [int(p) if p.isdigit() else p for p in _PART.findall(ref[dots:])]
    if dots:
        base = here[:-1]  # the node's parent: one dot is a sibling
        if dots - 1 > len(base):
            return None
        return (*base[:len(base) - (dots - 1)], *parts)
    return tuple(parts)


def _too_large(limit: int) -> BoundError:
    return BoundError(f"its interpolations resolve to more than {limit:,} characters; "
                      "rlzoo's configs resolve to a few thousand")


class _InterpolationCost:
    """:func:`check_interpolations`' walk: each node's resolved size computed once (``cost``),
    the longest chain of interpolations below each string (``hops``), the nodes being costed
    (``active``, a cycle when one is met again)."""

    def __init__(self, plain: Any, limit: int) -> None:
        self.plain, self.limit = plain, limit
        self.cost: dict[tuple[Any, ...], int] = {}
        self.hops: dict[tuple[Any, ...], int] = {}  # longest chain of interpolations below
        self.active: set[tuple[Any, ...]] = set()
        self.longest = 0  # longest chain met in the string being costed

    def text(self, here: tuple[Any, ...], text: str, chain: int) -> int:
        """``text`` (the string at ``here``, or a resolver call's body) resolved: its length
        plus what each of its interpolations resolves to."""
        total = len(text)
        for body in _interpolations(text):
            if ":" in body.split(_OPEN, 1)[0] or _OPEN in body:  # a resolver call, or nested
                total += self.text(here, body, chain + 1)
            else:
                path = _target(here, body.strip())
                if path is not None:
                    total += self.node(path, chain + 1)
                    self.longest = max(self.longest, 1 + self.hops.get(path, 0))
                    if self.longest > MAX_CHAIN:
                        raise BoundError("its interpolations refer through more than "
                                         f"{MAX_CHAIN} levels")
            if total > self.limit:
                raise _too_large(self.limit)
        return total

    def node(self, path: tuple[Any, ...], chain: int) -> int:
        """The resolved size of the node at ``path`` (one per container and scalar, plus a
        string's resolved characters), reached through ``chain`` interpolations."""
        if path in self.cost:
            return self.cost[path]
        if chain > MAX_CHAIN:
            raise BoundError(f"its interpolations refer through more than {MAX_CHAIN} levels")
        if path in self.active:
            raise BoundError(f"its interpolation at {'.'.join(map(str, path))} refers to itself")
        node = _lookup(self.plain, path)
        if node is _MISSING:
            return 1  # OmegaConf reports it when resolving
        self.active.add(path)
        try:
            if isinstance(node, dict):
                total = 1 + sum(self.node((*path, k), chain) for k in node)
            elif isinstance(node, list):
                total = 1 + sum(self.node((*path, i), chain) for i in range(len(node)))
            elif isinstance(node, str):
                saved, self.longest = self.longest, 0
                total = self.text(path, node, chain)
                self.hops[path], self.longest = self.longest, saved
            else:
                total = 1
        finally:
            self.active.discard(path)
        if total > self.limit:
            raise _too_large(self.limit)
        self.cost[path] = total
        return total


def check_interpolations(plain: Any, limit: int = MAX_RESOLVED) -> int:
    """The size (characters of strings plus one per node) ``plain`` (a config as dicts and
    lists) has once OmegaConf resolves its ``${...}`` interpolations, computed from the
    unresolved text with each node costed once: ``a1: ${a0}${a0}``, ``a2: ${a1}${a1}``, ... is
    a few hundred bytes that resolve to 2**n characters.

    A ``${path}`` costs what its target resolves to (absolute ``a.b``, relative ``.x``,
    ``..x``); a resolver call ``${name:args}`` costs its text plus its nested interpolations.

    Raises:
        BoundError: the resolved size exceeds ``limit``, interpolations refer in a cycle or
            through a chain longer than :data:`MAX_CHAIN`.
    """
    check_tree(plain)
    return _InterpolationCost(plain, limit).node((), 0)


_MISSING = object()
