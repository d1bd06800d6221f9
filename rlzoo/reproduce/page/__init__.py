"""The results page (docs/results.md) and its figures, rendered from the raw results alone.

:func:`rlzoo.reproduce.page.render.render_page` turns ``RESULTS/<suite>/`` (every seed's
``summary.json``, ``eval.csv`` and ``provenance.json``, and rlzoo.compare's
``report/comparison.json``) and the published seeds (:mod:`rlzoo.reproduce.references`) into the
page's text; nothing else is read, so the page written by the report step and a fresh rendering
of the committed results are the same bytes (tests/test_reproduce.py checks this). The figures
are drawn by the report step (:mod:`rlzoo.reproduce.page.figures`).

Layout: the first screen (one answer per question a researcher brings, computed from the
results), the headline (one table of every cell at the suite's headline budgets against the best
published reference, one figure per task, the aggregate across tasks and its performance
profile), the per-seed values, the method (said once), then each suite in detail, and the
sources. The modules, in reading order:

- ``checks``: every file of a run dir the page reads, checked first (a bad one stops the page
  in one line naming it);
- ``runs``: what the page reads of one run dir (its curve, its value at a step, its updates);
- ``verdicts``: the rank tests, Holm's correction and the verdicts they give;
- ``data``: one suite's results (:class:`SuiteData`) and the comparisons made on them;
- ``figures``: each task's figure with the published curves, and the performance profile;
- ``headline``: the headline table, the per-seed lines and the aggregate across tasks;
- ``method``: how every number is made, said once;
- ``temperature``: a row's entropy temperature and policy entropy, read from its ``train.csv``;
- ``findings``: what was found where a row stands apart, its numbers computed from the curves;
- ``section``: one suite in detail (final returns, references, pairs, findings, status);
- ``scale``: the multi-agent tasks' scripted-policy floors;
- ``answers``: the first screen, from the same tests and tables as the rest of the page;
- ``render``: the whole page.
"""
