"""The design document's checkable claims, each recomputed from hymo_mini (book chapter 17).

    core.py            Claim, its verdict, ClaimsTable
    values.py          the quantities the claims are computed from
    sections_01_05.py  the claims of sections 1-5
    sections_06_12.py  the claims of sections 6-12 and the appendix

:func:`check_all` computes every claim of :data:`CLAIMS` and returns the table.
"""

from __future__ import annotations

from hymo_book.claims.core import VERDICTS, Claim, ClaimResult, ClaimsTable, check, verdict
from hymo_book.claims.sections_01_05 import CLAIMS_01_05
from hymo_book.claims.sections_06_12 import CLAIMS_06_12

__all__ = ["VERDICTS", "Claim", "ClaimResult", "ClaimsTable", "CLAIMS", "check", "check_all",
           "verdict"]

CLAIMS: list[Claim] = [*CLAIMS_01_05, *CLAIMS_06_12]


def check_all(claims: list[Claim] | None = None) -> ClaimsTable:
    """Compute every claim (a few seconds on a CPU: nothing big is allocated)."""
    return ClaimsTable([check(c) for c in (CLAIMS if claims is None else claims)])
