"""A Sphinx extension: what a reader of the static site is told, and what the page spares them.

* **A note under every saved widget view.** The site draws each ``interact`` from the state
  saved in the notebook: its controls move, but the figure is drawn by Python and stays as it
  was saved. The note says so, and where the figure does move (the chapter run in Jupyter).
* **Each script once.** sphinx-thebe's inline configuration (``const THEBE_JS_URL = ...``)
  reached every page twice, and the second declaration is a SyntaxError the browser logged on
  each page. Repeated scripts are dropped from each page's list.
* **A colour mode the theme accepts.** The theme's template falls back to ``default_mode``,
  which Jupyter Book leaves empty; the page then logged "Got invalid theme mode". ``auto``
  (follow the reader's system setting) is what the theme did after that error.

Enable it from ``_config.yml`` (``sphinx: local_extensions: {hymo_book.site.reading: ./}``).
"""

from __future__ import annotations

from docutils import nodes

__all__ = ["WIDGET_VIEW", "WIDGET_NOTE_CLASS", "WIDGET_NOTE", "setup"]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE_CLASS = "hymo-widget-note"
WIDGET_NOTE = ("A saved view: the controls move, but the figure was drawn by Python when the "
               "chapter ran, so it stays as it is here. Run the chapter in JupyterLab to redraw "
               "it as you move them.")
COLOUR_MODE = "auto"


def _note_widget_views(app, doctree, docname) -> None:
    views = [node for node in doctree.findall(nodes.raw)
             if "html" in node.get("format", "") and WIDGET_VIEW in node.astext()]
    for view in views:
        note = nodes.raw("", f'<p class="{WIDGET_NOTE_CLASS}">{WIDGET_NOTE}</p>\n',
                         format="html")
        view.parent.insert(view.parent.index(view) + 1, note)


def _scripts_once(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        # an inline script's filename is None or "" depending on who added it
        key = (str(script.filename or ""), tuple(sorted(script.attributes.items())))
        if key not in seen:
            seen.add(key)
            kept.append(script)
    scripts[:] = kept  # in place: handlers after this one add the page's own scripts to it
    context.setdefault("default_mode", COLOUR_MODE)
    if not context["default_mode"]:
        context["default_mode"] = COLOUR_MODE


def setup(app):
    app.connect("doctree-resolved", _note_widget_views)
    # early: the event stops at the first handler that returns a template name
    app.connect("html-page-context", _scripts_once, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
