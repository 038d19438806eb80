"""Where the chunked Triton gated delta kernels spend their time, and which launch settings
suit them: a development tool for the GPU machine (benchmarks/gated_delta.py is the
benchmark of record, with the peers).

    python3 benchmarks/gated_delta_profile.py --out $OUT/delta_profile.json
    python3 benchmarks/gated_delta_profile.py --dtypes bfloat16 --no-sweep

For each --dtypes (fp32 runs with its default "tf32x3" products; "float32_tf32" with
torch.backends.cuda.matmul.allow_tf32 = True): the time of each of the six launches from
torch.profiler (median over a few forward + backward calls), the registers, spills and
shared memory Triton compiled each kernel with, and the forward and forward + backward
time (triton.testing.do_bench). With the sweep (the default), for each chunk length in
CHUNKS: every in-chunk kernel at 1, 2, 4 and 8 warps and the two sequential passes at a
few (split, warps, stages) settings, paired so that one profiled run times every kernel
at one setting of each; the best setting of each kernel is then timed together, and the
other inverse (INVERSES) at that setting. Every run's output is checked against the first
setting's (relative RMS below 1e-3). The settings are restored afterwards.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.gated_delta_backends import kernel_alone, make_inputs, with_A_log  # noqa: E402
from benchmarks.gdn import environment, parse_shape, rel_err, time_ms  # noqa: E402
from hymo_mini.ops.gated_delta import chunk_kernels, chunk_states  # noqa: E402
from hymo_mini.ops.gated_delta import chunk_triton as gdt  # noqa: E402

IN_CHUNK = ("wy_fwd", "output", "du_local", "chunk_bwd")
STATES = ("state_fwd", "state_bwd")
KERNELS = {"_wy_fwd_kernel": "wy_fwd", "_output_kernel": "output",
           "_du_local_kernel": "du_local", "_chunk_bwd_kernel": "chunk_bwd",
           "_state_fwd_kernel": "state_fwd", "_state_bwd_kernel": "state_bwd"}
WARPS = (1, 2, 4, 8)
STATE_SETTINGS = ((32, 2, 1), (16, 1, 3), (16, 2, 3), (8, 1, 3))  # (split, warps, stages)


def kernel_us(fn, runs=5) -> dict:
    """Median device time (µs) per hymo kernel over ``runs`` calls of fn."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            fn()
        torch.cuda.synchronize()
    times = defaultdict(list)
    for ev in prof.events():
        if ev.device_type.name == "CUDA" and ev.name in KERNELS:
            times[KERNELS[ev.name]].append(getattr(ev, "device_time", None) or ev.cuda_time)
    return {k: round(statistics.median(v), 1) for k, v in times.items()}


def compiled_info() -> dict:
    """{kernel: [{n_regs, n_spills, shared, num_warps}, ...]} for every compiled variant."""
    out = {}
    for name, setting in KERNELS.items():
        fn = getattr(chunk_kernels, name, None) or getattr(chunk_states, name)
        rows = []
        for cache in getattr(fn, "device_caches", {}).values():
            kernels = cache[0] if isinstance(cache, tuple) else cache
            for k in getattr(kernels, "values", lambda: [])():
                meta = getattr(k, "metadata", None)
                rows.append({"n_regs": getattr(k, "n_regs", None),
                             "n_spills": getattr(k, "n_spills", None),
                             "shared": getattr(meta, "shared", None),
                             "num_warps": getattr(meta, "num_warps", None)})
        out[setting] = rows
    return out


