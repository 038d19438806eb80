"""Generated sections of a markdown file: what stands between ``<!-- name: start -->`` and
``<!-- name: end -->`` is written by a function, so the file and its sources cannot drift
apart. ``hymo_book.site.book_index`` (book/README.md's chapter table) and ``hymo_book.site.readme``
(README.md's parts and measured numbers) use it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

__all__ = ["rewrite_sections", "main"]


def rewrite_sections(path: Path, sections: dict[str, Callable[[], str]],
                     check: bool = False) -> bool:
    """Put what each ``sections[name]()`` returns between the markers of ``name``; returns
    whether ``path`` was already up to date (with ``check``, nothing is written)."""
    text = original = path.read_text()
    for name, section in sections.items():
        start, end = f"<!-- {name}: start -->", f"<!-- {name}: end -->"
        if start not in text or end not in text:
            raise ValueError(f"{path} has no {start} ... {end} markers")
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{start}\n{section()}\n{end}{tail}"
    if not check and text != original:
        path.write_text(text)
    return text == original


def main(argv: list[str] | None, label: str, rewrite: Callable[..., bool],
         description: str) -> int:
    """The command line of a generator: rewrite ``label``'s sections, or with ``--check``
    exit 1 when they are stale."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if stale")
    args = parser.parse_args(argv)
    fresh = rewrite(check=args.check)
    print(f"{label} is up to date" if fresh else
          (f"{label} is out of date" if args.check else f"{label} rewritten"))
    return 1 if args.check and not fresh else 0
