"""TensorBoard scalars, the progress bar and progress lines.

Tags: ``train/episode_return``, ``eval/return``, ``loss/<name>``, ``stats/<name>``, ``perf/sps``,
``perf/updates_per_sec``; the x-axis is always env steps.

Progress lines (step/total, steps/s, the last training episode's return, the last evaluation's
return, elapsed time and an estimate of the time left) go through the ``rlzoo`` logger at each
evaluation and every ``progress_every_s`` seconds: to stderr as ``rlzoo: <line>`` (not while a
tqdm bar shows the same on a terminal) and always to the run dir's ``train.log``. Under Hydra,
``train.log`` is Hydra's job log file (its handler on the root logger is reused); otherwise (a
resumed run) the Logger opens ``<run dir>/train.log`` for appending. While a Logger is open the
``rlzoo`` logger does not propagate to the root logger, whose Hydra console handler writes to
stdout: each line is printed once, on stderr.
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

LOG = logging.getLogger("rlzoo")
PROGRESS_EVERY_S = 300.0  # default seconds between time-based progress lines
FILE_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"  # as Hydra's job log


class _Stderr(logging.Handler):
    """``rlzoo: <message>`` on the current ``sys.stderr`` (above the bar when one is shown).

    Records marked ``progress`` are dropped while a bar is shown: the bar already says it."""

    def __init__(self, bar: tqdm) -> None:
        super().__init__(logging.INFO)
        self.bar = bar
        self._rlzoo = True

    def emit(self, record: logging.LogRecord) -> None:
        try:
            shown = not self.bar.disable
            if shown and getattr(record, "progress", False):
                return
            line = f"rlzoo: {record.getMessage()}"
            if shown:
                tqdm.write(line, file=sys.stderr)
            else:
                print(line, file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 - logging must never stop training
            self.handleError(record)


def _duration(seconds: float) -> str:
    return str(timedelta(seconds=int(max(seconds, 0.0))))


class Logger:
    """Writes event files into ``run_dir`` and drives a tqdm bar.

    Args:
        run_dir: directory of the event files.
        total_steps: length of the progress bar.
        progress: ``auto`` (a bar only when stderr is a terminal), ``True`` or ``False``.
        initial_step: where the bar starts (resumed runs); TensorBoard drops any event at or
            after ``purge_step`` left by a run that crashed after its last checkpoint.
        purge_step: see above (``None`` for a fresh run).
        progress_every_s: seconds between time-based progress lines (``log.progress_every_s``,
            default 300); 0 = progress lines only at evaluations.
        text: route the ``rlzoo`` log lines to stderr and ``train.log`` (default); the other
            members of a seed group write only their event files, so each line appears once.
    """

    def __init__(
        self,
        run_dir: Path,
        total_steps: int,
        progress: str | bool = "auto",
        initial_step: int = 0,
        purge_step: int | None = None,
        progress_every_s: float = PROGRESS_EVERY_S,
        text: bool = True,
    ) -> None:
        self.writer = SummaryWriter(str(run_dir), purge_step=purge_step)
        show = (sys.stderr.isatty() if progress == "auto" else bool(progress)) and text
        self.bar = tqdm(
            total=total_steps, initial=initial_step, disable=not show, unit="step",
            dynamic_ncols=True, smoothing=0.05,
        )
        self.last_return: float | None = None
        self.last_eval: tuple[float, float | None] | None = None
        self.total_steps = total_steps
        self.step = initial_step
        self.progress_every_s = float(progress_every_s)
        self._start_step = initial_step
        self._start = self._last_line = time.monotonic()
        self._handlers: list[logging.Handler] = []
        self._owned: list[logging.Handler] = []
        self._saved = (LOG.propagate, LOG.level)
        self.text = text
        if text:
            self._attach(Path(run_dir))

    # ------------------------------------------------------------------ text lines
    def _attach(self, run_dir: Path) -> None:
        """Route the ``rlzoo`` logger to stderr and ``<run dir>/train.log`` (once each)."""
        for handler in list(LOG.handlers):  # left by a Logger that was never closed
            if getattr(handler, "_rlzoo", False):
                LOG.removeHandler(handler)
                handler.close()
                self._saved = (True, logging.NOTSET)  # the logging module's defaults
        target = (run_dir / "train.log").resolve()
        files = [
            h for h in logging.getLogger().handlers
            if isinstance(h, logging.FileHandler) and Path(h.baseFilename).resolve() == target
        ]
        if not files:
            own = logging.FileHandler(target, encoding="utf-8", delay=True)
            own.setFormatter(logging.Formatter(FILE_FORMAT))
            own._rlzoo = True  # type: ignore[attr-defined]
            files = [own]
            self._owned.append(own)
        stderr = _Stderr(self.bar)
        self._owned.append(stderr)
        self._handlers = [stderr, *files]
        for handler in self._handlers:
            LOG.addHandler(handler)
        LOG.propagate = False  # Hydra's console handler on the root logger writes to stdout
        LOG.setLevel(logging.INFO)

    def _detach(self) -> None:
        if not self._handlers and not self._owned:  # never attached (text=False)
            return
        for handler in self._handlers:
            LOG.removeHandler(handler)
        for handler in self._owned:
            handler.close()
        self._handlers, self._owned = [], []
        LOG.propagate, level = self._saved
        LOG.setLevel(level)

    def announce(self, message: str) -> None:
        """One line to stderr (``rlzoo: <message>``, above the bar if one is shown) and to
        ``train.log``; e.g. the run dir at the start of a run."""
        LOG.info(message)

    def progress_line(self) -> str:
        """``step S/T (P%) | R steps/s | train return X | eval return Y ± Z | elapsed, eta``;
        steps/s is the average since this process started training."""
        now = time.monotonic()
        elapsed = now - self._start
        rate = (self.step - self._start_step) / elapsed if elapsed > 0 else 0.0
        total = max(self.total_steps, 1)
        parts = [f"step {self.step}/{self.total_steps} ({100.0 * self.step / total:.0f}%)",
                 f"{rate:.1f} steps/s"]
        train = "n/a" if self.last_return is None else f"{self.last_return:.1f}"
        parts.append(f"train return {train}")
        if self.last_eval is None:
            parts.append("eval return n/a")
        else:
            mean, std = self.last_eval
            parts.append(f"eval return {mean:.1f}" + ("" if std is None else f" ± {std:.1f}"))
        left = max(self.total_steps - self.step, 0)
        eta = _duration(left / rate) if rate > 0 else "n/a"
        parts.append(f"elapsed {_duration(elapsed)}, eta {eta}")
        return " | ".join(parts)

    def _progress(self) -> None:
        if not self.text:
            return
        self._last_line = time.monotonic()
        LOG.info(self.progress_line(), extra={"progress": True})

    def scalars(self, values: dict[str, float | torch.Tensor], step: int) -> None:
        """Write many scalars; tensors are read from the device in one transfer."""
        names = [k for k, v in values.items() if torch.is_tensor(v)]
        if names:
            host = torch.stack([values[k].detach().float().reshape(()) for k in names]).tolist()
            values = {**values, **dict(zip(names, host))}
        for tag, value in values.items():
            self.writer.add_scalar(tag, float(value), step)
        if "eval/return" in values:  # an evaluation: one progress line
            std = values.get("eval/return_std")
            self.last_eval = (float(values["eval/return"]), None if std is None else float(std))
            self.step = max(self.step, step)
            self._progress()

    def episode(self, episode_return: float, step: int) -> None:
        self.writer.add_scalar("train/episode_return", episode_return, step)
        self.last_return = episode_return

    def advance(self, n: int) -> None:
        """``n`` more env steps; a progress line when ``progress_every_s`` has passed."""
        self.bar.update(n)
        self.step += n
        every = self.progress_every_s
        if every > 0 and time.monotonic() >= self._last_line + every:
            self._progress()

    def postfix(self, **values: float) -> None:
        if not self.bar.disable:
            shown = {k: f"{v:.4g}" for k, v in values.items()}
            if self.last_return is not None:
                shown["return"] = f"{self.last_return:.1f}"
            self.bar.set_postfix(shown, refresh=False)

    def hparams(
        self,
        hparams: dict[str, float | int | str | bool],
        metrics: dict[str, float],
        step: int | None = None,
    ) -> None:
        """Record hyperparameters for TensorBoard's HPARAMS view in this run's own event file.

        Writes the session start/end summaries and the ``metrics`` as scalars, but no per-run
        "experiment" summary (``SummaryWriter.add_hparams`` writes one, into a second event file):
        TensorBoard uses the first experiment summary it finds for the whole table, so with one
        per run only the first run's hyperparameters (a TD3 run's ``algo.policy_noise`` missing
        from a SAC-first table) and metrics would be columns. Without it, the columns are the
        union of every run's hyperparameters and every scalar tag (``eval/return``, ...).
        """
        from torch.utils.tensorboard.summary import hparams as hparams_summaries

        _, session_start, session_end = hparams_summaries(hparams, metrics)
        self.writer.file_writer.add_summary(session_start, step)
        self.writer.file_writer.add_summary(session_end, step)
        for tag, value in metrics.items():
            self.writer.add_scalar(tag, float(value), step)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.bar.close()
        self.writer.close()
        self._detach()
