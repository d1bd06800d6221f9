"""``python -m tools.reproduce SUITE ...``: see :mod:`tools.reproduce`."""

import sys

from tools.reproduce.cli import main

if __name__ == "__main__":
    sys.exit(main())
