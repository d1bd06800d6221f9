"""``python -m rlzoo.reproduce SUITE ...``: see :mod:`rlzoo.reproduce`."""

import sys

from rlzoo.reproduce.cli import main

if __name__ == "__main__":
    sys.exit(main())
