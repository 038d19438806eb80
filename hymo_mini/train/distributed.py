"""Data-parallel training on several processes with PyTorch's own stack (FSDP2).

    torchrun --nproc-per-node 2 -m hymo_mini.train --config hymo_mini --steps 100

Every process (rank) holds a 1/N shard of every parameter, gradient and optimizer moment and
reads its own rows of each global batch. The pieces, in the order a run meets them:

* :func:`init_distributed`: the rendezvous (each rank checks in; rank 0 names any rank that
  did not arrive within the timeout) and the process group (gloo on CPU, NCCL on GPUs).
* :func:`shard_model`: ``fully_shard`` on every block and MTP block, then on the root, whose
  unit holds the embedding, which *is* the head (one tensor, so it must be one unit), and
  the final norm. bf16 training uses ``MixedPrecisionPolicy(bf16 params, fp32 reduction)``.
* :func:`rank_rows`: rank r reads rows ``[r·B/N, (r+1)·B/N)`` of the global batch that one
  process would draw for the same (seed, step), so N processes see exactly its batches.
* :func:`sum_expert_counts`: the balancing bias moves on the *global* expert load (the
  pending counts are summed over ranks before ``update_bias``), so every rank keeps the
  same bias.

``fsdp_loop.py`` is the loop that uses them; the book's chapter 18 shows what FSDP2 shards and
when it gathers."""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn

from hymo_mini.config import ConfigError, HyMoConfig

__all__ = ["DistributedError", "World", "init_distributed", "close_distributed",
           "barrier", "agree", "shard_model", "check_batch", "rank_rows", "mean_over_ranks",
           "sum_expert_counts", "check_replicated"]


class DistributedError(ValueError):
    """A distributed run cannot start or go on; the message names the rank and the cause.

    ``every_rank``: print it on every rank that raises it (a rank that cannot reach rank 0
    must say so itself); otherwise only rank 0 prints, as every rank has the same error."""

    def __init__(self, message: str, *, every_rank: bool = False):
        super().__init__(message)
        self.every_rank = every_rank


@dataclass(frozen=True)
class World:
    """This process's place in the run."""

    rank: int
    size: int
    device: torch.device
    monitor: object  # a gloo group for monitored barriers and small objects


def _env_int(name: str) -> int:
    text = os.environ.get(name)
    if text is None or not text.strip().isdigit():
        raise DistributedError(f"environment variable {name}={text!r}: a launched rank needs a "
                               f"whole number; start the ranks with torchrun --nproc-per-node N")
    return int(text)


def _reachable(addr: str, port: int, timeout_s: float) -> bool:
    """Whether something listens at addr:port within ``timeout_s`` (asked with a plain
    socket: a store client that cannot connect fills stderr with C++ traces)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((addr, port), timeout=max(0.1, min(1.0, timeout_s))):
                return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)


def _rendezvous(rank: int, size: int, timeout_s: float) -> dist.Store:
    """A store every rank has checked in to; rank 0 names the ranks that did not come."""
    addr, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), _env_int("MASTER_PORT")
    where = f"{addr}:{port}"
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"  # torchrun hosts it
    host = rank == 0 and not agent
    unreachable = DistributedError(f"rank {rank} could not reach the rendezvous at {where} "
                                   f"within {timeout_s:g} s: rank 0, which hosts it, did not "
                                   "arrive", every_rank=True)
    if not host and not _reachable(addr, port, timeout_s):
        raise unreachable
    try:
        store = dist.TCPStore(addr, port, is_master=host, wait_for_workers=False,
                              timeout=timedelta(seconds=timeout_s))
    except RuntimeError as err:
        if host:
            raise DistributedError(f"rank 0 could not open the rendezvous at {where}: "
                                   f"{str(err).splitlines()[0]}; choose another MASTER_PORT",
                                   every_rank=True) from None
        raise unreachable from None
    run = os.environ.get("TORCHELASTIC_RUN_ID", "") + "/" + os.environ.get(
        "TORCHELASTIC_RESTART_COUNT", "0")
    store = dist.PrefixStore(f"hymo_mini/{run}", store)
    store.set(f"arrived/{rank}", "yes")
    if rank == 0:
        missing, deadline = list(range(size)), time.monotonic() + timeout_s
        while missing and time.monotonic() < deadline:
            missing = [r for r in missing if not store.check([f"arrived/{r}"])]
            time.sleep(0.02 if missing else 0)
        verdict = "ok" if not missing else (
            f"rank(s) {', '.join(map(str, missing))} of {size} did not arrive at the rendezvous "
            f"{where} within {timeout_s:g} s ({size - len(missing)} of {size} joined): start "
            f"every rank, or launch with torchrun --nproc-per-node {size - len(missing)}")
        store.set("verdict", verdict)
    else:
        try:
            store.wait(["verdict"], timedelta(seconds=timeout_s))
            verdict = store.get("verdict").decode()
        except RuntimeError:
            raise DistributedError(f"rank {rank}: rank 0 left the rendezvous at {where} "
                                   "without a verdict", every_rank=True) from None
    if verdict != "ok":
        raise DistributedError(verdict)
    return dist.PrefixStore("process_group", store)


def init_distributed(device_type: str = "cpu", timeout_s: float = 600.0) -> World:
    """Join the run (``torchrun`` sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or, when
    no launcher started this process, make a run of one. ``timeout_s`` bounds the
    rendezvous and every later collective."""
    if dist.is_initialized():
        raise DistributedError("the process group is already initialised in this process; "
                               "call close_distributed() first")
    if "WORLD_SIZE" in os.environ:  # a launcher (torchrun) started this rank
        rank, size = _env_int("RANK"), _env_int("WORLD_SIZE")
        store = _rendezvous(rank, size, timeout_s)
        local = int(os.environ.get("LOCAL_RANK", rank))
    else:
        rank, size, local, store = 0, 1, 0, dist.HashStore()
    if device_type == "cuda":
        if local >= torch.cuda.device_count():
            raise DistributedError(f"rank {rank} has LOCAL_RANK={local} but this machine has "
                                   f"{torch.cuda.device_count()} GPUs: start at most that many "
                                   "processes per machine", every_rank=True)
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, store=store, rank=rank, world_size=size,
                            timeout=timedelta(seconds=timeout_s),
                            device_id=device if device.type == "cuda" else None)
    monitor = dist.new_group(backend="gloo") if backend != "gloo" else dist.group.WORLD
    return World(rank, size, device, monitor)


def close_distributed() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def barrier(world: World, what: str, timeout_s: float = 600.0) -> None:
    """Wait for every rank; after ``timeout_s`` rank 0 names the ranks that did not come."""
    try:
        dist.monitored_barrier(world.monitor, timeout=timedelta(seconds=timeout_s),
                               wait_all_ranks=True)
    except RuntimeError as err:
        raise DistributedError(f"{what}: {str(err).splitlines()[0]}") from None


def agree(world: World, **facts) -> None:
    """Check that every rank was started the same way (config, data, resume point)."""
    mine = json.dumps(facts, sort_keys=True, default=str)
    every = [None] * world.size
    dist.all_gather_object(every, mine, group=world.monitor)
    for rank, theirs in enumerate(every):
        if theirs != every[0]:
            a, b = json.loads(every[0]), json.loads(theirs)
            keys = sorted(k for k in a if a[k] != b.get(k))
            raise DistributedError(f"rank {rank} was started differently from rank 0 "
                                   f"({', '.join(keys)} differ): give every rank the same "
                                   "arguments and files")


# ---- the model ------------------------------------------------------------------------
def shard_model(model: nn.Module, world: World, *, bf16: bool = False,
                activation_checkpointing: bool = False) -> nn.Module:
    """Apply FSDP2 in place: one unit per block and per MTP block, then the root.

    bf16: compute with bf16 copies of the parameters, reduce gradients in fp32 (the sharded
    parameters and the optimizer stay fp32). activation_checkpointing: the model's own
    switch (each layer recomputed in the backward pass)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import (
        MixedPrecisionPolicy,
        fully_shard,
        register_fsdp_forward_method,
    )

    if getattr(model, "mhc", None) is not None:
        raise DistributedError("hc_mult > 1 (mHC) calls the blocks' branches directly, past "
                               "FSDP's hooks on the blocks: train mHC models in one process "
                               "(hymo-mini train without --distributed)")
    mesh = init_device_mesh(world.device.type, (world.size,))
    policy = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
              if bf16 else MixedPrecisionPolicy())
    blocks = list(model.layers) + (list(model.mtp.blocks) if model.mtp is not None else [])
    for block in blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)  # the rest: embedding = head, final norm
    register_fsdp_forward_method(model, "loss")  # training calls model.loss, not model(...)
    model.gradient_checkpointing = activation_checkpointing
    return model


