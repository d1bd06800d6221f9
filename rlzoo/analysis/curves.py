"""Learning curves: scalars read from run dirs (TensorBoard event files, or ``eval.csv``), aligned
on a common grid of steps."""

from __future__ import annotations

import csv
import io
import math
import os
import re
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlzoo.analysis.messages import note
from rlzoo.analysis.runs import EVENT_PREFIX, RETURN_LIMIT, STEP_LIMIT, FinishedRun
from rlzoo.store.readers import BoundError, open_file, read_bytes
from rlzoo.store.writer import write_atomic

CURVE_TAG = "eval/return"
"""The scalar tag plotted by default (``--tag``)."""

SCALARS_CSV = "eval.csv"
"""A run dir's scalars as CSV, for run dirs kept without TensorBoard events (the raw results under
``results/``, runs of other libraries): a header ``step,<tag>,<tag>,...`` (e.g.
``step,eval/return,eval/return_std``), then one row per step, steps in env steps, an empty cell
where a tag has no value at that step, steps rising (no step twice), every value finite.
Written by :func:`write_scalars_csv`; :func:`read_scalars_csv` refuses a file that breaks this."""

CSV_BYTES_LIMIT = 64 * 2**20
"""The largest :data:`SCALARS_CSV` (or ``train.csv``) read, in bytes: a 1M-step run logging
every 100 steps writes about 1 MiB; a larger file is refused before it is read."""

EVENT_RECORD_LIMIT = 256 * 2**20
"""The largest record of an event file read, in bytes: a scalar's is about 50, an evaluation
video's GIF preview a few MiB."""

_STEP = re.compile(r"[0-9]{1,19}")  # a step cell: a plain non-negative integer
_SUFFIX = re.compile(r"[0-9a-f]{16}")  # rlzoo.run.logger's random event file suffix


@dataclass
class Curve:
    """Aligned curves of one group: ``values[run, point]`` at ``steps[point]`` (env steps).

    ``run_paths[run]`` is the run dir each row came from.
    """

    steps: np.ndarray
    values: np.ndarray
    run_paths: list[str]


# --------------------------------------------------------------------------- reading TensorBoard


def _name_order(path: Path) -> tuple[int, int, str]:
    """Sort key from ``events.out.tfevents.<unix time>.<host>.<pid>.<counter>[suffix]``
    (rlzoo's suffix: ``.<16 hex digits>``, random, dropped here)."""
    parts = path.name[len(EVENT_PREFIX) :].split(".")
    if len(parts) > 2 and _SUFFIX.fullmatch(parts[-1]):
        parts = parts[:-1]
    created = int(parts[0]) if parts and parts[0].isdigit() else 0
    counter = int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 0
    return created, counter, path.name


def event_files(run_dir: str | os.PathLike[str]) -> list[Path]:
    """Event files directly in ``run_dir`` (regular files, not links), ordered by the creation
    time in their names."""
    directory = Path(run_dir)
    files = [p for p in directory.iterdir()
             if p.name.startswith(EVENT_PREFIX) and p.is_file() and not p.is_symlink()]
    return sorted(files, key=_name_order)


def event_records(path: Path) -> Iterator[bytes]:
    """The records of a TensorBoard event file (TFRecord framing: a little-endian ``uint64``
    length, a ``uint32`` CRC of it, the data, a ``uint32`` CRC of the data), read through
    :func:`rlzoo.store.readers.open_file` (a regular file, no link followed) one record at a time,
    each
    at most :data:`EVENT_RECORD_LIMIT` bytes. The CRCs are not checked (a damaged record fails
    to parse instead); a record cut short at the end (a writer that died) ends the file, as in
    TensorBoard's reader."""
    with os.fdopen(open_file(path), "rb") as f:
        while True:
            header = f.read(12)
            if len(header) < 12:
                return
            (length,) = struct.unpack("<Q", header[:8])
            if length > EVENT_RECORD_LIMIT:
                raise ValueError(f"{path}: a record of {length:,} bytes, above the "
                                 f"{EVENT_RECORD_LIMIT:,} an event may have")
            data = f.read(length)
            if len(data) < length or len(f.read(4)) < 4:
                return
            yield data


def _read_event_file(
    path: Path, tags: set[str] | None
) -> tuple[float, dict[str, dict[int, float]]]:
    """One event file: ``(wall time of its first event, {tag: {step: value}})``.

    Within a file, the last value logged at a step wins. A record that does not name a wanted
    tag is not parsed (the first is, for its wall time).
    """
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.util import tensor_util

    first_wall_time = math.inf
    out: dict[str, dict[int, float]] = {}
    wanted = None if tags is None else [t.encode() for t in tags]
    for data in event_records(path):
        if first_wall_time != math.inf and wanted is not None \
                and not any(t in data for t in wanted):
            continue
        event = Event.FromString(data)
        if first_wall_time == math.inf:
            first_wall_time = float(event.wall_time)
        if not event.HasField("summary"):
            continue
        for value in event.summary.value:
            if tags is not None and value.tag not in tags:
                continue
            kind = value.WhichOneof("value")
            if kind == "simple_value":
                scalar = float(value.simple_value)
            elif kind == "tensor":  # scalars written in the newer tensor format
                array = tensor_util.make_ndarray(value.tensor)
                if array.size != 1:
                    continue
                scalar = float(array.reshape(()))
            else:
                continue
            out.setdefault(value.tag, {})[int(event.step)] = scalar
    return first_wall_time, out


