"""Chapter 21: the host's share of a forward, measured on a CPU with the kernels faked.

:func:`host_own_table` is the package's own work per forward before and after it was cut;
:func:`host_launch` and :func:`host_forward_table` time one launch, and a whole forward up
to the CUDA launcher, through Triton and directly (a launcher the library has since
deleted).
"""

from __future__ import annotations

from hymo_book.results import CaptionedTable, load_result, run_caption
from hymo_mini.analysis.tables import TextTable

__all__ = ["HOST_OWN_RUNS", "HOST_LAUNCH_RUNS", "HOST_FORWARD_BEFORE", "host_own_table",
           "host_launch", "host_forward_table"]

# The package's own host time per forward, measured on a CPU with the kernels faked
# (benchmarks/host_profile.py --own), at the start and at the end of the second session of
# 2026-12-05; and one empty kernel's launch through Triton and through
# hymo_mini.launching.Direct (deleted since) with a stand-in driver (--launch).
HOST_OWN_RUNS = {"before": "host_own_cpu_before_2026-12-05b.json",
                 "after": "host_own_cpu_after_2026-12-05b.json"}
HOST_LAUNCH_RUNS = ("host_launch_cpu_2026-12-05.json",  # this machine's Triton, 3.9
                    "host_launch_cpu_triton36_2026-12-05.json")  # the H200's, 3.6
_CALLS = {"kernel": "its autograd Function alone", "mixer": "as the mixer calls it"}


def host_own_table() -> CaptionedTable:
    """The package's own host microseconds per forward, before and after (the runs of
    ``HOST_OWN_RUNS``): a row per (rule, dtype, call) with each run's median of five rounds,
    and the two runs' trees in the caption."""
    runs = {k: load_result(name) for k, name in HOST_OWN_RUNS.items()}
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
    runs = [load_result(name) for name in HOST_LAUNCH_RUNS]
    return [{**run, "triton": run["environment"]["hardware"]["triton"],
             "caption": run_caption(run)} for run in runs]


HOST_FORWARD_BEFORE = "host_forward_cpu_834c863_2026-12-05.json"  # the session's start


def host_forward_table() -> CaptionedTable:
    """The host's time per forward as the mixer calls it up to the CUDA launcher (the
    package's work and Triton's launch path, a stand-in driver, this CPU): at the start of
    the second session of 2026-12-05 (``HOST_FORWARD_BEFORE``, Triton's path) and at its
    end under both Triton versions (``HOST_LAUNCH_RUNS``), through Triton and directly. A
    row per (rule, dtype)."""
    before = load_result(HOST_FORWARD_BEFORE)
    runs = [load_result(name) for name in HOST_LAUNCH_RUNS]
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

