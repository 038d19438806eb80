"""One table renderer for every table the package prints: aligned text and HTML.

A table here is a title, a header row, body rows of strings and optional footer rows
(totals). ``str()`` aligns the columns for a terminal; ``_repr_html_`` is what a notebook
shows. Tables of the package (parameters, FLOPs, shapes, the optimizer split) build a
:class:`TextTable` and inherit their printing from :class:`RenderedTable`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

__all__ = ["TextTable", "RenderedTable"]


class TextTable:
    """``align`` per column: "l" or "r" (default: the first column left, the rest right)."""

    def __init__(self, header: Sequence[str], rows: Sequence[Sequence[str]], *, title: str = "",
                 footer: Sequence[Sequence[str]] = (), align: str | None = None):
        self.header = tuple(header)
        self.rows = [tuple(r) for r in rows]
        self.footer = [tuple(r) for r in footer]
        for row in [*self.rows, *self.footer]:
            if len(row) != len(self.header):
                raise ValueError(f"a row has {len(row)} cells, the header {len(self.header)}: "
                                 f"{row!r}")
        self.title = title
        self.align = align or "l" + "r" * (len(self.header) - 1)
        if len(self.align) != len(self.header) or set(self.align) - {"l", "r"}:
            raise ValueError(f"align must be one 'l' or 'r' per column ({len(self.header)}), "
                             f"got {self.align!r}")

    def __str__(self) -> str:
        every = [self.header, *self.rows, *self.footer]
        widths = [max(len(row[i]) for row in every) for i in range(len(self.header))]

        def line(row):
            return "  ".join(cell.ljust(w) if a == "l" else cell.rjust(w)
                             for cell, w, a in zip(row, widths, self.align, strict=True)).rstrip()

        rule = "-" * max(len(line(row)) for row in every)
        lines = ([self.title] if self.title else []) + [line(self.header), rule]
        lines += [line(row) for row in self.rows]
        if self.footer:
            lines += [rule] + [line(row) for row in self.footer]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        def cells(row, tag, bold=False):
            out = []
            for cell, a in zip(row, self.align, strict=True):
                text = html.escape(cell)
                out.append(f"<{tag} style='text-align:{'left' if a == 'l' else 'right'}'>"
                           f"{'<b>' + text + '</b>' if bold else text}</{tag}>")
            return "<tr>" + "".join(out) + "</tr>"

        caption = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        body = "".join(cells(r, "td") for r in self.rows)
        body += "".join(cells(r, "td", bold=True) for r in self.footer)
        return (f"<table class='hymo-table'>{caption}<thead>{cells(self.header, 'th')}</thead>"
                f"<tbody>{body}</tbody></table>")


class RenderedTable:
    """Mixin: a class with ``_table() -> TextTable`` prints as text and as HTML."""

    def _table(self) -> TextTable:
        raise NotImplementedError

    def __str__(self) -> str:
        return str(self._table())

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return self._table()._repr_html_()
