"""Checkpoints under stress: a full disk, two writers of one path, stray temporary files,
zip bombs and checkpoints poisoned with NaN."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
import textwrap
import warnings
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import REPO, TINY, assert_user_error, read_summary, run_cli

from rlzoo.errors import UserError
from rlzoo.store import writer
from rlzoo.store.checkpoint import (
    CheckpointError,
    CheckpointWriteError,
    check_archive,
    checkpoint_path,
    list_checkpoints,
    load_checkpoint,
    load_latest_valid,
    remove_stale_temps,
    save_checkpoint,
    serialized_size,
    temp_path,
    to_plain,
)
from rlzoo.store.nonfinite import nonfinite_entries


def small_state(step: int, n: int = 1000) -> dict[str, Any]:
    """A checkpoint-shaped state: networks, a replay buffer, the loop (about 4n + 2 kB)."""
    return {
        "format": 1,
        "algo": {"modules": {"actor.weight": torch.full((4, 8), float(step))},
                 "optimizers": {"actor": {"param_groups": [{"lr": 3e-4}]}}},
        "buffer": {"tensors": {"reward": torch.zeros(n), "index": torch.arange(n)}},
        "loop": {"episode_return": torch.zeros(2)},
        "counters": {"step": step},
    }


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file of ``directory`` (temporary files included) and its bytes."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


class FullDisk:
    """A file whose writes fail with ``code`` once ``limit`` bytes are written (a disk that
    fills up mid-checkpoint); earlier bytes really reach the file."""

    def __init__(self, f: Any, limit: int, code: int) -> None:
        self.f, self.limit, self.code, self.written = f, limit, code, 0

    def write(self, data: Any) -> int:
        n = memoryview(data).nbytes
        if self.written + n > self.limit:
            raise OSError(self.code, os.strerror(self.code))
        self.written += n
        return self.f.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.f, name)

    def __enter__(self) -> FullDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.f.close()


def fill_disk_after(monkeypatch: pytest.MonkeyPatch, limit: int, code: int) -> None:
    def full_open(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        return FullDisk(open(path, mode, *args, **kwargs), limit, code)

    monkeypatch.setattr(writer, "open", full_open, raising=False)


# --------------------------------------------------------------------------- disk full


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_disk_full_is_one_line_and_keeps_older_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    ckpts = tmp_path / "checkpoints"
    for step in (100, 200):
        save_checkpoint(checkpoint_path(ckpts, step), small_state(step))
    before = snapshot(ckpts)
    state = small_state(300, n=20_000)
    needed = serialized_size(to_plain(state))
    fill_disk_after(monkeypatch, limit=4096, code=code)
    with pytest.raises(CheckpointWriteError) as info:
        save_checkpoint(checkpoint_path(ckpts, 300), state)
    message = str(info.value)
    assert "\n" not in message and ";" in message
    assert str(ckpts) in message and f"{needed:,} bytes" in message and "bytes free" in message
    assert errno.errorcode[code] in message
    assert isinstance(info.value, UserError)  # the CLI prints it as one `rlzoo: error:` line
    assert snapshot(ckpts) == before  # no temporary file left, older checkpoints byte-identical
    monkeypatch.undo()
    path, loaded = load_latest_valid(ckpts)
    assert path.name == "step_0000000200.pt" and loaded["counters"]["step"] == 200


def test_file_size_limit_in_a_real_process(tmp_path: Path) -> None:
    """The OS refuses the write (RLIMIT_FSIZE: EFBIG), not a patched file object."""
    script = textwrap.dedent(f"""
        import resource, signal, torch
        from pathlib import Path
        from rlzoo.store.checkpoint import CheckpointWriteError, save_checkpoint
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        d = Path({str(tmp_path)!r})
        save_checkpoint(d / "step_0000000001.pt", {{"format": 1, "x": torch.zeros(10)}})
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, resource.RLIM_INFINITY))
        try:
            save_checkpoint(d / "step_0000000002.pt", {{"format": 1, "x": torch.zeros(10**6)}})
        except CheckpointWriteError as err:
            print(err)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "EFBIG" in proc.stdout and str(tmp_path) in proc.stdout and "bytes" in proc.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["step_0000000001.pt"]


