"""What one GPU holds when FSDP2 trains HyMo on N GPUs: :func:`memory_per_gpu`.

For P stored parameters (the tied head counted once), per GPU, in bytes:

    parameters    4 · P / N            fp32 shards (each tensor's first dim padded to N)
    gradients     4 · P / N            fp32 shards: the reduce-scatter's output
    optimizer     8 · P_adamw / N      AdamW's two moments, sharded
                + 4 · P_muon / N       Muon's momentum, sharded
                + 4 · rows             NorMuon's row statistics, whole on every GPU
    gathered      e · (2 U + R)        the bf16 (e = 2) copies of the unit being computed, the
                                       next one (prefetched) and the root (embedding = head,
                                       final norm: gathered for the whole forward)
                + (e + 4) · max(U, R)  a unit's unsharded gradient and its fp32 reduce buffer
    activations   b · T · a + f        what the forward keeps for the backward: per token,
                                       and the part that does not grow with the tokens
    transients    b · T · a_layer      one layer's activation gradients, in its backward

with U the largest block unit, b = batch / N sequences per GPU and ``a``, ``f`` measured by
:func:`activation_bytes_per_token`. Only the first three shrink with N at a fixed per-GPU
batch; the gathered copies are what FSDP2 adds over one plain GPU (they exist at N = 1 too).
The optimizer step runs when the activations are gone; its transient (gathering the largest
Muon matrix, foreach temporaries of AdamW) is ``optimizer_step``. The total is the state
plus the larger of the two phases. Allocator slack and fragmentation are not counted.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import torch
from torch import nn

from hymo_mini.analysis.tables import RenderedTable, TextTable
from hymo_mini.config import HyMoConfig, ModelConfig, replace

__all__ = ["MemoryEstimate", "memory_per_gpu", "activation_bytes_per_token", "saved_bytes"]


@dataclass(frozen=True)
class MemoryEstimate(RenderedTable):
    """Bytes per GPU, by kind; ``total`` is the estimated peak."""

    n_gpus: int
    batch_per_gpu: int
    seq_len: int
    parameters: int
    gradients: int
    optimizer: int
    gathered: int
    activations: int
    transients: int
    optimizer_step: int

    @property
    def state(self) -> int:
        return self.parameters + self.gradients + self.optimizer

    @property
    def total(self) -> int:
        compute = self.gathered + self.activations + self.transients
        return self.state + max(compute, self.optimizer_step)

    def _table(self) -> TextTable:
        rows = [(name, f"{getattr(self, name) / 2**20:,.1f}") for name in
                ("parameters", "gradients", "optimizer", "gathered", "activations",
                 "transients", "optimizer_step")]
        return TextTable(("per GPU", "MiB"), rows, footer=[("peak", f"{self.total / 2**20:,.1f}")],
                         title=f"{self.n_gpus} GPU(s), {self.batch_per_gpu} x {self.seq_len} "
                               "tokens per GPU")


def _kept(run, label=lambda: "all", exclude: list[torch.Tensor] = ()) -> dict[str, int]:
    """Bytes of the distinct storages autograd still holds for the backward when ``run()``'s
    forward returns, by ``label()`` at the time each was first saved.

    A tensor saved and released within the forward (an inner graph that finishes early, such
    as the chunked loss's) is not counted: the hook keeps only weak references, and the
    storages are told apart after the forward, while every one counted is alive. (Keying on
    the address at save time would let a freed storage's address, reused by the allocator,
    hide a later one; which addresses are reused is up to the allocator.)"""
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    saved: list[tuple[str, weakref.ref]] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append((label(), weakref.ref(t)))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = run()  # held until counted: it keeps the graph, and the graph the tensors
    owner: dict[int, tuple[str, int]] = {}
    for name, ref in saved:
        t = ref()
        if t is None:
            continue
        storage = t.untyped_storage()
        if storage.data_ptr() not in skip and storage.data_ptr() not in owner:
            owner[storage.data_ptr()] = (name, storage.nbytes())
    del result
    out: dict[str, int] = {}
    for name, nbytes in owner.values():
        out[name] = out.get(name, 0) + nbytes
    return out


def saved_bytes(run, exclude: list[torch.Tensor] = ()) -> int:
    """Bytes of the distinct storages that autograd keeps for the backward of ``run()``'s
    forward (``exclude``: tensors not to count, e.g. the parameters)."""
    return sum(_kept(run, exclude=exclude).values())


def _kind_bytes(model: nn.Module, tokens: torch.Tensor) -> dict[str, int]:
    """Saved bytes of one ``model.loss(tokens)``, by where they were saved: "gdn", "mla"
    (one block each), "mtp" (the MTP blocks) and "head" (embedding, norm, head, losses)."""
    label, hooks = ["head"], []

    def enter(name):
        return lambda module, args: label.append(name) and None

    def leave(module, args, output):
        label.pop()

    modules = [("mtp", model.mtp)] + list(zip(model.config.layer_types, model.layers,
                                              strict=True))
    for name, module in modules:
        if module is not None:
            hooks.append(module.register_forward_pre_hook(enter(name)))
            hooks.append(module.register_forward_hook(leave))
    try:
        kept = _kept(lambda: model.loss(tokens), lambda: label[-1], list(model.parameters()))
    finally:
        for hook in hooks:
            hook.remove()
    return {kind: kept.get(kind, 0) for kind in ("gdn", "mla", "mtp", "head")}


def activation_bytes_per_token(config: ModelConfig | HyMoConfig, *, device="cpu",
                               dtype: torch.dtype = torch.bfloat16,
                               tokens: int = 128) -> dict[str, float]:
    """Bytes kept for the backward, split into what grows with the tokens and what does not.

    ``gdn`` and ``mla`` (one block of each), ``mtp`` (all MTP blocks) and ``head`` (the final
    norm, the head and the losses of the main and MTP depths): bytes per token; ``gdn_fixed``,
    ``mla_fixed``, ``mtp_fixed``, ``head_fixed``: bytes kept whatever the number of tokens (the
    chunked loss keeps one fp32 (V, d) weight-gradient buffer for all its heads). Measured on
    a model with the config's widths and one block of each kind, on ``device`` with its
    backends, in ``dtype`` (FSDP's compute dtype), at two lengths, ``tokens`` and
    ``2 * tokens``: the slope is the per-token part, the rest the fixed part. Both are linear
    in the tokens (flash-style attention keeps O(T) per query head, the GDN kernels keep
    chunk states)."""
    if not (isinstance(tokens, int) and tokens >= 1):
        raise ValueError(f"tokens must be a whole number >= 1, got {tokens!r}")
    m = config.model if isinstance(config, HyMoConfig) else config
    kinds = sorted(set(m.layer_types))
    probe = replace(m, n_layers=len(kinds), mla_every=len(kinds) if "mla" in kinds else 0,
                    mla_position="first", max_seq_len=max(m.max_seq_len, 2 * tokens + 1))
    if len(kinds) == 1 and kinds == ["mla"]:
        probe = replace(probe, mla_every=1)
    torch.manual_seed(0)
    model = _build_model(probe).to(device=device, dtype=dtype).train()
    short, long = tokens + 1, 2 * tokens + 1  # positions read: the targets are shifted by one
    kept = {n: _kind_bytes(model, torch.randint(0, m.vocab_size, (1, n), device=device))
            for n in (short, long)}  # (1, n) token ids
    out: dict[str, float] = {}
    for kind, nbytes in kept[short].items():
        per_token = (kept[long][kind] - nbytes) / (long - short)
        out[kind] = per_token
        out[f"{kind}_fixed"] = max(0.0, nbytes - per_token * short)
    return out


def _build_model(config: ModelConfig) -> nn.Module:
    from hymo_mini.model import build_hymo  # the model only when measuring

    return build_hymo(config)


def _units(config: ModelConfig) -> tuple[list[list[tuple]], list[tuple], nn.Module]:
    """Shapes of each block unit's parameters and of the root's, and the meta model."""
    with torch.device("meta"):
        model = _build_model(config)
    blocks = list(model.layers) + (list(model.mtp.blocks) if model.mtp is not None else [])
    in_blocks = {id(p) for b in blocks for p in b.parameters()}
    units = [[tuple(p.shape) for p in b.parameters()] for b in blocks]
    root = [tuple(p.shape) for p in model.parameters() if id(p) not in in_blocks]
    return units, root, model


def _numel(shape: tuple, n_gpus: int = 1) -> int:
    """Elements of one GPU's shard of a tensor (FSDP2 pads the first dim to n_gpus)."""
    if not shape:
        return 1
    return math.ceil(shape[0] / n_gpus) * math.prod(shape[1:])


def memory_per_gpu(config: HyMoConfig, n_gpus: int, batch: int, seq_len: int, *,
                   bf16: bool = True, activation_checkpointing: bool = False,
                   activations: dict[str, float] | None = None) -> MemoryEstimate:
    """Estimated bytes per GPU of FSDP2 training (see the module docstring).

    batch: the global micro-batch (``training.batch_size``), split over ``n_gpus``;
    activations: bytes from :func:`activation_bytes_per_token`, per token and fixed (measured
    on the CPU with the config's widths when not given: pass a GPU measurement for GPU
    kernels); a dict without the ``*_fixed`` keys counts everything per token."""
    from hymo_mini.optim import optimizer_groups

    if not (isinstance(n_gpus, int) and n_gpus >= 1):
        raise ValueError(f"n_gpus must be a whole number >= 1, got {n_gpus!r}")
    if not (isinstance(batch, int) and batch >= n_gpus and batch % n_gpus == 0):
        raise ValueError(f"batch={batch!r} must be a multiple of n_gpus={n_gpus}: each GPU "
                         f"computes batch / n_gpus sequences")
    m, oc = config.model, config.optimizer
    units, root, model = _units(m)
    split = optimizer_groups(model, oc.name)
    shard = {r.name: _numel(r.shape, n_gpus) for r in split.rows}
    p_total = sum(shard.values())
    muon = [r for r in split.rows if r.group == "muon"]
    optimizer = 8 * sum(shard[r.name] for r in split.rows if r.group != "muon")
    optimizer += 4 * sum(shard[r.name] for r in muon)
    optimizer += 4 * sum(r.shape[0] for r in muon) if (muon and oc.normuon) else 0
    e = 2 if bf16 else 4
    unit = max(sum(_numel(s) for s in u) for u in units)
    root_numel = sum(_numel(s) for s in root)
    gathered = e * (2 * unit + root_numel) + (e + 4) * max(unit, root_numel)
    a = activations if activations is not None else activation_bytes_per_token(m)
    tokens = batch // n_gpus * (seq_len + 1)  # the model reads seq_len + 1 positions
    n_mla = sum(kind == "mla" for kind in m.layer_types)
    layers = (m.n_layers - n_mla) * a["gdn"] + n_mla * a["mla"]
    largest = max(a["gdn"] if n_mla < m.n_layers else 0, a["mla"] if n_mla else 0)
    if activation_checkpointing:  # each layer keeps its input; one layer is recomputed
        layers = m.n_layers * m.dim * e + largest
    fixed = a.get("mtp_fixed", 0.0) + a.get("head_fixed", 0.0)  # counted once, not per token
    if not activation_checkpointing:
        fixed += (m.n_layers - n_mla) * a.get("gdn_fixed", 0.0) + n_mla * a.get("mla_fixed", 0.0)
    acts = tokens * (layers + a["mtp"] + a["head"]) + fixed
    adamw_shard = sum(shard[r.name] for r in split.rows if r.group != "muon")
    step = 8 * adamw_shard + 16 * max((math.prod(r.shape) for r in muon), default=0)
    return MemoryEstimate(n_gpus, batch // n_gpus, seq_len, parameters=4 * p_total,
                          gradients=4 * p_total, optimizer=optimizer, gathered=gathered,
                          activations=int(acts), transients=int(tokens * largest),
                          optimizer_step=step)
