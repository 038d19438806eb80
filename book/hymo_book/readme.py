"""README.md's "Measured" section, written from the results files, so that the README, the
kernel report and the claims audit read the same numbers.

    python3 book/hymo_book/readme.py          # rewrite the section between its markers
    python3 book/hymo_book/readme.py --check  # exit 1 if README.md is out of date

``tests/book/test_readme.py`` fails when README.md's section differs from what this writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

if __package__ in (None, ""):  # run as a file: make ``hymo_book`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hymo_book import markers  # noqa: E402
from hymo_book.curriculum import BOOK, PARTS  # noqa: E402
from hymo_book.fsdp import load_fsdp  # noqa: E402
from hymo_book.index import _title_and_summary  # noqa: E402
from hymo_book.kernel_primer import products_on  # noqa: E402
from hymo_book.kernel_runs import (  # noqa: E402
    DELTA_AUTO_PEERS,
    DELTA_LONG_RUN,
    DELTA_PEERS_RUN,
    DELTA_SIDE_BY_SIDE,
    GATED_DELTA_RUN,
    delta_entries,
)
from hymo_book.markers import rewrite_sections  # noqa: E402
from hymo_book.mqar_plots import load_seeds, seeds_learned  # noqa: E402
from hymo_book.results import load_result  # noqa: E402
from hymo_book.training import TRAIN_STEP, busy_valid, peer_spread_table  # noqa: E402
from hymo_mini.config import load_config  # noqa: E402

__all__ = ["README", "SECTIONS", "measured_section", "parts_section", "rewrite"]

README = Path(__file__).resolve().parents[2] / "README.md"


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _ms(x: float) -> str:
    return f"{x:.2f} ms" if x < 10 else f"{x:.1f} ms"


def _step_table(step: dict) -> list[str]:
    """The latest tree's complete run: the fast path (as one CUDA graph and launched kernel by
    kernel), the reference path, both peers at two sizes, the one-kind stacks."""
    rows = [("hybrid, fast path, as one CUDA graph", "hybrid_fast_graph_b4t4096"),
            ("hybrid, fast path", "hybrid_fast_b4t4096"),
            ("hybrid, reference path", "hybrid_reference_b4t4096"),
            (f"HF Llama (SDPA), {_size(step, 'llama_sdpa')}", "llama_sdpa_b4t4096"),
            (f"HF Llama (SDPA), {_layers(step, 'llama_sdpa_matched')} layers (hymo's active "
             "size)", "llama_sdpa_matched_b4t4096"),
            (f"fla GLA model, {_size(step, 'fla_gla')}", "fla_gla_b4t4096"),
            (f"fla GLA model, {_layers(step, 'fla_gla_matched')} layers (hymo's active size)",
             "fla_gla_matched_b4t4096"),
            ("all-GDN stack, fast path", "gdn_fast_b4t4096"),
            ("all-MLA stack, fast path", "mla_fast_b4t4096")]
    lines = ["| | tokens/s | MFU (of 790 TFLOP/s) | peak | GPU busy |", "|---|---|---|---|---|"]
    for label, key in rows:
        c = step["cases"][key]
        busy = f"{100 * c['busy_share']:.0f}%" if busy_valid(c) else "not valid (profiler)"
        lines.append(f"| {label} | {_n(c['tokens_per_s'])} | {100 * c['mfu']:.1f}% | "
                     f"{c['peak_GiB']:.1f} GiB | {busy} |")
    return lines


def _layers(step: dict, kind: str) -> int:
    return step["cases"][f"{kind}_b4t4096"]["size"]["layers"]


def _size(step: dict, kind: str) -> str:
    size = step["cases"][f"{kind}_b4t4096"]["size"]
    return f"{size['dim']} × {size['layers']}"


def _step_text(step: dict, spread: list[dict]) -> list[str]:
    c = step["cases"]
    graph, fast, ref, llama, llama_m, gla_m = (
        c[k]["tokens_per_s"] for k in
        ("hybrid_fast_graph_b4t4096", "hybrid_fast_b4t4096", "hybrid_reference_b4t4096",
         "llama_sdpa_b4t4096", "llama_sdpa_matched_b4t4096", "fla_gla_matched_b4t4096"))
    h = c["hybrid_fast_b4t4096"]
    long_h, long_m = (c[f"{k}_fast_b1t16384"]["tokens_per_s"] for k in ("hybrid", "mla"))
    short_h, short_m = (c[f"{k}_fast_b4t4096"]["tokens_per_s"] for k in ("hybrid", "mla"))
    peak = c["hybrid_fast_graph_b4t4096"]["peak_GiB"]
    depth = load_config("hymo_750m").model.mtp_depth
    fewer = all(c[k]["flops_per_token"] < h["flops_per_token"]
                for k in ("llama_sdpa_b4t4096", "fla_gla_b4t4096"))
    gla = [r["fla_gla"] for r in spread]
    ahead = sum(r["hybrid_fast_graph"]["tokens_per_s"] > r["fla_gla"]["tokens_per_s"]
                for r in spread)
    kernels = [g["profile"]["kernel_ms_per_step"] for g in gla]
    return [
        f"In one run, the fast path is {fast / ref:.2f}× the reference path's tokens/s; "
        f"replayed as one CUDA graph (`benchmarks/cuda_graph.py`), {graph / ref:.2f}×, at "
        f"{100 * c['hybrid_fast_graph_b4t4096']['mfu']:.1f}% MFU and a {peak:.1f} GiB peak "
        "(3×, 35% MFU and 40 GiB were the aims). Against the peers at hymo's active size, "
        f"{graph / llama_m:.2f}× Llama's and {graph / gla_m:.2f}× fla GLA's; against Llama at "
        f"{_size(step, 'llama_sdpa')}, {graph / llama:.2f}×"
        + (f" (the peers do fewer FLOPs per token than hymo_750m, whose {depth} MTP depths each "
           "have a full-vocabulary head)" if fewer else "") + ". "
        f"fla's step waits on the host, so its tokens/s follow the machine: at "
        f"{_size(step, 'fla_gla')}, "
        f"{_n(min(g['tokens_per_s'] for g in gla))} to {_n(max(g['tokens_per_s'] for g in gla))} "
        f"over {len(spread)} machines ({', '.join(r['file'] for r in spread)}) with its kernels "
        f"taking {min(kernels):.0f}–"
        f"{max(kernels):.0f} ms a step on each; the graphed hymo step was ahead on {ahead} of "
        f"them. At T = 16,384 (B = 1) the hybrid's {_n(long_h)} tokens/s are "
        f"{long_h / long_m:.2f}× the all-MLA stack's {_n(long_m)}; at 4,096 the ratio is "
        f"{short_h / short_m:.2f}×, not the document's \"3–5× faster\" than all-attention. "
        "Where a busy share reads \"not valid\", the profile charged more kernel time than the "
        "step took (chapter 17).",
    ] if step["ratios"] else []


def _precision_text(delta: dict) -> list[str]:
    p = delta["precision"]["gla"]
    x3, tf = p["tf32x3"], p["tf32"]
    return [f"The price of fp32-grade products ({delta['file']}, kernel alone, B = 4, T = 4,096, "
            f"fp32): forward {_ms(x3['fwd_ms'])} and forward + backward {_ms(x3['fwdbwd_ms'])} "
            f"with \"tf32x3\", against {_ms(tf['fwd_ms'])} and {_ms(tf['fwdbwd_ms'])} with TF32, "
            f"for a relative error of {x3['errors']['o']:.1e} instead of {tf['errors']['o']:.1e} "
            "in the output."]


def _gla_forward_text() -> list[str]:
    """The gla forward alone at the chosen setting, every shape and dtype, against the copy."""
    from hymo_book import kernel_forward as kf

    latest, words = kf.latest_forward(), {"bfloat16": "bf16", "float32_tf32": "fp32 with TF32",
                                           "float32": "fp32"}
    shapes = dict.fromkeys(shape for shape, _ in latest)
    parts = []
    for shape in shapes:
        cells = ", ".join(f"{words[k]} {_ms(latest[(shape, k)]['fwd_ms'])} "
                          f"({latest[(shape, k)]['ratio']:.2f}×)" for k in words)
        parts.append(f"{shape.replace('_', ' ')}: {cells}")
    met = [f"{words[k]} at {shape.replace('_', ' ')}" for (shape, k), r in latest.items()
           if r["ratio"] <= 3.0]
    mixer = kf.dispatch_table().rows
    gap = max(abs(r["unchecked_ms"] - r["alone_ms"]) for r in mixer)
    return [f"On the tree of the next runs the gla kernel's forward ran in one launch over "
            "chunks of 128 steps, each program handing its chunk's end state to the next (a "
            "forward the library has since deleted). Its forward alone "
            f"({kf.LATEST_RUN}, `python3 benchmarks/gated_delta_profile.py --gla-forward`), "
            f"and in brackets against a copy of its bytes: {'; '.join(parts)}. The target is at "
            f"most 3×: met only in {', '.join(met) if met else 'none'}. Through the dispatcher "
            f"as the GDN mixer calls it (no value check, no host sync) the forward takes at most "
            f"{1000 * gap:.0f} µs more than the kernel alone ({kf.DISPATCH_RUN})."]


def _delta_text(tuned: dict, runs: tuple[str, ...], walk_run: dict) -> list[str]:
    """The delta rule beside chunk_kda at every shape of the side-by-side ``runs`` (a table),
    TF32 from the tuned kernel's first run, and the single walk on one long sequence."""
    _, picked = delta_entries(runs)
    lines = ["**The true gated delta rule**: the chunked kernel beside fla's `chunk_kda` (the same "
             "rule), H = 40, S = D = 32, fp32-grade products for fp32 inputs, each shape in one "
             f"run ({', '.join(runs)}; one tree):", "",
             "| B, T, dtype | hymo: fwd / fwd+bwd / peak | fla `chunk_kda` | fwd+bwd ratio | "
             "peak ratio |", "|---|---|---|---|---|"]
    for _, entry in picked.values():
        ours, kda = entry["results"]["chunk_triton"], entry["results"]["fla_chunk_kda"]
        dtype = {"float32": "fp32", "bfloat16": "bf16"}.get(entry["dtype"], entry["dtype"])
        cells = [f"{_ms(r['fwd_ms'])} / {_ms(r['fwdbwd_ms'])} / {_n(r['peak_mib'])} MiB"
                 for r in (ours, kda)]
        lines.append(f"| {entry['B']}, {entry['T']:,}, {dtype} | {cells[0]} | {cells[1]} | "
                     f"{ours['fwdbwd_ms'] / kda['fwdbwd_ms']:.3f} | "
                     f"{ours['peak_mib'] / kda['peak_mib']:.2f} |")
    res = tuned["peers"]["B4_T4096_H40_float32"]["results"]
    tf, kda = res["chunk_triton_kernel_tf32"], res["fla_chunk_kda"]
    one = walk_run["peers"]["B1_T16384_H40_bfloat16"]["results"]
    walk = one["chunk_triton"]["fwdbwd_ms"] / one["fla_chunk_kda"]["fwdbwd_ms"]
    lines += ["", "The target is at most 0.8× `chunk_kda`'s forward + backward. With TF32 products "
              f"(the opt-in) at B = 4 in fp32, {_ms(tf['fwd_ms'])} / {_ms(tf['fwdbwd_ms'])}: "
              f"{tf['fwdbwd_ms'] / kda['fwdbwd_ms']:.2f}× ({tuned['file']}). On one sequence of "
              "T = 16,384 the chunk-to-chunk passes now run over groups of chunks; as one walk "
              f"they took {walk:.2f}× "
              f"`chunk_kda`'s forward + backward ({walk_run['file']}): too few programs to fill "
              "the GPU (chapter 21)."]
    return ["\n".join(lines)]


