"""Chapter 21: the delta rule's forward as it was tuned last, mostly on an H100.

A change timed against the setting in use (:func:`forward_change_ratios`), the inverse with
one product fewer (:func:`inverse_level0`), the walks over groups of chunks set anew
(:func:`group_settings`) and forming the outputs (:func:`walk_outputs_ab`).
"""

from __future__ import annotations

import json
import statistics

from hymo_book.kernels import settings as kernel_settings
from hymo_book.kernels.standing import long_fp32
from hymo_book.results import CaptionedTable, load_result, run_caption
from hymo_mini.analysis.tables import TextTable

__all__ = ["DELTA_STRETCH_RUNS", "DELTA_CAP_RUNS", "forward_change_ratios",
           "INVERSE_LEVEL0_RUN", "inverse_level0", "ab_caption", "GROUP_SETTINGS_RUN",
           "group_setting_label", "group_settings", "WALK_OUTPUT_CALLS", "WALK_WARPS_RUN",
           "walk_outputs_ab"]

# --------------------------------------------------------------------------------------
# The delta forward's last changes, on the card that was lent
# --------------------------------------------------------------------------------------
# an H100, third session of 2026-12-05, tree 89644a8: the one-launch forward's changes
# alternated with the default
# (keep only (I + M)^-1 between the two steps; stretches of 16 and of 4 chunks), bf16
DELTA_STRETCH_RUNS = ("delta_stretch_b4t4096_h100_2026-12-05.json",
                      "delta_stretch_b1t16384_h100_2026-12-05.json")
# and the fp32 forward with its wy_fwd and output kernels capped at 128 registers, alternated
DELTA_CAP_RUNS = ("delta_cap2_b4t4096_h100_2026-12-05.json",
                  "delta_cap2_b1t16384_h100_2026-12-05.json")
def forward_change_ratios(runs, dtype: str) -> dict:
    """Per change of the delta runs ``runs`` (gated_delta_profile.py --delta-forward-changes,
    the setting in use, '{}', alternated with the others), read by
    ``kernel_settings.settings_table``: {shape: {change as JSON: [its per-call time over
    the mean of the setting in use's, one per alternation]}}."""
    table = kernel_settings.settings_table({"delta": runs}, {dtype: dtype})
    times: dict[str, dict[str, list[float]]] = {}
    for r in table.rows:
        times.setdefault(r["shape"], {}).setdefault(
            json.dumps(r["change"], sort_keys=True), []).append(r["fwd_ms"])
    out = {}
    for shape, by_change in times.items():
        base = by_change.pop("{}")
        mean = sum(base) / len(base)
        out[shape] = {k: [t / mean for t in v] for k, v in by_change.items()}
    return out


# the same card and session: the delta forward as the mixer calls it, tree f79bc97 against
# the package of d09d8a7 (a96a84b's parent: eight products a chunk's inverse instead of six),
# alternated four times in one process (benchmarks/tree_ab.py's first form)
INVERSE_LEVEL0_RUN = "inverse_level0_ab_h100_2026-12-05.json"


def inverse_level0() -> CaptionedTable:
    """The A/B of ``INVERSE_LEVEL0_RUN``: a row per shape and dtype with the median time a
    call of each tree, their ratio (after / before) and whether the outputs were the same
    bits (relative difference 0)."""
    run = load_result(INVERSE_LEVEL0_RUN, need=("rows",))
    rows = []
    for key, r in run["rows"].items():
        shape, dtype = key.rsplit("_", 1)
        before, after = statistics.median(r["before"]), statistics.median(r["after"])
        rows.append({"shape": shape.replace("_", " "), "dtype": dtype, "before_ms": before,
                     "after_ms": after, "ratio": after / before, "rounds": len(r["after"]),
                     "same_bits": r["rel_diff_o"] == 0.0})
    table = TextTable(
        ("shape", "dtype", "eight products ms", "six products ms", "six / eight", "output"),
        [(r["shape"], r["dtype"], f"{r['before_ms']:.3f}", f"{r['after_ms']:.3f}",
          f"{r['ratio']:.3f}", "the same bits" if r["same_bits"] else "differs")
         for r in rows],
        title="The delta forward as the mixer calls it, a chunk's inverse by levels with eight "
              "products (before) and six (after), medians of alternated calls",
        align="llrrrl")
    return CaptionedTable(table, ab_caption(INVERSE_LEVEL0_RUN, run,
                                             "benchmarks/tree_ab.py (its first form)"), rows)


