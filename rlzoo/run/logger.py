"""TensorBoard scalars, the progress bar and progress lines.

Tags: ``train/episode_return``, ``train/episode_length``, ``eval/return``, ``loss/<name>``,
``stats/<name>``, ``perf/sps``, ``perf/updates_per_sec`` (and the GIF ``eval/video`` with
``eval.video_every``); the x-axis is always env steps.

Progress lines (step/total, steps/s over the last ``RATE_WINDOW_S`` seconds, the last training
episode's return, the last evaluation's return, elapsed time and an estimate of the time left from
the learning phase's own rate: the random warm-up, often 50x faster, never enters it; speeds and
their phases are :mod:`rlzoo.run.progress`'s) go through the ``rlzoo`` logger when learning
starts (and ``FIRST_ESTIMATE_S`` later, with a first estimate), at each evaluation and every
``progress_every_s`` seconds (``auto``, the default: every ``AUTO_EVERY_S`` seconds, every
``AUTO_LONG_EVERY_S`` once the learning phase's measured pace says the run takes ``LONG_RUN_S``
or more): to stderr as
``rlzoo: <line>`` (not while a tqdm bar shows the same on a terminal) and always to the run
dir's ``train.log``. Under Hydra, ``train.log`` is Hydra's job log file (its handler on the root
logger is reused); otherwise (a resumed run) the Logger opens ``<run dir>/train.log`` for
appending. While a Logger is open the ``rlzoo`` logger does not propagate to the root logger,
whose Hydra console handler writes to stdout: each line is printed once, on stderr.
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from rlzoo.errors import UserError, resume_command
from rlzoo.run.progress import Rates, duration
from rlzoo.store.rundir import check_run_dir
from rlzoo.store.writer import check_inside, check_open, open_regular

LOG = logging.getLogger("rlzoo")
AUTO_EVERY_S = 60.0  # log.progress_every_s=auto: s between time-based progress lines ...
AUTO_LONG_EVERY_S = 300.0  # ... and once the run is expected to take LONG_RUN_S or more
LONG_RUN_S = 3600.0  # elapsed + time left (this process, the learning phase's rate)
POSTFIX_EVERY_S = 1.0  # seconds between refreshes of the bar's rate and eta
FIRST_ESTIMATE_S = 30.0  # s into learning: the first line with an eta (if progress_every_s > it)
# tqdm's own rate and eta would mix in the warm-up: the bar shows ours (postfix) instead
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
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
            if getattr(record, "file_only", False) or (shown and getattr(record, "progress",
                                                                         False)):
                return
            line = f"rlzoo: {record.getMessage()}"
            if shown:
                tqdm.write(line, file=sys.stderr)
            else:
                print(line, file=sys.stderr, flush=True)
        except OSError:  # stderr's reader is gone (a `| tee` stopped by Ctrl-C): train.log has it
            pass
        except Exception:  # noqa: BLE001 - logging must never stop training
            self.handleError(record)


class _RunLog(logging.FileHandler):
    """``train.log``, opened for appending at once (a failure is one line now, not a traceback
    at the first record) and never through a link or into a FIFO (``rlzoo.store.writer``)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, mode="a", encoding="utf-8", delay=True)
        self.stream = self._open()

    def _open(self) -> Any:
        path = Path(self.baseFilename)
        try:
            fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as err:
            raise UserError(f"cannot write {path} ({err.strerror or err})") from None
        return os.fdopen(fd, "a", encoding="utf-8")


CHECK_DIR_EVERY_S = 1.0  # seconds between checks that the run dir still exists
_previous_hook = threading.excepthook


def _quiet_event_writer(args: threading.ExceptHookArgs) -> None:
    """TensorBoard's writer thread dies on an ``OSError`` (its run dir deleted, a full disk)
    with a raw traceback; the Logger reports the same error in one line from the main thread
    (the writer raises it again there), so the thread's traceback is not printed."""
    if type(args.thread).__name__ == "_AsyncWriterThread" and issubclass(args.exc_type, OSError):
        return
    _previous_hook(args)


