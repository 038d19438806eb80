"""Optimizers: Muon on the attention and GDN matrices, AdamW on everything else.

The document's stack summary trains HyMo with "NorMuon (Attention/GDN 2D) + AdamW
(Embed/Norm/Gate/MoE)" and its config has ``muon_lr`` beside ``lr``; it gives no code.
:func:`optimizer_groups` sorts a model's parameters by rule and shows the result as a
table; :func:`build_optimizer` turns the table into one optimizer object.

**Muon** (``torch.optim.Muon``; nothing here re-implements it). For a weight matrix W with
gradient G, per step:

    B ← μ B + (1 − μ) G                         momentum (μ = 0.95), an average of gradients
    M = G + μ (B − G)  (Nesterov)  or  B
    O = NS5(M)                                  5 Newton–Schulz steps: M = U S Vᵀ → ≈ U Vᵀ
    W ← W (1 − lr λ) − lr · sqrt(max(1, rows/cols)) · O

``O`` keeps the directions of the momentum and throws away its singular values (five
steps leave them roughly in (0.5, 1.5), not exactly 1, which works as well in practice),
so every direction of the matrix moves about equally far, however unevenly the gradient
was spread over them. That only makes sense for a matrix that maps one hidden space to
another, which is why the rule below is about *what a parameter does*, not its ``ndim``.

**NorMuon** (Li et al. 2025, arXiv 2510.05491; ``normuon=True``). Orthogonalising makes
the singular values equal, not the rows: after NS5 some output neurons (rows of W) still
get much larger updates than others. NorMuon keeps, per row, a running mean of the
squared update, v ← β₂ v + (1 − β₂) mean_over_columns(O²) (β₂ = 0.95), divides each row
of O by sqrt(v), and rescales the whole matrix back to O's Frobenius norm. So it only
redistributes Muon's step between the rows (one extra vector of ``rows`` numbers of state
per matrix); the total step size, and with it the meaning of ``muon_lr``, is Muon's. That
rescaling follows the authors' reference code. It runs *after* ``torch.optim.Muon``'s
step: the applied update is recovered from the parameter change (W_before (1 − lr λ) −
W_after = lr' · O, with lr' Muon's shape-adjusted rate), normalised, and applied instead.

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
  matrices, experts included. On hymo_750m the documented split puts only 19% of the
  parameters (215.5M of 1,128.1M) on Muon: the experts are 75% of the model.
* **MTP on AdamW**: it is neither attention nor GDN, and the rule names only those.
* **Weight decay.** AdamW decays matrices (embedding, experts, MTP, conv kernel) and
  not vectors, norms, scales, decay rates or the router. Muon decays its matrices with the
  same λ; both decays are decoupled (W ← W (1 − lr λ)), so Muon's shrink per step is
  ``muon_lr · λ`` (0.02 × 0.1 = 0.002), larger than AdamW's ``lr · λ``.
* **Learning rates**: ``muon_lr`` for Muon groups, ``lr`` for AdamW groups. Every group
  also carries ``initial_lr`` (the convention of ``torch.optim.lr_scheduler``): a schedule
  multiplies ``group["initial_lr"]``, so both rates follow it.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict
from dataclasses import dataclass

import torch
from torch import nn

from hymo_mini.config import OptimizerConfig

__all__ = ["KINDS", "OptimizerSplitError", "ParamRow", "SplitTable", "optimizer_groups",
           "check_partition", "MuonAdamW", "build_optimizer"]


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
    types = tuple(type(m) for m in inside)
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
        moe = inside[types.index(DeepSeekMoE)]
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


class SplitTable:
    """Which parameter goes to which optimizer group, and why. ``str()`` is a text table,
    ``_repr_html_`` the same as HTML; :meth:`param_groups` gives the optimizer's groups."""

    def __init__(self, rows: list[ParamRow], params: dict[str, torch.Tensor], optimizer: str):
        self.rows, self.optimizer = rows, optimizer
        self._params = params  # canonical name -> tensor

    def names(self, group: str) -> list[str]:
        if group not in GROUPS:
            raise ValueError(f"group must be one of {GROUPS}, got {group!r}")
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

    def __str__(self) -> str:
        total = sum(r.numel for r in self.rows)
        head = (f"optimizer {self.optimizer!r}: " + "; ".join(
            f"{g} {t} tensors {p:,} params ({100 * p / max(total, 1):.1f}%)"
            for g, (t, p) in self.counts().items() if t))
        lines = [head, f"{'group':<15}{'kind':<23}{'decay':<6}{'tensors':>8}{'params':>10}"
                 f"  names"]
        for g, kind, decay, n, p, _, names in self.summary():
            lines.append(f"{g:<15}{kind:<23}{'yes' if decay else 'no':<6}{n:>8}{p:>10,}  {names}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<tr><td>{g}</td><td>{html.escape(k)}</td><td>{'yes' if d else 'no'}</td>"
            f"<td style='text-align:right'>{n}</td><td style='text-align:right'>{p:,}</td>"
            f"<td>{html.escape(why)}</td><td><code>{html.escape(names)}</code></td></tr>"
            for g, k, d, n, p, why, names in self.summary())
        head = "".join(f"<th>{c}</th>" for c in
                       ("group", "kind", "decay", "tensors", "params", "why", "names"))
        return (f"<p>optimizer <b>{html.escape(self.optimizer)}</b></p>"
                f"<table><tr>{head}</tr>{cells}</table>")


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


def _muon_step_size(group: dict, shape: torch.Size) -> float:
    """The rate ``torch.optim.Muon`` applies to a (rows, cols) matrix (its documented
    ``adjust_lr_fn`` rules)."""
    rows, cols = shape[:2]
    rule = group.get("adjust_lr_fn")
    if rule is None or rule == "original":
        return group["lr"] * max(1.0, rows / cols) ** 0.5
    if rule == "match_rms_adamw":
        return group["lr"] * 0.2 * max(rows, cols) ** 0.5
    raise ValueError(f"adjust_lr_fn {rule!r} is not one torch.optim.Muon documents")


