"""Chapter 21's tables of the chunked kernels' forwards against the copy of their bytes.
The gla kernel's, from the runs that chose its one-launch forward then (a forward the
library has since deleted: the gla forward is three launches again): the two forwards over
chunks of 64 and 128 steps at both shapes. The delta rule kernel's, from the runs that chose
its one-launch forward for 16-bit inputs (``hymo_mini.ops.gated_delta.chunk_chain``, still
the forward of the dtypes of ``chunk_triton.ONE_LAUNCH``): the forward in passes against one
launch over stretches of chunks, at both shapes. And both forwards with the pairs by the
levels against "auto". Read from ``book/results``; nothing here measures time. Checked by
``tests/book/test_book_kernel_forward.py``.
"""

from __future__ import annotations

from hymo_book.results import CaptionedTable, load_result, run_caption
from hymo_mini.analysis.tables import TextTable

__all__ = ["CHAIN_RUN", "DELTA_CHAIN_RUNS", "DTYPES", "DELTA_DTYPES", "setting_label",
           "chain_table", "delta_setting_label", "delta_chain_table", "PAIRS_RUNS", "pairs_table"]

# three launches against one over chunks of 64 and 128 steps, two shapes (tree b0ec484)
CHAIN_RUN = "gla_chain_h200_2026-12-02.json"
# the runs' dtype keys: fp32 inputs with fp32-grade products (the default) or with TF32
# products (PyTorch's allow_tf32), and bf16
DTYPES = {"float32": "fp32", "float32_tf32": "fp32, TF32", "bfloat16": "bf16"}
# the delta kernel's forward in passes against one launch (tree d1ab4ab), one run a shape
DELTA_CHAIN_RUNS = ("delta_forward_chain_b4t4096_h200_2026-12-02.json",
                    "delta_forward_chain_b1t16384_h200_2026-12-02.json")
# the dtypes those runs timed: fp32 with its default fp32-grade products, and bf16
DELTA_DTYPES = {"bfloat16": "bf16", "float32": "fp32"}
# the pairs by the levels against "auto" in two launches (one product where a chunk fits),
# the forward alone, per rule and shape: one run a rule and shape, one tree
PAIRS_RUNS = {"gla": ("gla_pairs_b4t4096_h200_2026-12-03b.json",
                      "gla_pairs_b1t16384_h200_2026-12-03b.json"),
              "delta": ("delta_pairs_b4t4096_h200_2026-12-03b.json",
                        "delta_pairs_b1t16384_h200_2026-12-03b.json")}
# how close auto's output and gradients must be to the levels' (relative RMS), per dtype key:
# fp32-grade products, and TF32 products (fp32 with TF32, bf16)
PAIRS_TOLERANCE = {"float32": 1e-5, "float32_tf32": 5e-3, "bfloat16": 5e-3}


def setting_label(change: dict) -> str:
    """A change of the kernel's CONFIGS in words ({} is the setting of the run's tree)."""
    if not change:
        return "as it was (three launches, chunks of 64)"
    words = []
    if change.get("forward") == "chain":
        words.append("one launch")
    if "chunk" in change:
        words.append(f"chunks of {change['chunk']}")
    fwd = change.get("output_fwd", {})
    if "maxnreg" in fwd:
        words.append(f"at most {fwd['maxnreg']} registers")
    if fwd.get("unroll"):
        words.append("the walk unrolled")
    return ", ".join(words)


def chain_table(run: str = CHAIN_RUN) -> CaptionedTable:
    """Three launches against one, over chunks of 64 and 128 steps, at each shape: the
    forward against the copy of its bytes and the forward + backward, every dtype."""
    report = load_result(run, need=("shapes",))
    rows, values = [], []
    for shape, result in report["shapes"].items():
        for entry in result["changes"]:
            if "output_fwd" in entry["change"]:
                continue  # the register caps: in the values, not the table
            f = entry["forward"]
            label = setting_label(entry["change"])
            rows.append((shape.replace("_", " "), label,
                         *(f"{f[k]['fwd_ms']:.3f} ({f[k]['fwd_ms'] / f[k]['copy_ms']:.2f}x)"
                           for k in DTYPES),
                         *(f"{f[k]['fwdbwd_ms']:.3f}" for k in DTYPES)))
        for entry in result["changes"]:
            values.append({"shape": shape, "setting": setting_label(entry["change"]),
                           "change": entry["change"], **entry["forward"]})
    header = ("shape", "setting", *(f"{n}: fwd ms (/copy)" for n in DTYPES.values()),
              *(f"{n}: fwd+bwd ms" for n in DTYPES.values()))
    table = TextTable(header, rows, align="llrrrrrr",
                      title="the forward alone, and with the backward")
    return CaptionedTable(table, run_caption(report), values)


