"""``Policy.export``'s writer: a module's ``forward(obs)`` as a ``torch.export`` program that runs
without rlzoo, holding only the weights that ``forward`` reads, written atomically. It takes the
module to export (``rlzoo/policy/policy.py`` builds it from a ``Policy``) and knows nothing of
``Policy`` itself, so neither module imports the other's internals.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.export.graph_signature import InputKind

from rlzoo.errors import UserError, one_line
from rlzoo.store.writer import atomic_file


def export_policy(module: nn.Module, example: torch.Tensor, name: str, path: Path) -> Path:
    """:meth:`rlzoo.policy.policy.Policy.export`'s work: ``path`` (``*.pt2``, checked here) holds
    ``module.forward``'s program (``obs [B, ...] -> actions``), traced on ``example [2, ...]``
    with a dynamic batch dimension; ``name`` (the algorithm's class name) words the error of
    a forward that cannot be traced. Returns ``path``."""
    if path.suffix.lower() == ".onnx":  # a torch.export archive is not ONNX: say so
        raise UserError(
            f"{path.name}: Policy.export writes a torch.export program, not ONNX (rlzoo has "
            f"no ONNX exporter); name the file {path.with_suffix('.pt2').name}"
        )
    if path.is_dir():
        raise UserError(f"{path} is a directory; pass a file name such as policy.pt2")
    if not path.parent.is_dir():
        raise UserError(f"directory {path.parent} does not exist; create it first")
    module = module.eval()
    program = _export(module, example, name)
    # An algorithm holds critics and target networks that act() never reads: export again
    # without them, so the program carries only the policy's weights.
    unused = _unused_state(program)
    if unused:
        with _without(module, unused):
            program = _export(module, example, name)
    # Serialized in memory first (the program holds only the policy's weights): torch's zip
    # writer, given a file that fails mid-write (full disk, read-only file system), raises
    # a bare RuntimeError and may abort the process as it closes the archive; Python's own
    # file I/O below fails with an OSError that says why.
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    try:  # through a temporary file, renamed; never through a link (rlzoo.store.writer)
        with atomic_file(path) as f:
            f.write(buffer.getbuffer())
    except OSError as err:
        raise UserError(f"cannot write {path} ({err.strerror or err}; it needs "
                        f"{buffer.getbuffer().nbytes:,} bytes); check the directory's "
                        "permissions and free space; no file was left") from None
    return path


def _export(module: nn.Module, example: torch.Tensor, name: str) -> torch.export.ExportedProgram:
    """``torch.export`` of ``module`` on ``example [2, ...]`` with a dynamic batch dimension."""
    batch = torch.export.Dim("batch", min=1, max=2**31 - 2)
    try:
        return torch.export.export(module, (example,), dynamic_shapes=({0: batch},))
    except Exception as err:  # noqa: BLE001 - torch.export raises many kinds
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(
            f"{name}.act cannot be exported with torch.export ({type(err).__name__}: "
            f"{one_line(first)}); its act() must be traceable (no Python branching on tensor "
            "values, no .item() or .numpy())"
        ) from None


def _unused_state(program: torch.export.ExportedProgram) -> list[str]:
    """The names of the parameters and buffers ``program``'s graph never reads."""
    used = {node.name for node in program.graph.nodes if node.op == "placeholder" and node.users}
    kinds = (InputKind.PARAMETER, InputKind.BUFFER)
    return [spec.target for spec in program.graph_signature.input_specs
            if spec.kind in kinds and spec.target is not None
            and getattr(spec.arg, "name", None) not in used]


@contextlib.contextmanager
def _without(module: nn.Module, names: list[str]) -> Iterator[None]:
    """Hide the parameters and buffers ``names`` of ``module`` (dotted paths) while inside."""
    hidden: list[tuple[dict[str, Any], str, Any]] = []
    try:
        for name in names:
            owner_name, _, attr = name.rpartition(".")
            owner = module.get_submodule(owner_name)
            for table in (owner._parameters, owner._buffers):
                if table.get(attr) is not None:
                    hidden.append((table, attr, table[attr]))
                    table[attr] = None
        yield
    finally:
        for table, attr, value in reversed(hidden):
            table[attr] = value
