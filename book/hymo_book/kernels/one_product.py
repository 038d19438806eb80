"""Chapter 21: which chunks took one product in the runs, and the one product by the rate a
head's keys share.

:func:`benchmark_gates` draws each benchmark's inputs by its recipe and
:func:`one_product_shares` counts the work each forward took by one product on them;
:func:`shared_rate_ab` and :func:`gla_model_rates` read the runs of the change that lets a
head whose keys share one rate take the product at any decay.
"""

from __future__ import annotations

import math
import statistics

import torch

from hymo_book.kernels import forward as kernel_forward
from hymo_book.kernels.delta_forward import ab_caption
from hymo_book.results import CaptionedTable, load_result, run_caption
from hymo_mini.analysis.tables import TextTable

__all__ = ["benchmark_gates", "SHARE_RULES", "SHARE_GLA_CHUNK", "SHARE_GLA_BLOCK",
           "SHARE_DELTA_RUN", "one_product_shares", "SHARED_RATE_AB_RUN", "SHARED_RATE_AGREE",
           "GLA_MODEL_RUNS", "shared_rate_ab", "gla_model_rates"]

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
# (benchmarks/tree_ab.py). An earlier call on an H100 timed the change's first form, 6fe9877,
# the same way and on the spread rates too (not kept: git has it).
SHARED_RATE_AB_RUN = "one_rate_ab_h200_2026-12-05.json"
# the two trees' outputs agree when their relative difference (Frobenius) is below this
SHARED_RATE_AGREE = {"bfloat16": 1e-2, "float32": 1e-5}
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
    return CaptionedTable(table, ab_caption(SHARED_RATE_AB_RUN, run, run["command"]), rows)


def gla_model_rates() -> CaptionedTable:
    """The gla kernel alone on the model's rates beside chunk_gla (``GLA_MODEL_RUNS``): a row
    per run with the forward, forward + backward and peak memory against the peer's, and the
    forward against the bytes it must move once at the run's copy rate (limit 3x)."""
    from hymo_book.kernels.gdn_runs import load_reports

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