class Logger:
    """Writes event files into ``run_dir`` and drives a tqdm bar.

    Args:
        run_dir: directory of the event files.
        total_steps: length of the progress bar.
        progress: ``auto`` (a bar only when stderr is a terminal), ``True`` or ``False``.
        initial_step: where the bar starts (resumed runs); TensorBoard drops any event at or
            after ``purge_step`` left by a run that crashed after its last checkpoint.
        purge_step: see above (``None`` for a fresh run).
        progress_every_s: seconds between time-based progress lines (``log.progress_every_s``);
            0 = progress lines only at evaluations; ``"auto"`` (default) = ``AUTO_EVERY_S``
            while the run's expected length (elapsed + time left at the learning phase's rate)
            is under ``LONG_RUN_S`` or not measured yet, ``AUTO_LONG_EVERY_S`` once it is not.
        text: route the ``rlzoo`` log lines to stderr and ``train.log`` (default); the other
            members of a seed group write only their event files, so each line appears once.
        learning_starts: the env step where the warm-up ends (``algo.learning_starts``; 0 when
            there is none): the estimate of the time left uses only steps from here on.
    """

    def __init__(
        self,
        run_dir: Path,
        total_steps: int,
        progress: str | bool = "auto",
        initial_step: int = 0,
        purge_step: int | None = None,
        progress_every_s: float | str = "auto",
        text: bool = True,
        learning_starts: int = 0,
    ) -> None:
        threading.excepthook = _quiet_event_writer
        self.run_dir = Path(run_dir)
        self._last_check = time.monotonic()
        # a name nobody could have planted a link at: TensorBoard's writer opens its event
        # file by name at each write (rlzoo.store.writer' rule, for a library that writes in place)
        self.writer = SummaryWriter(str(run_dir), purge_step=purge_step,
                                    filename_suffix=f".{secrets.token_hex(8)}")
        show = (sys.stderr.isatty() if progress == "auto" else bool(progress)) and text
        self.bar = tqdm(
            total=total_steps, initial=initial_step, disable=not show, unit="step",
            dynamic_ncols=True, bar_format=BAR_FORMAT,
        )
        self.last_return: float | None = None
        self.last_eval: tuple[float, float | None] | None = None
        self.total_steps = total_steps
        self.step = initial_step
        self.progress_every_s = (progress_every_s if progress_every_s == "auto"
                                 else float(progress_every_s))
        self._start = self._last_line = self._last_postfix = time.monotonic()
        self.learning_starts = int(learning_starts)
        self.rates = Rates(self._start, initial_step, self.learning_starts)
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
        check_inside(run_dir, run_dir / "train.log")  # a link there: one line, nothing written
        target = run_dir.resolve() / "train.log"
        files = [
            h for h in logging.getLogger().handlers
            if isinstance(h, logging.FileHandler) and Path(h.baseFilename).resolve() == target
        ]
        for handler in files:  # Hydra's: opened by name; its descriptor checked as ours are
            if handler.stream is not None:
                check_open(run_dir / "train.log", handler.stream.fileno())
        if not files:
            own = _RunLog(target)
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

    def record(self, message: str) -> None:
        """One line to ``train.log`` only (the caller reports it on stderr itself): how the
        run stopped, e.g. the signal, the checkpoint and the resume command."""
        if self.text:
            LOG.info(message, extra={"file_only": True})

    def speeds(self) -> dict[str, float | None]:
        """This process's ``learning_steps_per_sec`` and ``warmup_steps_per_sec`` (None when
        it had no such phase), for summary.json and the final line."""
        return self.rates.summary(time.monotonic())

    def progress_line(self) -> str:
        """``step S/T (P%) | R steps/s | train return X | eval return Y ± Z | elapsed, eta``;
        steps/s is measured over the last ``RATE_WINDOW_S`` seconds (``(warm-up)`` while the
        random warm-up runs), the time left from the learning phase's average rate."""
        now = time.monotonic()
        self.rates.sample(now, self.step)
        total = max(self.total_steps, 1)
        parts = [f"step {self.step}/{self.total_steps} ({100.0 * self.step / total:.0f}%)",
                 self.rates.shown(now)]
        train = "n/a" if self.last_return is None else f"{self.last_return:.1f}"
        parts.append(f"train return {train}")
        if self.last_eval is None:
            parts.append("eval return n/a")
        else:
            mean, std = self.last_eval
            parts.append(f"eval return {mean:.1f}" + ("" if std is None else f" ± {std:.1f}"))
        eta = self.rates.eta(now, self.total_steps)
        parts.append(f"elapsed {duration(now - self._start)}, eta {eta}")
        return " | ".join(parts)

    def _progress(self) -> None:
        if not self.text:
            return
        self._last_line = time.monotonic()
        LOG.info(self.progress_line(), extra={"progress": True})

    def _events(self, write: Any) -> None:
        """Run ``write`` (calls of the TensorBoard writer) after checking that the run dir is
        there; an ``OSError`` of the writer (or of its thread) becomes one ``UserError``."""
        check_run_dir(self.run_dir, self.step)
        try:
            write()
        except OSError as err:
            check_run_dir(self.run_dir, self.step)
            raise UserError(
                f"cannot write TensorBoard events in {self.run_dir} "
                f"({err.strerror or err}); make the dir writable (free space), then continue "
                f"with: {resume_command(self.run_dir)}"
            ) from None

    def scalars(self, values: dict[str, float | torch.Tensor], step: int) -> None:
        """Write many scalars; tensors are read from the device in one transfer."""
        names = [k for k, v in values.items() if torch.is_tensor(v)]
        if names:
            host = torch.stack([values[k].detach().float().reshape(()) for k in names]).tolist()
            values = {**values, **dict(zip(names, host))}

        def write() -> None:
            for tag, value in values.items():
                self.writer.add_scalar(tag, float(value), step)

        self._events(write)
        if "eval/return" in values:  # an evaluation: one progress line
            std = values.get("eval/return_std")
            self.last_eval = (float(values["eval/return"]), None if std is None else float(std))
            self.step = max(self.step, step)
            self._progress()

    def episode(self, episode_return: float, step: int, length: int | None = None) -> None:
        """A finished training episode at env ``step``: ``train/episode_return`` and its
        ``length`` in env steps, ``train/episode_length`` (when known)."""
        def write() -> None:
            self.writer.add_scalar("train/episode_return", episode_return, step)
            if length is not None:
                self.writer.add_scalar("train/episode_length", length, step)

        self._events(write)
        self.last_return = episode_return

    def advance(self, n: int) -> None:
        """``n`` more env steps; a progress line when ``progress_every_s`` has passed."""
        self.bar.update(n)
        self.step += n
        now = time.monotonic()
        if self.rates.sample(now, self.step):
            self._learning_began(now)
        if now >= self._last_check + CHECK_DIR_EVERY_S:  # a deleted run dir stops the run soon
            self._last_check = now
            check_run_dir(self.run_dir, self.step)
        if not self.bar.disable and now >= self._last_postfix + POSTFIX_EVERY_S:
            self.postfix()
        every = self.every_s(now)
        if every > 0 and now >= self._last_line + every:
            self._progress()

    def every_s(self, now: float) -> float:
        """Seconds between time-based progress lines now (``progress_every_s``, resolved)."""
        if self.progress_every_s != "auto":
            return float(self.progress_every_s)
        left = self.rates.seconds_left(now, self.total_steps)
        if left is not None and now - self._start + left >= LONG_RUN_S:
            return AUTO_LONG_EVERY_S
        return AUTO_EVERY_S

    def _learning_began(self, now: float) -> None:
        """One line (train.log; stderr without a bar) when the warm-up ends, and the first line
        with an estimate of the time left ``FIRST_ESTIMATE_S`` into learning."""
        every = self.every_s(now)
        if not self.text or every <= 0:
            return
        warm = self.rates.warm_up_rate
        LOG.info(f"learning starts at step {self.step}/{self.total_steps}" + (
            "" if warm is None else f" after a random warm-up at {warm:.1f} steps/s")
            + f"; a first estimate of the time left in {FIRST_ESTIMATE_S:.0f} s",
            extra={"progress": True})
        self._last_line = now - max(every - FIRST_ESTIMATE_S, 0.0)

    def postfix(self, **values: float) -> None:
        """The bar's postfix: ``values``, the rate of the progress lines (``... steps/s``,
        ``(warm-up)`` during the warm-up), their time left and the last training return."""
        if not self.bar.disable:
            now = self._last_postfix = time.monotonic()
            self.rates.sample(now, self.step)
            shown = [f"{k}={v:.4g}" for k, v in values.items()]
            shown += [self.rates.shown(now), f"eta {self.rates.eta(now, self.total_steps)}"]
            if self.last_return is not None:
                shown.append(f"return {self.last_return:.1f}")
            self.bar.set_postfix_str(", ".join(shown), refresh=False)

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

        def write() -> None:
            self.writer.file_writer.add_summary(session_start, step)
            self.writer.file_writer.add_summary(session_end, step)
            for tag, value in metrics.items():
                self.writer.add_scalar(tag, float(value), step)

        self._events(write)

    def gif(self, tag: str, encoded: bytes, size: tuple[int, int], step: int) -> None:
        """An animated GIF (``encoded``, ``size`` = ``(height, width)``) under ``tag`` at env
        ``step``: the summary ``SummaryWriter.add_video`` writes, without its moviepy."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        image = Summary.Image(height=int(size[0]), width=int(size[1]), colorspace=3,
                              encoded_image_string=encoded)
        summary = Summary(value=[Summary.Value(tag=tag, image=image)])
        self._events(lambda: self.writer.file_writer.add_summary(summary, step))

    def flush(self) -> None:
        self._events(self.writer.flush)

    def close(self) -> None:
        """Close the bar, the event file and the text handlers (an event file that cannot be
        written is one ``UserError``, raised after everything is closed)."""
        self.bar.close()
        try:
            self._events(self.writer.close)
        finally:
            self._detach()
