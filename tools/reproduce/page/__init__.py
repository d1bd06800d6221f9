"""The results page (docs/results.md) and its figures, rendered from the raw results alone.

:func:`tools.reproduce.page.render.render_page` turns ``RESULTS/<suite>/`` (every seed's
``summary.json``, ``eval.csv`` and ``provenance.json``, and rlzoo.compare's
``report/comparison.json``) and the published seeds (:mod:`tools.reproduce.references`) into the
page's text; nothing else is read, so the page written by the report step and a fresh rendering
of the committed results are the same bytes (tests/test_reproduce.py checks this). The figures
are drawn by the report step (:mod:`tools.reproduce.page.figures`).

Layout: a box of what is shown and what is not, one compact table of every headline cell (a row
per algorithm, a column per task and budget) with its footnotes, the figures, every cell's detail,
the aggregate across tasks, the per-seed values, the method (every caveat said once), then each
suite in detail, and the sources; the README's results paragraph is rendered from the same cells.
The modules, in reading order:

- ``text``: the page's limits (box lines, words) and :func:`~tools.reproduce.page.text.phrase`,
  which fills a named template of ``templates.txt`` (every sentence of the page is one);
- ``checks``: every file of a run dir the page reads, checked first (a bad one stops the page
  in one line naming it);
- ``runs``: what the page reads of one run dir (its curve, its value at a step, its updates);
- ``verdicts``: the rank tests, Holm's correction within each family (suite and question) and the
  verdicts they give;
- ``data``: one suite's results (:class:`SuiteData`) and the comparisons made on them;
- ``glance``: the box and the compact table, from every headline cell (:class:`Cell`);
- ``figures``: each task's figure with the published curves, and the performance profile;
- ``headline``: the detail table, the aggregate across tasks and the per-seed table;
- ``method``: how every number is made, said once;
- ``temperature``: a row's entropy temperature and policy entropy, read from its ``train.csv``;
- ``findings``: what was found where a row stands apart, its numbers computed from the curves;
- ``section``: one suite in detail (final returns, references, pairs, findings, status);
- ``floors``: the multi-agent tasks' scripted-policy floors, paired with each seed's episodes;
- ``readme``: the README's results paragraph;
- ``render``: the whole page.
"""
