"""TensorBoard scalars and the progress bar.

Tags: ``train/episode_return``, ``eval/return``, ``loss/<name>``, ``stats/<name>``, ``perf/sps``,
``perf/updates_per_sec``; the x-axis is always env steps.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm


class Logger:
    """Writes event files into ``run_dir`` and drives a tqdm bar.

    Args:
        run_dir: directory of the event files.
        total_steps: length of the progress bar.
        progress: ``auto`` (a bar only when stderr is a terminal), ``True`` or ``False``.
        initial_step: where the bar starts (resumed runs); TensorBoard drops any event at or
            after ``purge_step`` left by a run that crashed after its last checkpoint.
        purge_step: see above (``None`` for a fresh run).
    """

    def __init__(
        self,
        run_dir: Path,
        total_steps: int,
        progress: str | bool = "auto",
        initial_step: int = 0,
        purge_step: int | None = None,
    ) -> None:
        self.writer = SummaryWriter(str(run_dir), purge_step=purge_step)
        show = sys.stderr.isatty() if progress == "auto" else bool(progress)
        self.bar = tqdm(
            total=total_steps, initial=initial_step, disable=not show, unit="step",
            dynamic_ncols=True, smoothing=0.05,
        )
        self.last_return: float | None = None

    def scalars(self, values: dict[str, float | torch.Tensor], step: int) -> None:
        """Write many scalars; tensors are read from the device in one transfer."""
        names = [k for k, v in values.items() if torch.is_tensor(v)]
        if names:
            host = torch.stack([values[k].detach().float().reshape(()) for k in names]).tolist()
            values = {**values, **dict(zip(names, host))}
        for tag, value in values.items():
            self.writer.add_scalar(tag, float(value), step)

    def episode(self, episode_return: float, step: int) -> None:
        self.writer.add_scalar("train/episode_return", episode_return, step)
        self.last_return = episode_return

    def advance(self, n: int) -> None:
        self.bar.update(n)

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
