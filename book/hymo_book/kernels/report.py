"""Chapter 21, the kernel report: what the kernels are now (read from the library's own
docstrings and settings), the launch arithmetic against the measured loop, and every target set
for the chunked kernels with its verdict, run by run (the runs' tables are in the other modules
of :mod:`hymo_book.kernels`). :func:`launch_arithmetic` is the one place the book computes the
eager loop's launches and the kernel's speed-up over it; chapters 20 and 21 both read it.
Nothing here measures time."""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from hymo_book.kernels import forward as kernel_forward
from hymo_book.kernels import settings as kernel_settings
from hymo_book.kernels.arithmetic import document_launches, launches_per_step
from hymo_book.kernels.one_product import gla_model_rates
from hymo_book.kernels.runs import DELTA_AUTO_PEERS, delta_entries
from hymo_book.kernels.standing import (
    GLA_BF16X6_RUN,
    STANDING_GROUPS,
    STANDING_H100,
    STANDING_MODEL_RATES,
    STANDING_WALK_OUTPUTS,
    STANDING_WALK_OUTPUTS_H200,
    STANDING_WALK_WARPS,
    clone_row,
    standing,
    standing_rows,
    tf32_beside_peer,
)
from hymo_book.kernels.targets import DELTA_TARGETS, TARGETS, chunk_targets, kernel_only
from hymo_book.results import CaptionedTable, load_result, run_caption
from hymo_mini.analysis.tables import TextTable

__all__ = ["OPS_FOLDERS", "kernel_files", "recipe", "on_gpu", "LAUNCH_US", "RECURRENT_RUN",
           "LaunchArithmetic", "launch_arithmetic", "targets_summary"]

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
def _row(target: str, limit: float, worst: float, where: str, met: bool | None = None) -> dict:
    """One row of the targets summary; ``met`` is ``worst <= limit`` unless given."""
    return {"target": target, "limit": limit, "worst": worst,
            "met": worst <= limit if met is None else met, "where": where}


def _gla_record_rows(gla) -> list[dict]:
    """The gla kernel's three targets on the benchmark of record, its forward alone on the
    kernel-only run and at the chosen one-launch setting per dtype, and its forward as the
    GDN mixer calls it."""
    names = {"fwdbwd_vs_peer": "gla: forward + backward / fla chunk_gla",
             "peak_vs_peer": "gla: peak memory / fla chunk_gla",
             "fwd_vs_copy": "gla: forward / a copy of its bytes"}
    rows = [_row(names[k], limit, worst, "benchmark of record, every shape (TF32 products)",
                 met) for k, (worst, limit, met) in gla.verdicts.items()]
    limit = TARGETS["fwd_vs_copy"]
    alone = kernel_only().rows[0]
    ratio = alone["results"]["chunk_triton_kernel"]["fwd_ms"] / alone["copy_ms"]
    rows.append(_row("gla: forward / a copy of its bytes, the kernel alone", limit, ratio,
                     f"kernel-only run, {alone['shape']} {alone['dtype']}"))
    latest = kernel_forward.latest_forward()  # the forward alone, the chosen setting
    for key, words in (("float32_tf32", "fp32 (TF32 products)"), ("bfloat16", "bf16"),
                       ("float32", "fp32 (fp32-grade products, the default)")):
        shape, worst = max(((sh, r["ratio"]) for (sh, k), r in latest.items() if k == key),
                           key=lambda x: x[1])
        rows.append(_row("gla: forward / a copy of its bytes, the kernel alone, latest", limit,
                         worst, f"{words}, worst of 2 shapes: {shape.replace('_', ' ')}"))
    mixer = kernel_forward.dispatch_table().rows  # as the GDN mixer calls it, no check
    worst = max(mixer, key=lambda r: r["unchecked_vs_copy"])
    rows.append(_row("gla: forward / a copy of its bytes, as the GDN mixer calls it", limit,
                     worst["unchecked_vs_copy"],
                     f"{worst['shape']} {worst['dtype']}, worst of {len(mixer)}"))
    return rows


_DELTA_NAMES = (("fwdbwd_over_kda", "delta: forward + backward / fla chunk_kda"),
                ("peak_over_kda", "delta: peak memory / fla chunk_kda"),
                ("fwd_over_floor", "delta: forward / the copy floor"))


