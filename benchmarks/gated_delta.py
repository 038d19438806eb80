"""Time the true gated delta rule against flash-linear-attention on one GPU, in one run.

    python3 benchmarks/gated_delta.py --sections peers --rates model   # beside fla's chunk_kda
    python3 benchmarks/gated_delta.py --budget-s 500                  # all three sections

    H'_t = exp(g_t A) ⊙ H_{t-1},   H_t = H'_t + β_t b_t ⊗ (v_t - H'_tᵀ b_t),   o_t = c_tᵀ H_t

Three sections, the cheap ones first (fla's first call per shape autotunes for minutes):

precision  fp32, both rules' chunked kernels (the Function alone): the default "tf32x3"
           products against plain TF32 (torch.backends.cuda.matmul.allow_tf32 = True),
           forward and forward+backward time and the error against the loop.
dispatch   both rules' chunked kernels, every --dtypes: the Function alone ("kernel"),
           through the dispatcher with check_values=False (the GDN mixer's call, no host
           sync: "dispatch_no_check") and with the default check (one host sync:
           "dispatch_checked").
peers      the delta rule on every --shapes x --dtypes:
    chunk_triton         ops.gated_delta_rule(..., backend="chunk_triton", check_values=False)
    chunk_triton_kernel  ChunkGatedDeltaFunction.apply alone: no dispatch, no input check
    chunk_triton_kernel_tf32  the same with torch.backends.cuda.matmul.allow_tf32 = True
                         (fp32 only): plain TF32 products, the grade fla's fp32 kernels use
                         (Triton's default for fp32 tl.dot; fla sets no input_precision)
    chunk_torch          ops.gated_delta_rule(..., backend="chunk_torch", check_values=False)
    fla_chunk_kda        chunk_kda(q=c, k=b, v=v, g=gk, beta=beta, scale=1.0), gk = g·A the
                         log-decay per key (B, T, H, K) fp32: the same rule. b and c come in
                         as unit vectors (use_qk_l2norm_in_kernel stays False: fla does not
                         normalise them, as hymo's kernels do not; the caller does).
    fla_chunk_gdr        chunk_gated_delta_rule(q=c, k=b, v=v, g=g·a, beta=beta, scale=1.0):
                         one decay per head, so this backend (and its check) uses the
                         per-head mean a of A. Its backward refuses on Hopper with
                         Triton >= 3.4, < 3.7.1: the error is recorded, the forward timed.
fla is timed on its own leaves (gk, g·a computed once, outside the timing).

Inputs: v ~ N(0, 1); b, c unit vectors; g = sigmoid(N(0, 1)); A = -exp(A_log), A_log
uniform in (log 0.05, 0) per (head, key), so the per-step log-decay g·A lies in (-1, 0)
(``--rates weak``, the default and every run before 2026-12-05); or with ``--rates model``
A_log = log(h + 1) for head h on every key, as the GDN block initialises it; or with
``--rates spread`` that plus a jitter per key (``gated_delta_backends.make_inputs``; on the
first two every chunk's pairs take one product, on the third most take the levels);
β = sigmoid(N(0, 1)).

Before timing, every backend's output and gradients (v, b, c, g, A_log, β) are checked on a
slice (batch row 0, the first --check-T steps, every head: fla's autotune keys are mostly
(H, K, V, chunk), so this call does most of its autotuning) against hymo's loop in fp64 on
the same rounded inputs; a backend is timed only if its output agrees within the tolerance
(relative RMS).

Times: triton.testing.do_bench, median, after one warm-up call. peak_mib: the peak of one
forward + backward above the inputs. The floor: bytes_min_fwd (v, b, c, g, β read and o
written, in the run's dtype) moved at the device-to-device copy rate measured at the start
(environment.copy_GBps counts bytes read plus written); bytes_min_fwd_fla counts fla's
per-key gate (fp32) instead of g. clone_floor_ms: a clone of bytes_min_fwd bytes (twice
that traffic). targets: chunk_triton(_kernel, _kernel_tf32) fwd+bwd ≤
0.8 × and peak ≤ 1 × fla_chunk_kda's, forward ≤ 4 × the floor. --budget-s starts no case
past its time (those are listed in "skipped"); the JSON is rewritten after every case.

JSON (default benchmarks/out/gated_delta_<gpu>_<date>.json):
    environment  date, command, git_commit, the hardware and versions (fla_core too;
                 benchmarks/record.py), copy_GBps
    settings     the arguments
    precision    {rule: {"tf32x3" | "tf32": {fwd_ms, fwdbwd_ms, peak_mib, errors}}}
    dispatch     {rule: {dtype: {"kernel" | "dispatch_no_check" | "dispatch_checked":
                  {fwd_ms, fwdbwd_ms, peak_mib}}}}
    peers        {"B4_T4096_H40_float32": {B, T, H, S, D, dtype, tolerance, bytes_min_fwd,
                  bytes_min_fwd_fla, copy_floor_ms, clone_floor_ms, checks: {backend: {o,
                  dv, db, dc, dg, dA_log, dbeta, agrees} or {error}}, results: {backend:
                  {fwd_ms, fwdbwd_ms, peak_mib, bwd_error}}, targets: {backend: {...}}}}
    backends, backends_missing   the peers that ran; {name: why not} for the others
    backward_refusals  {backend: the error of its first backward that raised} (later
                 cases do not try again and say so in their "bwd_error")
    skipped      [case names]
errors, checks: relative RMS against the fp64 loop; "bwd_error" where a backward raised.

    python3 benchmarks/gated_delta.py           # everything; fla's autotuning takes most of it
    python3 benchmarks/gated_delta.py --sections peers --dtypes bfloat16
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import record  # noqa: E402
from benchmarks.gated_delta_backends import (  # noqa: E402
    DELTA_BACKENDS,
    DTYPES,
    RATES,
    check,
    cut,
    delta_backends,
    dispatched,
    kernel_alone,
    make_inputs,
    measure,
    oracle,
    with_A_log,
)
from benchmarks.gdn import environment, parse_shape, time_ms  # noqa: E402
from hymo_mini import ops  # noqa: E402

SECTIONS = ["precision", "dispatch", "peers"]
DEFAULT_SHAPES = ["B4_T4096_H40", "B1_T16384_H40"]


# ------------------------------------------------------------------------------ sections
class Run:
    """The report, its file, and the time budget: a case past --budget-s is skipped."""

    def __init__(self, args, device, path, env):
        self.args, self.device, self.path = args, device, path
        self.end = time.monotonic() + args.budget_s
        self.report = {"environment": env, "settings": vars(args),
                       "skipped": []}

    def go(self, case):
        if time.monotonic() < self.end:
            return True
        self.report["skipped"].append(case)
        print(f"  skip {case}: past --budget-s", flush=True)
        return False

    def save(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.report, indent=1) + "\n")

    def tol(self, dtype):
        return self.args.tol_fp32 if dtype == torch.float32 else self.args.tol_16bit


def first_shape_inputs(run, dtype):
    B, T, H, S, D = parse_shape(run.args.shapes[0])
    return make_inputs(B, T, H, S, D, dtype, run.device, rates=run.args.rates)


def bench_precision(run):
    """fp32: the chunked kernels' tf32x3 products (the default) against plain TF32."""
    out = run.report.setdefault("precision", {})
    inputs, do = first_shape_inputs(run, torch.float32)
    for rule in ("gla", "delta"):
        n = 6 if rule == "delta" else 5  # the gla rule has no beta
        part, d_part = cut(inputs[:n], do, run.args.check_T)
        ref = oracle(rule, part, d_part)
        fn = with_A_log(kernel_alone(rule))  # reads the TF32 switch at every call
        for mode, allow in (("tf32x3", False), ("tf32", True)):
            if not run.go(f"precision {rule} {mode}"):
                continue
            torch.backends.cuda.matmul.allow_tf32 = allow
            try:
                errors = check(fn, part, d_part, ref, run.tol(torch.float32))
                result = measure(fn, inputs[:n], do, run.device) if errors["agrees"] else {}
            finally:
                torch.backends.cuda.matmul.allow_tf32 = False
            out.setdefault(rule, {})[mode] = {**result, "errors": errors}
            print(f"  precision {rule:5s} {mode:6s} {out[rule][mode]}", flush=True)
            run.save()


