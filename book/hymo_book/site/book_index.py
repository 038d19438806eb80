"""The chapter table of ``book/README.md``, written from the reading order and the chapters
themselves, so that the landing page, the site's table of contents and the files agree.

    python3 book/hymo_book/site/book_index.py            # rewrite the table between its markers
    python3 book/hymo_book/site/book_index.py --check    # exit 1 if book/README.md is out of date

A chapter's row is its title (its first heading, without the number) and the sentence its
opening cell marks as the summary: the first line that starts with ``**In short:**``, or
else the opening cell's first sentence.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make ``hymo_book`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import nbformat  # noqa: E402

from hymo_book.curriculum import BOOK, PARTS  # noqa: E402
from hymo_book.site import markers  # noqa: E402
from hymo_book.site.markers import rewrite_sections  # noqa: E402

__all__ = ["INDEX", "chapter_row", "chapter_table", "rewrite"]

INDEX = BOOK / "README.md"


def title_and_summary(stem: str) -> tuple[str, str]:
    cells = nbformat.read(BOOK / f"{stem}.ipynb", as_version=4).cells
    first = next(c.source for c in cells if c.cell_type == "markdown")
    lines = first.splitlines()
    title = re.sub(r"^#\s*\d+\s*·\s*", "", lines[0]).strip()
    marked = [line for line in lines if line.startswith("**In short:**")]
    if marked:
        summary = marked[0].removeprefix("**In short:**").strip()
    else:
        body = " ".join(line.strip() for line in lines[1:] if line.strip())
        summary = re.split(r"(?<=[.!?])\s", body, maxsplit=1)[0] if body else ""
    return title, summary


def chapter_row(stem: str) -> str:
    title, summary = title_and_summary(stem)
    return f"| {stem[:2]} | [{title}]({stem}.ipynb) | {summary} |"


def chapter_table() -> str:
    lines = []
    for caption, stems in PARTS:
        lines += [f"**{caption}**", "", "| No | Chapter | What it covers |", "|----|---|---|"]
        lines += [chapter_row(s) for s in stems if (BOOK / f"{s}.ipynb").exists()]
        lines.append("")
    return "\n".join(lines).rstrip()


def rewrite(index: Path = INDEX, check: bool = False) -> bool:
    """Put the table between the markers; returns whether the file was already up to date."""
    return rewrite_sections(index, {"chapters": chapter_table}, check)


def main(argv: list[str] | None = None) -> int:
    return markers.main(argv, "book/README.md", rewrite, __doc__.splitlines()[0])


if __name__ == "__main__":
    raise SystemExit(main())
