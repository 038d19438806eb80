"""Parameter counts, active and stored: section 12 of the design document.

*Stored* parameters are every weight the model holds; *active* parameters are the ones a
single token passes through. They differ only in the routed experts, where a token uses
``n_activated`` of the ``n_routed`` experts of each MoE layer. Two independent counts:

* :func:`count_params` builds the model on PyTorch's ``meta`` device (shapes, no memory:
  the 1.1B-parameter production model costs nothing) and walks ``named_parameters``,
  putting each tensor in a component by where it sits. The tied head is the embedding
  tensor and is counted once.
* :func:`formula_params` computes the same table in closed form from the config.

Components: the embedding, GDN blocks, MLA attention, the routed experts, the shared
experts, the routers, the residual-stream norms (block pre-norms and the final norm; the
norms inside attention belong to attention), the MTP heads and, with ``hc_mult > 1``, the
mHC connections. The tests check that the two counts agree for every preset.
``hymo-mini params [NAME]`` prints the table and the comparison with the document's
figures (:data:`DOCUMENT_FIGURES`).

What the document gets wrong (computed values for hymo_750m; the book shows them all):

* Section 12.2.3 says "each MLA block has 5.8M active params", lists q_proj 896×256,
  q_pe, k_proj, k_pe, v_proj 896×32 and w_proj 896×896, and totals "~1.23M" (its lines add
  up to 1.147M). None of those matrices exist in the attention of section 4; that one has
  **2,755,040** parameters (wq_a, q_norm, wq_b, q_scale, wkv_a, kv_norm, wkv_b, k_scale,
  wo). Eight of them make 22.04M; the summary table's 22.2M is close, the section's 9.84M
  is not. Sections 1.3.1 and 11.3.2 give MLA ~5.8M and GDN ~2.5M per layer: a GDN layer
  has **8,069,456** (8.07M, as 12.2.2 says).
* Section 12.2.4 opens with "132.1M active and 1,170.4M stored" per MoE layer; its own
  arithmetic below is right: with the 14,336-weight router, 18.59M active / 105.30M
  stored.
* Section 12.1 writes "1.13B × 4 bytes = 4.51 GB (BF16)" and "434M × 4 bytes = 1.74 GB
  (BF16)": 4 bytes is fp32. In bf16 the stored weights take 2.26 GB.
* Section 12.4.1 gives 2 × 434M = 0.87 GFLOP per token, then "each token uses 1.5
  GFLOPs". Section 12.4.2 scales to "1.5B active" by multiplying **3B** by 1.13/0.434 and
  gets 7.44B; 3B × 2.60 is 7.81B, and 1.5B active would give about 3.9B stored.
* Section 12.5 tries to reach "750M" by adding a dense FFN to each GDN block (section
  1.3.3 and the parameter list say there is none) and then attributes the remaining
  ~250M to an output head "counted separately": the head is the embedding tensor and
  adds nothing. The model called hymo_750m has **~434M active** and **~1.13B stored**
  parameters; no count gives 750M.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import nn

from hymo_mini.analysis.tables import RenderedTable, TextTable
from hymo_mini.config import HyMoConfig, ModelConfig, load_config

__all__ = [
    "COMPONENTS",
    "DOCUMENT_FIGURES",
    "ParamRow",
    "ParamTable",
    "count_params",
    "formula_params",
    "document_comparison",
]

# component -> label; the order of the table
COMPONENTS = {
    "embedding": "Embedding (tied with head)",
    "gdn": "GDN blocks",
    "mla": "MLA attention",
    "moe_routed": "MoE routed experts",
    "moe_shared": "MoE shared experts",
    "moe_router": "MoE router",
    "norms": "Block and final norms",
    "mtp": "MTP heads",
    "mhc": "mHC connections",
    "other": "Other",
}

_OPTIONAL = ("mhc", "other")

# The document's figures (section 12 unless noted), in parameters.
DOCUMENT_FIGURES: dict[str, float] = {
    "embedding": 57.6e6,
    "gdn_per_layer": 8.07e6,
    "gdn": 193.7e6,
    "mla_per_layer (12.2.3)": 1.23e6,
    "mla_per_layer (1.3.1, 12.2.3 heading)": 5.8e6,
    "mla": 22.2e6,
    "moe_per_layer_active": 18.57e6,
    "moe_per_layer_stored": 105.2e6,
    "moe_per_layer_active (12.2.4 heading)": 132.1e6,
    "moe_per_layer_stored (12.2.4 heading)": 1170.4e6,
    "moe_routed_active": 99.1e6,
    "moe_routed_stored": 792.7e6,
    "moe_shared": 49.5e6,
    "mtp": 12.4e6,
    "total_active": 434e6,
    "total_stored": 1.13e9,
    "model name (750M)": 750e6,
}


@dataclass(frozen=True)
class ParamRow:
    component: str
    stored: int
    active: int

    @property
    def label(self) -> str:
        return COMPONENTS[self.component]


class ParamTable(RenderedTable):
    """Rows (component, stored, active) and their totals; prints as text and HTML."""

    def __init__(self, rows: list[ParamRow], title: str = ""):
        # the optional components appear only when the model has them
        self.rows = [r for r in rows if r.stored or r.component not in _OPTIONAL]
        self.title = title

    @property
    def stored(self) -> int:
        return sum(r.stored for r in self.rows)

    @property
    def active(self) -> int:
        return sum(r.active for r in self.rows)

    def __getitem__(self, component: str) -> ParamRow:
        for row in self.rows:
            if row.component == component:
                return row
        if component in COMPONENTS:
            return ParamRow(component, 0, 0)
        raise KeyError(f"unknown component {component!r}; components are {list(COMPONENTS)}")

    def as_dict(self) -> dict[str, tuple[int, int]]:
        """{component: (stored, active)} plus "total"."""
        out = {r.component: (r.stored, r.active) for r in self.rows}
        out["total"] = (self.stored, self.active)
        return out

    def __eq__(self, other) -> bool:
        return isinstance(other, ParamTable) and self.as_dict() == other.as_dict()

    def _table(self) -> TextTable:
        def cells(label, stored, active):
            return (label, f"{stored:,}", _short(stored), f"{active:,}", _short(active))

        return TextTable(("component", "stored", "", "active", ""),
                         [cells(r.label, r.stored, r.active) for r in self.rows],
                         footer=[cells("Total", self.stored, self.active)], title=self.title)


def _short(n: float) -> str:
    """1234567 -> '1.23M', 1130000000 -> '1.13B'."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n:g}"


