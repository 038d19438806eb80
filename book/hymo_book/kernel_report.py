"""Chapter 21, the kernel report: what the kernels are now (their files and recipes, read from
the library's own docstrings and module-level settings), the launch arithmetic against the
measured loop, and every target set for the package's chunked kernels with its verdict (the
runs' own tables are in :mod:`hymo_book.kernel_runs`), read from ``book/results``.

:func:`launch_arithmetic` is **the one place the book computes the eager loop's launches and
the kernel's speed-up over it**: section 6.1's count, the count PyTorch's dispatcher makes of
the package's loop, and the times measured in one run. Chapter 20 (the claims) and chapter
21 both read it. The tables name their runs; nothing here measures time. Checked by
``tests/book/test_book_kernel_report.py``.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

import torch

from hymo_book import kernel_forward, kernel_settings
from hymo_book.kernel_chapter import document_launches, launches_per_step
from hymo_book.kernel_runs import DELTA_AUTO_PEERS, delta_entries
from hymo_book.results import RESULTS_DIR, CaptionedTable, load_result, run_caption
from hymo_mini.analysis.tables import TextTable

__all__ = ["OPS_FOLDERS", "kernel_files", "on_gpu", "recipe",
           "LAUNCH_US", "RECURRENT_RUN", "LaunchArithmetic", "launch_arithmetic",
           "DELTA_TARGETS", "targets_summary", "GLA_RECORD_RUN", "DELTA_RECORD_RUN", "STANDING",
           "STANDING_H100", "standing", "GLA_TF32_RUN", "GLA_BF16X6_RUN", "TF32_PRECISIONS",
           "tf32_beside_peer", "ERROR_FLOOR", "FP32_PRODUCTS_RUNS", "fp32_products_table",
           "INVERSE_LEVEL0_RUN", "inverse_level0", "benchmark_gates", "one_product_shares",
           "SHARE_RULES", "SHARED_RATE_AB_RUN", "SHARED_RATE_AGREE", "shared_rate_ab",
           "STANDING_MODEL_RATES", "GLA_MODEL_RUNS", "gla_model_rates", "GROUP_SETTINGS_RUNS",
           "STANDING_GROUPS", "group_setting_label", "group_settings", "WALK_OUTPUT_RUNS",
           "WALK_OUTPUT_HALF_RUN", "STANDING_WALK_OUTPUTS", "WALK_OUTPUT_CALLS",
           "walk_outputs_ab", "STANDING_WALK_OUTPUTS_H200", "WALK_WARPS_RUN",
           "STANDING_WALK_WARPS", "long_fp32", "pytest_tally"]

LAUNCH_US = 10.0  # section 6.1's cost of one kernel launch, "~10μs"
RECURRENT_RUN = "gdn_recurrent_h200_2026-11-30.json"  # the loop and the kernel, timed together



# --------------------------------------------------------------------------------------
# The kernels now: read from the library, not from a run
# --------------------------------------------------------------------------------------
# the shared floor first, then one folder per rule, as hymo_mini.ops lists them
OPS_FOLDERS = ("hymo_mini.ops.utils", "hymo_mini.ops.gla", "hymo_mini.ops.gated_delta")
# a file's line in a package's docstring: "    name.py   [its function or step  ]what it holds"
_FILE_LINE = re.compile(r"^ {4}(\w+\.py) {2,}(.+)$")
# a launch in a launcher's recipe: "    1. chunk_writes_kernel   (chunk_h)    what it computes"
_RECIPE_LINE = re.compile(r"^ {4}(\d+)\. +(\w+) +\((\w+)\) +(.+)$")


def _source(module: str) -> str:
    """A module's source, found without importing it (importing a kernel's module builds
    its Triton kernels)."""
    return Path(importlib.util.find_spec(module).origin).read_text()


def kernel_files(folders: tuple[str, ...] = OPS_FOLDERS) -> CaptionedTable:
    """Every file of the kernels' folders as the folder's own docstring lists it (the
    library tests that each listing names its files, no more and no fewer): a row per file
    with the folder, the file, the function or step it is named for (gla and gated_delta)
    and what it holds."""
    rows = []
    for folder in folders:
        doc = ast.get_docstring(ast.parse(_source(folder)))
        for line in doc.splitlines():
            if m := _FILE_LINE.match(line):
                parts = re.split(r" {2,}", m.group(2), maxsplit=1)
                step, what = (parts if len(parts) == 2 else ("", parts[0]))
                rows.append({"folder": folder.rsplit(".", 1)[1], "file": m.group(1),
                             "step": step, "what": what})
    table = TextTable(("folder", "file", "named for", "what it holds"),
                      [(r["folder"], r["file"], r["step"] or "-", r["what"]) for r in rows],
                      align="llll", title="hymo_mini/ops: the shared floor and one folder per rule")
    return CaptionedTable(table, "from the docstrings of " + ", ".join(folders), rows)


def recipe(module: str) -> list[dict]:
    """The numbered launches of a launcher's docstring (``chunk_triton`` of either rule), in
    order: {step, kernel, file, what, direction} (``what`` its first line only, without the
    "backward:" that marks the backward's launches)."""
    steps = []
    for line in ast.get_docstring(ast.parse(_source(module))).splitlines():
        if m := _RECIPE_LINE.match(line):
            what = m.group(4).strip()
            backward = what.startswith("backward:")
            steps.append({"step": int(m.group(1)), "kernel": m.group(2), "file": m.group(3),
                          "what": what.removeprefix("backward:").strip(),
                          "direction": "backward" if backward else "forward"})
    return steps


def on_gpu(module: str, name: str):
    """A module-level setting of ``module`` as a GPU run takes it: its assignment evaluated
    with the Triton interpreter off, whether or not this process runs the interpreter (the
    gla kernel's ``CHUNK`` is shorter under it). Reads the source; imports nothing."""
    for node in ast.parse(_source(module)).body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            names = ([target.id] if isinstance(target, ast.Name) else
                     [t.id for t in target.elts] if isinstance(target, ast.Tuple) else [])
            if name in names:
                value = eval(compile(ast.Expression(node.value), module, "eval"),  # noqa: S307
                             {"INTERPRET": False, "torch": torch, "dict": dict})
                return value if len(names) == 1 else value[names.index(name)]
    raise KeyError(f"{module} sets no {name} at module level")

# --------------------------------------------------------------------------------------
# The eager loop's launches and the kernel's speed-up
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LaunchArithmetic:
    """Section 6.1's launch arithmetic, the launches the package's loop really makes, and
    the times measured in one run at the same shape.

    The document counts ``doc_per_step`` launches per step *for every (sequence, head)*:
    ``doc_loop_launches`` = T · per step · H · B, at ``LAUNCH_US`` each ``doc_loop_s``; its
    section 6 opening counts one per step (``doc_opening_launches``); the kernel "1 launch
    per (batch, head)", ``doc_kernel_launches``; the ratio ``doc_ratio`` (it writes
    "~8,000×"). The loop ``naive_gla`` is vectorised over sequences and heads: each step
    runs ``per_step`` operators that launch a kernel on a GPU, whatever B and H
    (``loop_launches`` = T · per step a layer), and the kernel is one launch of a B · H grid.
    ``speedup_fwd`` is the measured loop's forward over the kernel's own (its autograd
    Function, no input checks), ``speedup_fwdbwd`` the same for forward + backward and
    ``speedup_dispatch_fwd`` over the kernel called through the dispatcher."""

    B: int
    T: int
    H: int
    launch_us: float
    doc_per_step: int
    doc_loop_launches: int
    doc_loop_s: float
    doc_opening_launches: int
    doc_opening_s: float
    doc_kernel_launches: int
    doc_kernel_ms: float
    doc_ratio: float
    per_step: dict
    launches_per_step: int
    loop_launches: int
    loop_launch_s: float
    kernel_launches: int
    naive_fwd_ms: float
    naive_fwdbwd_ms: float
    kernel_fwd_ms: float
    kernel_fwdbwd_ms: float
    dispatch_fwd_ms: float
    caption: str

    @property
    def speedup_fwd(self) -> float:
        return self.naive_fwd_ms / self.kernel_fwd_ms

    @property
    def speedup_fwdbwd(self) -> float:
        return self.naive_fwdbwd_ms / self.kernel_fwdbwd_ms

    @property
    def speedup_dispatch_fwd(self) -> float:
        return self.naive_fwd_ms / self.dispatch_fwd_ms

    @property
    def us_per_step(self) -> float:
        """The measured loop's forward, per time step (µs)."""
        return self.naive_fwd_ms * 1e3 / self.T

    @property
    def us_per_operator(self) -> float:
        """The measured loop's forward, per launching operator (µs): launch and Python."""
        return self.us_per_step / self.launches_per_step

    @property
    def kernel_us_per_step(self) -> float:
        return self.kernel_fwd_ms * 1e3 / self.T

    def verdict(self, tolerance: float = 0.1) -> str:
        """The document's ratio against the measured forward speed-up: "approximately right"
        within ``tolerance`` (relative), else "wrong"."""
        off = abs(self.doc_ratio - self.speedup_fwd) / self.speedup_fwd
        return "approximately right" if off <= tolerance else "wrong"


def launch_arithmetic(run: str = RECURRENT_RUN, key: str = "B4_T4096_H40_float32"
                      ) -> LaunchArithmetic:
    """The launch arithmetic at the shape ``key`` of ``run``, a run that timed the naive loop
    (backend "naive"), the recurrent kernel alone ("recurrent_triton_kernel") and through the
    dispatcher ("recurrent_triton") together, so that every ratio divides times of one run."""
    report = load_result(run, need=("shapes",))
    entry = report["shapes"][key]
    found = entry["results"]
    missing = {"naive", "recurrent_triton_kernel", "recurrent_triton"} - set(found)
    if missing:
        raise KeyError(f"{report['file']} has no {sorted(missing)} at {key}: the launch "
                       "arithmetic needs the loop and the kernel timed in one run")
    B, T, H = entry["B"], entry["T"], entry["H"]
    doc = document_launches(B, T, H, per_step=2, launch_us=LAUNCH_US)
    opening = document_launches(B, T, H, per_step=1, launch_us=LAUNCH_US)
    counted = dict(launches_per_step(B=2, H=3))
    n = sum(counted.values())
    return LaunchArithmetic(
        B=B, T=T, H=H, launch_us=LAUNCH_US, doc_per_step=2,
        doc_loop_launches=doc["loop_launches"], doc_loop_s=doc["loop_s"],
        doc_opening_launches=opening["loop_launches"], doc_opening_s=opening["loop_s"],
        doc_kernel_launches=doc["kernel_launches"], doc_kernel_ms=doc["kernel_ms"],
        doc_ratio=doc["ratio"], per_step=counted, launches_per_step=n, loop_launches=n * T,
        loop_launch_s=n * T * LAUNCH_US * 1e-6, kernel_launches=1,
        naive_fwd_ms=found["naive"]["fwd_ms"], naive_fwdbwd_ms=found["naive"]["fwdbwd_ms"],
        kernel_fwd_ms=found["recurrent_triton_kernel"]["fwd_ms"],
        kernel_fwdbwd_ms=found["recurrent_triton_kernel"]["fwdbwd_ms"],
        dispatch_fwd_ms=found["recurrent_triton"]["fwd_ms"], caption=run_caption(report))


# --------------------------------------------------------------------------------------
# Targets met and missed
# --------------------------------------------------------------------------------------
# the delta rule kernel's targets (benchmarks/gated_delta.py, against fla's chunk_kda in one
# run): forward + backward at most 0.8 of the peer's, peak memory at most the peer's,
# forward at most 4 times the copy floor of its minimum bytes
DELTA_TARGETS = {"fwdbwd_over_kda": 0.8, "peak_over_kda": 1.0, "fwd_over_floor": 4.0}


def targets_summary() -> CaptionedTable:
    """Every target set for the package's chunked kernels, with the limit, the worst value
    measured and the verdict: the gla kernel's three (hymo_book.kernel_targets, scored on
    the benchmark of record, its forward alone on the kernel-only run and, per dtype at its
    worst shape, at the chosen setting (``kernel_forward.LATEST_RUN``), and its forward as the
    GDN mixer calls it, ``kernel_forward.DISPATCH_RUN``) and the delta
    rule kernel's three, each at its worst over the shapes and dtypes timed beside
    chunk_kda (``kernel_runs.delta_entries``; default products) and with the pairs "auto"
    (``kernel_runs.DELTA_AUTO_PEERS``, the shapes and dtypes it timed), and its forward alone per
    dtype at the setting in use, worst of two shapes (``kernel_forward.DELTA_CHAIN_RUNS``);
    and both rules' forwards alone with the pairs "auto" (``kernel_forward.PAIRS_RUNS``), per
    dtype, worst of two shapes; and the gla forward's device time at the reach adopted
    (``kernel_settings.REACH_RUNS``, ``ADOPTED``), per dtype, worst of two shapes; last, both
    rules as they ship beside their peers, and the delta forward against the issue's floor,
    on the card of ``STANDING_H100``."""
    from hymo_book.kernel_targets import TARGETS, chunk_targets, kernel_only

    gla = chunk_targets()
    alone = kernel_only().rows[0]
    alone_ratio = alone["results"]["chunk_triton_kernel"]["fwd_ms"] / alone["copy_ms"]
    names = {"fwdbwd_vs_peer": "gla: forward + backward / fla chunk_gla",
             "peak_vs_peer": "gla: peak memory / fla chunk_gla",
             "fwd_vs_copy": "gla: forward / a copy of its bytes"}
    rows = [{"target": names[k], "limit": limit, "worst": worst, "met": met,
             "where": "benchmark of record, every shape (TF32 products)"}
            for k, (worst, limit, met) in gla.verdicts.items()]
    rows.append({"target": "gla: forward / a copy of its bytes, the kernel alone",
                 "limit": TARGETS["fwd_vs_copy"], "worst": alone_ratio,
                 "met": alone_ratio <= TARGETS["fwd_vs_copy"],
                 "where": f"kernel-only run, {alone['shape']} {alone['dtype']}"})
    latest = kernel_forward.latest_forward()  # the forward alone, the chosen setting
    for key, words in (("float32_tf32", "fp32 (TF32 products)"), ("bfloat16", "bf16"),
                       ("float32", "fp32 (fp32-grade products, the default)")):
        shape, worst = max(((sh, r["ratio"]) for (sh, k), r in latest.items() if k == key),
                           key=lambda x: x[1])
        rows.append({"target": "gla: forward / a copy of its bytes, the kernel alone, latest",
                     "limit": TARGETS["fwd_vs_copy"], "worst": worst,
                     "met": worst <= TARGETS["fwd_vs_copy"],
                     "where": f"{words}, worst of 2 shapes: {shape.replace('_', ' ')}"})
    mixer = kernel_forward.dispatch_table().rows  # as the GDN mixer calls it, no check
    worst_row = max(mixer, key=lambda r: r["unchecked_vs_copy"])
    rows.append({"target": "gla: forward / a copy of its bytes, as the GDN mixer calls it",
                 "limit": TARGETS["fwd_vs_copy"], "worst": worst_row["unchecked_vs_copy"],
                 "met": worst_row["unchecked_vs_copy"] <= TARGETS["fwd_vs_copy"],
                 "where": f"{worst_row['shape']} {worst_row['dtype']}, worst of {len(mixer)}"})
    reports, picked = delta_entries()
    timed = {key: entry["targets"]["chunk_triton"] for key, (_, entry) in picked.items()
             if "fla_chunk_kda" in entry["results"]}
    for key, label in (("fwdbwd_over_kda", "delta: forward + backward / fla chunk_kda"),
                       ("peak_over_kda", "delta: peak memory / fla chunk_kda"),
                       ("fwd_over_floor", "delta: forward / the copy floor")):
        limit = DELTA_TARGETS[key]
        where = max(timed, key=lambda k: timed[k][key])
        worst = timed[where][key]
        rows.append({"target": label, "limit": limit, "worst": worst, "met": worst <= limit,
                     "where": f"{where.replace('_', ' ')}, worst of {len(timed)} timed"})
    auto_run = load_result(DELTA_AUTO_PEERS, need=("peers",))  # "auto" beside chunk_kda
    for key, label in (("fwdbwd_over_kda", "delta: forward + backward / fla chunk_kda"),
                       ("peak_over_kda", "delta: peak memory / fla chunk_kda"),
                       ("fwd_over_floor", "delta: forward / the copy floor")):
        timed = {k: e["targets"]["chunk_triton"][key] for k, e in auto_run["peers"].items()
                 if key in e.get("targets", {}).get("chunk_triton", {})}
        where = max(timed, key=timed.get)
        rows.append({"target": f"{label}, pairs \"auto\"", "limit": DELTA_TARGETS[key],
                     "worst": timed[where], "met": timed[where] <= DELTA_TARGETS[key],
                     "where": f"{where.replace('_', ' ')}, worst of {len(timed)} timed"})
    delta_now = kernel_forward.delta_latest_forward()  # alone, the setting in use per dtype
    for key, words in (("bfloat16", "bf16"), ("float32", "fp32 (fp32-grade products)")):
        (shape, _), r = max(((k, r) for k, r in delta_now.items() if k[1] == key),
                            key=lambda kr: kr[1]["ratio"])
        limit = DELTA_TARGETS["fwd_over_floor"]
        rows.append({"target": "delta: forward / a copy of its bytes, the kernel alone, latest",
                     "limit": limit, "worst": r["ratio"], "met": r["ratio"] <= limit,
                     "where": f"{words}, {r['setting']}, worst of 2 shapes: "
                              f"{shape.replace('_', ' ')}"})
    for rule, limit in (("gla", TARGETS["fwd_vs_copy"]),
                        ("delta", DELTA_TARGETS["fwd_over_floor"])):
        auto = [r for r in kernel_forward.pairs_table().rows if r["rule"] == rule]
        for key, words in kernel_forward.DTYPES.items():
            timed = [r for r in auto if r["dtype"] == key]
            if not timed:
                continue
            r = max(timed, key=lambda r: r["auto_ratio"])
            rows.append({"target": f"{rule}: forward / a copy of its bytes, pairs \"auto\"",
                         "limit": limit, "worst": r["auto_ratio"],
                         "met": r["auto_ratio"] <= limit,
                         "where": f"{words}, worst of {len(timed)} shapes: "
                                  f"{r['shape'].replace('_', ' ')}"})
    reach = kernel_settings.settings_table(kernel_settings.REACH_RUNS)
    for key, r in kernel_settings.device_ratios(reach, kernel_settings.ADOPTED).items():
        rows.append({"target": "gla: forward, device time / a copy of its bytes, reach 4",
                     "limit": TARGETS["fwd_vs_copy"], "worst": r["device_ratio"],
                     "met": r["device_ratio"] <= TARGETS["fwd_vs_copy"],
                     "where": f"{kernel_forward.DTYPES[key]}, worst of 2 shapes: "
                              f"{r['shape'].replace('_', ' ')}"})
    now = standing()  # both rules beside their peers, one run each, on the final tree
    rows += _standing_rows(now, "final tree")
    # the same delta forwards against the floor the issue quotes (a clone of the bytes: each
    # read and written, about twice the bytes moved once that the row above scores)
    rows.append(_clone_row(now, "final tree"))
    both = tf32_beside_peer(GLA_BF16X6_RUN)  # the gla kernel alone in fp32, each precision
    for key, (words, products) in (("default", ("fp32-grade default",
                                                "our fp32-grade products, fla's TF32")),
                                   ("tf32", ("fp32 TF32 opt-in", "TF32 products, as fla's"))):
        worst = max(both.rows, key=lambda r: r[key]["fwdbwd_ratio"])
        rows.append({"target": f"gla: forward + backward / fla chunk_gla, {words}, final tree",
                     "limit": worst["limit"], "worst": worst[key]["fwdbwd_ratio"],
                     "met": all(r[key]["met"] for r in both.rows),
                     "where": f"the kernel alone, {worst['shape']} {worst['dtype']} "
                              f"({products}), worst of {len(both.rows)}"})
    halves = []  # each rule's forward with bf16 products ({} where they are in use in the runs)
    for rule, runs, change, limit in (
            ("gla", kernel_settings.HALF_RUNS, {"half_products": "bf16"}, TARGETS["fwd_vs_copy"]),
            ("delta", kernel_settings.DELTA_HALF_RUNS, {}, DELTA_TARGETS["fwd_over_floor"])):
        halves.append(kernel_settings.settings_table(runs))
        bf16 = kernel_settings.device_ratios(halves[-1], change)["bfloat16"]
        rows.append({"target": f"{rule}: forward, device time / a copy of its bytes, bf16 "
                               "products, final tree", "limit": limit,
                     "worst": bf16["device_ratio"], "met": bf16["device_ratio"] <= limit,
                     "where": f"the kernel alone, bf16, worst of 2 shapes: "
                              f"{bf16['shape'].replace('_', ' ')}"})
    # both rules as they ship now, beside their peers on the card lent (the last section)
    shipped = standing(STANDING_H100)
    suffix = f"as shipped, on an {shipped.rows[0]['gpu']}"
    rows += [*_standing_rows(shipped, suffix), _clone_row(shipped, suffix)]
    # the one product by the shared rate: the delta rule and the gla kernel alone on the
    # model's rates, on the card lent (the last section)
    model = standing(STANDING_MODEL_RATES)
    suffix = f"the model's rates, on an {model.rows[0]['gpu']}"
    rows += [*_standing_rows(model, suffix), _clone_row(model, suffix)]
    gla_model = gla_model_rates()
    for r in gla_model.rows:
        rows.append({"target": f"gla: forward / a copy of its bytes, the kernel alone, {suffix}",
                     "limit": r["limit"], "worst": r["fwd_vs_copy"],
                     "met": r["fwd_vs_copy"] <= r["limit"],
                     "where": f"{r['shape']} {r['dtype']} ({r['products']} products)"})
    # the delta rule again on the model's rates, the walks over groups set anew (last section)
    grouped = standing(STANDING_GROUPS)
    suffix = f"the walks over groups set anew, on an {grouped.rows[0]['gpu']}"
    rows += [*_standing_rows(grouped, suffix), _clone_row(grouped, suffix)]
    # and with the walks over groups forming the outputs, on an H100 and an H200, then on
    # the H200 with those walks at 2 warps (the last section)
    fused = [standing(runs) for runs in (STANDING_WALK_OUTPUTS, STANDING_WALK_OUTPUTS_H200,
                                         STANDING_WALK_WARPS)]
    for table, words in zip(fused, ("the walks forming the outputs",) * 2
                            + ("the walks forming the outputs at 2 warps",), strict=True):
        suffix = f"{words}, on an {table.rows[0]['gpu']}"
        rows += [*_standing_rows(table, suffix), _clone_row(table, suffix)]
    table = TextTable(("target", "limit", "measured", "verdict", "where"),
                      [(r["target"], f"{r['limit']:g}x", f"{r['worst']:.2f}x",
                        "met" if r["met"] else "missed", r["where"]) for r in rows],
                      align="lrrll")
    caption = "\n".join([gla.caption, kernel_only().caption,
                         run_caption(load_result(kernel_forward.LATEST_RUN)),
                         run_caption(load_result(kernel_forward.DISPATCH_RUN)),
                         *(run_caption(r) for r in reports), run_caption(auto_run),
                         *(run_caption(load_result(r)) for r in kernel_forward.DELTA_CHAIN_RUNS),
                         kernel_forward.pairs_table().caption, reach.caption, now.caption,
                         shipped.caption, both.caption, *(h.caption for h in halves),
                         model.caption, gla_model.caption, grouped.caption,
                         *(table.caption for table in fused)])
    return CaptionedTable(table, caption, rows)


# --------------------------------------------------------------------------------------
# Where the targets stand: both rules beside their peers on one tree
# --------------------------------------------------------------------------------------
# two runs on one H200 of the tree as it stands (kernels as in commit 046002b), each rule's
# call as the GDN mixer makes it (no value check, no host sync) beside its fla peer at both
# benchmark shapes and dtypes: the gla rule against chunk_gla (benchmarks/gdn.py), the
# delta rule against chunk_kda (benchmarks/gated_delta.py)
GLA_RECORD_RUN = "gla_record_h200_2026-12-04.json"
DELTA_RECORD_RUN = "gated_delta_defaults_h200_2026-12-04.json"
# a third run on one H200, of tree ccd2684 (the same gla kernels, with the products' grade
# now chosen once at the forward and the backward's layout check): the gla kernel alone (its
# autograd Function, no dispatcher) in fp32 at both benchmark shapes, with each precision
# beside fla's chunk_gla, so that the price of fp32-grade products is read within one run
GLA_TF32_RUN = "gla_record_tf32_h200_2026-12-04.json"
# a fourth run, of tree 0f28d1c, the same command: the fp32-grade default's backward now
# multiplies six bf16 products instead of three TF32 ones (CONFIGS["fp32_products"]); the
# summary's rows of the gla kernel alone read it
GLA_BF16X6_RUN = "gla_record_bf16x6_h200_2026-12-04.json"
# our backend in that run -> (its key in tf32_beside_peer's rows, the products it multiplies)
TF32_PRECISIONS = {"chunk_triton_kernel": ("default", "fp32-grade, the default"),
                   "chunk_triton_kernel_tf32": ("tf32", "TF32, the opt-in")}
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
    from hymo_book.kernel_results import load_reports

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


def _standing_rows(table: CaptionedTable, suffix: str) -> list[dict]:
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


def _clone_row(table: CaptionedTable, suffix: str) -> dict:
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


def _error_words(error: float) -> str:
    """A relative error in words: below ERROR_FLOOR as "< 1e-06" (fp32-grade), else its
    value."""
    return f"< {ERROR_FLOOR:.0e}" if error < ERROR_FLOOR else f"{error:.1e}"


def tf32_beside_peer(run: str = GLA_TF32_RUN) -> CaptionedTable:
    """The gla kernel alone in fp32 beside fla's chunk_gla, in one run (``GLA_TF32_RUN``, or
    the later ``GLA_BF16X6_RUN`` of the same command), with each of its precisions
    (``TF32_PRECISIONS``): a row per shape, holding under "default" and "tf32" the forward
    and forward + backward times, forward + backward over chunk_gla's against the gla limit
    of ``STANDING`` (met or not), peak memory over chunk_gla's and the output's relative RMS
    error against the loop; chunk_gla's own under "fla"."""
    from hymo_book.kernel_results import load_reports

    report = load_reports([run])[0]
    limit = STANDING["gla"][4]
    rows = []
    for e in report["shapes"].values():
        found, peer = e["results"], e["results"]["fla_chunk"]
        row = {"shape": f"B{e['B']} T{e['T']} H{e['H']}", "dtype": e["dtype"], "limit": limit,
               "fla": {**peer, "error": e["checks"]["fla_chunk"]["o"]}}
        for backend, (key, _) in TF32_PRECISIONS.items():
            ratio = found[backend]["fwdbwd_ms"] / peer["fwdbwd_ms"]
            row[key] = {**found[backend], "fwdbwd_ratio": ratio, "met": ratio <= limit,
                        "peak_ratio": found[backend]["peak_mib"] / peer["peak_mib"],
                        "error": e["checks"][backend]["o"]}
        rows.append(row)

    def three(r, key, spec):
        return " / ".join(f"{r[k][key]:{spec}}" for k in ("default", "tf32", "fla"))

    def ratio(r, key):
        return (f"{r[key]['fwdbwd_ratio']:.2f}x "
                f"{'met' if r[key]['met'] else 'missed'}")

    table = TextTable(
        ("shape", "fwd ms", "fwd+bwd ms", f"fwd+bwd / fla, fp32-grade ({limit:g}x)",
         f"fwd+bwd / fla, TF32 ({limit:g}x)", "peak / fla", "error of o"),
        [(r["shape"], three(r, "fwd_ms", ".3f"), three(r, "fwdbwd_ms", ".2f"),
          ratio(r, "default"), ratio(r, "tf32"),
          " / ".join(f"{r[k]['peak_ratio']:.2f}x" for k in ("default", "tf32")),
          " / ".join(_error_words(r[k]["error"]) for k in ("default", "tf32", "fla")))
         for r in rows],
        title="The gla kernel alone in fp32 beside fla's chunk_gla, one run: times and errors "
              "as fp32-grade (the default) / TF32 (the opt-in) / chunk_gla (TF32); the error "
              "is o's relative RMS against the fp32 loop",
        align="lrrrrrr")
    return CaptionedTable(table, run_caption(report), rows)


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
          "(the reference)" if r["way"] == "tf32x3" else _error_words(r["difference"]))
         for r in rows],
        title="fp32 inputs, each kernel alone: its fp32-grade products made each way, in the "
              "forward alone or in both directions",
        align="llllrrl")
    captions.append("Both runs: tree 411c70b with the \"bf16x6\" branch of chunk_states._dot as "
                    "landed in 0f28d1c; .gpu/prec.py (not kept) set the products of each row")
    return CaptionedTable(table, "\n".join(captions), rows)



