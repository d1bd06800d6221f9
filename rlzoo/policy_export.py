"""``Policy.export``: a trained policy as a ``torch.export`` program that runs without rlzoo,
holding only the policy's weights, written atomically (``rlzoo/policy.py``).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.export.graph_signature import InputKind

from rlzoo.errors import UserError, one_line
from rlzoo.files import atomic_file

if TYPE_CHECKING:
    from rlzoo.policy import Policy


def export_policy(policy: Policy, path: Path, chunk: bool) -> Path:
    """:meth:`rlzoo.policy.Policy.export`'s work: ``path`` (``*.pt2``, checked here) holds the
    deterministic policy's program (its chunk ``[B, H, A]`` with ``chunk``) with a dynamic batch
    dimension; returns ``path``."""
    if path.suffix.lower() == ".onnx":  # a torch.export archive is not ONNX: say so
        raise UserError(
            f"{path.name}: Policy.export writes a torch.export program, not ONNX (rlzoo has "
            f"no ONNX exporter); name the file {path.with_suffix('.pt2').name}"
        )
    if path.is_dir():
        raise UserError(f"{path} is a directory; pass a file name such as policy.pt2")
    if not path.parent.is_dir():
        raise UserError(f"directory {path.parent} does not exist; create it first")
    module = _Exported(policy, chunk).eval()
    example = torch.zeros((2, *policy.obs_shape), device=policy.device)
    program = _export(module, example, type(policy.algo).__name__)
    # An algorithm holds critics and target networks that act() never reads: export again
    # without them, so the program carries only the policy's weights.
    unused = _unused_state(program)
    if unused:
        with _without(module, unused):
            program = _export(module, example, type(policy.algo).__name__)
    # Serialized in memory first (the program holds only the policy's weights): torch's zip
    # writer, given a file that fails mid-write (full disk, read-only file system), raises
    # a bare RuntimeError and may abort the process as it closes the archive; Python's own
    # file I/O below fails with an OSError that says why.
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    try:  # through a temporary file, renamed; never through a link (rlzoo.files)
        with atomic_file(path) as f:
            f.write(buffer.getbuffer())
    except OSError as err:
        raise UserError(f"cannot write {path} ({err.strerror or err}; it needs "
                        f"{buffer.getbuffer().nbytes:,} bytes); check the directory's "
                        "permissions and free space; no file was left") from None
    return path


class _Exported(nn.Module):
    """The deterministic policy (or its chunk) as one ``forward`` for ``torch.export``."""

    def __init__(self, policy: Policy, chunk: bool) -> None:
        super().__init__()
        self.policy, self.whole_chunk = policy, chunk

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        actions = self.policy._chunk(obs, deterministic=True)
        return actions if self.whole_chunk else actions[:, 0]


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
