"""The training loop on several processes: :func:`train_distributed`.

The loop of :func:`hymo_mini.train.train` itself (``loop.run_steps``, which both run), with
four differences in the parts it is given:

    batch      this rank's rows of the global batch one process would draw    (rank_rows)
    gradients  FSDP2 reduce-scatters them: each rank gets the global mean of its shard
    bias       the pending expert counts are summed over ranks before update_bias
    logged     losses are averaged over ranks; rank 0 prints and writes the files

So with N processes and the same global ``training.batch_size`` the loss curve is the one
process's, up to rounding (the gradient's sum runs in another order). One thing makes a
run differ from one process beyond rounding, a documented choice: MoE capacity is counted
per rank (each rank routes B/N sequences; no difference while nothing is dropped).
Checkpoints are DCP folders (:mod:`hymo_mini.train.dcp`) at every evaluation and at the end.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from hymo_mini.config import HyMoConfig, config_to_dict
from hymo_mini.data import ByteCorpus, load_corpus
from hymo_mini.model import build_hymo
from hymo_mini.optim import build_optimizer
from hymo_mini.train.checkpoint import CheckpointError
from hymo_mini.train.dcp import latest_dcp, load_dcp, read_meta, save_dcp
from hymo_mini.train.distributed import (
    World,
    agree,
    barrier,
    check_batch,
    check_replicated,
    mean_over_ranks,
    rank_rows,
    shard_model,
    sum_expert_counts,
)
from hymo_mini.train.loop import (
    RunState,
    TrainingLog,
    TrainResult,
    check_sizes,
    check_steps,
    run_steps,
    set_learning_rate,
    train_result,
)

__all__ = ["train_distributed", "check_resume"]


def _corpus_digest(corpus: ByteCorpus) -> str:
    digest = hashlib.sha256(corpus.train.cpu().numpy().tobytes())
    digest.update(corpus.val.cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def check_resume(config: HyMoConfig, out_dir, resume: bool, steps: int):
    """(folder, meta) of the checkpoint to resume from, or (None, None); a
    :class:`CheckpointError` when there is none, or it is another config's or done."""
    if not resume:
        return None, None
    if out_dir is None:
        raise CheckpointError("resume=True needs out_dir (the folder holding dcp/step_*)")
    folder = latest_dcp(out_dir)
    if folder is None:
        raise CheckpointError(f"no complete DCP checkpoint under {str(Path(out_dir))!r}/dcp: "
                              "start without --resume (a distributed run reads dcp/step_*, "
                              "not checkpoint.pt)")
    meta = read_meta(folder, config)
    if meta["step"] >= steps:
        raise CheckpointError(f"the checkpoint is already at step {meta['step']}; ask for "
                              f"more steps (at most max_steps={config.training.max_steps})")
    return folder, meta


def _prepare(config, corpus, world: World, steps, out_dir, resume, checkpointing) -> RunState:
    """Check everything that can be checked alone (the same answer on every rank, so no
    rank waits for another that stopped), agree, then build and shard."""
    tc = config.training
    steps = check_steps(config, steps)
    check_batch(config, world.size)
    corpus = load_corpus() if corpus is None else corpus
    check_sizes(config, corpus)
    folder, meta = check_resume(config, out_dir, resume, steps)
    agree(world, config=config_to_dict(config), corpus=_corpus_digest(corpus), steps=steps,
          resume=None if folder is None else folder.name)
    torch.manual_seed(config.run.seed)  # the same initial weights as one process
    model = shard_model(build_hymo(config), world, bf16=tc.dtype == "bfloat16",
                        activation_checkpointing=checkpointing)
    run = RunState(config, model, build_optimizer(model, config.optimizer),
               corpus.to(world.device), world.device, steps)
    if folder is not None:
        load_dcp(folder, run.model, run.optimizer)
        run.history, run.start = meta["history"], meta["step"]
    return run