# The package's own host time per forward, measured on a CPU with the kernels faked
# (benchmarks/host_profile.py --own), at the start and at the end of the second session of
# 2026-12-05; and one empty kernel's launch through Triton and through
# hymo_mini.launching.Direct (deleted since) with a stand-in driver (--launch).
BENCHMARKS_DIR = RESULTS_DIR.parents[1] / "benchmarks"
HOST_OWN_RUNS = {"before": "host_own_cpu_before_2026-12-05b.json",
                 "after": "host_own_cpu_after_2026-12-05b.json"}
HOST_LAUNCH_RUNS = ("host_launch_cpu_2026-12-05.json",  # this machine's Triton, 3.9
                    "host_launch_cpu_triton36_2026-12-05.json")  # the H200's, 3.6
_CALLS = {"kernel": "its autograd Function alone", "mixer": "as the mixer calls it"}


def host_own_table() -> CaptionedTable:
    """The package's own host microseconds per forward, before and after (the runs of
    ``HOST_OWN_RUNS``): a row per (rule, dtype, call) with each run's median of five rounds,
    and the two runs' trees in the caption."""
    runs = {k: load_result(BENCHMARKS_DIR / name) for k, name in HOST_OWN_RUNS.items()}
    rows = []
    for key, after in runs["after"].items():
        if not (isinstance(after, dict) and "own_us_per_call" in after):
            continue
        rule, dtype, call = key.split("_")
        rows.append({"rule": rule, "dtype": dtype, "call": call,
                     "before_us": runs["before"][key]["own_us_per_call"],
                     "after_us": after["own_us_per_call"]})
    table = TextTable(
        ("rule", "dtype", "call", "before, µs", "after, µs"),
        [(r["rule"], r["dtype"], _CALLS[r["call"]], f"{r['before_us']:.1f}",
          f"{r['after_us']:.1f}") for r in rows],
        title="The package's own host time per forward, its kernels faked (a CPU, small "
              "tensors, the GPU's settings; the median of five rounds of 2,000 calls)",
        align="lllrr")
    trees = ", ".join(f"{k} {run['environment']['git_commit'][:7]}" for k, run in runs.items())
    caption = "\n".join([*(run_caption(run) for run in runs.values()), f"Trees: {trees}"])
    return CaptionedTable(table, caption, rows)


