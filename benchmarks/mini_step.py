"""Time one training step's forward + backward of the mini model on this CPU.

    python benchmarks/mini_step.py [--batch 2] [--seq-len 128] [--repeats 10] [--threads 1,2]

For each GDN backend of the CPU ("naive", the reference loop, and "chunk_torch", the
chunkwise-parallel form) it builds the hymo_mini model,
runs ``model.loss(tokens).backward()`` a few times to warm up, then reports the median
and spread of ``--repeats`` timed runs. Results go to benchmarks/out/mini_step_cpu.json
with the hardware, library versions, date and command, so the number can be reproduced
or disputed. Not a test: timings depend on the machine and on what else it is running
(the load average at the start and end is recorded for that reason).

Each backend is timed with one torch thread and with one per core. On a busy machine the
multi-threaded run can be many times *slower*: OpenMP threads spin while waiting for
each other, and when other processes hold the cores they wait a long time.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from hymo_mini.config import load_config
from hymo_mini.model import HyMo

RESULTS = Path(__file__).resolve().parent / "out" / "mini_step_cpu.json"  # ignored by git


def time_backend(backend: str, threads: int, batch: int, seq_len: int, warmup: int,
                 repeats: int) -> dict:
    torch.set_num_threads(threads)
    config = dataclasses.replace(load_config("hymo_mini").model, gdn_backend=backend)
    torch.manual_seed(0)
    model = HyMo(config).train()
    tokens = torch.randint(0, config.vocab_size, (batch, seq_len + 1),  # seq_len read
                           generator=torch.Generator().manual_seed(0))

    def step() -> float:
        model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        loss, _ = model.loss(tokens)
        loss.backward()
        return time.perf_counter() - start

    for _ in range(warmup):
        step()
    seconds = sorted(step() for _ in range(repeats))
    return {
        "backend": backend,
        "torch_threads": threads,
        "median_s": round(statistics.median(seconds), 4),
        "min_s": round(seconds[0], 4),
        "max_s": round(seconds[-1], 4),
        "repeats": repeats,
        "tokens_per_s": round(batch * seq_len / statistics.median(seconds), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", default=f"1,{os.cpu_count()}",
                        help="comma-separated torch thread counts to time")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    backends = ["naive", "chunk_torch"]
    load_before = os.getloadavg()
    thread_counts = sorted({int(n) for n in args.threads.split(",")})
    results = []
    for backend in backends:
        for threads in thread_counts:
            result = time_backend(backend, threads, args.batch, args.seq_len, args.warmup,
                                  args.repeats)
            print(f"{backend:>6}, {threads} thread(s): median {result['median_s'] * 1e3:7.1f} "
                  f"ms (min {result['min_s'] * 1e3:.1f}, max {result['max_s'] * 1e3:.1f}), "
                  f"{result['tokens_per_s']:,.0f} tokens/s")
            results.append(result)
    record = {
        "what": "hymo_mini forward + backward (model.loss(tokens).backward()), "
                f"batch {args.batch}, length {args.seq_len}",
        "results": results,
        "hardware": {
            "processor": platform.processor() or platform.machine(),
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        },
        "software": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "platform": platform.platform(),
        },
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["python", "benchmarks/mini_step.py",
                             *(sys.argv[1:] if argv is None else argv)]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
