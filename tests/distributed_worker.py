"""One rank of the checks in test_distributed.py that need two ranks in one process group.

    python -m torch.distributed.run --standalone --nproc-per-node 2 \
        tests/distributed_worker.py OUT_FOLDER

Each rank writes OUT_FOLDER/rank{r}.json; the test reads both and asserts.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import torch
from torch import nn

from hymo_mini.config import load_config, replace
from hymo_mini.model import build_hymo
from hymo_mini.optim import MuonAdamW, build_optimizer
from hymo_mini.train.distributed import (
    DistributedError,
    agree,
    check_replicated,
    close_distributed,
    init_distributed,
    shard_model,
    sum_expert_counts,
)


def tiny(optimizer: str = "muon"):
    """hymo_mini cut to 2 layers (one MLA with MoE, one GDN), global batch 4 x 16 tokens;
    capacity_factor 2 = n_routed / top_k: no assignment is ever dropped, so routing does
    not depend on how the batch is split over ranks."""
    cfg = load_config("hymo_mini")
    model = replace(cfg.model, n_layers=2, mla_every=2, max_seq_len=64, capacity_factor=2.0)
    training = replace(cfg.training, batch_size=4, seq_len=16, max_steps=8, eval_every=2,
                       eval_batches=1, log_every=2)
    return replace(cfg, model=model, training=training,
                   optimizer=replace(cfg.optimizer, name=optimizer, normuon=optimizer == "muon"))


def balancing(world) -> dict:
    """Two optimizer steps, each rank on its own tokens, with no deadband (every load
    change moves the bias): the bias moves on the sum of both ranks' counts (recorded after
    each step: a second step may move it back). Then this rank's bytes of parameter shards
    and optimizer state."""
    cfg = tiny()
    cfg = replace(cfg, model=replace(cfg.model, load_deadband=0.0))
    torch.manual_seed(0)
    model = shard_model(build_hymo(cfg), world)
    optimizer = build_optimizer(model, cfg.optimizer)
    local, summed, bias = [], [], []
    for step in range(2):
        seed = torch.Generator().manual_seed(10 * step + world.rank)
        model.loss(torch.randint(0, 256, (2, 17), generator=seed))[0].backward()
        local.append([m.pending_counts.tolist() for m in model.moe_layers()])
        sum_expert_counts(model)
        summed.append([m.pending_counts.tolist() for m in model.moe_layers()])
        optimizer.step()
        optimizer.zero_grad()
        model.update_moe_biases()
        bias.append([m.expert_bias.tolist() for m in model.moe_layers()])
    check_replicated(model)  # equal: no error
    if world.rank == 1:
        model.moe_layers()[0].expert_bias[0] += 0.5
    try:
        check_replicated(model)
        disagreement = None
    except DistributedError as err:
        disagreement = str(err)

    def local_part(t):
        return t.to_local() if hasattr(t, "to_local") else t

    params = sum(local_part(p).numel() * 4 for p in model.parameters())
    state = sum(local_part(v).numel() * v.element_size() for s in optimizer.state.values()
                for v in s.values() if torch.is_tensor(v) and v.ndim > 0)
    return {"local_counts": local, "summed_counts": summed, "bias": bias,
            "disagreement": disagreement, "parameter_bytes": params, "optimizer_bytes": state}


def started_differently(world) -> str | None:
    try:
        agree(world, seed=world.rank, config="same")
    except DistributedError as err:
        return str(err)
    return None


def muon_on_shards(world) -> float:
    """Three Muon (NorMuon) steps on FSDP2-sharded matrices (7 rows: shards of 4 and 3)
    against the same steps on whole matrices; the largest difference of the weights."""
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(1)
    whole = nn.Sequential(nn.Linear(12, 10, bias=False), nn.Linear(10, 7, bias=False))
    sharded = copy.deepcopy(whole)
    fully_shard(sharded)
    group = {"optimizer": "muon", "lr": 0.05, "weight_decay": 0.1, "normuon": True}
    optimizers = [MuonAdamW(m, [{**group, "params": list(m.parameters())}])
                  for m in (whole, sharded)]
    x = torch.randn(5, 12, generator=torch.Generator().manual_seed(2))  # the same on both
    for _ in range(3):
        for model, opt in zip((whole, sharded), optimizers, strict=True):
            model(x).square().sum().backward()  # sharded: the mean of equal gradients
            opt.step()
            opt.zero_grad()
    with torch.no_grad():
        return max(float((a - b.full_tensor()).abs().max())
                   for a, b in zip(whole.parameters(), sharded.parameters(), strict=True))


def main() -> None:
    out = Path(sys.argv[1])
    torch.set_num_threads(1)
    world = init_distributed("cpu", timeout_s=60)
    try:
        result = {"balancing": balancing(world), "agree": started_differently(world),
                  "muon_max_difference": muon_on_shards(world)}
    finally:
        close_distributed()
    (out / f"rank{world.rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