class MuonAdamW(torch.optim.Optimizer):
    """``torch.optim.Muon`` and ``torch.optim.AdamW`` as one optimizer.

    groups: dicts with ``"optimizer": "muon" | "adamw"``, ``"params"`` and that optimizer's
    settings. They must cover ``model``'s trainable parameters exactly once (checked here).
    ``param_groups`` lists the Muon groups, then the AdamW groups; the two inner optimizers
    share this object's groups and ``state``, so ``state_dict``/``load_state_dict`` save and
    restore both (momenta, Adam moments, NorMuon's row statistics) in one dict.
    """

    def __init__(self, model: nn.Module, groups: list[dict], *, normuon: bool = False,
                 normuon_beta2: float = 0.95, normuon_eps: float = 1e-10):
        check_partition(model, groups)
        if not 0 <= normuon_beta2 < 1:
            raise ValueError(f"normuon_beta2 must be in [0, 1), got {normuon_beta2}")
        split = {"muon": [], "adamw": []}
        for i, group in enumerate(groups):
            kind = group.get("optimizer")
            if kind not in split:
                raise ValueError(f"groups[{i}]['optimizer'] must be 'muon' or 'adamw', "
                                 f"got {kind!r}")
            group = dict(group)
            if kind == "muon":
                group.update(normuon=normuon, normuon_beta2=normuon_beta2,
                             normuon_eps=normuon_eps)
            split[kind].append(group)
        self._muon = torch.optim.Muon(split["muon"]) if split["muon"] else None
        self._adamw = torch.optim.AdamW(split["adamw"]) if split["adamw"] else None
        inner = [o for o in (self._muon, self._adamw) if o is not None]
        super().__init__([g for o in inner for g in o.param_groups], defaults={})
        self._link()

    def _link(self) -> None:
        """Point the inner optimizers at this object's groups and state."""
        for opt, kind in ((self._muon, "muon"), (self._adamw, "adamw")):
            if opt is not None:
                opt.param_groups = [g for g in self.param_groups if g["optimizer"] == kind]
                opt.state = self.state

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)  # replaces self.param_groups and self.state
        self._link()

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self._muon is not None:
            before = {p: p.clone() for g in self._muon.param_groups if g["normuon"]
                      for p in g["params"] if p.grad is not None}
            self._muon.step()
            for g in self._muon.param_groups:
                if g["normuon"]:
                    for p in g["params"]:
                        if p in before:
                            self._normuon(p, before[p], g)
        if self._adamw is not None:
            self._adamw.step()
        return loss

    def _normuon(self, p: torch.Tensor, before: torch.Tensor, group: dict) -> None:
        """Replace Muon's applied update of ``p`` by its row-normalised version."""
        decayed = before.mul_(1 - group["lr"] * group["weight_decay"])  # Muon's W (1 - lr λ)
        rate = _muon_step_size(group, p.shape)
        if rate == 0:
            return  # nothing was applied (lr = 0)
        o = (decayed - p).float() / rate  # (rows, cols): Muon's orthogonalised update
        state = self.state[p]
        if "normuon_v" not in state:
            state["normuon_v"] = torch.zeros(p.shape[0], dtype=torch.float32, device=p.device)
        v = state["normuon_v"]  # (rows,) running mean of each row's mean square
        beta2 = group["normuon_beta2"]
        v.mul_(beta2).add_(o.square().mean(dim=1), alpha=1 - beta2)
        o_hat = o / (v.sqrt() + group["normuon_eps"])[:, None]  # (rows, cols)
        o_hat *= o.norm() / o_hat.norm().clamp_min(group["normuon_eps"])  # keep Muon's size
        p.copy_(decayed - rate * o_hat.to(p.dtype))


def build_optimizer(model: nn.Module, config: OptimizerConfig, *, normuon: bool | None = None):
    """The optimizer ``config.name`` asks for.

    ``"adamw"``: ``torch.optim.AdamW`` with two groups (decayed / not, by the rule's kinds).
    ``"muon"``: :class:`MuonAdamW`: Muon (``muon_lr``, momentum 0.95, Nesterov, decay λ)
    on the MLA and GDN matrices, AdamW (``lr``) on the rest; ``normuon=True`` adds NorMuon's
    row normalisation (default: ``config.normuon``). Both check that every trainable
    parameter is in exactly one group.
    """
    if not isinstance(config, OptimizerConfig):
        raise TypeError(f"config must be an OptimizerConfig (config.optimizer of a HyMoConfig), "
                        f"got {type(config).__name__}")
    table = optimizer_groups(model, config.name)
    groups = []
    for g in table.param_groups():
        decay = config.weight_decay if g["weight_decay_on"] else 0.0
        if g["group"] == "muon":
            groups.append({"optimizer": "muon", "params": g["params"], "lr": config.muon_lr,
                           "initial_lr": config.muon_lr, "weight_decay": decay})
        else:
            groups.append({"optimizer": "adamw", "params": g["params"], "lr": config.lr,
                           "initial_lr": config.lr, "weight_decay": decay,
                           "betas": config.betas, "eps": config.eps})
    if config.name == "adamw":
        check_partition(model, groups)
        for g in groups:
            g.pop("optimizer")
        return torch.optim.AdamW(groups)
    if normuon is None:
        normuon = config.normuon
    if normuon is not True and normuon is not False:
        raise TypeError(f"normuon must be True or False, got {normuon!r}")
    return MuonAdamW(model, groups, normuon=normuon)
