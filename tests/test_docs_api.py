"""Every ```python block of docs/api.md runs, as it is, in a fresh interpreter.

Each block is a complete example (tiny settings, its own temporary directory); it runs from the
repository root with the repository on ``PYTHONPATH`` and must exit 0. Temporary directories go
under pytest's ``tmp_path``, so nothing is left behind.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "api.md"
# train, callbacks, resume + evaluate, load_policy + gymnasium, multi-agent, chunks, export
MIN_BLOCKS = 8
TIMEOUT_S = 180


def python_blocks() -> list[tuple[str, str]]:
    """``(section heading, code)`` of every ```python block, in order."""
    text = DOC.read_text()
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE):
        headings = re.findall(r"^#+ (.*)$", text[: match.start()], flags=re.MULTILINE)
        blocks.append((headings[-1] if headings else "", match.group(1)))
    return blocks


def test_the_doc_has_its_examples() -> None:
    blocks = python_blocks()
    assert len(blocks) >= MIN_BLOCKS, f"docs/api.md has {len(blocks)} python blocks"
    for _, block in blocks:  # every example trains into a temporary dir, never into ./runs
        assert "rlzoo" in block and "tempfile.mkdtemp()" in block, block[:200]


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_block_runs(index: int, tmp_path: Path) -> None:
    section, block = python_blocks()[index]
    where = f"docs/api.md python block {index + 1} (section {section!r})"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    try:
        proc = subprocess.run([sys.executable, "-c", block], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{where} ran over {TIMEOUT_S} s")
    assert proc.returncode == 0, (
        f"{where} exited {proc.returncode}\n"
        f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"
    )
