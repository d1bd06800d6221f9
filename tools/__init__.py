"""Programs built on rlzoo's public API that need this repository's checkout, run from its root
(``python -m tools.reproduce SUITE``, docs/reproducing.md). Not part of the rlzoo package: the
wheel does not ship this folder, and nothing in ``rlzoo/`` imports it. A regular package (this
file), so that a ``tools`` package installed elsewhere on ``sys.path`` cannot shadow it."""
