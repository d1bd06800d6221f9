"""``scripts/cuda_seeds.py --dry-run``: the prepared CUDA timing script runs end to end on the CPU
at a tiny size, for SAC and FlashSAC (of its default list SAC, SimbaV2, FlashSAC: FlashSAC's
network-factory widths are SimbaV2's kind, so the third adds a minute and no path), FlashSAC timed
against SAC; an algorithm the checkout does not have is reported as not run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from cuda_seeds import ALGOS, available  # noqa: E402

TIMED = ("sac", "flashsac")


@pytest.mark.slow
def test_dry_run_times_every_algorithm_against_sac(tmp_path: Path) -> None:
    out = tmp_path / "cuda_seeds.md"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "cuda_seeds.py"), "--dry-run", "--seeds", "2",
         "--steps", "20", "--learning-starts", "20", "--update-iters", "2", "--algos", *TIMED,
         "nosuch", "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.with_suffix(".json").read_text())
    assert ALGOS[0] == "sac" and set(TIMED) <= set(ALGOS) and all(map(available, TIMED))
    present = list(TIMED)
    assert result["missing"] == ["nosuch"]
    for algo in present:
        runs = {(r["seeds"], r["cudagraphs"]): r for r in result["runs"] if r["algo"] == algo}
        assert sorted(runs) == [(1, False), (1, True), (2, False), (2, True)], algo
        for seeds in (1, 2):
            assert runs[seeds, False]["ok"], (algo, runs[seeds, False]["status"])
            assert f"algo={algo}" in runs[seeds, False]["cmd"]
            assert "refused on the CPU" in runs[seeds, True]["status"]
        eager = [u for u in result["updates"] if u["algo"] == algo and not u["cudagraphs"]]
        assert len(eager) == 1 and eager[0]["ok"] and eager[0]["single_updates_per_s"] > 0
    text = out.read_text()
    assert "nosuch: not run, this checkout has no rlzoo/conf/algo/nosuch.yaml." in text
    for algo in present[1:]:  # every other algorithm is timed against SAC
        assert f"| {algo} | false | " in text.split("Time relative to sac")[1]
