"""Evaluate a saved run: ``python -m rlzoo.evaluate RUN_DIR [--episodes N] [--stochastic]
[--video] [--checkpoint PATH] [--device cpu] [--trust MODULE ...]``.

Rebuilds the env and the algorithm from the config Hydra saved in ``RUN_DIR/.hydra/config.yaml``,
loads the latest checkpoint's ``algo`` state (or ``--checkpoint PATH``) without executing code from
it (``weights_only``; the file is memory-mapped, so the replay buffer it also holds is never read),
runs N episodes with the deterministic policy (``--stochastic``: sampled actions), prints
``mean ± std over N episodes`` and writes ``RUN_DIR/eval_<YYYYmmdd-HHMMSS>.json``.

Episode ``i`` runs on an env seeded with ``--seed + i`` (default ``seed + 10000``, the seeds of the
trainer's first evaluation), so a deterministic evaluation is reproducible and, on a run whose only
evaluation was its final one, repeats it exactly. Returns are undiscounted sums of env rewards;
multi-agent runs use rlzoo's team reward, the mean over agents at each step (per-agent returns are
in the JSON too). ``--video`` writes the first ``--video-episodes`` episodes as MP4 files to
``RUN_DIR/videos/`` (see ``rlzoo/video.py`` for what a headless machine needs).

A run dir's config may only build rlzoo's own components and classes of the modules named with
``--trust`` (``rlzoo.run.trust``): a downloaded run dir is data, and its ``_target_`` keys must
not run someone else's code.

Every user mistake ends in one line, ``rlzoo: error: <what>; <how to fix>``, exit status 2. A
checkpoint whose weights hold NaN or inf (or episodes whose returns are not finite) end in one such
line with exit status 3, as training does when it produces NaN/inf.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import torch
from omegaconf import DictConfig

from rlzoo.algos.base import Algorithm
from rlzoo.algos.seeds import seed_weights
from rlzoo.envs.base import run_episodes
from rlzoo.errors import UserError, exit_with, one_line
from rlzoo.run.build import (
    EVAL_SEED_OFFSET,
    build_algorithm,
    make_env,
    probe_spec,
    read_run_config,
)
from rlzoo.run.checkpoint import (
    list_checkpoints,
    load_checkpoint,
)
from rlzoo.run.finite import describe_nonfinite, nonfinite_entries
from rlzoo.run.group import check_members, read_group
from rlzoo.run.rundir import RunLock
from rlzoo.run.settings import resolve_device, seed_range
from rlzoo.run.signals import NonFiniteError
from rlzoo.video import (
    RENDER_HELP,
    VideoWriter,
    check_video_writer,
    prepare_offscreen_rendering,
    render_fps,
    render_frame,
)


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
    """Which episodes to film and where (``video_dir/<stem>_ep<i>.mp4``)."""

    episodes: int
    video_dir: Path
    stem: str

    def path(self, episode: int) -> Path:
        return self.video_dir / f"{self.stem}_ep{episode}.mp4"


# --------------------------------------------------------------------------- loading a run


def find_checkpoint(run_dir: Path, checkpoint: Path | None) -> Path:
    """``checkpoint`` if given (must exist), else the newest ``RUN_DIR/checkpoints/step_*.pt``."""
    if checkpoint is not None:
        if checkpoint.exists() and not checkpoint.is_file():
            raise UserError(f"checkpoint {checkpoint} is not a regular file (a directory, FIFO or "
                            "device), so it is not read; pass a checkpoint file with "
                            "--checkpoint PATH")
        if not checkpoint.is_file():
            raise UserError(f"checkpoint {checkpoint} does not exist; check --checkpoint PATH")
        return checkpoint
    found = list_checkpoints(run_dir / "checkpoints")
    owner = RunLock.owner(run_dir)
    if not found and owner is not None:
        raise UserError(
            f"no checkpoint in {run_dir / 'checkpoints'} yet: the run is still training (pid "
            f"{owner}) and writes its first checkpoint after checkpoint.every steps; evaluate it "
            "once that is written")
    if not found:
        raise UserError(
            f"no checkpoint in {run_dir / 'checkpoints'}; a run saves one when it finishes (and "
            "every checkpoint.every steps): let it finish, or pass --checkpoint PATH"
        )
    return found[-1]


def check_fits(state: dict[str, Any], path: Path, cfg: DictConfig, seeds: tuple[int, ...],
               index: int) -> None:
    """Refuse a checkpoint of another run shape before its weights are used: another algo or
    env, or another number of seeds or other seeds than the run's (``seeds``: the group's, or
    the run's one seed; ``index``: this run's place in them)."""
    fix = "pass a checkpoint of this run with --checkpoint PATH"
    for key, mine in (("algo_name", cfg.algo.name), ("env_name", cfg.env.name)):
        if key in state and state[key] != mine:
            what = key.split("_")[0]
            raise UserError(f"checkpoint {path} was written by {what}={state[key]}, but this run "
                            f"is {what}={mine}; {fix}")
    members = state.get("members")
    saved = [part.get("seed") if isinstance(part, dict) else None for part in members] \
        if isinstance(members, list) else [seeds[0]]  # a single run's: any seed may act
    if len(saved) != len(seeds) or saved[index] != seeds[index]:
        held = f"{len(saved)} seeds ({', '.join(map(str, saved))})" if len(saved) > 1 \
            else "one seed"
        mine = f"seed {seeds[index]} of a {len(seeds)}-seed group" if len(seeds) > 1 \
            else "a single run"
        raise UserError(f"checkpoint {path} holds {held}, but this run is {mine}; {fix}")


def load_algo_state(path: Path, cfg: DictConfig | None = None, seeds: tuple[int, ...] = (),
                    index: int = 0) -> tuple[dict[str, Any], int]:
    """The ``algo`` state and the env step of a checkpoint (memory-mapped, CPU tensors),
    checked against the run (:func:`check_fits`) when ``cfg`` is given.

    Raises ``NonFiniteError`` when a float tensor of the algorithm state (networks, optimizers,
    tuner) holds NaN or inf: such weights cannot be evaluated meaningfully."""
    try:
        state = load_checkpoint(path, map_location="cpu", mmap=True)
        if cfg is not None:
            check_fits(state, path, cfg, seeds, index)
        algo_state, step = state["algo"], int(state.get("counters", {}).get("step", -1))
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - torch raises many kinds on a bad file
        reason = one_line(f"{type(err).__name__}: {err}")
        raise UserError(
            f"cannot read checkpoint {path} ({reason}); pass an intact one with "
            "--checkpoint PATH (checkpoints/ keeps the newest checkpoint.keep files)"
        ) from None
    bad = nonfinite_entries({"algo": algo_state})
    if bad:
        raise NonFiniteError(
            f"the weights of checkpoint {path} (step {step}) are not finite: NaN or inf in "
            f"{describe_nonfinite(bad)}; evaluate an earlier checkpoint of the run with "
            "--checkpoint PATH"
        )
    return algo_state, step


# --------------------------------------------------------------------------- running episodes


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
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - a broken GL back end fails at ``import mujoco``
        raise rendering_unavailable(env_label(cfg), err) from None
    try:
        env.reset(seed=0)
        render_frame(env.render_env(0), env_label(cfg))
    finally:
        env.close()


def run_policy(
    cfg: DictConfig, algo: Algorithm, episodes: int, seed: int, deterministic: bool,
    recording: Recording | None,
) -> EvalResult:
    """``episodes`` copies of the run's env (env ``i`` reset with ``seed + i``) stepped together
    until each has finished one episode, as the training loop evaluates; action chunks of
    ``algo.action_horizon`` steps run open-loop. Films the first ``recording.episodes``."""
    filmed = recording.episodes if recording else 0
    env = make_env(cfg, episodes, seed, **({"render_mode": "rgb_array"} if filmed else {}))
    name = env_label(cfg)
    obs, _ = env.reset(seed=seed)
    writers = [
        VideoWriter(recording.path(i), render_fps(env.render_env(i))) for i in range(filmed)
    ] if recording else []
    for i, writer in enumerate(writers):
        writer.append(render_frame(env.render_env(i), name))

    def film(_: int, e: int) -> None:
        if e < filmed:
            writers[e].append(render_frame(env.render_env(e), name))

    try:
        result = run_episodes(  # one seed: batches [1, B, ...]
            [env], [obs], lambda batch: policy_actions(algo, batch[0], deterministic)[None],
            algo.action_horizon, film,
        )[0]
    finally:
        for writer in writers:
            writer.close()
        env.close()
    return EvalResult(result.returns, result.lengths, result.agent_returns,
                      [w.path for w in writers])


def policy_actions(algo: Algorithm, obs: np.ndarray, deterministic: bool) -> np.ndarray:
    """``algo.act`` on a numpy batch ``[B, ...]``, on the algorithm's device; numpy actions back."""
    device = next(algo.parameters()).device
    with torch.no_grad():
        action = algo.act(torch.as_tensor(obs, dtype=torch.float32, device=device), deterministic)
    return action.float().cpu().numpy()


