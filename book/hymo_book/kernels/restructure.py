"""The guard of the library's restructuring (chapter 21): the restructured kernels against the
tree before them, timed alternately in one process by ``benchmarks/tree_ab.py``.

A run's rows are keyed ``rule_rates_shape_dtype``; each holds, per tree ("before", "after"
and, with ``--peers``, "fla"), the forward and forward + backward times of every round (ms)
and the peak memory of one forward + backward. The limit: forward + backward within
:data:`LIMIT` times the tree before.
"""

from __future__ import annotations

import statistics

from hymo_book.prose import fmt
from hymo_book.results import CaptionedTable, load_result, run_caption
from hymo_mini.analysis.tables import TextTable

__all__ = ["LIMIT", "STEP_LIMIT", "case_name", "ratios", "guard_table", "settings_table",
           "step_table"]

LIMIT = 1.10  # forward + backward of the new tree over the tree before, at most
STEP_LIMIT = 0.95  # the new tree's training-step tokens/s over the tree before's, at least


def ratios(rows: dict) -> dict[str, dict]:
    """Per case: the median forward + backward (ms) of each tree, after / before, and the
    forward's after / before."""
    out = {}
    for key, row in rows.items():
        mid = {name: statistics.median(x["fwdbwd_ms"]) for name, x in row.items()}
        fwd = {name: statistics.median(x["fwd_ms"]) for name, x in row.items()}
        out[key] = {"before": mid["before"], "after": mid["after"],
                    "ratio": mid["after"] / mid["before"],
                    "forward_ratio": fwd["after"] / fwd["before"],
                    "fla": mid.get("fla")}
    return out


def case_name(key: str) -> str:
    """``gla_model_B4_T4096_H40_bfloat16`` -> ``gla, B4 T4096 H40, bfloat16``."""
    rule, _rates, rest = key.split("_", 2)
    shape, dtype = rest.rsplit("_", 1)
    return f"{rule}, {shape.replace('_', ' ')}, {dtype}"


def guard_table(run: str) -> CaptionedTable:
    """Forward + backward per case: the tree before, the new tree, their ratio against
    LIMIT, and the forward's ratio (reported, not a limit)."""
    report = load_result(run, need=("rows",))
    found = ratios(report["rows"])
    rows = [(case_name(k), fmt(r["before"], 3), fmt(r["after"], 3), f"{r['ratio']:.2f}",
             "yes" if r["ratio"] <= LIMIT else "no", f"{r['forward_ratio']:.2f}")
            for k, r in found.items()]
    table = TextTable(("case", "before (ms)", "after (ms)", "after / before",
                       f"within {LIMIT:.2f}x", "forward after / before"), rows,
                      title="forward + backward, medians of alternated rounds")
    return CaptionedTable(table, run_caption(report, width=96),
                          [dict(case=k, **r) for k, r in found.items()])


def settings_table(run: str) -> CaptionedTable:
    """The same guard for each variant of a run of several (``variants``: label -> a
    tree_ab run's command, settings and rows)."""
    report = load_result(run, need=("variants",))
    rows, values = [], []
    for label, variant in report["variants"].items():
        for key, r in ratios(variant["rows"]).items():
            rows.append((label, case_name(key), f"{r['ratio']:.2f}"))
            values.append(dict(variant=label, case=key, **r))
    table = TextTable(("variant", "case", "after / before"), rows, align="llr",
                      title="forward + backward, medians of alternated rounds")
    return CaptionedTable(table, run_caption(report, width=96), values)


def step_table(run: str) -> CaptionedTable:
    """One training step of hymo_750m by each tree (``before``, ``after``: train_step.py
    reports), the after / before ratio of tokens per second against STEP_LIMIT."""
    report = load_result(run, need=("before", "after"))
    found = {}
    for tree in ("before", "after"):
        (case,) = report[tree]["cases"].values()
        found[tree] = case
    rate = found["after"]["tokens_per_s"] / found["before"]["tokens_per_s"]
    rows = [(tree, report[f"commit_{tree}"], f"{c['tokens_per_s']:,}", f"{c['step_ms']:.1f}",
             f"{c['peak_GiB']:.2f}") for tree, c in found.items()]
    table = TextTable(("tree", "commit", "tokens/s", "step (ms)", "peak (GiB)"), rows,
                      title=f"hymo_750m, B{found['after']['B']} T{found['after']['T']}, the fast "
                            f"path: after / before {rate:.3f} (at least {STEP_LIMIT:.2f})")
    return CaptionedTable(table, run_caption(report, width=96),
                          [dict(tree=tree, **c) for tree, c in found.items()]
                          + [{"tree": "ratio", "tokens_per_s": rate}])
