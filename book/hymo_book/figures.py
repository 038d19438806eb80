"""Redraw the book's result-based figures in ``figures/`` from ``book/results``.

    cd book && python3 -m hymo_book.figures [--out ../figures] [--only NAME ...] [--list]

Each module listed in :data:`MODULES` defines ``FIGURES``, a dict from a file name to a
zero-argument function returning a matplotlib ``Figure`` (the convention of
``hymo_mini.viz``, whose figures of the model itself ``hymo-mini figures`` draws). This
command collects them and writes each one; nothing is trained or measured.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from pathlib import Path

from hymo_mini import figures as library_figures  # the same checks and files as hymo-mini figures

__all__ = ["MODULES", "collect_figures", "main"]

MODULES = ("hymo_book.kernel_plots", "hymo_book.mqar_plots", "hymo_book.optim_plots",
           "hymo_book.training")
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "figures"


def collect_figures(modules: tuple[str, ...] = MODULES) -> dict[str, Callable]:
    """Every registered figure, by file name; a name registered twice is an error."""
    return library_figures.collect_figures([importlib.import_module(name) for name in modules])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m hymo_book.figures", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(DEFAULT_OUT),
                        help="output folder (default: the repository's figures/)")
    parser.add_argument("--only", nargs="*", default=None, help="file names to redraw")
    parser.add_argument("--list", action="store_true", help="list the figures and exit")
    args = parser.parse_args(argv)
    figures = collect_figures()
    if args.list:
        print("\n".join(sorted(figures)))
        return 0
    try:
        names = library_figures.figure_names(figures, args.only,
                                             "python3 -m hymo_book.figures --list")
    except ValueError as err:
        parser.error(str(err))
    library_figures.draw_figures(figures, names, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
