"""The trainer for multi-agent envs (``env.kind: multi``): the same loop, multi-agent data.

``Trainer`` dispatches here for a multi-agent env config, so ``Trainer(cfg, run_dir)`` and the CLI
work unchanged. Only the hooks differ from the single-agent trainer:

* the env is a :class:`~rlzoo.envs.multi_agent.MultiAgentVecEnv` (``obs [E, N, O]``, global
  ``state [E, S]``, per-agent ``reward [E, N]``) and the ``EnvSpec`` carries ``n_agents``,
  ``state_dim`` and the per-agent action sizes;
* **reward convention**: the team reward of a step is the mean over agents of their rewards; an
  episode return is its sum over the episode. ``train/episode_return`` and ``eval/return`` log the
  team return, ``train/episode_return/agent_i`` and ``eval/return/agent_i`` each agent's own sum;
* off-policy algorithms (MADDPG, HASAC) store into the replay buffer with obs ``(N, O)``, actions
  ``(N, A)``, the global state and per-agent rewards beside the team reward, and update exactly
  like single-agent ones (warm-up, ``utd``, n-step sampling);
* on-policy algorithms (COMA) collect ``algo.rollout_steps`` fresh vector steps per env into a
  :class:`~rlzoo.buffers.rollout.RolloutStore` with the policy's pre-tanh samples, then update once
  on that rollout and clear it. There is no warm-up and no replay;
* evaluation runs ``eval.episodes`` episodes on a separate vector env of that many copies, episode
  ``i`` of every evaluation seeded ``seed + 10_000 + i`` (no state carried between evaluations).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig

from rlzoo.algos.base import EnvSpec
from rlzoo.buffers.replay import ReplayBuffer
from rlzoo.buffers.rollout import RolloutStore
from rlzoo.envs.multi_agent import MultiAgentVecEnv, make_multi_agent_env, run_episodes
from rlzoo.errors import UserError
from rlzoo.trainer import (
    EVAL_SEED_OFFSET,
    Trainer,
    _int,
    check_buffer_memory,
    env_kwargs,
    host_array,
)


def make_env(cfg: DictConfig, num_envs: int, seed: int, **extra: Any) -> MultiAgentVecEnv:
    """Build the multi-agent vector env of the ``env`` config (``family``, ``scenario``,
    ``kwargs``); ``extra`` goes to the PettingZoo constructor too (e.g. ``render_mode``)."""
    try:
        return make_multi_agent_env(
            str(cfg.env.family), str(cfg.env.scenario), num_envs, seed, **env_kwargs(cfg),
            **extra,
        )
    except (ValueError, TypeError) as err:
        raise UserError(f"cannot make env={cfg.env.name}: {err}") from None


def env_spec(env: MultiAgentVecEnv) -> EnvSpec:
    """What a multi-agent algorithm needs to know about ``env``."""
    return EnvSpec(
        obs_dim=env.obs_dim, act_dim=env.act_dim, n_agents=env.n_agents,
        state_dim=env.state_dim, act_dims=tuple(int(a) for a in env.act_dims),
        # [N, A] bounds, agent-major, 0 on padding (the adapter's affine map)
        action_low=tuple(float(x) for x in env._act_low.reshape(-1)),
        action_high=tuple(float(x) for x in env._act_high.reshape(-1)),
    )


class MultiAgentTrainer(Trainer):
    """Runs one multi-agent training job (see the module docstring)."""

    def __init__(self, cfg: DictConfig, run_dir: Path) -> None:
        self.eval_env: MultiAgentVecEnv | None = None
        self.last_eval_agents: np.ndarray | None = None
        super().__init__(cfg, run_dir)

    # ------------------------------------------------------------------ setup hooks
    def build_env(self) -> tuple[MultiAgentVecEnv, EnvSpec]:
        s = self.settings
        env = make_env(self.cfg, s.num_envs, s.seed)
        self.act_mask = env.act_mask.astype(np.float32)  # [N, A]
        return env, env_spec(env)

    def build_buffer(self) -> ReplayBuffer | RolloutStore:
        s, spec = self.settings, self.spec
        obs_shape, action_shape = (spec.n_agents, spec.obs_dim), (spec.n_agents, spec.act_dim)
        self.on_policy = self.algo.on_policy
        if self.on_policy:
            if not hasattr(self.algo, "explore"):
                raise UserError(f"algo={self.cfg.algo.name} is on-policy but has no explore()")
            self.rollout_steps = _int(self.cfg, "algo.rollout_steps", 1)
            return RolloutStore(
                self.rollout_steps, s.num_envs, obs_shape, action_shape, spec.state_dim, s.device
            )
        check_buffer_memory(s, obs_shape, action_shape, spec.state_dim, spec.n_agents)
        return ReplayBuffer(
            s.buffer_size, obs_shape, action_shape, s.num_envs, s.device,
            state_dim=spec.state_dim, agent_rewards=spec.n_agents, seed=s.seed,
        )

    # ------------------------------------------------------------------ loop hooks
    def reset_envs(self) -> np.ndarray:
        obs, self.env_state = self.env.reset()
        self.episode_return = np.zeros((self.settings.num_envs, self.spec.n_agents))
        return obs

    def collect(self, obs: np.ndarray) -> tuple[np.ndarray, int]:
        """Act, step every env, store the step, log finished episodes; returns the next obs
        and the number of transitions collected (reset calls are not transitions)."""
        s, spec = self.settings, self.spec
        pre_tanh = None
        if self.on_policy:
            action_t, pre_tanh = self.algo.explore(self.to_device(obs))  # type: ignore[operator]
            action = action_t.cpu().numpy()
        elif self.step < s.learning_starts:
            shape = (s.num_envs, spec.n_agents, spec.act_dim)
            action = self.rng.uniform(-1.0, 1.0, size=shape).astype(np.float32) * self.act_mask
        else:
            action = self.algo.act(self.to_device(obs)).cpu().numpy()
        result = self.env.step(action)
        self.check_env_output(reward=result.reward, obs=result.obs, state=result.state,
                              action=action)
        team_reward = result.reward.mean(axis=1)  # the reward convention: mean over agents
        if isinstance(self.buffer, RolloutStore):
            self.buffer.add(
                obs, self.env_state, action, pre_tanh, team_reward, result.reward, result.obs,
                result.state, result.terminated, result.truncated, result.reset_step,
            )
        else:
            self.buffer.add(
                obs, action, team_reward, result.obs, result.terminated, result.truncated,
                result.reset_step, state=self.env_state, next_state=result.state,
                agent_reward=result.reward,
            )
        valid = ~result.reset_step
        n_new = int(valid.sum())
        self.episode_return += np.where(valid[:, None], result.reward, 0.0)
        for e in np.flatnonzero((result.terminated | result.truncated) & valid):
            self.episodes += 1
            step = self.step + n_new
            self.logger.episode(float(self.episode_return[e].mean()), step)
            self.logger.scalars({
                f"train/episode_return/agent_{i}": float(r)
                for i, r in enumerate(self.episode_return[e])
            }, step)
            self.episode_return[e] = 0.0
        self.env_state = result.state
        return result.obs, n_new

    def loop_state(self) -> dict[str, Any]:
        return {"obs": self.obs, "env_state": self.env_state, "episode_return": self.episode_return}

    def load_loop_state(self, loop: dict[str, Any]) -> None:
        self.obs = host_array(loop["obs"])
        self.env_state = host_array(loop["env_state"])
        self.episode_return = host_array(loop["episode_return"])

    def learn(self, past_warmup: int) -> dict[str, torch.Tensor]:
        """Off-policy: as single-agent runs. On-policy: one update per full rollout."""
        if not self.on_policy:
            return super().learn(past_warmup)
        if not self.buffer.full:  # type: ignore[union-attr]
            return {}
        metrics = self.update(self.buffer.rollout())  # type: ignore[union-attr, arg-type]
        self.buffer.clear()  # type: ignore[union-attr]
        return metrics

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, episodes: int | None = None, deterministic: bool = True) -> np.ndarray:
        """``eval.episodes`` episodes on the eval env (``episodes`` copies, seeds seed + 10_000
        + i at every call); returns the team returns ``[episodes]`` and keeps each agent's
        mean return in ``last_eval_agents [N]``."""
        episodes = episodes or self.settings.eval_episodes
        if self.eval_env is None or self.eval_env.num_envs != episodes:
            if self.eval_env is not None:
                self.eval_env.close()
            self.eval_env = make_env(
                self.cfg, episodes, self.settings.seed + EVAL_SEED_OFFSET
            )
            self.eval_envs = [self.eval_env]  # closed by the loop's end
        obs, _ = self.eval_env.reset(seed=self.settings.seed + EVAL_SEED_OFFSET)  # same seeds

        def policy(batch: np.ndarray) -> np.ndarray:
            return self.algo.act(self.to_device(batch), deterministic=deterministic).cpu().numpy()

        returns, _ = run_episodes(self.eval_env, obs, policy)
        self.last_eval_agents = returns.mean(axis=0)
        return returns.mean(axis=1)

    def evaluate_and_log(self) -> None:
        super().evaluate_and_log()
        if self.last_eval_agents is not None:
            self.logger.scalars({
                f"eval/return/agent_{i}": float(r) for i, r in enumerate(self.last_eval_agents)
            }, self.step)
            self.logger.flush()