def read_scalars_csv(path: Path, tags: set[str] | None = None) -> dict[str, dict[int, float]]:
    """``{tag: {step: value}}`` from a file in the :data:`SCALARS_CSV` format (``tags``: only
    these; default all); empty cells are skipped.

    The file is read as every run-dir file is (:func:`rlzoo.store.readers.read_bytes`: a regular
    file, no link followed, at most :data:`CSV_BYTES_LIMIT` bytes actually read). It is
    refused, with a ValueError whose message names it (its path, the line and what is wrong),
    when it is a link, a FIFO or device, larger than :data:`CSV_BYTES_LIMIT`, lacks the
    ``step`` header, has a row of another width, a step that is not a plain integer in
    ``[0, STEP_LIMIT]`` or not above the row before it (a repeated or out-of-order row), a cell
    that is not a number or is not finite, or a return (a tag starting with ``eval/return``)
    whose magnitude is above :data:`~rlzoo.analysis.runs.RETURN_LIMIT`. Every cell is checked,
    not only those of ``tags``.
    """
    try:  # a regular file, no link followed, at most the limit actually read
        text = read_bytes(path, CSV_BYTES_LIMIT).decode("utf-8")
    except BoundError as exc:
        raise ValueError(f"{path}: {exc} (at most {CSV_BYTES_LIMIT:,} bytes of a regular "
                         "file are read)") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    try:
        return _scalar_rows(path, csv.reader(io.StringIO(text, newline="")), tags)
    except csv.Error as exc:
        raise ValueError(f"{path}: not CSV ({exc})") from None


