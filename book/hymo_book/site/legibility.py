"""Is a figure's text readable at the size the book shows it? (STYLE.md: at least 8 pt.)

The size a reader sees is the product of two things, each checked where it is decided:

* **the figure** — its smallest text, ``font_pt`` points, drawn at ``dpi`` dots per inch,
  is ``font_pt * dpi / 72`` image pixels tall. Only the drawing code knows ``font_pt``:
  :func:`smallest_text_pt` reads it off a matplotlib figure, and the figure tests require
  at least :data:`FIGURE_MIN_FONT_PT`.
* **the page** — an image ``native_px`` pixels wide shown ``shown_px`` CSS pixels wide
  scales each image pixel to ``shown_px / native_px`` CSS pixels, and a CSS pixel is 1/96
  inch whatever the screen. The PNG says its dpi (its ``pHYs`` chunk, which matplotlib
  writes); the browser says both widths.

So text of ``font_pt`` shows at ``font_pt * dpi / 96 * shown_px / native_px`` points
(:func:`shown_points`). The browser test requires that of every figure on the site, with
``font_pt`` = :data:`FIGURE_MIN_FONT_PT`: together the two checks bound the smallest text a
reader sees from below, and neither needs to guess the other's number.
"""

from __future__ import annotations

import struct

__all__ = ["MIN_SHOWN_PT", "FIGURE_MIN_FONT_PT", "shown_points", "png_dpi",
           "png_width", "smallest_text_pt"]

MIN_SHOWN_PT = 8.0        # the smallest text a reader should have to read, in points
FIGURE_MIN_FONT_PT = 8.0  # the smallest text a figure may draw, in points at its own dpi
CSS_PX_PER_INCH = 96.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
METRES_PER_INCH = 0.0254


def shown_points(font_pt: float, dpi: float, native_px: float, shown_px: float) -> float:
    """Points at which text drawn at ``font_pt`` in a ``dpi`` image appears when shown."""
    if min(font_pt, dpi, native_px) <= 0 or shown_px < 0:
        raise ValueError(f"sizes must be positive, got font_pt={font_pt}, dpi={dpi}, "
                         f"native_px={native_px}, shown_px={shown_px}")
    return font_pt * dpi / CSS_PX_PER_INCH * shown_px / native_px


def _chunks(png: bytes):
    if not png.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG file (no PNG signature)")
    at = len(PNG_SIGNATURE)
    while at + 8 <= len(png):
        length, kind = struct.unpack(">I4s", png[at:at + 8])
        yield kind, png[at + 8:at + 8 + length]
        if kind == b"IEND":
            return
        at += 12 + length  # length, type, data, CRC


def png_width(png: bytes) -> int:
    """The image's width in pixels (from its IHDR chunk)."""
    for kind, data in _chunks(png):
        if kind == b"IHDR":
            return struct.unpack(">I", data[:4])[0]
    raise ValueError("PNG without an IHDR chunk")


def png_dpi(png: bytes) -> float | None:
    """The horizontal resolution a PNG declares (its ``pHYs`` chunk), or None if it has none."""
    for kind, data in _chunks(png):
        if kind == b"pHYs":
            per_unit_x, _, unit = struct.unpack(">IIB", data[:9])
            return per_unit_x * METRES_PER_INCH if unit == 1 else None  # 1: per metre
        if kind == b"IDAT":
            return None  # pHYs must come before the image data
    return None


def smallest_text_pt(fig) -> float | None:
    """The smallest font size of the text a matplotlib figure draws (None if it draws none).

    Counts what is drawn, not what exists: the figure is laid out and drawn once (without
    rendering pixels) while ``Text.draw`` records each non-empty text it is called for;
    hidden artists are never drawn.
    """
    from matplotlib.text import Text

    sizes: list[float] = []
    draw = Text.draw

    def recording_draw(text, renderer):
        if text.get_visible() and text.get_text().strip():
            sizes.append(text.get_fontsize())
        return draw(text, renderer)

    Text.draw = recording_draw
    try:
        fig.draw_without_rendering()
    finally:
        Text.draw = draw
    return min(sizes) if sizes else None
