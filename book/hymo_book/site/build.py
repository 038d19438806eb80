"""The book as a static website, built and read with no network.

Run it from ``book/`` (``python3 -m hymo_book.site``) or from the repository root
(``python3 book/hymo_book/site/build.py``); the site lands in ``book/_build/html``.

The site is built by Jupyter Book 1 (Sphinx + MyST-NB) from the committed, executed
notebooks in ``book/``; nothing is re-executed, so the pages show exactly the outputs CI
validated. (Jupyter Book 2 downloads its theme at build time and cannot build offline.)
The table of contents is made at build time from the numbered notebooks, in reading order,
so a new chapter appears without editing a list; ``book/README.md`` is the landing page.

Reading the site needs no network either: :mod:`hymo_book.site.offline` serves MathJax and the
widget embedder from the site's ``_static/``, so the math is typeset (in generated prose too:
``_config.yml`` has myst-nb read a cell's Markdown output as MyST) and every ``interact`` shows
its saved view, with a note (:mod:`hymo_book.site.reading`) that its figure moves only when the
chapter runs under a kernel. ``_static/hymo_site.css`` shows a figure at its own size, or
shrunk to the text column when it is wider, where a click opens it at its own size
(``_static/hymo_figures.js``); display formulas, tables and outputs wider than the column
scroll sideways inside their box.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["BOOK", "chapters", "write_toc", "build_site", "main"]

BOOK = Path(__file__).resolve().parents[2]
CHAPTER = re.compile(r"^(\d\d)_[a-z0-9_]+\.ipynb$")
# Jupyter Book's command line, run by this interpreter: no need for `jupyter-book` on PATH
# (it is not there in a virtual environment that was never activated)
JUPYTER_BOOK = [sys.executable, "-c", "import sys; from jupyter_book.cli.main import main; "
                "sys.argv[0] = 'jupyter-book'; sys.exit(main())"]


def chapters(book_dir: Path = BOOK) -> list[Path]:
    """The numbered chapter notebooks, in reading order."""
    found = [p for p in Path(book_dir).iterdir() if CHAPTER.match(p.name)]
    return sorted(found, key=lambda p: p.name)


def write_toc(book_dir: Path, path: Path) -> Path:
    """A Jupyter Book ``_toc.yml``: README as the root, then the parts of the reading order
    (``hymo_book.curriculum.PARTS``) with the chapters that exist on disk, each followed by
    the pages of ``PAGES_AFTER`` that follow it (the notation page); a chapter file
    outside the reading order goes in a last part, so that nothing is left off the site."""
    from hymo_book.curriculum import PAGES_AFTER, PARTS

    on_disk = {p.stem for p in chapters(book_dir)}
    lines = ["format: jb-book", "root: README", "parts:"]
    placed = set()
    for caption, stems in PARTS:
        present = [s for s in stems if s in on_disk]
        if present:
            lines += [f"- caption: {caption}", "  chapters:"]
            for s in present:  # each chapter, then the pages that follow it (the notation)
                lines += [f"  - file: {page}" for page in [s] + [
                    p for p, after in PAGES_AFTER.items()
                    if after == s and (Path(book_dir) / f"{p}.md").is_file()]]
            placed.update(present)
    rest = sorted(on_disk - placed)
    if rest:
        lines += ["- caption: Other chapters", "  chapters:"] + [f"  - file: {s}" for s in rest]
    path.write_text("\n".join(lines) + "\n")
    return path


def _check_tools() -> None:
    try:
        import jupyter_book  # noqa: F401
    except ImportError:
        raise RuntimeError("jupyter-book is not installed: pip install 'jupyter-book<2' "
                           "(Jupyter Book 1; version 2 cannot build offline)") from None


def build_site(out_dir: Path | str | None = None, book_dir: Path = BOOK,
               quiet: bool = True) -> Path:
    """Build the HTML site; returns the folder holding ``index.html``.

    ``out_dir`` receives ``_build/html``; by default ``book/_build`` (git-ignored).
    """
    _check_tools()
    book_dir = Path(book_dir).resolve()
    if not chapters(book_dir):
        raise RuntimeError(f"no chapter notebooks (NN_name.ipynb) found in {book_dir}")
    out = Path(out_dir).resolve() if out_dir is not None else book_dir
    with tempfile.TemporaryDirectory() as tmp:
        toc = write_toc(book_dir, Path(tmp) / "_toc.yml")
        cmd = [*JUPYTER_BOOK, "build", str(book_dir), "--toc", str(toc),
               "--config", str(book_dir / "_config.yml"), "--path-output", str(out)]
        if quiet:
            cmd.append("--quiet")
        result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"jupyter-book failed ({result.returncode}):\n"
                           f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    html = out / "_build" / "html"
    if not (html / "index.html").is_file():
        raise RuntimeError(f"the build finished but {html / 'index.html'} is missing")
    return html


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m hymo_book.site",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None,
                        help="folder that receives _build/html (default: book/)")
    parser.add_argument("--verbose", action="store_true", help="show Sphinx's output")
    args = parser.parse_args(argv)
    html = build_site(args.out, quiet=not args.verbose)
    print(f"site built: {html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
