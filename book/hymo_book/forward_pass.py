"""The forward pass end to end (book chapter 14, section 11 of the design document).

* **Section 11's shapes against a traced pass**: :data:`SECTION_11` lists the tensors the
  document sizes for its B = 2, T = 128 example and the module call that produces each;
  :func:`production_trace` traces hymo_750m on the meta device and
  :func:`section_11_shapes` puts both side by side (the claims audit reads the same rows).
* **FLOPs counted, not only computed**: :func:`flop_check` runs the mini model under
  ``FlopCounterMode`` and sets each component's counted FLOPs beside ``hymo_mini.analysis.flops``.
* **FLOPs per token against T**: :func:`flops_figure`.
* **The measured step beside the cost model**: :func:`step_table` and
  :func:`time_against_flops` read the whole-step run through :mod:`hymo_book.results`.

Nothing here measures time; every figure and table is deterministic.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

import torch
from matplotlib.figure import Figure
from torch.utils.flop_counter import FlopCounterMode

from hymo_book.results import load_result, run_caption
from hymo_book.training import TRAIN_STEP
from hymo_mini.analysis.costs import mla_cost
from hymo_mini.analysis.flops import forward_flops
from hymo_mini.analysis.tables import TextTable
from hymo_mini.config import ModelConfig, load_config, replace

__all__ = ["SECTION_11", "STEP_RUN", "shape_in", "production_trace", "section_11_shapes",
           "ShapeCheck",
           "flop_check", "flops_figure", "step_table", "time_against_flops"]

STEP_RUN = TRAIN_STEP  # the run chapter 17 and the README read
DOC_B, DOC_T = 2, 128  # section 11's example

# (section, tensor, the document's line, block kind, module path inside the block, which side)
SECTION_11 = [
    ("11.2.1", "query", "Q_proj + Q_pe: (2, 128, 256)", "mla", "attn.wq_b", "out"),
    ("11.2.1", "latent and k_pe", "K_proj + K_pe: (2, 128, 160)", "mla", "attn.wkv_a", "out"),
    ("11.2.1", "keys and values", "V_proj: (2, 128, 160)", "mla", "attn.wkv_b", "out"),
    ("11.2.1", "attention output", "Attention output: (2, 128, 128)", "mla", "attn.wo", "in"),
    ("11.2.2", "shared expert hidden", "Shared expert: (2, 128, 2304)", "mla",
     "moe.shared_experts.0.w1", "out"),
    ("11.3.1", "in_proj output", "in_proj(x) → (2, 128, 1280)", "gdn", "mixer.in_proj", "out"),
    ("11.3.1", "read and write keys", "b_proj, c_proj → (2, 128, 40, 32)", "gdn", "mixer.rope",
     "out"),
    ("11.3.1", "decay gate", "dt_proj → sigmoid → (2, 128, 40)", "gdn", "mixer.dt_proj", "out"),
    ("11.3.1", "out_proj output", "out_proj(o_flat) → (2, 128, 896)", "gdn", "mixer.out_proj",
     "out"),
]


def shape_in(text: str) -> tuple[int, ...]:
    """The first tuple of integers in ``text``: "(2, 128, 256)" -> (2, 128, 256)."""
    found = re.search(r"\(([\d, ]+)\)", text)
    if not found:
        raise ValueError(f"no shape in {text!r}")
    return tuple(int(n) for n in found.group(1).split(","))


@functools.lru_cache(maxsize=2)
def production_trace(B: int = DOC_B, T: int = DOC_T):
    """hymo_750m traced on the meta device (shapes only, nothing allocated)."""
    from hymo_mini.analysis.trace import trace_shapes
    from hymo_mini.model import HyMo

    with torch.device("meta"):
        model = HyMo(load_config("hymo_750m").model)
    return trace_shapes(model, torch.zeros(B, T, dtype=torch.long, device="meta"))


@dataclass(frozen=True)
class ShapeCheck:
    section: str
    tensor: str
    document: str  # the document's line, quoted
    module: str  # the traced call, e.g. layers.3.attn.wq_b (input)
    documented: tuple[int, ...]
    traced: tuple[int, ...]

    @property
    def verdict(self) -> str:
        if self.traced == self.documented:
            return "same"
        if math.prod(self.traced) == math.prod(self.documented):
            return "same size, other layout"
        return "differs"


def section_11_shapes(trace=None) -> list[ShapeCheck]:
    """Each tensor of :data:`SECTION_11` at the config's first MLA and first GDN layer."""
    trace = production_trace() if trace is None else trace
    config = load_config("hymo_750m").model
    first = {"mla": config.mla_positions[0], "gdn": config.gdn_positions[0]}
    rows = []
    for section, tensor, line, kind, path, side in SECTION_11:
        full = f"layers.{first[kind]}.{path}"
        call = next(r for r in trace if r.path == full)
        traced = shape_in(call.outputs if side == "out" else call.inputs)
        rows.append(ShapeCheck(section, tensor, line, f"{full} ({side}put)", shape_in(line),
                               traced))
    return rows


