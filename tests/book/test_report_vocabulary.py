"""Chapters 00-19 teach; chapter 21 reports. The teaching chapters say what was measured in a
sentence and link to the report for the tables, so their prose (markdown cells and the prose
their code cells generate) carries no report vocabulary: no run letters such as "[a]", no
results-file names, no GPU model names and no "card", no "the tree before", no "issue #".
A chapter's last cell, the list of the runs it read (``runs_read()``), is exempt: it names
the files on purpose. Text a chapter quotes from the design document ("...") may name a GPU."""

from __future__ import annotations

import re

import nbformat
import pytest
from hymo_book.curriculum import BOOK

TEACHING = sorted(p.stem for p in BOOK.glob("[0-9][0-9]_*.ipynb") if int(p.stem[:2]) <= 19)

RESULTS_FILE = re.compile(r"[\w-]+_(?:h100|h200|cpu)[\w-]*\.(?:json|log|txt)|_20\d\d-\d\d-\d\d"
                          r"|book/results/[\w.-]+\.(?:json|log|txt)", re.IGNORECASE)
RUN_LETTER = re.compile(r"\[[a-g]\]")
CARD = re.compile(r"\b(?:[AHB]\d00|cards?)\b", re.IGNORECASE)
PHRASES = re.compile(r"the tree before|issue #", re.IGNORECASE)

CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)
MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$", re.DOTALL)
QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”")


def report_words(text: str) -> list[str]:
    """The report vocabulary in one piece of prose, each hit as it is written."""
    found = RESULTS_FILE.findall(text) + PHRASES.findall(text)
    prose = MATH.sub(" ", CODE.sub(" ", text))  # x[a] in code or math is not a run letter
    found += RUN_LETTER.findall(prose)
    found += CARD.findall(QUOTED.sub(" ", prose))  # the document's own "on H100" may stay
    return found


def prose_of(cell) -> list[str]:
    """A markdown cell's source, or the markdown a code cell generated."""
    if cell.cell_type == "markdown":
        return [cell.source]
    if "runs_read()" in cell.source:
        return []
    return ["".join(out.get("data", {}).get("text/markdown", ""))
            for out in cell.get("outputs", [])]


def offending_cells(stem: str) -> list[str]:
    problems = []
    for i, cell in enumerate(nbformat.read(BOOK / f"{stem}.ipynb", as_version=4).cells):
        hits = [hit for text in prose_of(cell) for hit in report_words(text)]
        if hits:
            problems.append(f"cell {i}: {', '.join(sorted(set(hits)))}")
    return problems


@pytest.mark.parametrize("stem", TEACHING)
def test_no_report_vocabulary_in_a_teaching_chapter(stem):
    problems = offending_cells(stem)
    assert not problems, (f"{stem}.ipynb carries report vocabulary (say what was measured in a "
                          f"sentence and link to chapter 21): {'; '.join(problems)}")


@pytest.mark.parametrize("text, expected", [
    ("Run [a] timed it (`gdn_h200_2026-11-30.json`).", ["gdn_h200_2026-11-30.json", "[a]"]),
    ("measured on one H100 card", ["H100", "card"]),
    ("the tree before, filed as issue #4", ["the tree before", "issue #"]),
    ('The document: "312 TFLOPS on H100".', []),
    ("`x[a]` and $W[b]$ index a tensor; a cardinal rule", []),
    ("see book/results/README.md and chapter 21", []),
])
def test_the_scanner(text, expected):
    assert sorted(report_words(text)) == sorted(expected)
