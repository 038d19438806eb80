"""README.md is for users: short, its headline numbers the results files' (hymo_book.site.readme
writes them), and no particular run named by its date."""

import re

from hymo_book.results import RESULTS_DIR
from hymo_book.site.readme import HEADLINE_RUNS, README, headline_section, rewrite


def test_the_readme_generated_sections_are_up_to_date():
    assert rewrite(README, check=True), ("README.md's generated sections are stale: run "
                                         "`python3 book/hymo_book/site/readme.py`")


def test_the_readme_stays_short():
    words = len(README.read_text().split())
    assert words <= 1500, f"README.md has {words} words; the rest belongs in the book"


def test_the_headline_is_a_few_lines():
    rows = [line for line in headline_section().splitlines() if line.startswith("| ")]
    assert 3 <= len(rows) - 1 <= 6, rows  # the header, then one row a measurement


def test_the_headline_reads_runs_that_exist():
    assert HEADLINE_RUNS and all((RESULTS_DIR / name).is_file() for name in HEADLINE_RUNS)


def test_the_readme_names_no_run_by_its_date():
    text = README.read_text()
    assert not re.findall(r"20\d\d-[01]\d-[0-3]\d", text)
    assert not re.findall(r"[\w-]+\.(?:json|log)\b", text)
