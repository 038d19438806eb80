"""Memory and FLOPs per component, from shapes: section 11 of the design document.

Everything here is arithmetic on a ``ModelConfig`` (nothing is allocated), so it works for
the production model as easily as for the mini one. Two tables (the book's forward trace shows
them):

* :func:`flops_table` — forward FLOPs per token, component by component, at context ``T``,
  beside the document's 11.6.1 figures. Matrix products only, 2 FLOPs per multiply-add
  (the convention of :mod:`hymo_mini.analysis.costs`, which supplies the MLA and GDN numbers; the
  tests check the MoE, head and MTP numbers against ``FlopCounterMode`` on real modules).
* :func:`activation_table` — the bytes of the tensors section 11 lists for its B=2, T=128
  example, with the shapes the model really produces (the tests run the modules and
  compare shapes), beside the document's figures.

Plus the training-memory and throughput arithmetic of 11.5.2 and 11.6.2
(:func:`training_memory`, :func:`tokens_per_second`).

What the document's 11.6.1 table gets wrong, for hymo_750m at T = 4096: the MLA attention
core costs 134M FLOPs per token over the 8 MLA layers (causal), not 412G, and is nowhere
near "99.83%" of the total; the MoE costs 2 × 18.6M = 37M per MLA layer (298M in all), not
99M (that is the routed experts' *parameter* count); the MTP blocks cost 2 × 12.4M = 25M,
plus two more passes through the 64,256-wide head, not 12M. Its GDN line (227M) is right for
the four projections it names but leaves out b_proj, c_proj and dt_proj (another 160M). The
forward pass costs about 0.98 GFLOP per token (1.24 G with the two MTP depths of training),
not 413 G, so 11.6.2's throughput, computed from 413 G, is some 300 times too low.
"""

from __future__ import annotations

from dataclasses import dataclass

from hymo_mini.analysis.costs import gdn_cost, mla_cost
from hymo_mini.analysis.tables import RenderedTable, TextTable
from hymo_mini.config import ModelConfig
from hymo_mini.ffn import swiglu_param_count
from hymo_mini.moe import moe_param_counts

__all__ = [
    "DOCUMENT_FLOPS",
    "DOCUMENT_ACTIVATIONS",
    "ComparisonRow",
    "ComparisonTable",
    "forward_flops",
    "flops_table",
    "activation_shapes",
    "activation_table",
    "training_memory",
    "tokens_per_second",
]

# Section 11.6.1, FLOPs per token at 4K context.
DOCUMENT_FLOPS = {
    "output head (logits)": 115e6,
    "MLA attention core (q·k, p·v)": 412e9,
    "MLA projections": 50e6,
    "MoE (router, top-k routed, shared)": 99e6,
    "GDN projections (in, g, out, skip)": 227e6,
    "MTP blocks": 12e6,
    "total": 413e9,
}

# Sections 11.1-11.5, bytes for B=2, T=128 (fp32), as printed (MB = 1e6 bytes).
DOCUMENT_ACTIVATIONS = {
    "embedding output": 0.92e6,
    "MLA queries": 0.26e6,
    "MLA attention scores": 0.52e6,
    "MLA attention output": 0.13e6,
    "MoE router logits": 0.02e6,
    "shared expert hidden": 2.30e6,
    "GDN in_proj output": 1.25e6,
    "GDN b and c": 0.65e6,
    "GDN dt / decay gate": 0.04e6,
    "GDN recurrent state": 0.25e6,
    "logits": 57.6e6,
}


@dataclass(frozen=True)
class ComparisonRow:
    """One component: the value computed here beside the document's (None: it gives none)."""

    component: str
    detail: str  # how it was computed (shape or formula)
    value: float  # FLOPs per token, or bytes
    documented: float | None


class ComparisonTable(RenderedTable):
    """Rows with a computed value and the document's, printable as text and HTML."""

    def __init__(self, rows: list[ComparisonRow], title: str, unit: str):
        self.rows, self.title, self.unit = rows, title, unit

    def __getitem__(self, component: str) -> ComparisonRow:
        for row in self.rows:
            if row.component == component:
                return row
        raise KeyError(f"no component {component!r}; have {[r.component for r in self.rows]}")

    def as_dict(self) -> dict[str, float]:
        return {r.component: r.value for r in self.rows}

    def _table(self) -> TextTable:
        rows = []
        for r in self.rows:
            doc = "" if r.documented is None else _si(r.documented, self.unit)
            ratio = "" if not r.documented else f"{r.documented / r.value:.3g}x" if r.value else ""
            rows.append((r.component, r.detail, _si(r.value, self.unit), doc, ratio))
        return TextTable(("component", "from", "hymo_mini", "document", "document / hymo_mini"),
                         rows, title=self.title, align="llrrr")


def _si(value: float, unit: str) -> str:
    for prefix, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


