"""rlzoo's Hydra config groups (``config.yaml`` and one folder per group), shipped in the wheel.

:data:`INTERNAL_GROUPS` names the groups that algorithm files choose for themselves: a user never
sets them, ``--keys``/``--help`` do not list them and rlzoo.compare never labels by them.
"""

INTERNAL_GROUPS: tuple[str, ...] = ("family", "algo_critic", "algo_tuner")
"""Config groups chosen by an algorithm file (``family``) or derived from other choices
(``algo_critic: ${family}_${critic}``, ``algo_tuner: ${family}_${tuner}``), never by a user."""