def host_launch() -> list[dict]:
    """The launch harness's runs (``HOST_LAUNCH_RUNS``), one per Triton version: each with
    ``jit_us_per_launch``, ``direct_us_per_launch``, ``same_launcher_arguments``, its
    ``triton`` version and its caption."""
    runs = [load_result(BENCHMARKS_DIR / name) for name in HOST_LAUNCH_RUNS]
    return [{**run, "triton": run["environment"]["hardware"]["triton"],
             "caption": run_caption(run)} for run in runs]


HOST_FORWARD_BEFORE = "host_forward_cpu_834c863_2026-12-05.json"  # the session's start


def host_forward_table() -> CaptionedTable:
    """The host's time per forward as the mixer calls it up to the CUDA launcher (the
    package's work and Triton's launch path, a stand-in driver, this CPU): at the start of
    the second session of 2026-12-05 (``HOST_FORWARD_BEFORE``, Triton's path) and at its
    end under both Triton versions (``HOST_LAUNCH_RUNS``), through Triton and directly. A
    row per (rule, dtype)."""
    before = load_result(BENCHMARKS_DIR / HOST_FORWARD_BEFORE)
    runs = [load_result(BENCHMARKS_DIR / name) for name in HOST_LAUNCH_RUNS]
    versions = [run["environment"]["hardware"]["triton"] for run in runs]
    rows = []
    for key, start in before["forwards"].items():
        rule, dtype, _ = key.split("_")
        row = {"rule": rule, "dtype": dtype, "before_us": start["triton_us"]}
        for version, run in zip(versions, runs, strict=True):
            row[version] = {"triton_us": run["forwards"][key]["triton_us"],
                            "direct_us": run["forwards"][key]["direct_us"]}
        rows.append(row)
    short = [v.rsplit(".0", 1)[0] if v.endswith(".0") else v for v in versions]
    head = ("rule", "dtype", "start",
            *(f"{how} ({v})" for v in short for how in ("via Triton", "direct")))
    table = TextTable(
        head,
        [(r["rule"], r["dtype"], f"{r['before_us']:.1f}",
          *(f"{r[v][k]:.1f}" for v in versions for k in ("triton_us", "direct_us")))
         for r in rows],
        title="µs of the host's work per forward as the mixer calls it, up to the CUDA "
              "launcher (the package's and Triton's): at the session's start (its library, "
              f"Triton {before['environment']['hardware']['triton']}) and now, launched "
              "through Triton's JITFunction.run or directly, under each Triton version; a "
              "CPU, small tensors, the real kernels, a stand-in driver",
        align="ll" + "r" * (len(head) - 2))
    caption = "\n".join(run_caption(r) for r in (before, *runs))
    return CaptionedTable(table, caption, rows)


