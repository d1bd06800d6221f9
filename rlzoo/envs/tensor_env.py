"""What the multi-agent envs that keep their worlds as tensors share (``env.backend=batched`` MPE,
``rlzoo.envs.mpe_batched``; ``env=vmas/<scenario>``, ``rlzoo.envs.vmas_batched``): the step as
tensors (:class:`TensorStep`), and the two ways the rest of rlzoo takes it (:class:`TensorVecEnv`).

* :meth:`TensorVecEnv.step_device` is the trainer's data path (``rlzoo.run.collect``, and the
  evaluation's ``run_episodes(tensors=True)``): the observations ``[E, N, O]`` and the global
  state ``[E, S]`` stay float32 tensors on the env's device, to the policy, the normalizers and
  the replay; the rewards, each agent's reward and the flags, which the loop counts on the host
  (episode returns, transitions, the replay's bookkeeping), come back as numpy, read from the
  device in one copy.
* :meth:`TensorVecEnv.step` is the contract every backend speaks: the same step with the
  observations and the state copied to the host as numpy as well. The numbers are the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlzoo.envs.base import StepResult, VecEnv

__all__ = ["TensorStep", "TensorVecEnv"]


@dataclass
class TensorStep:
    """One vector step as tensors on the env's device (shapes as :class:`StepResult`'s).

    Attributes:
        obs: ``[E, N, obs_dim]``. state: ``[E, S]``. agent_reward: ``[E, N]``.
        reward: ``[E]`` mean over agents. terminated, truncated, reset_step: ``[E]`` bool.
    """

    obs: torch.Tensor
    state: torch.Tensor
    reward: torch.Tensor
    agent_reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    reset_step: torch.Tensor


class TensorVecEnv(VecEnv):
    """A multi-agent :class:`VecEnv` whose worlds are tensors on ``self.device``, stepped by
    :meth:`step_tensors` (module docstring). Subclasses set ``device`` and ``_pending`` (``[E]``
    bool on the device: the episodes that ended and reset at the next call) and implement
    :meth:`step_tensors`."""

    keeps_tensors = True  # the trainer steps it with step_device (rlzoo.run.collect)
    device: torch.device
    _pending: torch.Tensor

    def step_tensors(self, action: torch.Tensor,
                     active: torch.Tensor | None = None) -> TensorStep:
        """Step every env (or those where ``active [E]``) with ``action [E, N, act_dim]`` in
        ``[-1, 1]``, with next-step autoreset; everything as tensors on the device."""
        raise NotImplementedError

    def step(self, action: np.ndarray, active: np.ndarray | None = None) -> StepResult:
        """:meth:`step_device` with the observations and the state as numpy float32 too (the
        contract every backend speaks)."""
        result = self.step_device(action, active)
        result.obs, result.state = _host(result.obs), _host(result.state)
        return result

    def step_device(self, action: np.ndarray | torch.Tensor,
                    active: np.ndarray | None = None) -> StepResult:
        """:meth:`step` with the observations ``[E, N, obs_dim]`` and the global state ``[E, S]``
        left where the worlds are, float32 tensors on the env's device (the trainer's data path:
        to the policy, the normalizers and the replay without a host copy). The team reward
        ``[E]``, each agent's ``[E, N]``, ``terminated``, ``truncated`` and ``reset_step`` come
        back as numpy (the loop's counters read them), from one device-to-host copy."""
        a = action if torch.is_tensor(action) else torch.as_tensor(np.asarray(action))
        act = None if active is None else torch.as_tensor(np.asarray(active))
        s = self.step_tensors(a.to(self.device), None if act is None else act.to(self.device))
        flags = torch.stack([s.terminated, s.truncated, s.reset_step, self._pending], 1)
        host = torch.cat([s.reward[:, None].float(), s.agent_reward.float(), flags.float()],
                         1).cpu().numpy()  # [E, 1 + N + 4]: one copy (one sync on a GPU)
        n = s.agent_reward.shape[1]
        term, trunc, reset, self._needs_reset = (host[:, n + 1 + i] > 0.5 for i in range(4))
        return StepResult(s.obs.detach().float(), np.ascontiguousarray(host[:, 0]), term,
                          trunc, reset, state=s.state.detach().float(),
                          agent_reward=np.ascontiguousarray(host[:, 1:n + 1]))


def _host(x: Any) -> Any:
    """A tensor as a numpy float32 array on the host (None stays None)."""
    return None if x is None else x.detach().cpu().numpy().astype(np.float32, copy=False)
