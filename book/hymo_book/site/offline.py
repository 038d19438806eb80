"""A Sphinx extension: the book's site loads nothing from the network.

Out of the box, Jupyter Book 1 pages ask CDNs for three scripts: MathJax on every page with
math, and require.js with ``@jupyter-widgets/html-manager``'s ``embed-amd.js`` on every page
holding saved widget state. With no network, math shows as raw TeX and every ``interact``
view stays empty. This extension points both at copies inside the site and puts the copies
into the site's ``_static/`` when the build finishes:

* **MathJax 3** comes from an installed package: ``django-static-mathjax`` (in the dev extra;
  import name ``mathjax``) ships MathJax's browser build as package data. The combined
  TeX + MathML → CHTML component is copied with everything it loads on demand (TeX
  extensions, the CHTML fonts, the menu, the accessibility tools).
* **The widget views** are drawn by html-manager's *standard* embedder, ``embed.js``: it
  renders the standard controls (all the book uses) and needs no require.js. No PyPI package
  ships html-manager 1.x, so a copy is vendored in ``hymo_book/site/vendor/html-manager/`` (its
  README says where it came from).

Enable it from ``_config.yml`` (``sphinx: local_extensions: {hymo_book.site.offline: ./}``).
"""

from __future__ import annotations

import shutil
from importlib.util import find_spec
from pathlib import Path

__all__ = ["MATHJAX_DIR", "WIDGETS_DIR", "HTML_MANAGER_VERSION", "mathjax_source",
           "widgets_source", "setup"]

MATHJAX_DIR = "mathjax"            # under the site's _static/
WIDGETS_DIR = "jupyter-widgets"    # under the site's _static/
MATHJAX_ENTRY = "tex-mml-chtml.js"
# the entry point and what it may load later; the other combined builds are left out
MATHJAX_PARTS = (MATHJAX_ENTRY, "input", "output/chtml", "ui", "a11y", "sre")
WIDGETS_ENTRY = "embed.js"
HTML_MANAGER_VERSION = "1.0.15"    # the vendored copy (its README says how it was made)
VENDORED_WIDGETS = Path(__file__).resolve().parent / "vendor" / "html-manager"


def mathjax_source() -> Path:
    """The installed MathJax 3 browser build (the folder holding ``tex-mml-chtml.js``)."""
    spec = find_spec("mathjax")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        es5 = Path(root) / "static" / "mathjax" / "es5"
        if (es5 / MATHJAX_ENTRY).is_file():
            return es5
    raise RuntimeError("MathJax is not installed: pip install 'django-static-mathjax>=3.2.2,<4' "
                       "(in hymo_mini's dev extra; it ships MathJax 3 for offline use)")


def widgets_source() -> Path:
    """The vendored html-manager files (the folder holding ``embed.js``)."""
    if not (VENDORED_WIDGETS / WIDGETS_ENTRY).is_file():
        raise RuntimeError(f"the widget embedder is missing: {VENDORED_WIDGETS / WIDGETS_ENTRY} "
                           "(it is committed with the book; restore it with git)")
    return VENDORED_WIDGETS


def _point_at_local_copies(app, config) -> None:
    # checked at start-up, so a missing file fails the build before any page is written
    mathjax_source()
    widgets_source()
    config.mathjax_path = f"{MATHJAX_DIR}/{MATHJAX_ENTRY}"
    config.nb_ipywidgets_js = {f"{WIDGETS_DIR}/{WIDGETS_ENTRY}": {}}


def _copy(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def _copy_into_site(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    mathjax = mathjax_source()
    for part in MATHJAX_PARTS:
        _copy(mathjax / part, static / MATHJAX_DIR / part)
    _copy(widgets_source(), static / WIDGETS_DIR)


def setup(app):
    app.connect("config-inited", _point_at_local_copies)
    app.connect("build-finished", _copy_into_site)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