# --------------------------------------------------------------------------------------
# The delta forward as shipped, both floors, on the card that was lent
# --------------------------------------------------------------------------------------
# one run on an H100 (no H200 was lent, and no device time was left for fla's autotuning),
# third session of 2026-12-05, tree 46a9ae9 (redo on, Direct on, the fp32 forward's register
# caps): the delta rule's forward as the mixer calls it at both benchmark shapes and dtypes,
# with the copy of the bytes moved once and the clone of them (the floor) timed in
# the same run; fp32 also with the TF32 opt-in
DELTA_FORWARDS_RUN = "delta_forwards_h100_2026-12-05.json"
# the same card, tree 89644a8: the one-launch forward's changes alternated with the default
# (keep only (I + M)^-1 between the two steps; stretches of 16 and of 4 chunks), bf16
DELTA_STRETCH_RUNS = ("delta_stretch_b4t4096_h100_2026-12-05.json",
                      "delta_stretch_b1t16384_h100_2026-12-05.json")
# and the fp32 forward with its in-chunk kernels capped at 128 registers, alternated:
# every kernel of the forward (walk included), then wy_fwd and output alone
DELTA_CAP_RUNS = {"all three": ("delta_cap_b4t4096_h100_2026-12-05.json",
                                "delta_cap_b1t16384_h100_2026-12-05.json"),
                  "wy_fwd and output": ("delta_cap2_b4t4096_h100_2026-12-05.json",
                                        "delta_cap2_b1t16384_h100_2026-12-05.json")}
