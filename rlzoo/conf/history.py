"""What runs written before a constructor key existed were built with: one record, read by the
build (``rlzoo.config.added_keys``: such a run still resumes, evaluates and loads bit for bit) and
by
``rlzoo.compare`` (``rlzoo.analysis.config``: such a run pools with today's runs at that value).

These are facts about old runs, not defaults: they never change, whatever ``rlzoo/conf``
declares today (``algo=stac`` now declares ``eval_samples: 10`` and ``alpha_optimizer: sgd``; a
STAC run written before those keys existed ran with 0 and ``adam``). Pure data: no import of
rlzoo, so every layer may read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Added:
    """Keys added to one config node's constructor, and what runs written before them did.

    Attributes:
        node: the config node (``algo``, ``algo.actor``, ``critic``, ``tuner``).
        classes: the dotted rlzoo classes whose constructors take the keys; a node whose
            ``_target_`` is one of them or a subclass gets the values when it lacks the keys.
        values: ``{key: the value runs written before it were built with}``.
        since: the commit that added the keys, and what they are.
    """

    node: str
    classes: tuple[str, ...]
    values: dict[str, Any]
    since: str


_GAUSSIAN = "rlzoo.nets.actors.TanhGaussianActor"
_DETERMINISTIC = "rlzoo.nets.actors.DeterministicActor"

ADDED: tuple[Added, ...] = (
    Added("algo.actor", (_GAUSSIAN, _DETERMINISTIC), {"layer_norm": False, "dropout": 0.0},
          "4909cb6: actor LayerNorm and dropout, off before them"),
    Added("algo.actor", (_GAUSSIAN,), {"log_std_squash": "clamp"},
          "b9e2dda (SimbaV2): the log std was clamped before it"),
    Added("algo.actor", (_GAUSSIAN,), {"eval_samples": 0},
          "f3b34c6 (STAC): evaluation at tanh(mean) before averaged samples"),
    Added("critic", ("rlzoo.nets.critics.Critic",), {"dropout": 0.0},
          "e9abd95: critic dropout, none before it (any critic, an example's subclass too)"),
    Added("tuner", ("rlzoo.optim.entropy.AutoAlpha",),
          {"loss_form": "log_alpha", "target_std": None, "alpha_optimizer": "adam"},
          "b9e2dda (SimbaV2) loss form, 367edf0 (FlashSAC) target std, f3b34c6 (STAC) "
          "optimizer: SAC's log_alpha loss, the -scale |A| target and Adam before them"),
    Added("algo", ("rlzoo.algos.sac.SAC", "rlzoo.algos.td3.TD3"),
          {"target_networks": "polyak", "critic_pass": "separate", "adam_betas": [0.9, 0.999]},
          "issue 54 (CrossQ, DDPG, TQC): target networks, separate critic passes and torch's "
          "Adam betas before the options"),
    Added("algo", ("rlzoo.algos.hasac.HASAC",), {"actor_update": "sequential"},
          "issue 56 (MASAC): HASAC's sequential actor update before the option"),
)
"""Every constructor key added after runs were written without it, oldest first."""


SETTINGS_ADDED: dict[str, Any] = {
    "compile": False,  # 8ceabb4: no torch.compile before the switch (auto came later, false)
    "cudagraphs": False,  # 8ceabb4: no CUDA graphs before the switch
    "seeds": 1,  # bdcbde7 (seed groups): one seed a process before them
    "log.progress_every_s": 300,  # 7a302ce: progress lines every 300 s (auto came later)
    "normalize": {"obs": False, "reward": False, "epsilon": 1e-8, "reward_g_max": 5.0},
    # 81ec633 (input normalizers): none before them; epsilon and reward_g_max are then unused
    "eval.video_every": 0,  # 2d13be5: no filmed evaluations before it
    "log.wandb": False,  # 8c50348: no wandb mirror before it
    "env_workers": 0,  # ada49dd: every env stepped in the trainer's process before it
    "env_timeout_s": 60,  # ada49dd: with no workers the timeout is never used; 60 s
    "seed_kernels": "exact",  # 04a2116: a CPU group's seeds each ran their own kernels
}
"""Root keys of the run's settings (``rlzoo.config.settings``) added after runs were written
without them, dotted, and what such a run did (oldest first): a run dir's config that lacks one
is read with this value (:func:`rlzoo.config.added_keys.with_added_settings`), so the settings
are read from the config alone, with no fallback in the code that reads them."""


MOVED: dict[str, str] = {
    "rlzoo.tuners.entropy": "rlzoo.optim.entropy",
    "rlzoo.tuners": "rlzoo.optim.entropy",  # the package re-exported the tuners
}
"""Modules of rlzoo's components that moved, old path -> new (issue 53: the entropy tuners went
beside Adam in ``rlzoo/optim``): a run dir's ``_target_`` naming the old path builds, resumes,
evaluates and pools as the class at the new one (:func:`current_target`)."""


def current_target(target: str) -> str:
    """``target`` (a ``_target_``'s dotted path) with a moved module's old path replaced by its
    new one (:data:`MOVED`, the longest old path that matches); any other path as it is."""
    for old in sorted(MOVED, key=len, reverse=True):
        if target.startswith(old + "."):
            return MOVED[old] + target[len(old):]
    return target


BACKEND_BEFORE: dict[str, str] = {"single": "gymnasium", "multi": "pettingzoo"}
"""The ``env.backend`` of an env config without the key, by ``env.kind``: a run dir written before
backends existed (d1d3c2d) ran on gymnasium's envs, or its family's PettingZoo envs. Every env
config of rlzoo declares its backend; this record is what such a run did, not a default."""
