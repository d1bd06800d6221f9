"""The results page's wording lives in tools/reproduce/page/templates.txt (issue 53): every
template there is named by the page's code, every name the code gives ``phrase`` is there, every
field a template uses is a plain name, and the page rendered from the committed results (and the
README's paragraph) leaves no ``{field}`` unfilled. The format's rules (wrapping, paragraphs,
comments, a name given twice) are checked on small sources."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from tools.reproduce.page import text
from tools.reproduce.page.render import render
from tools.reproduce.suites import LEADS, PAGE_SUITES, SUITES

REPO = Path(__file__).resolve().parents[1]
PAGE_CODE = sorted((REPO / "tools" / "reproduce" / "page").glob("*.py"))
FILE_TYPES = {"json", "csv", "yaml", "py", "md", "txt", "png"}  # "floors.json" names a file
FIELD = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*(?:[:!][^{}\n]*)?\}")  # {name}, {n:,}, {x!r}


def code_strings() -> set[str]:
    """Every string constant of the page's modules."""
    return {node.value for path in PAGE_CODE for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def said_names() -> list[tuple[str, str]]:
    """(module, name) for every template name given to ``phrase`` as a literal, through ``a if c
    else b`` choices too."""
    def literals(node: ast.expr) -> list[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.IfExp):
            return literals(node.body) + literals(node.orelse)
        return []

    out = []
    for path in PAGE_CODE:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "phrase" \
                    and node.args:
                out += [(path.name, name) for name in literals(node.args[0])]
    return out


def test_every_template_is_named_by_the_code() -> None:
    """No template in templates.txt that no module names (a sentence nobody says)."""
    unused = sorted(set(text.templates()) - code_strings())
    assert not unused, f"templates.txt has templates no code names: {unused}"


def test_every_name_the_code_says_is_a_template() -> None:
    """Every literal given to ``phrase``, and every string of the code that reads as a template's
    name (``group.name`` of a group templates.txt has, not a file name: the names a table of
    choices holds), is a template."""
    said = said_names()
    assert len(said) > 150  # the page says its sentences through phrase
    missing = [(module, name) for module, name in said if name not in text.templates()]
    assert not missing, f"phrase() names templates that templates.txt lacks: {missing}"
    groups = {name.split(".")[0] for name in text.templates() if "." in name}
    named = {s for s in code_strings() if re.fullmatch(r"[a-z_]+(\.[a-z0-9_]+)+", s)
             and s.split(".")[0] in groups and s.rsplit(".", 1)[1] not in FILE_TYPES}
    assert {"question.head", "device.cpus_cores", "footnote.other"} <= named
    assert not named - set(text.templates()), sorted(named - set(text.templates()))


def test_every_field_is_a_plain_name() -> None:
    """``{name}`` or ``{name:spec}``: never a positional ``{}``, an index or an attribute (the
    code passes names only), and no brace left unbalanced."""
    for name, template in text.templates().items():
        for field in text.fields(template):
            assert field.isidentifier(), (name, field)


@pytest.fixture(scope="module")
def rendered() -> tuple[str, list[str], dict[str, list[str]]]:
    """The page and README paragraph of the committed results, and each template said while
    rendering them with the values it was given."""
    seen: dict[str, list[str]] = {}
    phrase = text.phrase

    def recording(name: str, /, **values: object) -> str:
        seen.setdefault(name, []).append(out := phrase(name, **values))
        return out

    with pytest.MonkeyPatch.context() as patch:
        for path in PAGE_CODE:
            if path.stem == "__init__":
                continue
            module = importlib.import_module(f"tools.reproduce.page.{path.stem}")
            if getattr(module, "phrase", None) is phrase:
                patch.setattr(module, "phrase", recording)
        page, readme = render(REPO / "results", REPO / "docs", [SUITES[s] for s in PAGE_SUITES],
                              LEADS, REPO)
    return page, readme, seen


def test_no_field_is_left_unfilled_on_the_page(
        rendered: tuple[str, list[str], dict[str, list[str]]]) -> None:
    page, readme, seen = rendered
    assert len(seen) > 100  # most of the templates speak on the committed results
    for name, outputs in seen.items():
        for out in outputs:
            assert not FIELD.search(out), (name, out)
    for where, body in (("docs/results.md", page), ("README", "\n".join(readme))):
        left = FIELD.findall(body)
        assert not left, f"{where} keeps unfilled fields: {left[:5]}"


def test_the_format() -> None:
    source = """// a comment
[a.one]
first line
  wrapped here

second paragraph
// a comment inside is dropped
[a.two]
# a heading, not a comment
[b]

"""
    assert text.parse(source) == {"a.one": "first line wrapped here\n\nsecond paragraph",
                                  "a.two": "# a heading, not a comment", "b": ""}
    with pytest.raises(ValueError, match=r"\[a\] is given twice"):
        text.parse("[a]\nx\n[a]\ny\n")
    with pytest.raises(ValueError, match="text before the first"):
        text.parse("stray\n[a]\nx\n")


def test_say_names_what_is_missing() -> None:
    with pytest.raises(KeyError, match=r"no template \[no.such\]"):
        text.phrase("no.such")
    with pytest.raises(KeyError, match=r"template \[box.device\] needs device"):
        text.phrase("box.device")
    assert text.phrase("box.device", device="2-core CPU") == \
        "> - **Device**: 2-core CPU, shared with other jobs."
    assert text.joined(["a"]) == "a" and text.joined(["a", "b", "c"]) == "a, b and c"
    assert text.seeds_text(1) == "1 seed" and text.seeds_text(5) == "5 seeds"
