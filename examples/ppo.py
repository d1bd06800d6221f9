"""An on-policy algorithm as an example: PPO with a clipped surrogate objective and GAE(lambda).

Schulman, Wolski, Dhariwal, Radford, Klimov, "Proximal Policy Optimization Algorithms",
arXiv:1707.06347, 2017; advantages from Schulman, Moritz, Levine, Jordan, Abbeel,
"High-Dimensional Continuous Control Using Generalized Advantage Estimation", ICLR 2016.
Defaults follow CleanRL's ppo_continuous_action.py (github.com/vwxyzjn/cleanrl).

On a fresh rollout of T vector steps of E envs, with ``u_t`` the pre-tanh Gaussian sample of the
executed action ``a_t = tanh(u_t)``, ``pi_old`` the policy that collected it and ``V`` the value
network before the update (both evaluated once at its start):

* TD residual: ``delta_t = r_t + gamma (1 - term_t) V(s_{t+1}) - V(s_t)``
* GAE:         ``A_t = delta_t + gamma lambda (1 - end_t) A_{t+1}``, ``A_T = 0``;
  return ``G_t = A_t + V(s_t)``
* ratio:       ``rho_t = pi(a_t|s_t) / pi_old(a_t|s_t)`` (the tanh Jacobian cancels: a ratio of
  Gaussian densities of ``u_t``)
* policy:      ``L_clip = -E_t[min(rho_t A_t, clip(rho_t, 1 - eps, 1 + eps) A_t)]``
* value:       ``L_V = E_t[(V(s_t) - G_t)^2]``
* entropy:     ``S = E_t[H(N(mean(s_t), std(s_t)))]``, of the pre-tanh Gaussian (closed form)
* loss:        ``L = L_clip + c1 L_V - c2 S``, minimized for ``epochs`` passes over the rollout in
  ``num_minibatches`` shuffled minibatches; each step clips the global gradient norm of actor and
  critic together to ``max_grad_norm``; ``A`` is normalized per minibatch (as CleanRL).

The code is written for one run: the weights are read through ``Algorithm.compute`` and the
shuffle drawn through ``Algorithm.draw``, so a seed group (its ``seed_axis``) runs all of
this per seed: each seed shuffles its own rows, normalizes its own minibatch advantages and
clips its own gradient norm.

Rows with ``valid = 0`` (calls that only reset an env) are masked out of every loss and statistic.
Unlike CleanRL: actions are tanh-squashed (not clipped), a truncation bootstraps ``V(s_{t+1})``,
there is no observation/reward normalization, no value clipping and no learning-rate annealing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import torch

from rlzoo.algos.base import Algorithm, EnvSpec, adam
from rlzoo.buffers.rollout import Rollout
from rlzoo.nets import Critic, EnsembleCritic, TanhGaussianActor
from rlzoo.nets.actors import tanh_gaussian_log_prob

HALF_LOG_2PI_E = 0.5 * math.log(2.0 * math.pi * math.e)  # entropy of N(0, 1)


def gae(reward: torch.Tensor, value: torch.Tensor, terminated: torch.Tensor, ended: torch.Tensor,
        valid: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE(lambda) advantages and lambda-returns, both ``[T, E]``, 0 on invalid rows.

    Args: ``reward``, ``terminated``, ``ended``, ``valid`` ``[T, E]`` (flags 0/1); ``value``
    ``[T + 1, E]``, ``V(obs)`` of every row (row T: the observation after the last step).
    A termination does not bootstrap; a truncation bootstraps from the final observation; no
    advantage flows back across an episode end; the rollout's last step bootstraps ``V(obs[T])``.
    """
    not_terminated, continues = 1.0 - terminated, 1.0 - ended
    delta = reward + gamma * not_terminated * value[1:] - value[:-1]
    advantage = torch.zeros_like(reward)
    next_advantage = torch.zeros_like(reward[0])
    for t in range(reward.shape[0] - 1, -1, -1):
        next_advantage = valid[t] * (delta[t] + gamma * lam * continues[t] * next_advantage)
        advantage[t] = next_advantage
    return advantage, (advantage + value[:-1]) * valid


def clipped_surrogate(ratio: torch.Tensor, advantage: torch.Tensor, clip: float) -> torch.Tensor:
    """``-min(rho A, clip(rho, 1 - eps, 1 + eps) A)`` elementwise (shape of ``ratio``)."""
    return -torch.min(ratio * advantage, ratio.clamp(1.0 - clip, 1.0 + clip) * advantage)


