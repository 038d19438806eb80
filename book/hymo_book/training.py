"""Chapter 17's measured runs: the whole training step of hymo_750m on one GPU.

``TRAIN_STEP`` is the latest tree's complete run: the fast path launched kernel by kernel
and as one CUDA graph, every stack at both shapes, the reference path and the peers at two
sizes. ``PEER_RUNS`` are the runs of the same code that timed fla's model, for the spread of
its tokens/s from machine to machine; ``TRAIN_STEP_PREVIOUS`` is the complete run of the tree
before.

This module turns the GPU report of ``benchmarks/train_step.py`` into the chapter's tables
and its per-component figure. Every table carries the run's caption (file, hardware,
versions, date, command); nothing here measures. A case of that report is named
``<kind>_b<B>t<T>``: ``hybrid_fast``, ``hybrid_fast_graph``, ``hybrid_reference``,
``llama_sdpa``, ``gdn_fast``, ``mla_fast``, ``hybrid_fast_muon``, ``hybrid_fast_eager_gdn``,
``hybrid_fast_eager_mla``, ``fla_gla``, and ``llama_sdpa_matched``, ``fla_gla_matched`` (the
peers as deep as hymo_750m's active size).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from hymo_book.results import CaptionedTable, load_result, run_caption
from hymo_mini.analysis.tables import TextTable
from hymo_mini.config import ModelConfig

__all__ = ["TRAIN_STEP", "KINDS", "load_train_step", "case", "train_step_table", "targets_table",
           "step_profile_figure", "COMPONENTS", "TRAIN_STEP_PREVIOUS", "freed_bytes",
           "latest_targets_table", "busy_valid", "invalid_busy_cases", "PEER_RUNS",
           "peer_spread_table", "target_value"]

# the latest tree, complete: both forms of the fast path, the reference, every stack, the peers
TRAIN_STEP = "train_step_all_h200_2026-12-02g.json"
# the runs of the latest code that timed fla's GLA model, each on its own machine
PEER_RUNS = ("train_step_h200_2026-12-02e.json", "train_step_all_h200_2026-12-02f.json",
             TRAIN_STEP, "train_step_h200_2026-12-02h.json")
# every stack at both shapes and both peers, one run, the tree before the latest changes
TRAIN_STEP_PREVIOUS = "train_step_all_h200_2026-12-02b.json"

# case kind -> what the table calls it
KINDS = {
    "hybrid_fast": "hybrid 3:1, fast path",
    "hybrid_fast_graph": "hybrid 3:1, fast path as one CUDA graph",
    "hybrid_reference": "hybrid 3:1, reference path",
    "hybrid_fast_eager_gdn": "hybrid 3:1, fast path but eager GDN block",
    "hybrid_fast_eager_mla": "hybrid 3:1, fast path but eager MLA attention",
    "hybrid_fast_muon": "hybrid 3:1, fast path, Muon split",
    "llama_sdpa": "HF Llama (SDPA), 1024 × 24",
    "fla_gla": "fla GLA model, 1024 × 24",
    "llama_sdpa_matched": "HF Llama (SDPA), hymo's active size",
    "fla_gla_matched": "fla GLA model, hymo's active size",
    "gdn_fast": "all-GDN stack, fast path",
    "mla_fast": "all-MLA stack, fast path",
}

# the profile's components (benchmarks/step_profile.py labels), as the figure names them
COMPONENTS = {"gdn_other": "rest of the GDN blocks", "gdn_recurrence": "GDN recurrence",
              "loss": "head and losses", "moe": "MoE", "mla_attention": "MLA attention",
              "optimizer": "optimizer step", "forward": "other forward ops",
              "mtp": "MTP blocks", "embedding": "embedding"}
# the two paths of the profile figure: one colour and one hatch each (grey-scale too)
_PATH_LOOKS = {"reference": ("#7f7f7f", "//"), "fast": ("#1f77b4", "")}


def load_train_step(name: str = TRAIN_STEP) -> dict:
    """The committed whole-step benchmark of ``benchmarks/train_step.py``."""
    return load_result(name, need=("cases", "ratios"))


def case(report: dict, kind: str, B: int = 4, T: int = 4096) -> dict:
    """One case of the report, by kind and shape; a missing one names those present."""
    name = f"{kind}_b{B}t{T}"
    if name not in report["cases"]:
        raise KeyError(f"{report.get('file', 'the report')} has no case {name!r}; it has "
                       f"{sorted(report['cases'])}")
    return report["cases"][name]


def _caption(report: dict) -> str:
    return run_caption(report, width=96) + f"\n  MFU of a peak of {report['peak_tflops']:g} TFLOP/s"


def busy_valid(entry: dict) -> bool:
    """Whether a case's busy share can be true: its profiled kernel time per step is at most
    the step's time (a larger sum means the profiler's kernel durations cannot be trusted)."""
    return 0 <= entry["busy_share"] <= 1


def invalid_busy_cases(report: dict) -> dict:
    """{case: (kernel ms per step, step ms)} of the cases whose busy share is not valid."""
    return {name: (c["profile"]["kernel_ms_per_step"], c["step_ms"])
            for name, c in report["cases"].items() if "busy_share" in c and not busy_valid(c)}


def _busy(entry: dict) -> str:
    return f"{100 * entry['busy_share']:.0f}%" if busy_valid(entry) else "not valid"


def train_step_table(report: dict, shapes=((4, 4096), (1, 16384)),
                     kinds=("hybrid_fast", "hybrid_reference", "llama_sdpa", "gdn_fast",
                            "mla_fast")) -> CaptionedTable:
    """Tokens per second, MFU, peak memory and GPU busy share of each case ("not valid"
    where the profile summed more kernel time than the step took, see ``busy_valid``);
    a kind the report lacks at a shape is left out."""
    rows, values = [], []
    for B, T in shapes:
        for kind in kinds:
            if f"{kind}_b{B}t{T}" not in report["cases"]:
                continue
            c = case(report, kind, B, T)
            rows.append((KINDS[kind], f"{B} × {T:,}", f"{c['tokens_per_s']:,}",
                         f"{100 * c['mfu']:.1f}%", f"{c['peak_GiB']:.1f}", _busy(c)))
            values.append({"kind": kind, "B": B, "T": T, **c})
    table = TextTable(("model, path", "B × T", "tokens/s", "MFU", "peak GiB", "GPU busy"),
                      rows, title="one training step of hymo_750m (bf16 autocast, fused AdamW)")
    return CaptionedTable(table, _caption(report), values)


def target_value(name: str, value) -> str:
    if value is None:
        return "not measured"
    if "MFU" in name or "busy" in name:
        return f"{100 * value:.1f}%"
    if "GiB" in name:
        return f"{value:.1f} GiB"
    return f"{value:.2f}×"


def targets_table(report: dict, keys=(("targets_hybrid_b4t4096", "measured"),)
                  ) -> CaptionedTable:
    """The targets the run was aimed at, each with its measured value and verdict: one pair
    of columns per (report key, heading) in ``keys``, e.g. the fast path launched kernel by
    kernel and replayed as a CUDA graph."""
    names = list(report[keys[0][0]])
    rows, values = [], []
    for name in names:
        row, value = [name], {"target": name}
        for key, heading in keys:
            t = report[key][name]
            verdict = {True: "met", False: "missed", None: "not measured"}[t["met"]]
            row += [target_value(name, t["value"]), verdict]
            value[heading] = dict(t)
        rows.append(tuple(row))
        values.append(value)
    head = ["target (hybrid, B = 4, T = 4,096)"]
    for _, heading in keys:
        head += [heading, "verdict"]
    table = TextTable(tuple(head), rows)
    return CaptionedTable(table, _caption(report), values)


def step_profile_figure(report: dict, before: str = "hybrid_reference_b4t4096",
                        after: str = "hybrid_fast_b4t4096") -> Figure:
    """GPU kernel time per step by component, the reference path against the fast path
    (from each case's profile), largest first."""
    cases = {"reference": report["cases"][before], "fast": report["cases"][after]}
    times = {path: c["profile"]["components_ms"] for path, c in cases.items()}
    names = sorted(set(times["reference"]) | set(times["fast"]),
                   key=lambda k: -max(times["reference"].get(k, 0), times["fast"].get(k, 0)))
    names = [n for n in names if max(times["reference"].get(n, 0), times["fast"].get(n, 0)) >= 1]
    fig = Figure(figsize=(8.5, 0.5 * len(names) + 1.6))
    ax = fig.subplots()
    height = 0.38
    for offset, path in ((-height / 2, "reference"), (height / 2, "fast")):
        color, hatch = _PATH_LOOKS[path]
        c = cases[path]
        total = c["profile"]["kernel_ms_per_step"]
        ax.barh([i + offset for i in range(len(names))], [times[path].get(n, 0) for n in names],
                height=height, color=color, hatch=hatch or None, edgecolor="black",
                linewidth=0.4, label=f"{path} path: {total:.0f} ms of kernels per step, "
                                     f"GPU busy {_busy(c)}")
    for i, n in enumerate(names):
        for offset, path in ((-height / 2, "reference"), (height / 2, "fast")):
            ms = times[path].get(n, 0)
            ax.text(ms, i + offset, f" {ms:.0f}", va="center", fontsize=8)
    ax.set_yticks(range(len(names)), [COMPONENTS.get(n, n) for n in names], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("GPU kernel time per training step (ms)")
    ax.set_xlim(right=1.12 * max(max(t.values()) for t in times.values()))
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    shape = cases["fast"]
    ax.set_title(f"Where a step's GPU time goes: hymo_750m, B = {shape['B']}, T = {shape['T']:,}",
                 fontsize=10)
    fig.text(0.01, 0.005, run_caption(report, width=110), fontsize=8, color="gray")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


# the gla kernel's chunk and block in the memory runs of 2026-12-02 (train_step_all_..._g.json
# records the chunk; the kernel's chunk has since moved to 128 steps, its block is still 16)
MEMORY_RUNS_CHUNK = 64
MEMORY_RUNS_BLOCK = 16


def freed_bytes(config: ModelConfig, B: int, T: int, chunk: int = MEMORY_RUNS_CHUNK,
                block: int = MEMORY_RUNS_BLOCK) -> dict:
    """What the memory changes stop keeping for the backward, by count (bytes, bf16 unless
    said). Per MoE layer, what ``routed_grouped`` rebuilds today (``per_moe_layer``): the
    rows gathered for the experts (k·n × dim) and SiLU(x W1) with the SwiGLU product
    (2 · k·n × inter). The first form of the change, in the runs of 2026-12-02, freed two
    more (``earlier_moe_layer``): the expert weights cast to bf16
    (3 · E · inter · dim), which the grouped path keeps again since (casting them a second
    time in the backward cost more time than the memory was worth), and the output rows in
    token order (k·n × dim), which the backward now does without, keeping the experts'
    output y (as large) in their place. Per GDN layer, under block states rebuilt (an option
    of the gla kernel in those runs, since removed: the kernel stores them), the states of
    every ``block``-step block less those of every ``chunk``-step chunk (H · S · D fp32
    each, per sequence); ``chunk`` and ``block`` default to the kernel's in the runs the
    chapter compares the counts with."""
    n, k, E = B * T, config.n_activated_experts, config.n_routed_experts
    n_moe = len(config.mla_positions)
    state = config.gdn_n_heads * config.gdn_d_state * config.gdn_headdim * 4 * B
    per_moe = {"gathered rows": k * n * config.dim * 2,
               "SiLU(x W1) and the product": 2 * k * n * config.moe_inter_dim * 2}
    earlier = {**per_moe, "expert weights in bf16": 3 * E * config.moe_inter_dim * config.dim * 2,
               "output rows in token order": k * n * config.dim * 2}
    blocks = -(-T // block) - -(-T // chunk)
    return {"per_moe_layer": per_moe, "earlier_moe_layer": earlier, "moe_layers": n_moe,
            "moe_total": n_moe * sum(per_moe.values()),
            "earlier_moe_total": n_moe * sum(earlier.values()),
            "per_gdn_layer": blocks * state, "gdn_layers": config.n_layers - n_moe,
            "gdn_total": (config.n_layers - n_moe) * blocks * state}


def peer_spread_table(runs=PEER_RUNS) -> CaptionedTable:
    """fla's GLA model, 1024 × 24 and (where the run has it) at hymo's active size, beside the
    fast hybrid replayed as one CUDA graph, in each run of ``runs`` (one machine each):
    tokens/s, the GPU's busy share, and the kernel time per step, which leaves out the host:
    what moves from machine to machine is the host's part."""
    rows, values, captions = [], [], []
    for i, name in enumerate(runs):
        report = load_result(name, need=("cases",))
        graph = case(report, "hybrid_fast_graph")
        mark = f"[{i + 1}]"
        value = {"file": name, "hybrid_fast_graph": graph}
        for kind in ("fla_gla", "fla_gla_matched"):
            if f"{kind}_b4t4096" not in report["cases"]:
                rows.append((mark, KINDS[kind], "not in this run", "", "",
                             f"{graph['tokens_per_s']:,}", ""))
                continue
            gla = case(report, kind)
            rows.append((mark, KINDS[kind], f"{gla['tokens_per_s']:,}", _busy(gla),
                         f"{gla['profile']['kernel_ms_per_step']:.0f}",
                         f"{graph['tokens_per_s']:,}",
                         f"{graph['tokens_per_s'] / gla['tokens_per_s']:.2f}×"))
            value[kind] = gla
        values.append(value)
        captions.append(run_caption(report, width=96, mark=mark + " "))
    table = TextTable(("run", "peer", "tokens/s", "GPU busy", "kernel ms per step",
                       "hymo as one graph, tokens/s", "hymo / peer"), rows,
                      title="fla's GLA model and the graphed fast hybrid, B = 4, T = 4,096, "
                            "one machine per run")
    return CaptionedTable(table, "\n".join(captions), values)


def latest_targets_table(latest: str = TRAIN_STEP) -> CaptionedTable:
    """The targets as the latest run recorded them: the fast path launched kernel by kernel
    and, where the run has it, replayed as one CUDA graph."""
    report = load_train_step(latest)
    keys = [("targets_hybrid_b4t4096", "fast path")]
    if "targets_hybrid_graph_b4t4096" in report:
        keys.append(("targets_hybrid_graph_b4t4096", "as one CUDA graph"))
    return targets_table(report, tuple(keys))


