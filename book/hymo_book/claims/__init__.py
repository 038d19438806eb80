"""The design document's checkable claims, each recomputed from hymo_mini (book chapter 20).

    core.py            Claim, its verdict, ClaimsTable
    values.py          the quantities the claims are computed from (configs, counts, costs)
    values_models.py   ... found by running the package's modules on small inputs
    values_measured.py ... read from the committed GPU runs (book/results/)
    sections_01_05.py  the claims of sections 1-5
    sections_06_12.py  the claims of sections 6-12 and the appendix
    errata_01_05.py    further claims of sections 1-5 the teaching chapters' errata listed
    errata_06_12.py    ... of sections 6-12 (the kernel's, measured), section 11's shapes
    errata_07_12.py    ... of sections 7-10 and the appendix (RoPE, MoE, MTP, init, absorption)
    values_errata.py   ... the small experiments those errata are computed from
    errata.py          which claims each teaching chapter's errata table listed

:func:`check_all` computes every claim of :data:`CLAIMS` (in the document's order) and
returns the table; :func:`errata_table` gives one teaching chapter's errata.
"""

from __future__ import annotations

import re

from hymo_book.claims.core import (
    APPROX,
    TOL,
    VERDICTS,
    Claim,
    ClaimResult,
    ClaimsTable,
    check,
    verdict,
)
from hymo_book.claims.errata import ERRATA
from hymo_book.claims.errata_01_05 import CLAIMS_ERRATA_01_05
from hymo_book.claims.errata_06_12 import CLAIMS_ERRATA_06_12
from hymo_book.claims.errata_07_12 import CLAIMS_ERRATA_07_12
from hymo_book.claims.sections_01_05 import CLAIMS_01_05
from hymo_book.claims.sections_06_12 import CLAIMS_06_12

__all__ = ["VERDICTS", "TOL", "APPROX", "ERRATA", "Claim", "ClaimResult", "ClaimsTable",
           "CLAIMS", "check", "check_all", "errata_table", "section_key", "verdict"]


def section_key(section: str) -> tuple:
    """Sort key of a section reference: "6" < "6.1" < "11.2.1" < "appendix"."""
    if not re.fullmatch(r"\d+(\.\d+)*", section):
        return (1 << 30, section)
    return tuple(int(p) for p in section.split("."))


CLAIMS: list[Claim] = sorted([*CLAIMS_01_05, *CLAIMS_06_12, *CLAIMS_ERRATA_01_05,
                              *CLAIMS_ERRATA_06_12, *CLAIMS_ERRATA_07_12],
                             key=lambda c: section_key(c.section))


def check_all(claims: list[Claim] | None = None) -> ClaimsTable:
    """Compute every claim (some seconds on a CPU: small models, one child process for the
    Triton kernel, nothing big allocated)."""
    return ClaimsTable([check(c) for c in (CLAIMS if claims is None else claims)])


def errata_table(chapter: str, table: ClaimsTable | None = None) -> ClaimsTable:
    """The claims a teaching chapter's errata table listed, checked (from ``table`` if
    given: the same results, not a second computation)."""
    if chapter not in ERRATA:
        raise KeyError(f"no errata for chapter {chapter!r}; chapters with errata: "
                       f"{sorted(ERRATA)}")
    ids = ERRATA[chapter][1]
    if table is None:
        table = check_all([c for c in CLAIMS if c.id in ids])
    return table.select(ids)
