"""The document's claims of sections 6 to 12 and the appendix: kernel, RoPE, MoE, MTP,
forward pass, parameters, attention variants."""

from __future__ import annotations

from hymo_book.claims.core import Claim
from hymo_book.claims.values import (
    LAUNCH_S,
    active,
    batch_tokens,
    bf16_tie,
    cfg,
    flops,
    launches_per_layer,
    loop_launches_per_step,
    moe_layer,
    mtp_predictions,
    n_params,
    nope_positions,
    rotated_gdn_vectors,
    router_dtype,
    slowest_pair,
    stored,
    theta,
    train_flops_per_token,
)
from hymo_book.claims.values_measured import RECURRENT_RUN, gpu, recurrent_ms, speedup
from hymo_book.prose import fmt
from hymo_mini.analysis import costs


def _trajectory() -> int:
    c = cfg()
    return batch_tokens() * c.gdn_n_heads * c.gdn_d_state * c.gdn_headdim * 4


def _state_bytes() -> int:
    """One layer's recurrent state in fp32, as hymo_mini keeps it."""
    c = cfg()
    return c.gdn_n_heads * c.gdn_d_state * c.gdn_headdim * 4


def _mha_values() -> int:
    return cfg().n_heads * (cfg().head_dim + cfg().v_head_dim)


def _n_mla() -> int:
    return len(cfg().mla_positions)


def _n_gdn() -> int:
    return len(cfg().gdn_positions)