# ---- data and the balancing bias --------------------------------------------------------
def check_batch(config: HyMoConfig, world_size: int) -> None:
    """The global batch must split into equal shares, at least one sequence per rank."""
    b = config.training.batch_size
    if world_size > b:
        raise ConfigError(f"TrainingConfig.batch_size={b} is the global batch and must give "
                          f"each of the {world_size} processes at least one sequence: use "
                          f"--batch-size {world_size} or more, or start at most {b} "
                          f"process{'es' if b > 1 else ''}")
    if b % world_size:
        near = sorted({max(world_size, b - b % world_size), b - b % world_size + world_size})
        raise ConfigError(f"TrainingConfig.batch_size={b} does not split evenly over "
                          f"{world_size} processes: use --batch-size "
                          f"{' or '.join(map(str, near))}")


def rank_rows(batch_size: int, world: World) -> slice:
    """This rank's rows of a global batch of ``batch_size`` sequences."""
    share = batch_size // world.size
    return slice(world.rank * share, (world.rank + 1) * share)


def mean_over_ranks(values: torch.Tensor) -> torch.Tensor:
    """The mean of ``values`` over every rank (equal shares: the global batch's mean)."""
    values = values.detach().clone()
    dist.all_reduce(values)  # sum: gloo has no average
    return values / dist.get_world_size()


@torch.no_grad()
def sum_expert_counts(model: nn.Module) -> None:
    """Replace every MoE's pending expert counts by their sum over the ranks (the global
    batch's load): call before ``model.update_moe_biases()``, so every rank moves its
    balancing bias by the same amount. (The routed experts are stacked tensors, so every
    rank has a gradient for each of them, zero in the rows of an expert it did not use,
    exactly as one process has: the ranks reduce the same tensors.)"""
    moes = model.moe_layers()
    if not moes:
        return
    counts = torch.stack([moe.pending_counts for moe in moes])  # (layers, e) int64
    dist.all_reduce(counts)  # the global batch's load
    for moe, global_counts in zip(moes, counts, strict=True):
        moe.pending_counts.copy_(global_counts)


@torch.no_grad()
def check_replicated(model: nn.Module) -> None:
    """Raise unless the MoE balancing state (bias and load EMA) is equal on every rank:
    a checkpoint keeps one copy of it."""
    moes = model.moe_layers()
    if not moes:
        return
    state = torch.cat([torch.cat([m.expert_bias, m.load_ema]) for m in moes])  # (2 l e,)
    low, high = state.clone(), state.clone()
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    if not torch.equal(low, high):
        raise DistributedError(f"the MoE balancing state differs between ranks (by up to "
                               f"{float((high - low).max()):.3g}): the ranks did not see the "
                               "same global expert load")
