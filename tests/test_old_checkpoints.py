"""Run dirs written before the one-loop change (tests/fixtures/pre_one_loop, by commit 26669bf)
still resume and evaluate: the single-agent trainer's loop state, the multi-agent trainer's
per-agent episode returns and COMA's rollout all load into the one loop."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import read_summary, run_cli

from rlzoo.run.checkpoint import list_checkpoints, load_checkpoint

FIXTURES = Path(__file__).parent / "fixtures" / "pre_one_loop"
CASES = {  # name: (step the old run stopped at, extra steps to train)
    "sac": (250, 60),  # mid-episode (Pendulum episodes are 200 steps)
    "sac_chunk": (252, 40),  # 2 envs, 4-step action chunks in flight
    "maddpg": (137, 30),  # MPE, mid-episode (25-step episodes)
    "coma": (130, 60),  # on-policy, mid-rollout (rollout_steps=50)
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_old_run_dir_resumes_and_evaluates(tmp_path: Path, name: str) -> None:
    old_step, extra = CASES[name]
    run_dir = tmp_path / name
    shutil.copytree(FIXTURES / name, run_dir)
    assert list_checkpoints(run_dir / "checkpoints")[-1].name == f"step_{old_step:010d}.pt"
    proc = run_cli([f"resume={run_dir}", f"total_steps={old_step + extra}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"resuming {run_dir} from step_{old_step:010d}.pt at step {old_step}" in proc.stderr
    summary = read_summary(run_dir)
    assert summary["total_steps"] >= old_step + extra
    assert np.isfinite(summary["final_eval_return"])
    state = load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])
    loop = state["members"][0]["loop"]  # written in the one layout
    if name in ("maddpg", "coma"):  # the old per-agent returns became team + agent returns
        agent = loop["agent_return"].numpy()
        assert agent.shape == (1, 3) and loop["episode_return"].shape == (1,)
        assert np.allclose(loop["episode_return"].numpy(), agent.mean(axis=1))
        assert loop["env_state"].shape == (1, 54)
    else:
        assert "agent_return" not in loop and "env_state" not in loop
    proc = run_cli([str(run_dir), "--episodes", "2"], module="rlzoo.evaluate")
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(next(run_dir.glob("eval_*.json")).read_text())
    assert record["step"] == summary["total_steps"] and len(record["returns"]) == 2
