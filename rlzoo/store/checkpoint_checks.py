"""A checkpoint file checked before and after unpickling, so that a hostile or damaged file
costs bounded work and one line (:class:`CheckpointError`): the zip archive's directory before
any record is read (:func:`check_archive`), and the loaded tensors before anything reads them
(:func:`check_tensors`). ``rlzoo.store.checkpoint.load_checkpoint`` runs both (and
``rlzoo.store.bounded.check_tree`` between them); its module re-exports these names.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import torch


class CheckpointError(Exception):
    """A checkpoint that cannot be used: unreadable, truncated, hostile or from another run."""


def check_archive(path: Path) -> None:
    """Refuse ``path`` before unpickling unless it looks like what ``torch.save`` writes.

    ``torch.save`` writes a zip archive whose records are all stored (uncompressed), so the
    declared sizes of all records add up to less than the file's size. A compressed record, a
    record whose declared size differs from its stored size or reaches past the end of the file,
    or records that together declare more bytes than the file holds (overlapping records) are a
    zip bomb or a damaged file: ``torch.load`` would inflate them in memory in full before
    noticing. Only the archive's central directory is read here.

    Raises:
        CheckpointError: one line naming the file and what is wrong with it.
    """
    try:
        size = path.stat().st_size
        if not zipfile.is_zipfile(path):
            raise CheckpointError(f"{path} is not an rlzoo checkpoint (not a zip archive)")
        with zipfile.ZipFile(path) as archive:
            records = archive.infolist()
    except (OSError, zipfile.BadZipFile, ValueError, EOFError) as err:
        first = " ".join(str(err).split()) or type(err).__name__
        raise CheckpointError(f"{path} cannot be loaded ({first[:160]})") from None
    declared = 0
    for info in records:
        if info.compress_type != zipfile.ZIP_STORED:
            raise CheckpointError(
                f"{path} is refused unread: its record {info.filename!r} is compressed and "
                f"declares {info.file_size:,} bytes from {info.compress_size:,} (rlzoo "
                "checkpoints store records uncompressed; a zip bomb looks like this)"
            )
        if info.file_size != info.compress_size or info.header_offset + info.file_size > size:
            raise CheckpointError(
                f"{path} is refused unread: its record {info.filename!r} declares "
                f"{info.file_size:,} bytes, more than the {size:,}-byte file can hold"
            )
        declared += info.file_size
    if declared > size:
        raise CheckpointError(
            f"{path} is refused unread: its records declare {declared:,} bytes in all, more "
            f"than the {size:,}-byte file holds (overlapping records)"
        )



def check_tensors(state: Any, path: Path | str) -> None:
    """Refuse a loaded file whose tensors are not plain dense arrays backed by their own bytes,
    before anything reads them.

    ``torch.save`` stores a tensor as a storage (bytes in the archive, which
    :func:`check_archive` bounds by the file's size) plus a shape and strides, and loading
    rebuilds the view without copying. A hostile file can give a one-element storage a huge
    shape with zero strides: it loads instantly and in a few bytes, and the first operation that
    reads it (``isfinite`` for the NaN check, ``load_state_dict``'s copy) allocates the full
    shape. So every tensor must be strided (no sparse, quantized, nested or meta tensor) and its
    storage must hold at least its ``numel * element_size`` bytes: what is read is then never
    larger than the file. Nested containers are walked without recursion.

    Raises:
        CheckpointError: one line naming the entry and its shape.
    """
    stack: list[tuple[str, Any]] = [("", state)]
    while stack:
        name, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{name}.{k}" if name else str(k), v) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{name}[{i}]", v) for i, v in enumerate(value))
        elif isinstance(value, torch.Tensor):
            kind = ("sparse" if value.layout != torch.strided else "quantized"
                    if value.is_quantized else "nested" if value.is_nested else "meta"
                    if value.is_meta else "")
            if kind:
                raise CheckpointError(f"{path} is refused: its entry {name!r} is a {kind} "
                                      "tensor, which rlzoo never writes")
            needed = value.numel() * value.element_size()
            held = value.untyped_storage().nbytes() - value.storage_offset() * value.element_size()
            if needed > held:
                raise CheckpointError(
                    f"{path} is refused: its entry {name!r} has shape {list(value.shape)} "
                    f"({needed:,} bytes) over a storage of {max(held, 0):,} bytes (repeated by "
                    "zero or overlapping strides); rlzoo never writes such a tensor, and reading "
                    "it would allocate the whole shape")