# ---- FLOPs -----------------------------------------------------------------------------
def forward_flops(config: ModelConfig, T: int, *, causal: bool = True,
                  include_mtp: bool = True) -> dict[str, float]:
    """Forward FLOPs per token, by component, for a sequence of ``T`` tokens (the attention
    core grows with T; everything else is per token). The embedding lookup is free."""
    if not isinstance(T, int) or T <= 0:
        raise ValueError(f"T must be a positive integer, got {T!r}")
    c = config
    n_mla, n_gdn = len(c.mla_positions), len(c.gdn_positions)
    mla, gdn = mla_cost(c, T, causal=causal), gdn_cost(c, T)
    head = 2 * c.dim * c.vocab_size
    _, moe_active = moe_param_counts(c)
    gdn_named = 2 * (c.dim * c.gdn_d_inner + c.gdn_d_inner ** 2 + c.gdn_d_inner * c.dim
                     + c.dim ** 2)  # in, g, out, skip: the four 11.6.1 names
    out = {
        "output head (logits)": head,
        "MLA attention core (q·k, p·v)": n_mla * mla.mixing_flops / T,
        "MLA projections": n_mla * mla.projection_flops / T,
        "MoE (router, top-k routed, shared)": n_mla * 2 * moe_active,
        "GDN projections (in, g, out, skip)": n_gdn * gdn_named,
        "GDN projections (b, c, dt) and conv": n_gdn * gdn.projection_flops / T - n_gdn * gdn_named,
        "GDN recurrence": n_gdn * gdn.mixing_flops / T,
    }
    if include_mtp:
        out["MTP blocks"] = c.mtp_depth * 2 * swiglu_param_count(c.dim, c.mtp_inter_dim)
        out["MTP logits (shared head)"] = c.mtp_depth * head
    out["total"] = sum(out.values())
    return out


_FLOP_DETAIL = {
    "output head (logits)": "2 · dim · vocab",
    "MLA attention core (q·k, p·v)": "n_mla · 2·pairs·H·(dk+dv) / T",
    "MLA projections": "n_mla · costs.mla_cost",
    "MoE (router, top-k routed, shared)": "n_mla · 2 · active MoE params",
    "GDN projections (in, g, out, skip)": "n_gdn · 2 · (4 matrices)",
    "GDN projections (b, c, dt) and conv": "n_gdn · the other 3 + conv",
    "GDN recurrence": "n_gdn · 5·H·S·D",
    "MTP blocks": "depth · 2 · SwiGLU params",
    "MTP logits (shared head)": "depth · 2 · dim · vocab",
    "total": "sum",
}


def flops_table(config: ModelConfig, T: int = 4096, *, causal: bool = True) -> ComparisonTable:
    """:func:`forward_flops` as a table beside the document's 11.6.1 column."""
    flops = forward_flops(config, T, causal=causal)
    rows = [ComparisonRow(name, _FLOP_DETAIL[name], value, DOCUMENT_FLOPS.get(name))
            for name, value in flops.items()]
    mask = "causal" if causal else "full"
    return ComparisonTable(rows, f"forward FLOPs per token, T={T:,} ({mask} attention)", "FLOP")


# ---- activations -----------------------------------------------------------------------
def activation_shapes(config: ModelConfig, B: int, T: int) -> dict[str, tuple[int, ...]]:
    """Shapes of the tensors section 11 lists, as hymo_mini's modules produce them."""
    c = config
    tokens = B * T
    return {
        "embedding output": (B, T, c.dim),
        "MLA queries": (B, T, c.n_heads * c.head_dim),
        "MLA latent + k_pe": (B, T, c.kv_lora_rank + c.qk_rope_head_dim),
        "MLA keys and values (k, v per group)": (B, T, c.n_kv_groups * (c.qk_nope_head_dim
                                                                         + c.v_head_dim)),
        "MLA attention scores": (B, c.n_heads, T, T),
        "MLA attention output": (B, T, c.n_heads * c.v_head_dim),
        "MoE router logits": (B, T, c.n_routed_experts),
        "MoE routed hidden (all kept slots)": (tokens * c.n_activated_experts, c.moe_inter_dim),
        "shared expert hidden": (B, T, c.moe_inter_dim),
        "GDN in_proj output": (B, T, c.gdn_d_inner),
        "GDN b and c": (2, B, T, c.gdn_n_heads, c.gdn_d_state),
        "GDN dt / decay gate": (B, T, c.gdn_n_heads),
        "GDN recurrent state": (B, c.gdn_n_heads, c.gdn_d_state, c.gdn_headdim),
        "logits": (B, T, c.vocab_size),
    }


def activation_table(config: ModelConfig, B: int = 2, T: int = 128,
                     dtype_bytes: int = 4) -> ComparisonTable:
    """Bytes of each tensor in :func:`activation_shapes` (fp32 by default, as the
    document's example), beside the document's figures."""
    if B <= 0 or T <= 0:
        raise ValueError(f"B and T must be positive, got B={B}, T={T}")
    rows = []
    for name, shape in activation_shapes(config, B, T).items():
        numel = 1
        for s in shape:
            numel *= s
        rows.append(ComparisonRow(name, str(shape), numel * dtype_bytes,
                                  DOCUMENT_ACTIVATIONS.get(name)))
    return ComparisonTable(rows, f"activation sizes, B={B}, T={T}, {dtype_bytes} bytes per value",
                           "B")


# ---- training memory and throughput ----------------------------------------------------
def training_memory(stored_params: int, *, weight_bytes: int = 4, grad_bytes: int = 4,
                    optimizer_bytes: int = 8) -> dict[str, int]:
    """Bytes for weights, gradients and optimizer state (AdamW: two fp32 moments = 8 B per
    parameter). Activations are extra and depend on B and T."""
    out = {"weights": stored_params * weight_bytes, "gradients": stored_params * grad_bytes,
           "optimizer": stored_params * optimizer_bytes}
    out["total"] = sum(out.values())
    return out


def tokens_per_second(flops_per_token: float, peak_flops: float = 312e12,
                      mfu: float = 0.5) -> float:
    """Throughput at model-FLOPs utilisation ``mfu`` of a ``peak_flops`` accelerator.
    Pass the training FLOPs (about 3 × forward) for training throughput."""
    if flops_per_token <= 0 or peak_flops <= 0 or not 0 < mfu <= 1:
        raise ValueError("flops_per_token and peak_flops must be positive and mfu in (0, 1]")
    return mfu * peak_flops / flops_per_token