class Case:
    def __init__(self, shape, dtype_name, device):
        B, T, H, S, D = parse_shape(shape)
        dtype = torch.float32 if dtype_name.startswith("float32") else torch.bfloat16
        self.tf32 = dtype_name == "float32_tf32"
        self.inputs, self.do = make_inputs(B, T, H, S, D, dtype, device)
        self.fn = with_A_log(kernel_alone("delta"))
        self.leaves = [t.detach().requires_grad_() for t in self.inputs]
        self.device = device
        self.first = None

    def fwdbwd(self):
        return torch.autograd.grad(self.fn(*self.leaves), self.leaves, self.do)

    def fwd(self):
        with torch.no_grad():
            return self.fn(*self.inputs)

    def run(self, times=True) -> dict:
        torch.backends.cuda.matmul.allow_tf32 = self.tf32
        try:
            o = self.fwd()
            row = {"kernels_us": kernel_us(self.fwdbwd)}
            if self.first is None:
                self.first = o
            row["rel_vs_first"] = rel_err(o, self.first)
            if times:
                row["fwd_ms"] = time_ms(self.fwd, self.device)
                row["fwdbwd_ms"] = time_ms(self.fwdbwd, self.device)
        except Exception as err:  # a setting that does not compile is reported
            row = {"error": f"{type(err).__name__}: {err}"[:300]}
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
        return row


def setting(chunk, warps, state, inverse="levels") -> dict:
    split, s_warps, stages = state
    cfg = {"chunk": chunk, "inverse": inverse}
    cfg.update({k: dict(num_warps=warps, num_stages=1) for k in IN_CHUNK})
    cfg.update({k: dict(split=split, num_warps=s_warps, num_stages=stages) for k in STATES})
    return cfg


def sweep(case) -> dict:
    trials, best = [], {}
    for chunk in gdt.CHUNKS:
        per_kernel = defaultdict(list)  # kernel -> [(us, its config)]
        for warps, state in zip(WARPS, STATE_SETTINGS, strict=True):
            cfg = setting(chunk, warps, state)
            gdt.CONFIGS.update(copy.deepcopy(cfg))
            row = case.run(times=False)
            trials.append({"config": cfg, **row})
            print("  ", chunk, warps, state, row, flush=True)
            if row.get("rel_vs_first", 1.0) < 1e-3:
                for kernel, us in row["kernels_us"].items():
                    per_kernel[kernel].append((us, cfg[kernel]))
        if len(per_kernel) < len(KERNELS):
            continue
        cfg = {"chunk": chunk, "inverse": "levels",
               **{k: min(v, key=lambda t: t[0])[1] for k, v in per_kernel.items()}}
        gdt.CONFIGS.update(copy.deepcopy(cfg))
        row = case.run()
        best[chunk] = {"config": cfg, **row}
        print("   best", chunk, best[chunk], flush=True)
    if not best:
        return {"trials": trials}
    chunk = min(best, key=lambda c: best[c].get("fwdbwd_ms", float("inf")))
    other = dict(best[chunk]["config"], inverse="rows")
    gdt.CONFIGS.update(copy.deepcopy(other))
    rows_row = {"config": other, **case.run()}
    print("   rows inverse", rows_row, flush=True)
    return {"trials": trials, "best_per_chunk": best, "rows_inverse": rows_row}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="B4_T4096_H40")
    parser.add_argument("--dtypes", nargs="*", default=["float32", "float32_tf32", "bfloat16"])
    parser.add_argument("--sweep-dtype", default="float32")
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    device = torch.device("cuda")
    saved = copy.deepcopy(gdt.CONFIGS)
    report = {"environment": environment(device, __file__, argv), "shape": args.shape,
              "configs": copy.deepcopy(gdt.CONFIGS), "current": {}}

    def save():
        if args.out:
            Path(args.out).write_text(json.dumps(report, indent=1, default=str))

    for name in args.dtypes:
        report["current"][name] = Case(args.shape, name, device).run()
        print(name, report["current"][name], flush=True)
        save()
    report["compiled"] = compiled_info()
    save()
    if not args.no_sweep:
        try:
            report["sweep"] = sweep(Case(args.shape, args.sweep_dtype, device))
        finally:
            gdt.CONFIGS.clear()
            gdt.CONFIGS.update(saved)
        report["compiled_after_sweep"] = compiled_info()
        save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
