"""The package's kernel source, shown as it is, with notes beside the lines (chapter 10).

:func:`listing` takes a function, a ``@triton.jit`` kernel or a class, cuts the lines from
the first containing ``start`` to the first after it containing ``stop``, and puts a note
under every line that contains one of the keys of ``notes`` (each key must match exactly
one shown line, so a note cannot silently drift from the code it explains). The result
prints with the file's own line numbers. Nothing is copied: the text is read from the
module's file when the chapter runs. Checked by ``tests/book/test_book_kernel_source.py``.
"""

from __future__ import annotations

import html
import inspect
from pathlib import Path

__all__ = ["Listing", "listing"]


class Listing:
    """Lines of a source file (with their numbers) and the notes under some of them."""

    def __init__(self, path: str, first: int, lines: list[str], notes: dict[int, str]):
        self.path, self.first, self.lines, self.notes = path, first, lines, notes

    def __str__(self) -> str:
        last = self.first + len(self.lines) - 1
        width = len(str(last))
        out = [f"{self.path}, lines {self.first}-{last}:"]
        for i, line in enumerate(self.lines):
            out.append(f"{self.first + i:>{width}} | {line}")
            if i in self.notes:
                indent = len(line) - len(line.lstrip())
                out.append(f"{'':>{width}} | {' ' * indent}▲ {self.notes[i]}")
        return "\n".join(out)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(str(self))}</pre>"


def _target(obj):
    """The Python object whose source a Triton kernel wraps (``.fn``), else ``obj``."""
    return getattr(obj, "fn", obj)


def _relative(path: str) -> str:
    parts = Path(path).parts
    return "/".join(parts[parts.index("hymo_mini"):]) if "hymo_mini" in parts else path


def listing(obj, start: str | None = None, stop: str | None = None,
            notes: dict[str, str] | None = None) -> Listing:
    """The source of ``obj`` from the line containing ``start`` (default: its first line)
    through the first later line containing ``stop`` (default: its last), with ``notes``:
    {a piece of one shown line: the note to print under it}. Raises ValueError naming the
    piece when ``start``, ``stop`` or a note's key matches no line, or a note's key more
    than one."""
    target = _target(obj)
    lines, first = inspect.getsourcelines(target)
    lines = [line.rstrip("\n") for line in lines]
    name = getattr(target, "__qualname__", repr(target))
    begin = 0
    if start is not None:
        found = [i for i, line in enumerate(lines) if start in line]
        if not found:
            raise ValueError(f"start={start!r} is in no line of {name}")
        begin = found[0]
    end = len(lines) - 1
    if stop is not None:
        found = [i for i, line in enumerate(lines) if i >= begin and stop in line]
        if not found:
            raise ValueError(f"stop={stop!r} is in no line of {name} after {start!r}")
        end = found[0]
    shown = lines[begin:end + 1]
    placed: dict[int, str] = {}
    for piece, note in (notes or {}).items():
        hits = [i for i, line in enumerate(shown) if piece in line]
        if len(hits) != 1:
            raise ValueError(f"the note's key {piece!r} is in {len(hits)} shown lines of {name}, "
                             "not exactly one: make it longer")
        placed[hits[0]] = note
    return Listing(_relative(inspect.getsourcefile(target)), first + begin, shown, placed)
