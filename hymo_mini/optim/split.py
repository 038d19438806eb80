"""Which parameter goes to Muon and which to AdamW, and why: :func:`optimizer_groups` sorts
a model's parameters by rule and shows the result as a table (:class:`SplitTable`);
:func:`check_partition` makes sure a list of groups holds every trainable parameter once.

Muon orthogonalises a matrix's update (see :mod:`hymo_mini.optim.muon`), so every direction of
the matrix moves about equally far. That only makes sense for a matrix that maps one hidden
space to another, which is why the rule is about *what a parameter does*, not its ``ndim``.

**The rule** (one row of :data:`KINDS` per class; the table shows the reason):

* Muon: the ``nn.Linear`` weights inside ``MultiHeadLatentAttention`` (wq_a, wq_b,
  wkv_a, wkv_b, wo) and ``GatedDeltaNet`` (in_proj, b_proj, c_proj, dt_proj, g_proj,
  out_proj, skip_proj, beta_proj). The gate *projections* of the GDN (dt_proj, g_proj)
  are hidden matrices like the others: their sigmoid comes after the matrix.
* AdamW: everything else, each for a reason: the tied embedding/head (a lookup table
  whose rows only move for the bytes seen, and the logits' scale), norm scales, biases,
  MLA's q_scale and k_scale and GDN's A_log (2-D only by layout: tables of per-channel
  gains and decay rates, not maps between spaces), the depthwise conv kernel (3-D, one
  4-tap filter per channel), dt_bias and D, the MoE router gate, the MoE experts and the
  MTP blocks.

Readings chosen (the document gives the split in one line):

* **"Gate" is the MoE router**, which decides the routing; the GDN's gate projections
  stay with Muon (above).
* **MoE experts on AdamW, as documented.** It is a choice, not a necessity: the experts
  are ordinary matrices, and Moonshot's Moonlight (an MoE) was trained with Muon on its
  matrices, experts included. On hymo_750m the experts are most of the model, so the
  documented split puts only a small share of the parameters on Muon (the table counts it).
* **MTP on AdamW**: it is neither attention nor GDN, and the rule names only those.
* **Weight decay.** AdamW decays matrices (embedding, experts, MTP, conv kernel) and
  not vectors, norms, scales, decay rates or the router. Muon decays its matrices.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

import torch
from torch import nn

from hymo_mini.analysis.tables import RenderedTable, TextTable
from hymo_mini.choices import one_of

__all__ = ["KINDS", "GROUPS", "OptimizerSplitError", "ParamRow", "SplitTable",
           "optimizer_groups", "check_partition"]


class OptimizerSplitError(ValueError):
    """The parameter groups do not cover the model's trainable parameters exactly once."""


# kind -> (goes to Muon in the split, weight-decayed, why)
KINDS: dict[str, tuple[bool, bool, str]] = {
    "MLA matrix": (True, True, "maps one hidden space to another"),
    "GDN matrix": (True, True, "maps one hidden space to another"),
    "embedding (tied head)": (False, True, "lookup table: only seen rows get gradient"),
    "norm scale": (False, False, "per-channel gain"),
    "bias": (False, False, "per-channel offset"),
    "q/k scale": (False, False, "per-channel gains, 2-D only by layout"),
    "GDN conv kernel": (False, True, "depthwise: one small filter per channel"),
    "GDN decay / skip": (False, False, "per-head rates and skips (A_log is 2-D by layout)"),
    "MoE router gate": (False, False, "decides the routing: the document's 'Gate'"),
    "MoE expert": (False, True, "the document puts the experts on AdamW"),
    "MTP": (False, True, "neither attention nor GDN"),
    "other matrix": (False, True, "not named by the rule"),
    "other vector": (False, False, "not named by the rule"),
}
GROUPS = ("muon", "adamw_decay", "adamw_no_decay")


