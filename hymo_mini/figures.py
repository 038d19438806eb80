"""The package's figures of the model, by file name: ``hymo-mini figures`` draws them.

Each plotting module of :mod:`hymo_mini.viz` may define ``FIGURES``, a dict from a file
name to a zero-argument function returning a matplotlib ``Figure``. They are collected
here by plain imports; nothing reads a file, so the command runs from any installed copy.
(The figures drawn from measured results belong to the book: ``book/hymo_book``.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hymo_mini.model_config import did_you_mean
from hymo_mini.viz import (
    arch,
    depth_plots,
    gdn_plots,
    mhc_plots,
    mla_plots,
    moe_plots,
    rope_plots,
    train_plots,
)

__all__ = ["FIGURES", "collect_figures", "figure_names", "draw_figures", "save_figure"]

MODULES = (arch, depth_plots, gdn_plots, mhc_plots, mla_plots, moe_plots, rope_plots,
           train_plots)


def collect_figures(modules=MODULES) -> dict[str, Callable]:
    """Every registered figure, by file name; a name registered twice is an error."""
    found: dict[str, Callable] = {}
    for module in modules:
        for name, fn in getattr(module, "FIGURES", {}).items():
            if name in found:
                raise RuntimeError(f"figure {name!r} is registered twice "
                                   f"(again in {module.__name__})")
            found[name] = fn
    return found


FIGURES = collect_figures()


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


def save_figure(fig, path: Path) -> None:
    # no metadata: the same figure gives the same bytes on every run
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
