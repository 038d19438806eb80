"""Chapter 21: what was tried on the chunked kernels, what won, and by how much, in one table.

The kernels were tuned over many GPU calls; each change was timed against the setting in use
in the same run. :data:`TRIED` lists the changes in the order they were tried, each with the
rule it touched, whether it stayed (``kept``; ``kept, since removed`` where a later change or
the library's restructuring took it out again; ``not kept``) and a function that reads the
ratio of its time to the time before it, one a shape and dtype, from its runs.
:func:`tried_table` tabulates them.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from hymo_book.kernels import delta_forward, runs, standing
from hymo_book.kernels import forward as kernel_forward
from hymo_book.kernels import settings as kernel_settings
from hymo_book.kernels.one_product import shared_rate_ab
from hymo_book.results import CaptionedTable, load_result
from hymo_mini.analysis.tables import TextTable

__all__ = ["Tried", "TRIED", "tried_table"]

DIRECT_RUN = "direct_ab_h100_2026-12-05.json"  # launching directly, alternated with Triton's
REDO_H100_RUNS = ("delta_redo_b4t4096_h100_2026-12-05.json",
                  "delta_redo_b1t16384_h100_2026-12-05.json")


@dataclass(frozen=True)
class Tried:
    """One change: what it was, the rule, whether it stayed, what its ratios time and
    the function that reads its ratios (tried / before)."""

    what: str
    rule: str
    outcome: str
    timed: str
    ratios: Callable[[], list[float]]


def _setting(runs_: dict, rule: str, label: str) -> list[float]:
    """A setting's forward device time over the setting in use, from a settings run."""
    cases = kernel_settings.comparisons(kernel_settings.settings_table(runs_))[(rule, label)]
    return [c["device_ms"] / c["base_ms"] for c in cases]


def _gla_one_launch() -> list[float]:
    """The gla forward in one launch over chunks of 128 against three launches over 64."""
    rows = kernel_forward.chain_table().rows
    base = {r["shape"]: r for r in rows if not r["change"]}
    tried = [r for r in rows if r["change"] == {"forward": "chain", "chunk": 128}]
    return [r[d]["fwd_ms"] / base[r["shape"]][d]["fwd_ms"] for r in tried
            for d in ("bfloat16", "float32_tf32", "float32") if d in r]


def _delta_one_launch() -> list[float]:
    """The delta forward of bf16 inputs in one launch, stretches of 8, against its passes."""
    rows = kernel_forward.delta_chain_table().rows
    base = {r["shape"]: r for r in rows if not r["change"]}
    return [r["bfloat16"]["fwd_ms"] / base[r["shape"]]["bfloat16"]["fwd_ms"] for r in rows
            if r["change"].get("chain", {}).get("chunks") == 8]


def _pairs_auto() -> list[float]:
    """Both forwards with the pairs "auto" against the levels (device time where timed)."""
    rows = kernel_forward.pairs_table().rows
    return [(r["auto_device_ms"] / r["levels_device_ms"]) if r.get("levels_device_ms")
            else r["auto_ms"] / r["levels_ms"] for r in rows]


def _ring() -> list[float]:
    """The gla one-launch forward handing its state on by a tagged ring, against flags."""
    return [h["ring"]["device_ms"] / h["flags"]["device_ms"]
            for h in kernel_settings.handoffs().values()]


def _bf16x6_backward() -> list[float]:
    """The gla kernel's forward + backward with six bf16 products against three TF32."""
    rows = [r for r in standing.fp32_products_table().rows
            if r["directions"] == "both" and r["rule"] == "gla"]
    base = {r["shape"]: r["fwdbwd_ms"] for r in rows if r["way"] == "tf32x3"}
    return [r["fwdbwd_ms"] / base[r["shape"]] for r in rows if r["way"] == "bf16x6"]


def _changes(runs_, dtype: str) -> list[float]:
    """Every change of delta forward runs alternated with the setting in use."""
    found = delta_forward.forward_change_ratios(runs_, dtype)
    return [x for by_change in found.values() for xs in by_change.values() for x in xs]


def _direct() -> list[float]:
    """The host's time to issue a forward, launched directly against through Triton."""
    rows = load_result(DIRECT_RUN)["rows"].values()
    return [statistics.median(r["on_host_us"]) / statistics.median(r["off_host_us"])
            for r in rows]


def _one_rate(rates: str) -> list[float]:
    """Both forwards after the one product by the shared rate over before, on ``rates``."""
    return [r["ratio"] for r in shared_rate_ab().rows if r["rates"] == rates]


def _group_row(run: str, label: str) -> list[float]:
    """A group setting's forward over the setting in use, in one run."""
    rows = delta_forward.group_settings((run,)).rows
    return [r["fwd_ms"] / rows[0]["fwd_ms"] for r in rows if r["label"] == label]


def _groups_for_long() -> list[float]:
    """The delta state passes over groups of 64 chunks against one walk, at B = 1."""
    return [r["vs_walk"] for r in runs.delta_group_sweep_table().rows
            if r["B"] == 1 and r["chunks"] == 64]