def _delta_forward_text() -> list[str]:
    """The delta forward alone: in passes against the setting now in use for bf16."""
    from hymo_book import kernel_forward as kf

    rows = {(r["shape"], r["setting"]): r for r in kf.delta_chain_table().rows}
    now = kf.delta_latest_forward()
    passes, parts = kf.delta_setting_label({}), []
    for (shape, key), r in now.items():
        if key != "bfloat16":
            continue
        old = rows[(shape, passes)]["bfloat16"]
        parts.append(f"{shape.replace('_', ' ')} {_ms(old['fwd_ms'])} → {_ms(r['fwd_ms'])} "
                     f"({r['ratio']:.1f}× a copy of its bytes), forward + backward "
                     f"{_ms(old['fwdbwd_ms'])} → {_ms(r['fwdbwd_ms'])}")
    worst = max(r["ratio"] for r in now.values())
    setting = next(r["setting"] for (_, key), r in now.items() if key == "bfloat16")
    return [f"Since that run, bf16 and fp16 inputs take the delta rule's forward in one launch "
            f"(over {setting.removeprefix('one launch, ')}; chapter 21), fp32 keeps the "
            "passes: in bf16, the kernel alone, "
            f"{'; '.join(parts)} ({', '.join(kf.DELTA_CHAIN_RUNS)}, `python3 "
            "benchmarks/gated_delta_profile.py --delta-forward-changes`; not yet timed beside "
            "`chunk_kda`). The forward's target of at most 4× the copy floor is still missed: "
            f"at worst {worst:.1f}× at those settings."]


