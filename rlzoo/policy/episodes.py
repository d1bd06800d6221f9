"""The episodes ``python -m rlzoo.evaluate`` runs: N copies of the run's env stepped together with
the loaded policy until each finished one episode (``envs.base.run_episodes``, as the training
loop evaluates), the first ones filmed to MP4 (``rlzoo/store/mp4.py``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig

from rlzoo.algos.base import Algorithm
from rlzoo.config.build import make_env
from rlzoo.envs.base import run_episodes
from rlzoo.run.filming import env_label
from rlzoo.store.mp4 import VideoWriter, render_fps, render_frame
from rlzoo.store.writer import library_file


@dataclass
class EvalResult:
    """What one evaluation measured. ``N`` = episodes, ``M`` = agents (multi-agent only).

    Attributes:
        returns: ``[N]`` episode returns (multi-agent: team return, the sum over steps of the mean
            reward over agents).
        lengths: ``[N]`` episode lengths in env steps.
        agent_returns: ``[N, M]`` per-agent returns (multi-agent only, else None).
        videos: the MP4 files written.
    """

    returns: np.ndarray
    lengths: np.ndarray
    agent_returns: np.ndarray | None = None
    videos: list[Path] = field(default_factory=list)


@dataclass
class Recording:
    """Which episodes to film and where (``video_dir/<stem>_ep<i>.mp4``; ``root``: the folder
    below which ``video_dir`` was made, checked by ``rlzoo.store.writer``)."""

    episodes: int
    video_dir: Path
    stem: str
    root: Path

    def path(self, episode: int) -> Path:
        return self.video_dir / f"{self.stem}_ep{episode}.mp4"


def run_policy(
    cfg: DictConfig, algo: Algorithm, episodes: int, seed: int, deterministic: bool,
    recording: Recording | None,
) -> EvalResult:
    """``episodes`` copies of the run's env (env ``i`` reset with ``seed + i``) stepped together
    until each has finished one episode, as the training loop evaluates; action chunks of
    ``algo.action_horizon`` steps run open-loop. Films the first ``recording.episodes``, each
    MP4 written in a private folder and renamed into place once complete
    (``rlzoo.store.writer.library_file``): a failed evaluation leaves none."""
    filmed = recording.episodes if recording else 0
    env = make_env(cfg, episodes, seed, **({"render_mode": "rgb_array"} if filmed else {}))
    name = env_label(cfg)
    with contextlib.ExitStack() as stack:
        stack.callback(env.close)  # last, after the videos
        obs, _ = env.reset(seed=seed)
        writers = []
        for i in range(filmed):
            assert recording is not None
            written = stack.enter_context(library_file(recording.path(i), recording.root))
            writers.append(stack.enter_context(VideoWriter(written, render_fps(env.render_env(i)))))
            writers[-1].append(render_frame(env.render_env(i), name))

        def film(_: int, e: int) -> None:
            if e < filmed:
                writers[e].append(render_frame(env.render_env(e), name))

        result = run_episodes(  # one seed: batches [1, B, ...]
            [env], [obs], lambda batch: policy_actions(algo, batch[0], deterministic)[None],
            algo.action_horizon, film,
        )[0]
    videos = [recording.path(i) for i in range(filmed)] if recording else []
    return EvalResult(result.returns, result.lengths, result.agent_returns, videos)


def policy_actions(algo: Algorithm, obs: np.ndarray, deterministic: bool) -> np.ndarray:
    """``algo.act`` on a numpy batch ``[B, ...]``, on the algorithm's device; numpy actions back."""
    device = next(algo.parameters()).device
    with torch.no_grad():
        action = algo.act(torch.as_tensor(obs, dtype=torch.float32, device=device), deterministic)
    return action.float().cpu().numpy()
