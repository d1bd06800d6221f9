"""The run's settings: every key of the config that is not a component's, validated once.

``read_settings(cfg)`` turns the composed config into a frozen :class:`Settings`; every mistake is
one ``UserError`` line naming the key and a value that works. ``check_values`` refuses non-finite
numbers anywhere and out-of-range sizes in the component groups before anything is built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf, open_dict

from rlzoo.config.added_keys import with_added_settings
from rlzoo.errors import UserError
from rlzoo.store.group import MAX_SEED, MAX_SEEDS

# Keys of ``algo`` that configure the loop (storage, schedule), not the algorithm's constructor.
LOOP_KEYS = ("name", "learning_starts", "batch_size", "buffer_size", "utd", "rollout_steps")
# What stands in for an on-policy algorithm's loop keys (no replay; buffer_size: 2 x num_envs).
ON_POLICY_LOOP = {"learning_starts": 0, "batch_size": 1, "utd": 1}
# Ranges checked before any work starts (each bound is far beyond what a run on one machine uses,
# and low enough that a typo fails at once instead of hanging or exhausting memory).
MAX_NUM_ENVS = 1024  # training envs in one process, an env object each (gymnasium, PettingZoo)
MAX_BATCHED_ENVS = 65_536  # env.backend=batched or warp: every env in one set of tensors
BATCHED_BACKENDS = ("batched", "warp")
MAX_EVAL_EPISODES = 1000  # one eval env per episode
MAX_UTD = 1000.0  # gradient updates per env step
MAX_THREADS = 1024  # torch_threads
SEED_KERNELS = ("exact", "batched")  # seed_kernels
# Size keys of the algo/critic/tuner groups (wherever they appear) and their allowed ranges.
SIZE_LIMITS = {
    "hidden": (1, 65_536),  # each hidden layer's width
    "n": (1, 1024),  # ensemble members
    "subset": (1, 1024),  # members in a target's min
    "horizon": (1, 1000),  # action-chunk length
    "n_step": (1, 1000),  # n-step returns
    "rollout_steps": (1, 1_000_000),  # on-policy rollout length
    "policy_delay": (1, 1_000_000),  # critic steps per actor step
    "target_delay": (1, 1_000_000),  # critic steps per target step (null = policy_delay)
}


@dataclass(frozen=True)
class Settings:
    """The validated run settings (see ``conf/config.yaml`` for each key's meaning).

    ``on_policy`` runs collect ``rollout_steps`` vector steps per env into a rollout and update
    once on it; off-policy runs store into a replay of ``buffer_size`` and make ``utd`` updates
    of ``batch_size`` per env step after ``learning_starts`` random steps.
    """

    seed: int
    device: torch.device
    total_steps: int
    num_envs: int
    eval_every: int
    eval_episodes: int
    checkpoint_every: int
    checkpoint_keep: int
    log_every: int
    progress: str | bool
    learning_starts: int
    batch_size: int
    buffer_size: int
    utd: float
    compile: bool | str  # True, False or "auto" (rlzoo.run.accel.resolve_accel)
    cudagraphs: bool | str  # True, False or "auto"
    progress_every_s: float | str  # seconds, or "auto" (rlzoo.run.logger.Logger)
    on_policy: bool
    rollout_steps: int  # on-policy only (0 off-policy)
    seeds: int  # K: seeds seed .. seed + K - 1 trained together as one group
    seed_kernels: str  # a CPU group's kernels: "exact" (each seed in turn) or "batched" (vmap)
    torch_threads: int | str  # CPU threads of torch (rlzoo.config.threads.run_threads)
    env_workers: int  # worker processes stepping training envs beside this one (0: none)
    env_timeout_s: float  # seconds an env worker may take per request before it is hung
    eval_video_every: int  # env steps between filmed evaluations (0: none; rlzoo.run.filming)
    normalize: Normalize  # normalize.* (rlzoo.config.normalization)
    algo_name: str  # algo.name: the algorithm's name in messages, checkpoints and summary.json
    env_name: str  # env.name: the env's, likewise
    wandb: bool  # log.wandb: mirror the scalars to Weights & Biases (rlzoo.run.tracking)


@dataclass(frozen=True)
class Normalize:
    """``normalize.*``, read once (each key's meaning and default: ``conf/config.yaml``).

    ``obs``/``reward`` switch the observation normalizer and the reward scaler on; ``envs`` is
    the reward scaler's number of running returns, one per training env (``num_envs``)."""

    obs: bool
    reward: bool
    epsilon: float
    reward_g_max: float
    envs: int


def read_normalize(cfg: DictConfig, envs: int | None = None) -> Normalize:
    """The ``normalize`` section of ``cfg`` for ``envs`` training envs (None: ``cfg``'s
    ``num_envs``, read as ``read_settings`` reads it); one ``UserError`` line for a switch that
    is not a boolean or a number that is not finite and > 0. A run dir's config written before
    the section has it filled (``rlzoo.config.added_keys.with_added_settings``)."""
    envs = num_envs_key(cfg) if envs is None else envs
    switches = [switch(cfg, f"normalize.{key}") for key in ("obs", "reward")]
    numbers = []
    for key in ("epsilon", "reward_g_max"):
        value = OmegaConf.select(cfg, f"normalize.{key}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = float("nan")
        if not number > 0.0 or not math.isfinite(number):
            raise UserError(f"normalize.{key} must be a number > 0, got {value!r}; e.g. "
                            f"normalize.{key}={'1e-8' if key == 'epsilon' else 5}")
        numbers.append(number)
    return Normalize(*switches, *numbers, envs)


def switch(cfg: DictConfig, key: str) -> bool:
    """The boolean at dotted ``key``; one ``UserError`` line for anything else ("off" too)."""
    value = OmegaConf.select(cfg, key)
    if not isinstance(value, bool):
        raise UserError(f"{key} is a switch, true or false, not {value!r}; write {key}=true or "
                        f"{key}=false")
    return value


def read_seed_kernels(cfg: DictConfig) -> str:
    """``seed_kernels``: ``exact`` or ``batched``."""
    kernels = cfg.seed_kernels
    if kernels not in SEED_KERNELS:
        raise UserError(f"seed_kernels must be exact or batched, got {kernels!r}; e.g. "
                        "seed_kernels=batched")
    return str(kernels)


def int_key(cfg: DictConfig, key: str, minimum: int, maximum: int | None = None) -> int:
    """The integer at dotted ``key`` of ``cfg`` in ``[minimum, maximum]`` (``1e6`` counts as an
    integer); a one-line ``UserError`` naming the key otherwise."""
    try:
        value = OmegaConf.select(cfg, key)
    except Exception as err:  # noqa: BLE001 - an interpolation that does not resolve
        raise UserError(f"{key} cannot be read ({type(err).__name__}: {err})") from None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)  # 1e6 means 1000000
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{key} must be an integer, got {value!r}; e.g. {key}={max(minimum, 1)}")
    if value < minimum:
        raise UserError(f"{key} must be >= {minimum}, got {value}; set {key} to at least {minimum}")
    if maximum is not None and value > maximum:
        raise UserError(f"{key} must be <= {maximum}, got {value}; choose a value in "
                        f"[{minimum}, {maximum}]")
    return value


def num_envs_key(cfg: DictConfig) -> int:
    """``num_envs``: at most :data:`MAX_NUM_ENVS` for the backends with an env object each, at
    most :data:`MAX_BATCHED_ENVS` for those that step every env as one tensor (``env.backend=
    batched``, ``warp``); one ``UserError`` line beyond."""
    backend = OmegaConf.select(cfg, "env.backend", default=None)
    if backend in BATCHED_BACKENDS:
        return int_key(cfg, "num_envs", 1, MAX_BATCHED_ENVS)
    value = int_key(cfg, "num_envs", 1)
    if value > MAX_NUM_ENVS:
        raise UserError(f"num_envs must be <= {MAX_NUM_ENVS:,} with env.backend="
                        f"{backend or 'gymnasium'} (an env object each), got {value}; "
                        f"env.backend=batched (MPE) or warp (MuJoCo) steps up to "
                        f"{MAX_BATCHED_ENVS:,} envs as tensors")
    return value


def env_timeout(cfg: DictConfig) -> float:
    """``env_timeout_s`` (seconds, > 0)."""
    value = cfg.env_timeout_s
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e6:
        raise UserError(f"env_timeout_s must be a number of seconds in (0, 1e6), got {value!r}; "
                        "e.g. env_timeout_s=60")
    return float(value)


def env_workers(cfg: DictConfig) -> int:
    """``env_workers``. Workers step the envs of the per-env backends (gymnasium, PettingZoo); a
    backend that steps all its envs at once (``env.backend=warp``, ``batched``) is refused with
    workers, in one line."""
    workers = int_key(cfg, "env_workers", 0, MAX_NUM_ENVS)
    backend = OmegaConf.select(cfg, "env.backend", default=None)
    if workers and backend not in (None, "gymnasium", "pettingzoo"):
        raise UserError(f"env.backend={backend} steps all num_envs envs at once already; "
                        "env_workers steps gymnasium and PettingZoo envs in processes: leave "
                        "env_workers=0")
    return workers


def video_every(cfg: DictConfig, eval_every: int) -> int:
    """``eval.video_every``, a multiple of ``eval.every``: videos are filmed at evaluations
    (``rlzoo.run.filming``); one ``UserError`` line otherwise."""
    every = int_key(cfg, "eval.video_every", 0)
    if every and not eval_every:
        raise UserError(f"eval.video_every={every} films evaluations, but eval.every=0 evaluates "
                        f"only at the end; set eval.every={every} (or a divisor of it)")
    if every % max(eval_every, 1):
        raise UserError(f"eval.video_every ({every}) must be a multiple of eval.every "
                        f"({eval_every}): videos are filmed at evaluations; e.g. "
                        f"eval.video_every={max(every // eval_every, 1) * eval_every}")
    return every


def read_progress_every(cfg: DictConfig) -> float | str:
    """``log.progress_every_s``: seconds (>= 0) or ``"auto"`` (a run dir older than the key has
    300, its value then: ``rlzoo.conf.history.SETTINGS_ADDED``)."""
    every_s = OmegaConf.select(cfg, "log.progress_every_s")
    if every_s == "auto":
        return every_s
    if (isinstance(every_s, bool) or not isinstance(every_s, (int, float))
            or not math.isfinite(every_s) or every_s < 0):
        raise UserError(f"log.progress_every_s must be auto or a number of seconds >= 0, got "
                        f"{every_s!r}; e.g. log.progress_every_s=60")
    return float(every_s)


def seed_range(cfg: DictConfig) -> tuple[int, int]:
    """``(seed, seeds)``: the first seed and K, checked so that every seed of the group,
    ``seed .. seed + K - 1``, is within ``0 .. MAX_SEED``; one ``UserError`` line otherwise."""
    seeds = int_key(cfg, "seeds", 1, MAX_SEEDS)
    seed = int_key(cfg, "seed", 0, MAX_SEED)
    if seed + seeds - 1 > MAX_SEED:
        raise UserError(
            f"seed={seed} seeds={seeds} would train seeds up to {seed + seeds - 1}, past the "
            f"largest seed {MAX_SEED}; choose seed <= {MAX_SEED - seeds + 1}")
    return seed, seeds


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ``cpu``; ``cuda`` (fails without CUDA)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name not in ("cpu", "cuda") and not str(name).startswith("cuda:"):
        raise UserError(f"device must be auto, cpu or cuda, got {name!r}; e.g. device=auto")
    if str(name).startswith("cuda") and not torch.cuda.is_available():
        raise UserError("device=cuda but this machine has no usable CUDA device; use device=cpu")
    return torch.device(name)


def on_policy_config(cfg: DictConfig) -> bool:
    """Whether ``cfg.algo._target_`` is an on-policy algorithm (False when it cannot be
    imported: building the algorithm reports that in one line)."""
    try:
        return bool(get_class(cfg.algo._target_).on_policy)
    except Exception:  # noqa: BLE001 - build_algorithm reports a bad _target_ in one line
        return False


def read_settings(cfg: DictConfig) -> Settings:
    """Validate the trainer's keys; every mistake is a one-line ``UserError``.

    An on-policy algorithm (``on_policy = True``, e.g. COMA) has no replay: its config needs no
    ``learning_starts``, ``batch_size``, ``buffer_size``, ``utd``; neutral values stand in.
    A run dir's config written before a key existed is read with the value that run had
    (``rlzoo.config.added_keys.with_added_settings``).
    """
    cfg = with_added_settings(cfg)
    check_values(cfg)
    on_policy = on_policy_config(cfg)
    if on_policy:
        num_envs = OmegaConf.select(cfg, "num_envs")
        neutral = {**ON_POLICY_LOOP,
                   "buffer_size": 2 * num_envs if isinstance(num_envs, int) else 2}
        cfg = cfg.copy()
        with open_dict(cfg):
            cfg.algo = OmegaConf.merge(cfg.algo, neutral)
    utd = OmegaConf.select(cfg, "algo.utd")
    if (isinstance(utd, bool) or not isinstance(utd, (int, float)) or not math.isfinite(utd)
            or not 0 < utd <= MAX_UTD):
        raise UserError(f"algo.utd must be a finite number in (0, {MAX_UTD:g}], got {utd!r}; "
                        "e.g. algo.utd=1")
    progress = cfg.log.progress
    if progress not in ("auto", True, False):
        raise UserError(f"log.progress must be auto, true or false, got {progress!r}")
    accel = {}
    for key in ("compile", "cudagraphs"):
        value = cfg[key]
        if not isinstance(value, bool) and value != "auto":
            raise UserError(f"{key} is a switch, auto, true or false, not {value!r}; write "
                            f"{key}=auto, {key}=true or {key}=false")
        accel[key] = value
    threads = cfg.torch_threads
    if isinstance(threads, str) and threads != "auto":
        raise UserError(f"torch_threads must be auto or an integer >= 0, got {threads!r}; e.g. "
                        "torch_threads=auto or torch_threads=2")
    if threads != "auto":
        threads = int_key(cfg, "torch_threads", 0, MAX_THREADS)
    seed, seeds = seed_range(cfg)
    num_envs = num_envs_key(cfg)
    settings = Settings(
        seed=seed,
        device=resolve_device(str(cfg.device)),
        total_steps=int_key(cfg, "total_steps", 1),
        num_envs=num_envs,
        env_workers=env_workers(cfg),
        env_timeout_s=env_timeout(cfg),
        eval_every=int_key(cfg, "eval.every", 0),
        eval_episodes=int_key(cfg, "eval.episodes", 1, MAX_EVAL_EPISODES),
        eval_video_every=video_every(cfg, int_key(cfg, "eval.every", 0)),
        checkpoint_every=int_key(cfg, "checkpoint.every", 0),
        checkpoint_keep=int_key(cfg, "checkpoint.keep", 1),
        log_every=int_key(cfg, "log.every", 1),
        progress=progress,
        learning_starts=int_key(cfg, "algo.learning_starts", 0),
        batch_size=int_key(cfg, "algo.batch_size", 1),
        buffer_size=int_key(cfg, "algo.buffer_size", 2),
        utd=float(utd),
        progress_every_s=read_progress_every(cfg),
        on_policy=on_policy,
        rollout_steps=int_key(cfg, "algo.rollout_steps", 1) if on_policy else 0,
        seeds=seeds,
        seed_kernels=read_seed_kernels(cfg),
        torch_threads=threads,
        normalize=read_normalize(cfg, num_envs),
        algo_name=str(cfg.algo.name),
        env_name=str(cfg.env.name),
        wandb=switch(cfg, "log.wandb"),
        **accel,
    )
    check_buffer(settings)
    return settings


def check_buffer(settings: Settings) -> None:
    """The replay buffer holds a batch and two steps of each env; one line otherwise."""
    if settings.batch_size > settings.buffer_size:
        raise UserError(f"algo.batch_size ({settings.batch_size}) is larger than algo.buffer_size "
                        f"({settings.buffer_size}); lower the batch or raise the buffer")
    if settings.buffer_size < 2 * settings.num_envs:
        raise UserError(f"algo.buffer_size ({settings.buffer_size}) must hold at least two steps "
                        f"of each of the {settings.num_envs} envs; raise algo.buffer_size")


def check_values(cfg: DictConfig) -> None:
    """Every number in the config is finite, and every size key (``SIZE_LIMITS``) of the algo,
    critic and tuner groups is an integer in range; one line naming the key otherwise."""

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{path}.{key}" if path else str(key))
            return
        if isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")
            return
        if isinstance(node, float) and not math.isfinite(node):
            raise UserError(f"{path} must be a finite number, got {node}")
        key = path.rsplit(".", 1)[-1].split("[", 1)[0]
        group = path.split(".", 1)[0]
        if key in SIZE_LIMITS and group in ("algo", "critic", "tuner") and node is not None:
            low, high = SIZE_LIMITS[key]
            if isinstance(node, bool) or not isinstance(node, int) or not low <= node <= high:
                raise UserError(f"{path} must be an integer in [{low}, {high}], got {node!r}")

    try:
        container = OmegaConf.to_container(cfg, resolve=True)
    except Exception as err:  # noqa: BLE001 - omegaconf raises many kinds
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"the config does not resolve ({first})") from None
    container.pop("hydra", None)  # type: ignore[union-attr]
    walk(container, "")