def _kind(name: str, param: torch.Tensor, owner: nn.Module, inside: list[nn.Module]) -> str:
    """The class of a parameter from its own module (``owner``) and the modules around it
    (``inside``, outermost first)."""
    from hymo_mini.blocks import GDNBlock  # imported here: optim must not pull
    from hymo_mini.mla import MultiHeadLatentAttention  # in the model to be imported
    from hymo_mini.moe import DeepSeekMoE
    from hymo_mini.mtp import MultiTokenPrediction

    leaf = name.rsplit(".", 1)[-1]
    # isinstance, not type(m) is: FSDP2's fully_shard swaps a module's class for a subclass
    types = tuple(cls for cls in (MultiHeadLatentAttention, GDNBlock, DeepSeekMoE,
                                  MultiTokenPrediction) if any(isinstance(m, cls) for m in inside))
    if isinstance(owner, nn.Embedding):
        return "embedding (tied head)"
    if isinstance(owner, (nn.RMSNorm, nn.LayerNorm)):
        return "norm scale"
    if leaf == "bias":
        return "bias"
    if MultiHeadLatentAttention in types:
        if isinstance(owner, nn.Linear):
            return "MLA matrix"
        if leaf in ("q_scale", "k_scale"):
            return "q/k scale"
    if GDNBlock in types:
        if isinstance(owner, nn.Linear):
            return "GDN matrix"
        if isinstance(owner, nn.Conv1d):
            return "GDN conv kernel"
        if leaf in ("A_log", "dt_bias", "D"):
            return "GDN decay / skip"
    if DeepSeekMoE in types:
        moe = next(m for m in inside if isinstance(m, DeepSeekMoE))
        return "MoE router gate" if owner is getattr(moe, "gate", None) else "MoE expert"
    if MultiTokenPrediction in types:
        return "MTP"
    return "other matrix" if param.ndim >= 2 else "other vector"


@dataclass(frozen=True)
class ParamRow:
    name: str  # the first name under which the model registers the tensor
    aliases: tuple[str, ...]  # other names of the same tensor (the tied head)
    shape: tuple[int, ...]
    kind: str  # a key of KINDS
    group: str  # one of GROUPS

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


def _compress(names: list[str]) -> list[str]:
    """['layers.1.b_proj.weight', 'layers.2.b_proj.weight'] -> ['layers.{1,2}.b_proj.weight']:
    integer path parts collapsed when the pattern covers exactly the given names."""
    by_pattern: dict[str, list[list[int]]] = defaultdict(list)
    for name in names:
        by_pattern[re.sub(r"(?<=\.)\d+(?=\.)", "#", name)].append(
            [int(x) for x in re.findall(r"(?<=\.)\d+(?=\.)", name)])
    out = []
    for pattern, numbers in by_pattern.items():
        columns = [sorted(set(col)) for col in zip(*numbers, strict=True)]
        size = 1
        for col in columns:
            size *= len(col)
        if size != len(numbers):  # not a full product: list them one by one
            out.extend(n for n in names if re.sub(r"(?<=\.)\d+(?=\.)", "#", n) == pattern)
            continue
        text = pattern
        for col in columns:
            run = len(col) > 2 and col == list(range(col[0], col[-1] + 1))
            part = (f"{{{col[0]}-{col[-1]}}}" if run else
                    str(col[0]) if len(col) == 1 else "{" + ",".join(map(str, col)) + "}")
            text = text.replace("#", part, 1)
        out.append(text)
    return out


class SplitTable(RenderedTable):
    """Which parameter goes to which optimizer group, and why. ``str()`` is a text table,
    ``_repr_html_`` the same as HTML; :meth:`param_groups` gives the optimizer's groups."""

    def __init__(self, rows: list[ParamRow], params: dict[str, torch.Tensor], optimizer: str):
        self.rows, self.optimizer = rows, optimizer
        self._params = params  # canonical name -> tensor

    def names(self, group: str) -> list[str]:
        one_of(group, "group", GROUPS)
        return [r.name for r in self.rows if r.group == group]

    def counts(self) -> dict[str, tuple[int, int]]:
        """group -> (tensors, parameters); the tied embedding/head counts once."""
        return {g: (sum(r.group == g for r in self.rows),
                    sum(r.numel for r in self.rows if r.group == g)) for g in GROUPS}

    def param_groups(self) -> list[dict]:
        """Optimizer groups as ``{"group", "params": [(name, tensor), ...], "weight_decay_on"}``;
        empty groups left out."""
        return [{"group": g, "params": [(n, self._params[n]) for n in self.names(g)],
                 "weight_decay_on": g != "adamw_no_decay"} for g in GROUPS if self.names(g)]

    def summary(self) -> list[tuple[str, str, bool, int, int, str, str]]:
        """(group, kind, decayed, tensors, parameters, why, names) per group and kind."""
        out = []
        for g in GROUPS:
            for kind, (_, decay, why) in KINDS.items():
                rows = [r for r in self.rows if r.group == g and r.kind == kind]
                if rows:
                    names = _compress([" = ".join((r.name,) + r.aliases) for r in rows])
                    out.append((g, kind, decay, len(rows), sum(r.numel for r in rows), why,
                                ", ".join(names)))
        return out

    def _table(self) -> TextTable:
        total = sum(r.numel for r in self.rows)
        title = (f"optimizer {self.optimizer!r}: " + "; ".join(
            f"{g} {t} tensors {p:,} params ({100 * p / max(total, 1):.1f}%)"
            for g, (t, p) in self.counts().items() if t))
        rows = [(g, kind, "yes" if decay else "no", str(n), f"{p:,}", why, names)
                for g, kind, decay, n, p, why, names in self.summary()]
        return TextTable(("group", "kind", "decay", "tensors", "params", "why", "names"),
                         rows, title=title, align="lllrrll")


