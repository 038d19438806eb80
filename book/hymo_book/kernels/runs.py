"""Chapter 21's tables of the runs of 2026-12-01 and -02: the price of fp32-grade products,
the delta rule against fla's ``chunk_kda``, the MoE dispatch paths, and the delta kernel's
chunk-to-chunk passes as one walk or over groups. Read from ``book/results`` through
:mod:`hymo_book.results`; every table names its run; nothing here measures time. Checked by
``tests/book/test_book_kernel_report.py``.
"""

from __future__ import annotations

from hymo_book.prose import fmt
from hymo_book.results import CaptionedTable, load_result, run_caption
from hymo_mini.analysis.tables import TextTable

__all__ = ["GATED_DELTA_RUN", "DELTA_SIDE_BY_SIDE", "DELTA_GROUP_SWEEP", "GLA_FORWARD_RUN",
           "delta_entries", "delta_group_sweep_table", "MOE_RUN", "precision_table",
           "delta_peers_table", "moe_dispatch_table"]

GATED_DELTA_RUN = "gated_delta_h200_2026-12-01.json"
# every shape and dtype beside chunk_kda on one tree (3bc2e9a), one long sequence with the
# grouped passes: the runs the peers table and the targets read
DELTA_SIDE_BY_SIDE = ("gated_delta_b4t4096_side_by_side_h200_2026-12-02.json",
                      "gated_delta_b1t16384_groups_bf16_h200_2026-12-02.json",
                      "gated_delta_b1t16384_groups_fp32_h200_2026-12-02.json")
# the one walk against groups of 16 to 128 chunks at three shapes, same tree
DELTA_GROUP_SWEEP = "gated_delta_group_sweep_h200_2026-12-02.json"
# the gla kernel's forward alone: do_bench against its launches' device time, three dtypes
# (the output kernel's decay factors by exp2, tree b33125f)
GLA_FORWARD_RUN = "gla_forward_h200_2026-12-02b.json"
MOE_RUN = "moe_dispatch_h200_2026-12-01.json"


_RULES = {"gla": "gla (the document's rule)", "delta": "gated delta rule"}


def _error(x: float) -> str:
    """A relative error, two digits, as 2.9·10⁻⁷ (a measured value, read from the file)."""
    return fmt(x, 2) if x else "0"


def _worst_error(errors: dict) -> float:
    return max(v for k, v in errors.items() if k != "agrees")


def precision_table(run: str = GATED_DELTA_RUN) -> CaptionedTable:
    """Both rules' chunked kernels (the Function alone, fp32 inputs) with fp32-grade
    "tf32x3" products against plain TF32: time, peak memory and the worst relative RMS
    error of the output and every gradient against the fp64 loop."""
    report = load_result(run, need=("precision",))
    rows, values = [], []
    for rule, by_precision in report["precision"].items():
        x3, tf = by_precision["tf32x3"], by_precision["tf32"]
        for name, r in (("tf32x3", x3), ("tf32", tf)):
            rows.append((_RULES.get(rule, rule), name, f"{r['fwd_ms']:.3f}",
                         f"{r['fwdbwd_ms']:.2f}", f"{r['peak_mib']:.0f}",
                         _error(_worst_error(r['errors']))))
        values.append({"rule": rule, "fwd_ratio": x3["fwd_ms"] / tf["fwd_ms"],
                       "fwdbwd_ratio": x3["fwdbwd_ms"] / tf["fwdbwd_ms"],
                       "error_x3": _worst_error(x3["errors"]),
                       "error_tf32": _worst_error(tf["errors"]), "tf32x3": x3, "tf32": tf})
    table = TextTable(("rule", "products", "fwd ms", "fwd+bwd ms", "peak MiB", "worst error"),
                      rows, title="chunked kernels, B = 4, T = 4,096, H = 40, fp32 inputs",
                      align="llrrrr")
    return CaptionedTable(table, run_caption(report), values)


_PEER_LABELS = {"chunk_triton": "hymo Triton chunk", "chunk_triton_kernel": "  its Function alone",
                "chunk_triton_kernel_tf32": "  the same, TF32 products",
                "chunk_torch": "hymo chunk (torch)", "fla_chunk_kda": "fla chunk_kda",
                "fla_chunk_gdr": "fla chunk_gated_delta_rule (one decay per head)"}


def delta_entries(runs: tuple[str, ...] = DELTA_SIDE_BY_SIDE):
    """(the runs' reports, {shape key: (report, entry)}): each shape from the last run that
    timed fla chunk_kda at it, or else from the last run that has it."""
    reports = [load_result(r, need=("peers",)) for r in runs]
    picked = {}
    for report in reports:
        for key, entry in report["peers"].items():
            if key not in picked or "fla_chunk_kda" in entry["results"]:
                picked[key] = (report, entry)
    return reports, picked


