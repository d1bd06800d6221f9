"""Paired floors (rlzoo/policy/floors.py): the zero action and uniform random actions played on each
seed's own evaluation episodes (env seeds seed + 10,000 + i), cached by what they depend on; the
results page counts a seed as beating the zero action on those same episodes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rlzoo.config.build import read_run_config
from rlzoo.errors import UserError
from rlzoo.policy.floors import episode_floors, floor_key, read_cache, run_floors
from rlzoo.store import for_tools
from tools.reproduce.page.floors import FLOORS_FILE, scale_lines
from tools.reproduce.suites import SUITES

REPO = Path(__file__).resolve().parents[1]
MARL = REPO / "results" / "marl"
SPREAD = MARL / "mpe-simple_spread"


def one_episode(cfg, env_seed: int) -> float:
    """The zero action's return on one env made and reset alone with ``env_seed``."""
    env = for_tools.make_env(cfg, 1, env_seed)
    obs, _ = env.reset(seed=env_seed)
    span = np.where(env.act_mask, env.action_high - env.action_low, 1.0)
    zero = np.where(env.act_mask, -1.0 - 2.0 * env.action_low / span, 0.0)
    result = for_tools.run_episodes([env], [obs], lambda b: np.broadcast_to(zero, b.shape[:2]
                                                                          + env.act_shape))
    env.close()
    return float(result[0].returns[0])


def test_each_episode_is_the_seeds_own_evaluation_episode() -> None:
    """Episode i of seed s's floors starts from env seed s + 10,000 + i: the zero action's
    return on an env seeded so alone equals it, and another seed's episodes differ."""
    cfg = read_run_config(SPREAD / "hasac-s3")
    floors = episode_floors(cfg, 3, 4)
    assert len(floors["zero"]) == len(floors["random"]) == 4
    for i in range(4):
        assert floors["zero"][i] == pytest.approx(one_episode(cfg, 3 + 10_000 + i), abs=1e-9)
    assert episode_floors(cfg, 4, 4)["zero"] != floors["zero"]
    assert floors["random"] != floors["zero"]
    assert episode_floors(cfg, 3, 4) == floors  # repeats exactly (random drawn from seed 3)


def test_committed_floors_are_recomputed_exactly(tmp_path: Path) -> None:
    """results/marl/floors.json holds what rlzoo.policy.floors computes now for a seed's
    episodes."""
    committed = read_cache(MARL / FLOORS_FILE)
    run = SPREAD / "maddpg-s2"
    key = floor_key(read_run_config(run), 2, 10)
    again = run_floors([(run, 2)], tmp_path / "floors.json")[str(run)]
    assert again == committed[key]
    assert json.loads((tmp_path / "floors.json").read_text()) == {key: again}
    # simple_spread, seed 2: the zero action's mean on its own 10 episodes (issue 56: -28.2)
    assert np.mean(again["zero"]) == pytest.approx(-28.23, abs=0.01)


def test_cache_is_read_not_recomputed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = SPREAD / "coma-s1"
    key = floor_key(read_run_config(run), 1, 10)
    cache = tmp_path / "floors.json"
    cache.write_text(json.dumps({key: {"zero": [1.0], "random": [2.0]}}))
    monkeypatch.setattr("rlzoo.policy.floors.episode_floors", lambda *a: pytest.fail("recomputed"))
    assert run_floors([(run, 1)], cache) == {str(run): {"zero": [1.0], "random": [2.0]}}
    cache.write_text("[1, 2]")
    with pytest.raises(UserError, match="is not a floors file"):
        run_floors([(run, 1)], cache)


def test_a_run_without_config_has_no_floors(tmp_path: Path, capsys) -> None:
    (tmp_path / "run").mkdir()
    assert run_floors([(tmp_path / "run", 0)]) == {}
    assert "no floors" in capsys.readouterr().err


def test_the_page_pairs_each_seed_with_its_own_episodes(tmp_path: Path) -> None:
    """Issue 56: paired on the same episodes every HASAC seed of simple_spread beats the zero
    action (+2.4 to +4.7), where a mean over 100 other episodes (-23.5) said 1 of 5."""
    root = tmp_path / "marl"
    rows = {}
    for row in ("hasac", "maddpg"):
        rows[row] = []
        for seed in range(5):
            dest = root / "mpe-simple_spread" / f"{row}-s{seed}"
            shutil.copytree(SPREAD / f"{row}-s{seed}", dest)
            rows[row].append(dest)
    shutil.copy(MARL / FLOORS_FILE, root / FLOORS_FILE)
    method, beat = scale_lines(SUITES["marl"], "mpe-simple_spread", root, rows)
    assert "hasac 5 of 5 (+2.4 to +4.7)" in beat and "maddpg 5 of 5 (+5.8 to +10.6)" in beat
    assert "the env's zero action (no force or torque) -28.2 to -25.4" in method
    assert read_cache(root / FLOORS_FILE) == read_cache(MARL / FLOORS_FILE)  # nothing computed
