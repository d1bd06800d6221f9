"""Every ```python block of docs/api.md runs, as it is, in a fresh interpreter.

Each block is a complete example (tiny settings, its own temporary directory); it runs from the
repository root with the repository on ``PYTHONPATH``, must exit 0, print the lines its comments
promise (``EXPECTED``) and leave the files it documents. Temporary directories go
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


# --------------------------------------------------------------------------- what each block shows
NUM = r"-?\d+\.\d"
# Per section: the stdout lines the block's comments promise (regexes, in order, each matching
# one whole line), and the files it must leave under its temporary directory.
EXPECTED: dict[str, tuple[list[str], list[str]]] = {
    "Train a run": ([r".*/sac-pendulum", rf"{NUM} ± {NUM} after 300 steps and 200 updates",
                     r"algo=sacc: there is no algo config 'sacc'; did you mean .*"],
                    ["*/sac-pendulum/summary.json", "*/sac-pendulum/policy.pt"]),
    "Several seeds in one run": ([rf"td3-s0 0 {NUM}", rf"td3-s1 1 {NUM}", rf"td3-s2 2 {NUM}"],
                                 [f"*/td3-s{k}/summary.json" for k in range(3)]),
    "Callbacks: watch a run, stop it early": (
        [rf"step 100: {NUM} ± {NUM} over 2 episodes", r"\d+ (True|False)",
         r"checkpoint at step 200: step_0*200\.pt"],
        ["*/threshold/summary.json", "*/stopped/checkpoints/step_*200.pt"]),
    "Continue a run": ([r"200", r"300"], ["*/run/checkpoints/step_*300.pt"]),
    "Continue, evaluate and compare from the shell": (
        [r"150", r"300", r".*-?\d+\.\d+ ± \d+\.\d+ over 2 episodes.*"], ["*/run/eval_*.json"]),
    "Load a trained policy": ([r"300 \(3,\) \(1,\)", r"torch\.Size\(\[5, 1\]\)",
                               rf"episode return {NUM}"], ["*/run/policy.pt"]),
    "Multi-agent policies": ([r"\(2, 11\) \(2, 5\) \(3, 5\)", r"torch\.Size\(\[8, 2, 5\]\)",
                              rf"team return {NUM}"], ["*/maddpg/policy.pt"]),
    "Action chunks": ([r"4", rf"episode return {NUM}"], ["*/chunks/policy.pt"]),
    "Export: a policy without rlzoo": ([r"torch\.Size\(\[5, 1\]\)"], ["*/pendulum_sac.pt2"]),
}


def test_every_block_has_its_expectations() -> None:
    assert [section for section, _ in python_blocks()] == list(EXPECTED)


def assert_shows(stdout: str, lines: list[str], where: str) -> None:
    """Each regex matches a whole stdout line, in order (other lines may come between)."""
    out = stdout.splitlines()
    at = 0
    for pattern in lines:
        while at < len(out) and not re.fullmatch(pattern, out[at]):
            at += 1
        assert at < len(out), f"{where}: no line matching {pattern!r} in order in:\n{stdout}"
        at += 1


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_block_shows_what_it_documents(index: int, tmp_path: Path) -> None:
    section, block = python_blocks()[index]
    lines, files = EXPECTED[section]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    where = f"docs/api.md python block {index + 1} (section {section!r})"
    try:
        proc = subprocess.run([sys.executable, "-c", block], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{where} ran over {TIMEOUT_S} s")
    assert proc.returncode == 0, (
        f"{where} exited {proc.returncode}\n"
        f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"
    )
    assert_shows(proc.stdout, lines, where)
    for pattern in files:
        assert list(tmp_path.glob(pattern)), f"{where} wrote no {pattern} under {tmp_path}"