_DELTA_BACKENDS = {"chunk_triton": "as the mixer calls it",
                   "chunk_triton_kernel_tf32": "TF32 opt-in, the kernel alone"}


def delta_forwards() -> CaptionedTable:
    """The delta forward of ``DELTA_FORWARDS_RUN`` against both floors: a row per (shape,
    dtype, backend) with its time, the copy of the bytes moved once and the clone of them
    (each measured in the run), the two ratios and their verdicts against the 4x limit,
    and the run's GPU."""
    run = load_result(DELTA_FORWARDS_RUN, need=("peers",))
    limit, gpu = DELTA_TARGETS["fwd_over_floor"], run["environment"]["gpu"]
    rows = []
    for e in run["peers"].values():
        for backend, words in _DELTA_BACKENDS.items():
            if backend not in e["results"]:
                continue
            ms = e["results"][backend]["fwd_ms"]
            rows.append({"shape": f"B{e['B']} T{e['T']} H{e['H']}", "dtype": e["dtype"],
                         "backend": backend, "how": words, "fwd_ms": ms,
                         "copy_ms": e["copy_floor_ms"], "clone_ms": e["clone_floor_ms"],
                         "over_copy": ms / e["copy_floor_ms"],
                         "over_clone": ms / e["clone_floor_ms"], "limit": limit,
                         "gpu": gpu})
    for r in rows:
        r["met"] = {"copy": r["over_copy"] <= limit, "clone": r["over_clone"] <= limit}

    def verdict(r, key):
        return f"{r['over_' + key]:.2f}x {'met' if r['met'][key] else 'missed'}"

    table = TextTable(
        ("shape", "dtype", "call", "fwd ms", "copy once / clone ms",
         f"fwd / copy once ({limit:g}x)", f"fwd / clone ({limit:g}x)"),
        [(r["shape"], r["dtype"], r["how"], f"{r['fwd_ms']:.3f}",
          f"{r['copy_ms']:.3f} / {r['clone_ms']:.3f}", verdict(r, "copy"),
          verdict(r, "clone")) for r in rows],
        title="The delta forward against both floors, one run: the bytes it must move "
              "once (read the inputs, write o), and a clone of them (each read and written, "
              "the floor the issue quotes)",
        align="lllrrrr")
    return CaptionedTable(table, run_caption(run), rows)


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
# alternated four times in one process (benchmarks/tree_ab.py's first form;
# benchmarks/inverse_level0_ab_h100_2026-12-05.log)
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
    return CaptionedTable(table, _ab_caption(INVERSE_LEVEL0_RUN, run,
                                             "benchmarks/tree_ab.py (its first form)"), rows)


