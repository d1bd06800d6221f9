"""The speeds a run reports, phase by phase: the random warm-up (``algo.learning_starts`` env
steps of uniform actions, often 20-50x faster than learning) and the learning phase.

Every rate shown (the bar, the progress lines, the final line, ``summary.json``) comes from here:
once learning has started it is the learning phase's rate and the time left follows from it; the
warm-up's rate is only ever shown marked as such. :class:`Rates` keeps ``(time, env step)``
samples of one process (a resumed run starts afresh) on ``time.monotonic()``'s clock, in seconds.
"""

from __future__ import annotations

import math
from collections import deque
from datetime import timedelta

from omegaconf import DictConfig, OmegaConf

from rlzoo.errors import UserError

RATE_WINDOW_S = 60.0
"""The recent rate of the bar and the progress lines: over the last minute (within one phase)."""


def duration(seconds: float) -> str:
    """``seconds`` as ``H:MM:SS`` (``3 days, 12:00:00`` beyond a day; negative = 0)."""
    return str(timedelta(seconds=int(max(seconds, 0.0))))


class Rates:
    """Env steps per second of one process's run, kept per phase.

    Args:
        now: the time the run (this process) starts, in ``time.monotonic()`` seconds.
        step: the env step it starts at (a resumed run's checkpointed step).
        learning_starts: the env step where the warm-up ends (0: no warm-up).
    """

    def __init__(self, now: float, step: int, learning_starts: int) -> None:
        self.learning_starts = int(learning_starts)
        self.step = int(step)
        # (time, step) samples of the last RATE_WINDOW_S seconds (one older, the window's start)
        self.recent_samples: deque[tuple[float, int]] = deque([(now, step)])
        self.warm_up_from = (now, step) if step < self.learning_starts else None
        self.learning_from = None if self.warm_up_from else (now, step)
        self.warm_up_rate: float | None = None  # the warm-up's average, once it is over

    def sample(self, now: float, step: int) -> bool:
        """Record that the run is at ``step`` at ``now``; True when this sample ends the warm-up
        (the recent window restarts: a rate straddling both phases would mix them)."""
        self.step = int(step)
        began = self.learning_from is None and step >= self.learning_starts
        if began:
            self.learning_from = (now, step)
            self.warm_up_rate = self._average(self.warm_up_from, now)
            self.recent_samples.clear()
        self.recent_samples.append((now, step))
        while (len(self.recent_samples) > 2
               and self.recent_samples[1][0] <= now - RATE_WINDOW_S):
            self.recent_samples.popleft()
        return began

    @property
    def warming_up(self) -> bool:
        """The run is still in its random warm-up."""
        return self.learning_from is None

    def _average(self, since: tuple[float, int] | None, now: float) -> float | None:
        if since is None:
            return None
        t0, s0 = since
        return (self.step - s0) / (now - t0) if now > t0 and self.step > s0 else None

    def recent(self, now: float) -> float | None:
        """Env steps/s over the last ``RATE_WINDOW_S`` seconds of the current phase; None before
        two samples of it exist."""
        return self._average(self.recent_samples[0] if self.recent_samples else None, now)

    def learning(self, now: float) -> float | None:
        """Env steps/s since learning began in this process; None before it is measured."""
        return self._average(self.learning_from, now)

    def warm_up(self, now: float) -> float | None:
        """The warm-up's env steps/s in this process (so far, while it runs); None without one."""
        if self.warming_up:
            return self._average(self.warm_up_from, now)
        return self.warm_up_rate

    def shown(self, now: float) -> str:
        """The rate to show: ``12.3 steps/s``, ``1234.5 steps/s (warm-up)``, ``n/a steps/s``."""
        rate = self.recent(now)
        text = "n/a steps/s" if rate is None else f"{rate:.1f} steps/s"
        return text + (" (warm-up)" if self.warming_up else "")

    def seconds_left(self, now: float, total_steps: int) -> float | None:
        """Seconds to ``total_steps`` at the learning phase's rate; None before that rate is
        measured (the warm-up's speed says nothing about learning's)."""
        left = max(total_steps - self.step, 0)
        if left == 0:
            return 0.0
        learning = self.learning(now)
        return left / learning if learning else None

    def eta(self, now: float, total_steps: int) -> str:
        """:meth:`seconds_left` as ``H:MM:SS`` (``n/a (warm-up)`` before it is measured)."""
        left = self.seconds_left(now, total_steps)
        if left is not None:
            return duration(left)
        return "n/a (warm-up)" if self.warming_up else "n/a (learning just started)"

    def summary(self, now: float) -> dict[str, float | None]:
        """``learning_steps_per_sec`` (None if this process never learned) and
        ``warmup_steps_per_sec`` (None without a warm-up in this process), for summary.json."""
        return {"learning_steps_per_sec": self.learning(now),
                "warmup_steps_per_sec": self.warm_up(now)}


def speed_words(summary: dict) -> str:
    """The final line's speed from a ``summary.json``: ``1.9 steps/s learning, warm-up 74.9
    steps/s`` (or ``24.8 steps/s`` when the run had no learning phase in this process)."""
    learning, warm = summary.get("learning_steps_per_sec"), summary.get("warmup_steps_per_sec")
    if learning is None:
        return f"{summary['steps_per_sec']:.1f} steps/s"
    return f"{learning:.1f} steps/s learning" + (
        "" if warm is None else f", warm-up {warm:.1f} steps/s")


def read_progress_every(cfg: DictConfig) -> float | str:
    """``log.progress_every_s``: seconds (>= 0) or ``"auto"`` (a run dir older than the key has
    300, its value then: ``rlzoo.conf.history.SETTINGS_ADDED``)."""
    every_s = OmegaConf.select(cfg, "log.progress_every_s")
    if every_s == "auto":
        return every_s
    if (isinstance(every_s, bool) or not isinstance(every_s, (int, float))
            or not math.isfinite(every_s) or every_s < 0):
        raise UserError(f"log.progress_every_s must be auto or a number of seconds >= 0, got "
                        f"{every_s!r}; e.g. log.progress_every_s=60")
    return float(every_s)
