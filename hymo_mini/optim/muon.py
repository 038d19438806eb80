"""Muon and NorMuon, written out, and :class:`MuonAdamW`, the one optimizer that applies them.

**Muon** (Keller Jordan 2024; the same rule as ``torch.optim.Muon``, step for step, which
``tests/test_optim.py`` checks). For a weight matrix W (rows, cols) with gradient G, per step:

    B ← μ B + (1 − μ) G                      momentum (μ = 0.95): an average of gradients
    M = G + μ (B − G)   (Nesterov)   or  B
    O = NS5(M)                               5 Newton–Schulz steps: M = U S Vᵀ → ≈ U Vᵀ
    W ← W (1 − lr λ) − lr · sqrt(max(1, rows/cols)) · O

``O`` keeps the directions of the momentum and throws away its singular values, so every
direction of the matrix moves about equally far, however unevenly the gradient was spread over
them. NS5 (:func:`newton_schulz5`) divides M by its Frobenius norm (which puts every singular
value in [0, 1]) and applies the odd polynomial p(x) = a x + b x³ + c x⁵ five times; its
coefficients (3.4445, −4.7750, 2.0315) are tuned to push small singular values up fast, so five
steps leave them roughly in (0.5, 1.5), not exactly 1, which trains as well. It runs in
bfloat16, as torch and the reference do. The factor sqrt(max(1, rows/cols)) gives tall
matrices a larger step (their O has smaller entries); ``adjust_lr_fn="match_rms_adamw"`` uses
Moonshot's 0.2 · sqrt(max(rows, cols)) instead. Weight decay is decoupled, as in AdamW.

**NorMuon** (Li et al. 2025, arXiv 2510.05491; the group key ``normuon``). Orthogonalising
makes the singular values equal, not the rows: after NS5 some output neurons (rows of W) still
get much larger updates than others. NorMuon keeps, per row, a running mean of the squared
update, v ← β₂ v + (1 − β₂) mean_over_columns(O²) (β₂ = 0.95), divides each row of O by
sqrt(v), and rescales the whole matrix back to O's Frobenius norm (:func:`normuon_rows`). So it
only redistributes Muon's step between the rows (one vector of ``rows`` numbers of state per
matrix); the total step size, and with it the meaning of ``muon_lr``, is Muon's. That rescaling
follows the authors' reference code; here the row statistics are computed in float32.
"""

from __future__ import annotations

import math
import sys

import torch
from torch import nn

from hymo_mini.optim.split import check_partition

__all__ = ["MUON_DEFAULTS", "MuonAdamW", "newton_schulz5", "normuon_rows", "muon_step"]

# a Muon group's settings when the group does not give them (torch.optim.Muon's defaults,
# then NorMuon's, off unless asked for)
MUON_DEFAULTS = {"lr": 1e-3, "weight_decay": 0.1, "momentum": 0.95, "nesterov": True,
                 "ns_coefficients": (3.4445, -4.7750, 2.0315), "ns_steps": 5, "eps": 1e-7,
                 "adjust_lr_fn": None, "normuon": False, "normuon_beta2": 0.95,
                 "normuon_eps": 1e-10}


def newton_schulz5(m: torch.Tensor, coefficients=MUON_DEFAULTS["ns_coefficients"],
                   steps: int = 5, eps: float = 1e-7) -> torch.Tensor:
    """≈ U Vᵀ for M = U S Vᵀ (rows, cols), in bfloat16; a new tensor (M is not touched)."""
    a, b, c = coefficients
    tall = m.shape[0] > m.shape[1]
    x = m.T.bfloat16() if tall else m.bfloat16()  # (short, long): the Gram matrix is the small one
    x = x / x.norm().clamp(min=eps)  # Frobenius norm 1, so every singular value <= 1
    for _ in range(steps):
        gram = x @ x.T  # (short, short)
        poly = torch.addmm(gram, gram, gram, beta=b, alpha=c)  # b A + c A²
        x = torch.addmm(x, poly, x, beta=a)  # a X + (b A + c A²) X = p(X)
    return x.T if tall else x  # (rows, cols)