_SHIPPED_GROUPS = ("groups of 32 chunks; group kernels 64 columns, 2 warps; walk: 32 columns, "
                   "4 warps, 3 stages")
_HALF = kernel_settings.DELTA_HALF_RUNS
TRIED = (
    Tried("the state passes over groups of chunks when few programs run", "delta", "kept",
          "forward + backward, one sequence", _groups_for_long),
    Tried("the forward in one launch, chunks of 128", "gla", "kept, since removed",
          "forward per call", _gla_one_launch),
    Tried("the forward of 16-bit inputs in one launch", "delta", "kept", "forward per call",
          _delta_one_launch),
    Tried("pairs by one product where the decay allows", "both", "kept",
          "forward (device time where timed)", _pairs_auto),
    Tried("the state handed on by a tagged ring", "gla", "not kept", "forward device time",
          _ring),
    Tried("reaching back past the chain (reach 4, two stages)", "gla", "kept, since removed",
          "forward device time", lambda: _setting(kernel_settings.REACH_RUNS, "gla",
                           "reach = 4; output_fwd: warps 1, stages 2")),
    Tried("bf16 products in the forward of 16-bit inputs", "gla", "kept", "forward device time",
          lambda: _setting(kernel_settings.HALF_RUNS, "gla", "bf16 products")),
    Tried("bf16 products in the forward of 16-bit inputs", "delta", "kept",
          "forward device time",
          lambda: [1 / x for x in _setting(_HALF, "delta", "tf32 products")]),
    Tried("attention blocks of 32 steps", "gla", "not kept", "forward device time",
          lambda: _setting(kernel_settings.BLOCK_RUNS, "gla", "block = 32")),
    Tried("six bf16 products for each fp32-grade product of the backward", "gla", "kept",
          "forward + backward", _bf16x6_backward),
    Tried("kernels launched directly, not through Triton's launcher", "both",
          "kept, since removed", "the host's time to issue a forward",
          _direct),
    Tried("W and Uv formed again where no backward follows (redo)", "delta",
          "kept, since removed", "forward device time",
          lambda: _setting({"delta": REDO_H100_RUNS}, "delta", "redo = True")),
    Tried("stretches of 4 or 16 chunks, or only the inverse kept between steps", "delta",
          "not kept", "forward per call",
          lambda: _changes(delta_forward.DELTA_STRETCH_RUNS, "bfloat16")),
    Tried("the fp32 WY and output kernels capped at 128 registers", "delta", "kept",
          "forward per call",
          lambda: _changes(delta_forward.DELTA_CAP_RUNS, "float32")),
    Tried("one product at any decay where a head's keys share one rate (the model's rates)",
          "both", "kept", "forward per call",
          lambda: _one_rate("model")),
    Tried("the same change, on weak rates that took one product already", "both", "kept",
          "forward per call", lambda: _one_rate("weak")),
    Tried("a chunk's inverse with one product fewer", "delta", "kept", "forward per call",
          lambda: [r["ratio"] for r in delta_forward.inverse_level0().rows]),
    Tried("the walks over groups set anew (groups of 32, [Φ | Ψ] in one program)", "delta",
          "kept", "forward per call, one sequence, fp32",
          lambda: _group_row(delta_forward.GROUP_SETTINGS_RUN, _SHIPPED_GROUPS)),
    Tried("the walks over groups forming the outputs", "delta", "kept, since removed",
          "forward per call, one sequence, fp32",
          lambda: [r["ratio"] for r in delta_forward.walk_outputs_ab().rows]),
    Tried("the walks over groups at 2 warps", "delta", "kept",
          "forward per call, one sequence, fp32",
          lambda: _group_row(delta_forward.WALK_WARPS_RUN, "walks over groups 2 warps")),
)


def _span(values: list[float]) -> str:
    low, high = f"{min(values):.2f}", f"{max(values):.2f}"
    return f"{low}x" if low == high else f"{low} to {high}x"


def tried_table(tried: tuple[Tried, ...] = TRIED) -> CaptionedTable:
    """One row a change: what, the rule, whether it stayed, its time over the time before it
    (the span over the shapes and dtypes its runs timed)."""
    rows = [{"what": t.what, "rule": t.rule, "outcome": t.outcome, "timed": t.timed,
             "ratios": t.ratios()} for t in tried]
    table = TextTable(("what was tried", "rule", "outcome", "after / before", "timed"),
                      [(r["what"], r["rule"], r["outcome"], _span(r["ratios"]), r["timed"])
                       for r in rows],
                      align="lllrl", title="What was tried on the chunked kernels, in order")
    caption = ("Each ratio divides times of one run (after / before; below 1 is faster); the "
               "span runs over the shapes and dtypes the run timed. The runs are listed at the "
               "end of the chapter.")
    return CaptionedTable(table, caption, [json.loads(json.dumps(r)) for r in rows])
