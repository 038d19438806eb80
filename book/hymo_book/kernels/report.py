"""Chapter 21, the kernel report: what the kernels are now (read from the library's own
docstrings) and the launch arithmetic against the measured loop (the runs' tables are in the
other modules of :mod:`hymo_book.kernels`). :func:`launch_arithmetic` is the one place the
book computes the eager loop's launches and the kernel's speed-up over it; chapters 20 and 21
both read it. Nothing here measures time."""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from hymo_book.kernels.arithmetic import document_launches, launches_per_step
from hymo_book.results import CaptionedTable, load_result, run_caption
from hymo_mini.analysis.tables import TextTable

__all__ = ["OPS_FOLDERS", "kernel_files", "LAUNCH_US", "RECURRENT_RUN", "LaunchArithmetic",
           "launch_arithmetic"]

LAUNCH_US = 10.0  # section 6.1's cost of one kernel launch, "~10μs"
RECURRENT_RUN = "gdn_recurrent_h200_2026-11-30.json"  # the loop and the kernel, timed together


# --------------------------------------------------------------------------------------
# The kernels now: read from the library, not from a run
# --------------------------------------------------------------------------------------
# the shared floor first, then one folder per rule, as hymo_mini.ops lists them
OPS_FOLDERS = ("hymo_mini.ops.utils", "hymo_mini.ops.gla", "hymo_mini.ops.gated_delta")
# a file's line in a package's docstring: "    name.py   [its function or step  ]what it holds"
_FILE_LINE = re.compile(r"^ {4}(\w+\.py) {2,}(.+)$")


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
