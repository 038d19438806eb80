"""Chapter 21: both rules as they ship, beside their fla peers, run by run.

:func:`standing` reads a run of each rule (``STANDING``, or ``STANDING_H100`` on an H100)
and scores it against the targets: forward + backward and peak memory against the peer, the
forward against a copy of its bytes (and, where the run timed one, a clone of them).
:func:`standing_rows` and :func:`clone_row` turn such a table into rows of targets, each
with its verdict. :func:`fp32_products_table` shows what fp32-grade products cost against
TF32.
"""

from __future__ import annotations

from hymo_book.results import CaptionedTable, load_result, run_caption
from hymo_mini.analysis.tables import TextTable

__all__ = ["GLA_RECORD_RUN", "DELTA_RECORD_RUN", "STANDING", "STANDING_H100", "standing",
           "standing_rows", "clone_row", "long_fp32", "ERROR_FLOOR", "error_words",
           "FP32_PRODUCTS_RUNS", "fp32_products_table"]

# --------------------------------------------------------------------------------------
# Where the targets stand: both rules beside their peers on one tree
# --------------------------------------------------------------------------------------
# two runs on one H200 of the tree as it stands (kernels as in commit 046002b), each rule's
# call as the GDN mixer makes it (no value check, no host sync) beside its fla peer at both
# benchmark shapes and dtypes: the gla rule against chunk_gla (benchmarks/gdn.py), the
# delta rule against chunk_kda (benchmarks/gated_delta.py)
GLA_RECORD_RUN = "gla_record_h200_2026-12-04.json"
DELTA_RECORD_RUN = "gated_delta_defaults_h200_2026-12-04.json"
# rule -> (its run, our backend in it, the peer, the forward target's limit, the peer's
# forward + backward limit); fp32 inputs take each kernel's default, fp32-grade products
STANDING = {"gla": ((GLA_RECORD_RUN,), "chunk_triton_unchecked", "fla_chunk", 3.0, 0.9),
            "delta": ((DELTA_RECORD_RUN,), "chunk_triton", "fla_chunk_kda", 4.0, 0.8)}
# the same commands on one H100, fourth session of 2026-12-05, tree f79bc97 (every change of
# the H200 runs' day since, up to the inverse's first level without a product): the delta
# rule in two runs, one a shape (the first run's --budget-s ran out after B4), the gla rule
# in one run that its timeout stopped before its last case (B1 T16384 in fp32)
STANDING_H100 = {
    "gla": (("gla_record_h100_2026-12-05.json",), "chunk_triton_unchecked", "fla_chunk", 3.0, 0.9),
    "delta": (("gated_delta_peers_b4t4096_h100_2026-12-05.json",
               "gated_delta_peers_b1t16384_h100_2026-12-05.json"),
              "chunk_triton", "fla_chunk_kda", 4.0, 0.8)}


def standing(runs: dict = STANDING, clone: bool = False) -> CaptionedTable:
    """Both rules' chunked kernels as the GDN mixer calls them, beside their fla peers, at
    every shape and dtype their runs timed both (``runs``: rule -> (its runs, our backend,
    the peer, the forward's limit, forward + backward's); ``STANDING`` or
    ``STANDING_H100``): forward and forward + backward times, the ratios to the peer,
    peak memory against the peer's, and the forward against a copy of the bytes it must
    move once (read the inputs, write o) at the run's measured copy rate; where the run
    timed a clone of those bytes (the delta runs), the forward over it too (a column if
    ``clone``). Each row carries its verdicts against the limits and the run's GPU."""
    from hymo_book.kernels.gdn_runs import load_reports

    rows, captions = [], []
    for rule, (names, ours, peer, fwd_limit, pair_limit) in runs.items():
        for run in names:
            if rule == "gla":
                report = load_reports([run])[0]
                entries = report["shapes"].values()
            else:
                report = load_result(run, need=("peers",))
                entries = report["peers"].values()
            gbps = report["environment"]["copy_GBps"]
            captions.append(run_caption(report))
            for e in entries:
                if ours not in e["results"] or peer not in e["results"]:
                    continue  # a case the run's time budget skipped
                rows.append(_standing_row(rule, e, e["results"][ours], e["results"][peer],
                                          e["bytes_min_fwd"] / gbps / 1e6, fwd_limit,
                                          pair_limit, report["environment"]["gpu"]))

    def mark(r, key, text):
        return f"{text} {'met' if r['met'][key] else 'missed'}"

    columns = ["rule", "shape", "dtype", "fwd ms / peer", "fwd+bwd ms / peer", "ratio (limit)",
               "peak / peer (1x)", "fwd / copy (limit)"] + (["fwd / clone"] if clone else [])
    table = TextTable(
        columns,
        [(r["rule"], r["shape"], r["dtype"], f"{r['fwd_ms']:.3f} / {r['peer_fwd_ms']:.3f}",
          f"{r['fwdbwd_ms']:.2f} / {r['peer_fwdbwd_ms']:.2f}",
          mark(r, "fwdbwd", f"{r['fwdbwd_ratio']:.2f}x ({r['pair_limit']:g}x)"),
          mark(r, "peak", f"{r['peak_ratio']:.2f}x"),
          mark(r, "fwd", f"{r['fwd_vs_copy']:.1f}x ({r['fwd_limit']:g}x)"))
         + ((mark(r, "clone", f"{r['fwd_vs_clone']:.1f}x") if "clone" in r["met"] else "-",)
            if clone else ()) for r in rows],
        title="Both rules as the GDN mixer calls them, beside fla (gla: chunk_gla; delta: "
              "chunk_kda), one run per rule; fp32: our fp32-grade products, fla's TF32",
        align="lll" + "r" * (len(columns) - 3))
    return CaptionedTable(table, "\n".join(captions), rows)


