"""Building a run from its config: the env and the algorithm (the storage: ``config/storage.py``).

This module is the one reader of ``env.kind`` (``single``: a gymnasium env id; ``multi``: a
PettingZoo family and scenario). The loop (``rlzoo.run.loop``), the evaluator and ``load_policy``
all build through it, so nothing imports the loop to reach a factory.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

import torch
from hydra.errors import InstantiationException
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from rlzoo.algos.base import Algorithm, EnvSpec
from rlzoo.conf.history import BACKEND_BEFORE
from rlzoo.config.added_keys import with_added_keys, with_added_settings, with_current_targets
from rlzoo.config.normalization import attach_normalizers
from rlzoo.config.settings import LOOP_KEYS, ON_POLICY_LOOP, Normalize, Settings, resolve_device
from rlzoo.config.targets import user_frame, user_modules
from rlzoo.config.trust import check_targets
from rlzoo.envs.backend import Backend
from rlzoo.envs.backends import get_backend
from rlzoo.envs.base import VecEnv
from rlzoo.envs.families import get_family
from rlzoo.envs.family import PETTINGZOO
from rlzoo.envs.pettingzoo import make_family_env
from rlzoo.envs.workers import WorkerVecEnv
from rlzoo.errors import EnvFailed, UserError, one_line
from rlzoo.store.bounded import load_yaml
from rlzoo.store.rundir import which_run
from rlzoo.store.writer import refusal

EVAL_SEED_OFFSET = 10_000  # the eval envs' seeds are seed + 10_000 + i
ENV_KINDS = ("single", "multi")


# --------------------------------------------------------------------------- the run dir


def read_run_config(
    run_dir: Path, trust: str | list[str] | tuple[str, ...] = ()
) -> DictConfig:
    """``RUN_DIR/.hydra/config.yaml`` as a DictConfig; one-line errors when it is not a run.

    A run dir may come from elsewhere, so before anything of it is built every ``_target_`` in
    it must name an rlzoo component or a module in ``trust`` (``rlzoo.config.trust.check_targets``):
    otherwise one ``UserError`` line naming the key, the target and how to trust it.
    """
    if not run_dir.is_dir():
        raise UserError(
            f"run directory {run_dir} does not exist; pass a run directory made by rlzoo.train "
            "(runs/<env>/<algo>/<timestamp>-s<seed>)"
        )
    path = run_dir / ".hydra" / "config.yaml"
    if os.path.lexists(path) and (path.is_symlink() or not path.is_file()):
        raise refusal(path, os.lstat(path).st_mode, reading=True)  # a FIFO, a link: not read
    if not path.is_file():
        raise UserError(f"{run_dir} has no .hydra/config.yaml, so it is not an rlzoo run "
                        f"directory; {which_run(run_dir)}")
    try:
        cfg = load_yaml(path)  # size, aliases and interpolations bounded (rlzoo.store.bounded)
        OmegaConf.to_container(cfg, resolve=True)  # a broken interpolation fails here, in one line
        if not isinstance(cfg, DictConfig) or "algo" not in cfg or "env" not in cfg:
            raise ValueError("no algo or env section")
    except Exception as err:  # noqa: BLE001 - omegaconf/yaml raise many kinds
        raise UserError(
            f"cannot read {path} ({type(err).__name__}: {err}); restore the file Hydra wrote"
        ) from None
    cfg = with_current_targets(cfg)  # a moved component's old path (rlzoo.conf.history)
    check_targets(cfg, trust, source=str(path))
    return with_added_settings(cfg)  # keys added after the run was written (rlzoo.conf.history)


# --------------------------------------------------------------------------- the env


def env_kind(cfg: DictConfig) -> str:
    """``env.kind`` of ``cfg`` (``single`` by default); one line for an unknown kind."""
    kind = str(cfg.env.get("kind", "single"))
    if kind not in ENV_KINDS:
        raise UserError(f"env.kind must be one of {', '.join(ENV_KINDS)}, got {kind!r}")
    return kind


def env_kwargs(cfg: DictConfig) -> dict[str, Any]:
    """``env.kwargs`` as a plain dict (passed to the env constructor)."""
    kwargs = cfg.env.get("kwargs")
    return dict(OmegaConf.to_container(kwargs, resolve=True)) if kwargs else {}


def env_backend(cfg: DictConfig) -> Any:
    """``env.backend`` of ``cfg``: a backend's name, or a node with a ``_target_`` (a backend or
    family of your own). An env config without the key is a run dir written before backends
    existed, which ran on what ``rlzoo.conf.history.BACKEND_BEFORE`` records for its kind."""
    if "backend" in cfg.env:
        return cfg.env.backend
    return BACKEND_BEFORE[env_kind(cfg)]


def run_device(cfg: DictConfig) -> torch.device:
    """The run's device, for a backend that keeps its worlds there (``on_run_device``)."""
    return resolve_device(str(cfg.get("device", "cpu")))


