"""A claim, its verdict and the table of checked claims (the audit of book chapter 20).

A :class:`Claim` records what the document states (section, a short paraphrase, the value
it gives) and a function that computes the same quantity from the package: the config
presets, :mod:`hymo_mini.analysis.params`, :mod:`hymo_mini.analysis.costs`,
:mod:`hymo_mini.analysis.flops`, :mod:`hymo_mini.rope`, the modules themselves
(:mod:`hymo_book.claims.values`). :func:`hymo_book.claims.check_all` runs them all and
returns a :class:`ClaimsTable` (text and HTML, through
:class:`hymo_mini.analysis.tables.TextTable`), so the verdicts follow the code if the code
changes.

Verdicts, decided by comparing the two values (never typed by hand):

* ``correct`` — equal, or within ``tol`` (relative, default 0.5%: the document rounds);
* ``approximately right`` — within ``approx`` (default 10%);
* ``wrong`` — further off, or a different structure;
* ``contradiction`` — the document states something else elsewhere (``versus``); the
  computed value is the reading hymo_mini chose, and the note says why;
* ``not specified`` — the document describes something but gives no value or rule to
  check (``documented`` is None); the computed value is what hymo_mini does instead.

A note is a string or a function returning one, so that a note that states computed
numbers computes them (from the same functions as the claim) instead of typing them.

Values are numbers in base units (parameters, FLOPs, bytes, seconds) or short strings for
structural claims; ``unit`` only sets how they are printed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hymo_mini.analysis.tables import TextTable

__all__ = ["VERDICTS", "TOL", "APPROX", "Claim", "ClaimResult", "ClaimsTable", "check", "verdict"]

VERDICTS = ("correct", "approximately right", "wrong", "contradiction", "not specified")
TOL, APPROX = 0.005, 0.10  # the default relative tolerances of "correct" and "approximately"

_UNITS = {  # display unit -> size of one unit in base units
    "": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12,
    "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30,
    "s": 1, "ms": 1e-3, "µs": 1e-6, "%": 1e-2, "×": 1, "tok/s": 1, "days": 86_400,
}


@dataclass(frozen=True)
class Claim:
    id: str
    section: str
    statement: str  # the document's claim, paraphrased
    documented: Any  # number in base units, a short string, or None (not specified)
    compute: Callable[[], Any]  # hymo_mini's value, from the package
    unit: str = ""
    note: str | Callable[[], str] = ""  # a function when the note states computed numbers
    tol: float = TOL
    approx: float = APPROX
    versus: str | None = None  # what the document says elsewhere, if it contradicts itself

    def __post_init__(self) -> None:
        if self.unit not in _UNITS:
            raise ValueError(f"claim {self.id}: unknown unit {self.unit!r}; "
                             f"use one of {list(_UNITS)}")


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    computed: Any
    verdict: str
    note: str = ""  # the claim's note, computed when it is a function

    @property
    def documented_text(self) -> str:
        return _format(self.claim.documented, self.claim.unit)

    @property
    def computed_text(self) -> str:
        return _format(self.computed, self.claim.unit)


def verdict(claim: Claim, computed: Any) -> str:
    """Compare the documented value with the computed one (see the module docstring)."""
    if claim.versus is not None:
        return "contradiction"
    doc = claim.documented
    if doc is None:
        return "not specified"
    if isinstance(doc, str) or isinstance(computed, str):
        return "correct" if str(doc) == str(computed) else "wrong"
    if computed == doc:
        return "correct"
    if computed == 0:
        return "wrong"
    rel = abs(doc - computed) / abs(computed)
    if rel <= claim.tol:
        return "correct"
    return "approximately right" if rel <= claim.approx else "wrong"


def _format(value: Any, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    scaled = value / _UNITS[unit]
    if float(scaled).is_integer() and abs(scaled) >= 1000:
        text = f"{int(scaled):,}"
    elif abs(scaled) >= 1000:
        text = f"{scaled:,.1f}"
    else:
        text = f"{scaled:.4g}"
    return text + (f" {unit}" if unit and unit not in ("%", "×") else unit)


class ClaimsTable:
    """The checked claims; ``str`` gives a fixed-width table and its notes, and the
    notebook shows ``_repr_html_``. Deterministic: no timings, no addresses."""

    def __init__(self, results: list[ClaimResult]):
        self.results = list(results)

    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self):
        return iter(self.results)

    def __getitem__(self, claim_id: str) -> ClaimResult:
        for r in self.results:
            if r.claim.id == claim_id:
                return r
        raise KeyError(f"no claim {claim_id!r}")

    def counts(self) -> dict[str, int]:
        return {v: sum(r.verdict == v for r in self.results) for v in VERDICTS}

    def filter(self, verdict: str | None = None, section: str | None = None) -> ClaimsTable:
        """Claims with this verdict and/or whose section starts with ``section``."""
        if verdict is not None and verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
        return ClaimsTable([r for r in self.results
                            if (verdict is None or r.verdict == verdict)
                            and (section is None or r.claim.section.startswith(section))])

    def select(self, ids) -> ClaimsTable:
        """The claims with these ids, in the order given."""
        return ClaimsTable([self[i] for i in ids])

    _header = ("id", "§", "the document says", "document", "hymo_mini", "verdict")

    def _summary(self) -> str:
        return f"{len(self)} claims: " + ", ".join(f"{n} {v}" for v, n in self.counts().items())

    def _table(self, notes: bool) -> TextTable:
        """The claims; with ``notes``, each claim's note (and what the document says
        elsewhere) in a last column, as the notebook shows it."""
        rows = []
        for r in self.results:
            row = (r.claim.id, r.claim.section, r.claim.statement, r.documented_text,
                   r.computed_text, r.verdict)
            if notes:
                row += (r.note + (f" (elsewhere: {r.claim.versus})" if r.claim.versus
                                  else ""),)
            rows.append(row)
        header = self._header + (("note",) if notes else ())
        return TextTable(header, rows, title=self._summary(),
                         align="lllrrl" + ("l" if notes else ""))

    def __str__(self) -> str:
        notes = [f"{r.claim.id}: {r.note}" for r in self.results if r.note]
        return "\n".join([str(self._table(notes=False)), "", "Notes", *notes])

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return self._table(notes=True)._repr_html_()


def check(claim: Claim) -> ClaimResult:
    computed = claim.compute()
    note = claim.note() if callable(claim.note) else claim.note
    return ClaimResult(claim, computed, verdict(claim, computed), note)
