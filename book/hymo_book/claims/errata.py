"""The errata tables the teaching chapters used to carry, as lists of claims.

A teaching chapter links to the audit instead of listing where the document is wrong; the
audit shows, for each chapter, the claims of the sections it teaches that its table listed
(:data:`ERRATA`: chapter -> claim ids, in the table's order). Every row is a claim of
:data:`hymo_book.claims.CLAIMS`, computed like the others, so a chapter's errata and the
audit cannot disagree.
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
    "06_mla": ("multi-head latent attention (section 4)", [
        "mla-cache-256", "mla-16x", "kv-proj-mha", "q-rank-pct", "kv-rank-64", "kv-rank-32mb",
        "kv-rank-256", "kv-rank-512", "groups-cache", "latent-norm-params", "head-dim"]),
    "07_gdn": ("the GDN recurrence (section 5)", [
        "linattn-special", "delta-name", "erasure-per-dim", "decay-head0", "decay-head10",
        "decay-head39", "slow-heads", "linattn-cost", "linattn-state", "qk-matrix",
        "decay-gate", "rope-gdn", "block-identity"]),
    "10_triton_kernels": ("the Triton kernels (section 6)", [
        "launch-count-intro", "launch-count", "launch-time", "triton-launches",
        "triton-launch", "speedup-8000", "trajectory", "recompute-2x", "hbm-writes",
        "padding", "hbm-3tbs"]),
    "13_stack": ("the stack (section 3)", [
        "embed-unit-var", "embed-share", "act-per-layer", "ckpt-235mb", "ckpt-60pct",
        "ckpt-33pct", "softcap-5", "softcap-10", "softcap-15", "head-twice"]),
}
