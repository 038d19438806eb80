"""book/results/ holds the runs the book and README show, and its index says what each one is:
a run that nothing reads fails, a name the book reads that is not there fails, and the index
(book/results/README.md) must be what hymo_book.results_index writes."""

import json
from pathlib import Path

import pytest
from hymo_book import results
from hymo_book.curriculum import BOOK
from hymo_book.results import RESULTS_DIR
from hymo_book.results_index import (
    INDEX,
    RUN_NAME,
    chapters_reading,
    index_rows,
    rewrite,
    run_files,
    what,
)
from hymo_book.site.readme import HEADLINE_RUNS

HELPERS = Path(results.__file__).resolve().parent


def test_every_run_says_what_it_measures():
    missing = []
    for name in run_files():
        try:
            what(name)
        except KeyError:
            missing.append(name)
    assert not missing, f"add a line to WHAT in hymo_book/results_index.py for {missing}"


def test_the_index_is_up_to_date():
    assert rewrite(INDEX, check=True), ("book/results/README.md is stale: run "
                                        "`python3 book/hymo_book/results_index.py`")


def test_every_row_knows_its_hardware_date_and_command():
    unknown = [r["file"] for r in index_rows() if "?" in (r["hardware"], r["date"], r["command"])]
    assert not unknown, f"say in RECORDED what these runs do not record: {unknown}"


def test_no_run_is_kept_that_nothing_reads():
    unread = [r["file"] for r in index_rows() if not r["shown_in"]]
    assert not unread, (f"no chapter and no README line reads {unread}: show them, or delete "
                        "them (git keeps them)")


def test_every_run_the_book_reads_is_kept():
    named = set(chapters_reading()) | set(HEADLINE_RUNS)
    for path in HELPERS.rglob("*.py"):
        named |= set(RUN_NAME.findall(path.read_text()))
    missing = sorted(name for name in named if not (RESULTS_DIR / name).is_file())
    assert not missing, f"the book reads runs that book/results/ does not have: {missing}"


def test_a_chapter_that_reads_runs_lists_them_last():
    """The list is the chapter's last cell, so it sees every run the chapter read."""
    for path in sorted(BOOK.glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        listing = [i for i, c in enumerate(cells) if "runs_read()" in "".join(c["source"])]
        assert listing in ([], [len(cells) - 1]), f"{path.name}: runs_read() is not its last cell"


def test_the_name_pattern_finds_every_kind_of_run():
    for name in ("gdn_h200_2026-11-30.json", "gpu_tests_one_rate_2026-12-05.log",
                 "optimizers_cpu.json", "sass_sm90_triton36_2026-12-03b.json",
                 "pairs_variants_h200_2026-12-03.txt"):
        assert RUN_NAME.findall(f"read `{name}` here") == [name]
    assert set(run_files()) <= {m for n in run_files() for m in RUN_NAME.findall(n)}


def test_runs_read_lists_what_this_process_read(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(results, "_READ", {})
    (tmp_path / "a_h200_x.json").write_text(json.dumps({"command": "c"}))
    results.load_result("a_h200_x.json")
    text = repr(results.runs_read())
    assert "read 1 run " in text and "- `a_h200_x.json`" in text
    with pytest.raises(FileNotFoundError, match="book/results/README.md"):
        results.load_result("c_h200_x.json")