def _model_config(config: HyMoConfig | ModelConfig | str) -> ModelConfig:
    if isinstance(config, str):
        config = load_config(config)
    if isinstance(config, HyMoConfig):
        config = config.model
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a preset name, HyMoConfig or ModelConfig, "
                        f"got {type(config).__name__}")
    return config


# ---- walking the model ----------------------------------------------------------------
def _component(path: str, parents: list[nn.Module]) -> str:
    """Component of the parameter at dotted ``path``; ``parents`` are the modules along
    the path, from the model down to the one that owns the parameter."""
    from hymo_mini.blocks import GDNBlock
    from hymo_mini.mhc import ManifoldHyperConnection
    from hymo_mini.mla import MultiHeadLatentAttention
    from hymo_mini.moe import DeepSeekMoE
    from hymo_mini.mtp import MultiTokenPrediction

    names = path.split(".")
    for depth, module in enumerate(parents):
        child = names[depth] if depth < len(names) else ""
        if isinstance(module, MultiTokenPrediction):
            return "mtp"
        if isinstance(module, ManifoldHyperConnection):
            return "mhc"
        if isinstance(module, MultiHeadLatentAttention):
            return "mla"
        if isinstance(module, DeepSeekMoE):
            return {"experts": "moe_routed", "shared_experts": "moe_shared",
                    "gate": "moe_router"}.get(child, "other")
        if isinstance(module, GDNBlock):
            return "norms" if isinstance(getattr(module, child, None), nn.RMSNorm) else "gdn"
        if isinstance(module, nn.Embedding):
            return "embedding"
        if isinstance(module, nn.RMSNorm):
            return "norms"  # the final norm and the MLA block's two pre-norms
    return "other"


def count_params(model_or_config: nn.Module | HyMoConfig | ModelConfig | str) -> ParamTable:
    """Walk the parameters of a model (or of ``HyMo(config)`` built on the meta device)."""
    if isinstance(model_or_config, nn.Module):
        return ParamTable(_walk(model_or_config), title=type(model_or_config).__name__)
    config = _model_config(model_or_config)
    title = f"HyMo: {config.n_layers} layers, dim {config.dim}"
    return ParamTable(_walk_config(config), title=title)


@functools.lru_cache(maxsize=16)
def _walk_config(config: ModelConfig) -> list[ParamRow]:
    from hymo_mini.model import HyMo

    with torch.device("meta"):  # shapes only: nothing is allocated
        return _walk(HyMo(config))


def _walk(model: nn.Module) -> list[ParamRow]:
    stored = dict.fromkeys(COMPONENTS, 0)
    active = dict.fromkeys(COMPONENTS, 0)
    for path, param in model.named_parameters():  # tied tensors appear once
        parents, module = [model], model
        for name in path.split(".")[:-1]:
            module = getattr(module, name)
            parents.append(module)
        part = _component(path, parents)
        n = param.numel()
        stored[part] += n
        if part == "moe_routed":  # a token uses top_k of the n_routed experts
            moe = next(m for m in parents if hasattr(m, "top_k") and hasattr(m, "n_routed"))
            if n * moe.top_k % moe.n_routed:
                raise AssertionError(f"{path}: expert tensor size not divisible")
            active[part] += n * moe.top_k // moe.n_routed
        else:
            active[part] += n
    return [ParamRow(c, stored[c], active[c]) for c in COMPONENTS]


