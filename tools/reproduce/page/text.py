"""The page's fixed wording, as data: each template is one line of the page (a paragraph, a bullet,
a box line), filled by the module that computes its numbers (``str.format`` fields). The limits
the page keeps (tests/test_page_limits.py checks them on every rendering):

- at most :data:`BOX_LINES` lines in the box and :data:`FIRST_WORDS` words before the first table;
- no prose line (a line that is not a table row, a heading or a figure) over :data:`LINE_WORDS`
  words, and at most :data:`PROSE_WORDS` words of prose on the whole page.
"""

from __future__ import annotations

BOX_LINES = 8
FIRST_WORDS = 200
LINE_WORDS = 120
PROSE_WORDS = 4500

SYMBOLS = {"none": "○", "above": "▲", "below": "▼", "another": "◇", "no reference": "–"}
NOTE_MARKS = "ᵃᵇᶜᵈᵉ"  # the compact table's footnotes, in the order of FOOTNOTES

TITLE = "# Results: rlzoo against published curves and a peer library, at small budgets"
GENERATED = ("Generated from [`{results}`]({results}) by `python scripts/reproduce.py SUITE "
             "--report-only`; do not edit by hand.")

BOX = {
    "validated": "> - **Validated** against the published per-seed curves of the same "
                 "algorithm: {rows} ({n} cells on {tasks} at {budgets} env steps); {verdicts} "
                 "([Method](#method)).",
    "others": "> - **No published curve of their own**: {rows}.",
    "device": "> - **Device**: {device}, shared with other jobs.",
    "not_yet": "> - **Not yet**: {gpu}; {cells} (each suite's cells table says why).",
}
NONE_VALIDATED = "no cell with a published curve of its own algorithm has run yet"
ALL_LEVEL = ("none differs from its best curve after Holm's correction: a gap not found, not a "
             "match shown")
SOME_DIFFER = ("{k} differ from their best curve after Holm's correction ({cells}); in the "
               "others a gap is not found, which is not a match shown")
NO_GPU = "no GPU run, nothing past {steps} env steps (1M: the `gpu` suite)"

LEGEND = ("Each cell: rlzoo's IQM over seeds of each seed's mean return over its last {window} "
          "env steps, and its verdict against the best (highest-IQM) published curve of its "
          "own algorithm after Holm's correction: {none} no difference found, {above} above, "
          "{below} below, {another} set against another algorithm's curve, {noref} no "
          "published curve. `(10)`: seeds, where not {seeds}; `(3 of 5)`: seeds so far. Each "
          "cell's CI, p and curve: [Detail](#detail); all the published curves: each suite's "
          "section.")
FOOTNOTES = {
    "another": "{mark} Set against {algo}, another algorithm's curve (these rows have no "
               "published curve of their own; a comparison, not a reproduction): {cells}.",
    "before": "{mark} At p < {alpha:g} before Holm's correction only: {cells}.",
    "other": "{mark} Differs after Holm from another published curve of its algorithm: "
             "{cells}.",
}

DETAIL = ("Every headline cell against the best published curve of its algorithm ({window} "
          "windows; IQM [95% CI] (seeds)), P(rlzoo > published) [95% CI] and the rank test's p "
          "before and after Holm:")
AGGREGATE = ("As rliable does: each seed's {window} window, normalized per "
             "task by the TD3 paper's 10 seeds (0: their untrained policy, 1: their mean at 1M "
             "env steps); IQM over every task's seeds pooled, 95% CI by a task-stratified "
             "bootstrap; published rows capitalized. Each table pools the tasks all its rows "
             "ran (seeds every task has), so compare rows within one table only.")
PER_SEED = ("Each seed's evaluation return at the headline budgets (a suite without them: its "
            "final return) and its mean over the window the headline reads, seeds in order:")

# a suite's section (page/section.py)
SUITE_COMMAND = ("Command: `python scripts/reproduce.py {name}` ({seeds} seeds; {why}). "
                 "Evaluation: {episodes} deterministic episodes every {every:,} env steps. Raw "
                 "results: {raw}.")
SUITE_OVERRIDES = "Every rlzoo row of this suite also gets `{overrides}`."
PEER_NOTE = ("Stable-Baselines3's {algos} (the peer) with rlzoo's settings for the same "
             "algorithm, read from rlzoo's config (networks, batch, buffer, warm-up, tau, gamma, "
             "one update per step, TD3's noises and delay, SAC's initial temperature and target "
             "entropy), each optimizer at rlzoo's learning rate for it (a subclass sets each "
             "optimizer's rate before an update, nothing else is changed); SB3's SAC clamps log "
             "std to [-20, 2] (rlzoo's: [-5, 2])")
ROWS_SEEN = "Rows: as described above{others}."
FINAL_INTRO = ("Final return ({what}), and where each row started: the IQM of its seeds' first "
               "evaluation ({first_eval}) and how many seeds ended above their own:")
FINAL_WHAT = {True: "mean ± std over seeds; each cell's IQM [95% CI] over its last {window} is "
                    "in [Detail](#detail)",
              False: "IQM [95% CI] and mean ± std over seeds"}
FINAL_AGAIN = "Final return, as above:"
REFERENCE_INTRO = ("Against every published curve of its algorithm ({window} windows, IQM [95% "
                   "CI] (seeds) on each side; updates: gradient updates by then):")
REFERENCE_AGAIN = "Against every published curve, as above:"
NOT_RUN = "**Not run yet**: no cell of this suite has run{why}."
SOURCE_DATA = ("Per-seed values used here: [`results/published/{key}.json`]({link}) (written by "
               "`scripts/published_seeds.py`).")