# --------------------------------------------------------------------------- the command


def evaluate_run(
    run_dir: Path,
    episodes: int = 10,
    deterministic: bool = True,
    video_episodes: int = 0,
    checkpoint: Path | None = None,
    device: str = "cpu",
    seed: int | None = None,
    trust: list[str] | tuple[str, ...] = (),
) -> dict[str, Any]:
    """Evaluate a run's checkpoint; write and return the ``eval_<timestamp>.json`` record.

    Args:
        run_dir: the run directory (holds ``.hydra/config.yaml`` and ``checkpoints/``).
        episodes: N, episodes to run (each on its own env).
        deterministic: the policy's mode (True, default) or sampled actions.
        video_episodes: film the first K episodes into ``run_dir/videos/`` (0 = none).
        checkpoint: a checkpoint file (default: the newest in ``run_dir/checkpoints``).
        device: ``cpu`` (default), ``cuda`` or ``auto``.
        seed: episode ``i`` uses ``seed + i`` (default: the run's seed + 10000).
        trust: modules whose classes the run's config may build besides rlzoo's components
            (``["examples"]`` for a run of the examples/ components; see ``rlzoo.run.trust``).

    Returns:
        The JSON record: ``mean``, ``std``, ``returns`` ``[N]``, ``lengths`` ``[N]``, ...
    """
    if video_episodes:
        prepare_offscreen_rendering()  # before anything imports mujoco
        check_video_writer()
    cfg = read_run_config(run_dir, trust=trust)  # a str is one name (or a comma list)
    group = read_group(run_dir)  # seeds=K: the checkpoints are the first seed's dir's
    if group is not None:
        check_members(group, (run_dir, group.home))
        seeds_in_config = seed_range(cfg)[1]  # read (and checked) as training reads it
        if seeds_in_config != len(group.dirs):
            raise UserError(f"{run_dir / 'group.json'} names a {len(group.dirs)}-seed group, but "
                            f"the run's config has seeds={seeds_in_config}; restore the files "
                            "rlzoo.train wrote")
    ckpt = find_checkpoint(group.home if group else run_dir, checkpoint)
    index = group.index(run_dir) if group is not None else 0
    seeds = group.seeds if group is not None else (int(cfg.seed),)
    algo_state, step = load_algo_state(ckpt, cfg, seeds, index)
    if group is not None:  # this seed's slice of the group's weights
        try:
            algo_state = seed_weights(algo_state["modules"], index)
        except (KeyError, IndexError, TypeError, RuntimeError) as err:
            raise UserError(f"checkpoint {ckpt} does not hold this group's weights "
                            f"({type(err).__name__}: {one_line(str(err), 100)}); pass a "
                            "checkpoint of this run with --checkpoint PATH") from None
    torch_device = resolve_device(device)
    if video_episodes:
        probe_rendering(cfg)
    spec = probe_spec(cfg)
    algo = build_algorithm(cfg, spec, torch_device)
    try:
        algo.load_state_dict(algo_state)
    except (RuntimeError, ValueError, KeyError, IndexError, TypeError) as err:
        reason = one_line(str(err))
        raise UserError(
            f"checkpoint {ckpt} does not fit the run's config ({reason}); pass a checkpoint of "
            "this run with --checkpoint PATH"
        ) from None
    del algo_state
    seed = int(cfg.seed) + EVAL_SEED_OFFSET if seed is None else seed
    torch.manual_seed(seed)  # --stochastic draws are reproducible too
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = run_dir / f"eval_{stamp}.json"
    n = 1
    while out.exists():
        out, n = run_dir / f"eval_{stamp}-{n}.json", n + 1
    recording = Recording(min(video_episodes, episodes), run_dir / "videos", out.stem) \
        if video_episodes else None
    start = time.perf_counter()
    result = run_policy(cfg, algo, episodes, seed, deterministic, recording)
    if not np.isfinite(result.returns).all():
        bad = [i for i, r in enumerate(result.returns) if not np.isfinite(r)]
        raise NonFiniteError(
            f"the returns of episodes {bad} (seeds {[seed + i for i in bad]}) are not finite: "
            f"NaN or inf rewards with checkpoint {ckpt}; nothing was written; check the env's "
            "rewards on those seeds and the policy's actions"
        )
    record = {
        "run_dir": str(run_dir),
        "checkpoint": str(ckpt),
        "step": step,
        "algo": str(cfg.algo.name),
        "env": str(cfg.env.name),
        "env_kind": "multi" if spec.multi_agent else "single",
        "deterministic": deterministic,
        "episodes": episodes,
        "seeds": [seed + i for i in range(episodes)],
        "mean": float(result.returns.mean()),
        "std": float(result.returns.std()),
        "returns": result.returns.tolist(),
        "lengths": result.lengths.tolist(),
        "videos": [str(p) for p in result.videos],
        "device": str(torch_device),
        "wall_time_s": time.perf_counter() - start,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if result.agent_returns is not None:
        record["agent_returns"] = result.agent_returns.tolist()
    out.write_text(json.dumps(record, indent=2) + "\n")
    record["path"] = str(out)
    return record


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        exit_with(f"{message}; see python -m rlzoo.evaluate --help")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(
        prog="python -m rlzoo.evaluate",
        description="Evaluate a run's latest checkpoint; prints mean ± std and writes "
        "RUN_DIR/eval_<timestamp>.json.",
    )
    parser.add_argument("run_dir", type=Path, help="a run directory written by rlzoo.train")
    parser.add_argument("--episodes", type=int, default=10, help="episodes to run (default 10)")
    parser.add_argument(
        "--stochastic", action="store_true", help="sample actions instead of the policy's mode"
    )
    parser.add_argument(
        "--video", action="store_true", help="write MP4 files to RUN_DIR/videos/ (offscreen)"
    )
    parser.add_argument(
        "--video-episodes", type=int, default=1,
        help="with --video: how many of the episodes to film, the first ones (default 1)",
    )
    parser.add_argument(
        "--checkpoint", type=Path, default=None,
        help="a checkpoint file (default: the newest in RUN_DIR/checkpoints)",
    )
    parser.add_argument(
        "--device", default="cpu", help="cpu (default), cuda or auto (CUDA when available)"
    )
    parser.add_argument(
        "--seed", type=int, default=None,
        help="episode i runs on an env seeded with SEED + i (default: the run's seed + 10000)",
    )
    parser.add_argument(
        "--trust", nargs="+", action="extend", default=[], metavar="MODULE",
        help="let the run's config build classes of these modules too (e.g. --trust examples "
        "for a run of examples/ components); by default only rlzoo's own components are built, "
        "so a downloaded run dir cannot run code",
    )
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")
    if args.video_episodes < 1:
        parser.error(f"--video-episodes must be >= 1, got {args.video_episodes}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        record = evaluate_run(
            args.run_dir,
            episodes=args.episodes,
            deterministic=not args.stochastic,
            video_episodes=args.video_episodes if args.video else 0,
            checkpoint=args.checkpoint,
            device=args.device,
            seed=args.seed,
            trust=tuple(args.trust),
        )
    except UserError as err:
        exit_with(str(err))
    except NonFiniteError as err:
        exit_with(str(err), status=3)
    mode = "deterministic" if record["deterministic"] else "stochastic"
    print(
        f"rlzoo: {record['algo']} on {record['env']} at step {record['step']} ({mode}): "
        f"{record['mean']:.2f} ± {record['std']:.2f} over {record['episodes']} episodes"
    )
    for video in record["videos"]:
        print(f"rlzoo: wrote {video}")
    print(f"rlzoo: wrote {record['path']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
