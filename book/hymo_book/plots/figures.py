"""Redraw every figure in the repository's ``figures/``: the model's and the measured runs'.

    cd book && python3 -m hymo_book.plots [--out ../figures] [--only NAME ...] [--list]

Each module listed here defines ``FIGURES``, a dict from a file name to a zero-argument
function returning a matplotlib ``Figure``: the figures of the model come from
:mod:`hymo_book.plots` (:data:`MODEL_MODULES`), those of measured runs read
``book/results`` (:data:`RESULT_MODULES`). The command collects them and writes each one
with :func:`hymo_mini.train.curves.save_figure`; nothing is trained or measured.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from pathlib import Path

from hymo_mini.choices import did_you_mean
from hymo_mini.train.curves import save_figure

__all__ = ["MODEL_MODULES", "RESULT_MODULES", "MODULES", "collect_figures", "figure_names",
           "draw_figures", "main"]

MODEL_MODULES = tuple(f"hymo_book.plots.{name}" for name in (
    "architecture", "attention", "gdn", "initialisation", "lr_schedule", "mhc", "moe", "rope"))
RESULT_MODULES = ("hymo_book.plots.kernel_benchmarks", "hymo_book.plots.mqar",
                  "hymo_book.plots.optimizers")
MODULES = MODEL_MODULES + RESULT_MODULES
DEFAULT_OUT = Path(__file__).resolve().parents[3] / "figures"


def collect_figures(modules: tuple[str, ...] = MODULES) -> dict[str, Callable]:
    """Every registered figure of ``modules``, by file name; a name registered twice is an
    error."""
    found: dict[str, Callable] = {}
    for name in modules:
        for file_name, fn in getattr(importlib.import_module(name), "FIGURES", {}).items():
            if file_name in found:
                raise RuntimeError(f"figure {file_name!r} is registered twice (again in {name})")
            found[file_name] = fn
    return found


def figure_names(figures: dict[str, Callable], only, list_command: str) -> list[str]:
    """The names to draw: ``only`` (every figure when None), each checked to be one of
    ``figures``; a one-line ValueError names the first unknown one, the nearest name and
    ``list_command``, which lists them."""
    names = sorted(figures) if only is None else list(only)
    for name in names:
        if name not in figures:
            raise ValueError(f"--only {name!r}: no such figure{did_you_mean(name, figures)}; "
                             f"{list_command} shows them")
    return names


def draw_figures(figures: dict[str, Callable], names: list[str], out) -> None:
    """Draw each of ``names`` into the folder ``out`` (made if missing), saying where."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        save_figure(figures[name](), out / name)
        print(f"wrote {out / name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m hymo_book.plots", description=__doc__,
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
        names = figure_names(figures, args.only, "python3 -m hymo_book.plots --list")
    except ValueError as err:
        parser.error(str(err))
    out = Path(args.out)
    if out.exists() and not out.is_dir():  # before any figure is drawn
        parser.error(f"--out {str(out)!r}: a file is there, not a folder; choose a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        parser.error(f"--out {str(out)!r}: cannot make that folder ({err.strerror or err})")
    draw_figures(figures, names, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