DISK_FULL_AT_SECOND_SAVE = """
import errno, os, sys
import rlzoo.store.writer as c  # every atomic write opens its temporary file there
saves = []
class Full:
    def __init__(self, f): self.f = f
    def write(self, data): raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    def __getattr__(self, name): return getattr(self.f, name)
    def __enter__(self): return self
    def __exit__(self, *exc): self.f.close()
def full_open(path, mode="r", *args, **kwargs):
    f = open(path, mode, *args, **kwargs)
    if ".step_" not in str(path):  # policy.pt beside the checkpoints still fits
        return f
    saves.append(path)
    return Full(f) if len(saves) > 1 else f
c.open = full_open
sys.argv = ["rlzoo.train", *sys.argv[1:]]
from rlzoo.train import main
main()
"""


def test_trainer_disk_full_then_resume(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = [*TINY, "env=Pendulum", "total_steps=300", "algo.learning_starts=100",
            "algo.batch_size=32", "algo.buffer_size=1000", "checkpoint.every=100",
            "eval.every=0", "eval.episodes=1", "log.progress=false", "torch_threads=1",
            f"hydra.run.dir={run_dir}"]
    proc = subprocess.run(
        [sys.executable, "-c", DISK_FULL_AT_SECOND_SAVE, *args], capture_output=True, text=True,
        cwd=REPO, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert_user_error(proc, "cannot write checkpoint step_0000000200.pt",
                      str(run_dir / "checkpoints"), "bytes")
    ckpts = run_dir / "checkpoints"
    assert [p.name for p in ckpts.iterdir()] == ["step_0000000100.pt"]  # no temp, step 100 intact
    resumed = run_cli([f"resume={run_dir}", "total_steps=300"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert read_summary(run_dir)["total_steps"] == 300


# --------------------------------------------------------------------------- temporary files


def test_temp_names_are_unique_per_process_and_call(tmp_path: Path) -> None:
    path = tmp_path / "step_0000000001.pt"
    a, b = temp_path(path), temp_path(path)
    assert a != b and a.parent == tmp_path and a.name.startswith(".step_0000000001.pt.")
    assert f".{os.getpid()}." in a.name
    script = "import sys; from pathlib import Path; " \
             "from rlzoo.store.checkpoint import temp_path; " \
             "print(temp_path(Path(sys.argv[1])).name)"
    other = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                           text=True, cwd=REPO, timeout=120)
    assert other.returncode == 0, other.stderr
    assert f".{os.getpid()}." not in other.stdout and other.stdout.strip().endswith(".tmp")


def test_interleaved_writers_of_one_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second writer saves the same path while the first is mid-write (two processes given
    the same run dir): both succeed and the file is whole. With one shared temporary name the
    second truncated the first's file and the first's rename then failed."""
    path = checkpoint_path(tmp_path, 5)
    nested = {"done": False}

    class Interleave:
        def __init__(self, f: Any) -> None:
            self.f = f

        def write(self, data: Any) -> int:
            if not nested["done"]:
                nested["done"] = True
                save_checkpoint(path, small_state(2))  # the other writer, start to finish
            return self.f.write(data)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.f, name)

        def __enter__(self) -> Interleave:
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()

    monkeypatch.setattr(writer, "open", lambda p, m="r": Interleave(open(p, m)),
                        raising=False)
    save_checkpoint(path, small_state(1))
    monkeypatch.undo()
    assert load_checkpoint(path)["counters"]["step"] == 1  # the last rename wins, whole
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_stale_temps_are_ignored_and_removed_when_their_writer_is_gone(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, timeout=60)
    dead_pid = int(dead.stdout)  # that process has exited
    host = writer.host_name()
    names = {
        "dead": f".step_0000000003.pt.{host}.{dead_pid}.00ff00ff00ff00ff.tmp",
        "legacy": ".step_0000000003.pt.tmp",
        "live": f".step_0000000003.pt.{host}.{os.getppid()}.00ff00ff00ff00ff.tmp",
        "other host": f".step_0000000003.pt.elsewhere-{host}.{dead_pid}.0a0a0a0a0a0a0a0a.tmp",
        "mine": temp_path(tmp_path / "step_0000000003.pt").name,
    }
    for name in names.values():
        (tmp_path / name).write_bytes(b"partial")
    assert list_checkpoints(tmp_path) == []
    save_checkpoint(checkpoint_path(tmp_path, 4), small_state(4))
    left = {p.name for p in tmp_path.iterdir()}
    assert names["dead"] not in left and names["legacy"] not in left
    assert {names["live"], names["other host"], names["mine"], "step_0000000004.pt"} <= left
    assert list_checkpoints(tmp_path) == [checkpoint_path(tmp_path, 4)]
    assert remove_stale_temps(tmp_path) == []


# --------------------------------------------------------------------------- zip bombs


def rewrite(src: Path, dst: Path, record: str, compress: int, zero_mb: int = 0) -> None:
    """Copy checkpoint ``src`` to ``dst`` with the record ending in ``record`` compressed;
    ``zero_mb`` > 0 replaces its content by that many MiB of zeros (streamed, 16 MiB at a time)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            if not info.filename.endswith(record):
                zout.writestr(info, zin.read(info.filename))
                continue
            out = zipfile.ZipInfo(info.filename)
            out.compress_type = compress
            with zout.open(out, "w", force_zip64=True) as f:
                if zero_mb:
                    chunk = bytes(16 << 20)
                    for _ in range(zero_mb // 16):
                        f.write(chunk)
                else:
                    f.write(zin.read(info.filename))


@pytest.fixture
def good_checkpoint(tmp_path: Path) -> Path:
    path = checkpoint_path(tmp_path, 1)
    save_checkpoint(path, small_state(1, n=100_000))
    return path


BOMB_LOADER = """
import resource, sys
from pathlib import Path
from rlzoo.store.checkpoint import CheckpointError, load_checkpoint
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    load_checkpoint(Path(sys.argv[1]), mmap=sys.argv[2] == "mmap")
    print("LOADED")
except CheckpointError as err:
    print("REFUSED", err)
grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print("GROWN_MB", grown_kb // 1024)
"""


@pytest.mark.parametrize("mmap", ["plain", "mmap"])
def test_zip_bomb_is_refused_unread(good_checkpoint: Path, tmp_path: Path, mmap: str) -> None:
    bomb = tmp_path / "bomb.pt"
    rewrite(good_checkpoint, bomb, "/data/0", zipfile.ZIP_DEFLATED, zero_mb=256)
    assert bomb.stat().st_size < 2 << 20  # 256 MiB declared in under 2 MiB
    proc = subprocess.run([sys.executable, "-c", BOMB_LOADER, str(bomb), mmap],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("REFUSED") and "compressed" in lines[0], proc.stdout
    assert "268,435,456 bytes" in lines[0]
    assert int(lines[1].split()[1]) < 64, proc.stdout  # the 256 MiB were never inflated


def patch_central_size(path: Path, name: str, size: int) -> None:
    """Make the central directory declare ``size`` bytes (stored and uncompressed) for ``name``
    (a damaged or crafted archive: the local data is unchanged)."""
    data = bytearray(path.read_bytes())
    entry = data.rfind(b"PK\x01\x02", 0, data.rfind(name.encode()))
    data[entry + 20:entry + 28] = size.to_bytes(4, "little") * 2
    path.write_bytes(bytes(data))


def test_other_implausible_archives_are_refused(good_checkpoint: Path, tmp_path: Path) -> None:
    lzma = tmp_path / "lzma.pt"
    rewrite(good_checkpoint, lzma, "data.pkl", zipfile.ZIP_LZMA)
    with pytest.raises(CheckpointError, match="compressed"):
        load_checkpoint(lzma)
    beyond = tmp_path / "beyond.pt"
    beyond.write_bytes(good_checkpoint.read_bytes())
    with zipfile.ZipFile(beyond) as z:
        record = next(i.filename for i in z.infolist() if i.filename.endswith("/data/0"))
    patch_central_size(beyond, record, 0x7FFF0000)
    with pytest.raises(CheckpointError, match="more than the"):
        check_archive(beyond)
    legacy = tmp_path / "legacy.pt"  # torch's pre-zip format: sizes come from the pickle itself
    torch.save(small_state(1), legacy, _use_new_zipfile_serialization=False)
    with pytest.raises(CheckpointError, match="not a zip archive"):
        load_checkpoint(legacy)
    assert load_checkpoint(good_checkpoint, mmap=True)["counters"]["step"] == 1  # still loads
    assert check_archive(good_checkpoint) is None


# --------------------------------------------------------------------------- NaN/inf


def test_nonfinite_entries_names_tensors_only() -> None:
    state = small_state(1)
    assert nonfinite_entries(state) == []
    state["algo"]["optimizers"]["actor"]["param_groups"][0]["lr"] = float("inf")  # not a tensor
    state["config"] = {"max_grad_norm": float("inf")}  # config values are not checked
    assert nonfinite_entries(state) == []
    state["algo"]["modules"]["actor.weight"][0, 0] = float("nan")
    state["buffer"]["tensors"]["reward"][7] = float("-inf")
    state["loop"]["episode_return"] = torch.tensor([0.0, float("nan")]).numpy()
    assert nonfinite_entries(state) == [
        "algo.modules.actor.weight", "buffer.tensors.reward", "loop.episode_return",
    ]
    assert nonfinite_entries(state, sections=["buffer"]) == ["buffer.tensors.reward"]


def test_poisoned_checkpoints_are_not_good(tmp_path: Path) -> None:
    save_checkpoint(checkpoint_path(tmp_path, 100), small_state(100))
    for step in (200, 300):  # NaN rewards in the buffer, NaN weights
        state = small_state(step)
        if step == 200:
            state["buffer"]["tensors"]["reward"][3] = float("nan")
        else:
            state["algo"]["modules"]["actor.weight"][:] = float("nan")
        save_checkpoint(checkpoint_path(tmp_path, step), state)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path, state = load_latest_valid(tmp_path)
    assert path == checkpoint_path(tmp_path, 100) and state["counters"]["step"] == 100
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2
    assert "step_0000000300.pt" in messages[0] and "algo.modules.actor.weight" in messages[0]
    assert "step_0000000200.pt" in messages[1] and "buffer.tensors.reward" in messages[1]
    checkpoint_path(tmp_path, 100).unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(CheckpointError, match="2 holding NaN or inf"):
            load_latest_valid(tmp_path)


def test_counting_sink_matches_the_file(tmp_path: Path) -> None:
    state = small_state(1, n=5000)
    path = checkpoint_path(tmp_path, 1)
    save_checkpoint(path, state)
    assert serialized_size(to_plain(state)) == path.stat().st_size
    buffer = io.BytesIO()
    torch.save(to_plain(state), buffer)
    assert len(buffer.getvalue()) == path.stat().st_size


def test_a_dead_writers_private_folder_goes_only_when_asked(tmp_path: Path) -> None:
    """``folders=True`` (the videos folder) removes a dead writer's private folder (ffmpeg's
    partial MP4) whole, without following a link inside it; a live writer's folder stays, and
    without ``folders`` no folder is touched."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, timeout=60)
    host = writer.host_name()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    videos = tmp_path / "videos"
    videos.mkdir()
    stale = videos / f".eval_step_200.mp4.{host}.{int(dead.stdout)}.00ff00ff00ff00ff.tmp"
    live = videos / f".eval_step_400.mp4.{host}.{os.getppid()}.00ff00ff00ff00ff.tmp"
    for folder in (stale, live):
        folder.mkdir()
        (folder / "eval_step.mp4").write_bytes(b"partial")
        (folder / "link").symlink_to(outside)
    assert remove_stale_temps(videos) == [] and stale.is_dir()
    assert remove_stale_temps(videos, folders=True) == [stale]
    assert not stale.exists() and live.is_dir() and outside.read_text() == "keep"
