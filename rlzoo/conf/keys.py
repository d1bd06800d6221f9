"""``python -m rlzoo.train --keys [algo=NAME critic=NAME env=NAME ...]`` (also ``--help``): every
key a user sets, with its default and the documentation its YAML declares beside it.

Each key is documented once, by the comment after ``key: value`` in the file that declares it
(``config.yaml``, ``algo/<name>.yaml``, ``critic/<name>.yaml``, ...; an indented comment line
below continues it). The listing reads those files as text, so it shows exactly what they say:
the config groups and their choices (not :data:`rlzoo.conf.INTERNAL_GROUPS`, which algorithm
files choose), the root keys, then the keys of the chosen algorithm, critic, tuner, network and
env (``algo=sac``'s by default; name others on the command line).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from rlzoo.conf import INTERNAL_GROUPS

CONF = Path(__file__).resolve().parent
_KEY = re.compile(r"^(\s*)([A-Za-z_][\w]*):(.*)$")
_HIDDEN_BLOCKS = ("defaults", "hydra")  # config.yaml's composition and Hydra's own settings
# the groups whose chosen file documents keys, and the node its keys live under
DOCUMENTED = (("algo", ""), ("net", ""), ("critic", "critic."), ("tuner", "tuner."),
              ("env", "env."))


def yaml_keys(path: Path, prefix: str = "") -> list[tuple[str, str, str]]:
    """``(dotted key, default, documentation)`` of every key of one YAML file, in file order:
    not ``defaults:``/``hydra:`` nor private keys (``_target_``) and what is under them."""
    out: list[tuple[str, str, str]] = []
    stack: list[tuple[int, str]] = []
    hidden_below: int | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.lstrip()
        if stripped.startswith("#"):
            if out and len(line) - len(stripped) > 10:  # a continued comment
                key, value, doc = out[-1]
                out[-1] = (key, value, f"{doc} {stripped.lstrip('#').strip()}".strip())
            continue
        match = _KEY.match(line)
        if not match:
            continue
        indent, key, rest = len(match[1]), match[2], match[3]
        if hidden_below is not None and indent > hidden_below:
            continue
        hidden_below = None
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if key.startswith("_") or (not stack and key in _HIDDEN_BLOCKS):
            hidden_below = indent
            continue
        value, _, doc = rest.partition(" #")
        stack.append((indent, key))
        out.append((prefix + ".".join(k for _, k in stack), value.strip(), doc.strip()))
    return out


def group_choices() -> dict[str, list[str]]:
    """Every user-facing config group and its choices (``env``'s subfolders as ``mpe/...``)."""
    groups = {}
    for folder in sorted(p for p in CONF.iterdir() if p.is_dir() and not p.name.startswith("_")):
        if folder.name in INTERNAL_GROUPS:
            continue
        groups[folder.name] = sorted(
            p.relative_to(folder).with_suffix("").as_posix() for p in folder.rglob("*.yaml"))
    return groups


def algo_files(algo: str) -> list[Path]:
    """``conf/algo/<algo>.yaml`` after the algo files its defaults list composes first, each
    after its own (``- flashsac`` in ``algo/flashsac_gpu.yaml``); ``[]`` for no such file."""
    path = CONF / "algo" / f"{algo}.yaml"
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    block = text.split("\ndefaults:", 1)[1].split("\n\n", 1)[0] if "\ndefaults:" in text else ""
    parents = re.findall(r"^\s*-\s*([A-Za-z_]\w*)\s*(?:#.*)?$", block, flags=re.MULTILINE)
    return [*(f for name in parents if name != "_self_" for f in algo_files(name)), path]


def composed_keys(overrides: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """The composed config's keys for ``overrides`` (``{dotted key: default as written}``,
    interpolations unresolved, private keys left out) and the group choices it was made of."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    choices = {k: str(v) for k, v in cfg.hydra.runtime.choices.items()
               if not k.startswith("hydra") and v is not None}
    plain = OmegaConf.to_container(cfg, resolve=False)
    del plain["hydra"]
    flat: dict[str, str] = {}

    def walk(node: object, prefix: str) -> None:
        if isinstance(node, dict) and node:
            for key, value in node.items():
                if not str(key).startswith("_"):
                    walk(value, f"{prefix}{key}.")
        else:
            flat[prefix[:-1]] = json.dumps(node) if isinstance(node, (list, dict, bool)) \
                or node is None else str(node)

    walk(plain, "")
    return flat, choices


def keys_text(overrides: list[str]) -> str:
    """The text ``--keys`` prints for ``overrides`` (``algo=simbav2``, ``critic=ensemble``, any
    override): every key of the config they compose, its default and its documentation."""
    keys, chosen = composed_keys([o for o in overrides if not o.startswith("-")])
    base: dict[str, str] = {}  # what a key means: the file that declares it
    for group, prefix in [*DOCUMENTED[1:], ("", "")]:
        path = CONF / group / f"{chosen.get(group, '')}.yaml" if group else CONF / "config.yaml"
        if path.is_file():
            base.update({k: doc for k, _, doc in yaml_keys(path, prefix) if doc})
    algo = chosen.get("algo", "")
    docs = dict(base)
    for path in algo_files(algo):  # an algo file it composes first, then its own
        for key, _, doc in yaml_keys(path):
            if doc and (key.startswith("algo.") or key not in base):
                docs[key] = doc
            elif doc and doc != base[key]:  # the algorithm's own word on a shared key
                docs[key] = f"{base[key]} [algo={path.stem}: {doc}]"
    lines = ["usage: python -m rlzoo.train algo=NAME env=NAME [key=value ...]; "
             "--keys [algo=NAME ...]: these keys for those choices; Hydra's flags: --hydra-help",
             "", "config groups (group=choice; * = chosen here):"]
    for name, choices in group_choices().items():
        shown = [f"{c}*" if c == chosen.get(name) else c for c in choices]
        lines.append(f"  {name:<8} {' | '.join(shown)}")
    lines += ["", f"keys for {' '.join(f'{g}={chosen[g]}' for g, _ in DOCUMENTED if g in chosen)}"
              " (key, default, what it does):"]
    rank = {"algo": 1, "critic": 2, "tuner": 3, "env": 4}
    for key in sorted(keys, key=lambda k: rank.get(k.split(".", 1)[0], 0)):
        lines.append(f"  {key:<34} {keys[key]:<14} {docs.get(key, '')}".rstrip())
    return "\n".join(lines)


FLAGS = ("--keys", "--help", "-h")
"""``python -m rlzoo.train`` flags that print :func:`keys_text` (Hydra's own help: --hydra-help)."""


def print_keys(args: list[str]) -> None:
    """Print the listing for the command line ``args`` to stdout; a bad override is one line
    on stderr (exit 2)."""
    from rlzoo.errors import exit_with, settle_streams

    try:
        text = keys_text([a for a in args if a not in FLAGS])
    except Exception as err:  # noqa: BLE001 - Hydra's composition errors, one line each
        exit_with(f"cannot list the keys for {' '.join(args)}: "
                  f"{str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__}")
    try:
        print(text, flush=True)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        pass
    settle_streams()
