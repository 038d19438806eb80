"""Where the chunked Triton GDN kernel spends its time, and which launch settings suit it.

    python3 benchmarks/gdn_chunk_profile.py                      # B=4, T=4096, H=40, fp32
    python3 benchmarks/gdn_chunk_profile.py --shape B1_T16384_H40 --dtype bfloat16
    python3 benchmarks/gdn_chunk_profile.py --sweep              # num_warps / num_stages

Per kernel: the median time of each of the four launches (state forward, output forward,
state backward, chunk backward) from torch.profiler over a few forward + backward runs;
with --sweep, the forward and forward + backward time (triton.testing.do_bench) under each
setting of ``CONFIGS`` tried, the output checked against the first setting each time.
A development tool for the GPU machine; benchmarks/gdn.py is the benchmark of record.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import gdn as bench  # noqa: E402

from hymo_mini.ops.gla import chunk_triton as gtc  # noqa: E402


def kernel_times(fn, runs=5):
    """CUDA time per call of fn (µs) for each kernel name, over ``runs`` calls: a name
    launched twice in one call (a kernel run once per form) counts both launches."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            fn()
        torch.cuda.synchronize()
    times = defaultdict(float)
    for ev in prof.events():
        if ev.device_type.name == "CUDA":
            times[ev.name] += ev.device_time if hasattr(ev, "device_time") else ev.cuda_time
    return {name: total / runs for name, total in times.items()}


def _time(fn, inputs, do, device, o_first, grad=True):
    o = bench.forward(fn, inputs)()
    row = {"rel_vs_first": bench.rel_err(o, o_first) if o_first is not None else 0.0,
           "fwd_ms": bench.time_ms(bench.forward(fn, inputs), device)}
    if grad:
        row["fwdbwd_ms"] = bench.time_ms(bench.forward_backward(fn, inputs, do), device)
    return row, o


def sweep(fn, inputs, do, device):
    """One setting changed at a time, from the current CONFIGS: the chunk-state kernels'
    splits and warps (forward time), then for each block size the output kernel's warps (forward
    time), then the chunk backward's warps (forward + backward time); the best of each
    stays for the next."""
    rows, o_first = [], None

    def trial(change, grad, key):
        nonlocal o_first
        saved = {k: (dict(v) if isinstance(v, dict) else v) for k, v in gtc.CONFIGS.items()}
        gtc.CONFIGS.update(change)
        try:
            row, o = _time(fn, inputs, do, device, o_first, grad)
            o_first = o if o_first is None else o_first
        except Exception as err:  # a setting that does not compile is reported
            row = {"error": f"{type(err).__name__}: {err}"[:300]}
        row["change"] = change
        print("  ", row, flush=True)
        rows.append(row)
        gtc.CONFIGS.clear()
        gtc.CONFIGS.update(saved)
        return row.get(key, float("inf")) if row.get("rel_vs_first", 1) < 1e-2 else float("inf")

    def pick(options, grad, key):
        times = [trial(change, grad, key) for change in options]
        choice = options[min(range(len(options)), key=times.__getitem__)]
        gtc.CONFIGS.update(choice)
        return choice

    pick([{"chunk_delta": dict(num_warps=cw, num_stages=1),
           "state_scan": dict(split=sp, num_warps=w, num_stages=st)}
          for cw, sp, w, st in [(1, 16, 1, 3), (2, 16, 1, 3), (4, 16, 1, 3), (1, 8, 1, 3),
                                (1, 16, 1, 4), (1, 32, 2, 3), (1, 32, 4, 4)]],
         False, "fwd_ms")
    pick([{"state_bwd": dict(split=sp, num_warps=w, num_stages=st)}
          for sp, w, st in [(16, 2, 3), (16, 1, 3), (32, 2, 3), (32, 4, 3)]], True,
         "fwdbwd_ms")
    per_block = {}
    for block in gtc.BLOCKS:  # (64 was tried too: slower, and less precise; see CONFIGS)
        gtc.CONFIGS["block"] = block
        warps = [1, 2, 4]
        fwd = pick([{"output_fwd": dict(num_warps=w, num_stages=1)} for w in warps], False,
                   "fwd_ms")
        bwd = pick([{"chunk_bwd": dict(num_warps=w, num_stages=1)} for w in warps], True,
                   "fwdbwd_ms")
        per_block[block] = {**fwd, **bwd}
    final = []
    for block, cfg in per_block.items():
        gtc.CONFIGS.update(block=block, **cfg)
        row, _ = _time(fn, inputs, do, device, o_first)
        final.append({**row, "block": block, **cfg})
        print("   best", final[-1], flush=True)
    state = ("chunk_delta", "state_scan", "state_bwd")
    return {"trials": rows, "per_block": final, "state": {k: gtc.CONFIGS[k] for k in state}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="B4_T4096_H40")
    parser.add_argument("--dtype", default="float32", choices=bench.DTYPES)
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    device = torch.device("cuda")
    B, T, H, S, D = bench.parse_shape(args.shape)
    inputs, do = bench.make_inputs(B, T, H, S, D, bench.DTYPES[args.dtype], device)
    fn = bench.hymo_backend("chunk_triton")
    report = {"environment": bench.environment(device, __file__, argv), "shape": args.shape,
              "dtype": args.dtype, "configs": gtc.CONFIGS}
    report["kernels_us"] = kernel_times(bench.forward_backward(fn, inputs, do))
    for name, us in sorted(report["kernels_us"].items(), key=lambda kv: -kv[1]):
        print(f"  {us:9.1f} us  {name[:90]}", flush=True)
    if args.sweep:
        report["sweep"] = sweep(fn, inputs, do, device)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