def log_prob(mean: torch.Tensor, log_std: torch.Tensor, pre_tanh: torch.Tensor) -> torch.Tensor:
    """Exact log-density ``[B]`` of ``tanh(pre_tanh)`` under ``tanh(N(mean, exp(log_std)))``
    (all ``[B, A]``); in a ratio of two policies the tanh correction cancels."""
    noise = (pre_tanh - mean) * torch.exp(-log_std)
    return tanh_gaussian_log_prob(noise, log_std, pre_tanh).sum(-1)


def masked_mean(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over entries with ``weight`` 1 (0 when there are none); a scalar."""
    return (x * weight).sum() / weight.sum().clamp(min=1.0)


class PPO(Algorithm):
    """PPO-Clip for continuous actions (on-policy); see the module docstring.

    Args:
        spec: environment sizes (single-agent; actions in [-1, 1]).
        actor: builds the tanh-Gaussian actor from ``(obs_dim, act_dim)``.
        critic: builds the value network ``V(s)`` as a critic of an empty action
            ``(obs_dim, 0)``; every member regresses on ``G``, ``V`` is ``critic.actor_value``.
        gamma: discount (0.99). gae_lambda: lambda of GAE (0.95). clip: epsilon (0.2).
        epochs: passes over each rollout (10). num_minibatches: minibatches per pass (32).
        lr: Adam learning rate of actor and critic (3e-4). adam_eps: Adam's epsilon (1e-5).
        value_coef: c1 (0.5). entropy_coef: c2 (0.0). max_grad_norm: global clip (0.5).
        policy_init_scale: scales the actor's output layer at init (0.01: mean ~ 0, std ~ 1).
    """

    supported_critics = (EnsembleCritic,)
    on_policy: ClassVar[bool] = True

    def __init__(
        self, spec: EnvSpec, actor: Callable[..., TanhGaussianActor],
        critic: Callable[..., Critic], gamma: float, gae_lambda: float, clip: float,
        epochs: int, num_minibatches: int, lr: float, adam_eps: float, value_coef: float,
        entropy_coef: float, max_grad_norm: float, policy_init_scale: float,
    ) -> None:
        super().__init__(spec, gamma, 1)  # on-policy: no n-step replay
        if not 0.0 <= gae_lambda <= 1.0 or clip <= 0.0:
            raise ValueError(f"algo.gae_lambda must be in [0, 1] and algo.clip > 0, got "
                             f"{gae_lambda}, {clip}")
        if epochs < 1 or num_minibatches < 1:
            raise ValueError("algo.epochs and algo.num_minibatches must be >= 1")
        if min(value_coef, entropy_coef) < 0 or max_grad_norm <= 0 or policy_init_scale <= 0:
            raise ValueError("algo.value_coef, entropy_coef must be >= 0, max_grad_norm and "
                             "policy_init_scale > 0")
        self.gae_lambda, self.clip, self.epochs = gae_lambda, clip, epochs
        self.num_minibatches, self.max_grad_norm = num_minibatches, max_grad_norm
        self.value_coef, self.entropy_coef = value_coef, entropy_coef
        self.actor = actor(spec.obs_dim, spec.act_dim)
        self.critic = critic(spec.obs_dim, 0)  # V(s): a critic of an empty action [B, 0]
        self.check_critic(self.critic)
        with torch.no_grad():  # small initial means and log-stds (CleanRL: 0.01, log std 0)
            for p in self.actor.net.output_layer.parameters():
                p.mul_(policy_init_scale)
        self.optimizers["actor_critic"] = self.optimizer = adam(self.parameters(), lr)
        for group in self.optimizer.param_groups:
            group["eps"] = adam_eps

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs)``: ``obs [..., O]`` -> ``[...]``."""
        flat = obs.reshape(-1, obs.shape[-1])
        return self.critic.actor_value(self.critic(flat, flat.new_zeros(len(flat), 0))).reshape(
            obs.shape[:-1])

    @torch.no_grad()
    def explore(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs [E, O]`` -> (sampled action ``tanh(u)`` ``[E, A]`` in [-1, 1], its ``u``)."""
        mean, log_std = self.actor(obs)
        pre_tanh = mean + torch.randn_like(mean) * log_std.exp()
        return torch.tanh(pre_tanh), pre_tanh

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """``obs [B, O]`` -> action ``[B, A]`` in [-1, 1]: ``tanh(mean)`` or a sample."""
        return self.actor.mode(obs) if deterministic else self.explore(obs)[0]

    def update_inputs(self, rollout: Rollout) -> tuple[torch.Tensor, ...]:
        """The rows every minibatch draws from (``T E`` of them, row-major in
        ``(t, e)``): ``obs [T E, O]``, ``pre_tanh [T E, A]``, and without gradient the old
        log-probs, advantages, returns and valid flags (each ``[T E]``); then the mean value and
        the mean advantage over valid rows (scalars)."""
        T, E = rollout.reward.shape
        obs = rollout.obs[:-1].reshape(T * E, -1)  # [T E, O], row-major in (t, e)
        pre_tanh = rollout.pre_tanh.reshape(T * E, -1)  # [T E, A]
        with torch.no_grad():
            value = self.value(rollout.obs)  # [T + 1, E]
            old_log_prob = log_prob(*self.actor(obs), pre_tanh)  # [T E]
            advantage, returns = gae(rollout.reward, value, rollout.terminated, rollout.ended,
                                     rollout.valid, self.gamma, self.gae_lambda)
        advantage, returns, valid = (x.reshape(-1) for x in (advantage, returns, rollout.valid))
        return (obs, pre_tanh, old_log_prob, advantage, returns, valid,
                masked_mean(value[:-1], rollout.valid), masked_mean(advantage, valid))

    def minibatch_terms(
        self, obs: torch.Tensor, pre_tanh: torch.Tensor, old_log_prob: torch.Tensor,
        advantage: torch.Tensor, returns: torch.Tensor, valid: torch.Tensor, idx: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The loss ``L`` (a scalar) on the minibatch rows ``idx [b]`` of
        ``update_inputs``' rows, and its statistics ``[6]`` (no gradient): policy loss, value
        loss, entropy, approximate KL, clip fraction, mean ratio. The advantages are normalized
        over this minibatch."""
        w = valid[idx]
        mean, log_std = self.actor(obs[idx])
        log_ratio = log_prob(mean, log_std, pre_tanh[idx]) - old_log_prob[idx]
        ratio = log_ratio.exp()
        adv = advantage[idx] - masked_mean(advantage[idx], w)
        adv = adv / (masked_mean(adv.pow(2), w).sqrt() + 1e-8)
        policy_loss = masked_mean(clipped_surrogate(ratio, adv, self.clip), w)
        v = self.critic(obs[idx], obs.new_zeros(len(idx), 0))  # [M, B]
        value_loss = masked_mean((v - returns[idx]).pow(2).sum(0), w)
        entropy = masked_mean((log_std + HALF_LOG_2PI_E).sum(-1), w)
        loss = policy_loss + self.value_coef * value_loss - self.entropy_coef * entropy
        with torch.no_grad():
            stats = torch.stack([
                policy_loss, value_loss, entropy,
                masked_mean((ratio - 1.0) - log_ratio, w),  # approx. KL(old || new)
                masked_mean(((ratio - 1.0).abs() > self.clip).float(), w),
                masked_mean(ratio, w)])
        return loss, stats

    def shuffle(self, rows: int, device: torch.device) -> torch.Tensor:
        """A random order of the rollout's rows for one epoch, ``[rows]`` (``Algorithm.draw``:
        drawn outside ``compute``, so each seed of a group draws its own)."""
        return self.draw(lambda: torch.randperm(rows, device=device))

    def optimizer_steps(self, updates: int) -> int:
        """``epochs x num_minibatches`` optimizer steps per update (a resumed checkpoint's Adam
        step counts are held to it)."""
        return updates * self.epochs * self.num_minibatches

    def update(self, rollout: Rollout) -> dict[str, torch.Tensor]:  # type: ignore[override]
        """``epochs x num_minibatches`` gradient steps on one fresh rollout; mean metrics.

        ``rollout`` as the store gives it (``obs [T + 1, E, O]``, ``reward [T, E]``, ...).
        """
        T, E = rollout.reward.shape[-2:]
        if T * E < self.num_minibatches:
            raise ValueError(f"algo.num_minibatches ({self.num_minibatches}) exceeds the "
                             f"rollout's {T * E} rows (rollout_steps x num_envs)")
        *rows, value_mean, advantage_mean = self.compute(self.update_inputs, rollout)
        totals: Any = 0  # the minibatches' statistics summed, [6]
        for _ in range(self.epochs):
            order = self.shuffle(T * E, rows[0].device)
            for idx in order.tensor_split(self.num_minibatches, dim=-1):
                loss, stats = self.compute(self.minibatch_terms, *rows, idx)
                self.step(self.optimizer, loss, self.max_grad_norm)
                totals = totals + stats
        self.updates += 1
        totals = totals / (self.epochs * self.num_minibatches)
        names = ("loss/actor", "loss/critic", "stats/entropy", "stats/approx_kl",
                 "stats/clip_fraction", "stats/ratio_mean")
        metrics = dict(zip(names, totals.unbind(-1)))
        metrics["stats/value_mean"] = value_mean
        metrics["stats/advantage_mean"] = advantage_mean
        return metrics