def _standing_row(rule, e, a, p, copy_ms, fwd_limit, pair_limit, gpu) -> dict:
    """One row of :func:`standing`: our results ``a`` and the peer's ``p`` for entry ``e``."""
    row = {"rule": rule, "shape": f"B{e['B']} T{e['T']} H{e['H']}", "dtype": e["dtype"],
           "fwd_ms": a["fwd_ms"], "peer_fwd_ms": p["fwd_ms"],
           "fwdbwd_ms": a["fwdbwd_ms"], "peer_fwdbwd_ms": p["fwdbwd_ms"],
           "fwdbwd_ratio": a["fwdbwd_ms"] / p["fwdbwd_ms"],
           "peak_ratio": a["peak_mib"] / p["peak_mib"],
           "copy_ms": copy_ms, "fwd_vs_copy": a["fwd_ms"] / copy_ms,
           "fwd_limit": fwd_limit, "pair_limit": pair_limit, "gpu": gpu}
    row["met"] = {"fwdbwd": row["fwdbwd_ratio"] <= pair_limit,
                  "peak": row["peak_ratio"] <= 1.0,
                  "fwd": row["fwd_vs_copy"] <= fwd_limit}
    if e.get("clone_floor_ms"):
        row["clone_ms"] = e["clone_floor_ms"]
        row["fwd_vs_clone"] = a["fwd_ms"] / e["clone_floor_ms"]
        row["met"]["clone"] = row["fwd_vs_clone"] <= fwd_limit
    return row


_PEER_NAMES = {"gla": "fla chunk_gla", "delta": "fla chunk_kda"}


def standing_rows(table: CaptionedTable, suffix: str) -> list[dict]:
    """The summary's rows of a :func:`standing` table: per rule, forward + backward and peak
    memory against the peer and the forward against the bytes moved once, each at its worst
    row, the target named with ``suffix``."""
    rows = []
    for rule, peer in _PEER_NAMES.items():
        mine = [r for r in table.rows if r["rule"] == rule]
        if not mine:
            continue  # a table of one rule
        for key, column, limit, words in (
                ("fwdbwd", "fwdbwd_ratio", mine[0]["pair_limit"],
                 f"forward + backward / {peer}"),
                ("peak", "peak_ratio", 1.0, f"peak memory / {peer}"),
                ("fwd", "fwd_vs_copy", mine[0]["fwd_limit"], "forward / a copy of its bytes")):
            worst = max(mine, key=lambda r: r[column])
            rows.append({"target": f"{rule}: {words}, {suffix}", "limit": limit,
                         "worst": worst[column], "met": all(r["met"][key] for r in mine),
                         "where": f"as the mixer calls it, {worst['shape']} {worst['dtype']}"
                                  + (" (our fp32-grade products, fla's TF32)"
                                     if worst["dtype"] == "float32" else "")
                                  + f", worst of {len(mine)}"})
    return rows


