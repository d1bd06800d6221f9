"""Worked extension examples (see docs/extending.md): a custom critic and a new algorithm.

Importable when the repository root is on ``sys.path`` (``python -m rlzoo.train ...`` run from the
root adds it); their YAML files are found with ``'hydra.searchpath=[pkg://examples.conf]'``.
"""
