"""The worked examples of docs/extending.md: their commands through the CLI, and their math."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from examples.custom_critic import PessimisticCritic
from rlzoo.nets import TwinCritic
from rlzoo.store.checkpoint import list_checkpoints, load_checkpoint
from tests.from_yaml import critic_args

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "extending.md"
# Appended to each documented command: a few hundred steps with tiny networks.
SMOKE = [
    "total_steps=300", "algo.learning_starts=150", "algo.batch_size=64", "eval.episodes=2",
    "algo.actor.hidden=[32,32]", "critic.hidden=[32,32]", "log.progress=false",
]


def documented_commands() -> list[str]:
    """The `python -m rlzoo.train` lines of docs/extending.md's bash blocks that use examples/."""
    commands, in_bash = [], False
    for line in DOC.read_text().splitlines():
        if line.startswith("```"):
            in_bash = line.strip() == "```bash"
            continue
        if in_bash and line.startswith("python -m rlzoo.train") and "examples" in line:
            commands.append(line)
    return commands


def test_the_doc_shows_both_examples() -> None:
    commands = documented_commands()
    assert any("algo=sac critic=pessimistic" in c for c in commands)
    assert any("algo=crossq critic=pessimistic" in c for c in commands)
    assert any("critic._target_=examples.custom_critic" in c for c in commands)
    assert any("algo=sac_quick" in c for c in commands)
    assert not (REPO / "examples" / "crossq.py").exists()  # CrossQ ships: no copy here


@pytest.mark.parametrize("command", documented_commands())
def test_documented_command_runs(command: str, tmp_path: Path) -> None:
    args = shlex.split(command)
    assert args[:3] == ["python", "-m", "rlzoo.train"]
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, *args[1:], *SMOKE, f"hydra.run.dir={run_dir}"],
        capture_output=True, text=True, cwd=REPO, timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["total_steps"] == 300 and summary["updates"] > 0
    saved = load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])["algo"]["modules"]
    modules = {k: v[0] for k, v in saved.items()}  # a single run: a group of one, [1, ...]
    if "crossq" in command:
        assert summary["algo"] == "crossq"
        assert not any(k.startswith("target_critic.") for k in modules)  # no target network
        assert "critic.net.layers.0.running_mean" in modules  # the input's batch renorm
        evaluated = subprocess.run(
            [sys.executable, "-m", "rlzoo.evaluate", str(run_dir), "--episodes", "2",
             "--trust", "examples"],
            capture_output=True, text=True, cwd=REPO, timeout=300,
        )
        assert evaluated.returncode == 0, evaluated.stderr
        assert "over 2 episodes" in evaluated.stdout
    elif "sac_quick" in command:  # inherits SAC's keys, its own default critic
        assert summary["algo"] == "sac_quick"
        assert modules["critic.net.layers.0.weight"].shape[0] == 10  # critic=ensemble's n
        config = (run_dir / ".hydra" / "config.yaml").read_text()
        assert "_target_: rlzoo.algos.SAC" in config and "critic_lr: 0.001" in config
    else:
        assert summary["algo"] == "sac"
        heads = 3 if "+critic.n=3" in command else 2
        assert modules["critic.net.layers.4.weight"].shape == (heads, 32, 1)


def python_blocks() -> list[str]:
    """The complete programs of docs/extending.md: its ```python blocks that start with an
    import (the others are excerpts of examples/, shown for reading)."""
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), flags=re.DOTALL | re.MULTILINE)
    return [b for b in blocks if b.startswith(("import ", "from "))]