CLAIMS_06_12: list[Claim] = [
    # section 6
    Claim("launch-arith", "6.1", "1,310,720 launches × 10 µs = 13.1 s", 13.1,
          lambda: 1_310_720 * LAUNCH_S, "s", "the multiplication itself"),
    Claim("launch-count", "6.1", "8,192 kernels × 40 heads × 4 batches = 1,310,720 launches",
          1_310_720, launches_per_layer, "",
          lambda: (f"{loop_launches_per_step()} kernels per step, counted by PyTorch's "
                   "dispatcher on the naive loop, times T = 4,096 steps; the loop is vectorised "
                   "over batch and heads, so neither multiplies the count")),
    Claim("launch-time", "6.1", "the PyTorch loop: 13.1 s of launch overhead per layer", 13.1,
          lambda: recurrent_ms("naive") / 1e3, "s",
          lambda: (f"the whole naive loop, launches and work, measured forward on the {gpu()} "
                   f"at B = 4, T = 4,096, H = 40 ({RECURRENT_RUN}); its "
                   f"{fmt(launches_per_layer())} launches at the document's 10 µs would be "
                   f"{fmt(launches_per_layer() * LAUNCH_S)} s")),
    Claim("triton-launch", "6.1", "the Triton kernel: 160 launches × 10 µs = 1.6 ms", 1.6e-3,
          lambda: recurrent_ms("recurrent_triton_kernel") / 1e3, "ms",
          lambda: (f"the kernel alone, measured forward ({RECURRENT_RUN}): one launch of a "
                   "(B, H) grid, whose time is T dependent steps, not launch overhead")),
    Claim("speedup-8000", "6.1", "~8,000× faster (launch overhead)", 8000,
          lambda: speedup("recurrent_triton_kernel"), "×",
          lambda: (f"measured forward speed-up of the recurrent kernel over the naive loop "
                   f"({RECURRENT_RUN}): {fmt(speedup('recurrent_triton_kernel'))}× for the "
                   f"kernel alone, {fmt(speedup('recurrent_triton'))}× through the dispatcher; "
                   f"forward + backward {fmt(speedup('recurrent_triton_kernel', 'fwdbwd_ms'))}×. "
                   "The document's ratio counts launches a loop vectorised over batch and "
                   "heads never makes")),
    Claim("state-4kb", "6.3", "state 32 × 32 × 4 bytes = 4 KB per program", 4096,
          lambda: cfg().gdn_d_state * cfg().gdn_headdim * 4, ""),
    Claim("trajectory", "6.5", "saved states 4 × 4096 × 40 × 32 × 32 × 4 B = 2.6 GB per layer",
          2.6e9, lambda: (batch_tokens() * cfg().gdn_n_heads * cfg().gdn_d_state
                          * cfg().gdn_headdim * 4), "GB",
          lambda: (f"{fmt(_trajectory() / 1e9)} GB ({fmt(_trajectory() / 2 ** 30)} GiB) per GDN "
                   f"layer, {fmt(_n_gdn() * _trajectory() / 1e9)} GB for all {_n_gdn()}")),
    Claim("hbm-writes", "6.8", "HBM writes T×D + T×S×D: 1.5× more than T×D", 1.5,
          lambda: 1 + cfg().gdn_d_state, "×", "(T·D + T·S·D) / (T·D) = 1 + S"),
    # section 7
    Claim("theta-1", "7.2.3", "θ_1 = 1/10000^0.5 = 0.01", 0.01, lambda: theta(1), "",
          "θ_k = base^(−2k/32): the listed values use an exponent 2k/4"),
    Claim("theta-2", "7.2.3", "θ_2 = 1/10000^1.0 = 0.0001", 1e-4, lambda: theta(2), ""),
    Claim("theta-slowest", "7.2.3", "θ_0 = 1 is the slowest rotation", "k=0", slowest_pair, "",
          lambda: f"θ_0 = 1 rad/token is the fastest pair; {slowest_pair()} turns slowest"),
    Claim("rope-gdn", "7.6", "GDN rotates its value v (all 32 dims)", "v",
          rotated_gdn_vectors, "",
          "reading: b and c (found by shifting positions); only vectors that meet in a dot "
          "product give relative positions, rotating v writes absolute angles into the output "
          "(chapter 04)",
          versus="appendix: RoPE on the GDN keys b and c"),
    Claim("nope-positions", "3.3", "NoPE GDN layers {3, 7, ..., 27}", "3, 7, ..., 27",
          nope_positions, "",
          "reading: the GDN layer just before each MLA layer, the rule that gives the list "
          "for the text's layout (MLA first; after would be 1, 5, ..., 29). With the figure's "
          "layout, our default, the list's layers are MLA layers; before is 2, 6, ..., 30 "
          "and after would be 4, 8, ..., 28",
          versus="appendix: 'the GDN layer immediately after each MLA layer'"),
    # section 8
    Claim("expert", "8.5", "one SwiGLU expert: 896 × 2304 × 3 = 6.19M", 6.19e6,
          lambda: n_params("moe_shared") / len(cfg().mla_positions), "M"),
    Claim("capacity-2.6x", "8.1.2", "1.13B stored = 2.6× the 434M active", 2.6,
          lambda: stored() / active(), "×"),
    Claim("bf16-tie", "8.7", "0.1234567 and 0.1234570: equal in BF16, distinct in FP32",
          "bf16 equal, fp32 distinct", bf16_tie),
    Claim("router-fp32", "8.7", "the FP32 upcast keeps routing decisions precise",
          "fp32 routing", router_dtype, "",
          "reading: the text; hymo_mini keeps logits, probabilities and top-k in fp32",
          versus="the same section's code returns logits.to(x.dtype), i.e. bf16 again"),
    Claim("moe-active-layer", "12.2.4", "one MoE layer: 132.1M active parameters", 132.1e6,
          lambda: moe_layer("active"), "M",
          lambda: (f"reading: the section's own arithmetic, which is right "
                   f"({cfg().n_activated_experts} routed + {cfg().n_shared_experts} shared "
                   f"expert, plus the {fmt(cfg().dim * cfg().n_routed_experts)}-weight router it "
                   "leaves out)"),
          versus="same section: 2 × 6.19M + 6.19M = 18.57M"),
    Claim("moe-stored-layer", "12.2.4", "one MoE layer: 1,170.4M stored parameters", 1170.4e6,
          lambda: moe_layer("stored"), "M",
          "reading: the section's own arithmetic (16 routed + 1 shared expert, plus the router)",
          versus="same section: 16 × 6.19M + 6.19M = 105.2M"),
    Claim("moe-active-8", "12.2.4", "8 MoE layers: 148.6M active", 148.6e6,
          lambda: (n_params("moe_routed", "active") + n_params("moe_shared")
                   + n_params("moe_router")), "M"),
    Claim("moe-stored-8", "12.2.4", "8 MoE layers: 841.6M stored", 841.6e6,
          lambda: n_params("moe_routed") + n_params("moe_shared") + n_params("moe_router"), "M"),
    # section 9
    Claim("mtp-lengths", "9.2.2", "MTP head 0 predicts T−1 tokens, head 1 T−2", "T-1, T-2",
          mtp_predictions, "",
          "the depths produce T−1 and T−2 states, but only T−2 and T−3 have a target"),
    Claim("mtp-params", "12.2.5", "MTP heads: 2 × 6.19M = 12.38M", 12.38e6,
          lambda: n_params("mtp"), "M"),
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
                   f"parameters GDN is the larger ({fmt(n_params('gdn') / 1e6 / _n_gdn())}M "
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
    # section 12
    Claim("stored-gb", "12.1.1", "stored 1.13B × 4 bytes = 4.51 GB (BF16)", 4.51e9,
          lambda: 2 * stored(), "GB",
          lambda: f"4 bytes is fp32; bf16 weights take {fmt(2 * stored() / 1e9)} GB"),
    Claim("active-gb", "12.1.2", "active 434M × 4 bytes = 1.74 GB (BF16)", 1.74e9,
          lambda: 2 * active(), "GB", "again fp32 bytes labelled bf16"),
    Claim("efficiency", "12.1.3", "active / stored = 434M / 1.13B ≈ 40%", 0.40,
          lambda: active() / stored(), "%"),
    Claim("embedding", "12.2.1", "embedding 64,256 × 896 = 57.6M", 57.6e6,
          lambda: n_params("embedding"), "M"),
    Claim("gdn-layer", "12.2.2", "one GDN block: ~8.07M parameters", 8.07e6,
          lambda: n_params("gdn") / len(cfg().gdn_positions), "M"),
    Claim("gdn-total", "12.2.2", "24 GDN blocks: 193.7M", 193.7e6, lambda: n_params("gdn"), "M"),
    Claim("gdn-state-80k", "12.2.2", "recurrent state [40, 32, 32] bf16 = 80 KB per layer",
          80 * 2 ** 10, lambda: cfg().gdn_n_heads * cfg().gdn_d_state * cfg().gdn_headdim * 2,
          "KiB", lambda: (f"hymo_mini keeps the state in fp32: "
                          f"{fmt(_state_bytes() / 1024)} KiB")),
    Claim("mla-total", "12.3", "8 MLA attentions: 22.2M", 22.2e6, lambda: n_params("mla"), "M"),
    Claim("total-active", "12.3", "active parameters: ~434M", 434e6, active, "M"),
    Claim("total-stored", "12.3", "stored parameters: ~1.13B", 1.13e9, stored, "B"),
    Claim("flops-0.87G", "12.4.1", "2 × 434M = 0.87 GFLOPs per token", 0.87e9,
          lambda: 2 * active(), "G",
          "two FLOPs per active weight; attention's token mixing comes on top"),
    Claim("flops-1.5G", "12.4.1", "each token uses 1.5 GFLOPs", 1.5e9,
          lambda: flops()["total"], "G",
          lambda: (f"neither: the forward at T=4096 costs "
                   f"{fmt(flops(include_mtp=False)['total'] / 1e9)} G, "
                   f"{fmt(flops()['total'] / 1e9)} G with the MTP depths (chapter 14); 2 × "
                   "active counts the weight multiplies only"),
          versus="two lines earlier: 0.87 GFLOPs"),
    Claim("scale-7.44B", "12.4.2", "1.5B active would need 3B × 2.6 = 7.44B stored", 7.44e9,
          lambda: 1.5e9 * stored() / active(), "B",
          lambda: (f"1.5B × {fmt(stored() / active())} = {fmt(1.5 * stored() / active())}B; "
                   f"(3B × {fmt(stored() / active())} is {fmt(3 * stored() / active())}B, not "
                   "7.44B)")),
    Claim("model-750M", "12.5", "the model has ~750M (active) parameters (hymo_750m)", 750e6,
          active, "M", "reading: the count; no count gives 750M (12.5 reaches for it by adding "
          "a dense FFN the GDN blocks do not have)",
          versus="12.3: ~434M active"),
    # appendix
    Claim("gqa-cache", "appendix", "GQA cache per token = MHA / n_heads / n_kv_groups", 64,
          lambda: (costs.mha_cost(cfg(), 1).cache_bytes
                   / costs.mha_cost(cfg(), 1, n_kv_heads=cfg().n_kv_groups).cache_bytes), "×",
          lambda: (f"GQA-{cfg().n_kv_groups} keeps {cfg().n_kv_groups} of {cfg().n_heads} KV "
                   f"heads: MHA / {cfg().n_heads // cfg().n_kv_groups}; the table's formula "
                   "gives MHA / 64 (the text's formula is gqa-cache-text)")),
    Claim("latent-1mb", "appendix", "the latent cache: 4096 × 128 × 2 = 1 MB per token",
          2 ** 20, lambda: costs.mla_cost(cfg(), 1, cache="latent").cache_bytes, "",
          lambda: (f"1 MB is 4,096 tokens of one layer; one token takes ({cfg().kv_lora_rank} + "
                   f"{cfg().qk_rope_head_dim}) × 2 = "
                   f"{costs.mla_cost(cfg(), 1, cache='latent').cache_bytes} bytes"),
          approx=0.0),
    Claim("latent-4x", "appendix", "the shared latent saves ~4× on KV cache", 4,
          lambda: (costs.mha_cost(cfg(), 1).cache_bytes
                   / costs.mla_cost(cfg(), 1, cache="latent").cache_bytes), "×",
          lambda: (f"MHA's K and V over the latent and k_pe, per token: {fmt(_mha_values())} / "
                   f"{cfg().kv_lora_rank + cfg().qk_rope_head_dim} values; the section's own "
                   "byte counts, (4096 × 16 × 256 × 2) over (4096 × 128 × 2), give "
                   f"{fmt((4096 * 16 * 256 * 2) / (4096 * 128 * 2))}×")),
]
