"""Learning-rate schedules as factors of an optimizer's base rate."""

from __future__ import annotations

import math


def warmup_cosine(step: int, init_fraction: float, end_fraction: float, warmup: int,
                  decay: int) -> float:
    """The factor at optimizer step ``step`` (0 = the first step) of a linear warm-up from
    ``init_fraction`` to 1 over ``warmup`` steps, then a cosine decay to ``end_fraction`` that
    ends at step ``decay`` (counted from 0, warm-up included, as optax's
    ``warmup_cosine_decay_schedule`` and FlashSAC's ``warmup_cosine_decay_scheduler``), then
    ``end_fraction`` for good."""
    if step < warmup:
        return init_fraction + (1.0 - init_fraction) * step / warmup
    if step < decay:
        progress = (step - warmup) / (decay - warmup)
        return end_fraction + (1.0 - end_fraction) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return end_fraction
