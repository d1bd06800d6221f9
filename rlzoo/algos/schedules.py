"""Learning-rate schedules as factors of an optimizer's base rate, and :class:`ScheduledRates`,
which applies them to an algorithm's optimizers from a step clock on the device.

Every schedule takes its step as a Python int (computed on the host) or as an int64 tensor
(computed on the device, with no host read, so that a CUDA graph can capture it). Both give the
same float64 value, except that ``torch.cos`` and ``math.cos`` may differ in the last bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch

Step = int | torch.Tensor
Factor = float | torch.Tensor


def ceil_div(steps: Step, period: int) -> Step:
    """``ceil(steps / period)``, exactly, for an int or an int64 tensor."""
    if isinstance(steps, torch.Tensor):
        return torch.div(steps + (period - 1), period, rounding_mode="floor")
    return -(-steps // period)


def linear_decay(step: Step, end_fraction: float, decay: int) -> Factor:
    """``1 - (1 - end_fraction) min(step / decay, 1)``: from 1 at step 0 linearly down to
    ``end_fraction`` at step ``decay``, then ``end_fraction`` (optax's ``linear_schedule``)."""
    if isinstance(step, torch.Tensor):
        fraction = torch.clamp(step.to(torch.float64) / decay, max=1.0)
    else:
        fraction = min(step / decay, 1.0)
    return 1.0 - (1.0 - end_fraction) * fraction


def warmup_cosine(step: Step, init_fraction: float, end_fraction: float, warmup: int,
                  decay: int) -> Factor:
    """The factor at optimizer step ``step`` (0 = the first step) of a linear warm-up from
    ``init_fraction`` to 1 over ``warmup`` steps, then a cosine decay to ``end_fraction`` that
    ends at step ``decay`` (counted from 0, warm-up included, as optax's
    ``warmup_cosine_decay_schedule`` and FlashSAC's ``warmup_cosine_decay_scheduler``), then
    ``end_fraction`` for good."""
    if isinstance(step, torch.Tensor):
        t = step.to(torch.float64)
        warm = init_fraction + (1.0 - init_fraction) * t / max(warmup, 1)
        progress = (t - warmup) / (decay - warmup)
        cosine = end_fraction + (1.0 - end_fraction) * 0.5 * (1.0 + torch.cos(math.pi * progress))
        return torch.where(t < warmup, warm,
                           torch.where(t < decay, cosine, torch.full_like(t, end_fraction)))
    if step < warmup:
        return init_fraction + (1.0 - init_fraction) * step / warmup
    if step < decay:
        progress = (step - warmup) / (decay - warmup)
        return end_fraction + (1.0 - end_fraction) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return end_fraction


class ScheduledRates:
    """The learning rates of an algorithm's optimizers, ``initial * factor(name, updates)``, set
    before each update.

    Each optimizer's rate is a 0-d tensor on its parameters' device
    (``rlzoo.optim.adam.Adam.set_lr``)
    and ``clock`` an int64 tensor there counting the updates done. On CUDA, or whenever the
    optimizers are capturable (``cudagraphs``), the factors are computed from ``clock`` on the
    device and written into the rates in place: the update reads nothing from the host, and a
    captured graph advances the schedule at each replay. On the CPU they are computed on the
    host from the update count (the rates then hold exactly the Python floats they always did).

    Args:
        optimizers: the algorithm's optimizers by name; their current rate is the initial one.
        factor: ``factor(name, updates)``, a schedule of this module taking an int or a tensor.
    """

    def __init__(self, optimizers: Mapping[str, torch.optim.Optimizer],
                 factor: Callable[[str, Step], Factor]) -> None:
        self.optimizers, self.factor = dict(optimizers), factor
        self.initial = {name: float(opt.param_groups[0]["lr"])
                        for name, opt in self.optimizers.items()}
        self.clock = torch.zeros((), dtype=torch.int64)
        self.rates: dict[str, torch.Tensor] = {}
        self.to_device()

    def device(self) -> torch.device:
        first = next(iter(self.optimizers.values()))
        return first.param_groups[0]["params"][0].device

    def to_device(self) -> None:
        """Put the clock and the rates beside the parameters (after ``Module.to``): float64
        rates on the CPU, float32 on CUDA (the dtype its fused Adam reads)."""
        device = self.device()
        dtype = torch.float64 if device.type == "cpu" else torch.float32
        self.clock = self.clock.to(device)
        for name, opt in self.optimizers.items():
            rate = self.rates.get(name)
            if rate is None or rate.device != device or rate.dtype != dtype:
                value = self.initial[name] if rate is None else rate
                rate = torch.as_tensor(value, dtype=torch.float64).to(device=device, dtype=dtype)
                self.rates[name] = rate
                opt.set_lr(rate)  # type: ignore[attr-defined]

    def on_host(self) -> bool:
        """Whether the factors are computed on the host: CPU parameters, not capturable."""
        return self.clock.device.type == "cpu" and not any(
            group.get("capturable", False)
            for opt in self.optimizers.values() for group in opt.param_groups)

    @torch.no_grad()
    def apply(self, updates: int) -> None:
        """Set every rate for the update about to run (``updates`` done before it)."""
        for name, rate in self.rates.items():
            if self.on_host():
                rate.fill_(self.initial[name] * self.factor(name, updates))
            else:
                rate.copy_(self.initial[name] * self.factor(name, self.clock))

    @torch.no_grad()
    def tick(self) -> None:
        """One update done."""
        self.clock.add_(1)

    @torch.no_grad()
    def reset(self, updates: int) -> None:
        """Set the clock to ``updates`` (a checkpoint's count, on load)."""
        self.clock.fill_(updates)