def clone_row(table: CaptionedTable, suffix: str) -> dict:
    """The summary's row of the delta forwards of a :func:`standing` table against the floor
    the issue quotes, a clone of the bytes (each read and written), at its worst row."""
    delta = [r for r in table.rows if r["rule"] == "delta"]
    worst = max(delta, key=lambda r: r["fwd_vs_clone"])
    within = [f"{r['shape']} {r['dtype']}" for r in delta if r["met"]["clone"]]
    return {"target": f"delta: forward / the issue's copy floor (its bytes read and written), "
                      f"{suffix}",
            "limit": worst["fwd_limit"], "worst": worst["fwd_vs_clone"],
            "met": len(within) == len(delta),
            "where": f"as the mixer calls it, {worst['shape']} {worst['dtype']}, worst of "
                     f"{len(delta)}; within the limit: " + (", ".join(within) or "none")}


ERROR_FLOOR = 1e-6  # errors below it are shown as a verdict, not as rounding digits


def error_words(error: float) -> str:
    """A relative error in words: below ERROR_FLOOR as "< 1e-06" (fp32-grade), else its
    value."""
    return f"< {ERROR_FLOOR:.0e}" if error < ERROR_FLOOR else f"{error:.1e}"


# --------------------------------------------------------------------------------------
# fp32-grade products two ways: three TF32 products or six bf16 products
# --------------------------------------------------------------------------------------
# two calls on one H200 before the choice became a setting: tree 411c70b plus the "bf16x6"
# branch of chunk_states._dot as it landed in 0f28d1c, and a script (.gpu/prec.py, not kept)
# that replaced the kernels' fp32-grade products by each way, in the forward alone ("forward",
# both rules) or in both directions ("both", the gla rule); the landed setting,
# CONFIGS["fp32_products"], times the same choices (IEEE aside) through
# `benchmarks/gated_delta_profile.py --gla-forward-changes '{"fp32_products": ...}'`
FP32_PRODUCTS_RUNS = {"forward": "fp32_products_forward_h200_2026-12-04.json",
                      "both": "fp32_products_both_h200_2026-12-04.json"}
_WAYS = {"tf32x3": "three TF32", "bf16x6": "six bf16", "ieee": "IEEE fp32 (no tensor cores)",
         "tf32": "one TF32 (not fp32-grade)"}


def fp32_products_table() -> CaptionedTable:
    """The fp32 kernels alone with their fp32-grade products made each way, from the two
    calls of ``FP32_PRODUCTS_RUNS``: a row per (directions, rule, shape, way) with the
    forward's device time (ms, its launches summed), forward + backward (ms) and the
    output's relative RMS difference from the "tf32x3" row of the same run and shape (the
    backward multiplies "tf32x3" where only the forward changed)."""
    rows, captions = [], []
    for directions, name in FP32_PRODUCTS_RUNS.items():
        report = load_result(name)
        captions.append(run_caption(report))
        for key, r in report.items():
            if key.count("|") != 2:
                continue  # the run's environment and compiled kernels
            shape, rule, way = key.split("|")
            rows.append({"directions": directions, "shape": shape, "rule": rule, "way": way,
                         "device_ms": r["kernels_sum_ms"], "fwdbwd_ms": r["fwdbwd_ms"],
                         "difference": r["rel_vs_first"]})
    rows.sort(key=lambda r: (r["directions"] != "forward", r["rule"] != "gla"))  # stable
    table = TextTable(
        ("products in", "rule", "shape", "products", "fwd device ms", "fwd+bwd ms",
         "o against tf32x3's"),
        [(r["directions"], r["rule"], r["shape"].replace("_", " "), _WAYS[r["way"]],
          f"{r['device_ms']:.3f}", f"{r['fwdbwd_ms']:.2f}",
          "(the reference)" if r["way"] == "tf32x3" else error_words(r["difference"]))
         for r in rows],
        title="fp32 inputs, each kernel alone: its fp32-grade products made each way, in the "
              "forward alone or in both directions",
        align="llllrrl")
    captions.append("Both runs: tree 411c70b with the \"bf16x6\" branch of chunk_states._dot as "
                    "landed in 0f28d1c; .gpu/prec.py (not kept) set the products of each row")
    return CaptionedTable(table, "\n".join(captions), rows)


def long_fp32(report: dict) -> dict:
    """The entry of a gated_delta.py peers run at one sequence in fp32."""
    return next(e for e in report["peers"].values() if e["B"] == 1 and e["dtype"] == "float32")

