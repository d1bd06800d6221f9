"""``eval.video_every=N``: evaluation videos during training, as CleanRL's ``--capture_video`` and
SB3's video callbacks make them.

After each evaluation at (or first past) a multiple of N env steps, one deterministic episode of
the first seed's policy is filmed on a render env of its own, made for it and closed after it
(seeded ``seed + 10_000``, episode 0 of that evaluation), into
``<run dir>/videos/eval_step_<step>.mp4`` (H.264, ``rlzoo/store/mp4.py``; written in a private
folder and renamed into place, never through a link: ``rlzoo.store.writer``) and into TensorBoard as
a GIF under ``eval/video`` (Images tab; a preview of at most ``PREVIEW_SIDE`` pixels a side and
``PREVIEW_FRAMES`` frames). A seed group films its
first seed only, into the first seed's run dir. Filming changes nothing of the run: the global
random generators are saved before and put back after, and no training or eval env is touched,
so the checkpoints and eval returns are those of the same run without it.

``N`` must be a multiple of ``eval.every`` (videos are filmed at evaluations); off by default
(0). The MP4 writer (``pip install "rlzoo[video]"``: imageio, imageio-ffmpeg and its pillow) and
the env's offscreen rendering are checked before the run starts, each refused in one line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from omegaconf import DictConfig

from rlzoo.config.build import EVAL_SEED_OFFSET, make_env
from rlzoo.envs.base import run_episodes
from rlzoo.errors import EnvFailed, UserError, one_line
from rlzoo.store.extras import global_rng_state, restore_global_rng
from rlzoo.store.mp4 import (
    RENDER_HELP,
    GifPreview,
    VideoWriter,
    check_video_writer,
    prepare_offscreen_rendering,
    render_fps,
    render_frame,
)
from rlzoo.store.writer import check_inside, library_file, make_dir

if TYPE_CHECKING:  # rlzoo.evaluate imports this module: not the loop's (TensorBoard) modules
    from rlzoo.algos.base import Algorithm
    from rlzoo.run.member import Member

VIDEO_TAG = "eval/video"
PREVIEW_SIDE = 128  # TensorBoard's GIF: at most this many pixels a side (the MP4 is full size)
PREVIEW_FRAMES = 250  # ... and at most this many frames (every k-th frame of a longer episode)


def rendering_unavailable(what: str, err: Exception) -> UserError:
    """The one-line error for an env that cannot be built with ``render_mode='rgb_array'``."""
    return UserError(
        f"cannot render {what} offscreen (MUJOCO_GL={os.environ.get('MUJOCO_GL')}: "
        f"{one_line(f'{type(err).__name__}: {err}', 120)}); {RENDER_HELP}"
    )


def env_label(cfg: DictConfig) -> str:
    """The env as messages name it: its gymnasium id (``Hopper-v5``), else its config name."""
    return str(cfg.env.get("id") or cfg.env.name)


def probe_rendering(cfg: DictConfig) -> None:
    """Render one frame of the run's env, so a missing GL back end fails before evaluating."""
    try:
        env = make_env(cfg, 1, 0, render_mode="rgb_array")
    except EnvFailed as err:  # a broken GL back end fails at ``import mujoco``
        raise rendering_unavailable(env_label(cfg), err.cause) from None
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - a broken GL back end fails at ``import mujoco``
        raise rendering_unavailable(env_label(cfg), err) from None
    try:
        env.reset(seed=0)
        render_frame(env.render_env(0), env_label(cfg))
    finally:
        env.close()


class Filming:
    """When and how the loop films (``eval.video_every``; ``every=0``: never, nothing checked).

    Args:
        every: N, env steps between videos (a multiple of ``eval.every``).
        cfg: the run config, whose env is filmed (checked to render before the run starts).
    """

    def __init__(self, every: int, cfg: DictConfig) -> None:
        self.every, self.next = every, every
        if not every:
            return
        prepare_offscreen_rendering()  # MUJOCO_GL before the first render
        try:
            check_video_writer()
        except UserError as err:
            raise UserError(f"eval.video_every={every}: {err}; or eval.video_every=0") from None
        rng = global_rng_state()
        try:
            probe_rendering(cfg)
        finally:
            restore_global_rng(rng)

    def start(self, step: int) -> None:
        """The run (resumed or not) is at ``step``: the next video is at the next multiple."""
        if self.every:
            self.next = (step // self.every + 1) * self.every

    def after_eval(self, m: Member, algo: Algorithm, horizon: int, device: torch.device,
                   step: int) -> Path | None:
        """After the evaluation at ``step``: film ``m`` (the first seed) when a video is due;
        returns the MP4 written, else None."""
        if not self.every or step < self.next:
            return None
        self.next = (step // self.every + 1) * self.every
        rng = global_rng_state()  # the policy's and env's draws leave the run's untouched
        try:
            return film_episode(m, algo, horizon, device, step)
        finally:
            restore_global_rng(rng)


def film_episode(m: Member, algo: Algorithm, horizon: int, device: torch.device,
                 step: int) -> Path:
    """One deterministic episode of member ``m`` (its group's first: the policy is called for
    every seed on ``m``'s observations, the first seed's actions used) on a render env of its
    own, into ``<run dir>/videos/eval_step_<step>.mp4`` and TensorBoard; returns the MP4."""
    folder = make_dir(m.run_dir / "videos", root=m.run_dir)  # never through a link
    path = folder / f"eval_step_{step}.mp4"
    check_inside(m.run_dir, path)  # a link or a hard-linked file there: refused before filming
    env = make_env(m.cfg, 1, m.seed + EVAL_SEED_OFFSET, render_mode="rgb_array")
    name, axis = env_label(m.cfg), algo.seed_axis

    def policy(batch: np.ndarray) -> np.ndarray:  # [1, B, ...] -> [1, B, H * A]
        x = torch.as_tensor(np.repeat(batch, axis.size, axis=0), dtype=torch.float32).to(device)
        return axis.call(algo, algo.act, x, True)[:1].cpu().numpy()

    try:
        obs = env.reset(seed=m.seed + EVAL_SEED_OFFSET)[0]
        fps = render_fps(env.render_env(0))
        preview = GifPreview(PREVIEW_SIDE, PREVIEW_FRAMES)
        # ffmpeg writes into a fresh private folder; rlzoo renames its file into place
        with library_file(path, m.run_dir) as written, VideoWriter(written, fps) as writer:
            def film(_: int, __: int) -> None:
                frame = render_frame(env.render_env(0), name)
                writer.append(frame)
                preview.add(frame)

            film(0, 0)  # the reset's frame
            with axis.forked():  # a sampling policy leaves the seeds' draws
                run_episodes([env], [obs], policy, horizon, film)
    finally:
        env.close()
    if m.logger is not None:
        m.logger.gif(VIDEO_TAG, preview.encode(fps), preview.size(), step)
        m.logger.record(f"eval video at step {step}: {path}")
    return path
