"""Claims of sections 6 to 12 beyond :mod:`hymo_book.claims.sections_06_12`: the kernel
chapter's errata (section 6, with the measured times read from ``book/results/``), the
shapes of section 11's walk-through, and the throughput of section 1.1.3 as measured.
"""

from __future__ import annotations

from hymo_book.claims.core import Claim
from hymo_book.claims.values import launches_per_layer, loop_launches_per_step
from hymo_book.claims.values_measured import (
    STEP_RUN,
    copy_bandwidth,
    gpu,
    hybrid_over_all_mla,
)
from hymo_book.claims.values_models import kernel_facts, kernel_launches, non_power_of_two_runs
from hymo_book.prose import fmt


def _shape_claim(claim_id: str, index: int) -> Claim:
    """Section 11's listed shape number ``index`` (hymo_book.forward_pass.SECTION_11),
    against the traced pass of hymo_750m on the meta device."""
    from hymo_book.forward_pass import SECTION_11, _shape

    section, tensor, line, *_ = SECTION_11[index]

    def traced() -> str:
        from hymo_book.forward_pass import section_11_shapes

        return str(section_11_shapes()[index].traced)

    def note() -> str:
        from hymo_book.forward_pass import section_11_shapes

        row = section_11_shapes()[index]
        return f"traced: {row.module}"

    documented = str(_shape(line))
    return Claim(claim_id, section, f"B=2, T=128: {tensor} '{line}'", documented, traced, "",
                 note)


def _programs() -> str:
    facts = kernel_facts()
    return f"{facts['programs'][0][0]} programs for B = {facts['B']}, H = {facts['H']}"


CLAIMS_ERRATA_06_12: list[Claim] = [
    # section 1.1.3, as measured (the README's numbers)
    Claim("hybrid-3-5x", "1.1.3", "the 3:1 hybrid trains 3-5× faster than all attention", 3,
          lambda: hybrid_over_all_mla(4096), "×",
          lambda: (f"measured training tokens/s, hybrid over all-MLA, both on the fast path, one "
                   f"H200: {fmt(hybrid_over_all_mla(4096))}× at B = 4, T = 4,096 and "
                   f"{fmt(hybrid_over_all_mla(16384))}× at B = 1, T = 16,384 "
                   f"({STEP_RUN}). The table's baseline is unclear (its "
                   "slowest row is 16 MLA + 16 GDN); all-MLA, the slowest stack, is the reading "
                   "most favourable to the claim, compared with the range's low end")),
    # section 6
    Claim("launch-count-intro", "6", "4,096 launches × 40 heads × 4 batches = 655,360 launches",
          655_360, launches_per_layer, "",
          lambda: (f"{loop_launches_per_step()} kernels per step, counted by PyTorch's "
                   "dispatcher on the naive loop, times T = 4,096; batch and heads are "
                   "vectorised (section 6.1 then doubles the count)")),
    Claim("triton-launches", "6.1", "1 kernel launch per (batch, head) = 160 launches", 160,
          kernel_launches, "",
          lambda: (f"launches of the recurrent kernel's forward, counted under the Triton "
                   f"interpreter: one launch of a grid of programs ({_programs()})"),
          approx=0.0),
    Claim("hbm-3tbs", "6.3", "HBM bandwidth ~3 TB/s", 3e12, copy_bandwidth, "",
          lambda: (f"a device copy (read + write) measured {fmt(copy_bandwidth() / 1e12)} TB/s on "
                   f"the {gpu()} (gdn_recurrent_h200_2026-11-30.json); the document's table "
                   "gives 80 GB, an earlier GPU than the one measured, so the tolerance is "
                   "50%: the order of magnitude is what can be checked"), approx=0.5),
    Claim("recompute-2x", "6.5", "recomputing the states in the backward would double compute",
          2.0, lambda: (1 + 1 + 1) / (1 + 1), "×",
          "passes over the sequence: forward, replay, reverse against forward, reverse (the "
          "recurrent kernel replays from a checkpoint every C steps; the states kept drop "
          "C-fold)"),
    Claim("padding", "6.7", "Triton needs power-of-two sizes: inputs are padded", "needed",
          non_power_of_two_runs, "",
          "the recurrent kernel under the Triton interpreter on sizes that are not powers of "
          "two: blocks are the next power of two, loads and stores masked, no padded copies"),
    # section 11: shapes of the walk-through
    _shape_claim("q-shape", 0),
    _shape_claim("kv-latent-shape", 1),
    _shape_claim("v-shape", 2),
    _shape_claim("attn-out-shape", 3),
    _shape_claim("gdn-in-shape", 5),
    _shape_claim("gdn-bc-shape", 6),
]
