"""A trained policy as a plain function of env observations: ``load_policy(RUN_DIR)``.

A run writes ``RUN_DIR/policy.pt`` at every checkpoint and at its end (``rlzoo.run.state
.policy_record``): the algorithm's network weights (no optimizer, no replay), the run's resolved
config and its env spec. :func:`load_policy` reads it without executing code from it
(``weights_only``), checks the config's ``_target_`` keys as ``rlzoo.evaluate --trust`` does,
rebuilds the algorithm through ``rlzoo.run.build.build_algorithm`` and wraps it in a
:class:`Policy`, which maps raw observations to actions in the env's own units::

    policy = rlzoo.load_policy("runs/Hopper/sac/2026-11-30_12-00-00-s0")
    action = policy.act(obs)                    # numpy [O] or [B, O] -> numpy [A] or [B, A]
    action = policy(torch.as_tensor(batch))     # tensor [B, O] -> tensor [B, A]
    policy.export("hopper_sac.pt2")             # torch.export program, no rlzoo needed to run it

Actions are mapped from the algorithm's ``[-1, 1]`` onto the env's bounds exactly as the training
env adapters do: ``low + (a + 1) / 2 * (high - low)``, clipped to ``[low, high]``.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.export.graph_signature import InputKind

from rlzoo.algos.base import Algorithm, EnvSpec
from rlzoo.errors import UserError, one_line
from rlzoo.run.build import build_algorithm
from rlzoo.run.checkpoint import (
    CheckpointError,
    list_checkpoints,
    load_checkpoint,
)
from rlzoo.run.finite import describe_nonfinite, nonfinite_entries
from rlzoo.run.group import read_group
from rlzoo.run.rundir import RunLock
from rlzoo.run.settings import resolve_device
from rlzoo.run.state import POLICY_FILE, POLICY_FORMAT
from rlzoo.run.trust import check_targets

__all__ = ["Policy", "load_policy"]

RECORD_KEYS = ("format", "step", "config", "spec", "weights")


class Policy(nn.Module):
    """A trained algorithm's policy, from raw env observations to actions in the env's units.

    Args:
        algo: the algorithm (its ``act(obs, deterministic)`` gives ``[-1, 1]`` actions).
        spec: the env spec it was built for (sizes and the env's own action bounds).
        step: the env step its weights are from.
        config: the run's resolved config (plain dict).
        deterministic: act with the policy's mode (default) or sample from it.

    Attributes:
        spec, step, config, deterministic: as given.
        horizon: H, env actions per decision (``algo.action_horizon``; 1 unless the run used
            action chunks, e.g. ``critic=action_sequence``).
        multi_agent: whether observations are ``[B, N, O]``.
        obs_shape: ``(O,)`` or ``(N, O)``; act_shape: ``(A,)`` or ``(N, A)``.

    Shapes: single-agent ``obs [B, O] -> action [B, A]``; multi-agent ``obs [B, N, O] -> action
    [B, N, A]`` (agents padded to the largest obs/action size, as the env adapter pads them;
    padding action entries are 0). With action chunks (H > 1), ``forward`` returns the chunk's
    first action and :meth:`chunk` the whole chunk ``[B, H, A]``; a controller that wants the
    behaviour of training executes the chunk open-loop, H env steps per call of ``chunk``.
    Calling ``forward`` every step instead re-plans at every step (receding horizon).
    """

    def __init__(
        self, algo: Algorithm, spec: EnvSpec, step: int = 0, config: dict[str, Any] | None = None,
        deterministic: bool = True,
    ) -> None:
        super().__init__()
        self.algo = algo
        self.spec, self.step, self.config = spec, int(step), dict(config or {})
        self.deterministic = bool(deterministic)
        self.horizon = int(algo.action_horizon)
        self.multi_agent = spec.multi_agent
        if self.multi_agent:
            self.obs_shape: tuple[int, ...] = (spec.n_agents, spec.obs_dim)
            self.act_shape: tuple[int, ...] = (spec.n_agents, spec.act_dim)
        else:
            self.obs_shape, self.act_shape = (spec.obs_dim,), (spec.act_dim,)
        low, high = _bounds(spec, self.act_shape)
        self.register_buffer("action_low", low.to(_device_of(algo)), persistent=False)
        self.register_buffer("action_high", high.to(_device_of(algo)), persistent=False)
        self.requires_grad_(False)
        self.eval()

    @property
    def device(self) -> torch.device:
        return self.action_low.device

    def extra_repr(self) -> str:
        return (f"obs_shape={self.obs_shape}, act_shape={self.act_shape}, horizon={self.horizon}, "
                f"step={self.step}, deterministic={self.deterministic}")

    # ------------------------------------------------------------------ tensors
    def _check_obs(self, obs: torch.Tensor) -> torch.Tensor:
        want = ", ".join(["B", *map(str, self.obs_shape)])
        if not isinstance(obs, torch.Tensor):
            raise UserError(f"Policy takes a torch tensor [{want}], got {type(obs).__name__}; "
                            "use policy.act(...) for numpy arrays")
        if obs.dim() != len(self.obs_shape) + 1 or tuple(obs.shape[1:]) != self.obs_shape:
            raise UserError(f"observations must have shape [{want}], got {list(obs.shape)}; "
                            "pass a batch of this env's observations")
        return obs.to(device=self.action_low.device, dtype=torch.float32)

    def _chunk(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        obs = self._check_obs(obs)
        action = self.algo.act(obs, deterministic=deterministic)  # [B, H*A] or [B, N, H*A]
        action = action.unflatten(-1, (self.horizon, self.spec.act_dim))  # [B, (N,) H, A]
        if self.multi_agent:
            action = action.movedim(-2, 1)  # [B, H, N, A]
        return self.to_env_units(action)

    def to_env_units(self, action: torch.Tensor) -> torch.Tensor:
        """``[-1, 1]`` actions ``[..., *act_shape]`` -> the env's units, as the env adapters map
        them: ``low + (a + 1) / 2 * (high - low)``, clipped to ``[low, high]`` (padding: 0)."""
        action = action.clamp(-1.0, 1.0)
        low, high = self.action_low, self.action_high
        scaled = low + (action + 1.0) * 0.5 * (high - low)
        return torch.maximum(torch.minimum(scaled, high), low)

    def chunk(self, obs: torch.Tensor) -> torch.Tensor:
        """The whole action chunk in env units: ``obs [B, O] -> [B, H, A]`` (multi-agent
        ``[B, N, O] -> [B, H, N, A]``); action ``h`` is for the ``h``-th env step from ``obs``
        (executed open-loop in training). H = ``self.horizon`` (1 without action chunks)."""
        return self._chunk(obs, self.deterministic)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs [B, O] -> action [B, A]`` (multi-agent ``[B, N, O] -> [B, N, A]``) in the env's
        units: the first action of the chunk when H > 1. Deterministic (the policy's mode) unless
        built with ``deterministic=False``."""
        return self._chunk(obs, self.deterministic)[:, 0]

    # ------------------------------------------------------------------ numpy
    def act(self, obs: Any) -> np.ndarray:
        """Numpy convenience: ``obs`` ``[O]`` or ``[B, O]`` (multi-agent ``[N, O]`` or
        ``[B, N, O]``; any array-like of numbers) -> float32 actions ``[A]`` or ``[B, A]``
        (``[N, A]`` or ``[B, N, A]``) in the env's units, without gradient."""
        array = np.asarray(obs, dtype=np.float32)
        single = array.ndim == len(self.obs_shape)
        batch = torch.from_numpy(array[None] if single else array)
        with torch.no_grad():
            action = self(batch).cpu().numpy()
        return action[0] if single else action

    # ------------------------------------------------------------------ export
    def export(self, path: str | Path, chunk: bool = False) -> Path:
        """Write the deterministic policy as a ``torch.export`` program (``torch.export.save``;
        name it ``*.pt2``) with a dynamic batch dimension, and return its path.

        Load it anywhere with only torch installed: ``torch.export.load(path).module()(obs)``
        maps ``obs [B, O]`` float32 (multi-agent ``[B, N, O]``) to actions in the env's units
        ``[B, A]`` (``[B, N, A]``), or with ``chunk=True`` to the whole chunk ``[B, H, A]``. The
        program runs on the device this policy is on. The file is written atomically. A name
        ending in ``.onnx`` is refused (``UserError``): the file would not be ONNX.
        """
        path = Path(path)
        if path.suffix.lower() == ".onnx":  # a torch.export archive is not ONNX: say so
            raise UserError(
                f"{path.name}: Policy.export writes a torch.export program, not ONNX (rlzoo has "
                f"no ONNX exporter); name the file {path.with_suffix('.pt2').name}"
            )
        if path.is_dir():
            raise UserError(f"{path} is a directory; pass a file name such as policy.pt2")
        if not path.parent.is_dir():
            raise UserError(f"directory {path.parent} does not exist; create it first")
        module = _Exported(self, chunk).eval()
        example = torch.zeros((2, *self.obs_shape), device=self.device)
        program = _export(module, example, type(self.algo).__name__)
        # An algorithm holds critics and target networks that act() never reads: export again
        # without them, so the program carries only the policy's weights.
        unused = _unused_state(program)
        if unused:
            with _without(module, unused):
                program = _export(module, example, type(self.algo).__name__)
        # Serialized in memory first (the program holds only the policy's weights): torch's zip
        # writer, given a file that fails mid-write (full disk, read-only file system), raises
        # a bare RuntimeError and may abort the process as it closes the archive; Python's own
        # file I/O below fails with an OSError that says why.
        buffer = io.BytesIO()
        torch.export.save(program, buffer)
        temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp.pt2")
        try:
            with open(temp, "wb") as f:
                f.write(buffer.getbuffer())
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp, path)
        except OSError as err:
            with contextlib.suppress(OSError):
                temp.unlink(missing_ok=True)
            raise UserError(f"cannot write {path} ({err.strerror or err}; it needs "
                            f"{buffer.getbuffer().nbytes:,} bytes); check the directory's "
                            "permissions and free space; no file was left") from None
        return path


