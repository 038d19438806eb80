"""FSDP2 on one GPU against the plain single-GPU step: tokens/s and peak memory.

    python3 benchmarks/fsdp_one_gpu.py                      # hymo_750m, B4 x T4096, bf16
    python3 benchmarks/fsdp_one_gpu.py --seq-lens 4096 2048 --steps 5 --checkpointing

Both modes train the same model on the same batches from the same seed:

    plain   hymo_mini.train's optimizer step: fp32 weights under bf16 autocast
    fsdp    hymo_mini.train.fsdp_loop's step in a process group of one: fp32 shards (here
            the whole tensors), bf16 compute copies gathered per block, fp32 gradient
            reduction (MixedPrecisionPolicy), the same Muon/AdamW split
    fsdp_ac the same with activation checkpointing (--checkpointing)

For each sequence length in --seq-lens (longest first) it runs every mode; a mode that
runs out of memory is recorded as such and the next, shorter length is tried, until every
mode has run at one length. Reported per mode: steady tokens/s (after --warmup steps, which
include compilation), peak allocated and reserved memory, the losses, and beside them the
estimate of hymo_mini.analysis.memory.memory_per_gpu with per-token activations measured on
this GPU. The JSON (hardware, versions, date, command, git commit: benchmarks/record.py)
is written after every mode.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import record  # noqa: E402
from hymo_mini.analysis.memory import activation_bytes_per_token, memory_per_gpu  # noqa: E402
from hymo_mini.config import load_config, replace  # noqa: E402
from hymo_mini.data import load_corpus  # noqa: E402
from hymo_mini.train import fsdp_loop, loop  # noqa: E402
from hymo_mini.train.distributed import close_distributed, init_distributed  # noqa: E402


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _peak(device: torch.device) -> dict:
    if device.type != "cuda":
        return {}
    return {"peak_allocated_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2),
            "peak_reserved_gib": round(torch.cuda.max_memory_reserved(device) / 2**30, 2)}


def _build(mode: str, config, corpus, world, device, steps: int):
    """(run, step function) for a mode; the step function takes the step number."""
    if mode == "plain":
        run = loop._prepare(config, corpus, steps, None, False, device, None)
        return run, lambda s: loop._optimizer_step(run, s, loop._batches(run, s))
    run = fsdp_loop._prepare(config, corpus, world, steps, None, False, mode == "fsdp_ac")
    return run, lambda s: fsdp_loop._optimizer_step(run, s, fsdp_loop._batches(run, world, s))


def run_mode(mode: str, config, corpus, world, device, warmup: int, steps: int,
             budget_s: float) -> dict:
    """Train ``warmup + steps`` steps in one mode; tokens/s over the steps after warmup."""
    _free(device)
    started = time.perf_counter()
    run, step = _build(mode, config, corpus, world, device, warmup + steps)
    built = time.perf_counter() - started
    losses = [float(step(s)[0]) for s in range(warmup)]  # compiles the kernels
    _sync(device)
    t0, done = time.perf_counter(), 0
    pending = []
    for s in range(warmup, warmup + steps):
        pending.append(step(s)[0])
        done += 1
        if time.perf_counter() - started > budget_s:
            break
    _sync(device)
    seconds = time.perf_counter() - t0
    tc = config.training
    out = {"mode": mode, "steps_timed": done, "seconds": round(seconds, 3),
           "build_seconds": round(built, 1),
           "tokens_per_s": round(done * tc.batch_size * tc.seq_len / seconds, 1),
           "losses": [round(x, 4) for x in losses + [float(x) for x in pending]],
           **_peak(device)}
    del run, step, pending
    _free(device)
    return out


OOM = "out of memory"


def attempt(mode: str, config, corpus, world, device, args) -> dict:
    """run_mode, or the error it stopped with (out of memory: try a shorter length)."""
    try:
        return run_mode(mode, config, corpus, world, device, args.warmup, args.steps,
                        args.budget_s)
    except torch.OutOfMemoryError:
        _free(device)
        return {"mode": mode, "error": OOM}
    except Exception as err:  # noqa: BLE001 - recorded; the other modes still run
        _free(device)
        first = (str(err).splitlines() or [""])[0]
        return {"mode": mode, "error": f"{type(err).__name__}: {first}"}


def estimate(config, per_token: dict, checkpointing: bool) -> dict:
    """memory_per_gpu on one GPU, in GiB."""
    est = memory_per_gpu(config, 1, config.training.batch_size, config.training.seq_len,
                         activations=per_token, activation_checkpointing=checkpointing)
    parts = ("parameters", "gradients", "optimizer", "gathered", "activations", "transients",
             "optimizer_step")
    return {**{f"{k}_gib": round(getattr(est, k) / 2**30, 2) for k in parts},
            "peak_gib": round(est.total / 2**30, 2)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", default="hymo_750m")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq-lens", type=int, nargs="+", default=[4096, 2048, 1024])
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--checkpointing", action="store_true", help="also fsdp_ac")
    p.add_argument("--budget-s", type=float, default=60.0, help="per mode, timed steps stop")
    p.add_argument("--out", default=None, help="default: benchmarks/out/fsdp_<date>.json")
    args = p.parse_args(argv)
    head = record.header(args.device, __file__, argv)
    device = torch.device(args.device)
    base = load_config(args.config)
    corpus = load_corpus()
    modes = ["plain", "fsdp"] + (["fsdp_ac"] if args.checkpointing else [])
    result = {"benchmark": "fsdp_one_gpu", **head, "config": args.config, "batch": args.batch,
              "optimizer": f"{base.optimizer.name} (normuon={base.optimizer.normuon})",
              "corpus": corpus.describe(), "attempts": [], "runs": []}
    out = Path(args.out or record.out_path(f"fsdp_{head['date'][:10]}.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    world = init_distributed(device.type, timeout_s=600)
    try:
        for seq in sorted(args.seq_lens, reverse=True):
            config = replace(base, model=replace(base.model, max_seq_len=max(
                base.model.max_seq_len, seq)), training=replace(
                base.training, batch_size=args.batch, seq_len=seq, dtype="bfloat16",
                max_steps=args.warmup + args.steps))
            runs = []
            for mode in modes:
                print(f"{mode}: B{args.batch} x T{seq}", flush=True)
                runs.append(attempt(mode, config, corpus, world, device, args))
                print(json.dumps(runs[-1]), flush=True)
                result["attempts"].append({"seq_len": seq, **runs[-1]})
                out.write_text(json.dumps(result, indent=1) + "\n")
                if runs[-1].get("error") == OOM:
                    break  # every mode again at the next, shorter length
            if not any(r.get("error") == OOM for r in runs):
                result["seq_len"], result["runs"] = seq, runs
                per_token = activation_bytes_per_token(config, device=device, tokens=512)
                _free(device)  # measured on this GPU, with its kernels
                result["activation_bytes_per_token"] = {k: round(v) for k, v in
                                                        per_token.items()}
                for mode, ckpt in (("fsdp", False), ("fsdp_ac", True)):
                    if mode in modes:
                        result[f"estimate_{mode}"] = estimate(config, per_token, ckpt)
                break
    finally:
        close_distributed()
        out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
    return 0 if any("error" not in r for r in result["runs"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
