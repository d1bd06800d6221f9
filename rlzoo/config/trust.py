"""Which code a config read from a run directory may call.

A run directory's ``.hydra/config.yaml`` names the classes rlzoo builds (``_target_`` keys, which
``hydra.utils.instantiate`` imports and calls with the node's other keys as arguments, nested
nodes first). A run dir downloaded from elsewhere is data, but a ``_target_`` turns it into code:
``{_target_: torch.load, weights_only: false, f: {_target_: io.BytesIO, _args_: [...]}}`` would
unpickle attacker bytes. So before anything of such a config is built, :func:`check_targets` walks
every node (every group, non-component keys, lists, nested dicts) and accepts a ``_target_`` only

- in rlzoo: a class defined in the ``rlzoo`` package that is a ``torch.nn.Module`` (algorithms,
  networks, critics, tuners: the components rlzoo's own configs name), or
- in a module the user trusts by name (``--trust my_pkg`` for ``rlzoo.evaluate``,
  ``trust=[my_pkg]`` with ``resume=``): ``my_pkg`` trusts ``my_pkg.x.Y`` but not ``my_pkgevil.Y``.

A target is resolved the way Hydra resolves it, so a path that only passes through a trusted
module (``rlzoo.store.checkpoint.torch.load`` is ``torch.load``) is judged by what it reaches.
Nothing
of an untrusted module is imported. An ``env.id`` of the form ``module:Name-v0`` imports
``module`` (gymnasium's syntax), so its module must be trusted as well.

A config the user composes on the command line (``python -m rlzoo.train ...``) is theirs and is
not checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from rlzoo.errors import UserError

BUILTIN_TRUST = "rlzoo"
TARGET_KEY = "_target_"
_MODULE_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def check_trust_names(trusted: Sequence[str]) -> tuple[str, ...]:
    """The user's trusted module names, validated (``my_pkg``, ``my_pkg.sub``; a comma-separated
    string is split). Raises ``UserError`` for anything that is not a dotted module path."""
    names = [trusted] if isinstance(trusted, str) else list(trusted)
    out: list[str] = []
    for name in names:
        for part in str(name).split(","):
            part = part.strip()
            if not _MODULE_PATH.match(part):
                raise UserError(
                    f"{part!r} is not a module name to trust; name Python modules or packages, "
                    "e.g. --trust my_pkg (rlzoo.evaluate) or trust=[my_pkg] (resume=)"
                )
            out.append(part)
    return tuple(out)


def _under(path: str, module: str) -> bool:
    """``path`` is ``module`` or inside it, matching whole dotted components."""
    return path == module or path.startswith(module + ".")


def _nodes(value: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every dict in ``value`` (a plain container), with its dotted key path, parents first."""
    if isinstance(value, dict):
        yield path, value
        for key, item in value.items():
            yield from _nodes(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _nodes(item, f"{path}[{i}]")


# How the command line trusts a module; ``{module}`` is the target's top-level package.
CLI_TRUST = "pass --trust {module} to rlzoo.evaluate or trust=[{module}] with resume=RUN_DIR"


def _trust_hint(target: str, how: str = CLI_TRUST) -> str:
    top = target.split(".")[0].split(":")[0]
    top = top if top.isidentifier() else "my_pkg"  # a name to paste, never a hostile string
    return f"only if you trust that code, {how.format(module=top)}"


def _refuse(
    source: str, where: str, target: Any, why: str, hint: bool = True, module: str = "",
    how: str = CLI_TRUST,
) -> UserError:
    fix = _trust_hint(module or str(target), how) if hint else (
        "a config read from a run dir may only build rlzoo's components and classes of modules "
        "you trust; restore the config.yaml rlzoo.train wrote"
    )
    return UserError(f"{source} asks to call {target!r} at {where}, {why}; {fix}")


def _check_target(
    target: Any, where: str, trusted: tuple[str, ...], source: str, how: str = CLI_TRUST
) -> None:
    """Refuse one ``_target_`` value unless it is an rlzoo component or in a trusted module."""
    if not isinstance(target, str) or not _MODULE_PATH.match(target):
        raise _refuse(source, where, target, "which is not a dotted class path", hint=False)
    if any(part.startswith("__") for part in target.split(".")):
        raise _refuse(source, where, target, "which reaches a dunder attribute", hint=False)
    by_user = any(_under(target, m) for m in trusted)
    if not by_user and not _under(target, BUILTIN_TRUST):
        raise _refuse(source, where, target, "outside rlzoo and the modules you trust", how=how)
    try:
        from hydra._internal.utils import _locate  # what instantiate uses, minus get_object's log

        obj = _locate(target)  # imports only trusted modules (checked above)
    except Exception as err:  # noqa: BLE001 - hydra wraps import errors of many kinds
        reason = " ".join(str(err).split())[:160]
        raise UserError(
            f"{source} names {target!r} at {where}, which cannot be imported ({reason}); "
            "check the module path, or install the package that provides it"
        ) from None
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str):
        raise _refuse(source, where, target, "which is not a class or function", hint=False)
    if any(_under(module, m) for m in trusted):
        return
    if _under(module, BUILTIN_TRUST):
        import torch

        if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
            return
        raise _refuse(
            source, where, target,
            "which is not an rlzoo component (a torch.nn.Module class)", hint=False,
        )
    raise _refuse(
        source, where, target,
        f"which resolves to {module}.{getattr(obj, '__qualname__', '?')}, outside rlzoo and the "
        "modules you trust", module=module, how=how,
    )


def check_targets(
    cfg: DictConfig | dict[str, Any], trusted: Sequence[str] = (), source: str = "the config",
    how_to_trust: str = CLI_TRUST,
) -> None:
    """Refuse ``cfg`` (read from a run dir) if any node would call code outside rlzoo's
    components and the ``trusted`` modules; checked for every node before anything is built.

    Args:
        cfg: the whole config (interpolations are resolved first, so a ``_target_`` written as
            ``${...}`` is judged by its value).
        trusted: module names the user trusts (``["my_pkg"]`` trusts ``my_pkg`` and everything
            below it, by whole dotted components). ``rlzoo`` is always trusted for its
            ``torch.nn.Module`` classes.
        source: how the message names the config (e.g. its path).
        how_to_trust: how the caller trusts a module, with ``{module}`` for its name (default:
            the command line's ``--trust`` / ``trust=[...]``).

    Raises:
        UserError: one line naming the key path, the target and how to trust its module.
    """
    names = check_trust_names(trusted)
    if isinstance(cfg, (DictConfig, ListConfig)):
        plain: Any = OmegaConf.to_container(cfg, resolve=True)
    else:
        plain = cfg
    for path, node in _nodes(plain, ""):
        where = f"{path}.{TARGET_KEY}" if path else TARGET_KEY
        if TARGET_KEY in node:
            _check_target(node[TARGET_KEY], where, names, source, how_to_trust)
    env = plain.get("env") if isinstance(plain, dict) else None
    env_id = env.get("id") if isinstance(env, dict) else None
    if isinstance(env_id, str) and ":" in env_id:
        module = env_id.split(":", 1)[0]
        if not any(_under(module, m) for m in (*names, BUILTIN_TRUST)):
            raise UserError(
                f"{source} sets env.id={env_id!r}, which imports module {module!r} (outside rlzoo "
                f"and the modules you trust); {_trust_hint(module, how_to_trust)}"
            )
