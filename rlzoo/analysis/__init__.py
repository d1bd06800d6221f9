"""Analysis of finished runs, apart from training: finding runs, reading their learning curves,
grouping seeds into comparable groups, statistics (IQM, bootstrap CIs, P(X > Y)) and reports.

Run dirs are the only input: nothing here imports rlzoo's training code (trainer, run loop,
algorithms, envs) or torch. The command line is ``python -m rlzoo.compare`` (:mod:`.cli`).

Modules, each importing only those listed after it:

- :mod:`.cli` -- the command line (``main``, ``build_parser``) and ``compare`` (compute, then write)
- :mod:`.render` -- ``write_report``: comparison.json, comparison.md and the PNG figures
- :mod:`.report` -- ``compute_comparison`` -> ``Comparison`` (pure data, nothing written)
- :mod:`.pooling` -- ``group_runs``: which runs pool into a group (automatic or ``--group-by``)
- :mod:`.labels` -- group labels: automatic (``sac critic=ensemble``) and ``--label`` rules
- :mod:`.groups` -- ``Group``: the runs pooled into one row
- :mod:`.curves` -- ``load_scalars``, ``event_files`` (TensorBoard), ``eval.csv``
  (``write_scalars_csv``), ``align_curves``
- :mod:`.runs` -- ``find_runs``, ``FinishedRun``, ``read_config`` (summary.json and ``.hydra/``)
- :mod:`.config` -- config values: ``IGNORED_KEYS``, ``MEASUREMENT_KEYS``, ``format_value``
- :mod:`.messages` -- ``CompareError`` (a ``rlzoo.errors.UserError``) and one-line notes
- :mod:`.stats` -- IQM, stratified bootstrap CIs, probability of improvement (numpy)

The names below are the public ones; import them from here or from their modules.
"""

from rlzoo.analysis.cli import compare, main
from rlzoo.analysis.config import IGNORED_KEYS, MEASUREMENT_KEYS
from rlzoo.analysis.curves import (
    CURVE_TAG,
    SCALARS_CSV,
    Curve,
    align_curves,
    event_files,
    load_scalars,
    write_scalars_csv,
)
from rlzoo.analysis.groups import Group
from rlzoo.analysis.messages import CompareError
from rlzoo.analysis.pooling import group_runs
from rlzoo.analysis.render import write_report
from rlzoo.analysis.report import Comparison, compute_comparison
from rlzoo.analysis.runs import FinishedRun, find_runs

__all__ = [
    "CURVE_TAG",
    "IGNORED_KEYS",
    "MEASUREMENT_KEYS",
    "SCALARS_CSV",
    "CompareError",
    "Comparison",
    "Curve",
    "Group",
    "FinishedRun",
    "align_curves",
    "compare",
    "compute_comparison",
    "event_files",
    "find_runs",
    "group_runs",
    "load_scalars",
    "main",
    "write_report",
    "write_scalars_csv",
]