def delta_peers_table(runs: tuple[str, ...] = DELTA_SIDE_BY_SIDE) -> CaptionedTable:
    """The delta rule's backends at each shape of the runs: a shape from the last run that
    timed fla chunk_kda at it (or the last run that has it). Each row: forward, forward +
    backward, peak memory and output error against the fp64 loop, and forward + backward
    over chunk_kda's where that run timed it; a backward that raised says so."""
    reports, picked = delta_entries(runs)
    rows, values = [], []
    for report, entry in picked.values():
        kda = entry["results"].get("fla_chunk_kda", {}).get("fwdbwd_ms")
        for name, r in entry["results"].items():
            fwdbwd = r.get("fwdbwd_ms")
            ratio = f"{fwdbwd / kda:.2f}x" if fwdbwd and kda else "-"
            rows.append((f"{entry['B']} × {entry['T']:,}", entry["dtype"],
                         _PEER_LABELS.get(name, name), f"{r['fwd_ms']:.2f}",
                         f"{fwdbwd:.2f}" if fwdbwd else "raised", ratio,
                         f"{r['peak_mib']:.0f}" if "peak_mib" in r else "-",
                         _error(entry['checks'][name]['o'])))
            values.append({"B": entry["B"], "T": entry["T"], "dtype": entry["dtype"],
                           "backend": name, **r,
                           "o_error": entry["checks"][name]["o"], "file": report["file"],
                           "vs_kda": fwdbwd / kda if fwdbwd and kda else None})
    table = TextTable(("B × T", "dtype", "backend", "fwd ms", "fwd+bwd ms", "f+b / kda",
                       "peak MiB", "o error"), rows, align="lllrrrrr",
                      title="the gated delta rule, H = 40, S = D = 32")
    caption = "\n".join(run_caption(r) for r in reports)
    return CaptionedTable(table, caption, values)


def moe_dispatch_table(run: str = MOE_RUN) -> CaptionedTable:
    """The three MoE dispatch paths (``moe_impl``: loop, grouped, padded): training forward,
    forward + backward and evaluation forward, their speed-up over the loop, the worst
    relative error against the loop and whether the path avoids a host sync."""
    report = load_result(run, need=("runs",))
    loop = next(r for r in report["runs"] if r["impl"] == "loop")
    rows, values = [], []
    for r in report["runs"]:
        speed = {k: loop[k] / r[k] for k in ("train_fwd_s", "train_fwd_bwd_s", "eval_fwd_s")}
        sync = {True: "none", False: "yes", None: "-"}[r["no_host_sync"]]
        rows.append((r["impl"], *(f"{r[k] * 1e3:.2f}" for k in speed),
                     f"{speed['train_fwd_bwd_s']:.2f}x", _error(r["worst_rel_err"]), sync))
        values.append({**r, **{f"speedup_{k}": v for k, v in speed.items()}})
    settings = report["settings"]
    table = TextTable(("moe_impl", "train fwd ms", "train f+b ms", "eval fwd ms",
                       "f+b speed-up", "worst error", "host sync"), rows, align="lrrrrrl",
                      title=f"one MoE layer, {settings['tokens']:,} tokens, {settings['dtype']}")
    return CaptionedTable(table, run_caption(report), values)


def delta_group_sweep_table(run: str = DELTA_GROUP_SWEEP,
                            tolerance: float = 1e-3) -> CaptionedTable:
    """The chunk-to-chunk passes as one walk and over groups of each size, forced on, at each
    shape and dtype of a ``gated_delta_profile.py --group-sweep`` run: forward and forward +
    backward time, and whether the output agrees with the walk's (relative RMS within
    ``tolerance``)."""
    report = load_result(run, need=("group_sweep",))
    rows = []
    for shape, by_dtype in report["group_sweep"].items():
        B, T = (int(part[1:]) for part in shape.split("_")[:2])
        for dtype, trials in by_dtype.items():
            walk = trials[0]["fwdbwd_ms"]
            rows += [{"B": B, "T": T, "dtype": dtype, **t, "vs_walk": t["fwdbwd_ms"] / walk,
                      "agrees": t["rel_vs_walk"] <= tolerance} for t in trials]
    table = TextTable(
        ("B × T", "dtype", "chunks a group", "groups", "fwd ms", "fwd+bwd ms", "f+b / walk",
         f"agrees with the walk (≤ {tolerance:g})"),
        [(f"{r['B']} × {r['T']:,}", r["dtype"], str(r["chunks"] or "one walk"), str(r["groups"]),
          f"{r['fwd_ms']:.2f}", f"{r['fwdbwd_ms']:.2f}", f"{r['vs_walk']:.2f}",
          "yes" if r["agrees"] else "no") for r in rows],
        align="llrrrrrl", title="the delta kernel's chunk-to-chunk passes: one walk or groups")
    return CaptionedTable(table, run_caption(report), rows)
