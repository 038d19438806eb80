"""Chapter 21: the one product by the rate a head's keys share.

:func:`shared_rate_ab` reads the runs of the change that lets a head whose keys share one
rate take the product at any decay.
"""

from __future__ import annotations

import statistics

from hymo_book.kernels.delta_forward import ab_caption
from hymo_book.results import CaptionedTable, load_result
from hymo_mini.analysis.tables import TextTable

__all__ = ["SHARED_RATE_AB_RUN", "SHARED_RATE_AGREE", "shared_rate_ab"]

# --------------------------------------------------------------------------------------
# One product at any decay for a head whose keys share one rate (trees 6fe9877, 7c29b5d)
# --------------------------------------------------------------------------------------
# one H200, sixth session of 2026-12-05: both rules' forwards as the GDN mixer calls them,
# the tree before the change (5a0cdd8, its package renamed hymo_old) and after it (7c29b5d),
# alternated three times a case in one process, on the model's rates and on the weak ones
# (benchmarks/tree_ab.py). An earlier call on an H100 timed the change's first form, 6fe9877,
# the same way and on the spread rates too (not kept: git has it).
SHARED_RATE_AB_RUN = "one_rate_ab_h200_2026-12-05.json"
# the two trees' outputs agree when their relative difference (Frobenius) is below this
SHARED_RATE_AGREE = {"bfloat16": 1e-2, "float32": 1e-5}


def shared_rate_ab() -> CaptionedTable:
    """The A/B of ``SHARED_RATE_AB_RUN``: a row per rule, rates, shape and dtype with the
    median time a call of each tree, their ratio (after / before) and whether the outputs
    agree within ``SHARED_RATE_AGREE``."""
    run = load_result(SHARED_RATE_AB_RUN, need=("rows",))
    rows = []
    for key, r in run["rows"].items():
        rule, rates, B, T, H, dtype = key.split("_")
        before, after = statistics.median(r["before"]), statistics.median(r["after"])
        rows.append({"rule": rule, "rates": rates, "shape": f"{B} {T} {H}", "dtype": dtype,
                     "before_ms": before, "after_ms": after, "ratio": after / before,
                     "rounds": len(r["after"]), "rel_diff": r["rel_diff_o"],
                     "agree": r["rel_diff_o"] < SHARED_RATE_AGREE[dtype]})
    table = TextTable(
        ("rule", "rates", "shape", "dtype", "before ms", "after ms", "after / before",
         "outputs"),
        [(r["rule"], r["rates"], r["shape"], r["dtype"], f"{r['before_ms']:.3f}",
          f"{r['after_ms']:.3f}", f"{r['ratio']:.3f}",
          f"agree (< {SHARED_RATE_AGREE[r['dtype']]:g})" if r["agree"] else "differ")
         for r in rows],
        title="Both forwards as the mixer calls them, before and after the one product by the "
              "shared rate, medians of alternated calls",
        align="llllrrrl")
    return CaptionedTable(table, ab_caption(SHARED_RATE_AB_RUN, run, run["command"]), rows)


