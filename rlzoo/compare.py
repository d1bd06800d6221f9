"""``python -m rlzoo.compare RUN_DIRS... --out REPORT/``: compare finished runs.

The code lives in :mod:`rlzoo.analysis` (finding runs, curves, grouping, statistics, reports);
this module is only the command's entry point (:func:`rlzoo.analysis.cli.main`).
"""

import sys

from rlzoo.analysis.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
