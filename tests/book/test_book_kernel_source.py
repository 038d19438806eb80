"""hymo_book.kernels.source (book chapter 10): listings show the package's own lines with the
file's line numbers, notes land under the one line they name, and a note or a cut that names
no line (or several) is an error rather than a silent drift."""

import inspect

import pytest
from hymo_book.kernels.source import listing

from hymo_mini.ops.gla import recurrent_triton
from hymo_mini.ops.utils import tiles


def test_a_listing_is_the_source_with_its_line_numbers():
    lines, first = inspect.getsourcelines(recurrent_triton.RecurrentGLAFunction)
    text = str(listing(recurrent_triton.RecurrentGLAFunction))
    head, *body = text.splitlines()
    assert head == (f"hymo_mini/ops/gla/recurrent_triton.py, lines {first}-"
                    f"{first + len(lines) - 1}:")
    assert [line.split(" | ", 1)[1] if " | " in line else "" for line in body] == [
        line.rstrip("\n") for line in lines]


def test_a_triton_kernel_is_read_through_its_python_function():
    text = str(listing(tiles.load_rows))
    assert "def load_rows(p, row0, o_t, m_t, o_x, m_x" in text
    assert text.splitlines()[0].startswith("hymo_mini/ops/utils/tiles.py, lines ")


def test_start_stop_and_notes():
    shown = listing(recurrent_triton._bwd_kernel, start="for i_k in range(NT):",
                    stop="tl.debug_barrier()", notes={"t0 = (NT - 1 - i_k) * C": "last first"})
    lines = str(shown).splitlines()[1:]
    assert "for i_k in range(NT):" in lines[0] and "tl.debug_barrier()" in lines[-1]
    where = next(i for i, line in enumerate(lines) if "t0 = (NT - 1 - i_k) * C" in line)
    assert lines[where + 1].endswith("▲ last first")
    indent = lambda s: len(s.split(" | ", 1)[1]) - len(s.split(" | ", 1)[1].lstrip())
    assert indent(lines[where + 1]) == indent(lines[where])  # under the line it explains
    assert "<pre>" in shown._repr_html_()


@pytest.mark.parametrize("kwargs, message", [
    (dict(start="no such line"), "start="),
    (dict(start="def load_rows", stop="no such line"), "stop="),
    (dict(notes={"no such line": "x"}), "in 0 shown lines"),
    (dict(notes={"o_": "x"}), "not exactly one"),
])
def test_pieces_that_name_no_line_or_several_are_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        listing(tiles.load_rows, **kwargs)
