"""Hydra config groups of the examples: ``critic/tqc.yaml``, ``critic/batchnorm.yaml``,
``algo/crossq.yaml``. Add them with ``'hydra.searchpath=[pkg://examples.conf]'``."""
