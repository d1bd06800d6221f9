"""Reproduce rlzoo's results page: run a named suite, resumably, then compare and write the page.

    python -m tools.reproduce SUITE [--seeds K] [--steps N] [--out DIR] [--only TASK/ROW ...]
        [--results DIR] [--page FILE] [--no-sb3] [--report-only]

``python scripts/reproduce.py ...`` is the same command (a shim kept for the docs and for users
who call it). Suites (:data:`tools.reproduce.suites.SUITES`; every setting of a suite is declared
there once):

* ``mujoco``: SAC, TD3, DSAC-T, SAC with the ensemble critic, SAC with the action-sequence critic,
  SimbaV2, FlashSAC, STAC (rlzoo's first settings and its author's), SAC with the categorical
  critic and Stable-Baselines3's SAC and TD3 (the peer) on Hopper-v5 and HalfCheetah-v5, SAC,
  TD3, the peer and STAC at its author's settings on Walker2d-v5, 100k env steps (the page's
  headline reads 50k and 100k), 5 seeds, on the CPU.
* ``long``: ``mujoco``'s SAC row on HalfCheetah-v5 to 300k env steps (the headline reads 300k),
  5 seeds, on the CPU.
* ``marl``: MADDPG, HASAC and COMA on MPE simple_spread and simple_speaker_listener, MADDPG and
  HASAC on MaMuJoCo HalfCheetah-2x3, 5 seeds, on the CPU (budgets per task, see the suite).
* ``gpu``: the rlzoo rows of ``mujoco`` at 1M env steps on Hopper-v5, HalfCheetah-v5 and
  Humanoid-v5, 5 seeds, on CUDA.
* ``smoke``: SAC, TD3 and SB3 SAC on Pendulum for a few hundred steps with tiny networks: checks
  the plumbing (tests/test_reproduce.py), learns nothing, and never goes on the repository's page.

A *cell* is one row of one task: ``--seeds`` K seeds (default: the suite's) of one algorithm and
config. An rlzoo cell is one seed group (``seeds=K``) trained by the real command line in a
subprocess, into ``OUT/<suite>/<task>/<row>-s<seed0>`` (the group's home; the other seeds' dirs
beside it, ``<row>-s<seed>``). A Stable-Baselines3 cell is K worker processes
(``python -m tools.reproduce --sb3-worker``), one per seed, at most one per core at a time, each
into ``OUT/<suite>/<task>/<row>-s<seed>``, written as ``summary.json``, ``eval.csv`` and
``.hydra/`` so that ``rlzoo.compare`` reads it like an rlzoo run. Rerunning the same command:

* skips a finished cell (every seed's ``summary.json`` at the cell's ``total_steps``);
* resumes an rlzoo cell from its newest checkpoint (``python -m rlzoo.train resume=HOME
  total_steps=N``; raising ``--steps`` continues a finished cell the same way), bit-identically
  on the CPU; checkpoints are written every ``checkpoint_every`` steps (a few minutes);
* restarts an SB3 seed that did not finish (SB3 seeds resume at the granularity of a seed: a seed
  is written into ``.<row>-s<seed>.partial`` and renamed into place only when it finished);
* starts the cells that are missing.

A cell is locked (``OUT/<suite>/<task>/.<row>.lock``) while an invocation works on it: a second
one running at the same time skips it with one line and does the other cells, so two of them
share the work (that is how to use both cores with SB3 cells, or to run the rlzoo and the SB3
cells side by side). Ctrl-C (SIGINT) or SIGTERM stops the running cell after its checkpoint
(forwarded once to the child; a second one stops it at once) and the invocation without a report.

Afterwards, every finished cell of the suite is exported to ``RESULTS/<suite>/<task>/<row>-s<seed>``
(``summary.json``, ``.hydra/``, ``eval.csv``, the ``eval/*`` curve, ``train.csv``, the entropy
temperature and policy entropy at every logged step (rlzoo runs that log them), and
``provenance.json``, each training launch's commit, command, package versions, CPU and threads;
no checkpoints, no TensorBoard events), ``rlzoo.compare`` is run over ``RESULTS/<suite>`` into
``RESULTS/<suite>/report/`` (``python -m rlzoo.compare RESULTS/<suite> --out DIR`` regenerates it),
and the page (``--page``) is rewritten from every page suite's results (a suite off the page,
``smoke``, gets a page of its own), with the published seeds beside rlzoo's at the same env
steps. A cell that did not finish is never exported, so an earlier finished copy of it stays as
it was.

Defaults: ``--out runs/reproduce`` (relative to the current directory); ``--results`` and
``--page`` are the checkout's ``results/`` and ``docs/results.md``, except for ``smoke``, whose
are ``OUT/results`` and ``OUT/results.md``. Outside a checkout (this folder copied elsewhere:
:data:`tools.reproduce.files.CHECKOUT` is None) ``smoke`` runs anywhere and a page suite is
refused in one line (its results, page and published seeds are the repository's). Exit
status: 0 when nothing failed (cells another process holds are reported and skipped), 1 when
a cell failed or was not run because its runs hold another K or a larger budget than asked, 2
for a usage mistake (one ``reproduce: error:`` line, before anything is trained), 128 + the
signal number when stopped by a signal.

The tool lives in the checkout's ``tools/``, not in the rlzoo package (the wheel does not ship it),
and runs from the checkout's root. The modules, data first, each with one job (arrows point down
the list, never up; nothing in rlzoo imports this package, and ``stable_baselines3`` is imported
only inside the peer's worker; rlzoo itself is reached only through ``rlzoo.store.for_tools``,
``rlzoo.analysis``, ``rlzoo.errors``, ``rlzoo.store.writer``, ``rlzoo.store.bounded``,
``rlzoo.policy.floors`` and the command lines, imported at the top of the modules):

- ``schema``: the shapes of a suite, a task and a row; ``suites``: the suites, as data (the file
  to edit to add a row or a task); ``references``: the published sources and curves, as data;
- ``files``, ``console``, ``processes``, ``provenance``: file names and writers, the one-line
  messages, child processes with their signals and locks, and launch records;
- ``plan``: what one invocation runs and what happened to each cell;
- ``rlzoo_cells``, ``peer_cells``, ``runner``: the runner: an rlzoo cell (a seed group, resumed
  from its checkpoint), an SB3 cell (a worker per seed), and every cell under its lock;
- ``peer``: the Stable-Baselines3 peer (settings from the rlzoo config, and the worker);
- ``page``: the results page and its figures, from the exported results alone;
- ``report``: export, status, rlzoo.compare, the figures and the page;
- ``cli``: the command line (``__main__`` runs it).
"""
