"""Outside a terminal (nohup, SLURM, CI) a run still reports progress: one line at each
evaluation and every ``log.progress_every_s`` seconds, on stderr and in ``train.log``."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from conftest import REPO, TINY, run_cli
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlzoo.run import logger as logger_module
from rlzoo.run.logger import LOG, Logger

LINE = re.compile(r"step (\d+)/(\d+) \(\d+%\) \| (?:[\d.]+|n/a) steps/s(?: \(warm-up\))? \| "
                  r"train return \S+ \| eval return (\S+)")


def progress_lines(text: str) -> list[re.Match[str]]:
    return [m for m in map(LINE.search, text.splitlines()) if m]


def test_cli_progress_without_terminal(tmp_path: Path) -> None:
    """stderr is a pipe here, as under nohup/SLURM/CI: a line per evaluation on stderr (not on
    stdout, not twice) and the same lines in the run dir's train.log."""
    run_dir = tmp_path / "run"
    proc = run_cli(
        ["algo=sac", "env=Pendulum", "total_steps=300", "algo.learning_starts=100",
         "eval.every=100", "eval.episodes=1", "checkpoint.every=0", "torch_threads=1", *TINY],
        run_dir,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = progress_lines(proc.stderr)
    assert [int(m.group(1)) for m in lines] == [100, 200, 300], proc.stderr
    assert all(m.group(2) == "300" for m in lines)
    assert all(m.group(3) != "n/a" for m in lines)  # the evaluation's return
    assert all(line.startswith("rlzoo: ") for line in proc.stderr.splitlines() if LINE.search(line))
    assert not progress_lines(proc.stdout), proc.stdout
    logged = progress_lines((run_dir / "train.log").read_text())
    assert [int(m.group(1)) for m in logged] == [100, 200, 300]
    # the warm-up's end is said once; the final line and summary.json give each phase's speed
    assert proc.stderr.count("rlzoo: learning starts at step 100/300 after a random warm-up at ")\
        == 1, proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    learning, warm = summary["learning_steps_per_sec"], summary["warmup_steps_per_sec"]
    assert learning > 0 and warm > 0 and summary["steps_per_sec"] == learning
    assert f"({learning:.1f} steps/s learning, warm-up {warm:.1f} steps/s)" in proc.stdout
    # Pendulum's episodes end at its 200-step time limit: one episode, one length
    (events,) = run_dir.glob("events.out.tfevents.*")
    acc = EventAccumulator(str(events))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("train/episode_length")] == [(200, 200.0)]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(logger_module.time, "monotonic", fake)
    return fake


def test_time_based_lines(tmp_path: Path, clock: Clock, capsys: pytest.CaptureFixture) -> None:
    log = Logger(tmp_path, total_steps=1000, progress=False, progress_every_s=60.0)
    log.episode(-12.5, 10)
    log.advance(10)
    clock.now += 59.0
    log.advance(10)
    assert not progress_lines(capsys.readouterr().err)  # not yet
    clock.now += 2.0
    log.advance(10)
    err = capsys.readouterr().err
    (line,) = progress_lines(err)
    assert line.group(1) == "30" and line.group(3) == "n/a"
    assert "train return -12.5" in err
    clock.now += 30.0
    log.advance(10)  # 30 s after the last line: none
    log.scalars({"eval/return": 3.0, "eval/return_std": 0.5}, 40)  # an evaluation: one line
    (line,) = progress_lines(capsys.readouterr().err)
    assert line.group(1) == "40" and "eval return 3.0 ± 0.5" in line.string
    log.close()
    assert len(progress_lines((tmp_path / "train.log").read_text())) == 2


def test_every_zero_means_evaluations_only(
    tmp_path: Path, clock: Clock, capsys: pytest.CaptureFixture
) -> None:
    log = Logger(tmp_path, total_steps=100, progress=False, progress_every_s=0)
    for _ in range(10):
        clock.now += 1e6
        log.advance(5)
    log.close()
    assert not progress_lines(capsys.readouterr().err)


