"""``hymo-mini figures``: regenerate every file in ``figures/``.

Each module under :mod:`hymo_mini.viz` may define ``FIGURES``, a dict from a file name to a
zero-argument function returning a matplotlib ``Figure``. This command imports them all
and writes each figure, so the book and the README show exactly what the package draws.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path

import hymo_mini.viz

__all__ = ["collect_figures", "save_figure", "main"]


def collect_figures() -> dict[str, Callable]:
    """Every registered figure, by file name, from every ``hymo_mini.viz`` module."""
    found: dict[str, Callable] = {}
    for info in sorted(pkgutil.iter_modules(hymo_mini.viz.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"hymo_mini.viz.{info.name}")
        for name, fn in getattr(module, "FIGURES", {}).items():
            if name in found:
                raise RuntimeError(f"figure {name!r} is registered twice (again in {info.name})")
            found[name] = fn
    return found


def save_figure(fig, path: Path) -> None:
    # no metadata: the same figure gives the same bytes on every run
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hymo-mini figures", description=__doc__)
    parser.add_argument("--out", default="figures", help="output folder (default: figures)")
    parser.add_argument("--only", nargs="*", default=None, help="file names to regenerate")
    parser.add_argument("--list", action="store_true", help="list the figures and exit")
    args = parser.parse_args(argv)
    figures = collect_figures()
    if args.list:
        print("\n".join(sorted(figures)))
        return 0
    names = sorted(figures) if args.only is None else args.only
    unknown = [n for n in names if n not in figures]
    if unknown:
        parser.error(f"unknown figure(s) {unknown}; known: {sorted(figures)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        save_figure(figures[name](), out / name)
        print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
