"""Chapter 18 (training at scale with FSDP2): its figures and the one-GPU measurement.

* :func:`memory_figure`: :func:`hymo_mini.analysis.memory.memory_per_gpu` over a range of GPU
  counts, stacked by kind (a widget in the chapter).
* :func:`gather_timeline_figure`: when FSDP2 gathers and reduces, one step, schematic.
* :func:`load_fsdp`, :func:`one_gpu_table`: ``book/results/fsdp_h200_2026-12-01.json``
  (``benchmarks/fsdp_one_gpu.py``), read through :mod:`hymo_book.results`.
"""

from __future__ import annotations

from functools import lru_cache

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from hymo_book.results import CaptionedTable, load_result, run_caption
from hymo_mini.analysis.memory import activation_bytes_per_token, memory_per_gpu
from hymo_mini.analysis.tables import TextTable
from hymo_mini.config import load_config, replace

__all__ = ["FSDP_RUN", "COMMITTED_PROBE_TOKENS", "PARTS", "load_fsdp", "one_gpu_table",
           "head_buffers", "counted_once", "preset_activations", "estimates", "memory_figure",
           "gather_timeline_figure"]

FSDP_RUN = "fsdp_h200_2026-12-01.json"
# that run's activation probe: benchmarks/fsdp_one_gpu.py asked for 512 tokens, and the
# single-length probe of the time measured a batch of 512 + 1
COMMITTED_PROBE_TOKENS = 512 + 1
GIB = 2**30

# the parts of memory_per_gpu's estimate, stacked in this order: (label, colour, hatch)
PARTS = {
    "parameters": ("fp32 parameter shards", "#1f77b4", "//"),
    "gradients": ("fp32 gradient shards", "#aec7e8", "\\\\"),
    "optimizer": ("optimizer state shards", "#ff7f0e", "xx"),
    "gathered": ("gathered bf16 units", "#2ca02c", ".."),
    "activations": ("activations", "#d62728", ""),
    "transients": ("one layer's backward", "#9467bd", "++"),
}


def load_fsdp(name: str = FSDP_RUN) -> dict:
    """The committed one-GPU FSDP2 run."""
    return load_result(name, need=("runs", "activation_bytes_per_token"))


def one_gpu_table(report: dict) -> CaptionedTable:
    """Plain one-GPU training against FSDP2 in a process group of one: the same model,
    batches and seed; tokens/s, peak memory and the first losses, with the estimate."""
    rows, values = [], []
    for r in report["runs"]:
        rows.append((r["mode"], f"{r['steps_timed']}", f"{r['tokens_per_s']:,.0f}",
                     f"{r['peak_allocated_gib']:.1f}", f"{r['peak_reserved_gib']:.1f}",
                     ", ".join(f"{x:.2f}" for x in r["losses"])))
        values.append(r)
    est = report.get("estimate_fsdp", {})
    title = (f"{report['config']}, batch {report['batch']} × {report['seq_len']:,}, "
             f"{report['optimizer']}; estimate for fsdp: {est.get('peak_gib', '?')} GiB")
    table = TextTable(("mode", "steps timed", "tokens/s", "peak allocated GiB",
                       "peak reserved GiB", "losses"), rows, title=title)
    caption = run_caption(report, width=96)
    if report.get("run_note"):
        caption += f"\n  note: {report['run_note']}"
    return CaptionedTable(table, caption, values)


@lru_cache(maxsize=8)
def _measured_here(preset: str) -> tuple:
    return tuple(sorted(activation_bytes_per_token(load_config(preset)).items()))


def head_buffers(preset: str) -> int:
    """Bytes of the weight-gradient buffers that the chunked loss of the committed FSDP run
    kept for ``preset``: one (V, d) bf16 buffer per head depth (the main head and each MTP
    depth), whatever the tokens. The loss now shares one fp32 buffer among all heads; this
    counts what that run's code kept, to correct its single-probe measurement."""
    m = load_config(preset).model
    return (1 + m.mtp_depth) * m.vocab_size * m.dim * 2