def single_backend(cfg: DictConfig) -> Backend:
    """The ``rlzoo.envs.backend.Backend`` of ``cfg``'s single-agent env: ``env.backend`` names one
    of ``rlzoo.envs.backends.BACKENDS`` or is a node with a ``_target_`` (docs/extending.md);
    one line for an unknown name or a target that is no ``Backend``."""
    backend = env_backend(cfg)
    try:
        if isinstance(backend, DictConfig):  # a Backend of your own
            backend = instantiate(backend)
        return get_backend(backend)
    except InstantiationException as err:
        raise UserError(f"cannot make env={cfg.env.name}: {one_line(err)}") from None
    except (ValueError, TypeError) as err:
        raise UserError(str(err)) from None


def make_env(cfg: DictConfig, num_envs: int, seed: int, **extra: Any) -> VecEnv:
    """The vector env of the ``env`` config: ``num_envs`` copies, env ``e`` seeded ``seed + e``
    at the first reset; ``extra`` goes to each env's constructor too (e.g. ``render_mode``)."""
    if env_kind(cfg) == "single":
        return make_backend_env(cfg, num_envs, seed, **extra)
    backend = str(env_backend(cfg))
    family = cfg.env.family  # a family's name (rlzoo.envs.families) or a node with a _target_
    try:
        if isinstance(family, DictConfig):  # a Family of your own (docs/extending.md)
            family = instantiate(family)
        if backend != PETTINGZOO and get_family(family).on_run_device:  # VMAS: on the run's
            extra["device"] = run_device(cfg)  # device
        return make_family_env(family, str(cfg.env.scenario), num_envs, seed, backend,
                               **env_kwargs(cfg), **extra)
    except InstantiationException as err:
        raise UserError(f"cannot make env={cfg.env.name}: {one_line(err)}") from None
    except (ValueError, TypeError) as err:
        raise UserError(f"cannot make env={cfg.env.name}: {err}") from None
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - the env's own constructor failed
        raise env_failed(cfg, err) from None


def make_backend_env(cfg: DictConfig, num_envs: int, seed: int, **extra: Any) -> VecEnv:
    """:func:`make_env` of a single-agent env: the task ``env.id`` made by its backend
    (:func:`single_backend`), on the run's device for one that keeps its worlds there."""
    backend = single_backend(cfg)
    if backend.on_run_device:
        extra["device"] = run_device(cfg)
    try:
        return backend.make(str(cfg.env.id), num_envs, seed, **env_kwargs(cfg), **extra)
    except ValueError as err:  # the backend's one line (rlzoo.envs.backend.Backend.make)
        raise UserError(str(err)) from None
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - the env's own constructor failed
        raise env_failed(cfg, err) from None


def env_failed(cfg: DictConfig, err: Exception) -> EnvFailed:
    """The one line for an env whose own constructor raised ``err`` (in this process or in an
    env worker, which sends this line to the trainer): its cause, without the traceback."""
    return EnvFailed(f"cannot make env={cfg.env.name}: its constructor raised "
                     f"{type(err).__name__}: {one_line(err, 300)}; fix the env (or env.kwargs)",
                     err)


def make_train_env(cfg: DictConfig, s: Settings, seed: int) -> VecEnv:
    """A seed's training envs: :func:`make_env`'s, stepped by this process and ``s.env_workers``
    worker processes at once when that is above 0 (same seeds, same numbers; rlzoo.envs.workers)."""
    if s.env_workers == 0:
        return make_env(cfg, s.num_envs, seed)
    return WorkerVecEnv(lambda n, first: make_env(cfg, n, first), s.num_envs, seed,
                        s.env_workers, timeout=s.env_timeout_s)