def normuon_rows(o: torch.Tensor, v: torch.Tensor, beta2: float, eps: float) -> torch.Tensor:
    """NorMuon's row normalisation of an orthogonalised update ``o`` (rows, cols); ``v`` (rows,)
    is the running mean square of each row, updated in place (it keeps the weight's dtype)."""
    o = o.float()  # (rows, cols)
    v.lerp_(o.square().mean(dim=1).to(v.dtype), 1 - beta2)  # v ← β₂ v + (1 − β₂) mean(O²)
    o_hat = o / (v.float().sqrt() + eps)[:, None]  # (rows, cols): every row at RMS ≈ 1
    return o_hat * (o.norm() / (o_hat.norm() + eps))  # (rows, cols): back to |O|


def _lr_scale(shape: torch.Size, adjust_lr_fn: str | None) -> float:
    """The factor on ``lr`` for a (rows, cols) matrix (torch.optim.Muon's two rules)."""
    rows, cols = shape
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, cols))
    return math.sqrt(max(1, rows / cols))  # "original" (Keller Jordan's), the default


@torch.no_grad()
def muon_step(p: torch.Tensor, state: dict, group: dict) -> None:
    """One Muon (or, with ``group["normuon"]``, NorMuon) step of the matrix ``p`` from
    ``p.grad``; ``state`` holds its momentum (and NorMuon's row statistics)."""
    grad = p.grad  # (rows, cols)
    if "momentum_buffer" not in state:
        state["momentum_buffer"] = torch.zeros_like(grad)
    buf, mu = state["momentum_buffer"], group["momentum"]
    buf.lerp_(grad, 1 - mu)  # B ← μ B + (1 − μ) G
    m = grad.lerp(buf, mu) if group["nesterov"] else buf  # G + μ (B − G)  or  B
    o = _orthogonalised(m, p, state, group)
    p.mul_(1 - group["lr"] * group["weight_decay"])  # decoupled decay: W (1 − lr λ)
    p.add_(o, alpha=-group["lr"] * _lr_scale(p.shape, group["adjust_lr_fn"]))


def _dtensor_module():
    """``torch.distributed.tensor`` if something (FSDP2) imported it, else None: a DTensor
    cannot exist before, and importing it here would slow every ``import hymo_mini``."""
    return sys.modules.get("torch.distributed.tensor")


def _orthogonalised(m: torch.Tensor, p: torch.Tensor, state: dict, group: dict) -> torch.Tensor:
    """NS5(M), with NorMuon's row normalisation where the group asks for it.

    A parameter sharded by FSDP2 is a DTensor holding some rows of the matrix. Newton–Schulz
    multiplies whole rows by whole columns, so no shard can be orthogonalised alone: the
    momentum is gathered (``full_tensor``), every rank computes the same O of the whole
    matrix, and keeps its own rows of it (``distribute_tensor`` with ``src_data_rank=None``
    cuts the local copy, no communication). NorMuon's row statistics are kept whole (rows,)
    on every rank, as a plain tensor, so that they load on any number of processes."""
    dtensor = _dtensor_module()
    sharded = dtensor is not None and isinstance(m, dtensor.DTensor)
    full = m.full_tensor() if sharded else m  # (rows, cols) on every rank
    o = newton_schulz5(full, group["ns_coefficients"], group["ns_steps"], group["eps"])
    if group["normuon"]:
        if "normuon_v" not in state:
            state["normuon_v"] = torch.zeros(p.shape[0], dtype=p.dtype, device=full.device)
        o = normuon_rows(o, state["normuon_v"], group["normuon_beta2"], group["normuon_eps"])
    if sharded:  # this rank's rows of O, cut from its own copy
        o = dtensor.distribute_tensor(o, m.device_mesh, m.placements, src_data_rank=None)
    return o


def _listed(group):
    """The group with its ``params`` as a list (a lone tensor as a list of one)."""
    if not isinstance(group, dict) or "params" not in group:
        return group  # check_partition names the problem
    params = group["params"]
    return {**group, "params": [params] if isinstance(params, torch.Tensor) else list(params)}


