"""The design document's checkable claims, each recomputed from hymo_mini (book chapter 20).

    core.py            Claim, its verdict, ClaimsTable
    overview.py        the claims about the whole model and its configuration (sections 1, 2)
    stack.py           ... about the stack and the forward pass (sections 3, 10)
    attention.py       ... about MLA, the attention variants and the appendix (4, 12)
    gdn.py             ... about the Gated Delta Net and its kernel (sections 5, 6)
    rope.py            ... about rotary position embedding (section 7)
    moe.py             ... about the mixture of experts (section 8)
    mtp.py             ... about multi-token prediction (section 9)
    parameters.py      ... about parameter counts and tensor shapes (section 11)
    values.py          the quantities the claims are computed from (configs, counts, costs)
    values_models.py   ... found by running the package's modules on small inputs
    values_errata.py   ... small experiments on the modules, seeded
    values_measured.py  ... read from the committed GPU runs (book/results/)
    errata.py          which claims each teaching chapter sends its reader to

:func:`check_all` computes every claim of :data:`CLAIMS` (in the document's order) and
returns the table; :func:`errata_table` gives one teaching chapter's errata.
"""

from __future__ import annotations

import re

from hymo_book.claims import attention, gdn, moe, mtp, overview, parameters, rope, stack
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

__all__ = ["VERDICTS", "TOL", "APPROX", "ERRATA", "Claim", "ClaimResult", "ClaimsTable",
           "CLAIMS", "check", "check_all", "errata_table", "section_key", "verdict"]


def section_key(section: str) -> tuple:
    """Sort key of a section reference: "6" < "6.1" < "11.2.1" < "appendix"."""
    if not re.fullmatch(r"\d+(\.\d+)*", section):
        return (1 << 30, section)
    return tuple(int(p) for p in section.split("."))


TOPICS = (overview, stack, attention, gdn, rope, moe, mtp, parameters)
CLAIMS: list[Claim] = sorted([claim for topic in TOPICS for claim in topic.CLAIMS],
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