def env_spec(env: VecEnv) -> EnvSpec:
    """What an algorithm needs to know about ``env``: sizes, agents and the env's own action
    bounds (agent-major for a multi-agent env, 0 on padding)."""
    low = tuple(float(x) for x in env.action_low.reshape(-1))
    high = tuple(float(x) for x in env.action_high.reshape(-1))
    limit = getattr(env, "max_episode_steps", None)
    limit = int(limit) if limit is not None else None
    if not env.multi_agent:
        return EnvSpec(obs_dim=env.obs_shape[-1], act_dim=env.act_shape[-1],
                       action_low=low, action_high=high, max_episode_steps=limit)
    return EnvSpec(
        obs_dim=env.obs_shape[-1], act_dim=env.act_shape[-1], n_agents=env.n_agents,
        state_dim=env.state_dim, act_dims=tuple(int(a) for a in env.act_mask.sum(axis=-1)),
        action_low=low, action_high=high, max_episode_steps=limit,
    )


def probe_spec(cfg: DictConfig) -> EnvSpec:
    """The ``EnvSpec`` of ``cfg``'s env, from one probe env closed at once."""
    env = make_env(cfg, 1, 0)
    try:
        return env_spec(env)
    finally:
        env.close()


def check_spec(spec: EnvSpec, env_name: str) -> None:
    """Refuse an env whose observations or actions have no entries, in one line."""
    for what, size in (("observation", spec.obs_dim), ("action", spec.act_dim)):
        if int(size) <= 0:
            raise UserError(
                f"env={env_name} has an empty {what} space (size {size}); rlzoo needs a Box "
                f"{what} with at least one entry"
            )


# --------------------------------------------------------------------------- the algorithm


def misfit_message(cfg: DictConfig, multi_agent_algo: bool) -> str:
    """The one line for a multi-agent algorithm on a single-agent env, or the reverse."""
    if multi_agent_algo:
        return (f"algo={cfg.algo.name} is a multi-agent algorithm and env={cfg.env.name} is not; "
                "use a multi-agent env (env=mpe/simple_spread, env=mamujoco/HalfCheetah-2x3, ...)"
                " or a single-agent algo (algo=sac, algo=td3, ...)")
    return (f"algo={cfg.algo.name} is a single-agent algorithm and env={cfg.env.name} is "
            "multi-agent; use a multi-agent algo (algo=maddpg, algo=hasac, algo=coma) or a "
            "single-agent env (e.g. env=Hopper)")


def run_updates(cfg: DictConfig) -> int:
    """The updates a run is counted to make, ``int(total_steps x algo.utd)``, its random warm-up's
    env steps included, as SimbaV2's and FlashSAC's code count their learning-rate horizon
    (``num_interaction_steps x updates_per_interaction_step``); passed as ``run_updates`` to an
    algorithm whose constructor takes it. 1 for an on-policy run (no ``algo.utd``)."""
    return max(1, int(int(cfg.total_steps) * float(cfg.algo.get("utd", ON_POLICY_LOOP["utd"]))))


def resolved_node(node: Any) -> Any:
    """``node`` (a config node, or None) with its interpolations resolved against its root,
    detached: what Hydra instantiates as a keyword argument."""
    if not isinstance(node, DictConfig):
        return node
    return OmegaConf.create(OmegaConf.to_container(node, resolve=True))