class _Exported(nn.Module):
    """The deterministic policy (or its chunk) as one ``forward`` for ``torch.export``."""

    def __init__(self, policy: Policy, chunk: bool) -> None:
        super().__init__()
        self.policy, self.whole_chunk = policy, chunk

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        actions = self.policy._chunk(obs, deterministic=True)
        return actions if self.whole_chunk else actions[:, 0]


def _export(module: nn.Module, example: torch.Tensor, name: str) -> torch.export.ExportedProgram:
    """``torch.export`` of ``module`` on ``example [2, ...]`` with a dynamic batch dimension."""
    batch = torch.export.Dim("batch", min=1, max=2**31 - 2)
    try:
        return torch.export.export(module, (example,), dynamic_shapes=({0: batch},))
    except Exception as err:  # noqa: BLE001 - torch.export raises many kinds
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(
            f"{name}.act cannot be exported with torch.export ({type(err).__name__}: "
            f"{one_line(first)}); its act() must be traceable (no Python branching on tensor "
            "values, no .item() or .numpy())"
        ) from None


def _unused_state(program: torch.export.ExportedProgram) -> list[str]:
    """The names of the parameters and buffers ``program``'s graph never reads."""
    used = {node.name for node in program.graph.nodes if node.op == "placeholder" and node.users}
    kinds = (InputKind.PARAMETER, InputKind.BUFFER)
    return [spec.target for spec in program.graph_signature.input_specs
            if spec.kind in kinds and spec.target is not None
            and getattr(spec.arg, "name", None) not in used]


