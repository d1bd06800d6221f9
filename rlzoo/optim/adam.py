"""The zoo's optimizers: Adam with the fastest step the device offers (every component), and
``MemberAdam``, which steps one ensemble member at a time (HASAC's sequential agent updates)."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Sequence
from typing import Any

import torch


def check_lr(lr: float) -> float:
    """``lr`` if it is a usable learning rate (> 0)."""
    if lr <= 0:
        raise ValueError(f"learning rates must be > 0, got {lr}")
    return lr


def initial_state(opt: torch.optim.Optimizer) -> dict[int, dict[str, Any]]:
    """The per-parameter state ``opt``'s first step creates, by parameter index as its
    ``state_dict`` numbers them: what a checkpoint's state of ``opt`` must look like (entries,
    shapes, dtypes, devices; the values are not meant to be used). An optimizer that defines
    ``initial_state()`` gives it; any other is copied (``copy.deepcopy``) and the copy takes one
    step with zero gradients, so the live optimizer and its parameters are left untouched."""
    own = getattr(opt, "initial_state", None)
    if callable(own):
        return own()
    twin = copy.deepcopy(opt)
    with torch.no_grad():
        for group in twin.param_groups:
            for p in group["params"]:
                p.grad = torch.zeros_like(p)
        twin.step()
    return twin.state_dict()["state"]


def with_own_settings(opt: torch.optim.Optimizer, saved: dict[str, Any]) -> dict[str, Any]:
    """A saved ``state_dict`` of ``opt`` with every param group's settings (``lr``, ``betas``,
    ``eps``, ``weight_decay``, ``maximize``, ``amsgrad``, ``fused``, ``capturable``, ...) replaced
    by ``opt``'s own, which come from the run's config: the file's copies are never used (a
    learning-rate schedule's current rate is the schedule's to set, from the update count).
    The saved ``params`` and per-parameter ``state`` are kept."""
    own = opt.state_dict()["param_groups"]
    groups = [{**{k: v for k, v in mine.items() if k != "params"}, "params": theirs["params"]}
              for mine, theirs in zip(own, saved["param_groups"], strict=True)]
    return {"state": saved["state"], "param_groups": groups}


class Adam(torch.optim.Adam):
    """``torch.optim.Adam`` (same update, same ``state_dict``) with a lean fused step.

    Once the state exists, ``step()`` issues the fused kernel directly from cached per-tensor
    lists instead of walking the param groups in Python each call; ``zero_grad()`` drops the
    gradients the same way. On a 2-core CPU this saves ~0.1 ms per step, which is ~3% of a
    SAC update on Hopper (see docs/performance.md). Anything unusual (a closure, AMSGrad,
    gradient scaling, several groups, missing gradients, a state loaded from a checkpoint
    before its first step) takes the stock path.
    """

    def __init__(self, params: Any, **kwargs: Any) -> None:
        super().__init__(params, **kwargs)
        self._lean: tuple[list[torch.Tensor], ...] | None = None
        self.slices = 1  # see split
        self._capturable = bool(self.param_groups[0]["capturable"])
        self._live_lrs: list[Any] = []
        self.register_load_state_dict_pre_hook(Adam._before_load)
        self.register_load_state_dict_post_hook(Adam._after_load)

    def __getstate__(self) -> dict[str, Any]:
        """torch's (defaults, state, param groups) and this class's settings, so that a copy
        (``copy.deepcopy``: :func:`initial_state`) steps as this one does."""
        return {**super().__getstate__(), "slices": self.slices, "_capturable": self._capturable,
                "_lean": None, "_live_lrs": []}

    def set_capturable(self, capturable: bool) -> None:
        """Keep the step counters on the device (``capturable``: CUDA graphs) or not; the
        choice is the run's, so a checkpoint saved by another kind of run keeps it."""
        self._capturable = capturable
        for group in self.param_groups:
            group["capturable"] = capturable
        self._lean = None

    def split(self, slices: int) -> None:
        """Step every parameter as ``slices`` tensors along its leading axis (``[S, ...]``), each
        as if it were alone: the fused kernel walks each slice as its own tensor, so a slice's
        arithmetic is bit for bit that of a lone tensor of its shape (the kernel's vector width
        meets each slice's own end, not the parameter's). The update is Adam's either way; 1
        (the default): each parameter is one tensor. A split optimizer creates its state itself
        before the first step, so that step is split too. A step where a parameter has no gradient
        takes the stock, unsplit path (a correct Adam step that rounds as the stacked tensor's)."""
        self.slices = slices
        self._lean = None

    def set_lr(self, lr: torch.Tensor) -> None:
        """Make every group's learning rate the tensor ``lr`` (0-d, on the parameters' device:
        float64 on the CPU, float32 on CUDA, where the fused step reads it on the device). A
        schedule then writes the rate into ``lr`` in place, inside a captured update; a
        checkpoint's rate is copied into it on load."""
        for group in self.param_groups:
            group["lr"] = lr
        self._lean = None

    def state_dict(self) -> dict[str, Any]:
        """``torch.optim.Adam``'s, with a tensor learning rate copied: the saved state holds
        the rate's value now, not the live tensor a schedule keeps writing."""
        state = super().state_dict()
        for group in state["param_groups"]:
            if isinstance(group["lr"], torch.Tensor):
                group["lr"] = group["lr"].detach().clone()
        return state

    @staticmethod
    def _before_load(opt: Adam, state_dict: dict[str, Any]) -> None:
        opt._live_lrs = [group["lr"] for group in opt.param_groups]

    @staticmethod
    def _after_load(opt: Adam) -> None:
        """The run's own ``capturable`` choice and learning-rate tensors survive a load (the
        checkpoint's rates are copied into them), so a captured graph keeps reading them."""
        for group, live in zip(opt.param_groups, opt._live_lrs):
            group["capturable"] = opt._capturable
            if isinstance(live, torch.Tensor):
                with torch.no_grad():
                    live.copy_(torch.as_tensor(group["lr"], dtype=live.dtype))
                group["lr"] = live
        opt._live_lrs = []
        opt._lean = None

    def _lean_lists(self) -> tuple[list[torch.Tensor], ...] | None:
        group = self.param_groups[0]
        if (len(self.param_groups) != 1 or not group["fused"] or group["amsgrad"]
                or group["capturable"] or group["differentiable"] or group["maximize"]
                or not hasattr(torch, "_fused_adam_")):
            return None
        params = group["params"]
        states = [self.state.get(p, {}) for p in params]
        if not all("step" in s for s in states):
            return None  # the stock step creates the state
        return (params, [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
                [s["step"] for s in states])

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        if closure is None and self._lean is None:
            if self.slices > 1 and len(self.param_groups) == 1:  # the state, as the stock step
                self._init_group(self.param_groups[0], [], [], [], [], [], [])  # makes it
            self._lean = self._lean_lists()
        if closure is not None or self._lean is None:
            return super().step(closure)
        params, exp_avgs, exp_avg_sqs, steps = self._lean
        grads = [p.grad for p in params]
        if any(g is None for g in grads):
            return super().step()
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        torch._foreach_add_(steps, 1)
        if self.slices > 1:  # every slice a tensor of the kernel's list, with its step count
            params, grads, exp_avgs, exp_avg_sqs = (
                [t for tensor in tensors for t in tensor.unbind(0)]
                for tensors in (params, grads, exp_avgs, exp_avg_sqs))
            steps = [step for step in steps for _ in range(self.slices)]
        torch._fused_adam_(
            params, grads, exp_avgs, exp_avg_sqs, [], steps, lr=self._lean_lr(group["lr"]),
            beta1=beta1, beta2=beta2, weight_decay=group["weight_decay"], eps=group["eps"],
            amsgrad=False, maximize=False,
        )
        return None

    @staticmethod
    def _lean_lr(lr: float | torch.Tensor) -> float | torch.Tensor:
        """The rate as the fused kernel takes it: a Python float on the CPU (a CPU tensor's
        value, exactly, as the stock step reads it), the tensor itself on CUDA (no host read)."""
        if isinstance(lr, torch.Tensor) and lr.device.type != "cpu":
            return lr
        return float(lr)

    def zero_grad(self, set_to_none: bool = True) -> None:
        if self._lean is None or not set_to_none:
            return super().zero_grad(set_to_none)
        for p in self._lean[0]:
            p.grad = None


ADAM_BETAS = (0.9, 0.999)
"""torch's (and Kingma & Ba's) Adam betas: what an optimizer gets where no ``algo.adam_betas``
says otherwise (the temperature's, and the algorithms without that key)."""


def check_betas(betas: Sequence[float], key: str = "algo.adam_betas") -> tuple[float, float]:
    """``(beta1, beta2)`` if ``betas`` holds two numbers in ``[0, 1)``; ``key`` names the
    setting in the message."""
    values = tuple(betas) if isinstance(betas, Sequence) and not isinstance(betas, str) else ()
    if len(values) != 2 or not all(isinstance(b, (int, float)) and not isinstance(b, bool)
                                   and 0.0 <= b < 1.0 for b in values):
        raise ValueError(f"{key} must be two numbers in [0, 1), [beta1, beta2], got {betas!r}; "
                         "e.g. [0.9, 0.999] (torch's) or [0.5, 0.999] (CrossQ's)")
    return float(values[0]), float(values[1])


def adam(params: Any, lr: float, capturable: bool = False,
         betas: Sequence[float] = ADAM_BETAS) -> torch.optim.Adam:
    """Adam with the fused step (one kernel for all tensors, on CPU and CUDA alike).

    Falls back to the multi-tensor (``foreach``) step for devices without a fused kernel.
    ``capturable=True`` keeps the step counter on the device (needed for CUDA graphs);
    ``betas``: the decay rates of the moment estimates (:func:`check_betas`).
    """
    check_lr(lr)
    betas = check_betas(betas)
    params = list(params)
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params)
    if fused:
        return Adam(params, lr=lr, betas=betas, fused=True, capturable=capturable)
    return Adam(params, lr=lr, betas=betas, foreach=True, capturable=capturable)


