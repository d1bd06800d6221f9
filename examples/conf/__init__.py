"""Hydra config groups of the examples: ``critic/pessimistic.yaml``, ``algo/ppo.yaml``,
``algo/sac_quick.yaml``. Add them with ``'hydra.searchpath=[pkg://examples.conf]'``."""
