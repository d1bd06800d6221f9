"""A trained policy as a plain function of env observations: ``load_policy(RUN_DIR)``.

A run writes ``RUN_DIR/policy.pt`` at every checkpoint and at its end (``rlzoo.store.extras
.policy_record``): the algorithm's network weights (no optimizer, no replay), the run's resolved
config and its env spec. :func:`load_policy` reads it without executing code from it
(``weights_only``), checks the config's ``_target_`` keys as ``rlzoo.evaluate --trust`` does,
rebuilds the algorithm through ``rlzoo.config.build.build_algorithm`` and wraps it in a
:class:`Policy`, which maps raw observations to actions in the env's own units::

    policy = rlzoo.load_policy("runs/Hopper/sac/2026-11-30_12-00-00-s0")
    action = policy.act(obs)                    # numpy [O] or [B, O] -> numpy [A] or [B, A]
    action = policy(torch.as_tensor(batch))     # tensor [B, O] -> tensor [B, A]
    policy.export("hopper_sac.pt2")             # torch.export program, no rlzoo needed to run it

Actions are mapped from the algorithm's ``[-1, 1]`` onto the env's bounds exactly as the training
env adapters do: ``low + (a + 1) / 2 * (high - low)``, clipped to ``[low, high]``.

``policy/file.py`` finds and checks ``policy.pt``; ``policy/export.py`` writes the
``torch.export`` program.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig
from torch import nn

from rlzoo.algos.base import Algorithm, EnvSpec
from rlzoo.config.added_keys import with_current_targets
from rlzoo.config.build import build_algorithm
from rlzoo.config.settings import resolve_device
from rlzoo.config.trust import check_targets
from rlzoo.errors import UserError, one_line
from rlzoo.policy.export import export_policy
from rlzoo.policy.file import policy_path, read_policy_record, read_spec
from rlzoo.store.bounded import plain_config

__all__ = ["Policy", "load_policy"]

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
        example = torch.zeros((2, *self.obs_shape), device=self.device)
        return export_policy(_Exported(self, chunk), example, type(self.algo).__name__,
                             Path(path))


class _Exported(nn.Module):
    """The deterministic policy (or its whole chunk) as one ``forward`` for ``torch.export``:
    ``obs [B, O] -> [B, A]`` (``chunk``: ``[B, H, A]``); multi-agent as :meth:`Policy.chunk`."""

    def __init__(self, policy: Policy, chunk: bool) -> None:
        super().__init__()
        self.policy, self.whole_chunk = policy, chunk  # "policy.": the program's weight names

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        actions = self.policy._chunk(obs, deterministic=True)
        return actions if self.whole_chunk else actions[:, 0]


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
    path = policy_path(Path(run_dir))
    torch_device = resolve_device(str(device))
    record = read_policy_record(path)
    config, weights = with_current_targets(record["config"]), record["weights"]
    check_targets(config, trust, source=str(path),
                  how_to_trust='pass trust=["{module}"] to rlzoo.load_policy')
    try:
        spec = read_spec(record["spec"])
        cfg = plain_config(config)  # its interpolations' cost bounded (rlzoo.store.bounded)
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
        algo.load_state_dict(weights)  # checked first: exactly the built weights
    except (RuntimeError, ValueError, KeyError, TypeError) as err:
        raise UserError(
            f"the weights in {path} do not fit the config saved with them "
            f"({one_line(str(err))}); the file was altered or written by another rlzoo version"
        ) from None
    return Policy(algo, spec, step=record["step"], config=config, deterministic=deterministic)
