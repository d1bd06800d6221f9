"""Entropy temperature: fixed, or learned against a target entropy (Haarnoja et al. 2019).

With ``members > 1`` (one temperature per agent) ``alpha`` is ``[N, 1]`` and ``log_prob`` is
``[N, B]``; otherwise ``alpha`` is a scalar tensor and ``log_prob`` is ``[B]``.

**Entropy units.** rlzoo's actors act in ``[-1, 1]`` and the env boundary maps each action entry
affinely onto ``[low_i, high_i]``, ``a_env = bias + scale * a``, ``scale_i = (high_i - low_i) / 2``.
By the change of variables the two densities differ by a constant,
``log p_env(a_env) = log p(a) - sum_i log scale_i``, so an entropy, and the target ``-|A|``, means
different things in the two units (Humanoid, ``scale = 0.4`` on 17 entries: a target of ``-17``
in env units is ``-17 - 17 log 0.4 = -1.42`` in normalized units). ``entropy_units`` chooses:

* ``normalized``: log-probs of the ``[-1, 1]`` action (Stable-Baselines3, REDQ's and HARL's code);
* ``env``: log-probs of the env's own action (CleanRL's ``sac_continuous_action.py``, the official
  DSAC-v2 code).

The algorithm converts every log-prob it uses (soft value target, actor loss, temperature loss,
the ``stats/entropy`` it logs) with ``to_units``, after telling the tuner the action scale once with
``set_action_scale``. With bounds of ``±1`` both units agree.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rlzoo.optim.adam import adam

ENTROPY_UNITS = ("normalized", "env")


class Tuner(nn.Module):
    """Base: ``alpha`` (no gradient), ``update(log_prob)`` returning the temperature loss, and the
    entropy units of the log-probs the algorithm hands it (module docstring).

    Args:
        entropy_units: ``normalized`` or ``env``.
        members: number of temperatures (1, or one per agent).
    """

    optimizer: torch.optim.Optimizer | None = None

    def __init__(self, entropy_units: str, members: int = 1) -> None:
        super().__init__()
        if entropy_units not in ENTROPY_UNITS:
            raise ValueError(
                f"tuner.entropy_units must be one of {', '.join(ENTROPY_UNITS)}, got "
                f"{entropy_units!r}"
            )
        self.entropy_units = entropy_units
        shape = (members, 1) if members > 1 else ()
        # -sum_i log scale_i in env units, 0 in normalized units; derived from the env at build
        # time, so it is not part of the checkpoint.
        self.register_buffer("log_prob_shift", torch.zeros(shape), persistent=False)

    def set_action_scale(self, log_scale: torch.Tensor) -> None:
        """Tell the tuner the env's action scale: ``log_scale [..., A]`` = ``log((high - low) / 2)``
        per action entry (``[A]``; ``[N, A]`` for one temperature per agent, 0 on padding). The
        entries of the last axis are summed into one shift per temperature. A no-op in normalized
        units."""
        if self.entropy_units != "env":
            return
        log_scale = torch.as_tensor(log_scale, dtype=torch.float32)
        if not bool(torch.isfinite(log_scale).all()):
            raise ValueError(
                "tuner.entropy_units=env needs finite action bounds with low < high; use "
                "tuner.entropy_units=normalized for this env"
            )
        shift = -log_scale.sum(-1)
        if shift.numel() != self.log_prob_shift.numel():
            raise ValueError(
                f"action scale for {shift.numel()} temperatures, tuner has "
                f"{self.log_prob_shift.numel()}"
            )
        self.log_prob_shift.copy_(shift.reshape(self.log_prob_shift.shape))

    def to_units(self, log_prob: torch.Tensor) -> torch.Tensor:
        """``log p(a)`` of the ``[-1, 1]`` action -> the log-prob in ``entropy_units`` (same
        shape: ``[B]``, or ``[N, B]`` with one temperature per agent)."""
        return log_prob + self.log_prob_shift

    @property
    def alpha(self) -> torch.Tensor:
        raise NotImplementedError

    def loss(self, log_prob: torch.Tensor) -> torch.Tensor:
        """The temperature loss of ``log_prob`` (in ``entropy_units``, detached): a scalar tensor
        (0 for a fixed temperature). The algorithm steps ``optimizer`` on it (``update`` does
        both)."""
        raise NotImplementedError

    def update(self, log_prob: torch.Tensor) -> torch.Tensor:
        """One step from ``log_prob`` (already in ``entropy_units``); returns the loss."""
        loss = self.loss(log_prob)
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
        return loss.detach()


class FixedAlpha(Tuner):
    """A constant temperature.

    Args:
        act_dim: action size (unused, accepted so all tuners build alike).
        alpha: the temperature.
        members: number of temperatures (agents); all equal to ``alpha``.
        entropy_units: ``normalized`` or ``env``: the units of the entropy bonus in the
            soft value (module docstring).
    """

    def __init__(
        self, act_dim: int, alpha: float, entropy_units: str, members: int = 1,
    ) -> None:
        super().__init__(entropy_units, members)
        if alpha < 0:
            raise ValueError(f"tuner.alpha must be >= 0, got {alpha}")
        shape = (members, 1) if members > 1 else ()
        self.register_buffer("alpha_value", torch.full(shape, float(alpha)))

    @property
    def alpha(self) -> torch.Tensor:
        return self.alpha_value

    def loss(self, log_prob: torch.Tensor) -> torch.Tensor:
        return torch.zeros((), device=log_prob.device)


LOSS_FORMS = ("log_alpha", "alpha")
ALPHA_OPTIMIZERS = ("adam", "sgd")


class AutoAlpha(Tuner):
    """Learned temperature: minimise ``-mean(log_alpha * (log pi + target_entropy))``, or with
    ``loss_form="alpha"`` SimbaV2's ``alpha * (-mean(log pi) - target_entropy)`` (same sign of
    the gradient on ``log_alpha``, scaled by ``alpha``).

    Args:
        act_dim: |A|, action size.
        init_alpha: starting temperature.
        lr: Adam learning rate of ``log_alpha``.
        target_entropy: the entropy target, in ``entropy_units``; ``None`` means
            ``-target_entropy_scale * |A|``.
        target_entropy_scale: scale of the default target (1.0 -> ``-|A|``).
        target_std: if set (and ``target_entropy`` is not), the target is the entropy of a
            Gaussian with this std in every action entry, ``0.5 |A| log(2 pi e target_std^2)``
            (FlashSAC's ``temp_target_sigma``: 0.15 -> about ``-0.48 |A|``).
        entropy_units: ``normalized`` or ``env``: the units ``log pi`` and the target
            are measured in (module docstring).
        loss_form: ``log_alpha`` (SAC's paper code, SB3, CleanRL) or ``alpha``
            (SimbaV2's ``update_temperature``); both learn ``log_alpha``.
        alpha_optimizer: ``adam`` (Adam on ``log_alpha``) or ``sgd`` (plain gradient steps of
            size ``lr``). ``sgd`` with ``loss_form="alpha"`` is STAC's author's rule
            (github ugurcanozalp/rl-warehouse, ``rlwarehouse/algos/stac.py``),
            ``alpha <- alpha exp(lr alpha (target_entropy - mean entropy))``: the gradient on
            ``log_alpha`` is ``alpha (entropy - target)``, so the step shrinks as alpha falls.
        members: number of independent temperatures (the algorithm passes its N for one per
            agent; 1 otherwise).

    The hyperparameters have no default here: each is declared once, with its meaning, in
    ``conf/tuner/auto.yaml`` (an algorithm's own in ``conf/algo_tuner/``). A run dir written
    before a key existed is built with the value it ran with (``rlzoo.config.added_keys``).
    """

    def __init__(
        self,
        act_dim: int,
        init_alpha: float,
        lr: float,
        target_entropy: float | None,
        target_entropy_scale: float,
        entropy_units: str,
        loss_form: str,
        target_std: float | None,
        alpha_optimizer: str,
        members: int = 1,
    ) -> None:
        super().__init__(entropy_units, members)
        if loss_form not in LOSS_FORMS:
            raise ValueError(
                f"tuner.loss_form must be one of {', '.join(LOSS_FORMS)}, got {loss_form!r}"
            )
        self.loss_form = loss_form
        if alpha_optimizer not in ALPHA_OPTIMIZERS:
            raise ValueError(f"tuner.alpha_optimizer must be one of {', '.join(ALPHA_OPTIMIZERS)}"
                             f", got {alpha_optimizer!r}")
        self.alpha_optimizer = alpha_optimizer
        if init_alpha <= 0:
            raise ValueError(f"tuner.init_alpha must be > 0, got {init_alpha}")
        if lr <= 0:
            raise ValueError(f"tuner.lr must be > 0, got {lr}")
        if target_std is not None and not target_std > 0:
            raise ValueError(f"tuner.target_std must be > 0, got {target_std}")
        if target_entropy is not None:
            self.target_entropy = float(target_entropy)
        elif target_std is not None:
            self.target_entropy = 0.5 * act_dim * math.log(
                2 * math.pi * math.e * float(target_std) ** 2)
        else:
            self.target_entropy = -float(target_entropy_scale) * act_dim
        shape = (members, 1) if members > 1 else ()
        self.log_alpha = nn.Parameter(torch.full(shape, math.log(init_alpha)))
        self.optimizer = (adam([self.log_alpha], lr) if alpha_optimizer == "adam"
                          else torch.optim.SGD([self.log_alpha], lr=lr))

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.detach().exp()

    def loss(self, log_prob: torch.Tensor) -> torch.Tensor:
        """``-mean(log_alpha * (log pi + target_entropy))``, or ``alpha * (-mean(log pi) -
        target_entropy)`` for ``loss_form="alpha"`` (summed over temperatures)."""
        if self.loss_form == "alpha":
            entropy = -log_prob.detach().mean(-1, keepdim=log_prob.dim() > 1)
            return (self.log_alpha.exp() * (entropy - self.target_entropy)).sum()
        return -(self.log_alpha * (log_prob.detach() + self.target_entropy)).mean(-1).sum()