def _worst_of(cases: dict[str, dict], suffix: str = "") -> list[dict]:
    """The delta kernel's three targets, each at its worst over ``cases`` (case -> values)."""
    rows = []
    for key, label in _DELTA_NAMES:
        timed = {case: values[key] for case, values in cases.items() if key in values}
        where = max(timed, key=timed.get)
        rows.append(_row(label + suffix, DELTA_TARGETS[key], timed[where],
                         f"{where.replace('_', ' ')}, worst of {len(timed)} timed"))
    return rows


def _delta_peer_rows(auto_run: dict) -> list[dict]:
    """The delta kernel's targets beside chunk_kda (default products), with the pairs "auto"
    (``auto_run``), and its forward alone per dtype at the setting in use."""
    _, picked = delta_entries()
    rows = _worst_of({key: entry["targets"]["chunk_triton"] for key, (_, entry) in picked.items()
                      if "fla_chunk_kda" in entry["results"]})
    rows += _worst_of({k: e.get("targets", {}).get("chunk_triton", {})
                       for k, e in auto_run["peers"].items()}, ', pairs "auto"')
    delta_now = kernel_forward.delta_latest_forward()  # alone, the setting in use per dtype
    for key, words in (("bfloat16", "bf16"), ("float32", "fp32 (fp32-grade products)")):
        (shape, _), r = max(((k, r) for k, r in delta_now.items() if k[1] == key),
                            key=lambda kr: kr[1]["ratio"])
        rows.append(_row("delta: forward / a copy of its bytes, the kernel alone, latest",
                         DELTA_TARGETS["fwd_over_floor"], r["ratio"],
                         f"{words}, {r['setting']}, worst of 2 shapes: "
                         f"{shape.replace('_', ' ')}"))
    return rows


def _forward_setting_rows(reach) -> list[dict]:
    """Both rules' forwards alone with the pairs "auto", per dtype, and the gla forward's
    device time at the reach adopted (``reach``, the settings table of its runs)."""
    rows = []
    for rule, limit in (("gla", TARGETS["fwd_vs_copy"]),
                        ("delta", DELTA_TARGETS["fwd_over_floor"])):
        auto = [r for r in kernel_forward.pairs_table().rows if r["rule"] == rule]
        for key, words in kernel_forward.DTYPES.items():
            timed = [r for r in auto if r["dtype"] == key]
            if timed:
                r = max(timed, key=lambda r: r["auto_ratio"])
                rows.append(_row(f"{rule}: forward / a copy of its bytes, pairs \"auto\"",
                                 limit, r["auto_ratio"], f"{words}, worst of {len(timed)} "
                                 f"shapes: {r['shape'].replace('_', ' ')}"))
    for key, r in kernel_settings.device_ratios(reach, kernel_settings.ADOPTED).items():
        rows.append(_row("gla: forward, device time / a copy of its bytes, reach 4",
                         TARGETS["fwd_vs_copy"], r["device_ratio"],
                         f"{kernel_forward.DTYPES[key]}, worst of 2 shapes: "
                         f"{r['shape'].replace('_', ' ')}"))
    return rows


def _half_rows(halves) -> list[dict]:
    """Each rule's forward with bf16 products (``halves``: the settings tables of the gla
    runs and of the delta runs)."""
    rows = []
    for (rule, change, limit), table in zip(
            (("gla", {"half_products": "bf16"}, TARGETS["fwd_vs_copy"]),
             ("delta", {}, DELTA_TARGETS["fwd_over_floor"])), halves, strict=True):
        bf16 = kernel_settings.device_ratios(table, change)["bfloat16"]
        rows.append(_row(f"{rule}: forward, device time / a copy of its bytes, bf16 "
                         "products, final tree", limit, bf16["device_ratio"],
                         "the kernel alone, bf16, worst of 2 shapes: "
                         f"{bf16['shape'].replace('_', ' ')}"))
    return rows


