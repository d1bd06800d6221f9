"""``python -m rlzoo.train --keys`` / ``--help``: every user key with its default and the
documentation its YAML declares; no internal config group (rlzoo.conf.INTERNAL_GROUPS)."""

from __future__ import annotations

from conftest import run_cli

from rlzoo.conf import INTERNAL_GROUPS
from rlzoo.conf.keys import CONF, yaml_keys


def key_lines(text: str) -> dict[str, str]:
    """``{key: the rest of its line}`` of the listing's key section."""
    section = text.split("\nkeys for ", 1)[1].splitlines()[1:]
    return {line.split()[0]: line for line in section if line.strip()}


def test_keys_lists_every_key_with_its_documentation_and_hides_internal_groups() -> None:
    proc = run_cli(["--keys"])
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    keys = key_lines(text)
    declared = [k for k, value, _ in yaml_keys(CONF / "config.yaml") if value]  # leaves
    assert "normalize.obs" in declared and "env_workers" in declared
    for key, _, doc in yaml_keys(CONF / "config.yaml"):
        if key in declared:
            assert key in keys, key
            assert doc and doc in keys[key], (key, keys[key])  # its own comment, every one
    assert "running mean/var per observation feature" in keys["normalize.obs"]
    assert keys["critic.hidden"].split()[1:3] == ["[256,", "256]"]  # sac's twin critic
    assert "algo.learning_starts" in keys and "env.id" in keys
    groups = text.split("config groups", 1)[1].split("\n\n", 1)[0]
    assert "  algo " in groups and "sac*" in groups and "  net " in groups
    for internal in INTERNAL_GROUPS:
        assert internal not in text, internal
    assert run_cli(["--help"]).stdout == text  # --help is the same listing, not Hydra's


def test_keys_follow_the_chosen_algorithm_and_a_bad_choice_is_one_line() -> None:
    proc = run_cli(["--keys", "algo=simbav2"])
    assert proc.returncode == 0, proc.stderr
    keys = key_lines(proc.stdout)
    assert "simbav2*" in proc.stdout and "categorical*" in proc.stdout
    assert keys["normalize.obs"].split()[1] == "true"  # SimbaV2's own default
    assert "[algo=simbav2: normalize_observation]" in keys["normalize.obs"]
    assert "critic.atoms" in keys and "critic.network.hidden_dim" in keys
    bad = run_cli(["--keys", "critic=nope"])
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and bad.stderr.startswith("rlzoo: error: ") and \
        "critic/nope" in bad.stderr, bad.stderr
