"""Chapter 21's tables of the runs of 2026-12-01 and -02 and the launch-configuration sweep:
the price of fp32-grade products, the dispatcher's host sync, the delta rule against fla's
``chunk_kda`` (and its peak memory predicted), the MoE dispatch paths, and the chunked gla
kernel's best launch settings per block length. Read from ``book/results`` through
:mod:`hymo_book.results`; every table names its run; nothing here measures time. Checked by
``tests/book/test_book_kernel_report.py``.
"""

from __future__ import annotations

import math

from hymo_book.prose import fmt
from hymo_book.results import CaptionedTable, load_result, run_caption
from hymo_mini.analysis.tables import TextTable

__all__ = ["GATED_DELTA_RUN", "DELTA_PEERS_RUN", "DELTA_LONG_RUN",
           "DELTA_LONG_PROFILE", "DELTA_SIDE_BY_SIDE", "DELTA_AUTO_PEERS", "DELTA_GROUP_SWEEP",
           "GLA_FORWARD_RUN", "delta_entries", "delta_long_profile", "delta_group_sweep_table",
           "MOE_RUN",
           "CONFIG_SWEEP_RUN", "precision_table", "dispatch_table", "delta_peers_table",
           "delta_peak_bytes", "moe_dispatch_table", "config_sweep_table", "GLA_BACKWARD_RUN",
           "gla_backward_table"]

GATED_DELTA_RUN = "gated_delta_h200_2026-12-01.json"
# the delta rule's kernel after its tuning (16-step chunks, Mk and (I + M)⁻¹ kept), peers only
DELTA_PEERS_RUN = "gated_delta_h200_2026-12-02.json"
# B = 1, T = 16,384 in bf16 beside chunk_kda, and the kernel's launches profiled there
DELTA_LONG_RUN = "gated_delta_b1t16384_h200_2026-12-02.json"
DELTA_LONG_PROFILE = "gated_delta_profile_b1t16384_h200_2026-12-02.json"
# every shape and dtype beside chunk_kda on one tree (3bc2e9a), one long sequence with the
# grouped passes: the runs the peers table and the targets read
DELTA_SIDE_BY_SIDE = ("gated_delta_b4t4096_side_by_side_h200_2026-12-02.json",
                      "gated_delta_b1t16384_groups_bf16_h200_2026-12-02.json",
                      "gated_delta_b1t16384_groups_fp32_h200_2026-12-02.json")
# with the pairs "auto" the default (tree 3138bb2): B4 in bf16 beside chunk_kda, and in fp32
# (fp32-grade and TF32 products) alone: chunk_kda's fp32 case was cut off by the call's time
DELTA_AUTO_PEERS = "gated_delta_auto_b4t4096_h200_2026-12-03.json"
# the one walk against groups of 16 to 128 chunks at three shapes, same tree
DELTA_GROUP_SWEEP = "gated_delta_group_sweep_h200_2026-12-02.json"
# the gla kernel's forward alone: do_bench against its launches' device time, three dtypes
# (the output kernel's decay factors by exp2, tree b33125f)
GLA_FORWARD_RUN = "gla_forward_h200_2026-12-02b.json"
MOE_RUN = "moe_dispatch_h200_2026-12-01.json"
CONFIG_SWEEP_RUN = "chunk_sweep_h200_2026-11-30.json"
# the gla kernel's in-chunk backward at a few settings, on the tree of that day (e71a586)
GLA_BACKWARD_RUN = "gla_profile_h200_2026-12-02.json"


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


def dispatch_table(run: str = GATED_DELTA_RUN) -> CaptionedTable:
    """Each rule's chunked kernel called three ways: its Function alone, the dispatcher with
    ``check_values=False`` (the GDN mixer's call) and the dispatcher with its default check
    (one host sync a call); the last two columns are the differences to the Function."""
    report = load_result(run, need=("dispatch",))
    rows, values = [], []
    for rule, by_dtype in report["dispatch"].items():
        for dtype, r in by_dtype.items():
            kernel, quiet, checked = r["kernel"], r["dispatch_no_check"], r["dispatch_checked"]
            extra = {k: (quiet[k] - kernel[k], checked[k] - kernel[k])
                     for k in ("fwd_ms", "fwdbwd_ms")}
            rows.append((_RULES.get(rule, rule), dtype,
                         *(f"{x[k]:.3f}" for x in (kernel, quiet, checked) for k in ("fwd_ms",)),
                         f"{extra['fwd_ms'][0]:+.3f}", f"{extra['fwd_ms'][1]:+.3f}"))
            values.append({"rule": rule, "dtype": dtype, "no_check_extra_fwd_ms":
                           extra["fwd_ms"][0], "checked_extra_fwd_ms": extra["fwd_ms"][1],
                           "no_check_extra_fwdbwd_ms": extra["fwdbwd_ms"][0],
                           "checked_extra_fwdbwd_ms": extra["fwdbwd_ms"][1]})
    table = TextTable(("rule", "dtype", "Function", "no check", "checked", "no check - F",
                       "checked - F"), rows, align="llrrrrr",
                      title="forward ms, B = 4, T = 4,096, H = 40")
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