def _since_text() -> list[str]:
    """What changed in the forwards after every run above, and the static count that is
    all that measures it so far."""
    from hymo_book import kernel_forward as kf

    table = kf.sass_table()
    walk = next(r for r in table.rows if r["loop"].startswith("gla") and r["dtype"] == "bf16")
    ratios = [r["one_product"] / r["levels"] for r in table.rows]
    pairs = kf.pairs_table().rows
    delta16 = [r for r in pairs if r["rule"] == "delta" and r["dtype"] == "bfloat16"]
    device = [r["auto_device_ms"] / r["levels_device_ms"] for r in pairs if r["rule"] == "gla"]
    from hymo_book.kernel_report import targets_summary

    missed = not any(r["met"] for r in targets_summary().rows
                     if r["target"].endswith('"auto"') and ("copy" in r["target"]
                                                            or "floor" in r["target"]))
    auto_run = load_result(DELTA_AUTO_PEERS)
    beside = auto_run["peers"]["B4_T4096_H40_bfloat16"]["targets"]["chunk_triton"]
    runs = ", ".join(name for names in kf.PAIRS_RUNS.values() for name in names)
    return ["Since all these runs, both rules' forwards form a chunk's decay-weighted pairs by "
            "one product where its decay keeps every factor within 2^±64 (the test of these "
            "runs; widened since, below), and by the levels "
            "elsewhere, in two launches with one form each (then `CONFIGS[\"pairs\"] = "
            "\"auto\"`; the only way since, `hymo_mini.ops.utils.pairs`): one kernel that "
            "branched between the two gave wrong outputs on the H200 "
            "(benchmarks/GATED_DELTA_NOTES.md). Where no backward can follow, the delta forward "
            "writes neither Mk nor (I + M)⁻¹. The forward alone, levels → auto "
            f"({runs}): delta bf16 "
            + ", ".join(f"{r['shape'].replace('_', ' ')} {_ms(r['levels_ms'])} → "
                        f"{_ms(r['auto_ms'])} ({r['auto_ratio']:.1f}× a copy of its bytes)"
                        for r in delta16)
            + f"; gla, the launches' device time {min(device):.2f} to {max(device):.2f} of the "
            "levels', the time per call not always lower (chapter 21). The copy-floor targets "
            f"are {'all still missed' if missed else 'not all missed'} with it. Compiled for "
            "sm90 by the GPU's "
            f"Triton on a CPU ({kf.SASS_RUN}, `python3 benchmarks/sass_count.py`; a static count, "
            f"no kernel ran), a 16-step block of the gla walk is {walk['one_product']:,} "
            f"instructions by one product against {walk['levels']:,} by the levels in bf16, and "
            f"the forwards' loops keep {min(ratios):.2f} to {max(ratios):.2f} of the levels' "
            "count (chapter 21). With \"auto\", one run beside `chunk_kda` at "
            f"B = 4, T = 4,096 in bf16 ({auto_run['file']}): forward + backward "
            f"{beside['fwdbwd_over_kda']:.2f}× `chunk_kda`'s, peak {beside['peak_over_kda']:.2f}×, "
            f"forward {beside['fwd_over_floor']:.1f}× the copy floor."]


