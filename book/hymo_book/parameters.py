"""Parameters, active and stored (book chapter 15, section 12 of the design document).

* :func:`tensor_table` lists a module's parameters beside a formula in the config's fields
  for each (:data:`FORMULAS`), evaluated and compared with the tensor's size, so a reader
  sees where every count comes from: MLA attention, the GDN mixer, one MoE layer.
* :func:`params_figure` draws the active and stored parameters per component of a variant of
  the production model (the widget's picture), from ``hymo_mini.analysis.params.formula_params``.

Nothing is allocated: modules are built on the meta device.
"""

from __future__ import annotations

import dataclasses

import torch
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from hymo_mini.analysis.params import COMPONENTS, formula_params
from hymo_mini.analysis.tables import TextTable
from hymo_mini.config import ModelConfig, load_config, replace

__all__ = ["FORMULAS", "build", "tensor_table", "params_figure", "variant"]

# module kind -> {parameter name: its size as an expression in ModelConfig's fields}
FORMULAS: dict[str, dict[str, str]] = {
    "mla": {
        "q_scale": "n_heads * head_dim",
        "k_scale": "n_kv_groups * qk_rope_head_dim",
        "wq_a.weight": "q_lora_rank * dim",
        "q_norm.weight": "q_lora_rank",
        "wq_b.weight": "(n_heads * head_dim) * q_lora_rank",
        "wkv_a.weight": "(kv_lora_rank + qk_rope_head_dim) * dim",
        "kv_norm.weight": "kv_lora_rank",
        "wkv_b.weight": "n_kv_groups * (qk_nope_head_dim + v_head_dim) * kv_lora_rank",
        "wo.weight": "dim * (n_heads * v_head_dim)",
    },
    "gdn": {
        "A_log": "gdn_n_heads * gdn_d_state",
        "dt_bias": "gdn_n_heads",
        "D": "gdn_n_heads",
        "in_proj.weight": "gdn_d_inner * dim",
        "conv1d.weight": "gdn_d_inner * gdn_d_conv",
        "b_proj.weight": "(gdn_n_heads * gdn_d_state) * gdn_d_inner",
        "c_proj.weight": "(gdn_n_heads * gdn_d_state) * gdn_d_inner",
        "dt_proj.weight": "gdn_n_heads * gdn_d_inner",
        "g_proj.weight": "gdn_d_inner * gdn_d_inner",
        "out_proj.weight": "dim * gdn_d_inner",
        "skip_proj.weight": "dim * dim",
        "beta_proj.weight": "gdn_n_heads * gdn_d_inner",
    },
    "moe": {
        "experts.w1": "n_routed_experts * moe_inter_dim * dim",
        "experts.w3": "n_routed_experts * moe_inter_dim * dim",
        "experts.w2": "n_routed_experts * dim * moe_inter_dim",
        "gate.weight": "n_routed_experts * dim",
        "shared_experts.{i}.w1.weight": "moe_inter_dim * dim",
        "shared_experts.{i}.w3.weight": "moe_inter_dim * dim",
        "shared_experts.{i}.w2.weight": "dim * moe_inter_dim",
    },
}


def build(kind: str, config: ModelConfig | None = None) -> torch.nn.Module:
    """One MLA attention, GDN mixer or MoE layer of ``config`` (hymo_750m by default), on
    the meta device."""
    from hymo_mini.gdn import GatedDeltaNet
    from hymo_mini.mla import MultiHeadLatentAttention
    from hymo_mini.moe import DeepSeekMoE

    config = config or load_config("hymo_750m").model
    classes = {"mla": MultiHeadLatentAttention, "gdn": GatedDeltaNet, "moe": DeepSeekMoE}
    if kind not in classes:
        raise KeyError(f"kind must be one of {sorted(classes)}, got {kind!r}")
    with torch.device("meta"):  # shapes only
        return classes[kind](config)


def _fields(config: ModelConfig) -> dict:
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    for name in dir(type(config)):
        if isinstance(getattr(type(config), name), property):
            values[name] = getattr(config, name)
    return values


def _formula(kind: str, name: str) -> str:
    import re

    key = re.sub(r"shared_experts\.\d+\.", "shared_experts.{i}.", name)
    if key not in FORMULAS[kind]:
        raise KeyError(f"no formula for {kind} parameter {name!r}")
    return FORMULAS[kind][key]


def tensor_table(kind: str, config: ModelConfig | None = None) -> TextTable:
    """Every parameter of one ``kind`` module ("mla", "gdn", "moe"): shape, size, the
    formula in the config's fields, its value, and whether the two agree."""
    config = config or load_config("hymo_750m").model
    module = build(kind, config)
    fields = _fields(config)
    rows, total = [], 0
    for name, p in module.named_parameters():
        expr = _formula(kind, name)
        value = eval(expr, {"__builtins__": {}}, fields)  # noqa: S307 - our own expressions
        total += p.numel()
        rows.append((name, str(tuple(p.shape)), f"{p.numel():,}", expr.replace(" * ", " × "),
                     f"{value:,}", "yes" if value == p.numel() else "NO"))
    return TextTable(("parameter", "shape", "size", "formula", "formula's value", "agree"), rows,
                     footer=[("total", "", f"{total:,}", "", "", "")],
                     title=f"{type(module).__name__}, {len(rows)} tensors", align="llrlrl")


def variant(n_routed_experts: int = 16, n_activated_experts: int = 2, moe_inter_dim: int = 2304,
            n_layers: int = 32, mla_every: int = 4) -> ModelConfig:
    """The production config with these fields changed (top-k capped at the expert count)."""
    return replace(load_config("hymo_750m").model, n_routed_experts=n_routed_experts,
                   n_activated_experts=min(n_activated_experts, n_routed_experts),
                   moe_inter_dim=moe_inter_dim, n_layers=n_layers, mla_every=mla_every)


def _millions(x, _pos=None) -> str:
    return f"{x / 1e6:,.0f}M"


def params_figure(n_routed_experts: int = 16, n_activated_experts: int = 2,
                  moe_inter_dim: int = 2304, n_layers: int = 32, mla_every: int = 4) -> Figure:
    """Stored and active parameters per component of a variant of hymo_750m (see
    :func:`variant`), as pairs of horizontal bars; the title gives the totals."""
    config = variant(n_routed_experts, n_activated_experts, moe_inter_dim, n_layers, mla_every)
    table = formula_params(config)
    rows = [r for r in table.rows if r.stored]
    fig = Figure(figsize=(8.6, 4.2), layout="constrained")
    ax = fig.subplots()
    ys = range(len(rows))
    ax.barh([y + 0.2 for y in ys], [r.stored for r in rows], height=0.4, color="#b3b3b3",
            hatch="..", edgecolor="black", linewidth=0.4, label="stored")
    ax.barh([y - 0.2 for y in ys], [r.active for r in rows], height=0.4, color="#1b9e77",
            hatch="//", edgecolor="black", linewidth=0.4, label="active per token")
    ax.set_yticks(list(ys), [COMPONENTS[r.component] for r in rows], fontsize=9)
    ax.invert_yaxis()
    ax.xaxis.set_major_formatter(FuncFormatter(_millions))
    ax.set_xlabel("parameters")
    n_mla = len(config.mla_positions)
    ax.set_title(f"{n_mla} MLA + {config.n_layers - n_mla} GDN layers, top-"
                 f"{config.n_activated_experts} of {config.n_routed_experts} experts of "
                 f"{config.moe_inter_dim}: {table.stored / 1e6:,.0f}M stored, "
                 f"{table.active / 1e6:,.0f}M active", fontsize=10)
    ax.legend(fontsize=9, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return fig
