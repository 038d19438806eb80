"""AdamW alone against the documented Muon/AdamW split, at the same budget, on the CPU.

Every variant trains the same ``hymo_mini`` preset from the same initial weights on the
same batches (the standard library's bytes, :mod:`hymo_mini.data`) with the same
warmup-stable-decay schedule, gradient clipping and MoE balancing as
:func:`hymo_mini.train.train`; only the optimizer differs:

    adamw    AdamW (lr) on every parameter
    muon     Muon (muon_lr) on the MLA and GDN matrices, AdamW (lr) on the rest
    normuon  the same split with NorMuon's per-row normalisation on top of Muon

(:func:`hymo_mini.train.train` builds its own AdamW, so the loop is written out here.)
Validation loss (main next-byte cross-entropy on fixed held-out windows) is recorded
every ``--eval-every`` steps and at the end; the result, with the hardware, date and
command, goes to ``benchmarks/out/optimizers_cpu.json``; the run chapter 17 plots
(``hymo_book.plots.optimizers``) is the copy kept in ``book/results/``.

    python benchmarks/optimizers.py                      # 300 steps each, ~10 min
    python benchmarks/optimizers.py --steps 40 --variants adamw muon --out /tmp/o.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

import torch

from hymo_mini.config import load_config, replace
from hymo_mini.data import load_corpus
from hymo_mini.model import build_hymo
from hymo_mini.optim import build_optimizer, optimizer_groups
from hymo_mini.train import evaluate, wsd_multiplier

VARIANTS = {"adamw": ("adamw", False), "muon": ("muon", False), "normuon": ("muon", True)}
DEFAULT_OUT = Path(__file__).resolve().parent / "out" / "optimizers_cpu.json"  # ignored by git


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_variant(name: str, config, corpus, steps: int, eval_every: int, log=print) -> dict:
    """Train one variant for ``steps`` steps of a ``steps``-long schedule."""
    opt_name, normuon = VARIANTS[name]
    config = replace(config, optimizer=replace(config.optimizer, name=opt_name))
    tc = config.training
    torch.manual_seed(config.run.seed)
    model = build_hymo(config)
    optimizer = build_optimizer(model, config.optimizer, normuon=normuon)
    val_batches = corpus.val_batches(tc.eval_batches, tc.batch_size, tc.seq_len)
    out = {"optimizer": opt_name, "normuon": normuon, "lr": config.optimizer.lr,
           "muon_lr": config.optimizer.muon_lr if opt_name == "muon" else None,
           "split": optimizer_groups(model, opt_name).counts(),
           "train_step": [], "train_loss": [], "train_main": [],
           "val_step": [0], "val_loss": [round(evaluate(model, val_batches, config, "cpu"), 4)]}
    seconds = {"step": 0.0, "optimizer": 0.0}
    model.train()
    for step in range(steps):
        t0 = time.perf_counter()
        batch = corpus.batch(step, tc.batch_size, tc.seq_len, seed=config.run.seed)
        scale = wsd_multiplier(step, steps, config.scheduler)
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"] * scale
        total, parts = model.loss(batch)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.optimizer.grad_clip)
        t1 = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        t2 = time.perf_counter()
        model.update_moe_biases()
        seconds["step"] += time.perf_counter() - t0
        seconds["optimizer"] += t2 - t1
        done = step + 1
        out["train_step"].append(done)
        out["train_loss"].append(round(float(total.detach()), 4))
        out["train_main"].append(round(float(parts["main"]), 4))
        if done % eval_every == 0 or done == steps:
            out["val_step"].append(done)
            out["val_loss"].append(round(evaluate(model, val_batches, config, "cpu"), 4))
            log(f"{name:8s} step {done:4d}  train {out['train_main'][-1]:.3f}  "
                f"val {out['val_loss'][-1]:.3f}  ({seconds['step'] / done:.2f} s/step)")
    out["seconds_per_step"] = round(seconds["step"] / steps, 3)
    out["optimizer_seconds_per_step"] = round(seconds["optimizer"] / steps, 4)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="hymo_mini")
    p.add_argument("--steps", type=int, default=None, help="default: training.max_steps")
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (1 is fastest for this tiny model on 2 cores)")
    p.add_argument("--seed", type=int, default=None, help="default: run.seed (init, batches)")
    p.add_argument("--max-bytes", type=int, default=4_000_000)
    p.add_argument("--out", default=str(DEFAULT_OUT))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    config = load_config(args.config)
    if args.seed is not None:
        config = replace(config, run=replace(config.run, seed=args.seed))
    steps = args.steps or config.training.max_steps
    corpus = load_corpus(max_bytes=args.max_bytes)
    print(corpus.describe())
    started = time.perf_counter()
    variants = {name: run_variant(name, config, corpus, steps, args.eval_every)
                for name in args.variants}
    result = {
        "benchmark": "optimizers",
        "command": "python " + " ".join([os.path.relpath(__file__)] + (argv or sys.argv[1:])),
        "date": datetime.date.today().isoformat(),
        "hardware": {"cpu": _cpu_name(), "cores": os.cpu_count(), "torch_threads": args.threads,
                     "device": "cpu", "torch": torch.__version__,
                     "python": platform.python_version()},
        "settings": {"config": args.config, "steps": steps, "batch_size":
                     config.training.batch_size, "seq_len": config.training.seq_len,
                     "eval_every": args.eval_every, "eval_batches": config.training.eval_batches,
                     "seed": config.run.seed, "weight_decay": config.optimizer.weight_decay,
                     "betas": list(config.optimizer.betas), "grad_clip":
                     config.optimizer.grad_clip, "schedule": "WSD " + json.dumps(
                         {k: getattr(config.scheduler, k) for k in
                          ("warmup_frac", "stable_frac", "decay_frac", "min_lr_ratio")}),
                     "corpus": corpus.describe()},
        "total_seconds": round(time.perf_counter() - started, 1),
        "variants": variants,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=1)
    text = re.sub(r"\[\s*([-\d.e,\s]+?)\s*\]",  # number lists on one line
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)
    out.write_text(text + "\n")
    for name, v in variants.items():
        print(f"{name:8s} final val {v['val_loss'][-1]:.4f}  best val {min(v['val_loss']):.4f}"
              f"  {v['seconds_per_step']:.2f} s/step "
              f"(optimizer {v['optimizer_seconds_per_step']:.3f})")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