def _gla_precision_rows(both) -> list[dict]:
    """The gla kernel alone in fp32 beside chunk_gla, with each of its precisions."""
    rows = []
    for key, (words, products) in (("default", ("fp32-grade default",
                                                "our fp32-grade products, fla's TF32")),
                                   ("tf32", ("fp32 TF32 opt-in", "TF32 products, as fla's"))):
        worst = max(both.rows, key=lambda r: r[key]["fwdbwd_ratio"])
        rows.append(_row(f"gla: forward + backward / fla chunk_gla, {words}, final tree",
                         worst["limit"], worst[key]["fwdbwd_ratio"],
                         f"the kernel alone, {worst['shape']} {worst['dtype']} "
                         f"({products}), worst of {len(both.rows)}",
                         met=all(r[key]["met"] for r in both.rows)))
    return rows


def _later_rows(later: dict, gla_model) -> list[dict]:
    """The standing runs after the final tree's (``later``: words -> table), each's rows
    with the card; the gla kernel alone on the model's rates (``gla_model``) after the
    delta rule's run on them."""
    rows = []
    for words, table in later.items():
        suffix = f"{words.split(' (')[0]}, on an {table.rows[0]['gpu']}"
        rows += [*standing_rows(table, suffix), clone_row(table, suffix)]
        if words == "the model's rates":
            rows += [_row(f"gla: forward / a copy of its bytes, the kernel alone, {suffix}",
                          r["limit"], r["fwd_vs_copy"],
                          f"{r['shape']} {r['dtype']} ({r['products']} products)")
                     for r in gla_model.rows]
    return rows


def targets_summary() -> CaptionedTable:
    """Every target set for the package's chunked kernels, with the limit, the worst value
    measured and the verdict, run by run in the order they were made: the gla kernel on the
    benchmark of record and its forward alone (:func:`_gla_record_rows`), the delta kernel
    beside chunk_kda (:func:`_delta_peer_rows`), both forwards under the settings tried
    (:func:`_forward_setting_rows`), both rules as they stood on the final tree
    (:func:`hymo_book.kernels.standing.standing`), in each precision and with bf16
    products, and the later standing runs (:func:`_later_rows`)."""
    gla, reports = chunk_targets(), delta_entries()[0]
    auto_run = load_result(DELTA_AUTO_PEERS, need=("peers",))  # "auto" beside chunk_kda
    reach = kernel_settings.settings_table(kernel_settings.REACH_RUNS)
    halves = [kernel_settings.settings_table(kernel_settings.HALF_RUNS),
              kernel_settings.settings_table(kernel_settings.DELTA_HALF_RUNS)]
    now, both = standing(), tf32_beside_peer(GLA_BF16X6_RUN)
    later = {"as shipped": standing(STANDING_H100),
             "the model's rates": standing(STANDING_MODEL_RATES),
             "the walks over groups set anew": standing(STANDING_GROUPS),
             "the walks forming the outputs": standing(STANDING_WALK_OUTPUTS),
             "the walks forming the outputs (H200)": standing(STANDING_WALK_OUTPUTS_H200),
             "the walks forming the outputs at 2 warps": standing(STANDING_WALK_WARPS)}
    gla_model = gla_model_rates()
    rows = [*_gla_record_rows(gla), *_delta_peer_rows(auto_run), *_forward_setting_rows(reach),
            *standing_rows(now, "final tree"), clone_row(now, "final tree"),
            *_gla_precision_rows(both), *_half_rows(halves), *_later_rows(later, gla_model)]
    table = TextTable(("target", "limit", "measured", "verdict", "where"),
                      [(r["target"], f"{r['limit']:g}x", f"{r['worst']:.2f}x",
                        "met" if r["met"] else "missed", r["where"]) for r in rows],
                      align="lrrll")
    tables = list(later.values())
    caption = "\n".join([gla.caption, kernel_only().caption,
                         run_caption(load_result(kernel_forward.LATEST_RUN)),
                         run_caption(load_result(kernel_forward.DISPATCH_RUN)),
                         *(run_caption(r) for r in reports), run_caption(auto_run),
                         *(run_caption(load_result(r)) for r in kernel_forward.DELTA_CHAIN_RUNS),
                         kernel_forward.pairs_table().caption, reach.caption, now.caption,
                         tables[0].caption, both.caption, *(h.caption for h in halves),
                         tables[1].caption, gla_model.caption,
                         *(t.caption for t in tables[2:])])
    return CaptionedTable(table, caption, rows)
