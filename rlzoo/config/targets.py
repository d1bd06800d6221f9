"""The ``_target_`` keys of a config the user composed, checked before anything is made.

Hydra imports a ``_target_`` only when it builds the component, long after the run dir exists,
and reports a failure as its own multi-line ``InstantiationException``. :func:`check_buildable`
does the import first (``python -m rlzoo.train`` and ``rlzoo.train`` call it through
``rlzoo.cli.check`` before a run dir is made), so a target that cannot be imported, or that is
not the kind of class its slot needs, is one ``UserError`` line naming the key:

- every ``_target_`` must import (the way Hydra imports it) and be callable;
- a class named by a component rlzoo builds must be of its kind: ``algo`` an
  ``rlzoo.algos.Algorithm`` subclass; ``algo.actor``, ``critic`` and ``tuner`` ``torch.nn.Module``
  subclasses (the algorithm trains their parameters and checkpoints their ``state_dict``);
  ``env.family`` an ``rlzoo.envs.family.Family`` subclass (a family of your own), ``env.backend``
  an ``rlzoo.envs.backend.Backend`` subclass (a single-agent backend of your own). A
  function is accepted too (Hydra calls it the same way): it must return such an object.

A constructor that raises is found when the algorithm is built (``rlzoo.config.build``):
:func:`user_frame` points at the deepest line of the user's own code in the traceback, so the
error can name it in one line.

A config read from a run dir is checked by ``rlzoo.config.trust`` instead (which code it may run).
"""

from __future__ import annotations

import os
import types
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlzoo.errors import UserError, one_line

TARGET_KEY = "_target_"
# slot -> what its target must be (a class path, its base class and how the message names it)
SLOTS: dict[str, tuple[str, str]] = {
    "algo": ("rlzoo.algos.Algorithm", "an rlzoo Algorithm subclass (e.g. rlzoo.algos.SAC)"),
    "algo.actor": ("torch.nn.Module",
                   "a torch.nn.Module subclass (e.g. rlzoo.nets.TanhGaussianActor)"),
    "critic": ("torch.nn.Module", "a torch.nn.Module subclass (e.g. rlzoo.nets.TwinCritic)"),
    "tuner": ("torch.nn.Module", "a torch.nn.Module subclass (e.g. rlzoo.optim.entropy.AutoAlpha)"),
    "env.family": ("rlzoo.envs.family.Family", "an env family adapter (docs/extending.md)"),
    "env.backend": ("rlzoo.envs.backend.Backend", "a single-agent env backend (docs/extending.md)"),
}


def targets(cfg: DictConfig | dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(key path, target)`` of every ``_target_`` in ``cfg`` (its ``hydra`` node left out),
    parents first; interpolations resolved."""
    plain: Any = cfg
    if isinstance(cfg, DictConfig):
        task = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
        try:
            plain = OmegaConf.to_container(task, resolve=True)
        except Exception:  # noqa: BLE001 - e.g. ${hydra:...} without its node: as written
            plain = OmegaConf.to_container(task, resolve=False)

    def walk(node: Any, path: str) -> Iterator[tuple[str, Any]]:
        if isinstance(node, dict):
            if TARGET_KEY in node:
                yield path, node[TARGET_KEY]
            for key, item in node.items():
                if not (path == "" and key == "hydra"):
                    yield from walk(item, f"{path}.{key}" if path else str(key))
        elif isinstance(node, list):
            for i, item in enumerate(node):
                yield from walk(item, f"{path}[{i}]")

    yield from walk(plain, "")


def _kind(obj: Any) -> str:
    if isinstance(obj, types.ModuleType):
        return "a module"
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        return "a function"
    return f"an object of type {type(obj).__name__}"


def _import_hint(target: str, err: BaseException) -> str:
    """How to fix a target that does not import: make its package importable, or fix the path."""
    top = target.split(".")[0]
    root = err
    while root.__cause__ is not None:
        root = root.__cause__
    if isinstance(root, ModuleNotFoundError) and root.name and (
            root.name == top or root.name.startswith(top + ".")) and root.name.split(".")[0] == top:
        if root.name == top:
            return (f"no module named {top!r} is importable from {os.getcwd()}; run from the "
                    f"folder that holds {top}/, pip install -e your project, or add its folder to "
                    "PYTHONPATH")
        parent, _, last = root.name.rpartition(".")
        return f"{parent} has no attribute or submodule {last!r}; check the name and the path"
    if isinstance(root, ModuleNotFoundError):
        return f"{target} imports {root.name!r}, which is not installed; install it"
    if isinstance(root, AttributeError):
        return "check the class name and the module path"
    return f"importing it raised {type(root).__name__}: {one_line(root, 120)}; fix that module"


def locate(target: Any, where: str) -> Any:
    """The object ``target`` names, imported as Hydra imports it; ``UserError`` (one line naming
    ``where``, e.g. ``algo.actor._target_``) if it does not import or is not callable."""
    from hydra._internal.utils import _locate  # what instantiate uses, minus get_object's log

    if not isinstance(target, str) or not target:
        raise UserError(f"{where}={target!r} is not a class path; write e.g. "
                        f"{where}=my_pkg.MyClass")
    try:
        obj = _locate(target)
    except Exception as err:  # noqa: BLE001 - an import runs any code: every failure is one line
        raise UserError(f"{where}={target} cannot be imported; {_import_hint(target, err)}") \
            from None
    if not callable(obj):
        raise UserError(f"{where}={target} is {_kind(obj)}, not a class; point it at the class to "
                        "build")
    return obj


def check_buildable(cfg: DictConfig) -> None:
    """Import every ``_target_`` of ``cfg`` (a composed config) and check that a class named by a
    component rlzoo builds is of its kind (:data:`SLOTS`); raises ``UserError`` (one line) for
    the first that is not. Imports the user's modules, as the run would."""
    for path, target in targets(cfg):
        where = f"{path}.{TARGET_KEY}" if path else TARGET_KEY
        obj = locate(target, where)
        if path not in SLOTS:
            continue
        base_path, wanted = SLOTS[path]
        base = locate(base_path, "rlzoo's own " + base_path)
        if isinstance(obj, type) and not issubclass(obj, base):
            raise UserError(f"{where}={target} is a class but not {wanted}; make it a "
                            f"subclass of {base_path}")


def user_modules(cfg: DictConfig | dict[str, Any]) -> set[str]:
    """The top-level packages of ``cfg``'s targets outside rlzoo (the user's code)."""
    tops = {str(t).split(".")[0] for _, t in targets(cfg) if isinstance(t, str)}
    return {t for t in tops if t and t != "rlzoo"}


def user_frame(err: BaseException, modules: set[str]) -> str | None:
    """``file:line in function`` of the deepest traceback frame of ``err`` (or of its causes)
    that runs code of ``modules``; None when the user's code is not in it."""
    found = None
    chain: list[BaseException] = []
    cause: BaseException | None = err
    while cause is not None and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    for exc in reversed(chain):  # the root cause first: its traceback reaches the user's line
        tb = exc.__traceback__
        while tb is not None:
            name = str(tb.tb_frame.f_globals.get("__name__", ""))
            if name.split(".")[0] in modules:
                code = tb.tb_frame.f_code
                function = getattr(code, "co_qualname", code.co_name)
                found = f"{code.co_filename}:{tb.tb_lineno} in {function}"
            tb = tb.tb_next
        if found:
            return found
    return None