def counted_once(report: dict) -> dict[str, float]:
    """A run's activation bytes with the head's fixed part counted once. A run measured
    by the two-length probe has it (``head_fixed``) and is returned as it is. An earlier
    run's single probe folded the fixed buffers into the per-token figure; they are taken
    out again here, as :func:`head_buffers` estimates them (inferred, not measured)."""
    acts = dict(report["activation_bytes_per_token"])
    if "head_fixed" in acts:
        return acts
    fixed = head_buffers(report["config"])
    return dict(acts, head=acts["head"] - fixed / COMMITTED_PROBE_TOKENS, head_fixed=fixed)


def preset_activations(preset: str, report: dict | None = None) -> dict[str, float]:
    """Activation bytes for ``preset``: the GPU's measurement of the committed run where it
    is that preset's (the head's fixed part counted once, :func:`counted_once`), else
    measured here on the CPU (lru-cached)."""
    if report is not None and report.get("config") == preset:
        return counted_once(report)
    return dict(_measured_here(preset))


def estimates(preset: str, n_gpus, batch_per_gpu: int, seq_len: int, optimizer: str,
              activation_checkpointing: bool, activations: dict) -> list:
    """:func:`memory_per_gpu` for each GPU count, the per-GPU batch held fixed."""
    base = load_config(preset)
    config = replace(base, model=replace(base.model, max_seq_len=max(base.model.max_seq_len,
                                                                     seq_len + 1)),
                     optimizer=replace(base.optimizer, name=optimizer))
    return [memory_per_gpu(config, n, batch_per_gpu * n, seq_len,
                           activation_checkpointing=activation_checkpointing,
                           activations=activations) for n in n_gpus]


def memory_figure(preset: str = "hymo_750m", max_gpus: int = 64, batch_per_gpu: int = 4,
                  seq_len: int = 4096, optimizer: str = "muon",
                  activation_checkpointing: bool = False, report: dict | None = None,
                  measured: dict | None = None) -> Figure:
    """Estimated memory per GPU, stacked by kind, for 1, 2, 4, ... GPUs at a fixed per-GPU
    batch. ``measured``: {"n": GPUs, "gib": peak, "label": ...} drawn as a point."""
    n_gpus = [2**k for k in range(max_gpus.bit_length()) if 2**k <= max_gpus]
    acts = preset_activations(preset, report)
    est = estimates(preset, n_gpus, batch_per_gpu, seq_len, optimizer,
                    activation_checkpointing, acts)
    fig = Figure(figsize=(8.5, 4.6))
    ax = fig.subplots()
    x = list(range(len(n_gpus)))
    bottom = [0.0] * len(n_gpus)
    for part, (label, color, hatch) in PARTS.items():
        heights = [getattr(e, part) / GIB for e in est]
        ax.bar(x, heights, bottom=bottom, width=0.6, color=color, hatch=hatch or None,
               edgecolor="black", linewidth=0.4, label=label)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    step_peak = [(e.state + e.optimizer_step) / GIB for e in est]
    ax.plot(x, step_peak, marker="_", ms=22, mew=2, linestyle="none", color="black",
            label="state + the optimizer step's transient")
    for xi, e in zip(x, est, strict=True):
        ax.text(xi, e.total / GIB, f"{e.total / GIB:.1f}", ha="center", va="bottom", fontsize=8)
    if measured is not None and measured["n"] in n_gpus:
        ax.plot([n_gpus.index(measured["n"])], [measured["gib"]], marker="*", ms=13,
                linestyle="none", color="gold", markeredgecolor="black", label=measured["label"])
    ax.set_xticks(x, [str(n) for n in n_gpus])
    ax.set_xlabel("GPUs N (the per-GPU batch fixed)")
    ax.set_ylabel("estimated memory per GPU (GiB)")
    ax.set_ylim(0, 1.18 * max(max(e.total / GIB for e in est), max(step_peak)))
    ax.set_title(f"{preset}: {batch_per_gpu} × {seq_len:,} tokens per GPU, {optimizer}"
                 f"{', activation checkpointing' if activation_checkpointing else ''}",
                 fontsize=10)
    ax.legend(fontsize=8, loc="upper right", ncol=2)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


