"""Every chapter is stored exactly as JupyterLab saves it: opening and saving a chapter
without running it changes nothing (kernelspec display name, no execution timestamps), and
its widget outputs say in words that they come alive when run."""

from __future__ import annotations

import json

import nbformat
import pytest
from hymo_book.notebooks import KERNELSPEC, WIDGET_MIME, WIDGET_TEXT, chapters, normalize

CHAPTERS = chapters()


def test_the_book_has_chapters():
    assert len(CHAPTERS) >= 10


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_is_stored_as_jupyterlab_saves_it(path):
    text = path.read_text()
    nb = nbformat.reads(text, as_version=4)
    normalize(nb)
    assert text == nbformat.writes(nb) + "\n", (
        f"{path.name} is not stored normalized: run `cd book && python3 -m hymo_book.notebooks "
        f"--normalize {path.name}` (or execute it with `python3 -m hymo_book.notebooks`)")


def test_normalize_does_what_jupyterlab_does():
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python",
                                 "name": "python3"}
    cell = nbformat.v4.new_code_cell("interact(f, x=1)")
    cell.metadata["execution"] = {"iopub.status.idle": "2026-01-01T00:00:00Z"}
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        "text/plain": "interactive(children=(IntSlider(value=1),))",
        WIDGET_MIME: {"model_id": "abc", "version_major": 2, "version_minor": 0}})]
    nb.cells.append(cell)
    normalize(nb)
    assert nb.metadata["kernelspec"] == KERNELSPEC and "execution" not in cell.metadata
    assert cell.outputs[0]["data"]["text/plain"] == WIDGET_TEXT
    assert json.loads(nbformat.writes(nb))["cells"][0]["outputs"][0]["data"][WIDGET_MIME]


@pytest.mark.parametrize("path", chapters(), ids=lambda p: p.name)
def test_math_names_render_on_the_site(path):
    """MathJax does not read macros inside ``\\text{...}``, so ``\\text{start\\_pos}`` would
    show its backslash; a name with an underscore goes in ``\\mathrm{...}``, where ``\\_`` is
    the underscore."""
    import re

    cells = nbformat.read(path, as_version=4).cells
    found = [m for c in cells if c.cell_type == "markdown"
             for m in re.findall(r"\\text\{[^}]*\\_[^}]*\}", c.source)]
    assert not found, found