def _standing_text() -> list[str]:
    """Both rules beside their fla peers on the final tree, one run per rule."""
    from hymo_book.kernel_report import (
        GLA_BF16X6_RUN,
        GLA_TF32_RUN,
        STANDING,
        standing,
        tf32_beside_peer,
    )

    rows = standing().rows

    def span(rule, dtype, key):
        vals = [f"{r[key]:.2f}" for r in rows if r["rule"] == rule and r["dtype"] == dtype]
        low, high = min(vals, key=float), max(vals, key=float)
        return low if low == high else f"{low}–{high}"

    files = ", ".join(run for runs, *_ in STANDING.values() for run in runs)
    parts = []
    for rule, peer in (("gla", "chunk_gla"), ("delta", "chunk_kda")):
        parts.append(f"{rule} against `{peer}`: forward + backward "
                     f"{span(rule, 'bfloat16', 'fwdbwd_ratio')}× in bf16 and "
                     f"{span(rule, 'float32', 'fwdbwd_ratio')}× in fp32 (limit "
                     f"{STANDING[rule][4]:g}×), peak {span(rule, 'bfloat16', 'peak_ratio')}× and "
                     f"{span(rule, 'float32', 'peak_ratio')}×, the forward "
                     f"{span(rule, 'bfloat16', 'fwd_vs_copy')}× and "
                     f"{span(rule, 'float32', 'fwd_vs_copy')}× a copy of its bytes (limit "
                     f"{STANDING[rule][3]:g}×)")
    # the gla kernel alone in fp32, each precision beside chunk_gla, one run each: with three
    # TF32 products in both directions, then with six bf16 products in the backward
    before, after = tf32_beside_peer(GLA_TF32_RUN), tf32_beside_peer(GLA_BF16X6_RUN)

    def grade(table, key):
        vals = [r[key]["fwdbwd_ratio"] for r in table.rows]
        return f"{min(vals):.2f}–{max(vals):.2f}×"

    def verdict(table, key):
        return "met" if all(r[key]["met"] for r in table.rows) else "did not meet"

    return ["**Both rules on the final tree**, as the GDN mixer calls them (no value check), "
            "beside their fla peers at both shapes and dtypes, one run per rule "
            f"({files}); fp32 inputs take fp32-grade products, fla's TF32: "
            + "; ".join(parts) + ". The gla rule's fp32 forward + backward misses its target "
            "since fp32-grade products became the default. On a later tree whose backward makes "
            "each fp32-grade product from six bf16 products instead of three TF32 ones "
            f"({GLA_BF16X6_RUN}), the gla kernel alone took {grade(after, 'default')} "
            f"`chunk_gla`'s forward + backward with the default (against "
            f"{grade(before, 'default')} with three TF32 products in {GLA_TF32_RUN}): it "
            f"{verdict(after, 'default')} the {STANDING['gla'][4]:g}× limit; with the TF32 opt-in "
            "(`torch.backends.cuda.matmul.allow_tf32 = True`) it took "
            f"{grade(after, 'tf32')} and {verdict(after, 'tf32')} it (chapter 21). "
            + _half_text()]