def _muon_group(i: int, group: dict, normuon: dict) -> dict:
    """A Muon group with every setting filled in and checked; ``normuon`` (settings given to
    :class:`MuonAdamW`) overrides the group's own."""
    allowed = set(MUON_DEFAULTS) | {"optimizer", "params", "initial_lr"}
    unknown = sorted(set(group) - allowed)
    if unknown:
        raise ValueError(f"groups[{i}] (muon) has unknown setting(s) {unknown}; "
                         f"the settings are {sorted(allowed)}")
    group = {**MUON_DEFAULTS, **group, **normuon}
    rules = {"lr": (">= 0", group["lr"] >= 0),
             "weight_decay": (">= 0", group["weight_decay"] >= 0),
             "momentum": ("in [0, 1)", 0 <= group["momentum"] < 1),
             "ns_steps": ("a whole number >= 1",
                          isinstance(group["ns_steps"], int) and group["ns_steps"] >= 1),
             "normuon_beta2": ("in [0, 1)", 0 <= group["normuon_beta2"] < 1),
             "adjust_lr_fn": ("None, 'original' or 'match_rms_adamw'",
                              group["adjust_lr_fn"] in (None, "original", "match_rms_adamw"))}
    for key, (wanted, ok) in rules.items():
        if not ok:
            raise ValueError(f"groups[{i}]['{key}'] must be {wanted}, got {group[key]!r}")
    for item in group["params"]:
        name, p = item if isinstance(item, tuple) else ("a parameter", item)
        if p.ndim != 2:
            raise ValueError(f"groups[{i}] (muon): {name} has shape {tuple(p.shape)}; Muon "
                             f"takes 2-D matrices only (put it in an 'adamw' group)")
    return group


class MuonAdamW(torch.optim.Optimizer):
    """Muon (:func:`muon_step`) on some groups, ``torch.optim.AdamW`` on the others, as one
    optimizer with one ``param_groups`` list and one ``state``.

    groups: dicts with ``"optimizer": "muon" | "adamw"``, ``"params"`` and that optimizer's
    settings (Muon's: the keys of :data:`MUON_DEFAULTS`). They must cover ``model``'s trainable
    parameters exactly once (checked here). ``normuon``, ``normuon_beta2`` and ``normuon_eps``,
    where given, set NorMuon's settings on every Muon group. ``param_groups`` lists the Muon
    groups, then the AdamW groups; ``state_dict``/``load_state_dict`` save and restore both
    (Muon's momenta and NorMuon's row statistics, Adam's moments) in one dict.
    """

    def __init__(self, model: nn.Module, groups: list[dict], *, normuon: bool | None = None,
                 normuon_beta2: float | None = None, normuon_eps: float | None = None):
        groups = [_listed(g) for g in groups]  # a generator of params is read once, here
        check_partition(model, groups)
        nor = {k: v for k, v in (("normuon", normuon), ("normuon_beta2", normuon_beta2),
                                 ("normuon_eps", normuon_eps)) if v is not None}
        muon, adamw = [], []
        for i, group in enumerate(groups):
            kind = group.get("optimizer")
            if kind not in ("muon", "adamw"):
                raise ValueError(f"groups[{i}]['optimizer'] must be 'muon' or 'adamw', "
                                 f"got {kind!r}")
            if kind == "muon":
                muon.append(_muon_group(i, group, nor))
            else:
                adamw.append(dict(group))
        super().__init__(muon + adamw, defaults={})
        # AdamW steps the AdamW groups: the same dicts (it fills in its defaults) and state
        self._adamw = torch.optim.AdamW(self.param_groups[len(muon):]) if adamw else None
        self._link()

    def _link(self) -> None:
        """Point the inner AdamW at this object's AdamW groups and its state."""
        if self._adamw is not None:
            self._adamw.param_groups = [g for g in self.param_groups if g["optimizer"] == "adamw"]
            self._adamw.state = self.state

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)  # replaces self.param_groups and self.state
        self._link()

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            if group["optimizer"] == "muon":
                for p in group["params"]:
                    if p.grad is not None:
                        muon_step(p, self.state[p], group)
        if self._adamw is not None:
            self._adamw.step()
        return loss
