"""``eval.video_every=N`` (rlzoo/run/filming.py): evaluation videos during training, in the run dir
(MP4) and TensorBoard (GIF); a run that films has the same numbers as the run that does not;
bad values and a missing writer are refused in one line."""

from __future__ import annotations

import io
import random
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from conftest import TINY, assert_user_error, run_cli
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlzoo.errors import UserError
from rlzoo.run import filming as videos
from rlzoo.store.checkpoint import list_checkpoints, load_checkpoint
from rlzoo.store.extras import global_rng_state

ARGS = ["algo=sac", "env=Pendulum", "total_steps=400", "algo.learning_starts=100",
        "eval.every=100", "eval.episodes=2", "log.progress=false", "torch_threads=1", *TINY]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same two-seed run with eval.video_every=200 (``filmed``) and without (``plain``)."""
    root = tmp_path_factory.mktemp("videos")
    out = {}
    for name, extra in (("filmed", ["eval.video_every=200"]), ("plain", [])):
        proc = run_cli([*ARGS, "seeds=2", *extra], root / name)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out[name] = root / name
    return out


def events(run_dir: Path) -> EventAccumulator:
    acc = EventAccumulator(str(run_dir), size_guidance={"images": 0, "scalars": 0})
    acc.Reload()
    return acc


def test_videos_at_multiples_of_n_in_the_first_seeds_dir(runs: dict[str, Path]) -> None:
    import imageio.v3 as iio

    run = runs["filmed"]
    found = sorted(p.name for p in (run / "videos").iterdir())
    assert found == ["eval_step_200.mp4", "eval_step_400.mp4"]
    for name in found:
        frames = iio.imread(run / "videos" / name)
        assert frames.shape == (201, 500, 500, 3)  # the reset frame + 200 steps
        assert frames.std() > 1.0  # not a blank picture
    assert not (run.parent / "filmed-s1" / "videos").exists()  # the first seed only
    assert not (runs["plain"] / "videos").exists()  # off by default
    gifs = events(run).Images(videos.VIDEO_TAG)
    assert [g.step for g in gifs] == [200, 400]
    gif = iio.imread(io.BytesIO(gifs[0].encoded_image_string), index=None)
    assert gif.shape[1:] == (gifs[0].height, gifs[0].width, 3) == (125, 125, 3)
    assert len(gif) > 100 and gif.std() > 1.0
    assert f"eval video at step 400: {run / 'videos' / 'eval_step_400.mp4'}" in \
        (run / "train.log").read_text()


def tensors(tree: Any, path: str = "") -> dict[str, Any]:
    """Every tensor and array in a checkpoint, by its path."""
    if isinstance(tree, dict):
        return {k: v for key, value in tree.items() for k, v in tensors(value, f"{path}/{key}")
                .items()}
    if isinstance(tree, (list, tuple)):
        return {k: v for i, value in enumerate(tree) for k, v in tensors(value, f"{path}[{i}]")
                .items()}
    if torch.is_tensor(tree):
        return {path: tree}
    return {path: np.asarray(tree)} if isinstance(tree, np.ndarray) else {}


def test_filming_changes_no_number_of_the_run(runs: dict[str, Path]) -> None:
    filmed, plain = (load_checkpoint(list_checkpoints(runs[k] / "checkpoints")[-1])
                     for k in ("filmed", "plain"))
    a, b = tensors(filmed), tensors(plain)
    assert a.keys() == b.keys() and len(a) > 20
    for key in a:
        same = torch.equal(a[key], b[key]) if torch.is_tensor(a[key]) \
            else np.array_equal(a[key], b[key])
        assert same, key
    for seed in ("", "-s1"):
        ours, theirs = events(runs["filmed"].parent / f"filmed{seed}"), \
            events(runs["plain"].parent / f"plain{seed}")
        for tag in ("eval/return", "eval/return_std", "train/episode_return"):
            values = [(e.step, e.value) for e in ours.Scalars(tag)]
            assert values == [(e.step, e.value) for e in theirs.Scalars(tag)], (seed, tag)
            assert len(values) >= 2


def test_filming_leaves_the_global_generators_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def drawing(*args: Any) -> Path:  # a policy (or env) that draws from every global generator
        torch.rand(3), np.random.rand(3), random.random()
        return Path("x.mp4")

    monkeypatch.setattr(videos, "film_episode", drawing)
    filming = videos.Filming(0, OmegaConf.create({}))
    filming.every = 200
    filming.start(0)
    before = global_rng_state()
    assert filming.after_eval(None, None, 1, torch.device("cpu"), 100) is None  # not due
    assert filming.after_eval(None, None, 1, torch.device("cpu"), 200) == Path("x.mp4")
    after = global_rng_state()
    assert torch.equal(before["torch"], after["torch"])
    assert before["python"] == after["python"]
    assert np.array_equal(before["numpy"]["state"]["key"], after["numpy"]["state"]["key"])
    assert before["numpy"]["state"]["pos"] == after["numpy"]["state"]["pos"]
    assert filming.next == 400


@pytest.mark.parametrize(("args", "fragment"), [
    (["eval.video_every=-200"], "eval.video_every must be >= 0"),
    (["eval.video_every=150"], "must be a multiple of eval.every (100)"),
    (["eval.video_every=200", "eval.every=0"], "eval.every=0 evaluates only at the end"),
    (["eval.video_every=ten"], "eval.video_every must be an integer"),
])
def test_bad_values_are_one_line(tmp_path: Path, args: list[str], fragment: str) -> None:
    proc = run_cli([*ARGS, *args], tmp_path / "run")
    assert_user_error(proc, fragment)
    assert not (tmp_path / "run").exists()  # nothing written


def test_without_the_writer_it_is_refused_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # import fails as if not installed
    with pytest.raises(UserError, match=r"eval.video_every=200: .*video extra.*\[video\]"):
        videos.Filming(200, OmegaConf.create({}))


def test_a_link_where_the_videos_go_is_refused(tmp_path: Path) -> None:
    run_dir, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    run_dir.mkdir()
    elsewhere.mkdir()
    (run_dir / "videos").symlink_to(elsewhere)
    member = SimpleNamespace(run_dir=run_dir)
    with pytest.raises(UserError, match="symbolic link"):
        videos.film_episode(member, None, 1, torch.device("cpu"), 200)  # type: ignore[arg-type]
    assert not list(elsewhere.iterdir())


def test_an_env_that_cannot_render_is_refused_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUJOCO_GL", "no-such-gl")
    proc = run_cli(["algo=sac", "env=Hopper", "eval.every=100", "eval.video_every=200",
                    "torch_threads=1"], tmp_path / "run")
    assert_user_error(proc, "cannot render Hopper-v5 offscreen", "MUJOCO_GL=no-such-gl")
    assert not (tmp_path / "run").exists()


def test_a_resumed_run_removes_a_dead_filmers_private_folder(tmp_path: Path) -> None:
    """A run killed while ffmpeg wrote a video leaves its private folder in videos/; the resumed
    run removes it (and films its own videos as usual)."""
    import subprocess
    import sys

    from rlzoo.store.writer import host_name

    run = tmp_path / "run"
    proc = run_cli([*ARGS, "total_steps=200", "eval.video_every=200"], run)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, timeout=60)
    name = f".eval_step_400.mp4.{host_name()}.{int(dead.stdout)}.0123456789abcdef.tmp"
    stale = run / "videos" / name
    stale.mkdir()
    (stale / "eval_step_400.mp4").write_bytes(b"partial")
    proc = run_cli([f"resume={run}", "total_steps=400"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not stale.exists()
    assert sorted(p.name for p in (run / "videos").iterdir()) == ["eval_step_200.mp4",
                                                                  "eval_step_400.mp4"]