def _ab_caption(name: str, run: dict, command: str) -> str:
    """The caption of a ``benchmarks/tree_ab.py`` run: the card, versions, both trees and
    the command."""
    return (f"{name}: {run['gpu']}, torch {run['torch']}, Triton {run['triton']}; before: "
            f"{run['commit_before']}, after: {run['commit_after'][:7]}\n  {command}")


# --------------------------------------------------------------------------------------
# Which chunks took one product in the runs: the benchmarks' inputs against the kernels' rule
# --------------------------------------------------------------------------------------
def benchmark_gates(B: int = 4, T: int = 4096, H: int = 40, S: int = 32, seed: int = 0):
    """The gates and rates of the benchmarks' inputs at one shape, by their recipes (the draws
    differ, the distributions do not): g = sigmoid(N(0, 1)) throughout; ``"gdn.py"``'s A as
    the GDN block initialises it (head h decays at rate h + 1 on every key; ``--rates
    model``), ``"gated_delta.py"``'s A = -exp(A_log), A_log uniform in (log 0.05, 0) per
    (head, key) (``--rates weak``), and ``"spread"``, either benchmark's ``--rates spread``:
    the model's rates times e^u, u uniform in (-1, 1) per (head, key).
    {name: (g (B, T, H), A (H, S))}."""
    gen = torch.Generator().manual_seed(seed)
    g = torch.sigmoid(torch.randn(B, T, H, generator=gen))
    model = -torch.arange(1, H + 1, dtype=torch.float32)[:, None].repeat(1, S)
    weak = -torch.empty(H, S).uniform_(math.log(0.05), 0.0, generator=gen).exp()
    spread = model * torch.empty(H, S).uniform_(-1.0, 1.0, generator=gen).exp()
    return {"gdn.py": (g, model), "gated_delta.py": (g, weak), "spread": (g, spread)}