# what happens in one step, per unit: (stream, start, length, kind, text)
_KINDS = {"all-gather": ("#2ca02c", "//"), "forward": ("#c6dbef", ""),
          "backward": ("#fdd0a2", ".."), "reduce-scatter": ("#9467bd", "xx"),
          "optimizer": ("#d9d9d9", "++")}


def _timeline(n_blocks: int) -> list[tuple]:
    """(stream, start, length, kind, text) of one step; a block's forward takes 1, its
    backward 1.5, a gather or a reduction 0.5 (schematic units)."""
    n = n_blocks
    ev = [("all-gather", 0.0, 0.5, "all-gather", "R"), ("compute", 0.5, 0.5, "forward", "emb"),
          ("all-gather", 0.5, 0.5, "all-gather", "1")]
    for b in range(1, n + 1):  # block b computes while block b + 1 is gathered (prefetch)
        ev.append(("compute", float(b), 1.0, "forward", str(b)))
        if b < n:
            ev.append(("all-gather", float(b), 0.5, "all-gather", str(b + 1)))
    ev += [("compute", n + 1.0, 0.5, "forward", "head"),
           ("compute", n + 1.5, 0.5, "backward", "head"),
           ("all-gather", n + 1.0, 0.5, "all-gather", str(n))]  # gathered again: freed after F
    for b in range(n, 0, -1):  # backward of b, gather b - 1, then reduce-scatter b's grads
        t = n + 2.0 + (n - b) * 1.5
        ev.append(("compute", t, 1.5, "backward", str(b)))
        if b > 1:
            ev.append(("all-gather", t, 0.5, "all-gather", str(b - 1)))
        ev.append(("reduce-scatter", t + 1.5, 0.5, "reduce-scatter", str(b)))
    t = n + 2.0 + n * 1.5
    ev += [("compute", t, 0.5, "backward", "emb"), ("reduce-scatter", t + 0.5, 0.5,
                                                     "reduce-scatter", "R"),
           ("compute", t + 1.0, 1.0, "optimizer", "step")]
    return ev


def gather_timeline_figure(n_blocks: int = 4) -> Figure:
    """One training step under FSDP2, schematic: the communication stream gathers each
    unit's parameters just before it computes (prefetching the next), frees them after,
    gathers again for the backward and reduce-scatters each unit's gradients. R is the root
    unit (the tied embedding = head, the final norm), gathered once for the whole forward."""
    fig = Figure(figsize=(10, 3.2))
    ax = fig.subplots()
    rows = {"all-gather": 2.0, "compute": 1.0, "reduce-scatter": 0.0}
    end = 0.0
    for stream, start, length, kind, text in _timeline(n_blocks):
        color, hatch = _KINDS[kind]
        ax.add_patch(Rectangle((start, rows[stream] - 0.35), length, 0.7, facecolor=color,
                               hatch=hatch or None, edgecolor="black", linewidth=0.6))
        ax.text(start + length / 2, rows[stream], text, ha="center", va="center", fontsize=8,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.6})
        end = max(end, start + length)
    ax.set_xlim(-0.2, end + 0.2)
    ax.set_ylim(-0.6, 2.6)
    ax.set_yticks(list(rows.values()), list(rows))
    ax.set_xticks([])
    ax.set_xlabel("time within one step (schematic, not to scale)")
    ax.legend(handles=[Patch(facecolor=c, hatch=h or None, edgecolor="black", label=k)
                       for k, (c, h) in _KINDS.items()], fontsize=8, ncol=5,
              loc="upper center", bbox_to_anchor=(0.5, -0.25), frameon=False)
    ax.set_title(f"FSDP2 in one step: {n_blocks} block units and the root R", fontsize=10)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig
