"""The errata tables the teaching chapters used to carry, as lists of claims.

A teaching chapter links to the audit instead of listing where the document is wrong; the
audit shows, for each chapter, the claims of the sections it teaches: those its table
listed, or, for a chapter that never had one, the claims of its sections
(:data:`ERRATA`: chapter -> claim ids, in the table's order). Every row is a claim of
:data:`hymo_book.claims.CLAIMS`, computed like the others, so a chapter's errata and the
audit cannot disagree. Every chapter that sends its reader to chapter 20 has an entry
(tests/book/test_book_claims.py checks it).
"""

from __future__ import annotations

__all__ = ["ERRATA"]

# chapter -> (its title, the claims its errata table listed)
ERRATA: dict[str, tuple[str, list[str]]] = {
    "01_overview": ("the overview (section 1)", [
        "attn-flops", "kv-16mb", "kv-8-layers", "kv-8-layers-32k", "kv-8-layers-128k",
        "gdn-400x", "hybrid-40pct", "hybrid-3-5x", "mla-params-5.8M", "gdn-params-2.5M",
        "moe-9M", "mla-positions", "tied-saves", "tied-saves-3.1.1"]),
    "02_configuration": ("the configuration (section 2)", [
        "vocab-constant", "replace-variant", "derive-config", "capacity", "cross-checks",
        "computed-props", "yaml-structure"]),
    "03_norms_and_swiglu": ("RMSNorm and SwiGLU (sections 4.5.4 and 8.5)", [
        "latent-norm-params", "expert", "expert-bias"]),
    "04_rope": ("rotary position embedding (section 7)", [
        "theta-1", "theta-2", "theta-slowest", "rope-intuition", "rope-distance",
        "rope-extrapolation", "rope-gdn"]),
    "05_attention": ("attention and the KV cache (section 4.1, the appendix)", [
        "kv-32mb", "kv-8-mla", "kv-8-mla-32k", "pairs-2G", "gqa-cache", "gqa-cache-text"]),
    "06_mla": ("multi-head latent attention (section 4, the appendix)", [
        "mla-cache-256", "mla-16x", "kv-proj-mha", "q-rank-pct", "kv-rank-64", "kv-rank-32mb",
        "kv-rank-256", "kv-rank-512", "groups-cache", "latent-norm-params", "head-dim",
        "latent-1mb", "latent-4x", "absorb-cache", "absorb-flops"]),
    "07_gdn": ("the GDN recurrence (section 5)", [
        "linattn-special", "delta-name", "erasure-per-dim", "decay-head0", "decay-head10",
        "decay-head39", "slow-heads", "linattn-cost", "linattn-state", "qk-matrix",
        "decay-gate", "rope-gdn", "block-identity"]),
    "09_gpu_primer": ("the GPU facts of section 6", [
        "launch-arith", "launch-time", "state-4kb", "hbm-3tbs"]),
    "10_triton_kernels": ("the Triton kernels (section 6)", [
        "launch-count-intro", "launch-count", "launch-time", "triton-launches",
        "triton-launch", "speedup-8000", "trajectory", "recompute-2x", "hbm-writes",
        "padding", "hbm-3tbs"]),
    "11_moe": ("the mixture of experts (section 8, section 12.2.4)", [
        "capacity", "moe-dropped", "expert", "expert-bias", "gate-bias-grad", "bf16-tie",
        "router-fp32", "router-roundtrip", "capacity-2.6x", "moe-active-layer",
        "moe-stored-layer", "moe-active-8", "moe-stored-8"]),
    "12_mtp": ("multi-token prediction (section 9)", [
        "mtp-formula", "mtp-lengths", "mtp-signal", "mtp-params"]),
    "13_stack": ("the stack (sections 3 and 10)", [
        "embed-unit-var", "embed-share", "act-940mb", "act-per-layer", "ckpt-235mb",
        "ckpt-60pct", "ckpt-33pct", "softcap-5", "softcap-10", "softcap-15", "head-twice",
        "no-init-pass"]),
    "14_forward_trace": ("the forward pass, traced (section 11)", [
        "embed-act", "scores-mem", "q-shape", "kv-latent-shape", "v-shape", "attn-out-shape",
        "bc-mem", "state-mem", "gdn-in-shape", "gdn-bc-shape", "gdn-cheaper", "head-weight",
        "logits-mem", "train-mem", "attn-412G", "head-115M", "moe-99M", "gdn-227M",
        "total-413G", "tput-arith", "tput", "days"]),
    "15_parameters": ("the parameter count (section 12)", [
        "stored-gb", "active-gb", "efficiency", "embedding", "gdn-layer", "gdn-total",
        "gdn-state-80k", "moe-active-layer", "moe-stored-layer", "moe-active-8",
        "moe-stored-8", "mtp-params", "mla-total", "total-active", "total-stored",
        "flops-0.87G", "flops-1.5G", "scale-7.44B", "model-750M"]),
    "17_training": ("training speed and the MLA cache (sections 1.1.3, 4.2.1, 11.6)", [
        "hybrid-3-5x", "mla-cache-256", "tput-arith", "tput", "days"]),
    "18_training_at_scale": ("the training memory of one GPU (section 11.5.2)", [
        "train-mem"]),
}