def bench_dispatch(run):
    """The kernel alone against the dispatcher, with and without its value check."""
    out = run.report.setdefault("dispatch", {})
    for dtype_name in run.args.dtypes:
        inputs, do = first_shape_inputs(run, DTYPES[dtype_name])
        for rule in ("gla", "delta"):
            n = 6 if rule == "delta" else 5
            ways = {"kernel": kernel_alone(rule),
                    "dispatch_no_check": dispatched(rule, "chunk_triton", False),
                    "dispatch_checked": dispatched(rule, "chunk_triton", True)}
            for way, call in ways.items():
                if not run.go(f"dispatch {rule} {dtype_name} {way}"):
                    continue
                result = measure(with_A_log(call), inputs[:n], do, run.device)
                out.setdefault(rule, {}).setdefault(dtype_name, {})[way] = result
                print(f"  dispatch {rule:5s} {dtype_name:8s} {way:17s} {result}", flush=True)
                run.save()
        del inputs, do
        gc.collect()


def bench_peers(run, shape, dtype_name, backends):
    """The delta rule's backends on one shape and dtype: check on a slice, then time."""
    B, T, H, S, D = parse_shape(shape)
    dtype = DTYPES[dtype_name]
    inputs, do = make_inputs(B, T, H, S, D, dtype, run.device, rates=run.args.rates)
    size = dtype.itemsize
    floor_bytes = (3 * B * T * H * S + 2 * B * T * H * D) * size + 2 * B * T * H * size
    entry = {"B": B, "T": T, "H": H, "S": S, "D": D, "dtype": dtype_name,
             "tolerance": run.tol(dtype), "bytes_min_fwd": floor_bytes,
             "bytes_min_fwd_fla": floor_bytes - B * T * H * size + B * T * H * S * 4,
             "checks": {}, "results": {}}
    gbps = run.report["environment"].get("copy_GBps")
    entry["copy_floor_ms"] = floor_bytes / gbps / 1e6 if gbps else None
    entry["clone_floor_ms"] = clone_ms(floor_bytes, run.device)
    run.report.setdefault("peers", {})[f"{shape}_{dtype_name}"] = entry
    part, d_part = cut(inputs, do, run.args.check_T)
    refs, refusals = {}, run.report.setdefault("backward_refusals", {})
    for name, backend in backends.items():
        if name.endswith("_tf32") and dtype != torch.float32:
            continue  # 16-bit inputs use TF32 products anyway
        if not run.go(f"peers {shape} {dtype_name} {name}"):
            continue
        if backend.scalar_decay not in refs:
            refs[backend.scalar_decay] = oracle("delta", part, d_part, backend.scalar_decay)
        # a backward that refused once is not run again (fla autotunes several kernels first)
        result = entry["checks"][name] = check(with_A_log(backend.call), part, d_part,
                                               refs[backend.scalar_decay], run.tol(dtype),
                                               refusals.get(name))
        if "bwd_error" in result:
            refusals.setdefault(name, result["bwd_error"])
        print(f"  check {shape} {dtype_name} {name:20s} {result}", flush=True)
        if result["agrees"]:
            leaves, fn = backend.timed(inputs)
            result = measure(fn, leaves, do, run.device, backward="bwd_error" not in result)
            if "bwd_error" in entry["checks"][name]:
                result["bwd_error"] = entry["checks"][name]["bwd_error"]
            entry["results"][name] = result
            print(f"  time  {shape} {dtype_name} {name:20s} {result}", flush=True)
        entry["targets"] = targets(entry)
        run.save()
    del inputs, do
    gc.collect()
    if run.device.type == "cuda":
        torch.cuda.empty_cache()