def test_bar_shown_lines_go_to_train_log_only(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """With a bar on the terminal, progress lines would repeat it: train.log only. Announcements
    (the run dir) go to both."""
    log = Logger(tmp_path, total_steps=100, progress=True)
    log.announce(f"run dir {tmp_path}")
    log.advance(50)
    log.scalars({"eval/return": 1.0}, 50)
    log.close()
    err = capsys.readouterr().err
    assert f"rlzoo: run dir {tmp_path}" in err
    assert not progress_lines(err)
    text = (tmp_path / "train.log").read_text()
    assert f"run dir {tmp_path}" in text
    assert len(progress_lines(text)) == 1


def test_reuses_hydra_file_handler_and_restores_logging(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Under Hydra the root logger already writes train.log (and stdout): each line is written
    once, to stderr, and the logging setup is restored on close."""
    root = logging.getLogger()
    hydra_file = logging.FileHandler(tmp_path / "train.log")
    root.addHandler(hydra_file)
    try:
        log = Logger(tmp_path, total_steps=10, progress=False)
        log.announce("hello")
        log.close()
    finally:
        root.removeHandler(hydra_file)
        hydra_file.close()
    assert (tmp_path / "train.log").read_text().count("hello") == 1
    out = capsys.readouterr()
    assert out.err.count("rlzoo: hello") == 1 and "hello" not in out.out
    assert LOG.propagate and not [h for h in LOG.handlers if getattr(h, "_rlzoo", False)]


def test_resumed_run_appends_to_train_log(tmp_path: Path) -> None:
    (tmp_path / "train.log").write_text("earlier line\n")
    log = Logger(tmp_path, total_steps=200, progress=False, initial_step=100)
    log.scalars({"eval/return": 2.0}, 150)
    log.close()
    text = (tmp_path / "train.log").read_text()
    assert text.startswith("earlier line\n")
    (line,) = progress_lines(text)
    assert line.group(1) == "150" and line.group(2) == "200"


def test_steps_per_second_and_eta_tell_the_truth_after_the_warm_up(
    tmp_path: Path, clock: Clock
) -> None:
    """A warm-up at 1000 steps/s, then learning at 10 steps/s: the line shows the recent rate
    (the last RATE_WINDOW_S seconds, within the phase) and the time left at the learning rate."""
    log = Logger(tmp_path, total_steps=10_000, progress=False, progress_every_s=0,
                 learning_starts=1000)
    assert "n/a steps/s (warm-up)" in log.progress_line() and "eta n/a (warm-up)" in \
        log.progress_line()
    for _ in range(10):  # 1000 random steps in 1 s
        clock.now += 0.1
        log.advance(100)
    line = log.progress_line()
    assert "step 1000/10000 (10%) | n/a steps/s | " in line, line  # learning has just begun
    assert line.endswith("elapsed 0:00:01, eta n/a (learning just started)"), line
    for _ in range(30):  # 30 s of learning at 10 steps/s
        clock.now += 1.0
        log.advance(10)
    line = log.progress_line()
    assert "step 1300/10000 (13%) | 10.0 steps/s | " in line, line
    assert line.endswith("elapsed 0:00:31, eta 0:14:30"), line  # 8700 steps at 10 steps/s
    for _ in range(120):  # the learning phase slows to 5 steps/s for 2 minutes
        clock.now += 1.0
        log.advance(5)
    line = log.progress_line()
    assert "step 1900/10000 (19%) | 5.0 steps/s | " in line, line  # the last minute only
    # the time left: 900 learning steps in 150 s = 6 steps/s, 8100 steps left
    assert line.endswith("elapsed 0:02:31, eta 0:22:30"), line
    log.close()


def test_the_bar_shows_the_learning_rate_and_its_eta_never_tqdms(
    tmp_path: Path, clock: Clock
) -> None:
    """tqdm's own rate and eta average over the warm-up (75 steps/s shown for a run learning at
    3.3): the bar shows the progress lines' rate, marked during the warm-up, and their eta."""
    log = Logger(tmp_path, total_steps=10_000, progress=True, progress_every_s=0,
                 learning_starts=1000)
    for _ in range(10):  # 1000 random steps in 1 s
        clock.now += 0.1
        log.advance(100)
        if log.step == 500:
            log.postfix()
            assert log.bar.postfix == "1000.0 steps/s (warm-up), eta n/a (warm-up)"
    log.postfix()
    assert "(learning just started)" in log.bar.postfix, log.bar.postfix
    for _ in range(90):
        clock.now += 1.0
        log.advance(40)
    log.postfix()
    assert log.bar.postfix == "40.0 steps/s, eta 0:02:15", log.bar.postfix  # 5400 at 40/s
    log.episode(-5.0, 4600)
    log.postfix()
    assert log.bar.postfix == "40.0 steps/s, eta 0:02:15, return -5.0", log.bar.postfix
    shown = str(log.bar)
    assert "40.0 steps/s" in shown and "step/s" not in shown and "<" not in shown, shown
    log.close()


def test_learning_start_is_announced_and_a_first_eta_follows_soon(
    tmp_path: Path, clock: Clock, capsys: pytest.CaptureFixture
) -> None:
    """Off a terminal with 300 s between lines, a newcomer hears when the warm-up ends and gets
    an eta FIRST_ESTIMATE_S (30 s) into learning, not 5 minutes later."""
    log = Logger(tmp_path, total_steps=10_000, progress=False, learning_starts=1000,
                 progress_every_s=300)
    for _ in range(10):  # 1000 random steps in 2 s
        clock.now += 0.2
        log.advance(100)
    err = capsys.readouterr().err
    assert err.count("rlzoo: learning starts at step 1000/10000 after a random warm-up at "
                     "500.0 steps/s") == 1, err
    assert not progress_lines(err)
    for _ in range(29):
        clock.now += 1.0
        log.advance(10)
    assert not capsys.readouterr().err  # not yet
    clock.now += 1.0
    log.advance(10)
    (line,) = progress_lines(capsys.readouterr().err)
    assert line.group(1) == "1300" and line.string.endswith("eta 0:14:30"), line.string
    for _ in range(100):  # then every progress_every_s (300 s)
        clock.now += 1.0
        log.advance(10)
    assert not capsys.readouterr().err
    assert log.speeds() == pytest.approx(
        {"learning_steps_per_sec": 10.0, "warmup_steps_per_sec": 500.0})
    log.close()


def test_speeds_of_a_run_that_never_left_its_warm_up(tmp_path: Path, clock: Clock) -> None:
    from rlzoo.run.progress import speed_words

    log = Logger(tmp_path, total_steps=500, progress=False, learning_starts=1000)
    clock.now += 2.0
    log.advance(500)
    assert log.speeds() == {"learning_steps_per_sec": None,
                            "warmup_steps_per_sec": pytest.approx(250.0)}
    log.close()
    assert speed_words({"steps_per_sec": 250.0, **log.speeds()}) == "250.0 steps/s"
    assert speed_words({"steps_per_sec": 1.94, "learning_steps_per_sec": 1.94,
                        "warmup_steps_per_sec": 74.87}) == \
        "1.9 steps/s learning, warm-up 74.9 steps/s"


def test_a_resumed_run_past_its_warm_up_estimates_at_once(tmp_path: Path, clock: Clock) -> None:
    log = Logger(tmp_path, total_steps=2000, progress=False, progress_every_s=0,
                 initial_step=1500, learning_starts=1000)
    clock.now += 10.0
    log.advance(100)
    assert log.progress_line().endswith("eta 0:00:40"), log.progress_line()  # 400 at 10/s
    log.close()


def test_episode_lengths_come_back_from_a_checkpoint_and_odd_ones_are_refused() -> None:
    """The open episodes' lengths are loop state (resumed runs log the same lengths); a
    checkpoint from before they were kept starts them at 0; one holding something else
    (strings, floats, negatives, another shape) is refused, naming the entry."""
    import numpy as np

    from rlzoo.run.member import Member
    from rlzoo.store.state_match import StateMismatch

    m = Member.__new__(Member)
    m.agent_return, m.env_state, m.pending = None, None, None
    loop = {"obs": np.zeros((2, 3)), "episode_return": np.zeros(2),
            "chunk": np.zeros((2, 1, 1)), "chunk_pos": np.ones(2, dtype=np.int64)}
    m.obs, m.episode_return, m.chunk, m.chunk_pos = (loop[k].copy() for k in
                                                     ("obs", "episode_return", "chunk",
                                                      "chunk_pos"))
    m.episode_length = np.zeros(2, dtype=np.int64)
    m.load_loop_state({**loop, "episode_length": np.array([7, 9])})
    assert m.episode_length.tolist() == [7, 9]
    assert m.loop_state()["episode_length"].tolist() == [7, 9]
    m.load_loop_state(loop)  # written before lengths were kept
    assert m.episode_length.tolist() == [0, 0] and m.episode_length.dtype == np.int64
    for odd in (np.array(["a", "b"]), np.array([1.5, 2.0]), np.array([-1, 3]),
                np.zeros(5, dtype=np.int64)):
        with pytest.raises(StateMismatch, match="episode_length"):
            m.load_loop_state({**loop, "episode_length": odd})


def seconds_between_lines(log: Logger, clock: Clock, capsys: pytest.CaptureFixture,
                          seconds: int, steps_per_s: int) -> list[float]:
    """Advance ``log`` one second at a time at ``steps_per_s`` for ``seconds``; the clock times
    of the progress lines on stderr."""
    times = []
    for _ in range(seconds):
        clock.now += 1.0
        log.advance(steps_per_s)
        if progress_lines(capsys.readouterr().err):
            times.append(clock.now)
    return times


@pytest.mark.parametrize("total_steps, every", [(20_000, 60.0), (100_000, 300.0)])
def test_auto_interval_follows_the_expected_length(
    tmp_path: Path, clock: Clock, capsys: pytest.CaptureFixture, total_steps: int, every: float
) -> None:
    """The default (auto): a line every minute for a run that will take under an hour (the
    README's 20k-step first look), every 5 minutes once its pace says an hour or more; the warm
    -up (pace unknown) is a short run's. At 10 steps/s after a 1,000-step warm-up: 20k steps
    are 32 min, 100k are 2 h 45 min."""
    from rlzoo.run.logger import AUTO_EVERY_S

    log = Logger(tmp_path, total_steps=total_steps, progress=False, learning_starts=1000)
    assert log.progress_every_s == "auto"
    warm = seconds_between_lines(log, clock, capsys, 125, 1)  # 125 random steps
    assert len(warm) == 2 and warm[1] - warm[0] == AUTO_EVERY_S, warm
    seconds_between_lines(log, clock, capsys, 5, 200)  # past learning_starts
    # the first estimate, 30 s into learning, then the interval
    times = seconds_between_lines(log, clock, capsys, 1000, 10)
    assert len(times) >= 3, times
    assert {b - a for a, b in zip(times[1:], times[2:])} == {every}, times
    log.close()


def test_a_resumed_long_run_keeps_its_own_interval_and_auto_is_checked(tmp_path: Path) -> None:
    """A run dir made before auto existed keeps its number; a bad value is one line."""
    from omegaconf import OmegaConf

    from rlzoo.config.settings import read_settings
    from rlzoo.errors import UserError

    cfg = OmegaConf.load(REPO / "tests" / "fixtures" / "format2" / "sac" / ".hydra" /
                         "config.yaml")
    assert read_settings(cfg).progress_every_s == 300.0
    cfg.log.progress_every_s = "auto"
    assert read_settings(cfg).progress_every_s == "auto"
    cfg.log.progress_every_s = "often"
    with pytest.raises(UserError, match="log.progress_every_s must be auto or a number"):
        read_settings(cfg)
