"""The training loop: collect -> store -> update -> evaluate -> log -> checkpoint.

The trainer owns everything that is not the algorithm: environments, replay, seeding, the
schedule (random warm-up, updates per env step, evaluation, checkpoints), logging and the run
directory. Steps are env steps (transitions) summed over the ``num_envs`` parallel envs; the
reset calls of next-step autoreset are not counted, they collect no transition.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import random
import signal
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from rlzoo.accel import check_accel, update_fn
from rlzoo.algos.base import Algorithm, EnvSpec
from rlzoo.buffers.replay import ReplayBuffer
from rlzoo.checkpoint import (
    CheckpointError,
    checkpoint_path,
    describe_nonfinite,
    list_checkpoints,
    load_latest_valid,
    nonfinite_entries,
    prune_checkpoints,
    save_checkpoint,
)
from rlzoo.envs.single_agent import (
    SingleAgentVecEnv,
    check_env_id,
    make_single_env,
    run_episodes,
)
from rlzoo.errors import UserError
from rlzoo.logger import Logger
from rlzoo.rundir import write_atomic

# Keys of ``algo`` that configure the trainer rather than the algorithm's constructor.
TRAINER_KEYS = ("name", "learning_starts", "batch_size", "buffer_size", "utd", "rollout_steps")
EVAL_SEED_OFFSET = 10_000  # the eval envs' seeds are seed + 10_000 + i
# Ranges checked before any work starts (each bound is far beyond what a run on one machine uses,
# and low enough that a typo fails at once instead of hanging or exhausting memory).
MAX_SEED = 2**31 - 1  # seeds go to numpy, torch, gymnasium and PettingZoo, some of them 32-bit
MAX_NUM_ENVS = 1024  # training envs in one process
MAX_EVAL_EPISODES = 1000  # one eval env per episode
MAX_UTD = 1000.0  # gradient updates per env step
MAX_THREADS = 1024  # torch_threads
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
    """The validated run settings (see ``conf/config.yaml`` for each key's meaning)."""

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
    compile: bool = False
    cudagraphs: bool = False
    progress_every_s: float = 300.0


def _int(cfg: DictConfig, key: str, minimum: int, maximum: int | None = None) -> int:
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


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ``cpu``; ``cuda`` (fails without CUDA)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name not in ("cpu", "cuda") and not str(name).startswith("cuda:"):
        raise UserError(f"device must be auto, cpu or cuda, got {name!r}; e.g. device=auto")
    if str(name).startswith("cuda") and not torch.cuda.is_available():
        raise UserError("device=cuda but this machine has no usable CUDA device; use device=cpu")
    return torch.device(name)


def _on_policy(cfg: DictConfig) -> bool:
    try:
        return bool(get_class(cfg.algo._target_).on_policy)
    except Exception:  # noqa: BLE001 - build_algorithm reports a bad _target_ in one line
        return False


def read_settings(cfg: DictConfig) -> Settings:
    """Validate the trainer's keys; every mistake is a one-line ``UserError``.

    An on-policy algorithm (``on_policy = True``, e.g. COMA) has no replay: its config needs no
    ``learning_starts``, ``batch_size``, ``buffer_size``, ``utd``; neutral values stand in.
    """
    check_values(cfg)
    if _on_policy(cfg):
        num_envs = OmegaConf.select(cfg, "num_envs")
        neutral = {"learning_starts": 0, "batch_size": 1, "utd": 1,
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
    every_s = OmegaConf.select(cfg, "log.progress_every_s", default=300)  # older run configs
    if (isinstance(every_s, bool) or not isinstance(every_s, (int, float))
            or not math.isfinite(every_s) or every_s < 0):
        raise UserError(f"log.progress_every_s must be a number of seconds >= 0, got {every_s!r}")
    accel = {}
    for key in ("compile", "cudagraphs"):
        value = cfg.get(key, False)
        if not isinstance(value, bool):
            raise UserError(f"{key} must be true or false, got {value!r}; e.g. {key}=true")
        accel[key] = value
    settings = Settings(
        seed=_int(cfg, "seed", 0, MAX_SEED),
        device=resolve_device(str(cfg.device)),
        total_steps=_int(cfg, "total_steps", 1),
        num_envs=_int(cfg, "num_envs", 1, MAX_NUM_ENVS),
        eval_every=_int(cfg, "eval.every", 0),
        eval_episodes=_int(cfg, "eval.episodes", 1, MAX_EVAL_EPISODES),
        checkpoint_every=_int(cfg, "checkpoint.every", 0),
        checkpoint_keep=_int(cfg, "checkpoint.keep", 1),
        log_every=_int(cfg, "log.every", 1),
        progress=progress,
        learning_starts=_int(cfg, "algo.learning_starts", 0),
        batch_size=_int(cfg, "algo.batch_size", 1),
        buffer_size=_int(cfg, "algo.buffer_size", 2),
        utd=float(utd),
        progress_every_s=float(every_s),
        **accel,
    )
    _int(cfg, "torch_threads", 0, MAX_THREADS)
    if settings.batch_size > settings.buffer_size:
        raise UserError(
            f"algo.batch_size ({settings.batch_size}) is larger than algo.buffer_size "
            f"({settings.buffer_size}); lower the batch or raise the buffer"
        )
    if settings.buffer_size < 2 * settings.num_envs:
        raise UserError(
            f"algo.buffer_size ({settings.buffer_size}) must hold at least two steps of each of "
            f"the {settings.num_envs} envs; raise algo.buffer_size"
        )
    return settings


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


def read_run_config(
    run_dir: Path, trust: list[str] | tuple[str, ...] = ()
) -> DictConfig:
    """``RUN_DIR/.hydra/config.yaml`` as a DictConfig; one-line errors when it is not a run.

    A run dir may come from elsewhere, so before anything of it is built every ``_target_`` in
    it must name an rlzoo component or a module in ``trust`` (``rlzoo.trust.check_targets``):
    otherwise one ``UserError`` line naming the key, the target and how to trust it.
    """
    from rlzoo.trust import check_targets  # only this function of the trainer needs it

    if not run_dir.is_dir():
        raise UserError(
            f"run directory {run_dir} does not exist; pass a run directory made by rlzoo.train "
            "(runs/<env>/<algo>/<timestamp>-s<seed>)"
        )
    path = run_dir / ".hydra" / "config.yaml"
    if not path.is_file():
        raise UserError(
            f"{run_dir} has no .hydra/config.yaml, so it is not an rlzoo run directory; pass the "
            "directory rlzoo.train wrote (it holds .hydra/, checkpoints/ and summary.json)"
        )
    try:
        cfg = OmegaConf.load(path)
        OmegaConf.to_container(cfg, resolve=True)  # a broken interpolation fails here, in one line
        if not isinstance(cfg, DictConfig) or "algo" not in cfg or "env" not in cfg:
            raise ValueError("no algo or env section")
    except Exception as err:  # noqa: BLE001 - omegaconf/yaml raise many kinds
        raise UserError(
            f"cannot read {path} ({type(err).__name__}: {err}); restore the file Hydra wrote"
        ) from None
    check_targets(cfg, trust, source=str(path))
    return cfg


def env_kwargs(cfg: DictConfig) -> dict[str, Any]:
    """``env.kwargs`` as a plain dict (passed to the env constructor)."""
    kwargs = cfg.env.get("kwargs")
    return dict(OmegaConf.to_container(kwargs, resolve=True)) if kwargs else {}


def make_env(cfg: DictConfig, num_envs: int, seed: int) -> SingleAgentVecEnv:
    """Build the training (or evaluation) env from the ``env`` config."""
    kind = cfg.env.get("kind", "single")
    if kind != "single":
        raise UserError(f"env kind {kind!r} is not supported yet; use a single-agent env")
    try:
        return SingleAgentVecEnv(cfg.env.id, num_envs, seed, **env_kwargs(cfg))
    except (ValueError, gym.error.Error) as err:
        raise UserError(str(err)) from None


def misfit_message(cfg: DictConfig, multi_agent_algo: bool) -> str:
    """The one line for a multi-agent algorithm on a single-agent env, or the reverse."""
    if multi_agent_algo:
        return (f"algo={cfg.algo.name} is a multi-agent algorithm and env={cfg.env.name} is not; "
                "use a multi-agent env (env=mpe/simple_spread, env=mamujoco/HalfCheetah-2x3, ...)"
                " or a single-agent algo (algo=sac, algo=td3, ...)")
    return (f"algo={cfg.algo.name} is a single-agent algorithm and env={cfg.env.name} is "
            "multi-agent; use a multi-agent algo (algo=maddpg, algo=hasac, algo=coma) or a "
            "single-agent env (e.g. env=Hopper)")


def build_algorithm(cfg: DictConfig, spec: EnvSpec, device: torch.device) -> Algorithm:
    """Instantiate ``cfg.algo`` with the critic and tuner groups, directly on ``device``."""
    try:
        cls = get_class(cfg.algo._target_)
    except Exception:  # noqa: BLE001 - hydra raises several kinds here
        raise UserError(
            f"algo._target_ {cfg.algo._target_!r} cannot be imported; check the module path"
        ) from None
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise UserError(f"algo._target_ {cfg.algo._target_!r} is not an rlzoo Algorithm subclass")
    if cls.multi_agent != spec.multi_agent:
        raise UserError(misfit_message(cfg, cls.multi_agent))
    algo_cfg = OmegaConf.masked_copy(cfg.algo, [k for k in cfg.algo if k not in TRAINER_KEYS])
    extra: dict[str, Any] = {"spec": spec, "critic": cfg.critic}
    if cfg.get("tuner"):
        if "tuner" not in inspect.signature(cls).parameters:
            raise UserError(
                f"algo={cfg.algo.name} has no entropy temperature to tune; drop the tuner "
                "override (or pass tuner=none)"
            )
        extra["tuner"] = cfg.tuner
    try:
        with torch.device(device):
            algo = instantiate(algo_cfg, **extra)
    except Exception as err:  # noqa: BLE001 - hydra wraps constructor errors
        cause: BaseException = err
        while cause.__cause__ is not None:
            cause = cause.__cause__
        if isinstance(cause, (ValueError, TypeError)):
            raise UserError(f"cannot build algo={cfg.algo.name}: {cause}") from None
        if isinstance(cause, MemoryError) or (
                isinstance(cause, RuntimeError) and "alloc" in str(cause).lower()):
            raise UserError(
                f"not enough memory on {device} to build algo={cfg.algo.name}'s networks; "
                "lower the hidden sizes (algo.actor.hidden, critic.hidden) or critic.n"
            ) from None
        raise
    return algo.to(device)


def check_spec(spec: EnvSpec, env_name: str) -> None:
    """Refuse an env whose observations or actions have no entries, in one line."""
    for what, size in (("observation", spec.obs_dim), ("action", spec.act_dim)):
        if int(size) <= 0:
            raise UserError(
                f"env={env_name} has an empty {what} space (size {size}); rlzoo needs a Box "
                f"{what} with at least one entry"
            )


def available_memory(device: torch.device) -> int:
    """Bytes that can still be allocated on ``device`` (MemAvailable for the CPU)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def replay_bytes(
    capacity: int, obs_shape: tuple[int, ...], action_shape: tuple[int, ...], num_envs: int,
    state_dim: int = 0, agent_rewards: int = 0,
) -> int:
    """Bytes a ``ReplayBuffer`` of these sizes allocates (float32 fields, bool flags, int64
    index), computed before allocating anything."""
    rows = math.ceil(capacity / num_envs) * num_envs
    per_row = 4 * (math.prod(obs_shape) + math.prod(action_shape) + 1 + state_dim + agent_rewards)
    return rows * (per_row + 2 + 8)


def check_buffer_memory(
    s: Settings, obs_shape: tuple[int, ...], action_shape: tuple[int, ...], state_dim: int = 0,
    agent_rewards: int = 0,
) -> None:
    """One line, before allocating, when the replay buffer cannot fit in the device's memory
    (it may take at most 90% of what is available now)."""
    need = replay_bytes(s.buffer_size, obs_shape, action_shape, s.num_envs, state_dim,
                        agent_rewards)
    have = available_memory(s.device)
    if need > 0.9 * have:
        raise UserError(
            f"algo.buffer_size={s.buffer_size} needs {need / 2**30:.2f} GiB on {s.device} but "
            f"only {have / 2**30:.2f} GiB are available; lower algo.buffer_size"
        )


class NonFiniteError(Exception):
    """Training produced NaN or inf; the message names the quantity and the step."""


class AlreadyFinished(Exception):  # noqa: N818 - it is the event, not an error
    """``resume=`` of a run that has reached its ``total_steps``: nothing to do or write."""


class Interrupted(Exception):  # noqa: N818 - it is the event, not an error
    """SIGTERM or SIGINT arrived; a checkpoint was written at ``step`` into ``path``."""

    def __init__(self, signum: int, path: Path, run_dir: Path, step: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum, self.path, self.run_dir, self.step = signum, path, run_dir, step


class StopSignals:
    """Within the block SIGTERM and SIGINT only set ``signum``; the loop then checkpoints and
    stops at the end of its current step. A second signal exits at once (status 130 or 143)."""

    def __init__(self) -> None:
        self.signum = 0
        self.previous: dict[int, Any] = {}

    def handle(self, signum: int, frame: Any) -> None:
        if self.signum:
            raise SystemExit(128 + signum)
        self.signum = signum

    def __enter__(self) -> StopSignals:
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self.previous[sig] = signal.signal(sig, self.handle)
            except ValueError:  # not the main thread (e.g. some launchers): no handler
                pass
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def summary_step(run_dir: Path) -> int | None:
    """``total_steps`` of ``run_dir/summary.json``, or ``None`` when it is absent or unreadable
    (a summary left by an earlier, shorter leg of a resumed run is stale, not final)."""
    try:
        step = json.loads((run_dir / "summary.json").read_text()).get("total_steps")
    except (OSError, ValueError, AttributeError):
        return None
    return step if isinstance(step, int) else None


def host_array(value: Any) -> np.ndarray:
    """A numpy copy of a checkpointed array (a tensor on any device, or an array)."""
    if torch.is_tensor(value):
        return value.detach().cpu().numpy().copy()
    return np.array(value)


def _legacy_numpy_state(state: dict[str, Any]) -> dict[str, Any]:
    """numpy's global RNG state as ``np.random.set_state`` wants it (its key array as uint32)."""
    inner = dict(state["state"])
    inner["key"] = np.asarray(inner["key"], dtype=np.uint32)
    return {**state, "state": inner}


def _python_random_state(state: Any) -> tuple[Any, ...]:
    version, internal, gauss = state
    return version, tuple(int(x) for x in internal), gauss


class Trainer:
    """Runs one training job into ``run_dir`` from a composed Hydra config."""

    def __new__(cls, cfg: DictConfig, run_dir: Path) -> Trainer:
        """On a multi-agent env (``env.kind: multi``) ``Trainer(cfg, run_dir)`` builds a
        ``MultiAgentTrainer`` (rlzoo/trainer_multi.py): the same loop with its own hooks."""
        if cls is Trainer and cfg.env.get("kind", "single") == "multi":
            from rlzoo.trainer_multi import MultiAgentTrainer

            return super().__new__(MultiAgentTrainer)
        return super().__new__(cls)

    def __init__(self, cfg: DictConfig, run_dir: Path) -> None:
        self.cfg, self.run_dir = cfg, run_dir
        self.settings = s = read_settings(cfg)
        if s.device.type == "cpu" and cfg.get("torch_threads", 0):
            torch.set_num_threads(int(cfg.torch_threads))
        self.seed_everything(s.seed)
        self.env, self.spec = self.build_env()
        self.eval_envs: list[gym.Env] = []
        try:
            check_spec(self.spec, str(cfg.env.name))
            self.algo = build_algorithm(cfg, self.spec, s.device)
        except BaseException:
            self.env.close()
            raise
        check_accel(s.compile, s.cudagraphs, s.device, type(self.algo), str(cfg.algo.name))
        self.update = update_fn(self.algo, s.compile, s.cudagraphs)  # algo.update, accelerated
        self.horizon = self.algo.action_horizon
        self.buffer = self.build_buffer()
        self.rng = np.random.default_rng(s.seed)  # warm-up actions
        self.step = 0  # env steps collected
        self.update_credit = 0.0
        self.episodes = 0
        self.last_eval: tuple[float, float] | None = None
        self.checkpoint_dir = run_dir / "checkpoints"
        self.obs: Any = None  # the observation the next action is taken from
        self.wall_time = 0.0  # seconds spent in train(), summed over resumes
        self.restored: Path | None = None  # the checkpoint restore() loaded
        self.stop = StopSignals()
        self.warnings = self.schedule_warnings()

    @property
    def updates(self) -> int:
        """Gradient updates so far: the algorithm's own counter (its update phases use it)."""
        return self.algo.updates

    # ------------------------------------------------------------------ setup
    @staticmethod
    def seed_everything(seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)

    def to_device(self, x: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(x, dtype=torch.float32).to(self.settings.device, non_blocking=True)

    # The hooks below are the single-agent versions; rlzoo/trainer_multi.py overrides them.
    def build_env(self) -> tuple[Any, EnvSpec]:
        """The training env and what the algorithm needs to know about it."""
        env = make_env(self.cfg, self.settings.num_envs, self.settings.seed)
        bounds = env.envs[0].env.action_space  # the env's own Box, inside RescaleAction
        return env, EnvSpec(
            obs_dim=env.obs_dim, act_dim=env.act_dim,
            action_low=tuple(float(x) for x in bounds.low),
            action_high=tuple(float(x) for x in bounds.high),
        )

    def build_buffer(self) -> Any:
        """The storage ``collect`` writes and ``learn`` reads (replay here)."""
        s = self.settings
        check_buffer_memory(s, (self.spec.obs_dim,), (self.spec.act_dim,))
        return ReplayBuffer(
            s.buffer_size, (self.spec.obs_dim,), (self.spec.act_dim,), s.num_envs,
            s.device, seed=s.seed,
        )

    def schedule_warnings(self) -> list[str]:
        """One-line warnings about a schedule that cannot do what the user probably wants,
        printed at start and recorded in summary.json."""
        s = self.settings
        if self.algo.on_policy or s.total_steps > s.learning_starts:
            return []
        return [
            f"total_steps ({s.total_steps}) <= algo.learning_starts ({s.learning_starts}): this "
            "run takes only random actions and makes no gradient update, so its returns are "
            "those of an untrained policy; lower algo.learning_starts or raise total_steps"
        ]

    # ------------------------------------------------------------------ loop
    def train(self, resume: bool = False) -> dict[str, Any]:
        """Run to ``total_steps``; with ``resume`` first restore the newest valid checkpoint of
        ``run_dir`` (unless :meth:`restore` already did) and continue from it exactly."""
        s = self.settings
        purge_step = None
        if resume:
            path = self.restored or self.restore()
            purge_step = self.step + 1  # drop events a crashed run logged after its checkpoint
        else:
            self.obs = self.reset_envs()
            self.check_env_output(obs=self.obs)
        logger = Logger(self.run_dir, s.total_steps, s.progress, self.step, purge_step,
                        progress_every_s=s.progress_every_s)
        self.logger = logger
        if resume:
            logger.announce(f"resuming {self.run_dir} from {path.name} at step {self.step}")
        else:
            logger.announce(f"run dir {self.run_dir}")
        for line in self.warnings:
            logger.announce(f"warning: {line}")
        start = time.perf_counter() - self.wall_time
        obs = self.obs
        metrics: dict[str, torch.Tensor] = {}
        next_log = self.next_multiple(s.log_every)
        next_eval = self.next_multiple(s.eval_every)
        next_ckpt = self.next_multiple(s.checkpoint_every)
        window_start, window_step, window_updates = time.perf_counter(), self.step, self.updates
        with self.stop as stop:
            # updates a SIGTERM cut short are owed before the next env step
            metrics.update(self.learn(0))
            while self.step < s.total_steps:
                # --- act, step the envs, store the step, count finished episodes
                obs, n_new = self.collect(obs)
                self.obs = obs
                past_warmup = self.step + n_new - max(self.step, s.learning_starts)
                self.step += n_new
                logger.advance(n_new)
                # --- update (stops early, owing the rest, when a signal arrives)
                metrics.update(self.learn(past_warmup))
                # --- log, evaluate, checkpoint
                if self.step >= next_log:
                    self.check_finite(metrics)
                    now = time.perf_counter()
                    seconds = now - window_start
                    perf = {
                        "perf/sps": (self.step - window_step) / seconds,
                        "perf/updates_per_sec": (self.updates - window_updates) / seconds,
                    }
                    logger.scalars({**metrics, **perf}, self.step)
                    logger.postfix(sps=perf["perf/sps"])
                    window_start, window_step, window_updates = now, self.step, self.updates
                    next_log = self.next_multiple(s.log_every)
                last = self.step >= s.total_steps
                if self.step >= next_eval or last:
                    self.evaluate_and_log()
                    next_eval = self.next_multiple(s.eval_every)
                if self.step >= next_ckpt or last or stop.signum:
                    self.wall_time = time.perf_counter() - start
                    self.check_finite(metrics)
                    path = self.save()
                    next_ckpt = self.next_multiple(s.checkpoint_every)
                    if stop.signum and not last:
                        logger.close()
                        self.close_envs()
                        raise Interrupted(stop.signum, path, self.run_dir, self.step)
            if self.last_eval is None:  # resumed at the end from a checkpoint without one
                self.evaluate_and_log()
        self.wall_time = time.perf_counter() - start
        summary = self.write_summary(self.wall_time)
        logger.hparams(self.hparams(), {"hparam/final_eval_return": summary["final_eval_return"]})
        logger.close()
        self.close_envs()
        return summary

    def next_multiple(self, every: int) -> int:
        """The next step at which a schedule with period ``every`` fires (0 = only at the end)."""
        if not every:
            return self.settings.total_steps
        return (self.step // every + 1) * every

    def close_envs(self) -> None:
        self.env.close()
        for env in self.eval_envs:
            env.close()

    def check_finite(self, metrics: dict[str, torch.Tensor]) -> None:
        """Stop with one line naming the quantity if a loss, statistic or parameter is NaN/inf.

        Called at log time and before every checkpoint, so a poisoned state is never saved over
        the last good checkpoint. One device-to-host transfer per call.
        """
        names = [k for k, v in metrics.items() if torch.is_tensor(v)]
        params = dict(self.algo.named_parameters())
        flags = torch.stack(
            [torch.isfinite(metrics[k]).all() for k in names]
            + [torch.isfinite(p).all() for p in params.values()]
        ).tolist() if names or params else []
        for name, ok in zip([*names, *(f"parameter {p}" for p in params)], flags):
            if not ok:
                where = self.last_good_checkpoint_note()
                raise NonFiniteError(
                    f"{name} became NaN or inf by step {self.step}; training stopped and {where} "
                    "(lower the learning rates or check the env's rewards and observations)"
                )

    def check_env_output(self, **arrays: Any) -> None:
        """Stop before storing a NaN/inf reward, observation or action (``[E, ...]`` arrays),
        with one line naming the quantity, the env, the training env index and the step, so
        poisoned data never reaches the replay buffer or a checkpoint."""
        for name, value in arrays.items():
            if value is None:
                continue
            a = np.asarray(value)
            if a.dtype.kind != "f" or np.isfinite(a).all():
                continue
            bad = ~np.isfinite(a.reshape(a.shape[0], -1)).all(axis=1) if a.ndim else [True]
            e = int(np.flatnonzero(bad)[0])
            source = "the policy" if name == "action" else f"env={self.cfg.env.name}"
            where = self.last_good_checkpoint_note()
            raise NonFiniteError(
                f"{source} produced a non-finite {name} (NaN or inf) in training env {e} at step "
                f"{self.step + 1}; training stopped before storing it and {where} (check the "
                "env's rewards and observations)"
            )

    def reset_envs(self) -> Any:
        """First reset of the training envs; starts the per-env loop state."""
        E, H, A = self.settings.num_envs, self.horizon, self.spec.act_dim
        self.chunk = np.zeros((E, H, A), dtype=np.float32)
        self.chunk_pos = np.full(E, H)  # H = this env needs a fresh chunk
        self.episode_return = np.zeros(E)
        return self.env.reset()

    def collect(self, obs: Any) -> tuple[Any, int]:
        """Act, step the envs, store the step, log finished episodes. Returns the next obs and
        the number of transitions collected (reset calls are not transitions)."""
        s = self.settings
        E, H, A = s.num_envs, self.horizon, self.spec.act_dim
        chunk, chunk_pos, episode_return = self.chunk, self.chunk_pos, self.episode_return
        # --- act: uniform random during warm-up, then the policy (chunks run open-loop)
        if self.step < s.learning_starts:
            action = self.rng.uniform(-1.0, 1.0, size=(E, A)).astype(np.float32)
        else:
            need = chunk_pos >= H
            if need.any():
                fresh = self.algo.act(self.to_device(obs)).reshape(E, H, A).cpu().numpy()
                chunk[need] = fresh[need]
                chunk_pos[need] = 0
            action = chunk[np.arange(E), chunk_pos]
            chunk_pos += 1
        result = self.env.step(action)
        self.check_env_output(reward=result.reward, obs=result.obs, action=action)
        self.buffer.add(obs, action, result.reward, result.obs, result.terminated,
                        result.truncated, result.reset_step)
        chunk_pos[result.reset_step] = H
        # --- episode bookkeeping
        valid = ~result.reset_step
        n_new = int(valid.sum())
        episode_return += np.where(valid, result.reward, 0.0)
        for e in np.flatnonzero((result.terminated | result.truncated) & valid):
            self.episodes += 1
            self.logger.episode(float(episode_return[e]), self.step + n_new)
            episode_return[e] = 0.0
        return result.obs, n_new

    def learn(self, past_warmup: int) -> dict[str, torch.Tensor]:
        """Gradient updates after ``past_warmup`` new env steps beyond the warm-up; returns the
        last update's metrics."""
        s = self.settings
        E, H = s.num_envs, self.horizon
        metrics: dict[str, torch.Tensor] = {}
        # --- update: utd gradient steps per env step collected after the warm-up
        # (an H-step window needs H - 1 newer rows: none can start in the newest H - 1)
        # A signal ends the updates early; the rest stay owed in update_credit (checkpointed)
        # and are made before the next env step of the resumed run.
        ready = len(self.buffer) > (H - 1) * E
        if past_warmup > 0 and ready:
            self.update_credit += s.utd * past_warmup
        while ready and self.update_credit >= 1.0 and not self.stop.signum:
            batch = self.buffer.sample(
                s.batch_size, n_step=self.algo.n_step, gamma=self.algo.gamma,
                action_horizon=H,
            )
            metrics.update(self.update(batch))
            self.update_credit -= 1.0
        return metrics

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, episodes: int | None = None, deterministic: bool = True) -> np.ndarray:
        """Run ``eval.episodes`` episodes on separate eval envs; returns their returns
        ``[episodes]``. Episode ``i`` of every evaluation starts from seed ``seed + 10_000 + i``:
        evaluations differ only by the policy, keep no state between them (so resuming cannot
        shift them), and ``rlzoo.evaluate`` reproduces the last one exactly."""
        episodes = episodes or self.settings.eval_episodes
        while len(self.eval_envs) < episodes:
            self.eval_envs.append(make_single_env(self.cfg.env.id, **env_kwargs(self.cfg)))
        envs = self.eval_envs[:episodes]
        seed0 = self.settings.seed + EVAL_SEED_OFFSET
        obs = np.stack([env.reset(seed=seed0 + i)[0] for i, env in enumerate(envs)])

        def policy(batch: np.ndarray) -> np.ndarray:
            action = self.algo.act(self.to_device(batch), deterministic=deterministic)
            return action.cpu().numpy()

        return run_episodes(envs, obs.astype(np.float32), policy, self.horizon)[0]

    def evaluate_and_log(self) -> None:
        returns = self.evaluate()
        if not np.isfinite(returns).all():
            raise NonFiniteError(
                f"evaluation at step {self.step} returned a non-finite return (NaN or inf) on "
                f"env={self.cfg.env.name}; check the env's rewards"
            )
        self.last_eval = (float(returns.mean()), float(returns.std()))
        self.logger.scalars(
            {"eval/return": self.last_eval[0], "eval/return_std": self.last_eval[1]}, self.step
        )
        self.logger.flush()

    # ------------------------------------------------------------------ outputs
    def save(self) -> Path:
        """Write a checkpoint of this step, only if everything in it is finite (so every
        checkpoint kept is one to go back to), and keep the newest ``checkpoint.keep``."""
        path = checkpoint_path(self.checkpoint_dir, self.step)
        state = self.state_dict()
        poisoned = nonfinite_entries(state)
        if poisoned:
            where = self.last_good_checkpoint_note()
            raise NonFiniteError(
                f"NaN or inf in {describe_nonfinite(poisoned)} at step {self.step}; no checkpoint "
                f"was written and {where} (lower the learning rates or check the env)"
            )
        save_checkpoint(path, state)
        prune_checkpoints(self.checkpoint_dir, self.settings.checkpoint_keep)
        return path

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically, as tensors and plain data only
        (loadable with ``weights_only=True``)."""
        rng = {
            "torch": torch.get_rng_state(),
            "numpy": np.random.get_state(legacy=False),
            "python": random.getstate(),
            "warmup": self.rng.bit_generator.state,
        }
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        return {
            "format": 1,
            "algo_name": str(self.cfg.algo.name),
            "env_name": str(self.cfg.env.name),
            "config": OmegaConf.to_container(self.cfg, resolve=True),
            "algo": self.algo.state_dict(),
            "buffer": self.buffer.state_dict(),
            "env": self.env.get_state(),
            "loop": self.loop_state(),
            "counters": {
                "step": self.step, "episodes": self.episodes,
                "update_credit": self.update_credit, "wall_time": self.wall_time,
                "last_eval": list(self.last_eval) if self.last_eval else None,
            },
            "rng": rng,
        }

    def loop_state(self) -> dict[str, Any]:
        """The collection loop's own state (current observation, open episodes, action chunk)."""
        return {
            "obs": np.asarray(self.obs), "episode_return": self.episode_return,
            "chunk": self.chunk, "chunk_pos": self.chunk_pos,
        }

    def load_loop_state(self, loop: dict[str, Any]) -> None:
        self.obs = host_array(loop["obs"])
        self.episode_return = host_array(loop["episode_return"])
        self.chunk = host_array(loop["chunk"])
        self.chunk_pos = host_array(loop["chunk_pos"])

    def restore(self) -> Path:
        """Load the newest valid checkpoint of ``run_dir`` (older ones on failure, with a
        warning); returns its path. Raises ``UserError`` if none fits this run."""
        try:
            with warnings.catch_warnings(record=True) as skipped:
                warnings.simplefilter("always")
                try:
                    path, state = load_latest_valid(self.checkpoint_dir, self.settings.device)
                finally:
                    for warning in skipped:  # one rlzoo line per checkpoint skipped
                        print(f"rlzoo: warning: {warning.message}", file=sys.stderr, flush=True)
        except CheckpointError as err:
            raise UserError(f"cannot resume: {err}; start a new run instead") from None
        for key, mine in (("algo_name", self.cfg.algo.name), ("env_name", self.cfg.env.name)):
            if state.get(key) != mine:
                raise UserError(
                    f"cannot resume: {path} was written by {key.split('_')[0]}={state.get(key)}, "
                    f"but this run is {key.split('_')[0]}={mine}; point resume= at its own run dir"
                )
        self.reset_envs()  # builds the loop's arrays and gives every env its first reset
        try:
            self.algo.load_state_dict(state["algo"])
            self.buffer.load_state_dict(state["buffer"])
            self.env.set_state(state["env"])
            self.load_loop_state(state["loop"])
        except (KeyError, ValueError, RuntimeError) as err:
            raise UserError(
                f"cannot resume from {path}: it does not match this run's config ({err})"
            ) from None
        counters = state["counters"]
        self.step = int(counters["step"])  # the update count comes back with the algorithm
        self.episodes = int(counters["episodes"])
        self.update_credit = float(counters["update_credit"])
        self.wall_time = float(counters["wall_time"])
        last_eval = counters.get("last_eval")
        self.last_eval = (float(last_eval[0]), float(last_eval[1])) if last_eval else None
        rng = state["rng"]
        torch.set_rng_state(rng["torch"].cpu())
        if "cuda" in rng and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([t.cpu() for t in rng["cuda"]])
        np.random.set_state(_legacy_numpy_state(rng["numpy"]))
        random.setstate(_python_random_state(rng["python"]))
        self.rng.bit_generator.state = rng["warmup"]
        self.restored = path
        return path

    def check_resume_budget(self) -> None:
        """After :meth:`restore`: refuse a budget below the checkpoint's step (``UserError``)
        and report a run that has nothing left to do (``AlreadyFinished``)."""
        s, step = self.settings, self.step
        if s.total_steps < step:
            raise UserError(
                f"total_steps={s.total_steps} is below step {step} of {self.restored}; a run "
                f"cannot go back: pass total_steps above {step} to train further"
            )
        if s.total_steps == step and summary_step(self.run_dir) == step:
            raise AlreadyFinished(
                f"{self.run_dir} already finished at step {step} (total_steps={step}); nothing "
                f"was changed. To train further: python -m rlzoo.train resume={self.run_dir} "
                f"total_steps=N with N > {step}"
            )

    def latest_checkpoint(self) -> Path | None:
        found = list_checkpoints(self.checkpoint_dir)
        return found[-1] if found else None

    def last_good_checkpoint_note(self) -> str:
        """Where a stopped run can go back to, for a NaN/inf message (every checkpoint written
        is finite, so the newest one is good)."""
        last = self.latest_checkpoint()
        return f"the last good checkpoint is {last}" if last else "no checkpoint was saved"

    def hparams(self) -> dict[str, Any]:
        flat: dict[str, Any] = {}

        def walk(node: Any, prefix: str) -> None:
            if isinstance(node, dict):
                for k, v in node.items():
                    if not str(k).startswith("_"):
                        walk(v, f"{prefix}{k}.")
            elif isinstance(node, (int, float, str, bool)):
                flat[prefix[:-1]] = node
            elif isinstance(node, list):
                flat[prefix[:-1]] = str(node)

        walk(OmegaConf.to_container(self.cfg, resolve=True), "")
        return flat

    def write_summary(self, wall_time: float) -> dict[str, Any]:
        mean, std = self.last_eval if self.last_eval else (float("nan"), float("nan"))
        summary = {
            "algo": str(self.cfg.algo.name),
            "env": str(self.cfg.env.name),
            "seed": self.settings.seed,
            "total_steps": self.step,
            "final_eval_return": mean,
            "final_eval_return_std": std,
            "wall_time_s": wall_time,
            "steps_per_sec": self.step / wall_time if wall_time > 0 else 0.0,
            "buffer_bytes": self.buffer.nbytes,
            "updates": self.updates,
            "episodes": self.episodes,
        }
        summary["warnings"] = list(self.warnings)
        write_atomic(self.run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
        return summary


def check_env_config(cfg: DictConfig) -> None:
    """Fail early, in one line, on an env id that does not exist or an algorithm that does not
    fit the env (multi-agent algorithm on a single-agent env, or the reverse)."""
    if cfg.env.get("kind", "single") == "single":
        try:
            check_env_id(cfg.env.id)
        except ValueError as err:
            raise UserError(str(err)) from None
    try:
        cls = get_class(cfg.algo._target_)
    except Exception:  # noqa: BLE001 - build_algorithm reports a bad _target_ in one line
        return
    multi_agent_env = cfg.env.get("kind", "single") == "multi"
    if isinstance(cls, type) and issubclass(cls, Algorithm) and cls.multi_agent != multi_agent_env:
        raise UserError(misfit_message(cfg, cls.multi_agent))