def _span(values, digits=2) -> str:
    """The least and the largest of ``values`` as "low–high" (one number if they print
    alike)."""
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return low if low == high else f"{low}–{high}"


def _shared_rate_text() -> str:
    """The one product by the shared rate: the A/B of the two trees, and both rules on the
    model's rates beside their peers."""
    from hymo_book.kernel_report import (
        GLA_MODEL_RUNS,
        SHARED_RATE_AB_RUN,
        STANDING_MODEL_RATES,
        gla_model_rates,
        shared_rate_ab,
        standing,
    )
    from hymo_book.kernel_targets import kernel_only

    ab = shared_rate_ab().rows

    span = _span

    def ab_span(rule, rates):
        return span([r["ratio"] for r in ab if (r["rule"], r["rates"]) == (rule, rates)])

    delta = standing(STANDING_MODEL_RATES).rows
    gla = {r["products"]: r for r in gla_model_rates().rows}
    before = kernel_only().rows[0]
    issue = before["results"]["chunk_triton_kernel"]["fwd_ms"] / before["copy_ms"]
    files = ", ".join([*GLA_MODEL_RUNS, *STANDING_MODEL_RATES["delta"][0]])
    return ("**One product at any decay where a head's keys share one rate** (chapter 10): the "
            "decay every key shares leaves the product as one factor per pair in [0, 1], so the "
            "test is on how far a head's rates spread, not how large they are, and every head "
            "of the GDN block passes it at initialisation. Both forwards as the mixer calls them, "
            "the tree before the change against the tree after it, alternated in one process "
            f"({SHARED_RATE_AB_RUN}, `python3 benchmarks/tree_ab.py`): on the model's rates the "
            f"gla forward took {ab_span('gla', 'model')}× its time and the delta forward "
            f"{ab_span('delta', 'model')}×; on the weak rates, where every chunk took the product "
            f"before, {ab_span('gla', 'weak')}× and {ab_span('delta', 'weak')}×; the outputs "
            + ("agreed in every case" if all(r["agree"] for r in ab) else "did not all agree")
            + f". On the model's rates ({files}): the gla kernel alone in fp32 with TF32 "
            f"products is {gla['TF32']['fwd_vs_copy']:.2f}× a copy of its bytes (limit "
            f"{gla['TF32']['limit']:g}×; {issue:.2f}× in the run the issue quotes) and "
            f"{gla['bf16']['fwd_vs_copy']:.2f}× in bf16; the delta rule beside `chunk_kda`: "
            f"forward + backward {span([r['fwdbwd_ratio'] for r in delta])}×, peak "
            f"{span([r['peak_ratio'] for r in delta])}×, the forward "
            f"{span([r['fwd_vs_clone'] for r in delta], 1)}× a clone of its bytes and "
            f"{span([r['fwd_vs_copy'] for r in delta], 1)}× the bytes moved once (limit "
            f"{delta[0]['fwd_limit']:g}×). " + _groups_text() + " " + _fused_text())


