"""`python -m rlzoo.evaluate`: finished runs, videos, multi-agent runs and one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import run_cli
from omegaconf import OmegaConf
from torch import nn

from rlzoo.algos.base import Algorithm, EnvSpec
from rlzoo.envs.pettingzoo import make_multi_agent_env
from rlzoo.evaluate import evaluate_run, main
from rlzoo.store.checkpoint import (
    checkpoint_path,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)

REPO = Path(__file__).resolve().parents[1]
TINY = ["algo.actor.hidden=[32,32]", "critic.hidden=[32,32]", "log.progress=false"]


def run(module: str, *args: str, env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:
    """``python -m <module> <args>`` from the repository root; conftest.run_cli's (forked) when
    the environment is this process's."""
    if env is None:
        return run_cli(list(args), module=module, timeout=300)
    environ = {**os.environ, "OMP_NUM_THREADS": "1", **env}
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=REPO,
        env=environ, timeout=300,
    )


def train(run_dir: Path, *overrides: str) -> Path:
    proc = run("rlzoo.train", *TINY, *overrides, f"hydra.run.dir={run_dir}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


def written_record(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON record named on the CLI's last line, ``rlzoo: wrote <path>``."""
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("rlzoo: wrote ") and last.endswith(".json"), proc.stdout
    return json.loads(Path(last.removeprefix("rlzoo: wrote ")).read_text())


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The process failed the rlzoo way: exit 2, one `rlzoo: error:` line, no traceback."""
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("rlzoo: error:")]
    assert len(errors) == 1, proc.stderr
    assert ";" in errors[0]  # <what>; <how to fix>
    return errors[0]


@pytest.fixture(scope="module")
def pendulum_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 600-step SAC run whose only evaluation (3 episodes) was the final one."""
    return train(
        tmp_path_factory.mktemp("pendulum") / "run", "env=Pendulum", "total_steps=600",
        "algo.learning_starts=300", "eval.every=0", "eval.episodes=3",
    )


@pytest.fixture(scope="module")
def hopper_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished MuJoCo run with 20-step episodes (short videos)."""
    return train(
        tmp_path_factory.mktemp("hopper") / "run", "env=Hopper", "total_steps=300",
        "algo.learning_starts=200", "eval.episodes=2", "+env.kwargs.max_episode_steps=20",
    )


def test_cli_repeats_the_final_evaluation(pendulum_run: Path) -> None:
    proc = run("rlzoo.evaluate", str(pendulum_run), "--episodes", "3")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((pendulum_run / "summary.json").read_text())
    record = written_record(proc)
    # same weights, same seeds (seed + 10000 + i), deterministic policy: the same episodes
    assert record["mean"] == pytest.approx(summary["final_eval_return"], rel=1e-6)
    assert record["std"] == pytest.approx(summary["final_eval_return_std"], rel=1e-5, abs=1e-6)
    assert record["returns"] != [record["returns"][0]] * 3  # three different episodes
    assert record["lengths"] == [200, 200, 200] and record["step"] == 600
    assert record["seeds"] == [10000, 10001, 10002] and record["deterministic"] is True
    assert f"{record['mean']:.2f} ± {record['std']:.2f} over 3 episodes" in proc.stdout


def test_stochastic_is_reproducible_and_differs(pendulum_run: Path) -> None:
    deterministic = evaluate_run(pendulum_run, episodes=2)
    first = evaluate_run(pendulum_run, episodes=2, deterministic=False)
    second = evaluate_run(pendulum_run, episodes=2, deterministic=False)
    assert first["returns"] == second["returns"]
    assert first["returns"] != deterministic["returns"]
    assert Path(first["path"]) != Path(second["path"])  # each evaluation keeps its own record
    other_seed = evaluate_run(pendulum_run, episodes=2, seed=5)
    assert other_seed["seeds"] == [5, 6] and other_seed["returns"] != deterministic["returns"]


def read_video(path: Path) -> np.ndarray:
    import imageio.v3 as iio

    return iio.imread(path)


def test_pendulum_video(pendulum_run: Path) -> None:
    proc = run("rlzoo.evaluate", str(pendulum_run), "--episodes", "2", "--video",
               "--video-episodes", "2")
    assert proc.returncode == 0, proc.stderr
    videos = sorted((pendulum_run / "videos").glob("*.mp4"))
    assert len(videos) == 2
    frames = read_video(videos[0])
    assert frames.shape == (201, 500, 500, 3)  # the reset frame + 200 steps
    assert frames.std() > 1.0  # not a blank picture


def test_mujoco_video(hopper_run: Path) -> None:
    """Where triton is installed (CUDA torch), this crashed with SIGSEGV until rlzoo.store.mp4
    loaded
    triton before Mesa's EGL (``load_triton_first``)."""
    proc = run("rlzoo.evaluate", str(hopper_run), "--episodes", "2", "--video")
    if proc.returncode == 2 and "cannot render" in proc.stderr:
        pytest.skip(f"no offscreen OpenGL here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    record = written_record(proc)
    (video,) = record["videos"]  # only the first episode is filmed by default
    frames = read_video(Path(video))
    assert frames.shape == (record["lengths"][0] + 1, 480, 480, 3)
    assert frames.std() > 1.0


def test_unavailable_rendering_is_one_line(hopper_run: Path) -> None:
    proc = run("rlzoo.evaluate", str(hopper_run), "--video", env={"MUJOCO_GL": "no-such-gl"})
    line = one_error_line(proc)
    assert "cannot render Hopper-v5" in line and "libegl1" in line


def in_process_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """``rlzoo.evaluate.main(args)`` fails the rlzoo way; returns its one error line."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("rlzoo: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert ";" in errors[0]
    return errors[0]


def test_missing_encoder_is_one_line(
    pendulum_run: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # import fails as if not installed
    line = in_process_error(capsys, str(pendulum_run), "--video")
    assert "pip install imageio imageio-ffmpeg" in line


def test_errors_are_one_line(
    pendulum_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # through the real command line once ...
    assert "does not exist" in one_error_line(run("rlzoo.evaluate", str(tmp_path / "missing")))
    # ... and in-process for the rest (same main(), no interpreter start-up)
    not_a_run = tmp_path / "not_a_run"
    not_a_run.mkdir()
    assert ".hydra/config.yaml" in in_process_error(capsys, str(not_a_run))
    unfinished = tmp_path / "unfinished"
    (unfinished / ".hydra").mkdir(parents=True)
    (unfinished / ".hydra" / "config.yaml").write_text(
        (pendulum_run / ".hydra" / "config.yaml").read_text()
    )
    assert "no checkpoint" in in_process_error(capsys, str(unfinished))
    garbage = tmp_path / "step_0000000001.pt"
    garbage.write_bytes(b"not a checkpoint")
    line = in_process_error(capsys, str(pendulum_run), "--checkpoint", str(garbage))
    assert "cannot read checkpoint" in line
    assert "--episodes" in in_process_error(capsys, str(pendulum_run), "--episodes", "0")
    assert "run_dir" in in_process_error(capsys)
    broken = tmp_path / "broken"
    (broken / ".hydra").mkdir(parents=True)
    (broken / ".hydra" / "config.yaml").write_text("algo: ${missing.key}\nenv: {}\n")
    assert "cannot read" in in_process_error(capsys, str(broken))
    fifo = tmp_path / "fifo"  # a FIFO or a link to /dev/zero named config.yaml: said, not read
    (fifo / ".hydra").mkdir(parents=True)
    os.mkfifo(fifo / ".hydra" / "config.yaml")
    assert "config.yaml is a FIFO" in in_process_error(capsys, str(fifo))
    (fifo / ".hydra" / "config.yaml").unlink()
    (fifo / ".hydra" / "config.yaml").symlink_to("/dev/zero")
    assert "is a symbolic link to /dev/zero" in in_process_error(capsys, str(fifo))


def poisoned_copy(run_dir: Path, dest: Path, value: float) -> Path:
    """A copy of ``run_dir`` whose newest checkpoint has one actor weight set to ``value``."""
    shutil.copytree(run_dir, dest, ignore=shutil.ignore_patterns("eval_*.json", "videos"))
    path = list_checkpoints(dest / "checkpoints")[-1]
    state = load_checkpoint(path)
    name = next(k for k in state["algo"]["modules"] if k.startswith("actor.") and "weight" in k)
    state["algo"]["modules"][name].view(-1)[0] = value
    save_checkpoint(path, state)
    return dest


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nonfinite_weights_are_one_line_exit_3(
    pendulum_run: Path, tmp_path: Path, value: float
) -> None:
    run_dir = poisoned_copy(pendulum_run, tmp_path / "poisoned", value)
    proc = run("rlzoo.evaluate", str(run_dir), "--episodes", "2")
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "nan" not in proc.stdout
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("rlzoo: error:")]
    assert "weights of checkpoint" in line and "not finite" in line and "actor." in line
    assert "--checkpoint PATH" in line
    assert not list(run_dir.glob("eval_*.json"))


# --------------------------------------------------------------------------- multi-agent


def constant_action(act_dim: int, scale: float) -> torch.Tensor:
    """``scale * linspace(-1, 1)``: unequal entries, so MPE agents move (equal ones cancel)."""
    return scale * torch.linspace(-1.0, 1.0, act_dim)


class ConstantMultiAgentPolicy(Algorithm):
    """Every agent plays the same learned constant action: enough to test the evaluator."""

    multi_agent = True

    def __init__(self, spec: EnvSpec, critic: Any = None, scale: float = 0.0) -> None:
        super().__init__(spec, 0.99, 1)  # gamma, n_step: unused here
        self.action = nn.Parameter(constant_action(spec.act_dim, scale))

    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        return self.action.detach().expand(obs.shape[0], obs.shape[1], -1)


def multi_agent_run(run_dir: Path, env_file: str, scale: float, **env_kwargs: Any) -> Path:
    """A run dir as rlzoo.train writes it, holding a checkpoint of ConstantMultiAgentPolicy."""
    env_cfg = OmegaConf.load(REPO / "rlzoo" / "conf" / "env" / env_file)
    env_cfg.kwargs = {**env_cfg.kwargs, **env_kwargs}
    cfg = OmegaConf.create({
        "critic": {}, "tuner": None, "env": env_cfg, "seed": 3, "num_envs": 1,
        "algo": {"_target_": f"{__name__}.ConstantMultiAgentPolicy", "name": "constant"},
    })
    (run_dir / ".hydra").mkdir(parents=True)
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")
    vec = make_multi_agent_env(env_cfg.family, env_cfg.scenario, 1, 0, **env_cfg.kwargs)
    spec = EnvSpec(vec.obs_dim, vec.act_dim, vec.n_agents, vec.state_dim, tuple(vec.act_dims))
    vec.close()
    algo = ConstantMultiAgentPolicy(spec, scale=scale)
    save_checkpoint(checkpoint_path(run_dir / "checkpoints", 7),
                    {"format": 1, "algo": algo.state_dict(), "counters": {"step": 7}})
    return run_dir


def reference_returns(env_cfg: Any, episodes: int, seed: int, scale: float) -> np.ndarray:
    """Team returns (mean over agents per step) of a constant policy, by hand."""
    vec = make_multi_agent_env(env_cfg.family, env_cfg.scenario, episodes, seed, **env_cfg.kwargs)
    vec.reset(seed=seed)
    action = constant_action(vec.act_dim, scale).numpy()
    returns, active = np.zeros(episodes), np.ones(episodes, dtype=bool)
    while active.any():
        result = vec.step(np.broadcast_to(action, (episodes, vec.n_agents, vec.act_dim)))
        returns += np.where(active, result.agent_reward.mean(axis=1), 0.0)
        active &= ~(result.terminated | result.truncated)
    vec.close()
    return returns


def test_multi_agent_mpe_with_video(tmp_path: Path) -> None:
    run_dir = multi_agent_run(tmp_path / "mpe", "mpe/simple_spread.yaml", scale=0.7)
    record = evaluate_run(run_dir, episodes=3, video_episodes=1, trust=[__name__])
    cfg = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    expected = reference_returns(cfg.env, 3, 10003, 0.7)  # default seeds: seed + 10000 + i
    assert record["returns"] == pytest.approx(expected.tolist(), rel=1e-6)
    assert record["env_kind"] == "multi" and record["lengths"] == [25, 25, 25]
    assert np.asarray(record["agent_returns"]).shape == (3, 3)
    assert record["step"] == 7
    # the loaded checkpoint acted (scale 0.7), not a freshly built policy (scale 0: no motion)
    assert record["returns"] != pytest.approx(reference_returns(cfg.env, 3, 10003, 0.0).tolist())
    (video,) = record["videos"]
    frames = read_video(Path(video))
    assert frames.shape[0] == 26 and frames.shape[-1] == 3 and frames.std() > 1.0


def test_multi_agent_mamujoco(tmp_path: Path) -> None:
    run_dir = multi_agent_run(tmp_path / "mamujoco", "mamujoco/HalfCheetah-2x3.yaml", scale=-0.3,
                              max_episode_steps=15)
    record = evaluate_run(run_dir, episodes=2, seed=42, trust=[__name__])
    cfg = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    assert record["returns"] == pytest.approx(reference_returns(cfg.env, 2, 42, -0.3).tolist())
    assert record["lengths"] == [15, 15]


def test_multi_agent_run_repeats_the_final_evaluation(tmp_path: Path) -> None:
    run_dir = train(
        tmp_path / "maddpg", "algo=maddpg", "env=mpe/simple_spread", "total_steps=200",
        "algo.learning_starts=100", "algo.batch_size=64", "eval.every=0", "eval.episodes=2",
    )
    proc = run("rlzoo.evaluate", str(run_dir), "--episodes", "2")
    assert proc.returncode == 0, proc.stderr
    record, summary = written_record(proc), json.loads((run_dir / "summary.json").read_text())
    assert record["mean"] == pytest.approx(summary["final_eval_return"], rel=1e-6)
    assert record["lengths"] == [25, 25] and np.asarray(record["agent_returns"]).shape == (2, 3)


def test_no_room_for_a_temporary_file_is_one_line(pendulum_run: Path) -> None:
    """With no byte writable (``ulimit -f 0``: a full disk as a process sees it) evaluate fails
    in one line, exit 2, no traceback, and leaves no partial file. Where it fails depends on the
    machine: building the algorithm, where torch wants a temporary file (the line names TMPDIR),
    or, where torch needs none, writing the record (the line says the result was not saved)."""
    import resource

    before = sorted(p.name for p in pendulum_run.iterdir())
    proc = subprocess.run(
        [sys.executable, "-m", "rlzoo.evaluate", str(pendulum_run), "--episodes", "1"],
        capture_output=True, text=True, cwd=REPO, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0)))
    line = one_error_line(proc)
    built = "cannot build algo=sac" not in line
    if built:
        assert "cannot write" in line and "was not saved" in line and "--out PATH" in line, line
    else:
        assert "TMPDIR" in line, line
    assert sorted(p.name for p in pendulum_run.iterdir()) == before
