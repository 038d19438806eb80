"""Training: ``hymo-mini train`` and :func:`train`.

One optimizer step is

    lr    = optimizer.lr * wsd(step)                  warmup-stable-decay schedule
    loss  = model.loss(batch)                         main CE + weighted MTP losses
    grads → clip to optimizer.grad_clip → optimizer step → model.update_moe_biases()

with ``training.grad_accum_steps`` micro-batches per step. Choices the document leaves
open (its optimizer and scheduler sections are empty), made here and shown in the book:

* **Optimizer groups** come from :func:`hymo_mini.optim.build_optimizer`: with
  ``optimizer.name = "adamw"`` (the tiny preset) AdamW decays matrices and not norm
  scales, biases, q/k scales, the GDN decay parameters (``A_log``, ``dt_bias``, ``D``) or
  the MoE router; ``"muon"`` puts the MLA and GDN matrices on Muon. Every group's rate is
  its ``initial_lr`` times the schedule, so ``lr`` and ``muon_lr`` follow it together.
* **WSD.** Over ``max_steps`` steps: ``warmup_frac`` of linear warmup from lr/W to lr,
  a flat stretch, then ``decay_frac`` of linear decay to ``min_lr_ratio * lr``.
* **Resumable.** Batch ``step`` is a pure function of ``(run.seed, step)`` (see
  :mod:`hymo_mini.data`), and the checkpoint holds the model (with the MoE balancing
  buffers), the optimizer moments, the step and the loss history. A resumed run therefore
  continues the same loss curve; ``tests/test_train.py`` checks it is identical.
* **Checkpoints are written atomically**: to a temporary file in the same folder, then
  renamed over the old one, so an interrupted save never leaves half a file.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from hymo_mini.config import (
    ConfigError,
    HyMoConfig,
    SchedulerConfig,
    config_from_dict,
    config_to_dict,
    load_config,
    replace,
)
from hymo_mini.data import ByteCorpus, DataError, load_corpus
from hymo_mini.model import build_hymo
from hymo_mini.optim import build_optimizer

__all__ = [
    "CheckpointError",
    "TrainResult",
    "wsd_multiplier",
    "save_checkpoint",
    "load_checkpoint",
    "evaluate",
    "train",
    "main",
]

CHECKPOINT_FORMAT = "hymo_mini-checkpoint-1"


class CheckpointError(ValueError):
    """A checkpoint cannot be used: not a checkpoint, or written for another config."""


# --------------------------------------------------------------------------------------
# Schedule and optimizer
# --------------------------------------------------------------------------------------
def wsd_multiplier(step: int, max_steps: int, sched: SchedulerConfig) -> float:
    """The learning-rate multiplier of optimizer step ``step`` (0-based) of ``max_steps``."""
    if not 0 <= step < max_steps:
        raise ValueError(f"step must be in [0, {max_steps}), got {step}")
    warmup = round(sched.warmup_frac * max_steps)
    decay = round(sched.decay_frac * max_steps)
    if step < warmup:
        return (step + 1) / warmup  # the first step already moves the weights
    decay_start = max_steps - decay
    if step < decay_start:
        return 1.0
    done = (step - decay_start + 1) / decay  # reaches 1 at the last step
    return 1.0 - (1.0 - sched.min_lr_ratio) * done


# --------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------
def _config_differences(saved: dict, current: dict) -> list[str]:
    diffs = []
    for section in sorted(set(saved) | set(current)):
        a, b = saved.get(section, {}), current.get(section, {})
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                diffs.append(f"{section}.{key}: checkpoint {a.get(key)!r}, now {b.get(key)!r}")
    return diffs


def save_checkpoint(path, model, optimizer, step: int, history: dict,
                    config: HyMoConfig) -> Path:
    """Write a checkpoint atomically (temporary file + rename) and return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "config": config_to_dict(config),
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "history": history,
    }
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)  # atomic on POSIX and Windows: old file or new, never half
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def load_checkpoint(path, config: HyMoConfig | None = None) -> dict:
    """Read a checkpoint; with ``config``, raise :class:`CheckpointError` unless it was
    written for exactly that config. The returned dict has a ``config`` HyMoConfig."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {str(path)!r}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # noqa: BLE001 - any unreadable file gets the same message
        raise CheckpointError(f"{str(path)!r} is not a readable checkpoint: {err}") from err
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{str(path)!r} is not a hymo_mini checkpoint "
                              f"(expected format {CHECKPOINT_FORMAT!r})")
    if config is not None:
        diffs = _config_differences(payload["config"], config_to_dict(config))
        if diffs:
            raise CheckpointError(
                f"{str(path)!r} was written for another config; differences:\n  "
                + "\n  ".join(diffs)
                + "\nresume with the checkpoint's config, or start a new run elsewhere")
    payload["config"] = config_from_dict(payload["config"])
    return payload


# --------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------
@dataclass
class TrainResult:
    model: torch.nn.Module
    history: dict  # step, loss, lr, grad_norm, parts{name: [...]}, val_step, val_loss
    stats: dict = field(default_factory=dict)  # timings: tokens/s, data/log fractions
    checkpoint: Path | None = None
    optimizer: torch.optim.Optimizer | None = None


def _empty_history() -> dict:
    return {"step": [], "loss": [], "lr": [], "grad_norm": [], "parts": {},
            "val_step": [], "val_loss": []}


def _check_sizes(config: HyMoConfig, corpus: ByteCorpus) -> None:
    t, m = config.training, config.model
    if t.seq_len + 1 > m.max_seq_len:
        raise ConfigError(f"TrainingConfig.seq_len: the loss reads seq_len + 1 = {t.seq_len + 1} "
                          f"tokens (the inputs and the last target), more than "
                          f"ModelConfig.max_seq_len={m.max_seq_len}; use seq_len <= "
                          f"{m.max_seq_len - 1}")
    if t.seq_len < m.mtp_depth + 2:
        raise ConfigError(f"TrainingConfig.seq_len: {t.seq_len} leaves no target for MTP "
                          f"depth {m.mtp_depth}; use seq_len >= {m.mtp_depth + 2}")
    for split in ("train", "val"):
        n = getattr(corpus, split).numel()
        if n < t.seq_len + 1:
            raise DataError(f"the {split} split has {n:,} bytes, fewer than seq_len + 1 = "
                            f"{t.seq_len + 1}: pass more text or a shorter --seq-len")


def _autocast(config: HyMoConfig, device: torch.device):
    enabled = config.training.dtype == "bfloat16"
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled)


@torch.no_grad()
def evaluate(model, batches, config: HyMoConfig, device) -> float:
    """Mean main (next-token) cross-entropy over fixed validation batches."""
    was_training = model.training
    model.eval()
    device = torch.device(device)
    losses = []
    for batch in batches:
        with _autocast(config, device):
            total, parts = model.loss(batch.to(device))
        losses.append(float(parts.get("main", total)))
    model.train(was_training)
    return sum(losses) / len(losses)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(config: HyMoConfig, corpus: ByteCorpus | None = None, *, steps: int | None = None,
          out_dir=None, resume: bool = False, device="cpu", progress: bool = True,
          print_every: int | None = None, model=None) -> TrainResult:
    """Train ``build_hymo(config)`` on ``corpus`` (default: the standard library).

    steps: stop after this optimizer step (default ``training.max_steps``; the schedule
    always spans ``max_steps``, so a run can be stopped early and resumed). out_dir: where
    ``checkpoint.pt`` (written at every evaluation and at the end) and ``history.json`` go
    (None: no files). resume: continue from ``out_dir/checkpoint.pt``. print_every: print
    rounded losses every so many steps (for notebooks, where a progress bar's timings
    would change every run).
    """
    tc = config.training
    steps = tc.max_steps if steps is None else steps
    if not (isinstance(steps, int) and 0 < steps <= tc.max_steps):
        raise ConfigError(f"steps must be an integer in [1, max_steps={tc.max_steps}], "
                          f"got {steps!r}")
    corpus = load_corpus() if corpus is None else corpus
    _check_sizes(config, corpus)
    device = torch.device(device)
    corpus = corpus.to(device)  # batches are cut on the device (see ByteCorpus.batch)
    torch.manual_seed(config.run.seed)
    model = (build_hymo(config) if model is None else model).to(device)
    optimizer = build_optimizer(model, config.optimizer)
    history, start = _empty_history(), 0
    ckpt_path = None if out_dir is None else Path(out_dir) / "checkpoint.pt"
    if resume:
        if ckpt_path is None:
            raise CheckpointError("resume=True needs out_dir (the folder of checkpoint.pt)")
        payload = load_checkpoint(ckpt_path, config)
        model.load_state_dict(payload["model"])
        optimizer.load_state_dict(payload["optimizer"])
        history, start = payload["history"], payload["step"]
        if start >= steps:
            raise CheckpointError(f"the checkpoint is already at step {start}; ask for "
                                  f"more steps (at most max_steps={tc.max_steps})")
    val_batches = corpus.val_batches(tc.eval_batches, tc.batch_size, tc.seq_len)
    tokens_per_step = tc.batch_size * tc.seq_len * tc.grad_accum_steps
    timing = {"data": 0.0, "compute": 0.0, "log": 0.0, "eval": 0.0}
    pending: list[tuple[int, torch.Tensor, dict, torch.Tensor, float]] = []

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, initial=start, desc="train", unit="step")
    model.train()

    def flush():  # move buffered losses to the history (one device sync)
        for s, loss, parts, norm, lr in pending:
            history["step"].append(s)
            history["loss"].append(float(loss))
            history["lr"].append(lr)
            history["grad_norm"].append(float(norm))
            for name, value in parts.items():
                history["parts"].setdefault(name, []).append(float(value))
        pending.clear()

    window_start, window_steps, windows = time.perf_counter(), 0, []
    for step in range(start, steps):
        t0 = time.perf_counter()
        micro = [corpus.batch(step * tc.grad_accum_steps + i, tc.batch_size, tc.seq_len,
                              seed=config.run.seed) for i in range(tc.grad_accum_steps)]
        t1 = time.perf_counter()
        lr_scale = wsd_multiplier(step, tc.max_steps, config.scheduler)
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"] * lr_scale
        step_loss, step_parts = 0.0, {}
        for batch in micro:
            with _autocast(config, device):
                total, parts = model.loss(batch)
            (total / tc.grad_accum_steps).backward()
            step_loss = step_loss + total.detach() / tc.grad_accum_steps
            for name, value in parts.items():
                step_parts[name] = step_parts.get(name, 0.0) + value.detach() / len(micro)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(),
                                                   config.optimizer.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        model.update_moe_biases()
        pending.append((step + 1, step_loss, step_parts, grad_norm.detach(),
                        config.optimizer.lr * lr_scale))
        done = step + 1
        window_steps += 1
        log_now = done % tc.log_every == 0 or done == steps
        if log_now:
            _sync(device)  # on a GPU the queued work finishes here: count it as compute
        t2 = time.perf_counter()
        if log_now:
            flush()
            rate = window_steps * tokens_per_step / max(t2 - window_start, 1e-9)
            windows.append(rate)
            if bar is not None:
                bar.set_postfix(loss=f"{history['loss'][-1]:.3f}", tok_s=f"{rate:,.0f}")
        if bar is not None:
            bar.update(1)
        t3 = time.perf_counter()
        if done % tc.eval_every == 0 or done == steps:
            history["val_step"].append(done)
            history["val_loss"].append(evaluate(model, val_batches, config, device))
            if ckpt_path is not None:  # a crash loses at most eval_every steps
                flush()
                save_checkpoint(ckpt_path, model, optimizer, done, history, config)
        t4 = time.perf_counter()
        if print_every and (done % print_every == 0 or done == steps):
            flush()
            val = (f"  val {history['val_loss'][-1]:.2f}"
                   if history["val_step"] and history["val_step"][-1] == done else "")
            main = history["parts"].get("main")
            main = f" (main {main[-1]:.2f})" if main else ""
            print(f"step {done:4d}  loss {history['loss'][-1]:.2f}{main}{val}")
        t5 = time.perf_counter()
        timing["data"] += t1 - t0
        timing["compute"] += t2 - t1
        timing["log"] += (t3 - t2) + (t5 - t4)
        timing["eval"] += t4 - t3
        if log_now:
            window_start, window_steps = time.perf_counter(), 0
    flush()
    if bar is not None:
        bar.close()
    n_steps = steps - start
    loop = timing["data"] + timing["compute"] + timing["log"]  # evaluation excluded
    stats = {
        "steps": n_steps,
        "tokens_per_step": tokens_per_step,
        "tokens_per_s": n_steps * tokens_per_step / max(loop, 1e-9),
        "data_fraction": timing["data"] / max(loop, 1e-9),
        "log_fraction": timing["log"] / max(loop, 1e-9),
        "seconds": timing,
        "window_tokens_per_s": windows,  # one per log interval, evaluation excluded
    }
    if ckpt_path is not None:  # the last step is an evaluation step: already saved
        (Path(out_dir) / "history.json").write_text(json.dumps(history))
    return TrainResult(model=model, history=history, stats=stats, checkpoint=ckpt_path,
                       optimizer=optimizer)


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hymo-mini train",
        description="Train a HyMo on bytes of text (default: the Python standard library).")
    p.add_argument("--config", default="hymo_mini", help="preset name or YAML path")
    p.add_argument("--data", nargs="*", default=None,
                   help="text files or folders (default: the standard library's .py files)")
    p.add_argument("--pattern", default="*.py", help="file pattern inside folders")
    p.add_argument("--max-bytes", type=int, default=4_000_000, help="corpus size cap")
    p.add_argument("--out", default=None, help="output folder (default: run.output_dir)")
    p.add_argument("--steps", type=int, default=None, help="stop after this step")
    p.add_argument("--max-steps", type=int, default=None, help="schedule length")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--seq-len", type=int, default=None)
    p.add_argument("--optimizer", choices=["adamw", "muon"], default="muon",
                   help="muon (the document's choice, default): Muon on the MLA and GDN "
                        "matrices, AdamW on the rest; adamw: AdamW on everything")
    p.add_argument("--normuon", action="store_true",
                   help="with --optimizer muon: NorMuon's per-neuron update normalisation")
    p.add_argument("--lr", type=float, default=None, help="AdamW learning rate")
    p.add_argument("--muon-lr", type=float, default=None, help="Muon learning rate")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _apply_overrides(config: HyMoConfig, args) -> HyMoConfig:
    training = {k: v for k, v in (("max_steps", args.max_steps), ("batch_size", args.batch_size),
                                  ("seq_len", args.seq_len)) if v is not None}
    if training:
        config = replace(config, training=replace(config.training, **training))
    optimizer = {"name": args.optimizer, "normuon": args.normuon or config.optimizer.normuon}
    optimizer.update({k: v for k, v in (("lr", args.lr), ("muon_lr", args.muon_lr))
                      if v is not None})
    config = replace(config, optimizer=replace(config.optimizer, **optimizer))
    if args.seed is not None:
        config = replace(config, run=replace(config.run, seed=args.seed))
    return config


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.threads is not None:
            if args.threads <= 0:
                raise ConfigError(f"--threads must be positive, got {args.threads}")
            torch.set_num_threads(args.threads)
        config = _apply_overrides(load_config(args.config), args)
        out = Path(args.out or config.run.output_dir)
        if not args.resume and (out / "checkpoint.pt").exists():
            raise CheckpointError(f"{str(out / 'checkpoint.pt')!r} exists: pass --resume to "
                                  "continue that run, or choose another --out")
        corpus = load_corpus(args.data, max_bytes=args.max_bytes, pattern=args.pattern)
        print(corpus.describe())
        result = train(config, corpus, steps=args.steps, out_dir=out, resume=args.resume,
                       device=args.device, progress=not args.no_progress)
    except (ConfigError, DataError, CheckpointError) as err:
        print(f"hymo-mini train: error: {err}", file=__import__("sys").stderr)
        return 2
    from hymo_mini.figures import save_figure
    from hymo_mini.viz.train_plots import loss_curve

    save_figure(loss_curve(result.history, title=f"{config.run.name}: loss"),
                out / "loss_curve.png")
    s = result.stats
    print(f"final loss {result.history['loss'][-1]:.3f}, "
          f"val {result.history['val_loss'][-1]:.3f}; {s['tokens_per_s']:,.0f} tokens/s; "
          f"data {100 * s['data_fraction']:.1f}% and logging {100 * s['log_fraction']:.1f}% "
          f"of the time")
    print(f"wrote {out / 'checkpoint.pt'}, {out / 'history.json'}, {out / 'loss_curve.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