def _groups_text() -> str:
    """The delta rule on the model's rates again, its walks over groups set anew."""
    from hymo_book.kernel_report import STANDING_GROUPS, standing
    from hymo_mini.ops.gated_delta.chunk_triton import GROUP_CHUNKS

    rows = standing(STANDING_GROUPS, clone=True).rows
    worst = max(rows, key=lambda r: r["fwd_vs_clone"])
    missed = [r for r in rows if not r["met"]["clone"]]
    return ("With the delta forward's walks over groups of chunks set anew (a program sums up "
            f"a head's whole [M | B], groups of {GROUP_CHUNKS} chunks, a head's "
            "whole state a walk; "
            f"{STANDING_GROUPS['delta'][0][0]}): the forward "
            f"{_span([r['fwd_vs_clone'] for r in rows])}× a clone of its bytes, "
            + (f"the limit missed only at {worst['shape']} in {worst['dtype']}"
               if len(missed) == 1 and missed[0] is worst else
               "within the limit everywhere" if not missed else
               f"the limit missed in {len(missed)} cases")
            + f"; forward + backward {_span([r['fwdbwd_ratio'] for r in rows])}× `chunk_kda`'s, "
            f"peak {_span([r['peak_ratio'] for r in rows])}×.")


def _fused_text() -> str:
    """The delta rule on the model's rates with the walks over groups forming the outputs."""
    from hymo_book.kernel_report import (
        STANDING_WALK_OUTPUTS,
        STANDING_WALK_OUTPUTS_H200,
        STANDING_WALK_WARPS,
        on_gpu,
        standing,
        walk_outputs_ab,
    )

    h100, h200, warps = (standing(runs, clone=True).rows for runs in (
        STANDING_WALK_OUTPUTS, STANDING_WALK_OUTPUTS_H200, STANDING_WALK_WARPS))
    ab = walk_outputs_ab().rows

    def clone(rows):
        missed = [f"{r['shape']} in {r['dtype']}" for r in rows if not r["met"]["clone"]]
        return (f"{_span([r['fwd_vs_clone'] for r in rows])}× a clone of its bytes, "
                + ("within the limit everywhere" if not missed
                   else "the limit missed at " + ", ".join(missed)))

    return ("With the walks over groups forming each chunk's outputs where nothing is kept for "
            f"a backward ({STANDING_WALK_OUTPUTS['delta'][0][0]}, "
            f"{STANDING_WALK_OUTPUTS_H200['delta'][0][0]}), the long fp32 forward took "
            f"{_span([r['ratio'] for r in ab])}× the old settings' time on the same card; "
            f"the forward on an H100 is {clone(h100)}, on an H200 {clone(h200)}. With those "
            f"walks at 2 warps ({STANDING_WALK_WARPS['delta'][0][0]}, the "
            f"long sequence on the H200): {clone(warps)}; forward + backward "
            f"{_span([r['fwdbwd_ratio'] for r in warps])}× `chunk_kda`'s, peak "
            f"{_span([r['peak_ratio'] for r in warps])}×. The walks forming the outputs are gone "
            "since (an output kernel forms them again); the walks over groups still run at "
            f"{on_gpu(DELTA_LAUNCHER, 'LAUNCH')['group_state_fwd']['num_warps']} warps.")


DELTA_LAUNCHER = "hymo_mini.ops.gated_delta.chunk_triton"
GLA_LAUNCHER = "hymo_mini.ops.gla.chunk_triton"


def _kernels_now_text() -> str:
    """What the chunked kernels run now, read from the library (chapter 21's first section),
    before the runs of earlier trees."""
    from hymo_book.kernel_report import on_gpu, recipe

    gla = [s for s in recipe(GLA_LAUNCHER) if s["direction"] == "forward"]
    one = on_gpu(DELTA_LAUNCHER, "ONE_LAUNCH")
    steps = [s for s in recipe(DELTA_LAUNCHER) if s["direction"] == "forward"]
    fwd, bwd = (products_on(torch.float32, forward, interpreter=False) for forward in (True, False))
    return ("**The kernels now.** The chunked kernels were restructured after the runs below "
            "(issue #48: `hymo_mini/ops/utils` shared by both rules, each rule's kernels in "
            "files named after their step). The gla forward is "
            f"{len(gla)} launches ("
            + ", ".join(f"`{s['kernel']}`" for s in gla)
            + "); the delta forward is one launch for "
            + " and ".join(str(d).removeprefix("torch.").replace("bfloat16", "bf16")
                           .replace("float16", "fp16") for d in one)
            + f" inputs, over stretches of {on_gpu(DELTA_LAUNCHER, 'STRETCH')} chunks, and "
            f"{len(steps)} steps for fp32 ("
            + ", ".join(f"`{s['kernel']}`" for s in steps)
            + f"); fp32 inputs multiply \"{fwd}\" forward and \"{bwd}\" backward on a GPU. "
            "The runs measured earlier trees, and the settings they compare that the library no "
            "longer has (the gla forward in one launch, redo, the walks forming the outputs, "
            "`Direct` launching, among others) are history; chapter 21 says which.")