def build_algorithm(cfg: DictConfig, spec: EnvSpec, device: torch.device,
                    normalize: Normalize | None = None) -> Algorithm:
    """Instantiate ``cfg.algo`` with the critic and tuner groups, directly on ``device``, with
    the normalizers ``normalize`` (the run's ``Settings.normalize``; None: read from ``cfg``)."""
    cfg = with_added_keys(cfg)  # a run dir written before a key existed (rlzoo.config.added_keys)
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
    # resolved first: a key may interpolate a root key (flashsac's noise_envs: ${num_envs};
    # stac's per-task critic.pessimism: ${stac.task.beta}), which a detached node cannot reach
    resolved = OmegaConf.create(OmegaConf.to_container(cfg.algo, resolve=True))
    algo_cfg = OmegaConf.masked_copy(resolved, [k for k in resolved if k not in LOOP_KEYS])
    check_critic_kind(cfg, cls)
    extra: dict[str, Any] = {"spec": spec, "critic": resolved_node(cfg.critic)}
    if "run_updates" in inspect.signature(cls).parameters:  # a schedule over the run's budget
        extra["run_updates"] = run_updates(cfg)
    tuner = inspect.signature(cls).parameters.get("tuner")
    if cfg.get("tuner"):
        if tuner is None:
            raise UserError(
                f"algo={cfg.algo.name} has no entropy temperature to tune; drop the tuner "
                "override (or pass tuner=none)"
            )
        extra["tuner"] = resolved_node(cfg.tuner)
    elif tuner is not None and tuner.default is inspect.Parameter.empty:
        raise UserError(f"algo={cfg.algo.name} needs an entropy temperature: leave tuner out "
                        "(the algorithm's own) or pass tuner=fixed, not tuner=none")
    try:
        with torch.device(device):
            algo = instantiate(algo_cfg, **extra)
    except Exception as err:  # noqa: BLE001 - hydra wraps constructor errors
        cause: BaseException = err
        while cause.__cause__ is not None:
            cause = cause.__cause__
        if isinstance(cause, MemoryError) or (
                isinstance(cause, RuntimeError) and "alloc" in str(cause).lower()):
            raise UserError(
                f"not enough memory on {device} to build algo={cfg.algo.name}'s networks; "
                "lower the hidden sizes (algo.actor.hidden, critic.hidden) or critic.n"
            ) from None
        if isinstance(cause, OSError):  # torch imports what needs a temporary file (dynamo)
            raise UserError(f"cannot build algo={cfg.algo.name}: {type(cause).__name__}: "
                            f"{one_line(cause, 160)}; free space in the temporary directory or "
                            "point TMPDIR elsewhere (a full disk, or a file size limit)") from None
        # the user's own constructor raised: name its line (any exception: it is their code)
        where = user_frame(err, user_modules(cfg))
        if where is not None:
            raise UserError(
                f"cannot build algo={cfg.algo.name}: {type(cause).__name__}: "
                f"{one_line(cause, 160)} (raised at {where}); fix that constructor or the "
                "keys passed to it"
            ) from None
        if isinstance(cause, (ValueError, TypeError)):
            raise UserError(f"cannot build algo={cfg.algo.name}: {cause}") from None
        if isinstance(err, InstantiationException) and cause is err:  # Hydra refused the target
            raise UserError(f"cannot build algo={cfg.algo.name}: {one_line(err)}") from None
        raise
    attach_normalizers(algo, cfg, spec, normalize)  # normalize.*: nothing unless asked for
    return algo.to(device)


def check_critic_kind(cfg: DictConfig, cls: type[Algorithm]) -> None:
    """Refuse, before anything is built, a ``critic=`` kind the algorithm class cannot train (the
    kinds take different constructor arguments, so building first would fail less clearly)."""
    target = (cfg.get("critic") or {}).get("_target_")
    try:
        critic = get_class(target) if target else None
    except Exception:  # noqa: BLE001 - an unimportable target is reported where it is built
        return
    if isinstance(critic, type) and not issubclass(critic, cls.supported_critics):
        raise UserError(f"cannot build algo={cfg.algo.name}: {cls.unsupported_critic(critic)}")


def check_env_config(cfg: DictConfig) -> None:
    """Fail early, in one line, on an env id that does not exist or an algorithm that does not
    fit the env (multi-agent algorithm on a single-agent env, or the reverse)."""
    kind = env_kind(cfg)
    if kind == "single":
        try:
            single_backend(cfg).check(str(cfg.env.id))
        except ValueError as err:
            raise UserError(str(err)) from None
    try:
        cls = get_class(cfg.algo._target_)
    except Exception:  # noqa: BLE001 - build_algorithm reports a bad _target_ in one line
        return
    multi_agent_env = kind == "multi"
    if isinstance(cls, type) and issubclass(cls, Algorithm) and cls.multi_agent != multi_agent_env:
        raise UserError(misfit_message(cfg, cls.multi_agent))
