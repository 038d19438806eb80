"""Numbers in the book's prose come from a computation or from the design document.

A sentence that states a computed number is written as a *generated* markdown cell: a code
cell whose output is the sentence, made from values the cells above computed::

    prose(f"The production model stores {fmt(table.stored)} parameters, "
          f"{fmt(table.active)} of them active per token.")

(tag such a cell ``remove-input``: the site shows only the sentence). The output carries
the text itself as its plain-text form too, so strict nbval checks the numbers every run.
The sentence may hold formulas as a markdown cell does (``$c_t^\\top H_t$``): JupyterLab
typesets a Markdown output, and the site reads it as MyST (``nb_render_markdown_format`` in
``book/_config.yml``), so MathJax typesets it there too.

A number in a markdown cell must be the design document's, quoted in quotation marks
(section 4.2.1 says "16× compression"), a section or chapter reference, or a single digit.
:func:`unchecked_numbers` finds the others; ``tests/book/test_prose_numbers.py`` runs it
over every chapter.
"""

from __future__ import annotations

import re

__all__ = ["Prose", "prose", "fmt", "unchecked_numbers", "ALLOWED"]


class Prose:
    """Markdown shown as rendered text, with the same text as its plain form."""

    def __init__(self, text: str):
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text


def prose(text: str) -> Prose:
    """A generated markdown cell: make it the cell's last expression."""
    return Prose(text)


def fmt(value, digits: int = 3) -> str:
    """A number for prose: integers with thousands separators, others to ``digits``
    significant figures (no exponent for ordinary magnitudes)."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()
                                  and abs(value) < 1e15):
        return f"{int(value):,}"
    text = f"{value:.{digits}g}"
    if "e" in text:  # 2.5e-06 -> 2.5·10⁻⁶
        mantissa, exponent = text.split("e")
        sup = str(int(exponent)).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
        return f"{mantissa}·10{sup}"
    return text


# numbers a markdown cell may state without a computation, each with its reason
ALLOWED = {
    "3:1": "the architecture's GDN-to-MLA ratio, the document's name for the design",
}

# a comma right after a number is punctuation ("in (0, 1)"), not a thousands separator
_NUMBER = re.compile(r"(?<![\w.])\d(?:[\d,]*\d)?(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")
_REMOVE = [
    re.compile(r"```.*?```", re.S),                       # code blocks
    re.compile(r"`[^`\n]*`"),                             # code spans
    re.compile(r"<!--.*?-->", re.S),                      # comments
    re.compile(r"\]\([^)]*\)"),                           # link targets
    re.compile(r"\"[^\"\n]*\"|“[^”\n]*”"),                # quotations (of the document)
    re.compile(r"\b[Ss]ections? [\d.]+(?:(?:,| and| or|–|-) ?[\d.]+)*"),  # section references
    re.compile(r"§ ?[\d.]+"),
    re.compile(r"\b[Cc]hapters? \d+(?:(?:,| and| or|–|-) ?\d+)*"),        # chapter references
    re.compile(r"^#+ \d+ ·", re.M),                       # the chapter number in the title
    re.compile(r"^\s*\d+\. ", re.M),                      # numbered list markers
    re.compile(r"\bet al\.,? \(?\d{4}\)?|\(\d{4}\)"),      # years of citations
    re.compile(r"arXiv:? ?\d{4}\.\d{4,5}"),
]


def unchecked_numbers(markdown: str) -> list[str]:
    """The numbers in a markdown cell that are neither quoted from the document, nor a
    reference, nor a single digit, nor in :data:`ALLOWED`."""
    text = markdown
    for allowed in ALLOWED:
        text = text.replace(allowed, " ")
    for pattern in _REMOVE:
        text = pattern.sub(" ", text)
    found = []
    for match in _NUMBER.finditer(text):
        number = match.group()
        if re.fullmatch(r"\d", number):  # a single digit: "2-D", "head 0", "step 1"
            continue
        found.append(number)
    return found