# the kernels' test for the one product, by the rates' spread (since tree 6fe9877) or, as
# every run before it was made, by the fastest rate (the rates against a rate of 0)
SHARE_RULES = ("spread", "fastest")
# how the runs' forwards cut a sequence (the library on a GPU still cuts it so): the gla
# kernel's chunks of 128 steps in blocks of 16 (CONFIGS of the trees from bf72893 on); the
# delta rule's chunks and its one launch's stretches, as its runs record them
SHARE_GLA_CHUNK, SHARE_GLA_BLOCK = 128, 16
SHARE_DELTA_RUN = kernel_forward.PAIRS_RUNS["delta"][0]


def one_product_shares(inputs: dict | None = None, rule: str = "spread") -> list[dict]:
    """For each benchmark's inputs (``benchmark_gates``), the share of the work each forward
    takes by one product (``hymo_mini.ops.one_product_chunks``), cut as the runs cut it: the
    gla forward per chunk of ``SHARE_GLA_CHUNK`` steps; the delta rule's bf16 forward (one
    launch) per stretch of chunks (``configs_16bit`` of ``SHARE_DELTA_RUN``), only up to a
    sequence's first stretch that does not fit; its fp32 forward (in passes) per chunk.
    ``rule``: "spread", the kernels' test now; "fastest", the test before tree 6fe9877, the
    largest exponent of the whole decay, which is the spread of the rates with a rate of 0
    among them (a column of zeros appended to A)."""
    from hymo_mini.choices import one_of
    from hymo_mini.ops import one_product_chunks

    one_of(rule, "rule", SHARE_RULES)
    run = load_result(SHARE_DELTA_RUN, need=("configs", "configs_16bit"))
    BT = run["configs"]["chunk"]
    ways = {"gla": (SHARE_GLA_CHUNK, SHARE_GLA_BLOCK, False),
            "delta, bf16 (one launch)": (run["configs_16bit"]["chain"]["chunks"] * BT, BT, True),
            "delta, fp32 (passes)": (BT, BT, False)}
    rows = []
    for name, (g, A) in (inputs or benchmark_gates()).items():
        if rule == "fastest":
            A = torch.cat([A, torch.zeros_like(A[:, :1])], dim=-1)
        for forward, (chunk, block, prefix) in ways.items():
            fits = one_product_chunks(g, A, chunk, block)  # (B, H, K)
            if prefix:  # a sequence takes the product up to its first stretch that does not
                fits = fits.int().cumprod(-1).bool()
            rows.append({"inputs": name, "forward": forward, "chunk": chunk,
                         "share": fits.float().mean().item()})
    return rows