def delta_peak_bytes(B: int = 4, T: int = 4096, H: int = 40, S: int = 32, D: int = 32,
                     itemsize: int = 4, chunk: int = 16) -> dict:
    """What one forward + backward of the delta rule's chunked kernel allocates beyond its
    inputs, by tensor (the prediction of the benchmark's peak_mib): o and the gradients in
    the inputs' dtype; the forward's W (B·T·H·S) and U (B·T·H·D), the chunk-start states, Mk
    and (I + M)⁻¹ (chunk × chunk per chunk) and the backward's dU, chunk-end state gradients
    and per-chunk dA, all fp32."""
    n, states = B * T * H, B * H * math.ceil(T / chunk)
    rows = {"o": n * D * itemsize, "W, U": n * (S + D) * 4,
            "chunk-start states": states * S * D * 4,
            "Mk, (I + M)⁻¹": 2 * states * chunk * chunk * 4, "dU": n * D * 4,
            "chunk-end state gradients": states * S * D * 4,
            "dA per chunk": states * S * 4, "dv, db, dc": n * (D + 2 * S) * itemsize,
            "dg, dβ": 2 * n * itemsize}
    rows["total"] = sum(rows.values())
    return rows


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


def config_sweep_table(run: str = CONFIG_SWEEP_RUN) -> CaptionedTable:
    """The chunked gla kernel's launch-configuration sweep, summed up per block length: the
    best ``num_warps`` the sweep found for the output and gradient kernels at each block
    length, and the forward and forward + backward times with them (``rows``: the run's
    ``per_block`` entries)."""
    report = load_result(run, need=("sweep",))
    best = report["sweep"]["per_block"]
    rows = [(str(r["block"]), str(r["output_fwd"]["num_warps"]),
             str(r["chunk_bwd"]["num_warps"]), f"{r['fwd_ms']:.3f}", f"{r['fwdbwd_ms']:.2f}")
            for r in best]
    table = TextTable(("block (steps)", "output_fwd warps", "chunk_bwd warps", "fwd ms",
                       "fwd+bwd ms"), rows,
                      title=f"chunked gla kernel, {report['shape']} {report['dtype']}: the "
                            f"best of {len(report['sweep']['trials'])} trials per block length")
    return CaptionedTable(table, run_caption(report, width=100), best)


# what each change of GLA_BACKWARD_RUN ran: that tree's default was the split backward
# (4 + 4 warps) with the block states rebuilt; the split was removed after this run
_SPLIT = ("_pairs_bwd_kernel", "_states_bwd_kernel")


def _gla_variant(change: dict) -> tuple[str, str]:
    split = change.get("backward", "split") == "split"
    states = change.get("block_states", "recompute")
    if split:
        warps = [change.get(k, {}).get("num_warps", 4) for k in ("pairs_bwd", "states_bwd")]
        shape = f"split, {warps[0]} + {warps[1]} warps"
    else:
        shape = "one kernel, 1 warp"
    return shape, {"recompute": "rebuilt", "store": "stored"}[states]


def gla_backward_table(run: str = GLA_BACKWARD_RUN) -> CaptionedTable:
    """The gla kernel's in-chunk backward, bf16, at each setting the run tried: one kernel or
    split in two (the pairs of each block, then what goes through the states), the warps,
    the block states stored or rebuilt; the in-chunk kernels' time, forward + backward and
    peak memory."""
    report = load_result(run, need=("gla",))
    rows, values = [], []
    for v in report["gla"]["variants"]:
        shape, states = _gla_variant(v["change"])
        names = _SPLIT if shape.startswith("split") else ("_chunk_bwd_kernel",)
        us = sum(v["kernels_us"][n] for n in names)
        rows.append((shape, states, f"{us:,.0f}", f"{v['fwdbwd_ms']:.2f}",
                     f"{v['peak_mib']:.0f}"))
        values.append({**v, "shape": shape, "states": states, "in_chunk_us": us,
                       "kernels_us": {n: v["kernels_us"][n] for n in names}})
    table = TextTable(("in-chunk backward", "block states", "its kernels µs", "fwd+bwd ms",
                       "peak MiB"), rows, align="llrrr",
                      title=f"the gla kernel's backward, {report['shape']}, bfloat16")
    return CaptionedTable(table, run_caption(report, width=100), values)


def delta_long_profile(run: str = DELTA_LONG_PROFILE, dtype: str = "bfloat16") -> CaptionedTable:
    """The time of each of the delta kernel's six launches (µs, torch.profiler, forward +
    backward) in a profile run of ``benchmarks/gated_delta_profile.py``, at its settings."""
    report = load_result(run, need=("current", "environment"))
    times = report["current"][dtype]["kernels_us"]
    rows = [{"kernel": k, "us": us} for k, us in times.items()]
    table = TextTable(("launch", "µs"), [(r["kernel"], f"{r['us']:,.0f}") for r in rows],
                      align="lr", title=f"the delta kernel's launches, {report['shape']}, {dtype}")
    return CaptionedTable(table, run_caption(report), rows)


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