def _batches(run: RunState, world: World, step: int) -> list[torch.Tensor]:
    """This rank's rows of the ``grad_accum_steps`` micro-batches of step ``step``."""
    tc, rows = run.config.training, rank_rows(run.config.training.batch_size, world)
    return [run.corpus.batch(step * tc.grad_accum_steps + i, tc.batch_size, tc.seq_len,
                             seed=run.config.run.seed, rows=rows)  # (B/N, T + 1)
            for i in range(tc.grad_accum_steps)]


def _optimizer_step(run: RunState, step: int, batches: list[torch.Tensor]):
    """One optimizer step on this rank's rows; returns the losses averaged over ranks."""
    tc, config = run.config.training, run.config
    lr = set_learning_rate(run, step)
    losses = None
    for batch in batches:
        total, parts = run.model.loss(batch)  # FSDP's policy sets the compute dtype
        (total / tc.grad_accum_steps).backward()
        micro = torch.stack([total.detach(), *parts.values()]) / tc.grad_accum_steps
        losses = micro if losses is None else losses + micro
    grad_norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), config.optimizer.grad_clip)
    sum_expert_counts(run.model)  # the global load, the same on every rank
    run.optimizer.step()
    run.optimizer.zero_grad(set_to_none=True)
    run.model.update_moe_biases()
    losses = mean_over_ranks(losses)  # (1 + parts,)
    parts = dict(zip(parts, losses[1:], strict=True))
    norm = grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
    return losses[0], parts, norm.detach(), lr


@torch.no_grad()
def _evaluate(run: RunState, val_batches: list[torch.Tensor]) -> float:
    """Mean main loss over the validation batches (this rank's rows), averaged over ranks."""
    run.model.eval()
    losses = torch.stack([run.model.loss(batch)[1]["main"] for batch in val_batches])
    run.model.train()
    return float(mean_over_ranks(losses.mean()))


def _evaluate_and_save(run, log, val_batches, done, out_dir, keep) -> None:
    run.history["val_step"].append(done)
    run.history["val_loss"].append(_evaluate(run, val_batches))
    if out_dir is not None:
        log.flush()
        check_replicated(run.model)  # a checkpoint keeps one copy of the balancing state
        run.ckpt_path = save_dcp(out_dir, run.model, run.optimizer, done, run.history,
                                 run.config, keep=keep)


def train_distributed(config: HyMoConfig, world: World, corpus: ByteCorpus | None = None, *,
                      steps: int | None = None, out_dir=None, resume: bool = False,
                      progress: bool = True, print_every: int | None = None,
                      activation_checkpointing: bool = False, keep: int = 2,
                      timeout_s: float = 600.0) -> TrainResult:
    """Train ``build_hymo(config)`` data-parallel over ``world`` (see
    :func:`~hymo_mini.train.distributed.init_distributed`); every rank calls it.

    ``training.batch_size`` is the global batch (each rank takes B/N rows). The arguments
    are :func:`~hymo_mini.train.train`'s; checkpoints go to ``out_dir/dcp/step_*`` (the
    ``keep`` newest kept), ``history.json`` to ``out_dir`` (rank 0). resume: continue from
    the newest checkpoint there, written by any number of processes."""
    run = _prepare(config, corpus, world, steps, out_dir, resume, activation_checkpointing)
    tc, lead = config.training, world.rank == 0
    rows = rank_rows(tc.batch_size, world)
    val_batches = [b[rows] for b in run.corpus.val_batches(tc.eval_batches, tc.batch_size,
                                                             tc.seq_len)]
    log = TrainingLog(run, progress and lead, print_every if lead else None)
    barrier(world, "every rank built its shards", timeout_s)

    def evaluate_and_save(done: int) -> None:
        if out_dir is not None:
            barrier(world, f"checkpoint at step {done}", timeout_s)
        _evaluate_and_save(run, log, val_batches, done, out_dir, keep)

    run_steps(run, log, lambda step: _batches(run, world, step), _optimizer_step,
          evaluate_and_save)
    if out_dir is not None and lead:
        (Path(out_dir) / "history.json").write_text(json.dumps(run.history))
    return train_result(run, log, resume)