@contextlib.contextmanager
def _without(module: nn.Module, names: list[str]) -> Iterator[None]:
    """Hide the parameters and buffers ``names`` of ``module`` (dotted paths) while inside."""
    hidden: list[tuple[dict[str, Any], str, Any]] = []
    try:
        for name in names:
            owner_name, _, attr = name.rpartition(".")
            owner = module.get_submodule(owner_name)
            for table in (owner._parameters, owner._buffers):
                if table.get(attr) is not None:
                    hidden.append((table, attr, table[attr]))
                    table[attr] = None
        yield
    finally:
        for table, attr, value in reversed(hidden):
            table[attr] = value


def _device_of(module: nn.Module) -> torch.device:
    for tensor in (*module.parameters(), *module.buffers()):
        return tensor.device
    return torch.device("cpu")


def _bounds(spec: EnvSpec, act_shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """The env's action bounds ``act_shape`` (float32): ``[-1, 1]`` where unknown or not finite
    (the identity, as gymnasium's ``RescaleAction`` leaves unbounded entries), ``0`` on a
    multi-agent env's padding."""
    size = math.prod(act_shape)
    if spec.action_low:
        low = torch.tensor([float(x) for x in spec.action_low], dtype=torch.float64)
        high = torch.tensor([float(x) for x in spec.action_high], dtype=torch.float64)
    else:
        low, high = -torch.ones(size, dtype=torch.float64), torch.ones(size, dtype=torch.float64)
    finite = torch.isfinite(low) & torch.isfinite(high)
    low, high = torch.where(finite, low, -1.0), torch.where(finite, high, 1.0)
    low, high = low.reshape(act_shape), high.reshape(act_shape)
    if spec.multi_agent:
        dims = [int(d) for d in spec.act_dims] or [spec.act_dim] * spec.n_agents
        real = torch.arange(spec.act_dim)[None, :] < torch.tensor(dims)[:, None]
        low, high = low * real, high * real
    return low.float(), high.float()


# --------------------------------------------------------------------------- loading


def load_policy(
    run_dir: str | Path, device: str = "cpu", deterministic: bool = True,
    trust: Sequence[str] = (),
) -> Policy:
    """The policy a run saved in ``RUN_DIR/policy.pt``, ready to act in the env's units.

    Args:
        run_dir: a run directory made by ``rlzoo.train`` (or the path of a ``policy.pt``).
        device: ``cpu`` (default), ``cuda``, ``cuda:<i>`` or ``auto``.
        deterministic: act with the policy's mode (default) or sample from it.
        trust: modules whose classes the run's config may build besides rlzoo's components
            (as ``python -m rlzoo.evaluate --trust``; e.g. ``["examples"]``).

    Returns:
        A :class:`Policy` in eval mode without gradients; ``policy.step`` is the env step its
        weights were saved at (the newest checkpoint, or the end of the run).

    Raises:
        UserError: one line, for a missing run dir or ``policy.pt``, an unreadable or unknown
            file, a config that builds code outside rlzoo and ``trust``, NaN/inf weights, or
            weights that do not fit the config.
    """
    path = _policy_path(Path(run_dir))
    torch_device = resolve_device(str(device))
    record = _read_record(path)
    config, weights = record["config"], record["weights"]
    check_targets(config, trust, source=str(path),
                  how_to_trust='pass trust=["{module}"] to rlzoo.load_policy')
    try:
        spec = read_spec(record["spec"])
        cfg = OmegaConf.create(config)
        if not isinstance(cfg.get("algo"), DictConfig) or "_target_" not in cfg.algo:
            raise ValueError("no algo._target_")
    except Exception as err:  # noqa: BLE001 - omegaconf and the dataclass raise many kinds
        raise UserError(f"{path} holds a config or env spec rlzoo cannot read "
                        f"({type(err).__name__}: {one_line(str(err))}); it is not a policy "
                        "file written by rlzoo.train") from None
    try:
        algo = build_algorithm(cfg, spec, torch_device)
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - a constructor given values it cannot take
        raise UserError(f"{path} holds a config rlzoo cannot build a policy from "
                        f"({type(err).__name__}: {one_line(str(err), 120)}); it is not a policy "
                        "file written by rlzoo.train") from None
    try:
        nn.Module.load_state_dict(algo, weights)
    except (RuntimeError, ValueError, KeyError, TypeError) as err:
        raise UserError(
            f"the weights in {path} do not fit the config saved with them "
            f"({one_line(str(err))}); the file was altered or written by another rlzoo version"
        ) from None
    return Policy(algo, spec, step=record["step"], config=config, deterministic=deterministic)


SPEC_INTS = {"obs_dim": 1, "act_dim": 1, "n_agents": 1, "state_dim": 0}  # name: least value
MAX_SPEC_SIZE = 1 << 24  # no env rlzoo trains has observations or agents near this


def read_spec(record: Any) -> EnvSpec:
    """The ``spec`` of a ``policy.pt`` as an :class:`EnvSpec`, checked as data: a dict of
    EnvSpec's fields only; sizes are integers in their range (``obs_dim``, ``act_dim``,
    ``n_agents`` >= 1, ``state_dim`` >= 0, all below 2**24); ``act_dims`` one integer in
    ``1..act_dim`` per agent (or none); bounds finite-or-infinite floats with ``low <= high``.
    ``ValueError`` naming the field otherwise."""
    if not isinstance(record, dict):
        raise ValueError("the spec is not a mapping")
    unknown = set(record) - {f for f in EnvSpec.__dataclass_fields__}
    if unknown:
        raise ValueError(f"unknown spec fields {sorted(map(str, unknown))}")
    values: dict[str, Any] = {}
    for name, least in SPEC_INTS.items():
        value = record.get(name, least if name in ("n_agents", "state_dim") else None)
        if not isinstance(value, int) or isinstance(value, bool) \
                or not least <= value < MAX_SPEC_SIZE:
            raise ValueError(f"spec {name}={value!r} is not an integer in [{least}, "
                             f"{MAX_SPEC_SIZE})")
        values[name] = value
    dims = record.get("act_dims", ())
    if not isinstance(dims, (list, tuple)) or any(
            not isinstance(d, int) or isinstance(d, bool) or not 1 <= d <= values["act_dim"]
            for d in dims) or (dims and len(dims) != values["n_agents"]):
        raise ValueError(f"spec act_dims={dims!r} is not one size in [1, act_dim] per agent")
    values["act_dims"] = tuple(dims)
    for name in ("action_low", "action_high"):
        bound = record.get(name, ())
        if not isinstance(bound, (list, tuple)) or len(bound) > MAX_SPEC_SIZE or any(
                not isinstance(x, (int, float)) or isinstance(x, bool) or math.isnan(x)
                for x in bound):
            raise ValueError(f"spec {name} is not a list of numbers")
        values[name] = tuple(float(x) for x in bound)
    if any(lo > hi for lo, hi in zip(values["action_low"], values["action_high"])):
        raise ValueError("spec action_low exceeds action_high")
    return EnvSpec(**values)


def _policy_path(run_dir: Path) -> Path:
    if run_dir.is_file():
        return run_dir
    if run_dir.exists() and not run_dir.is_dir():  # a FIFO, a device (/dev/zero), a socket
        raise UserError(
            f"{run_dir} is not a regular file or a directory (a FIFO, device or socket), so it "
            "is not read; pass a run directory made by rlzoo.train or the path of its policy.pt"
        )
    if not run_dir.is_dir():
        raise UserError(
            f"run directory {run_dir} does not exist; pass a run directory made by rlzoo.train "
            "(runs/<env>/<algo>/<timestamp>-s<seed>)"
        )
    path = run_dir / POLICY_FILE
    if not path.exists() and not (run_dir / ".hydra" / "config.yaml").is_file():
        raise UserError(
            f"{run_dir} has no .hydra/config.yaml and no {POLICY_FILE}, so it is not an rlzoo run "
            "directory; pass the directory rlzoo.train wrote (it holds .hydra/, checkpoints/ "
            f"and {POLICY_FILE})"
        )
    if not path.exists():
        raise UserError(_no_policy(run_dir))
    return path


def _no_policy(run_dir: Path) -> str:
    """Why ``run_dir`` has no ``policy.pt``, and what works instead: its run (or its seed
    group, whose checkpoints are in the group's first run dir) is still training towards its
    first checkpoint, or it has checkpoints (``rlzoo.evaluate`` reads them), or neither."""
    try:
        group = read_group(run_dir)
    except UserError:
        group = None
    home = group.home if group is not None else run_dir
    owner = RunLock.owner(home) or RunLock.owner(run_dir)
    if owner is not None:
        return (f"{run_dir} has no {POLICY_FILE} yet: its run is still training (pid {owner}) "
                f"and writes {POLICY_FILE} at its first checkpoint (every checkpoint.every steps) "
                "and at its end; load it again once the first checkpoint is written")
    if list_checkpoints(home / "checkpoints"):
        return (f"{run_dir} has no {POLICY_FILE} (runs made before this rlzoo version have "
                f"none); evaluate its checkpoints with python -m rlzoo.evaluate {run_dir}")
    return (f"{run_dir} has no {POLICY_FILE} and its run has no checkpoint: it stopped before "
            "its first checkpoint, so there is no trained policy; train it again")


def _read_record(path: Path) -> dict[str, Any]:
    """``policy.pt``'s contents, checked: loadable, rlzoo's, a known format, finite weights."""
    try:
        record = load_checkpoint(path, map_location="cpu")
    except CheckpointError as err:
        raise UserError(f"{one_line(str(err))}; the file is damaged or was not written by "
                        "rlzoo.train (a run rewrites it at every checkpoint; python -m "
                        "rlzoo.evaluate RUN_DIR reads the checkpoints instead)") from None
    fmt = record.get("format")
    if fmt != POLICY_FORMAT:
        raise UserError(f"{path} has format {fmt!r}, which this rlzoo does not know (it reads "
                        f"format {POLICY_FORMAT}); load it with the rlzoo version that wrote it")
    missing = [k for k in RECORD_KEYS if k not in record]
    bad_types = not (isinstance(record.get("step"), int) and isinstance(record.get("config"), dict)
                     and isinstance(record.get("spec"), dict)
                     and isinstance(record.get("weights"), dict))
    if missing or bad_types:
        what = f"no {', '.join(missing)}" if missing else "entries of the wrong type"
        raise UserError(f"{path} is not a policy file written by rlzoo.train ({what}); pass a "
                        "run directory whose policy.pt rlzoo wrote")
    bad = nonfinite_entries({"weights": record["weights"]}, sections=None)
    if bad:
        raise UserError(f"{path} holds NaN or inf in {describe_nonfinite(bad)}; it cannot act; "
                        "evaluate an earlier checkpoint with python -m rlzoo.evaluate RUN_DIR "
                        "--checkpoint PATH")
    return record
