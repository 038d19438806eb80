"""Chapter 21's tables of the forward settings tried once the pairs were "auto" (one product
in every chunk that fits, the levels for the rest), per rule, shape and dtype: the forward
alone per call and its launches' device time (every launch counted), against a copy of its
bytes, and the forward + backward; and each setting against the one in use. A setting is
named as the run's tree named it (a key of its kernel's ``CONFIGS``); the library has since
dropped those dicts and most of the settings with them (the gla one-launch forward, its reach
and hand-over, redo, blocks of 32 steps): the tables are the history of what was measured.
Read from ``book/results``; nothing here measures time. Checked by
``tests/book/test_book_kernel_settings.py``.
"""

from __future__ import annotations

from hymo_book.kernels.forward import DELTA_DTYPES as DTYPES  # bf16; fp32, fp32-grade products
from hymo_book.results import CaptionedTable, load_result, run_caption
from hymo_mini.analysis.tables import TextTable

__all__ = ["HANDOFF_RUN", "REACH_RUNS", "BLOCK_RUNS", "HALF_RUNS", "DELTA_HALF_RUNS", "DTYPES",
           "change_label", "settings_table", "comparisons", "handoffs"]

# the gla one-launch forward at one long sequence handing its states on by flags (in use) and
# by a tagged ring (tree d216649; slower, so taken out again in the next commit)
HANDOFF_RUN = "gla_handoff_b1t16384_h200_2026-12-03.json"
# the gla one-launch forward reaching back 1 (as it was), 2, 4 and 8 chunks, and reach 4 with
# the output walk's num_stages = 2 (tree 6e429f0, one run a shape)
REACH_RUNS = {"gla": ("gla_reach_b4t4096_h200_2026-12-03.json",
                      "gla_reach_b1t16384_h200_2026-12-03.json")}
# the final tree (2026-12-04): the gla forward over blocks of 32 steps instead of 16
BLOCK_RUNS = {"gla": ("gla_block_b4t4096_h200_2026-12-04.json",
                      "gla_block_b1t16384_h200_2026-12-04.json")}
# the gla forward of bf16 inputs with its products' operands as TF32 (in use then) and as
# bf16 roundings (CONFIGS["half_products"] = "bf16"), tree 511afe3, one run a shape; the
# next commit made "bf16" the GPU's default (still the forward's products of 16-bit inputs:
# hymo_mini.ops.utils.precision.products)
HALF_RUNS = {"gla": ("gla_half_b4t4096_h200_2026-12-04.json",
                     "gla_half_b1t16384_h200_2026-12-04.json")}
# the delta rule's forward with bf16 products in use for bf16 inputs ({}) against TF32
# products, tree e0b6324, one call a shape (B1 alternates the two twice); at B4 also the
# fp32 walk reading the next chunk ahead (state_fwd "prefetch", taken out again: slower) and
# the one launch at 2 and 4 warps
DELTA_HALF_RUNS = {"delta": ("delta_half_b4t4096_h200_2026-12-04.json",
                             "delta_half_b1t16384_h200_2026-12-04.json")}


def change_label(change: dict) -> str:
    """A change of a kernel's CONFIGS in words ({}: the setting in use)."""
    if not change:
        return "as in use"
    words = []
    for key, value in change.items():
        if key == "chunk":
            words.append(f"chunks of {value} steps")
        elif key == "handoff":
            words.append(f"hand-over by {value}")
        elif key == "half_products":
            words.append(f"{value} products")
        elif isinstance(value, dict):
            launch = ", ".join(f"{k.replace('num_', '')} {v}" for k, v in value.items()
                               if k != "chunks")
            lead = f"stretches of {value['chunks']} chunks, " if "chunks" in value else ""
            words.append(f"{key}: {lead}{launch}")
        else:
            words.append(f"{key} = {value}")
    return "; ".join(words)


