"""Chapter 21: the one product by the rate a head's keys share.

:func:`shared_rate_ab` and :func:`gla_model_rates` read the runs of the change that lets a
head whose keys share one rate take the product at any decay.
"""

from __future__ import annotations

import statistics

from hymo_book.kernels.delta_forward import ab_caption
from hymo_book.results import CaptionedTable, load_result, run_caption
from hymo_mini.analysis.tables import TextTable

__all__ = ["SHARED_RATE_AB_RUN", "SHARED_RATE_AGREE", "GLA_MODEL_RUNS", "shared_rate_ab",
           "gla_model_rates"]

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
# and the gla kernel alone on the model's rates beside chunk_gla (gdn.py, B4 T4096 H40, one
# run a dtype): fp32 with TF32 products (the issue's own measurement, 4.3x in 2026-11-30's
# kernel-only run) and bf16; our backend in each
GLA_MODEL_RUNS = {"gla_model_fp32_h200_2026-12-05.json": "chunk_triton_kernel_tf32",
                  "gla_model_bf16_h200_2026-12-05.json": "chunk_triton_kernel"}


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


def gla_model_rates() -> CaptionedTable:
    """The gla kernel alone on the model's rates beside chunk_gla (``GLA_MODEL_RUNS``): a row
    per run with the forward, forward + backward and peak memory against the peer's, and the
    forward against the bytes it must move once at the run's copy rate (limit 3x)."""
    from hymo_book.kernels.gdn_runs import load_reports

    rows, captions = [], []
    for name, ours in GLA_MODEL_RUNS.items():
        report = load_reports([name])[0]
        captions.append(run_caption(report))
        for e in report["shapes"].values():
            a, p = e["results"][ours], e["results"]["fla_chunk"]
            copy_ms = e["bytes_min_fwd"] / report["environment"]["copy_GBps"] / 1e6
            rows.append({"backend": ours, "shape": f"B{e['B']} T{e['T']} H{e['H']}",
                         "dtype": e["dtype"], "products": "TF32" if ours.endswith("tf32")
                         else "bf16", "fwd_ms": a["fwd_ms"], "copy_ms": copy_ms,
                         "fwd_vs_copy": a["fwd_ms"] / copy_ms,
                         "fwdbwd_ratio": a["fwdbwd_ms"] / p["fwdbwd_ms"],
                         "peak_ratio": a["peak_mib"] / p["peak_mib"], "limit": 3.0,
                         "gpu": report["environment"]["gpu"]})
    table = TextTable(
        ("shape", "dtype", "products", "fwd ms", "copy ms", "fwd / copy (3x)",
         "fwd+bwd / chunk_gla", "peak / chunk_gla"),
        [(r["shape"], r["dtype"], r["products"], f"{r['fwd_ms']:.3f}", f"{r['copy_ms']:.3f}",
          f"{r['fwd_vs_copy']:.2f}x {'met' if r['fwd_vs_copy'] <= r['limit'] else 'missed'}",
          f"{r['fwdbwd_ratio']:.2f}x", f"{r['peak_ratio']:.2f}x") for r in rows],
        title="The gla kernel alone on the model's rates (head h at rate h + 1 on every key), "
              "beside fla's chunk_gla",
        align="lllrrrrr")
    return CaptionedTable(table, "\n".join(captions), rows)