def ab_caption(name: str, run: dict, command: str) -> str:
    """The caption of a ``benchmarks/tree_ab.py`` run: the card, versions, both trees and
    the command."""
    return (f"{name}: {run['gpu']}, torch {run['torch']}, Triton {run['triton']}; before: "
            f"{run['commit_before']}, after: {run['commit_after'][:7]}\n  {command}")


# --------------------------------------------------------------------------------------
# The delta rule's walks over groups of chunks (2026-12-05, sixth session)

# benchmarks/gated_delta_profile.py --delta-forward-changes, fp32 (and bf16 for its forward +
# backward), the first change of the run ({}) the settings in use when it ran: on an H100,
# tree 69f6f5c (the group kernels' columns as blocks of [Φ | Ψ], the old settings in use)
GROUP_SETTINGS_RUN = "delta_group_settings_b1t16384_h100_2026-12-05.json"
_PASS_WORDS = {"state_fwd": "walk", "state_bwd": "backward walk", "output": "output kernel",
               "wy_fwd": "WY kernel"}


def _launch_words(cfg: dict) -> str:
    """A kernel's launch settings in words: "32 columns, 4 warps, 3 stages"."""
    words = {"split": "columns", "num_warps": "warps", "num_stages": "stages",
             "maxnreg": "registers at most"}
    return ", ".join(f"{cfg[k]} {w[:-1] if cfg[k] == 1 and w.endswith('s') else w}"
                     for k, w in words.items() if k in cfg)


def group_setting_label(change: dict) -> str:
    """A change of the delta kernel's CONFIGS in the group runs, in words ({}: in use)."""
    if not change:
        return "in use when run"
    parts = []
    for key, cfg in change.items():
        if key == "walk_products":
            parts.append("walks in the forward's products" if cfg == "same"
                         else f"walks in {cfg} products")
            continue
        if key != "group":
            parts.append(f"{_PASS_WORDS.get(key, key)}: {_launch_words(cfg)}")
            continue
        kernel = {k: v for k, v in cfg.items() if k in ("split", "num_warps", "num_stages")}
        words = [f"groups of {cfg['chunks']} chunks"] if "chunks" in cfg else []
        if kernel:
            words.append(f"group kernels {_launch_words(kernel)}")
        if cfg.get("products") == "walk":
            words.append("group kernels in the walks' products")
        for name in ("state_fwd", "state_bwd"):
            if name in cfg:
                words.append(f"{_PASS_WORDS[name]}s over groups {_launch_words(cfg[name])}")
        if "outputs" in cfg:
            words.append("the walks form the outputs" if cfg["outputs"]
                         else "an output kernel forms the outputs")
        parts.append("; ".join(words))
    return "; ".join(parts)


def _changed(change: dict, configs: dict) -> dict:
    """The part of a change of the delta kernel's CONFIGS that differs from ``configs``, the
    settings in use when it ran (a "group" dict and its walks' settings key by key)."""
    out = {}
    for key, value in change.items():
        was = configs.get(key)
        if key == "group" and isinstance(was, dict):
            diff = {k: v for k, v in value.items()
                    if k not in ("state_fwd", "state_bwd") and was.get(k) != v}
            for name in ("state_fwd", "state_bwd"):
                sub = {k: v for k, v in value.get(name, {}).items()
                       if (was.get(name) or {}).get(k) != v}
                if sub:
                    diff[name] = sub
            if diff:
                out[key] = diff
        elif was != value:
            out[key] = value
    return out


