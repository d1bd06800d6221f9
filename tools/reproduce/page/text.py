"""The page's wording, as data: every sentence of the page (and of the README's results paragraph)
is a named template in ``templates.txt`` beside this module, filled with ``str.format`` fields by
the module that computes its numbers (:func:`phrase`); a sentence that depends on the results is a
choice between named templates, made from the numbers. The format of ``templates.txt`` is said at
its top. The limits the page keeps (tests/test_page_limits.py checks them on every rendering):

- at most :data:`BOX_LINES` lines in the box and :data:`FIRST_WORDS` words before the first table;
- no prose line (a line that is not a table row, a heading or a figure) over :data:`LINE_WORDS`
  words, and at most :data:`PROSE_WORDS` words of prose on the whole page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from string import Formatter
from typing import Any

BOX_LINES = 8
FIRST_WORDS = 200
LINE_WORDS = 120
PROSE_WORDS = 4500

SYMBOLS = {"none": "○", "above": "▲", "below": "▼", "another": "◇", "no reference": "–"}
NOTE_MARKS = "ᵃᵇᶜᵈᵉ"  # the compact table's footnotes, in the order of FOOTNOTES
# the compact table's footnotes: key -> its template, in the order of their marks
FOOTNOTES = {"another": "footnote.another", "before": "footnote.before", "other": "footnote.other"}

TEMPLATES_FILE = Path(__file__).with_name("templates.txt")
NAME = re.compile(r"\[([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*)\]")  # a line naming a template


def parse(source: str) -> dict[str, str]:
    """The templates of ``source`` (the format of ``templates.txt``), by name: a line ``[name]``
    starts one; its lines up to the next name are stripped and joined by one space, a blank line
    between two of them is a paragraph break (``\\n\\n``); a line starting with ``//`` is a
    comment. ``ValueError`` for a name given twice or text before the first name."""
    out: dict[str, str] = {}
    name: str | None = None
    paragraphs: list[list[str]] = []

    def close() -> None:
        if name is not None:
            out[name] = "\n\n".join(" ".join(p) for p in paragraphs if p)

    for raw in source.splitlines():
        line = raw.strip()
        head = NAME.fullmatch(line)
        if line.startswith("//"):
            continue
        if head:
            close()
            name, paragraphs = head.group(1), [[]]
            if name in out:
                raise ValueError(f"{TEMPLATES_FILE.name}: [{name}] is given twice")
        elif name is None:
            if line:
                raise ValueError(f"{TEMPLATES_FILE.name}: text before the first [name]: {line!r}")
        elif line:
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    close()
    return out


@cache
def templates() -> dict[str, str]:
    """Every template of ``templates.txt`` by name (read once)."""
    return parse(TEMPLATES_FILE.read_text(encoding="utf-8"))


def fields(template: str) -> list[str]:
    """The names of ``template``'s ``str.format`` fields, in order (``{k}`` and ``{k:,}``: k)."""
    return [f for _, f, _, _ in Formatter().parse(template) if f is not None]


def phrase(name: str, /, **values: Any) -> str:
    """The template ``name`` of ``templates.txt`` filled with ``values`` (``str.format``);
    ``KeyError`` naming the template for a name it lacks or a field not given."""
    found = templates()
    if name not in found:
        raise KeyError(f"no template [{name}] in {TEMPLATES_FILE.name}")
    missing = [f for f in fields(found[name]) if f not in values]
    if missing:
        raise KeyError(f"template [{name}] needs {', '.join(missing)}")
    return found[name].format(**values)


def seeds_text(n: int) -> str:
    """``1 seed``, ``5 seeds`` (templates ``seeds.one`` and ``seeds.many``)."""
    return phrase("seeds.one" if n == 1 else "seeds.many", n=n)


def joined(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c`` (the last two joined by the template ``list.and``)."""
    if len(items) == 1:
        return items[0]
    return phrase("list.and", items=", ".join(items[:-1]), last=items[-1])