# ---- closed form ----------------------------------------------------------------------
def formula_params(config: HyMoConfig | ModelConfig | str) -> ParamTable:
    """The same table from the config alone (no model is built)."""
    c = _model_config(config)
    n_mla, n_gdn = len(c.mla_positions), len(c.gdn_positions)
    H, S, inner = c.gdn_n_heads, c.gdn_d_state, c.gdn_d_inner

    gdn = (c.dim * inner  # in_proj
           + inner * c.gdn_d_conv  # depthwise conv kernel
           + 2 * inner * H * S  # b_proj, c_proj
           + inner * H  # dt_proj
           + inner * inner  # g_proj
           + inner * c.dim  # out_proj
           + c.dim * c.dim  # skip_proj
           + H * S + H + H  # A_log, dt_bias, D
           + (inner * H if c.gdn_rule == "delta" else 0))  # beta_proj
    mla = (c.dim * c.q_lora_rank + c.q_lora_rank  # wq_a, q_norm
           + c.q_lora_rank * c.n_heads * c.head_dim + c.n_heads * c.head_dim  # wq_b, q_scale
           + c.dim * (c.kv_lora_rank + c.qk_rope_head_dim) + c.kv_lora_rank  # wkv_a, kv_norm
           + c.kv_lora_rank * c.n_kv_groups * (c.qk_nope_head_dim + c.v_head_dim)  # wkv_b
           + c.n_kv_groups * c.qk_rope_head_dim  # k_scale
           + c.n_heads * c.v_head_dim * c.dim)  # wo
    expert = 3 * c.dim * c.moe_inter_dim  # SwiGLU w1, w2, w3
    norms = c.dim * (1 + 2 * n_mla + (n_gdn if c.gdn_residual == "identity" else 0))
    mtp = _mtp_formula(c)
    n = c.hc_mult  # one mHC module per residual branch: 2 per MLA block, 1 per GDN block
    maps = 2 * n + n * n  # [pre, post, comb] rows
    mhc = (2 * n_mla + n_gdn) * (maps * n * c.dim + maps + 3) if n > 1 else 0
    rows = [
        ParamRow("embedding", c.vocab_size * c.dim, c.vocab_size * c.dim),
        ParamRow("gdn", n_gdn * gdn, n_gdn * gdn),
        ParamRow("mla", n_mla * mla, n_mla * mla),
        ParamRow("moe_routed", n_mla * c.n_routed_experts * expert,
                 n_mla * c.n_activated_experts * expert),
        ParamRow("moe_shared", n_mla * c.n_shared_experts * expert,
                 n_mla * c.n_shared_experts * expert),
        ParamRow("moe_router", n_mla * c.dim * c.n_routed_experts,
                 n_mla * c.dim * c.n_routed_experts),
        ParamRow("norms", norms, norms),
        ParamRow("mtp", mtp, mtp),
        ParamRow("mhc", mhc, mhc),
    ]
    return ParamTable(rows, title="HyMo (formula)")


def _mtp_formula(c: ModelConfig) -> int:
    """One bare SwiGLU per depth (see mtp.py); the head is the tied embedding."""
    return c.mtp_depth * 3 * c.dim * c.mtp_inter_dim


# ---- the document, side by side -------------------------------------------------------
def document_comparison(config: HyMoConfig | ModelConfig | str = "hymo_750m") -> str:
    """Each documented figure next to the computed one (text table)."""
    c = _model_config(config)
    t = count_params(c)
    n_mla, n_gdn = max(len(c.mla_positions), 1), max(len(c.gdn_positions), 1)
    moe_active = t["moe_routed"].active + t["moe_shared"].active + t["moe_router"].active
    moe_stored = t["moe_routed"].stored + t["moe_shared"].stored + t["moe_router"].stored
    computed = {
        "embedding": t["embedding"].stored,
        "gdn_per_layer": t["gdn"].stored / n_gdn,
        "gdn": t["gdn"].stored,
        "mla_per_layer (12.2.3)": t["mla"].stored / n_mla,
        "mla_per_layer (1.3.1, 12.2.3 heading)": t["mla"].stored / n_mla,
        "mla": t["mla"].stored,
        "moe_per_layer_active": moe_active / n_mla,
        "moe_per_layer_stored": moe_stored / n_mla,
        "moe_per_layer_active (12.2.4 heading)": moe_active / n_mla,
        "moe_per_layer_stored (12.2.4 heading)": moe_stored / n_mla,
        "moe_routed_active": t["moe_routed"].active,
        "moe_routed_stored": t["moe_routed"].stored,
        "moe_shared": t["moe_shared"].stored,
        "mtp": t["mtp"].stored,
        "total_active": t.active,
        "total_stored": t.stored,
        "model name (750M)": t.active,
    }
    rows = [("figure", "document", "computed", "computed / document")]
    for key, documented in DOCUMENT_FIGURES.items():
        value = computed[key]
        rows.append((key, _short(documented), _short(value), f"{value / documented:.3f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(r[0].ljust(widths[0]) if i == 0 else r[i].rjust(widths[i])
                       for i in range(4)) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)