def _half_text() -> str:
    """Both rules' forwards of bf16 inputs with bf16 products, the GPU's default since."""
    from hymo_book.kernel_report import DELTA_TARGETS
    from hymo_book.kernel_settings import DELTA_HALF_RUNS, HALF_RUNS, device_ratios, settings_table
    from hymo_book.kernel_targets import TARGETS

    half = settings_table(HALF_RUNS)
    ratios = [r["device_ratio"] for r in half.rows if r["change"]]
    limit = TARGETS["fwd_vs_copy"]
    worst = device_ratios(half, {"half_products": "bf16"})["bfloat16"]["device_ratio"]
    delta = settings_table(DELTA_HALF_RUNS)
    in_use = [r["device_ratio"] for r in delta.rows if not r["change"] and r["dtype"] == "bfloat16"]
    delta_limit = DELTA_TARGETS["fwd_over_floor"]
    return ("With bf16 products in the forward of 16-bit inputs (the GPU's default since; "
            f"{', '.join(HALF_RUNS['gla'])}), the gla forward's device time is "
            f"{min(ratios):.2f}–{max(ratios):.2f}× a copy of its bytes (limit {limit:g}×: "
            f"{'met' if worst <= limit else 'missed'}); the delta forward's, with the same "
            f"products ({', '.join(DELTA_HALF_RUNS['delta'])}), "
            f"{min(in_use):.2f}–{max(in_use):.2f}× (limit {delta_limit:g}×: "
            f"{'met' if max(in_use) <= delta_limit else 'missed'}).")


def _gla_table(gdn: dict) -> list[str]:
    lines = ["| B, T, H = 40, S = D = 32 | hymo chunk kernel: fwd / fwd+bwd / peak | fla "
             "`chunk_gla` | ratio |", "|---|---|---|---|"]
    for entry in gdn["shapes"].values():
        ours, peer = entry["results"]["chunk_triton"], entry["results"]["fla_chunk"]
        ratio = " / ".join(f"{ours[m] / peer[m]:.2f}" for m in ("fwd_ms", "fwdbwd_ms", "peak_mib"))
        dtype = {"float32": "fp32", "bfloat16": "bf16"}.get(entry["dtype"], entry["dtype"])
        cells = [f"{_ms(r['fwd_ms'])} / {_ms(r['fwdbwd_ms'])} / {_n(r['peak_mib'])} MiB"
                 for r in (ours, peer)]
        lines.append(f"| {entry['B']}, {entry['T']}, {dtype} | {cells[0]} | {cells[1]} | {ratio} |")
    return lines


def _recurrent_text(rec: dict) -> list[str]:
    ratios, speedups = [], []
    for entry in rec["shapes"].values():
        res = entry["results"]
        for m in ("fwd_ms", "fwdbwd_ms"):
            ratios.append(res["recurrent_triton"][m] / res["fla_fused_recurrent"][m])
        if "naive" in res:
            speedups += [res["naive"]["fwd_ms"] / res[k]["fwd_ms"]
                         for k in ("recurrent_triton", "recurrent_triton_kernel")]
    return [f"**The recurrent kernel** (the document's design) against fla's `fused_recurrent_gla` "
            f"({rec['file']}): {min(ratios):.2f}–{max(ratios):.2f}× fla's time forward and forward "
            f"+ backward, in both dtypes and both shapes, and {min(speedups):.0f}× to "
            f"{max(speedups):.0f}× faster than the naive loop where the loop was timed (B = 4, "
            "T = 4,096; through the dispatcher and kernel alone). The document claims \"~8,000×\", "
            "counting launches that a loop vectorised over batch and heads never makes."]


def _fsdp_text(run: dict) -> list[str]:
    plain, fsdp = (next(r for r in run["runs"] if r["mode"] == m) for m in ("plain", "fsdp"))
    return [f"**FSDP2 on one GPU** ({run['file']}, `python3 benchmarks/fsdp_one_gpu.py`): "
            f"`{run['config']}`, B = {run['batch']}, T = {run['seq_len']:,}, "
            f"{fsdp['tokens_per_s']:,.0f} tokens/s and a {fsdp['peak_allocated_gib']:.1f} GiB "
            f"peak under FSDP2 in a process group of one, against {plain['tokens_per_s']:,.0f} "
            f"and {plain['peak_allocated_gib']:.1f} GiB for the plain step, each timed over "
            f"{fsdp['steps_timed']} step. Runs on several GPUs have not been measured: no machine "
            "with more than one GPU was lent. Chapter 18 sets `memory_per_gpu` beside the "
            "measured peak."]


