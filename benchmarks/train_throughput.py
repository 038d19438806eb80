"""Train the tiny HyMo and measure its speed: tokens per second, and the share of each step
spent on data loading and logging (the goal: under 5% together).

    python benchmarks/train_throughput.py --device cpu --threads 2 --steps 300 \
        --out benchmarks/out/train_cpu.json
    python benchmarks/train_throughput.py --device cuda --shapes 8x128 64x512 \
        --steps 200 --out $OUT/train_h200.json

Each ``--shapes BxT`` entry trains the ``--config`` model from scratch for ``--steps``
steps (the WSD schedule spans those steps) on the standard library's source bytes, with
``hymo_mini.train.train``. Reported per shape:

    tokens_per_s          over the whole run (evaluation excluded)
    steady_tokens_per_s   median over the log intervals after the first (no start-up)
    data_fraction         time building batches and copying them to the device
    log_fraction          loss bookkeeping, progress output (one device sync per interval)

The first shape's loss history and a few greedy and sampled continuations from the
trained model are kept in the JSON.
The JSON records the hardware, the date, the load average (on a shared machine the CPU
numbers depend on it) and this command.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hymo_mini.config import load_config, replace  # noqa: E402
from hymo_mini.data import decode, encode, load_corpus  # noqa: E402
from hymo_mini.generate import generate  # noqa: E402
from hymo_mini.train import train  # noqa: E402

PROMPTS = ["def ", "import os\n", "class Path(", "    return "]


def hardware(device: torch.device) -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(),
            "torch": torch.__version__, "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads()}
    if hasattr(os, "getloadavg"):
        info["load_average_1_5_15min"] = [round(x, 2) for x in os.getloadavg()]
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        try:
            import triton

            info["triton"] = triton.__version__
        except ImportError:
            pass
    return info


def samples(model, device, max_new_tokens: int = 120) -> list[dict]:
    out = []
    for i, prompt in enumerate(PROMPTS):
        tokens = encode(prompt)[None].to(device)
        greedy = generate(model, tokens, max_new_tokens, temperature=0)
        sampled = generate(model, tokens, max_new_tokens, temperature=0.8, top_k=40, seed=i)
        out.append({"prompt": prompt, "greedy": decode(greedy[0].tolist()),
                    "sampled_t0.8_top40": decode(sampled[0].tolist())})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", default="hymo_mini")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--shapes", nargs="+", default=None,
                   help="BATCHxSEQ entries (default: the config's batch_size x seq_len)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--dtype", default=None, choices=["float32", "bfloat16"])
    p.add_argument("--max-bytes", type=int, default=4_000_000)
    p.add_argument("--no-samples", action="store_true")
    p.add_argument("--gdn-backend", default=None, help="GDN recurrence backend (default: auto)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    base = load_config(args.config)
    shapes = args.shapes or [f"{base.training.batch_size}x{base.training.seq_len}"]
    corpus = load_corpus(max_bytes=args.max_bytes)
    print(corpus.describe(), flush=True)
    result = {
        "benchmark": "train_throughput",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python " + " ".join([sys.argv[0]] + (sys.argv[1:] if argv is None
                                                            else list(argv))),
        "hardware": hardware(device),
        "config": args.config,
        "corpus": corpus.describe(),
        "steps": args.steps,
        "runs": [],
    }
    for i, shape in enumerate(shapes):
        batch, seq = (int(x) for x in shape.lower().split("x"))
        training = dict(batch_size=batch, seq_len=seq, max_steps=args.steps,
                        eval_every=args.steps, log_every=max(args.steps // 20, 1))
        if args.dtype:
            training["dtype"] = args.dtype
        model_cfg = base.model
        if args.gdn_backend is not None:
            model_cfg = replace(model_cfg, gdn_backend=args.gdn_backend)
        if seq + 1 > model_cfg.max_seq_len:  # the loss reads seq + 1 tokens
            model_cfg = replace(model_cfg, max_seq_len=seq + 1)
        config = replace(base, model=model_cfg, training=replace(base.training, **training))
        start = time.perf_counter()
        run = train(config, corpus, device=device, progress=False)
        wall = time.perf_counter() - start
        s = run.stats
        steady = statistics.median(s["window_tokens_per_s"][1:] or s["window_tokens_per_s"])
        entry = {
            "batch_size": batch, "seq_len": seq, "dtype": config.training.dtype,
            "gdn_backend": config.model.gdn_backend,
            "parameters": sum(p.numel() for p in run.model.parameters()),
            "tokens_per_s": round(s["tokens_per_s"], 1),
            "steady_tokens_per_s": round(steady, 1),
            "window_tokens_per_s": [round(w, 1) for w in s["window_tokens_per_s"]],
            "data_fraction": round(s["data_fraction"], 5),
            "log_fraction": round(s["log_fraction"], 5),
            "seconds": {k: round(v, 3) for k, v in s["seconds"].items()},
            "wall_seconds": round(wall, 2),
            "final_loss": round(run.history["loss"][-1], 4),
            "final_val_loss": round(run.history["val_loss"][-1], 4),
        }
        if i == 0:
            result["history"] = run.history
            if not args.no_samples:
                result["samples"] = samples(run.model, device)
        result["runs"].append(entry)
        print(json.dumps(entry), flush=True)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")  # after every shape
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