def group_settings(runs: tuple) -> CaptionedTable:
    """Each change of the group runs ``runs`` against the first of its run, fp32: the forward per
    call, the device time of the group kernels (each group's summary and the scan over the
    groups) and of the walk, the forward over the run's first, and forward + backward in
    fp32 and, where the run timed it, bf16."""
    rows, values, captions = [], [], []
    for name in runs:
        report = load_result(name, need=("delta_forward_changes",))
        captions.append(run_caption(report))
        changes = report["delta_forward_changes"]["changes"]
        first = changes[0]["forward"]
        for entry in changes:
            f, half = entry["forward"]["float32"], entry["forward"].get("bfloat16")
            us = f["kernels_us"]
            row = {"gpu": report["environment"]["gpu"], "shape": report["shape"],
                   "change": entry["change"],
                   "label": group_setting_label(_changed(entry["change"], report["configs"])),
                   "fwd_ms": f["fwd_ms"],
                   "groups_us": us.get("_group_fwd_kernel", 0.0)
                   + us.get("_group_scan_fwd_kernel", 0.0),
                   "walk_us": us["_state_fwd_kernel"],
                   "output_us": us.get("_output_kernel"),  # None: the walks formed them
                   "vs_first": f["fwd_ms"] / first["float32"]["fwd_ms"],
                   "fwdbwd_ms": f["fwdbwd_ms"],
                   "half_fwdbwd_ms": half["fwdbwd_ms"] if half else None,
                   "half_vs_first": (half["fwdbwd_ms"] / first["bfloat16"]["fwdbwd_ms"]
                                     if half else None)}
            values.append(row)
            rows.append((row["gpu"].replace("NVIDIA ", "").split(" ")[0],
                         row["shape"].replace("_", " "), row["label"], f"{row['fwd_ms']:.3f}",
                         f"{row['vs_first']:.2f}x",
                         f"{row['groups_us']:.0f}" if row["groups_us"] else "-",
                         f"{row['walk_us']:.0f}",
                         "-" if row["output_us"] is None else f"{row['output_us']:.0f}",
                         f"{row['fwdbwd_ms']:.2f}",
                         f"{row['half_fwdbwd_ms']:.2f}" if half else "-"))
    table = TextTable(("card", "shape", "setting", "fp32 fwd ms", "/ run's first",
                       "groups µs", "walk µs", "output µs", "fp32 fwd+bwd ms",
                       "bf16 fwd+bwd ms"),
                      rows, align="lllrrrrrrr",
                      title="the delta forward's walks at each setting tried, fp32")
    return CaptionedTable(table, "\n".join(captions), values)


# --------------------------------------------------------------------------------------
# The walks over groups form the outputs (2026-12-05, seventh session)

# each call of the same command: (the standing run, the long fp32 case with the old group
# settings, outputs off, right after it on the same machine: --configs); the second call
# on a machine started afresh, the third on an H200
WALK_OUTPUT_CALLS = (("gated_delta_peers_walk_outputs_h100_2026-12-05.json",
                      "gated_delta_peers_old_group_h100_2026-12-05.json"),
                     ("gated_delta_peers_walk_outputs2_h100_2026-12-05.json",
                      "gated_delta_peers_old_group2_h100_2026-12-05.json"),
                     ("gated_delta_peers_walk_outputs_h200_2026-12-05.json",
                      "gated_delta_peers_old_group_h200_2026-12-05.json"))
# on that H200 right after: settings around the walks forming the outputs
# (gated_delta_profile.py, B1 T16384 H40 fp32), then the long sequence beside chunk_kda
# with the best of them, the walks over groups at 2 warps (--configs; the default since)
WALK_WARPS_RUN = "delta_walk_settings_b1t16384_h200_2026-12-05.json"


def walk_outputs_ab(calls: tuple = WALK_OUTPUT_CALLS) -> CaptionedTable:
    """The long fp32 forward with the walks forming the outputs (the standing run) against
    the old group settings right after it on the same machine, a row per call: each
    forward's time and its ratio to the clone of its bytes that its run timed."""
    rows, captions = [], []
    for i, names in enumerate(calls, 1):
        new, old = (load_result(name, need=("peers",)) for name in names)
        captions += [run_caption(new), run_caption(old)]
        a, b = long_fp32(new), long_fp32(old)
        row = {"call": i, "gpu": new["environment"]["gpu"], "limit": 4.0,
               "new_ms": a["results"]["chunk_triton"]["fwd_ms"],
               "old_ms": b["results"]["chunk_triton"]["fwd_ms"],
               "new_clone_ms": a["clone_floor_ms"], "old_clone_ms": b["clone_floor_ms"]}
        row["new_vs_clone"] = row["new_ms"] / row["new_clone_ms"]
        row["old_vs_clone"] = row["old_ms"] / row["old_clone_ms"]
        row["ratio"] = row["new_ms"] / row["old_ms"]
        rows.append(row)
    table = TextTable(
        ("call", "card", "fwd ms: outputs by the walks", "old settings", "new / old",
         "fwd / clone: new (limit)", "old"),
        [(str(r["call"]), r["gpu"].replace("NVIDIA ", "").split(" ")[0], f"{r['new_ms']:.3f}",
          f"{r['old_ms']:.3f}", f"{r['ratio']:.2f}x",
          f"{r['new_vs_clone']:.2f}x ({r['limit']:g}x) "
          f"{'met' if r['new_vs_clone'] <= r['limit'] else 'missed'}",
          f"{r['old_vs_clone']:.2f}x") for r in rows],
        title="The delta forward at B1 T16384 H40 in fp32 on the model's rates, as the mixer "
              "calls it: the walks forming the outputs against the old group settings, "
              "one call each",
        align="llrrrrr")
    return CaptionedTable(table, "\n".join(captions), rows)

