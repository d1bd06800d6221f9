"""What the tests' fork server (tests/zygote.py) saves: the same test files run with it and with
a fresh interpreter per CLI run (``RLZOO_TESTS_FRESH=1``), interleaved, in one process each.

    python scripts/bench_test_cli.py [--repeats 3] [--files tests/test_cli.py ...]

Each repeat runs ``python -m pytest -q -n 0 -p no:cacheprovider FILES`` once each way, the order
swapped every repeat, and takes the wall time of the whole pytest process. The ratio
fresh/forked is taken within a repeat (both under the same load) and summarised as the median and
the range over repeats. The default files are tests that mostly run the CLI; a file that runs
no CLI shows a ratio near 1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_FILES = ("tests/test_cli.py", "tests/test_cli_errors.py", "tests/test_run_safety.py")


def timed_pytest(files: list[str], fresh: bool) -> float:
    """Seconds of wall time for one pytest process over ``files``; fails loudly on a failure."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("RLZOO_TESTS_FRESH", None)
    if fresh:
        env["RLZOO_TESTS_FRESH"] = "1"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p",
                           "no:cacheprovider", *files], cwd=REPO, env=env, capture_output=True,
                          text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"bench_test_cli: pytest failed ({'fresh' if fresh else 'forked'}):\n"
                 + proc.stdout[-2000:])
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--files", nargs="+", default=list(DEFAULT_FILES))
    args = parser.parse_args()
    ratios = []
    for repeat in range(args.repeats):
        order = (True, False) if repeat % 2 == 0 else (False, True)
        seconds = {fresh: timed_pytest(args.files, fresh) for fresh in order}
        ratios.append(seconds[True] / seconds[False])
        print(f"repeat {repeat}: fresh {seconds[True]:.1f} s, forked {seconds[False]:.1f} s, "
              f"fresh/forked {ratios[-1]:.2f}", flush=True)
    print(f"fresh/forked: median {statistics.median(ratios):.2f} "
          f"(range {min(ratios):.2f}-{max(ratios):.2f}) over {len(ratios)} repeats; "
          f"files: {' '.join(args.files)}")


if __name__ == "__main__":
    main()
