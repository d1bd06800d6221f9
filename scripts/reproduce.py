"""``python scripts/reproduce.py SUITE ...``: the same as ``python -m tools.reproduce SUITE ...``
run from the checkout's root (tools/reproduce/, described in docs/reproducing.md), kept because
the docs and users call it. It runs this checkout's tool and rlzoo, wherever it is run from."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # this checkout's tools/ and rlzoo, wherever the script is run from
    sys.path.insert(0, str(REPO))

from tools.reproduce.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(prog="python scripts/reproduce.py"))