def _mqar_text(report: dict) -> list[str]:
    counts = seeds_learned(report)
    last = [counts[k] for k in counts if "MLA last" in k]
    others = [counts[k] for k in counts if "MLA last" not in k]
    return [f"**Where the MLA layers go** ({report['file']}, `python3 benchmarks/mqar_seeds.py`): "
            f"associative recall, {len(counts)} four-layer models, "
            f"{len(report['settings']['seeds'])} seeds each, {report['settings']['steps']:,} "
            f"steps. The 3:1 hybrid with MLA last in its group learned in "
            f"{sum(a for a, _ in last)} of {sum(b for _, b in last)} runs; MLA first, all-MLA "
            f"and all-GDN in {sum(a for a, _ in others)} of {sum(b for _, b in others)}. Hence "
            "the default `mla_position=\"last\"` (chapter 19)."]


def measured_section() -> str:
    """The section's markdown, every number read from book/results/."""
    step = load_result(TRAIN_STEP, need=("cases",))
    spread = peer_spread_table().rows
    delta = load_result(GATED_DELTA_RUN, need=("precision", "peers"))
    tuned = load_result(DELTA_PEERS_RUN, need=("peers",))
    lines = ["Every number in this section is read from a results file in `book/results/` that "
             "records the hardware (one NVIDIA H200; torch 2.11, Triton 3.6, fla-core 0.6.0), the "
             "date, the commit and the command; the peer ran in the same run. "
             "`python3 book/hymo_book/readme.py` writes it.", "",
             f"**The whole training step** ({step['file']}, `python3 benchmarks/train_step.py`): "
             "`hymo_750m`, bf16 autocast over fp32 weights, fused AdamW, B = 4, T = 4,096; the "
             "fast path is the grouped MoE dispatch, the compiled GDN block, MLA attention and "
             "experts' activation and the chunked loss, the reference path the loop over "
             "experts, the eager blocks and activation and the plain loss; every row in the same "
             "run.", ""]
    lines += _step_table(step) + [""] + _step_text(step, spread) + [""]
    gdn = load_result("gdn_h200_2026-11-30.json", need=("shapes",))
    rec = load_result("gdn_recurrent_h200_2026-11-30.json", need=("shapes",))
    lines += [_kernels_now_text(), ""]
    fwd, bwd = (products_on(torch.float32, forward, interpreter=False) for forward in (True, False))
    lines += [f"**The GDN recurrence, the document's rule**: the chunked kernel against fla's "
              f"`chunk_gla` ({gdn['file']}, `python3 benchmarks/gdn.py`), measured with TF32 "
              "products, which are now an opt-in (PyTorch's `allow_tf32`): fp32 inputs get "
              f"fp32-grade products by default (on a GPU \"{fwd}\" forward and \"{bwd}\" "
              "backward; the runs below say which they had).", ""]
    lines += _gla_table(gdn) + [""] + _precision_text(delta) + [""] + _gla_forward_text() + [""]
    lines += ["![GDN time against T](figures/gdn_benchmark_sweep.png)", ""]
    long_run = load_result(DELTA_LONG_RUN, need=("peers",))
    lines += _delta_text(tuned, DELTA_SIDE_BY_SIDE, long_run) + [""] + _delta_forward_text()
    lines += [""] + _since_text() + [""] + _standing_text() + [""] + [_shared_rate_text()]
    lines += [""] + _recurrent_text(rec)
    lines += [""]
    lines += ["![GDN kernel benchmark](figures/gdn_benchmark.png)", ""]
    lines += _fsdp_text(load_fsdp()) + [""]
    lines += _mqar_text(load_seeds())
    return "\n".join(lines)


def parts_section() -> str:
    """The parts of the book with their chapters' numbers and titles, in reading order."""
    lines = ["| part | chapters |", "|---|---|"]
    for caption, stems in PARTS:
        titles = [f"{s[:2]} {_title_and_summary(s)[0]}" for s in stems
                  if (BOOK / f"{s}.ipynb").exists()]
        lines.append(f"| {caption} | {' · '.join(titles)} |")
    return "\n".join(lines)


# marker name -> the function that writes what stands between its two markers
SECTIONS = {"measured": measured_section, "parts": parts_section}


def rewrite(readme: Path = README, check: bool = False) -> bool:
    """Put every generated section between its markers; returns whether README.md was
    already up to date (with ``check``, nothing is written)."""
    return rewrite_sections(readme, SECTIONS, check)


def main(argv: list[str] | None = None) -> int:
    return markers.main(argv, "README.md", rewrite, __doc__.splitlines()[0])


if __name__ == "__main__":
    raise SystemExit(main())