def shapes_table(rows: list[ShapeCheck] | None = None) -> TextTable:
    rows = section_11_shapes() if rows is None else rows
    return TextTable(("§", "tensor", "section 11 says", "traced call", "traced shape", "verdict"),
                     [(r.section, r.tensor, f'"{r.document}"', r.module, str(r.traced),
                       r.verdict) for r in rows],
                     title=f"section 11's shapes against a traced pass of hymo_750m, B={DOC_B}, "
                           f"T={DOC_T}", align="llllll")


# ---- FLOPs counted by PyTorch ---------------------------------------------------------------
def _counted(config: ModelConfig, T: int, seed: int = 0) -> dict[str, dict[str, int]]:
    """FlopCounterMode's counts per module of one forward of the model (batch 1)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from hymo_mini.model import HyMo

    torch.manual_seed(seed)
    model = HyMo(config).eval()  # evaluation: the router drops nothing
    tokens = torch.randint(0, config.vocab_size, (1, T))
    with FlopCounterMode(display=False, depth=None) as counter, torch.no_grad(), \
            sdpa_kernel(SDPBackend.MATH):  # attention as matrix products the counter sees
        model(tokens)
    return {module: {str(op): n for op, n in ops.items()}
            for module, ops in counter.get_flop_counts().items()}


def _sum(counts: dict, suffix: str, op: str, layers) -> int:
    return sum(counts.get(f"HyMo.layers.{i}{suffix}", {}).get(op, 0) for i in layers)


def flop_check(config: ModelConfig | None = None, T: int = 64) -> TextTable:
    """Per component, the FLOPs ``FlopCounterMode`` counts in one forward pass (mini model,
    T tokens, MoE by the loop over experts, GDN by the naive loop, attention by the math
    backend) beside ``hymo_mini.analysis.flops``'s formula for the same computation."""
    c = config or replace(load_config("hymo_mini").model, moe_impl="loop", gdn_backend="naive")
    counts = _counted(c, T)
    mla, gdn = c.mla_positions, c.gdn_positions
    f = forward_flops(c, T, include_mtp=False)
    full = mla_cost(c, T, causal=False).mixing_flops  # the counter multiplies every pair
    conv = 2 * T * c.gdn_d_inner * c.gdn_d_conv
    H, S, D = c.gdn_n_heads, c.gdn_d_state, c.gdn_headdim
    rows = [
        ("output head", counts["HyMo.head"]["aten.mm"], T * f["output head (logits)"],
         "mm"),
        ("MLA projections", _sum(counts, ".attn", "aten.mm", mla),
         T * f["MLA projections"], "mm"),
        ("MLA attention core", _sum(counts, ".attn", "aten.bmm", mla), len(mla) * full,
         "bmm; every query-key pair, the mask comes after"),
        ("MoE (router, 2 routed, shared)", _sum(counts, ".moe", "aten.mm", mla),
         T * f["MoE (router, top-k routed, shared)"], "mm"),
        ("GDN projections", _sum(counts, "", "aten.mm", gdn),
         T * (f["GDN projections (in, g, out, skip)"] + f["GDN projections (b, c, dt) and conv"])
         - len(gdn) * conv, "mm"),
        ("GDN causal conv", _sum(counts, "", "aten.convolution", gdn), len(gdn) * conv,
         f"the conv runs on T + {c.gdn_d_conv - 1} padded steps, then trims"),
        ("GDN recurrence", _sum(counts, "", "aten.bmm", gdn), len(gdn) * T * H * 2 * S * D,
         "bmm: the read c·H only; the decay and the write are elementwise"),
    ]
    out = [(name, f"{counted:,}", f"{int(formula):,}",
            "equal" if counted == formula else f"{counted / formula:.3f}×", how)
           for name, counted, formula, how in rows]
    return TextTable(("component", "FlopCounterMode", "formula", "counted / formula",
                      "what is counted"), out,
                     title=f"one forward pass of the mini model, T = {T}", align="lrrrl")


# ---- FLOPs per token against T ----------------------------------------------------------------
_GROUPS = {  # label -> (components of forward_flops, colour, marker, line style)
    "MLA attention core": (("MLA attention core (q·k, p·v)",), "#d95f02", "o", "-"),
    "MoE": (("MoE (router, top-k routed, shared)",), "#7570b3", "s", "--"),
    "GDN projections and conv": (("GDN projections (in, g, out, skip)",
                                  "GDN projections (b, c, dt) and conv"), "#1b9e77", "^", "-."),
    "output head": (("output head (logits)",), "#666666", "D", ":"),
    "MLA projections": (("MLA projections",), "#e6ab02", "v", "-"),
    "GDN recurrence": (("GDN recurrence",), "#66a61e", "x", "--"),
}