def clone_ms(n_bytes, device):
    """The time of cloning a buffer of ``n_bytes`` (which reads and writes them: twice the
    traffic of the floor; the anchors' "copy floor" looks like this one)."""
    if device.type != "cuda":
        return None
    buffer = torch.empty(n_bytes // 4, dtype=torch.float32, device=device)
    ms = time_ms(buffer.clone, device)
    del buffer
    return ms


def targets(entry):
    """Issue 20's targets for hymo's kernel: against fla's chunk_kda and the copy floor."""
    kda, floor, out = entry["results"].get("fla_chunk_kda", {}), entry["copy_floor_ms"], {}
    for name in ("chunk_triton", "chunk_triton_kernel", "chunk_triton_kernel_tf32"):
        mine = entry["results"].get(name, {})
        if "fwd_ms" not in mine:
            continue
        t = out[name] = {}
        if floor:
            t["fwd_over_floor"] = mine["fwd_ms"] / floor
            t["fwd_within_4x_floor"] = t["fwd_over_floor"] <= 4.0
        if entry["clone_floor_ms"]:
            t["fwd_over_clone_floor"] = mine["fwd_ms"] / entry["clone_floor_ms"]
        if kda.get("fwdbwd_ms") and mine.get("fwdbwd_ms"):  # fla's fwd_ms is there too
            t["fwd_over_kda"] = mine["fwd_ms"] / kda["fwd_ms"]
            t["fwdbwd_over_kda"] = mine["fwdbwd_ms"] / kda["fwdbwd_ms"]
            t["fwdbwd_within_0.8x_kda"] = t["fwdbwd_over_kda"] <= 0.8
        if kda.get("peak_mib") and mine.get("peak_mib"):
            t["peak_over_kda"] = mine["peak_mib"] / kda["peak_mib"]
            t["peak_within_kda"] = t["peak_over_kda"] <= 1.0
    return out


# ------------------------------------------------------------------------------ main
def print_table(report):
    def fmt(x, f):
        return (f % x) if isinstance(x, (int, float)) else "-".rjust(int(f[1:].split(".")[0]))
    print(f"\n{'case':34s} {'backend':25s} {'fwd ms':>8s} {'fwd+bwd':>8s} {'peak MiB':>9s} "
          f"{'err o':>8s}")

    def row(case, name, r, err=None):
        print(f"{case:34s} {name:25s} {fmt(r.get('fwd_ms'), '%8.3f')} "
              f"{fmt(r.get('fwdbwd_ms'), '%8.3f')} {fmt(r.get('peak_mib'), '%9.1f')} "
              f"{fmt(err, '%8.1e')}")
    for rule, modes in report.get("precision", {}).items():
        for mode, r in modes.items():
            row(f"precision {rule} fp32", mode, r, r["errors"].get("o"))
    for rule, dtypes in report.get("dispatch", {}).items():
        for dtype_name, ways in dtypes.items():
            for way, r in ways.items():
                row(f"dispatch {rule} {dtype_name}", way, r)
    for key, entry in report.get("peers", {}).items():
        for name, c in entry["checks"].items():
            row(key, name, entry["results"].get(name, {}), c.get("o"))
            if "error" in c or "bwd_error" in c:
                print(f"{'':34s} {'':25s} {(c.get('error') or c.get('bwd_error'))[:60]}")
        print(f"{key:34s} {'copy floor / clone':25s} {fmt(entry['copy_floor_ms'], '%8.3f')} "
              f"{fmt(entry.get('clone_floor_ms'), '%8.3f')}")
        for name, t in entry.get("targets", {}).items():
            if t:
                print(f"{key:34s} {name:25s} " + " ".join(
                    f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in t.items()))
    if report["skipped"]:
        print(f"skipped (past --budget-s): {report['skipped']}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", nargs="+", default=SECTIONS, choices=SECTIONS)
    parser.add_argument("--shapes", nargs="+", default=DEFAULT_SHAPES,
                        help="B<b>_T<t>_H<h>[_S<s>_D<d>] (S = D = 32 unless given); "
                        "precision and dispatch use the first")
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=DTYPES)
    parser.add_argument("--backends", nargs="+", default=DELTA_BACKENDS, choices=DELTA_BACKENDS)
    parser.add_argument("--check-T", type=int, default=256,
                        help="steps of the slice every backend is checked on")
    parser.add_argument("--tol-fp32", type=float, default=5e-3)
    parser.add_argument("--tol-16bit", type=float, default=2e-2)
    parser.add_argument("--rates", default="weak", choices=RATES,
                        help="the decay rates of the inputs: weak, as the GDN block "
                        "initialises them (model), or those moved key by key (spread)")
    parser.add_argument("--budget-s", type=float, default=520.0,
                        help="start no case after this many seconds")
    parser.add_argument("--out", default=None, help="JSON path (default: benchmarks/out/"
                        "gated_delta_<gpu>_<date>.json)")
    args = parser.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 products stay fp32 unless a case asks
    torch.backends.cudnn.allow_tf32 = False
    env = environment(device, __file__, argv)
    gpu = env.get("gpu", "cpu").split()[-1].lower()
    path = Path(args.out) if args.out else record.out_path(
        f"gated_delta_{gpu}_{env['date'][:10]}.json")
    run = Run(args, device, path, env)
    print(f"{run.report['environment']}", flush=True)
    triton_ok = ops.triton_usable(device)
    for section in ("precision", "dispatch"):
        if section in args.sections and not triton_ok:
            run.report[section] = {"error": "no CUDA GPU and no Triton interpreter"}
        elif section in args.sections:
            (bench_precision if section == "precision" else bench_dispatch)(run)
    if "peers" in args.sections:
        backends, missing = delta_backends(args.backends, device)
        run.report["backends"], run.report["backends_missing"] = list(backends), missing
        print(f"backends {list(backends)}; missing {missing}", flush=True)
        for shape in args.shapes:
            for dtype_name in args.dtypes:
                bench_peers(run, shape, dtype_name, backends)
    run.save()
    print_table(run.report)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
