"""The README's first commands as a newcomer runs them: the 20k-step Humanoid look evaluates
often enough to draw a curve and talks at least once a minute off a terminal; the multi-agent
short presets (``preset=short``) are named with their settings where a newcomer reads."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from from_yaml import composed

from rlzoo.run.logger import AUTO_EVERY_S, LONG_RUN_S

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def readme_train_commands() -> list[list[str]]:
    """The overrides of every ``python -m rlzoo.train`` command in the README's code blocks."""
    blocks = re.findall(r"```bash\n(.*?)```", README, flags=re.S)
    commands = []
    for line in "\n".join(blocks).splitlines():
        for part in line.split("&&"):
            words = shlex.split(part.split("#", 1)[0])
            if words[:3] == ["python", "-m", "rlzoo.train"]:
                commands.append(words[3:])
    return commands


def test_the_first_look_evaluates_ten_times_and_is_under_an_hour() -> None:
    """Issue 57: the 20k-step Humanoid run evaluated at 10k and 20k only (two points); it must
    show a curve. At the README's ~51 learning steps/s it takes minutes, so the default
    progress interval (auto) is a minute."""
    first = readme_train_commands()[0]
    assert first[:2] == ["algo=sac", "env=Humanoid"], first
    cfg = composed(*first)
    assert cfg.total_steps == 20_000
    evaluations = cfg.total_steps // cfg.eval.every
    assert evaluations >= 10, first
    assert cfg.algo.learning_starts < cfg.eval.every * 3  # most points are after learning starts
    assert "ten points on its `eval/return` curve" in README and evaluations == 10
    assert cfg.log.progress_every_s == "auto"
    learning_s = (cfg.total_steps - cfg.algo.learning_starts) / 51.0
    assert learning_s < LONG_RUN_S and AUTO_EVERY_S == 60.0