def _applies(rule: str, report: dict, dtype: str, change: dict) -> bool:
    """Whether a change can matter to that dtype's forward: "half_products" only to bf16
    inputs; the delta rule's "chain" and "redo" settings only where that dtype's forward is
    the one launch, and its walk's ("state_fwd", "group") only where it is the passes
    (unless the change sets the forward too)."""
    if "half_products" in change and dtype != "bfloat16":
        return False
    if rule != "delta" or "forward" in change:
        return True
    table = report["configs_16bit"] if dtype == "bfloat16" else {}
    forward = {**report["configs"], **table}["forward"]
    if set(change) & {"chain", "redo"}:
        return forward == "chain"
    if set(change) & {"state_fwd", "group"}:
        return forward == "passes"
    return True


def settings_table(runs: dict, dtypes: dict = DTYPES) -> CaptionedTable:
    """Every (rule, shape, setting, dtype) of the runs ({rule: run names}), where the setting
    applies: the
    forward per call (ms), its launches' device time (ms) and that over the copy of its
    bytes, the forward + backward (ms) and its peak (MiB). ``dtypes``: {key: words}."""
    rows, values, captions = [], [], []
    for rule, names in runs.items():
        for name in names:
            report = load_result(name, need=(f"{rule}_forward_changes",))
            captions.append(run_caption(report))
            shape = report["shape"]
            for entry in report[f"{rule}_forward_changes"]["changes"]:
                for dtype, words in dtypes.items():
                    f = entry.get("forward", {}).get(dtype)
                    if f is None or not _applies(rule, report, dtype, entry["change"]):
                        continue
                    row = {"rule": rule, "shape": shape, "dtype": dtype,
                           "change": entry["change"], "label": change_label(entry["change"]),
                           "fwd_ms": f["fwd_ms"], "device_ms": f["kernels_sum_ms"],
                           "device_ratio": f["kernels_sum_ms"] / f["copy_ms"],
                           "fwdbwd_ms": f["fwdbwd_ms"], "peak_mib": f["peak_mib"]}
                    values.append(row)
                    rows.append((rule, shape.replace("_", " "), row["label"], words,
                                 f"{row['fwd_ms']:.3f}", f"{row['device_ms']:.3f}",
                                 f"{row['device_ratio']:.2f}x", f"{row['fwdbwd_ms']:.3f}",
                                 f"{row['peak_mib']:.0f}"))
    table = TextTable(("rule", "shape", "setting", "dtype", "fwd ms", "device ms",
                       "device / copy", "fwd+bwd ms", "peak MiB"), rows, align="llllrrrrr",
                      title="the forward alone at each setting tried, pairs \"auto\"")
    return CaptionedTable(table, "\n".join(captions), values)


def comparisons(table: CaptionedTable) -> dict[tuple[str, str], list[dict]]:
    """{(rule, setting): [{shape, dtype, base_ms, device_ms, base_fwdbwd_ms, fwdbwd_ms,
    faster, no_slower_fwdbwd}, ...]}: every setting tried against the one in use, at each
    shape and dtype where both ran."""
    base = {(r["rule"], r["shape"], r["dtype"]): r for r in table.rows if not r["change"]}
    out: dict[tuple[str, str], list[dict]] = {}
    for r in table.rows:
        if not r["change"]:
            continue
        b = base[(r["rule"], r["shape"], r["dtype"])]
        out.setdefault((r["rule"], r["label"]), []).append(
            {"shape": r["shape"], "dtype": r["dtype"], "base_ms": b["device_ms"],
             "device_ms": r["device_ms"], "base_fwdbwd_ms": b["fwdbwd_ms"],
             "fwdbwd_ms": r["fwdbwd_ms"], "faster": r["device_ms"] < b["device_ms"],
             "no_slower_fwdbwd": r["fwdbwd_ms"] <= b["fwdbwd_ms"]})
    return out


def handoffs(run: str = HANDOFF_RUN) -> dict[str, dict[str, dict]]:
    """{dtype: {"flags" | "ring": {fwd_ms, device_ms, fwdbwd_ms}}} of the hand-over run."""
    report = load_result(run, need=("gla_forward_changes",))
    out: dict[str, dict[str, dict]] = {}
    for entry in report["gla_forward_changes"]["changes"]:
        for dtype, f in entry["forward"].items():
            out.setdefault(dtype, {})[entry["change"]["handoff"]] = {
                "fwd_ms": f["fwd_ms"], "device_ms": f["kernels_sum_ms"],
                "fwdbwd_ms": f["fwdbwd_ms"]}
    return out

