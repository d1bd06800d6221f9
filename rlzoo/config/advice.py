"""One-line warnings about a config that cannot do what its user probably wants: a schedule that
never updates, options that configure nothing beside the network chosen, a categorical support
sized for scaled returns with the scaling off. Printed at start and recorded in summary.json."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from rlzoo.config.settings import Normalize, Settings, read_normalize


def schedule_warnings(s: Settings, cfg: DictConfig | None = None) -> list[str]:
    """One-line warnings about a schedule or config that cannot do what the user probably
    wants, printed at start and recorded in summary.json (:func:`config_warnings` for ``cfg``)."""
    out = [] if cfg is None else config_warnings(cfg, s.normalize)
    if s.on_policy or s.total_steps > s.learning_starts:
        return out
    return [
        f"total_steps ({s.total_steps}) <= algo.learning_starts ({s.learning_starts}): this "
        "run takes only random actions and makes no gradient update, so its returns are "
        "those of an untrained policy; lower algo.learning_starts or raise total_steps",
        *out,
    ]


def config_warnings(cfg: DictConfig, normalize: Normalize | None = None) -> list[str]:
    """Settings that take effect nowhere: an MLP option (``dropout``, ``layer_norm``) beside a
    configured network (``net=simbav2``/``flashsac`` builds the trunk, the MLP keys then build
    nothing), and a categorical support sized for scaled returns with reward scaling off
    (``normalize``: the run's ``Settings.normalize``; None: read from ``cfg``)."""
    out = []
    for where in ("critic", "algo.actor"):
        node = OmegaConf.select(cfg, where, default=None)
        if not isinstance(node, DictConfig) or node.get("network") is None:
            continue
        idle = [f"{where}.{k}={node[k]}" for k in ("dropout", "layer_norm") if node.get(k)]
        if idle:
            out.append(f"{' and '.join(idle)} configure the MLP trunk only; {where}.network "
                       f"({node.network.get('_target_')}) builds this one, so they do nothing; "
                       "use net=mlp or leave them out")
    critic = cfg.get("critic") or {}
    normalize = normalize or read_normalize(cfg)
    if not str(critic.get("_target_", "")).endswith("CategoricalCritic"):
        return out
    bound = max(abs(float(critic.v_min)), abs(float(critic.v_max)))
    if not normalize.reward and bound <= normalize.reward_g_max:
        out.append(f"critic support [{critic.v_min}, {critic.v_max}] is sized for scaled returns "
                   "(normalize.reward_g_max), but normalize.reward=false: discounted returns "
                   "outside it are clipped; set critic.v_min/v_max around the env's returns or "
                   "turn normalize.reward on")
    return out
