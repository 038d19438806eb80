"""The document's claims about parameter counts and tensor shapes (section 11)."""

from __future__ import annotations

from hymo_book.claims.core import Claim
from hymo_book.claims.values import (
    cfg,
    flops,
    n_gdn,
    n_params,
    stored,
    train_flops_per_token,
)
from hymo_book.prose import fmt
from hymo_mini.analysis import costs


def _n_mla() -> int:
    return len(cfg().mla_positions)


def _shape_claim(claim_id: str, index: int) -> Claim:
    """Section 11's listed shape number ``index`` (hymo_book.forward_pass.SECTION_11),
    against the traced pass of hymo_750m on the meta device."""
    from hymo_book.forward_pass import SECTION_11, shape_in

    section, tensor, line, *_ = SECTION_11[index]

    def traced() -> str:
        from hymo_book.forward_pass import section_11_shapes

        return str(section_11_shapes()[index].traced)

    def note() -> str:
        from hymo_book.forward_pass import section_11_shapes

        row = section_11_shapes()[index]
        return f"traced: {row.module}"

    documented = str(shape_in(line))
    return Claim(claim_id, section, f"B=2, T=128: {tensor} '{line}'", documented, traced, "",
                 note)


CLAIMS: list[Claim] = [
    # section 11
    Claim("embed-act", "11.1", "embedding output 2 × 128 × 896 × 4 B = 0.92 MB", 0.92e6,
          lambda: 2 * 128 * cfg().dim * 4, "MB"),
    Claim("scores-mem", "11.2.1", "attention scores (2, 16, 128, 128) = 0.52 MB", 0.52e6,
          lambda: 2 * cfg().n_heads * 128 * 128 * 4, "MB",
          lambda: f"{fmt(2 * cfg().n_heads * 128 * 128)} values × 4 bytes"),
    Claim("bc-mem", "11.3.1", "b and c (2, 128, 40, 32) × 2 = 0.65 MB", 0.65e6,
          lambda: 2 * 2 * 128 * cfg().gdn_n_heads * cfg().gdn_d_state * 4, "MB",
          lambda: (f"{fmt(2 * 2 * 128 * cfg().gdn_n_heads * cfg().gdn_d_state)} "
                           "values × 4 bytes")),
    Claim("state-mem", "11.3.1", "recurrent state (2, 40, 32, 32) = 0.25 MB", 0.25e6,
          lambda: 2 * cfg().gdn_n_heads * cfg().gdn_d_state * cfg().gdn_headdim * 4, "MB",
          lambda: (f"{fmt(2 * cfg().gdn_n_heads * cfg().gdn_d_state * cfg().gdn_headdim * 4)}"
                           " bytes in fp32")),
    Claim("gdn-cheaper", "11.3.2", "GDN is 2.3× cheaper per layer than MLA", 2.3,
          lambda: (costs.mla_cost(cfg(), 4096).flops_per_token
                   / costs.gdn_cost(cfg(), 4096).flops_per_token), "×",
          lambda: ("forward FLOPs per token at T=4096, attention layers without the MoE; by "
                   f"parameters GDN is the larger ({fmt(n_params('gdn') / 1e6 / n_gdn())}M "
                   f"against {fmt(n_params('mla') / 1e6 / _n_mla())}M)")),
    Claim("head-weight", "11.5.1", "W_vocab (896, 64256) × 4 bytes = 228 MB", 228e6,
          lambda: cfg().dim * cfg().vocab_size * 4, "MB",
          lambda: f"{fmt(cfg().dim * cfg().vocab_size * 4 / 2 ** 20)} MiB"),
    Claim("logits-mem", "11.5.1", "logits (2, 128, 64256) × 4 bytes = 57.6 MB", 57.6e6,
          lambda: 2 * 128 * cfg().vocab_size * 4, "MB",
          "57.6 is the embedding's parameter count in millions"),
    Claim("train-mem", "11.5.2", "weights 4.51 GB + Adam 9.04 GB + activations ≈ 22.4 GB", 22.4e9,
          lambda: 12 * stored() + 67e6, "GB",
          lambda: (f"the listed items add up to {fmt((12 * stored() + 67e6) / 1e9)} GB "
                   f"({fmt((16 * stored() + 67e6) / 1e9)} GB with fp32 gradients)")),
    Claim("attn-412G", "11.6.1", "MLA attention costs 412 GFLOPs per token at 4K", 412e9,
          lambda: flops()["MLA attention core (q·k, p·v)"], "G",
          lambda: (f"{_n_mla()} layers × {cfg().n_heads} heads × ({cfg().head_dim} + "
                   f"{cfg().v_head_dim}) × (T + 1) with a causal mask (chapter 14)")),
    Claim("head-115M", "11.6.1", "output head 115M FLOPs per token", 115e6,
          lambda: flops()["output head (logits)"], "M"),
    Claim("moe-99M", "11.6.1", "MoE (8 layers) 99M FLOPs per token", 99e6,
          lambda: flops()["MoE (router, top-k routed, shared)"], "M",
          "2 FLOPs per active parameter: 99M is the routed experts' parameter count"),
    Claim("gdn-227M", "11.6.1", "GDN projections (in/g/out/skip) 227M FLOPs per token", 227e6,
          lambda: flops()["GDN projections (in, g, out, skip)"], "M",
          lambda: (f"right for the four named; b_proj, c_proj, dt_proj and the conv add "
                   f"{fmt(flops()['GDN projections (b, c, dt) and conv'] / 1e6)}M")),
    Claim("total-413G", "11.6.1", "forward ~413 GFLOPs per token at 4K", 413e9,
          lambda: flops()["total"], "G",
          lambda: (f"with the two MTP depths; {fmt(flops(include_mtp=False)['total'] / 1e9)} G "
                   "without them")),
    Claim("tput-arith", "11.6.2", "0.50 × 312 TFLOPS / 413G ≈ 378 tokens/s", 378,
          lambda: 0.5 * 312e12 / 413e9, "tok/s", "the division itself"),
    Claim("tput", "11.6.2", "~378 training tokens/s per H100 at 50% MFU", 378,
          lambda: 0.5 * 312e12 / train_flops_per_token(), "tok/s",
          "3 × the computed forward FLOPs at the document's 312 TFLOPS (an A100's bf16 peak)"),
    Claim("days", "11.6.2", "30B tokens at ~1,500 tok/s ≈ 5.7 days", 5.7 * 86_400,
          lambda: 30e9 / 1500, "days",
          lambda: f"30e9 / 1,500 tok/s = {fmt(30e9 / 1500 / 86_400)} days"),
    # section 11: shapes of the walk-through
    _shape_claim("q-shape", 0),
    _shape_claim("kv-latent-shape", 1),
    _shape_claim("v-shape", 2),
    _shape_claim("attn-out-shape", 3),
    _shape_claim("gdn-in-shape", 5),
    _shape_claim("gdn-bc-shape", 6),
]