def delta_setting_label(change: dict) -> str:
    """A change of the delta kernel's CONFIGS in words ({} is the setting of the run's
    tree: the forward in passes)."""
    if change.get("forward") != "chain":
        return "in passes (as it was)"
    return f"one launch, stretches of {change['chain']['chunks']} chunks"


def delta_chain_table(runs: tuple[str, ...] = DELTA_CHAIN_RUNS) -> CaptionedTable:
    """The delta kernel's forward alone at each setting and shape of the runs: the forward
    against the copy of its bytes and the forward + backward, bf16 and fp32, and how far
    each output and gradient is from the first setting's (the forward in passes)."""
    reports = [load_result(r, need=("delta_forward_changes",)) for r in runs]
    rows, values = [], []
    for report in reports:
        shape = report["shape"]
        for entry in report["delta_forward_changes"]["changes"]:
            f, label = entry["forward"], delta_setting_label(entry["change"])
            rows.append((shape.replace("_", " "), label,
                         *(f"{f[k]['fwd_ms']:.3f} ({f[k]['fwd_ms'] / f[k]['copy_ms']:.2f}x)"
                           for k in DELTA_DTYPES),
                         *(f"{f[k]['fwdbwd_ms']:.3f}" for k in DELTA_DTYPES)))
            values.append({"shape": shape, "setting": label, "change": entry["change"], **f})
    header = ("shape", "setting", *(f"{n}: fwd ms (/copy)" for n in DELTA_DTYPES.values()),
              *(f"{n}: fwd+bwd ms" for n in DELTA_DTYPES.values()))
    table = TextTable(header, rows, align="llrrrr",
                      title="the delta forward alone, and with the backward")
    return CaptionedTable(table, "\n".join(run_caption(r) for r in reports), values)


def pairs_table(runs: dict = PAIRS_RUNS) -> CaptionedTable:
    """The forward alone with the pairs by the levels and with "auto" (two launches: one
    product in every chunk that fits, the levels for the rest), per rule, shape and dtype:
    ms and the ratio to a copy of its bytes (moved once), and whether auto's output agrees
    with the levels' (relative RMS, the largest of o's and the gradients', against
    PAIRS_TOLERANCE). The delta rule in each dtype's setting of the run's tree (one launch
    for bf16, passes for fp32). For the gla
    rule also auto's launches' device time (the profiler's, summed): its two launches are two
    kernels. The delta rule's are two launches of one kernel each, and the run's profile
    keeps one median per kernel, which is not their sum, so it has none."""
    rows, values, captions = [], [], []
    for rule, names in runs.items():
        for name in names:
            report = load_result(name, need=(f"{rule}_forward_changes",))
            captions.append(run_caption(report))
            by = {entry["change"]["pairs"]: entry["forward"]
                  for entry in report[f"{rule}_forward_changes"]["changes"]}
            for key, words in DTYPES.items():
                if key not in by["auto"]:
                    continue
                lv, au = by["levels"][key], by["auto"][key]
                row = {"rule": rule, "shape": report["shape"], "dtype": key,
                       "levels_ms": lv["fwd_ms"], "auto_ms": au["fwd_ms"],
                       "copy_ms": au["copy_ms"], "levels_ratio": lv["fwd_ms"] / lv["copy_ms"],
                       "auto_ratio": au["fwd_ms"] / au["copy_ms"],
                       "o_rel": au["rel_vs_first"], "grads_rel": au["grads_rel_vs_first"],
                       "levels_device_ms": lv["kernels_sum_ms"] if rule == "gla" else None,
                       "auto_device_ms": au["kernels_sum_ms"] if rule == "gla" else None,
                       "tol": PAIRS_TOLERANCE[key]}
                row["agree"] = max(row["o_rel"], row["grads_rel"]) < row["tol"]
                values.append(row)
                rows.append((rule, report["shape"].replace("_", " "), words,
                             f"{row['levels_ms']:.3f} ({row['levels_ratio']:.2f}x)",
                             f"{row['auto_ms']:.3f} ({row['auto_ratio']:.2f}x)",
                             f"{row['auto_ms'] / row['levels_ms']:.2f}",
                             "–" if row["auto_device_ms"] is None
                             else f"{row['levels_device_ms']:.3f} / {row['auto_device_ms']:.3f}",
                             f"{'yes' if row['agree'] else 'no'} (< {row['tol']:g})"))
    table = TextTable(("rule", "shape", "dtype", "levels: fwd ms (/copy)",
                       "auto: fwd ms (/copy)", "auto / levels",
                       "launches' device ms, levels / auto", "auto agrees with levels"),
                      rows, align="lllrrrrr", title="the forward alone, pairs by the levels "
                                                   "and by one product where a chunk fits")
    return CaptionedTable(table, "\n".join(captions), values)