def test_the_doc_has_its_contract_examples() -> None:
    text = "\n".join(python_blocks())
    assert len(python_blocks()) >= 4
    for fragment in ("critic.net(x)", "inspect.signature", "target_critic", "next_log_prob",
                     "rlzoo.__file__"):
        assert fragment in text, fragment


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_doc_python_block_runs(index: int, tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", python_blocks()[index]], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (python_blocks()[index][:300], proc.stderr[-3000:])
    lines = proc.stdout.splitlines()
    assert len(lines) == len(BLOCK_PRINTS[index]), proc.stdout
    for line, pattern in zip(lines, BLOCK_PRINTS[index]):
        assert re.fullmatch(pattern, line), (pattern, line)


# What each complete program of docs/extending.md prints, line by line (regexes), in order:
# the critic's and the actor's contract checks; the four critic bases' signatures (sizes first,
# the YAML's keys after, only network (and n_agents) with a default); a SAC subclass built from the
# composed YAML (its ensemble of 4 and SAC's critic lr 1e-3 from conf/algo/sac.yaml) and its
# update's metrics; TD3's hooks' shapes and metrics; HASAC's (simple_spread: 3 agents);
# the import trap (one line naming the folder, then the clone's package, working).
SIGNATURE = (r"\(obs_dim: 'int', act_dim: 'int', [^=]*, dropout: 'float', "
             r"network: [^=]* = None(, n_agents: 'int' = 1)?\) -> 'None'")
BLOCK_PRINTS = [
    [r"contract holds"],
    [r"actor contract holds"],
    [rf"{name} {SIGNATURE}" for name in
     ("EnsembleCritic", "TwinCritic", "ActionSequenceCritic", "DistributionalCritic")],
    [r"EnsembleCritic 4 0\.001",
     r"\['loss/actor', 'loss/alpha', 'loss/critic', 'stats/alpha', 'stats/entropy', "
     r"'stats/q_mean'.*\]"],
    [r"\{'critic_loss': torch\.Size\(\[\]\), 'q': torch\.Size\(\[2, 32\]\), "
     r"'actor_loss': torch\.Size\(\[\]\)\}",
     r"\['loss/actor', 'loss/critic', 'stats/q_mean'\]"],
    [r"EnvSpec\(obs_dim=18, act_dim=5, n_agents=3, state_dim=54, .*\{'target': "
     r"torch\.Size\(\[1, 8\]\), 'agents': \[[012], [012], [012]\], 'joint_sample': "
     r"torch\.Size\(\[8, 3, 5\]\)\}",
     r"\['loss/actor', 'loss/actor/agent_0', .*'stats/q_mean'\]"],
    [r"rlzoo: warning: 'rlzoo' is the folder .*/rlzoo here \(a clone\), not the installed "
     r"package; the package inside it, .*/rlzoo/rlzoo, is used; .*\"The import trap\"\)",
     r".*/rlzoo/rlzoo/__init__\.py True"],
]


def test_every_program_has_its_prints() -> None:
    assert len(BLOCK_PRINTS) == len(python_blocks())


def test_a_bare_rlzoo_folder_is_named_in_one_warning(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    import types

    from rlzoo.train import warn_if_shadowed

    warn_if_shadowed()
    assert capsys.readouterr().err == ""  # the real package: nothing to say
    folder = types.ModuleType("rlzoo")
    folder.__file__ = None  # what Python makes of a folder without __init__.py
    folder.__path__ = ["/home/me/src/rlzoo"]
    monkeypatch.setitem(sys.modules, "rlzoo", folder)
    warn_if_shadowed()
    assert capsys.readouterr().err == (
        "rlzoo: warning: 'rlzoo' is the folder /home/me/src/rlzoo here, not the installed "
        "package (a folder named rlzoo in the current directory hides it); run from another "
        'folder (docs/extending.md, "The import trap")\n')


# --------------------------------------------------------------------------- the critic


def test_one_pessimism_with_two_heads_is_the_twin_critics_min() -> None:
    """beta = 1 over two heads is min(Q1, Q2): the tutorial critic is SAC's twin critic there,
    bootstrap and actor value alike; beta = 0 is the heads' mean."""
    trunk = {k: v for k, v in critic_args("twin", hidden=[8]).items() if k != "actor_reduce"}
    critic = PessimisticCritic(3, 2, n=2, pessimism=1.0, **trunk)
    twin = TwinCritic(3, 2, actor_reduce="min", **trunk)
    twin.load_state_dict(critic.state_dict())
    obs, action = torch.randn(6, 3), torch.rand(6, 2) * 2 - 1
    torch.testing.assert_close(critic.next_value(obs, action), twin.next_value(obs, action))
    q = critic(obs, action)
    torch.testing.assert_close(critic.actor_value(q), twin.actor_value(q))
    critic.pessimism = 0.0
    torch.testing.assert_close(critic.actor_value(q), q.mean(0))
    assert critic.joins_passes()  # outputs and td_loss_from are the base's: joint passes work
    with pytest.raises(ValueError, match="critic.n must be >= 2"):
        PessimisticCritic(3, 2, n=1, pessimism=1.0, **trunk)


def test_the_example_yaml_builds_the_critic() -> None:
    critic = PessimisticCritic(3, 2, **critic_args("pessimistic", hidden=[8]))
    assert (critic.members, critic.pessimism) == (2, 0.5)
    q = torch.tensor([[1.0, 4.0], [3.0, 0.0]])  # heads x batch: means 2, 2; stds 1, 2
    assert critic.next_value_from(q).tolist() == [[1.5, 1.0]]


def recipe() -> tuple[dict[str, str], list[str]]:
    """docs/extending.md's "whole recipe": its files (blocks whose first line is ``# proj/...``)
    and the rlzoo commands of its bash block."""
    text = DOC.read_text().split("## The whole recipe", 1)[1].split("\n## ", 1)[0]
    files = {}
    for block in re.findall(r"^```(?:python|yaml)\n(.*?)^```", text, flags=re.S | re.M):
        first, _, rest = block.partition("\n")
        files[first.removeprefix("# ").strip()] = rest
    (bash,) = re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)
    return files, [line for line in bash.splitlines() if line.startswith("python -m rlzoo.")]


def test_the_outside_package_recipe_runs_as_written(tmp_path: Path) -> None:
    """The recipe's package, written outside the repository, found through PYTHONPATH and
    hydra.searchpath; its resume refused in one line without trust and run with it; evaluated
    with --trust. Run from a folder that holds neither rlzoo nor the package."""
    files, commands = recipe()
    assert set(files) == {"proj/my_pkg/__init__.py", "proj/my_pkg/my_critic.py",
                          "proj/my_pkg/conf/critic/pessimistic.yaml"}, files
    for name, content in {**files, "proj/my_pkg/conf/__init__.py": ""}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "proj"), str(REPO)]),
           "OMP_NUM_THREADS": "1"}
    train, resume, evaluate = (shlex.split(c.split("#")[0]) for c in commands)
    small = ["total_steps=600", "algo.learning_starts=300", "eval.every=300", "eval.episodes=1",
             "critic.hidden=[16]", "algo.actor.hidden=[16]", "log.progress=false"]

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args[1:]], cwd=work, env=env,
                              capture_output=True, text=True, timeout=600)

    proc = run(train + small)
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = (work / "runs" / "mine" / ".hydra" / "config.yaml").read_text()
    assert "_target_: my_pkg.my_critic.PessimisticCritic" in config and "beta: 0.5" in config
    untrusted = run([a for a in resume if not a.startswith("trust=")][:-1] + ["total_steps=900"])
    assert untrusted.returncode == 2 and "my_pkg" in untrusted.stderr, untrusted.stderr[-2000:]
    assert "trust" in untrusted.stderr.splitlines()[-1]
    proc = run(resume[:-1] + ["total_steps=900"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((work / "runs" / "mine" / "summary.json").read_text())["total_steps"] == 900
    proc = run(evaluate + ["--episodes", "1"])
    assert proc.returncode == 0, proc.stderr[-3000:]