class MemberAdam(torch.optim.Optimizer):
    """Adam (Kingma & Ba 2015) that steps one ensemble member at a time.

    Every parameter has the member as its leading dimension (``[M, ...]``, as in
    ``EnsembleLinear``). ``step(member)`` applies exactly ``torch.optim.Adam``'s update to slice
    ``[member]`` of every parameter, with that member's own moment estimates and step count, and
    leaves the other members untouched (a shared Adam would move them by their momentum even with
    a zero gradient). Used for HASAC's sequential per-agent actor updates.

    ``member`` is one index, or a row of L indices when every parameter holds L independent
    ensembles, ``[L, M, ...]`` (a seed group's parameters, ``SeedAxis``, with the group's
    draws of the index): the step then moves slice ``[l, member_l]`` of every ensemble ``l`` with
    ``l``'s own moments and step count (``state["step"]`` is ``[L, M]``), so no ensemble reads
    another's state. The shape of ``member`` says which: the optimizer holds no count of its own.

    Args:
        params: parameters, each ``[M, ...]``.
        members: M.
        lr: learning rate.
        betas: Adam's moment decay rates (0.9, 0.999).
        eps: Adam's epsilon (1e-8).
    """

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        members: int,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        super().__init__(params, {"lr": check_lr(lr), "betas": betas, "eps": eps})
        self.members = members
        for group in self.param_groups:
            for p in group["params"]:
                if p.dim() == 0 or p.shape[0] != members:
                    raise ValueError(
                        f"MemberAdam needs parameters with {members} members first, got "
                        f"{tuple(p.shape)}"
                    )
        self.capturable = False  # the device step on any device (set_capturable)
        # each parameter's rank as built ([M, ...]): a row of L members adds one axis
        self._ranks = {p: p.dim() for group in self.param_groups for p in group["params"]}

    def set_capturable(self, capturable: bool) -> None:
        """Take the device step (:meth:`device_step`) on every device, the CPU included."""
        self.capturable = capturable

    def on_device(self) -> bool:
        """Whether ``step`` takes the device step: off the CPU, or when ``capturable``."""
        params = [p for group in self.param_groups for p in group["params"]]
        return self.capturable or any(p.device.type != "cpu" for p in params)

    @torch.no_grad()
    def step(self, member: int | Sequence[int] | torch.Tensor = 0) -> None:  # type: ignore[override]
        """One Adam step on slice ``[member]`` of every parameter that has a gradient.

        ``member`` is an int (parameters ``[M, ...]``) or a sequence of L ints (parameters
        ``[L, M, ...]``: slice ``[l, member[l]]`` of every ``l``), or an int64 tensor of either
        shape (``[]`` or ``[L]``) on the parameters' device; off the CPU (or with
        ``capturable``) the step is :meth:`device_step`, which reads nothing from the host.
        """
        if self.on_device():
            self.device_step(member)
            return
        if isinstance(member, torch.Tensor):
            member = member.tolist()
        lead = () if isinstance(member, int) else (len(member),)
        indices = self._slices(member)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            # Parameters grouped by their step count (equal unless some had no gradient once),
            # each group updated with multi-tensor (foreach) ops.
            by_step: dict[float, list[list[torch.Tensor]]] = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                self._check_lead(p, lead)
                if not state:  # step counts on the host: bias corrections need no device read
                    state.update(self._new_state(p, len(lead), torch.device("cpu")))
                elif state["step"].device.type != "cpu":  # loaded with a map_location
                    state["step"] = state["step"].cpu()
                # the float64 counts through a NumPy view of the same memory: the same
                # arithmetic without a tensor op per count
                counts = state["step"].numpy()
                tensors = (p, p.grad, state["exp_avg"], state["exp_avg_sq"])
                for index in indices:
                    counts[index] += 1
                    slices = by_step.setdefault(float(counts[index]), [[], [], [], []])
                    for listed, x in zip(slices, tensors):
                        listed.append(x[index])
            for t, (params, grads, exp_avgs, exp_avg_sqs) in by_step.items():
                torch._foreach_lerp_(exp_avgs, grads, 1.0 - beta1)
                torch._foreach_mul_(exp_avg_sqs, beta2)
                torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1.0 - beta2)
                denom = torch._foreach_sqrt(exp_avg_sqs)
                torch._foreach_div_(denom, math.sqrt(1.0 - beta2**t))
                torch._foreach_add_(denom, group["eps"])
                step_size = group["lr"] / (1.0 - beta1**t)
                torch._foreach_addcdiv_(params, exp_avgs, denom, value=-step_size)

    @torch.no_grad()
    def device_step(self, member: int | Sequence[int] | torch.Tensor) -> None:
        """``step`` computed on the device with no host read, so it can be captured in a CUDA
        graph: every slice's Adam update is computed and kept only where ``member`` (``[]`` or
        ``[L]``) says (a mask over ``[L?, M]``); step counts ``[L?, M]`` live on the device
        (float64), and so do the bias corrections. The same update as the host step up to float
        rounding."""
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps = group["lr"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                chosen = torch.as_tensor(member, device=p.device)
                lead = tuple(chosen.shape)
                self._check_lead(p, lead)
                state = self.state[p]
                if not state:
                    state.update(self._new_state(p, len(lead), p.device))
                elif state["step"].device != p.device:  # a checkpoint of the host step
                    state["step"] = state["step"].to(p.device)
                # [L?, M]: a comparison, not one_hot (which checks its input on the host)
                selected = chosen[..., None] == torch.arange(self.members, device=p.device)
                step = state["step"]
                step.add_(selected.to(step.dtype))
                view = (*selected.shape, *([1] * (p.dim() - selected.dim())))
                mask = selected.reshape(view)
                t = step.reshape(view)
                exp_avg, exp_avg_sq, grad = state["exp_avg"], state["exp_avg_sq"], p.grad
                exp_avg.copy_(torch.where(mask, torch.lerp(exp_avg, grad, 1.0 - beta1), exp_avg))
                new_sq = exp_avg_sq * beta2 + grad * grad * (1.0 - beta2)
                exp_avg_sq.copy_(torch.where(mask, new_sq, exp_avg_sq))
                bias2 = torch.sqrt(1.0 - torch.pow(beta2, t)).to(p.dtype)
                step_size = (lr / (1.0 - torch.pow(beta1, t))).to(p.dtype)
                denom = exp_avg_sq.sqrt() / bias2 + eps
                p.copy_(torch.where(mask, p - step_size * exp_avg / denom, p))

    def _new_state(self, p: torch.Tensor, lead: int, device: torch.device) -> dict[str, Any]:
        """A parameter's state before its first step: step counts ``[*lead, M]`` (float64, on
        ``device``) and zero moments like ``p``."""
        return {"step": torch.zeros(*p.shape[:lead], self.members, dtype=torch.float64,
                                    device=device),
                "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}

    def initial_state(self) -> dict[int, dict[str, Any]]:
        """The state each parameter's first step creates (``rlzoo.optim.adam.initial_state``), by
        index: the step counts on the device :meth:`step` keeps them on, one per member of
        each ensemble the parameter holds (``[L?, M]``: its axes before the members)."""
        params = [p for group in self.param_groups for p in group["params"]]
        device = None if self.on_device() else torch.device("cpu")
        return {i: self._new_state(p, p.dim() - self._ranks[p], device or p.device)
                for i, p in enumerate(params)}

    def _check_lead(self, p: torch.Tensor, lead: tuple[int, ...]) -> None:
        """Refuse ``member`` of shape ``lead`` for parameter ``p`` unless ``p`` is
        ``[*lead, M, ...]`` with ``[M, ...]`` its shape as built (shapes only: no host read)."""
        if (p.dim() != self._ranks[p] + len(lead)
                or tuple(p.shape[:len(lead) + 1]) != (*lead, self.members)):
            raise ValueError(f"MemberAdam.step got {lead[0] if lead else 'one'} member(s) for "
                             f"a parameter of shape {tuple(p.shape)} ({self.members} members)")

    @staticmethod
    def _slices(member: int | Sequence[int]) -> list[tuple[int, ...]]:
        """The indices stepped: ``(member,)`` for one index, ``(l, member_l)`` for a row."""
        if isinstance(member, int):
            return [(member,)]
        return list(enumerate(int(m) for m in member))