def _scalar_rows(path: Path, reader: Iterator[list[str]],
                 tags: set[str] | None) -> dict[str, dict[int, float]]:
    """:func:`read_scalars_csv`'s checks of the rows ``reader`` gives."""
    out: dict[str, dict[int, float]] = {}
    header = next(reader, None)
    if not header or header[0] != "step":
        raise ValueError(f"{path}: does not start with a 'step' column")
    previous: tuple[int, int] | None = None  # (line, step)
    for line, row in enumerate(reader, start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise ValueError(f"{path} line {line}: {len(row)} cells, not {len(header)}")
        if not _STEP.fullmatch(row[0]) or int(row[0]) > STEP_LIMIT:
            raise ValueError(f"{path} line {line}: step {row[0][:20]!r} is not an "
                             f"integer from 0 to {STEP_LIMIT:,}")
        step = int(row[0])
        if previous is not None and step <= previous[1]:
            word = "repeats" if step == previous[1] else "comes after"
            raise ValueError(f"{path} line {line}: step {step:,} {word} line "
                             f"{previous[0]}'s step {previous[1]:,} (steps must rise)")
        previous = (line, step)
        for tag, cell in zip(header[1:], row[1:]):
            if cell == "":
                continue
            try:
                value = float(cell)
            except ValueError:
                raise ValueError(f"{path} line {line}: {tag} {cell[:20]!r} is not a "
                                 "number") from None
            if not math.isfinite(value):
                raise ValueError(f"{path} line {line}: {tag} is {value}")
            if tag.startswith(CURVE_TAG) and abs(value) > RETURN_LIMIT:
                raise ValueError(f"{path} line {line}: {tag} {value:.3g} is beyond "
                                 f"+-{RETURN_LIMIT:,.0f}, no episode return")
            if tags is None or tag in tags:
                out.setdefault(tag, {})[step] = value
    return out


def write_scalars_csv(
    path: str | os.PathLike[str], scalars: dict[str, tuple[np.ndarray, np.ndarray]]
) -> None:
    """Write ``scalars`` (as :func:`load_scalars` returns them: ``{tag: (steps, values)}``) to
    ``path`` in the :data:`SCALARS_CSV` format, tags in sorted order, one row per step of any tag.

    Values are written with ``repr``, so :func:`load_scalars` reads back exactly the same floats.
    """
    tags = sorted(scalars)
    by_step: dict[int, dict[str, float]] = {}
    for tag in tags:
        steps, values = scalars[tag]
        for step, value in zip(np.asarray(steps).tolist(), np.asarray(values).tolist()):
            by_step.setdefault(int(step), {})[tag] = float(value)
    f = io.StringIO()
    writer = csv.writer(f, lineterminator="\n")
    writer.writerow(["step", *tags])
    for step in sorted(by_step):
        row = by_step[step]
        writer.writerow([step, *(repr(row[t]) if t in row else "" for t in tags)])
    write_atomic(Path(path), f.getvalue())  # checked (rlzoo.store.writer): never through a link


def load_scalars(
    run_dir: str | os.PathLike[str], tags: Iterable[str] | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """All points of the scalar ``tags`` (default: every scalar tag) logged in a run dir.

    Every point is kept (no reservoir sampling, unlike TensorBoard's default of 10,000 per tag).
    The event files directly in ``run_dir`` are merged oldest first (by the wall time of a file's
    first event, then by the creation time in its name), so a later file wins on a step present
    in both (a resumed run). Files are read record by record (:func:`event_records`), keeping
    only the wanted tags in memory. A run dir's :data:`SCALARS_CSV` (``eval.csv``), if it has
    one, is read first, so a run dir kept without event files has its curve, and event files win
    on a step present in both; an ``eval.csv`` that is not in that format raises ValueError.

    Returns:
        ``{tag: (steps [n] int64, values [n] float64)}``, steps sorted ascending.
    """
    wanted = None if tags is None else set(tags)
    merged: dict[str, dict[int, float]] = {}
    csv_path = Path(run_dir) / SCALARS_CSV
    if csv_path.is_file():
        merged = read_scalars_csv(csv_path, wanted)
    loaded = []
    for path in event_files(run_dir):
        first_wall_time, points = _read_event_file(path, wanted)
        loaded.append(((first_wall_time, *_name_order(path)), points))
    loaded.sort(key=lambda item: item[0])
    for _, per_tag in loaded:
        for tag, points in per_tag.items():
            merged.setdefault(tag, {}).update(points)
    result: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for tag, points in merged.items():
        steps = np.array(sorted(points), dtype=np.int64)
        values = np.array([points[s] for s in steps.tolist()], dtype=np.float64)
        result[tag] = (steps, values)
    return result


# --------------------------------------------------------------------------- aligning curves


def align_curves(
    curves: Sequence[tuple[np.ndarray, np.ndarray]], max_points: int = 500
) -> tuple[np.ndarray, np.ndarray]:
    """Put curves evaluated at different steps on one grid of steps.

    The grid is the union of all runs' steps, restricted to where every run has started and not
    yet ended (``max`` of first steps to ``min`` of last steps), thinned evenly to at most
    ``max_points`` points. A run's value at a grid step is its last value at or before that step.

    Args:
        curves: per run ``(steps [n_r], values [n_r])``, steps ascending.

    Returns:
        ``(grid [points], values [runs, points])``; ``points`` may be 0 if the runs do not overlap.
    """
    start = max(int(s[0]) for s, _ in curves)
    end = min(int(s[-1]) for s, _ in curves)
    grid = np.unique(np.concatenate([s for s, _ in curves]))
    grid = grid[(grid >= start) & (grid <= end)]
    if len(grid) > max_points:
        keep = np.unique(np.round(np.linspace(0, len(grid) - 1, max_points)).astype(np.int64))
        grid = grid[keep]
    values = np.empty((len(curves), len(grid)))
    for i, (steps, vals) in enumerate(curves):
        values[i] = vals[np.searchsorted(steps, grid, side="right") - 1]
    return grid, values


def group_curve(
    runs: Sequence[FinishedRun], tag: str = CURVE_TAG, max_points: int = 500, name: str = "",
    advance: Callable[[], None] | None = None,
) -> Curve | None:
    """Aligned ``tag`` curves of a group's runs (:func:`align_curves`).

    A run whose event files cannot be read or hold no ``tag`` scalars is left out with a one-line
    note; None (with a note) when no run has the tag or the runs' step ranges do not overlap.
    ``name`` (default ``<env>/<algo>`` of the first run) names the group in that note.
    ``advance`` is called after each run's files are read (progress).
    """
    curves, paths = [], []
    for run in runs:
        if advance is not None:
            advance()
        try:
            scalars = load_scalars(run.path, [tag])
        except Exception as exc:  # a corrupt event file must not sink the whole report
            note(f"{run.path}: cannot read its curve ({type(exc).__name__}: {exc}); no curve")
            continue
        points = scalars.get(tag)
        if points is None or len(points[0]) == 0:
            note(f"{run.path}: no '{tag}' scalars in its event files or {SCALARS_CSV}; left out "
                 "of the curve")
            continue
        curves.append(points)
        paths.append(str(run.path))
    if not curves:
        return None
    steps, values = align_curves(curves, max_points)
    if len(steps) == 0:
        name = name or f"{runs[0].env}/{runs[0].algo}"
        note(f"{name}: runs' '{tag}' step ranges do not overlap; no curve")
        return None
    return Curve(steps, values, paths)