def flops_figure(T_max: int = 131_072, mla_every: int = 4, document_point: bool = True) -> Figure:
    """Forward FLOPs per token of each component of hymo_750m (layout ``mla_every``)
    against the context length T (causal attention, MTP left out), and the whole pass. Only
    the attention core grows with T. With ``document_point``, section 11.6.1's "412G" for
    the attention core at 4K is marked where it sits."""
    config = replace(load_config("hymo_750m").model, mla_every=mla_every)
    Ts = [2 ** k for k in range(7, max(8, int(math.log2(max(T_max, 256)))) + 1)]
    per_T = [forward_flops(config, T, include_mtp=False) for T in Ts]
    fig = Figure(figsize=(8.6, 4.6), layout="constrained")
    ax = fig.subplots()
    for label, (parts, colour, marker, style) in _GROUPS.items():
        ys = [sum(f[p] for p in parts) for f in per_T]
        if any(ys):
            ax.plot(Ts, ys, color=colour, marker=marker, linestyle=style, label=label)
    ax.plot(Ts, [f["total"] for f in per_T], color="black", marker="*", linestyle="-",
            linewidth=2, label="whole forward pass")
    if document_point:
        ax.plot([4096], [412e9], color="#c62828", marker="X", markersize=11, linestyle="none",
                label="section 11.6.1: '412G' for attention at 4K")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(Ts[::2], [f"{T // 1024}K" if T >= 1024 else str(T) for T in Ts[::2]])
    ax.set_xlabel("context length T (tokens, log scale)")
    ax.set_ylabel("forward FLOPs per token (log scale)")
    n_mla = len(config.mla_positions)
    ax.set_title(f"hymo_750m, {n_mla} MLA + {config.n_layers - n_mla} GDN layers: forward "
                 "FLOPs per token by component\n(causal attention, MTP left out)", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return fig


# ---- the measured step ------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def step_run() -> dict:
    return load_result(STEP_RUN, need=("cases",))


_STEP_CASES = {"hybrid_fast_b4t4096": ("3:1 hybrid, fast path", {}),
               "hybrid_reference_b4t4096": ("3:1 hybrid, reference path", {}),
               "mla_fast_b4t4096": ("all MLA, fast path", {"mla_every": 1}),
               "gdn_fast_b4t4096": ("all GDN, fast path", {"mla_every": 0})}


def step_flops(case: str) -> float:
    """Training FLOPs per token of a measured case: 3 × the forward (MTP included), the
    convention the benchmark records."""
    B_T = step_run()["cases"][case]
    config = replace(load_config("hymo_750m").model, **_STEP_CASES[case][1])
    return 3 * forward_flops(config, B_T["T"])["total"]


def step_table(mfu: float = 0.5) -> TextTable:
    """For each measured case at B = 4, T = 4,096: the training FLOPs per token (computed
    here, and as the run recorded them), the tokens/s the cost model predicts at ``mfu`` of
    the run's peak, the tokens/s measured and the MFU they imply."""
    run = step_run()
    peak = run["peak_tflops"] * 1e12
    rows = []
    for case, (label, _) in _STEP_CASES.items():
        c = run["cases"][case]
        flops = step_flops(case)
        rows.append((label, f"{flops / 1e9:.3g} G", "yes" if flops == c["flops_per_token"] else
                     "no", f"{mfu * peak / flops:,.0f}", f"{c['tokens_per_s']:,}",
                     f"{c['tokens_per_s'] * flops / peak:.1%}"))
    return TextTable(("case (B = 4, T = 4,096)", "training FLOPs/token", "as recorded",
                      f"cost model at {mfu:.0%} MFU", "measured tokens/s", "measured MFU"),
                     rows, title=f"one GPU, {run['peak_tflops']:g} TFLOP/s dense bf16 peak; "
                                 + run_caption(run).splitlines()[0], align="lrrrrr")


_PROFILE = {  # profiler label -> the forward_flops components it runs
    "mla_attention": ("MLA attention core (q·k, p·v)", "MLA projections"),
    "moe": ("MoE (router, top-k routed, shared)",),
    "gdn_other": ("GDN projections (in, g, out, skip)", "GDN projections (b, c, dt) and conv"),
    "gdn_recurrence": ("GDN recurrence",),
    "loss": ("output head (logits)", "MTP logits (shared head)"),
    "mtp": ("MTP blocks",),
}


def time_against_flops(case: str = "hybrid_fast_b4t4096") -> TextTable:
    """Each profiled component's share of the model FLOPs and of the step's GPU kernel
    time (the run's profile; the optimizer and the rest have no model FLOPs)."""
    run = step_run()
    c = run["cases"][case]
    f = forward_flops(load_config("hymo_750m").model, c["T"])
    times = c["profile"]["components_ms"]
    total_ms = sum(times.values())
    rows = []
    for label, parts in _PROFILE.items():
        share = sum(f[p] for p in parts) / f["total"]
        rows.append((label, f"{share:.1%}", f"{times.get(label, 0) / total_ms:.1%}",
                     f"{times.get(label, 0):.1f}"))
    other = total_ms - sum(times.get(label, 0) for label in _PROFILE)
    rows.append(("optimizer and the rest", "-", f"{other / total_ms:.1%}", f"{other:.1f}"))
    return TextTable(("profiled component", "share of FLOPs", "share of kernel time",
                      "kernel ms per step"), rows,
                     title=f"{case}: where the FLOPs are and where the time goes\n"
                           + run_caption(run), align="lrrr")