# --------------------------------------------------------------------------------------
# One product at any decay for a head whose keys share one rate (trees 6fe9877, 7c29b5d)
# --------------------------------------------------------------------------------------
# one H200, sixth session of 2026-12-05: both rules' forwards as the GDN mixer calls them,
# the tree before the change (5a0cdd8, its package renamed hymo_old) and after it (7c29b5d),
# alternated three times a case in one process, on the model's rates and on the weak ones
# (benchmarks/tree_ab.py; benchmarks/one_rate_ab_h200_2026-12-05.log). An earlier call on an
# H100 timed the change's first form, 6fe9877, the same way and on the spread rates too
# (one_rate_ab_h100_2026-12-05.json; GATED_DELTA_NOTES.md).
SHARED_RATE_AB_RUN = "one_rate_ab_h200_2026-12-05.json"
# the two trees' outputs agree when their relative difference (Frobenius) is below this
SHARED_RATE_AGREE = {"bfloat16": 1e-2, "float32": 1e-5}
# the same session and card: the delta rule on the model's rates beside chunk_kda, one run a
# shape (gated_delta.py --rates model), tree 7c29b5d
STANDING_MODEL_RATES = {
    "delta": (("gated_delta_peers_model_b4t4096_h200_2026-12-05.json",
               "gated_delta_peers_model_b1t16384_h200_2026-12-05.json"),
              "chunk_triton", "fla_chunk_kda", 4.0, 0.8)}
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
    return CaptionedTable(table, _ab_caption(SHARED_RATE_AB_RUN, run, run["command"]), rows)


def gla_model_rates() -> CaptionedTable:
    """The gla kernel alone on the model's rates beside chunk_gla (``GLA_MODEL_RUNS``): a row
    per run with the forward, forward + backward and peak memory against the peer's, and the
    forward against the bytes it must move once at the run's copy rate (limit 3x)."""
    from hymo_book.kernel_results import load_reports

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


# --------------------------------------------------------------------------------------
# The delta rule's walks over groups of chunks (2026-12-05, sixth session)

# benchmarks/gated_delta_profile.py --delta-forward-changes, fp32 (and bf16 for its forward +
# backward), the first change of each run ({}) the settings in use when it ran: on an H100,
# tree 69f6f5c (the group kernels' columns as blocks of [M | B], the old settings in use),
# then on an H200, tree c552f2f (the new settings in use)
GROUP_SETTINGS_RUNS = ("delta_group_split_b1t16384_h100_2026-12-05.json",
                       "delta_group_settings_b1t16384_h100_2026-12-05.json",
                       "delta_state_split_b4t4096_h100_2026-12-05.json",
                       "delta_group_settings_b4t4096_h100_2026-12-05.json",
                       "delta_group_settings2_b1t16384_h200_2026-12-05.json")
# the delta rule on the model's rates beside chunk_kda with those settings in use, both
# shapes in one run (gated_delta.py --rates model), tree c552f2f
STANDING_GROUPS = {
    "delta": (("gated_delta_peers_groups_h200_2026-12-05.json",), "chunk_triton",
              "fla_chunk_kda", 4.0, 0.8)}
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


def group_settings(runs: tuple = GROUP_SETTINGS_RUNS) -> CaptionedTable:
    """Each change of the group runs against the first of its run, fp32: the forward per
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

# gated_delta_profile.py --delta-forward-changes at B1 T16384 H40 in fp32 on an H100: tree
# 2e211fe (the walks forming the outputs an opt-in) beside the other candidates, then tree
# 3d8848e (the walks forming the outputs by default) at settings around it
WALK_OUTPUT_RUNS = ("delta_walk_outputs_b1t16384_h100_2026-12-05.json",
                    "delta_walk_settings_b1t16384_h100_2026-12-05.json")
# the first call's bf16 forward with and without the change ({} first and last)
WALK_OUTPUT_HALF_RUN = "delta_walk_outputs_bf16_b1t16384_h100_2026-12-05.json"
# the delta rule on the model's rates beside chunk_kda, tree 3d8848e (the walks over groups
# at 4 warps), both shapes in one run (gated_delta.py --rates model), on an H100 and then on
# an H200
STANDING_WALK_OUTPUTS = {
    "delta": (("gated_delta_peers_walk_outputs_h100_2026-12-05.json",), "chunk_triton",
              "fla_chunk_kda", 4.0, 0.8)}
STANDING_WALK_OUTPUTS_H200 = {
    "delta": (("gated_delta_peers_walk_outputs_h200_2026-12-05.json",), "chunk_triton",
              "fla_chunk_kda", 4.0, 0.8)}
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
STANDING_WALK_WARPS = {
    "delta": (("gated_delta_peers_walk2_b1t16384_h200_2026-12-05.json",), "chunk_triton",
              "fla_chunk_kda", 4.0, 0.8)}


def long_fp32(report: dict) -> dict:
    """The entry of a gated_delta.py peers run at one sequence in fp32."""
    return next(e for e in report["peers"].values() if e["B"] == 1 and e["dtype"] == "float32")


def pytest_tally(log: str) -> tuple[int, bool]:
    """(tests passed, whether any failed or errored) of a pytest log in benchmarks/, by
    name: the "N passed" of every summary line added up; a failure counted in a summary
    line or marked F / E in a progress line."""
    text = (BENCHMARKS_DIR / log).read_text()
    passed = sum(int(n) for n in re.findall(r"(\d+) passed", text))
    return passed, bool(re.search(r"\d+ (failed|error)|^[.sx]*[FE]", text, re.M))


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
