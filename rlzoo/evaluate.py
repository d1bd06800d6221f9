"""Evaluate a saved run: ``python -m rlzoo.evaluate RUN_DIR [--episodes N] [--stochastic]
[--video] [--checkpoint PATH] [--device cpu] [--trust MODULE ...]``.

Rebuilds the env and the algorithm from the config Hydra saved in ``RUN_DIR/.hydra/config.yaml``,
loads the latest checkpoint's ``algo`` state (or ``--checkpoint PATH``) without executing code from
it (``weights_only``; the file is memory-mapped, so the replay buffer it also holds is never read),
runs N episodes with the deterministic policy (``--stochastic``: sampled actions), prints
``mean ± std over N episodes`` and then writes ``RUN_DIR/eval_<YYYYmmdd-HHMMSS>.json``
(``--out PATH``: that file, or a new ``eval_<...>.json`` in PATH when it is a folder; for a
read-only run dir). The result is printed before anything is written, so a write that fails
(a full disk) loses nothing that took minutes to measure; a folder that cannot be written is
refused before the episodes run.

Episode ``i`` runs on an env seeded with ``--seed + i`` (default ``seed + 10000``, the seeds of the
trainer's first evaluation), so a deterministic evaluation is reproducible and, on a run whose only
evaluation was its final one, repeats it exactly. Returns are undiscounted sums of env rewards;
multi-agent runs use rlzoo's team reward, the mean over agents at each step (per-agent returns are
in the JSON too). ``--video`` writes the first ``--video-episodes`` episodes as MP4 files to
``videos/`` beside the record (``RUN_DIR/videos/`` by default; see ``rlzoo/store/mp4.py`` for what
a headless machine needs).

A run dir's config may only build rlzoo's own components and classes of the modules named with
``--trust`` (``rlzoo.config.trust``): a downloaded run dir is data, and its ``_target_`` keys must
not run someone else's code.

Every user mistake ends in one line, ``rlzoo: error: <what>; <how to fix>``, exit status 2. A
checkpoint whose weights hold NaN or inf (or episodes whose returns are not finite) end in one such
line with exit status 3, as training does when it produces NaN/inf.

``policy/weights.py`` finds and reads the weights; ``policy/episodes.py`` runs (and films)
the episodes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import torch
from omegaconf import DictConfig

from rlzoo.algos.base import Algorithm, EnvSpec
from rlzoo.config.build import EVAL_SEED_OFFSET, build_algorithm, probe_spec, read_run_config
from rlzoo.config.settings import resolve_device
from rlzoo.errors import UserError, exit_with, one_line
from rlzoo.policy.episodes import EvalResult, Recording, run_policy
from rlzoo.policy.weights import run_weights
from rlzoo.run.filming import probe_rendering
from rlzoo.run.signals import NonFiniteError
from rlzoo.store.mp4 import check_video_writer, prepare_offscreen_rendering
from rlzoo.store.writer import check_inside, make_dir, write_atomic


def evaluate_run(
    run_dir: Path,
    episodes: int = 10,
    deterministic: bool = True,
    video_episodes: int = 0,
    checkpoint: Path | None = None,
    device: str = "cpu",
    seed: int | None = None,
    trust: list[str] | tuple[str, ...] = (),
    out: Path | None = None,
    report: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Evaluate a run's checkpoint; write and return the ``eval_<timestamp>.json`` record.

    Args:
        run_dir: the run directory (holds ``.hydra/config.yaml`` and ``checkpoints/``).
        episodes: N, episodes to run (each on its own env).
        deterministic: the policy's mode (True, default) or sampled actions.
        video_episodes: film the first K episodes into ``videos/`` beside the record (0 = none).
        checkpoint: a checkpoint file (default: the newest in ``run_dir/checkpoints``).
        device: ``cpu`` (default), ``cuda`` or ``auto``.
        seed: episode ``i`` uses ``seed + i`` (default: the run's seed + 10000).
        trust: modules whose classes the run's config may build besides rlzoo's components
            (``["examples"]`` for a run of the examples/ components; see ``rlzoo.config.trust``).
        out: where the record goes: a file, or a folder that gets a new
            ``eval_<timestamp>.json`` (default: ``run_dir``).
        report: called with the record (without ``path``) before it is written (the command
            line prints it), so a failed write loses nothing.

    Returns:
        The JSON record: ``mean``, ``std``, ``returns`` ``[N]``, ``lengths`` ``[N]``, ...,
        ``path`` (where it was written).
    """
    if video_episodes:
        prepare_offscreen_rendering()  # before anything imports mujoco
        check_video_writer()
    cfg = read_run_config(run_dir, trust=trust)  # a str is one name (or a comma list)
    ckpt, algo_state, step = run_weights(run_dir, cfg, checkpoint)
    torch_device = resolve_device(device)
    if video_episodes:
        probe_rendering(cfg)
    spec = probe_spec(cfg)
    algo = load_algorithm(cfg, spec, torch_device, ckpt, algo_state)
    del algo_state
    seed = int(cfg.seed) + EVAL_SEED_OFFSET if seed is None else seed
    torch.manual_seed(seed)  # --stochastic draws are reproducible too
    path, root = output_path(run_dir, out)  # checked before the episodes run
    recording = Recording(min(video_episodes, episodes), path.parent / "videos", path.stem,
                          root) if video_episodes else None
    if recording is not None:  # videos/ and its files: never through a link
        make_dir(recording.video_dir, root=root)
        for i in range(recording.episodes):
            check_inside(root, recording.path(i))
    start = time.perf_counter()
    result = run_policy(cfg, algo, episodes, seed, deterministic, recording)
    if not np.isfinite(result.returns).all():
        bad = [i for i, r in enumerate(result.returns) if not np.isfinite(r)]
        raise NonFiniteError(
            f"the returns of episodes {bad} (seeds {[seed + i for i in bad]}) are not finite: "
            f"NaN or inf rewards with checkpoint {ckpt}; nothing was written; check the env's "
            "rewards on those seeds and the policy's actions"
        )
    record = eval_record(run_dir, ckpt, step, cfg, spec, deterministic, seed, result)
    record.update(device=str(torch_device), wall_time_s=time.perf_counter() - start,
                  time=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    if result.agent_returns is not None:
        record["agent_returns"] = result.agent_returns.tolist()
    if report is not None:
        report(record)
    write_atomic(path, json.dumps(record, indent=2) + "\n", root=root)  # never through a link
    record["path"] = str(path)
    return record


def eval_record(run_dir: Path, ckpt: Path, step: int, cfg: DictConfig, spec: EnvSpec,
                deterministic: bool, seed: int, result: EvalResult) -> dict[str, Any]:
    """The JSON record of an evaluation (without where and when it ran)."""
    episodes = len(result.returns)
    return {
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
    }


def output_path(run_dir: Path, out: Path | None) -> tuple[Path, Path]:
    """Where the record goes and the folder it is checked below (``rlzoo.store.writer``): a new
    ``eval_<timestamp>.json`` in ``run_dir`` (default) or in the folder ``out``, or the file
    ``out``. ``UserError`` when that folder is missing or cannot be written, or the file is a
    link or special file, before any episode runs."""
    if out is None or out.is_dir():
        folder = run_dir if out is None else out
        path = record_path(folder)
    else:
        folder, path = out.parent, out
        if not folder.is_dir():
            raise UserError(f"--out {out}: its folder {folder} does not exist; create it or "
                            "pass another --out PATH")
    if not os.access(folder, os.W_OK):
        fix = "pass --out PATH to write the result elsewhere" if out is None \
            else "pass another --out PATH"
        raise UserError(f"cannot write in {folder} (read-only); {fix}; nothing was run")
    check_inside(folder, path)  # a link or hard-linked file there: refused now
    return path, folder


def load_algorithm(cfg: DictConfig, spec: EnvSpec, device: torch.device, ckpt: Path,
                   algo_state: dict[str, Any]) -> Algorithm:
    """The run's algorithm built on ``device`` with the checkpoint's ``algo_state`` loaded;
    ``UserError`` when the weights do not fit the run's config."""
    algo = build_algorithm(cfg, spec, device)
    try:
        algo.load_state_dict(algo_state)
    except (RuntimeError, ValueError, KeyError, IndexError, TypeError) as err:
        reason = one_line(str(err))
        raise UserError(
            f"checkpoint {ckpt} does not fit the run's config ({reason}); pass a checkpoint of "
            "this run with --checkpoint PATH"
        ) from None
    return algo


def record_path(run_dir: Path) -> Path:
    """``RUN_DIR/eval_<YYYYmmdd-HHMMSS>.json``, numbered (``-1``, ``-2``, ...) when taken."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = run_dir / f"eval_{stamp}.json"
    n = 1
    while os.path.lexists(out):  # a link (even a dangling one) is taken too
        out, n = run_dir / f"eval_{stamp}-{n}.json", n + 1
    return out


class _EvaluateParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        exit_with(f"{message}; see python -m rlzoo.evaluate --help")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _EvaluateParser(
        prog="python -m rlzoo.evaluate",
        description="Evaluate a run's latest checkpoint; prints mean ± std, then writes "
        "RUN_DIR/eval_<timestamp>.json (or --out PATH).",
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
        "--out", type=Path, default=None, metavar="PATH",
        help="write the record to PATH (a folder: a new eval_<timestamp>.json in it; videos go "
        "to videos/ beside it) instead of RUN_DIR: for a run dir that cannot be written",
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
    shown: list[dict[str, Any]] = []  # the record, once printed

    def report(record: dict[str, Any]) -> None:
        print_result(record)
        shown.append(record)

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
            out=args.out,
            report=report,
        )
    except UserError as err:
        if shown:  # measured and printed, then the write failed
            exit_with(f"{err}; the result printed above was not saved: pass --out PATH to "
                      "write it elsewhere")
        exit_with(str(err))
    except NonFiniteError as err:
        exit_with(str(err), status=3)
    print(f"rlzoo: wrote {record['path']}", flush=True)
    return 0


def print_result(record: dict[str, Any]) -> None:
    """The result's lines on stdout: ``<algo> on <env> at step S (mode): mean ± std over N
    episodes`` and each video written."""
    mode = "deterministic" if record["deterministic"] else "stochastic"
    print(
        f"rlzoo: {record['algo']} on {record['env']} at step {record['step']} ({mode}): "
        f"{record['mean']:.2f} ± {record['std']:.2f} over {record['episodes']} episodes"
    )
    for video in record["videos"]:
        print(f"rlzoo: wrote {video}")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