def optimizer_groups(model: nn.Module, optimizer: str = "muon") -> SplitTable:
    """Sort the trainable parameters of ``model`` by the rule in the module docstring.

    ``optimizer="muon"``: Muon kinds to group ``muon``, the rest to ``adamw_decay`` /
    ``adamw_no_decay``. ``optimizer="adamw"``: the same kinds, all on AdamW (the Muon
    kinds are decayed). A tensor registered under several names (the tied head) is one row.
    """
    if optimizer not in ("muon", "adamw"):
        raise ValueError(f"optimizer must be 'muon' or 'adamw', got {optimizer!r}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    modules = dict(model.named_modules())
    first: dict[int, str] = {}
    aliases: dict[int, list[str]] = defaultdict(list)
    params: dict[str, torch.Tensor] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first:
            aliases[id(p)].append(name)
        elif p.requires_grad:
            first[id(p)] = name
            params[name] = p
    rows = []
    for name, p in params.items():
        path = name.split(".")[:-1]
        inside = [modules[".".join(path[:i])] for i in range(len(path) + 1)]
        kind = _kind(name, p, inside[-1], inside)
        to_muon, decay, _ = KINDS[kind]
        group = ("muon" if to_muon and optimizer == "muon" else
                 "adamw_decay" if decay else "adamw_no_decay")
        rows.append(ParamRow(name, tuple(aliases[id(p)]), tuple(p.shape), kind, group))
    return SplitTable(rows, params, optimizer)


def check_partition(model: nn.Module, groups: list[dict]) -> None:
    """Raise :class:`OptimizerSplitError` unless every trainable parameter of ``model`` is in
    exactly one of ``groups`` (dicts with ``"params"``: tensors or (name, tensor) pairs) and
    the groups hold nothing else. Tensors are compared by identity, so a tied tensor
    registered under two names is one parameter."""
    names = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    trainable = {id(p): p for p in model.parameters() if p.requires_grad}
    seen: dict[int, list[int]] = defaultdict(list)
    strangers = []
    for gi, group in enumerate(groups):
        if not isinstance(group, dict) or "params" not in group:
            raise OptimizerSplitError(f"groups[{gi}] must be a dict with 'params', got {group!r}")
        for item in group["params"]:
            p = item[1] if isinstance(item, tuple) else item
            if id(p) in trainable:
                seen[id(p)].append(gi)
            else:
                strangers.append(f"groups[{gi}]: " + (item[0] if isinstance(item, tuple) else
                                 "/".join(names.get(id(p), [f"tensor {tuple(p.shape)}"]))))
    label = lambda i: " = ".join(names[i])  # noqa: E731
    missing = [label(i) for i in trainable if i not in seen]
    twice = [f"{label(i)} (groups {g})" for i, g in seen.items() if len(g) > 1]
    problems = []
    if missing:
        problems.append(f"in no group: {', '.join(missing)}")
    if twice:
        problems.append(f"in more than one group: {', '.join(twice)}")
    if strangers:
        problems.append("not a trainable parameter of the model: " + ", ".join(strangers))
    if problems:
        raise OptimizerSplitError("the optimizer groups must hold every trainable parameter "
                                  "exactly once; " + "; ".join(problems))
