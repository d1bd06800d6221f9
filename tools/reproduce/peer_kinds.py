"""The peers rlzoo's rows are set against, as data: Stable-Baselines3's SAC, TD3 and DDPG and
sb3-contrib's TQC and CrossQ, each with the settings of the rlzoo config of its row
(:func:`peer_settings`: a ValueError names what the peer cannot take as it is, so that it is never
another algorithm than the row's). ``stable_baselines3`` and ``sb3_contrib`` are imported only
inside :func:`peer_class`: they are optional (the ``test`` extra; ``pip install sb3-contrib``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

PEERS = {"sac": "SB3 SAC", "td3": "SB3 TD3", "ddpg": "SB3 DDPG",
         "tqc": "sb3-contrib TQC", "crossq": "sb3-contrib CrossQ"}
"""Every peer a row may name (``Row.peer``) and how the page names it."""

# the peers with a learned temperature (SB3's SAC family: target entropy, ent_coef, alpha rate)
ENTROPY_PEERS = ("sac", "tqc", "crossq")
# sb3-contrib's BatchRenorm has r_max and d_max fixed at 3 and 5
CONTRIB_RENORM = {"rmax": 3.0, "dmax": 5.0}


@dataclass(frozen=True)
class PeerSettings:
    """Peer settings equal to an rlzoo config's (:func:`peer_settings`).

    Attributes:
        kwargs: constructor keyword arguments of the peer's class (without env, seed, device and
            the action noise, which needs the action size).
        learning_rates: rlzoo's Adam rate of each optimizer: ``actor``, ``critic`` and, for the
            peers with a temperature, ``alpha`` (SB3 has one rate for all; the worker sets each).
        target_entropy: the target entropy in rlzoo's units, None for ``-scale * |A|``.
        target_entropy_scale: that ``scale``.
        entropy_env_units: whether rlzoo's target is of the env's action (``tuner.entropy_units
            =env``) rather than of the [-1, 1] action SB3's log-probs are of.
        exploration_noise: TD3's and DDPG's Gaussian exploration std in the [-1, 1] space.
    """

    kwargs: dict[str, Any]
    learning_rates: dict[str, float]
    target_entropy: float | None = None
    target_entropy_scale: float = 1.0
    entropy_env_units: bool = False
    exploration_noise: float = 0.0

    def sac_target_entropy(self, low: Any, high: Any) -> float:
        """The target entropy in SB3's units for an env with action bounds ``low``, ``high``
        ``[A]``: log pi(env action) = log pi([-1, 1] action) - sum log(half range)."""
        target = (-self.target_entropy_scale * int(np.size(low)) if self.target_entropy is None
                  else self.target_entropy)
        if self.entropy_env_units:
            target -= float(np.sum(np.log((np.asarray(high) - np.asarray(low)) / 2.0)))
        return float(target)


def _kind(node: Any) -> str:
    return str(node._target_).rsplit(".", 1)[-1]


def _problems(cfg: Any, peer: str) -> list[str]:
    """What ``peer`` cannot take as it is from the composed rlzoo config ``cfg``."""
    algo, critic = cfg.algo, cfg.critic
    problems = []
    if float(algo.utd) != 1.0 or int(algo.n_step) != 1:
        problems.append("utd and n_step must be 1")
    if algo.actor.activation != "relu" or critic.activation != "relu" or critic.layer_norm:
        problems.append("activations must be relu, without layer norm")
    delay, target_delay = int(algo.policy_delay), algo.get("target_delay")
    if peer != "crossq" and target_delay is not None and int(target_delay) != delay:
        problems.append("target_delay must equal policy_delay")
    kind = _kind(critic)
    want = {"sac": ("TwinCritic", 1, "min"), "td3": ("TwinCritic", None, "first"),
            "ddpg": ("EnsembleCritic", 1, "first"), "tqc": ("TruncatedQuantileCritic", 1, "mean"),
            "crossq": ("TwinCritic", None, "min")}[peer]
    named = {"TwinCritic": "the twin critic", "EnsembleCritic": "one Q-network (critic=single)",
             "TruncatedQuantileCritic": "TQC's (critic=tqc)"}[want[0]]
    if kind != want[0] or critic.actor_reduce != want[2] or (
            peer == "ddpg" and int(critic.n) != 1):
        problems.append(f"the critic must be {named} with actor_reduce {want[2]}")
    if want[1] is not None and delay != want[1]:
        problems.append(f"policy_delay must be {want[1]}")
    if peer == "ddpg" and (float(algo.policy_noise) or float(algo.noise_clip)):
        problems.append("DDPG has no target smoothing: policy_noise and noise_clip must be 0")
    networks = (algo.actor.get("network"), critic.get("network"))
    if peer == "crossq":
        if (algo.get("target_networks"), algo.get("critic_pass")) != ("none", "joint"):
            problems.append("CrossQ needs target_networks none and critic_pass joint")
        norms = [n.get("norm") if n else None for n in networks]
        if not all(n is not None and _kind(n) == "EnsembleBatchRenorm" and all(
                float(n[k]) == v for k, v in CONTRIB_RENORM.items()) for n in norms) or (
                {k: float(norms[0][k]) for k in ("momentum", "eps", "warmup_steps")}
                != {k: float(norms[1][k]) for k in ("momentum", "eps", "warmup_steps")}):
            problems.append("CrossQ needs net=batch_renorm, the same in actor and critic, with "
                            "rmax 3 and dmax 5")
    elif any(networks) or algo.get("target_networks", "polyak") != "polyak" \
            or algo.get("critic_pass", "separate") != "separate":
        problems.append("the peer needs MLPs (net=mlp), target networks and separate passes")
    return problems


def peer_settings(cfg: Any, peer: str) -> PeerSettings:
    """The settings of ``peer`` (a key of :data:`PEERS`) equal to the composed rlzoo config
    ``cfg`` of its row. Raises ValueError naming what the peer cannot take as it is."""
    problems = _problems(cfg, peer)
    if problems:
        raise ValueError(f"the {PEERS[peer]} peer cannot match this config: "
                         f"{'; '.join(problems)}")
    algo, critic = cfg.algo, cfg.critic
    arch = {"pi": [int(h) for h in algo.actor.hidden], "qf": [int(h) for h in critic.hidden]}
    kwargs: dict[str, Any] = {
        "learning_rate": float(algo.actor_lr), "buffer_size": int(algo.buffer_size),
        "learning_starts": int(algo.learning_starts), "batch_size": int(algo.batch_size),
        "gamma": float(algo.gamma), "train_freq": 1, "gradient_steps": 1,
        "policy_kwargs": {"net_arch": arch},
    }
    if peer != "crossq":
        kwargs["tau"] = float(algo.tau)
    rates = {"actor": float(algo.actor_lr), "critic": float(algo.critic_lr)}
    if peer == "td3":
        kwargs.update(policy_delay=int(algo.policy_delay),
                      target_policy_noise=float(algo.policy_noise),
                      target_noise_clip=float(algo.noise_clip))
    if peer in ("td3", "ddpg"):
        return PeerSettings(kwargs, rates, exploration_noise=float(algo.exploration_noise))
    if peer == "tqc":
        kwargs["top_quantiles_to_drop_per_net"] = int(critic.drop_per_member)
        kwargs["policy_kwargs"].update(n_critics=int(critic.n), n_quantiles=int(critic.quantiles))
    if peer == "crossq":
        norm = critic.network.norm
        kwargs["policy_delay"] = int(algo.policy_delay)
        kwargs["policy_kwargs"].update(
            batch_norm_momentum=float(norm.momentum), batch_norm_eps=float(norm.eps),
            renorm_warmup_steps=int(norm.warmup_steps),
            optimizer_kwargs={"betas": tuple(float(b) for b in algo.adam_betas)})
    tuner = cfg.tuner
    rates["alpha"] = float(tuner.lr)
    kwargs["ent_coef"] = f"auto_{float(tuner.init_alpha)}"
    return PeerSettings(
        kwargs, rates,
        target_entropy=None if tuner.target_entropy is None else float(tuner.target_entropy),
        target_entropy_scale=float(tuner.target_entropy_scale),
        entropy_env_units=tuner.entropy_units == "env")


def peer_class(peer: str) -> Any:
    """The peer's algorithm class (imported here: the libraries are optional)."""
    if peer in ("tqc", "crossq"):
        import sb3_contrib

        return sb3_contrib.TQC if peer == "tqc" else sb3_contrib.CrossQ
    import stable_baselines3 as sb3

    return {"sac": sb3.SAC, "td3": sb3.TD3, "ddpg": sb3.DDPG}[peer]
