"""Chapters stored exactly as JupyterLab saves them, and executed so that they stay so.

JupyterLab marks a notebook modified the moment it opens one whose stored kernelspec
display name differs from the running kernel's ("Python 3 (ipykernel)"), and it drops the
per-cell ``execution`` timestamps that nbconvert records. :func:`normalize` makes a
chapter what JupyterLab would save, so opening and saving it without running changes
nothing; :func:`execute` runs a chapter in a fresh kernel and writes it normalized.

Widget cells: until a cell with ``interact`` runs, JupyterLab (and GitHub) show the text
fallback of its output, ``interactive(children=(FloatSlider(...``. The fallback is
replaced by a sentence saying the controls come alive when the cell runs.

    cd book && python3 -m hymo_book.notebooks 07_gdn.ipynb    # execute, then normalize
    cd book && python3 -m hymo_book.notebooks --check         # every chapter already normal?
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

__all__ = ["KERNELSPEC", "WIDGET_TEXT", "normalize", "normalized_text", "execute", "chapters"]

BOOK = Path(__file__).resolve().parents[1]
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_TEXT = "(interactive: run this cell to move the controls; the figure above is the default)"


def chapters(book: Path = BOOK) -> list[Path]:
    """The numbered chapters, in reading order."""
    return sorted(p for p in book.glob("[0-9][0-9]_*.ipynb"))


def normalize(nb) -> None:
    """In place: the kernelspec JupyterLab writes, no execution timestamps, a readable
    text fallback for widget outputs, and solution cells (tag ``solution``) collapsed in
    JupyterLab and a dropdown on the site (tag ``hide-input``)."""
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        tags = cell.metadata.get("tags", [])
        if "solution" in tags:
            cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
            if "hide-input" not in tags:
                cell.metadata["tags"] = [*tags, "hide-input"]
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            text = "".join(data.get("text/plain", ""))
            # interact's fallback only: a progress bar's text (tqdm) says what it shows
            if WIDGET_MIME in data and text.startswith(("interactive(", WIDGET_TEXT)):
                data["text/plain"] = WIDGET_TEXT


def normalized_text(path: Path) -> str:
    """The file as JupyterLab would save it after opening it."""
    nb = nbformat.read(path, as_version=4)
    normalize(nb)
    return nbformat.writes(nb) + "\n"


def execute(path: Path, timeout: int = 600) -> None:
    """Run a chapter top to bottom in a fresh kernel (in its folder) and save it normalized."""
    from nbclient import NotebookClient

    path = Path(path).resolve()
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    normalize(nb)
    path.write_text(nbformat.writes(nb) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m hymo_book.notebooks",
                                     description="execute chapters and store them normalized")
    parser.add_argument("paths", nargs="*", type=Path, help="chapters (default: none)")
    parser.add_argument("--check", action="store_true",
                        help="only check that every chapter is stored normalized")
    parser.add_argument("--normalize", action="store_true",
                        help="normalize the given chapters without running them")
    args = parser.parse_args(argv)
    if args.check:
        stale = [p.name for p in chapters() if p.read_text() != normalized_text(p)]
        print("\n".join(f"not normalized: {name}" for name in stale) or "all normalized")
        return 1 if stale else 0
    for path in args.paths:
        if args.normalize:
            path.write_text(normalized_text(path))
        else:
            execute(path)
        print(f"{'normalized' if args.normalize else 'executed'} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
