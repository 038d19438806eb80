"""Time the GDN recurrence backends on one GPU, on the same inputs, in one run.

    H_t = exp(g_t * A) ⊙ H_{t-1} + b_t ⊗ v_t,    o_t = c_t^T H_t

Backends: every hymo_mini backend of the gla rule that can run ("naive", "chunk_torch",
"recurrent_triton", "chunk_triton"; "recurrent_triton_kernel" is the recurrent kernel's
autograd Function called without the dispatcher and its input checks,
"chunk_triton_kernel" the same for the chunked kernel: the checks' small reductions and one
host sync are a fixed cost per call that fla does not pay; "chunk_triton_unchecked" the
dispatcher as the GDN mixer calls it, ``check_values=False``: the type and shape checks
without the finiteness check's host sync), and the peer,
flash-linear-attention's GLA kernels called so that they compute exactly this recurrence:
q = c, k = b, gk = g[..., None] * A (a natural-log decay per state dimension), scale = 1.0,
layout [B, T, H, *]:

    fla_fused_recurrent   fla.ops.gla.fused_recurrent_gla(c, b, v, gk=gk, scale=1.0)
    fla_chunk             fla.ops.gla.chunk_gla(c, b, v, g=gk, scale=1.0)

For each shape and dtype: every backend's output is first checked against the naive loop
(run in fp32 on the same, already rounded inputs), gradients too where the loop's backward
is affordable (T <= --grad-check-max-T, else against fla_fused_recurrent, whose gate
gradient is itself approximate); a backend is timed only if its output agrees:

    fwd_ms      forward only, no autograd (triton.testing.do_bench, median)
    fwdbwd_ms   forward + backward to v, b, c, g and A_log (A = -exp(A_log) in the graph)
    peak_mib    peak memory of one forward + backward above what was allocated before it
                (the inputs), torch.cuda.max_memory_allocated

Usage (on the GPU machine):

    python3 benchmarks/gdn.py                        # every backend, both shapes and dtypes
    python3 benchmarks/gdn.py --shapes B4_T4096_H40 --dtypes float32 \
        --backends recurrent_triton fla_fused_recurrent       # a restricted run
    python3 benchmarks/gdn.py --sweep-T              # also B=1, H=40, T = 1k .. 64k
    python3 benchmarks/gdn.py --tune                 # time the kernel's launch configs first

The JSON records the hardware, versions, date, this command and the git commit
(benchmarks/record.py); ``cd book && python3 -m hymo_book.plots`` draws it
(book/hymo_book/plots/kernel_benchmarks.py).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import record  # noqa: E402
from hymo_mini import ops  # noqa: E402

HYMO_BACKENDS = ["naive", "chunk_torch", "recurrent_triton", "recurrent_triton_kernel",
                 "chunk_triton", "chunk_triton_unchecked", "chunk_triton_kernel",
                 "chunk_triton_kernel_tf32"]
FLA_BACKENDS = ["fla_fused_recurrent", "fla_chunk"]
DEFAULT_SHAPES = ["B4_T4096_H40", "B1_T16384_H40"]
SWEEP_T = [1024, 2048, 4096, 8192, 16384, 32768, 65536]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


# ------------------------------------------------------------------------------ backends
def hymo_backend(name):
    if name == "recurrent_triton_kernel":  # the autograd Function alone: no checks, no dispatch
        from hymo_mini.ops.gla.recurrent_triton import RecurrentGLAFunction
        return lambda v, b, c, g, A: RecurrentGLAFunction.apply(
            v, b, c, g, A, None, False, torch.is_grad_enabled())[0]
    # likewise for the chunked kernel; for "_tf32", bench_shape turns PyTorch's TF32 switch on
    if name in ("chunk_triton_kernel", "chunk_triton_kernel_tf32"):
        from hymo_mini.ops.gla.chunk_triton import ChunkGLAFunction
        return lambda v, b, c, g, A: ChunkGLAFunction.apply(
            v, b, c, g, A, None, False, torch.is_grad_enabled())[0]
    if name == "chunk_triton_unchecked":  # the mixer's call: no finiteness check, no sync
        return lambda v, b, c, g, A: ops.gated_linear_attention(
            v, b, c, g, A, backend="chunk_triton", check_values=False)[0]
    return lambda v, b, c, g, A: ops.gated_linear_attention(v, b, c, g, A, backend=name)[0]


def fla_backend(name):
    from fla.ops.gla import chunk_gla, fused_recurrent_gla

    def run(v, b, c, g, A):
        gk = g.float()[..., None] * A  # (B, T, H, S) log-decay, fp32
        if name == "fla_fused_recurrent":
            return fused_recurrent_gla(c, b, v, gk=gk, scale=1.0)[0]
        return chunk_gla(c, b, v, g=gk, scale=1.0)[0]
    return run


def available_backends(device):
    found = {}
    for name in HYMO_BACKENDS:
        triton = "triton" in name
        if not triton or (ops.triton_usable(device)):
            found[name] = hymo_backend(name)
    if device.type == "cuda":
        try:
            for name in FLA_BACKENDS:
                found[name] = fla_backend(name)
        except ImportError as err:
            print(f"fla not importable ({err}); peer backends skipped", flush=True)
    return found


# ------------------------------------------------------------------------------ measuring
def parse_shape(text):
    fields = dict((part[0], int(part[1:])) for part in text.split("_"))
    return fields["B"], fields["T"], fields["H"], fields.get("S", 32), fields.get("D", 32)


RATES = ("model", "weak", "spread")  # make_inputs's decay rates


def make_inputs(B, T, H, S, D, dtype, device, seed=0, rates="model"):
    """Unit-scale inputs. ``rates``: "model", A as the block initialises it (head h decays
    at rate h + 1 on every key); "weak", A_log uniform in (log 0.05, 0) per (head, key) as
    benchmarks/gated_delta.py draws it; "spread", the model's A_log plus a jitter uniform in
    (-1, 1) per (head, key). Every chunk takes the one product on the first two
    (``ops.one_product_chunks``), most take the levels on the third. The other tensors are
    the same draws either way."""
    if rates not in RATES:
        raise ValueError(f"rates must be one of {RATES}, got {rates!r}")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    v = torch.randn(B, T, H, D, generator=gen)
    b = torch.randn(B, T, H, S, generator=gen) / S**0.5
    c = torch.randn(B, T, H, S, generator=gen) / S**0.5
    g = torch.sigmoid(torch.randn(B, T, H, generator=gen))
    A_log = torch.log(torch.arange(1, H + 1.0))[:, None].repeat(1, S)
    if rates == "weak":
        A_log = torch.empty(H, S).uniform_(math.log(0.05), 0.0, generator=gen)
    if rates == "spread":  # its own generator: the draw of do stays the same
        A_log += torch.empty(H, S).uniform_(-1.0, 1.0,
                                            generator=torch.Generator().manual_seed(seed + 1))
    out = [t.to(device, dtype) for t in (v, b, c, g)] + [A_log.to(device)]
    return out, torch.randn(B, T, H, D, generator=gen).to(device, dtype)  # and do


def rel_err(x, ref):
    x, ref = x.double(), ref.double()
    return ((x - ref).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()).item()


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_ms(fn, device, slow=False):
    """Median milliseconds: triton's do_bench on the GPU; a few timed runs otherwise."""
    if device.type == "cuda" and not slow:
        from triton.testing import do_bench
        return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))
    fn()  # warm up
    times = []
    for _ in range(1 if slow else 3):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def peak_mib(fn, device):
    if device.type != "cuda":
        return None
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = fn()
    torch.cuda.synchronize()
    del out
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def forward(fn, inputs):
    v, b, c, g, A_log = inputs
    A = -torch.exp(A_log)

    def run():
        with torch.no_grad():
            return fn(v, b, c, g, A)
    return run


def forward_backward(fn, inputs, do):
    leaves = [t.detach().requires_grad_() for t in inputs]

    def run():
        v, b, c, g, A_log = leaves
        o = fn(v, b, c, g, -torch.exp(A_log))
        return torch.autograd.grad(o, leaves, do)
    return run


GRAD_NAMES = ["dv", "db", "dc", "dg", "dA_log"]


# ------------------------------------------------------------------------------ one shape
def bench_shape(shape, dtype_name, backends, args, device):
    B, T, H, S, D = parse_shape(shape)
    dtype = DTYPES[dtype_name]
    inputs, do = make_inputs(B, T, H, S, D, dtype, device, rates=args.rates)
    tol = 5e-3 if dtype == torch.float32 else 2e-2
    entry = {"B": B, "T": T, "H": H, "S": S, "D": D, "dtype": dtype_name,
             "bytes_min_fwd": sum(t.numel() * t.element_size() for t in inputs[:4])
             + B * T * H * D * inputs[0].element_size(),
             "tolerance": tol, "checks": {}, "results": {}}
    # the oracle: the eager loop in fp32 on the rounded inputs
    ref_inputs = [t.float() for t in inputs]
    eager = hymo_backend("naive")
    o_ref = forward(eager, ref_inputs)()
    grads_ref, grads_source = None, None
    if T <= args.grad_check_max_T:
        start = time.perf_counter()
        grads_ref = forward_backward(eager, ref_inputs, do.float())()
        sync(device)
        grads_source = "naive"
        entry["eager_fwdbwd_ms_single_run"] = (time.perf_counter() - start) * 1e3
    elif "fla_fused_recurrent" in backends:
        grads_ref = forward_backward(backends["fla_fused_recurrent"], inputs, do)()
        grads_source = "fla_fused_recurrent"
    for name, fn in backends.items():
        check = {}
        if name.endswith("_tf32") and dtype != torch.float32:
            continue  # (TF32 concerns fp32 inputs only)
        torch.backends.cuda.matmul.allow_tf32 = name.endswith("_tf32")  # the whole fwd + bwd
        try:
            check["o"] = rel_err(forward(fn, inputs)(), o_ref)
            if grads_ref is not None and name != "naive" and name != grads_source:
                grads = forward_backward(fn, inputs, do)()
                check["grads_vs"] = grads_source
                for n, gr, gr_ref in zip(GRAD_NAMES, grads, grads_ref, strict=True):
                    check[n] = rel_err(gr, gr_ref)
            # outputs gate the timing; gradients are reported (fla's gate gradient is itself
            # approximate: it comes from a cumulative-sum identity, see gdn_triton.py)
            check["agrees"] = check["o"] < tol  # False on NaN too
        except Exception as err:  # a backend that fails is reported, not timed
            check = {"error": f"{type(err).__name__}: {err}", "agrees": False}
        entry["checks"][name] = check
        print(f"  check {shape} {dtype_name} {name:20s} {check}", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    for name, fn in backends.items():
        if not entry["checks"].get(name, {}).get("agrees"):
            continue
        torch.backends.cuda.matmul.allow_tf32 = name.endswith("_tf32")
        result = {}
        if name == "naive":
            if T > args.eager_max_T:
                continue
            result["fwd_ms"] = time_ms(forward(fn, inputs), device, slow=True)
            if "eager_fwdbwd_ms_single_run" in entry and dtype == torch.float32:
                result["fwdbwd_ms"] = entry["eager_fwdbwd_ms_single_run"]  # the oracle's run
        else:
            result["fwd_ms"] = time_ms(forward(fn, inputs), device)
            run = forward_backward(fn, inputs, do)
            result["fwdbwd_ms"] = time_ms(run, device)
            result["peak_mib"] = peak_mib(run, device)
        entry["results"][name] = result
        print(f"  time  {shape} {dtype_name} {name:20s} {result}", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False  # the eager oracle stays fp32
    ratios = {}
    for name in ("recurrent_triton", "recurrent_triton_kernel", "chunk_triton",
                 "chunk_triton_unchecked", "chunk_triton_kernel", "chunk_triton_kernel_tf32",
                 "chunk_torch"):
        for peer in ("fla_fused_recurrent", "fla_chunk", "naive"):
            mine, theirs = entry["results"].get(name), entry["results"].get(peer)
            if mine and theirs:
                ratios[f"{name}/{peer}"] = {k: mine[k] / theirs[k] for k in mine
                                            if theirs.get(k) and mine[k] is not None}
    entry["ratios"] = ratios
    return entry


def sweep(backends, args, device, out=None, save=lambda: None):
    """B=1, H=40 over T; fills ``out`` (saved after every T, so a cut-off run keeps the
    lengths it finished; "T" lists those)."""
    dtype_name = args.dtypes[0]
    out = {} if out is None else out
    out.update({"B": 1, "H": 40, "S": 32, "D": 32, "dtype": dtype_name, "T": [],
                "results": {name: {"fwd_ms": [], "fwdbwd_ms": []} for name in backends}})
    for T in args.sweep_T:
        inputs, do = make_inputs(1, T, 40, 32, 32, DTYPES[dtype_name], device, rates=args.rates)
        for name, fn in backends.items():
            res = out["results"][name]
            if name == "naive" and T > args.sweep_eager_max_T:
                res["fwd_ms"].append(None)
                res["fwdbwd_ms"].append(None)
                continue
            slow = name == "naive"
            res["fwd_ms"].append(time_ms(forward(fn, inputs), device, slow=slow))
            res["fwdbwd_ms"].append(None if slow else
                                    time_ms(forward_backward(fn, inputs, do), device))
            print(f"  sweep T={T:6d} {name:20s} fwd {res['fwd_ms'][-1]:.3f} ms "
                  f"fwd+bwd {res['fwdbwd_ms'][-1]} ms", flush=True)
        out["T"].append(T)
        save()
        del inputs, do
        gc.collect()
    return out


# ------------------------------------------------------------------------------ tuning
TUNE_FWD = [dict(block=bl, num_warps=w, num_stages=st) for bl, w, st in
            [(8, 1, 3), (16, 1, 3), (32, 1, 3), (32, 2, 3)]]
TUNE_BWD = [dict(chunk=ch, num_warps=w, num_stages=st) for ch, w, st in
            [(64, 1, 3), (64, 2, 3), (64, 4, 3), (32, 2, 3)]]


def tune(shape, dtype_name, device):
    """Time the forward and backward kernels alone under each launch config."""
    from hymo_mini.ops.gla import recurrent_triton as kt
    B, T, H, S, D = parse_shape(shape)
    dtype = DTYPES[dtype_name]
    (v, b, c, g, A_log), do = make_inputs(B, T, H, S, D, dtype, device)
    A, g32 = -torch.exp(A_log), g.float()
    key = kt._itemsize_key(v)
    saved = {name: dict(kt.CONFIGS[name][key]) for name in ("fwd", "bwd")}
    out = {"shape": shape, "dtype": dtype_name, "fwd": [], "bwd": []}
    o_ref = None
    for cfg in TUNE_FWD:
        kt.CONFIGS["fwd"][key] = cfg
        o = kt._fwd(v, b, c, g32, A, None, False, False)[0]
        o_ref = o if o_ref is None else o_ref
        ms = time_ms(lambda: kt._fwd(v, b, c, g32, A, None, False, False), device)
        out["fwd"].append({**cfg, "ms": ms, "rel_vs_first": rel_err(o, o_ref)})
        print(f"  tune fwd {dtype_name} {cfg} {ms:.3f} ms", flush=True)
    kt.CONFIGS["fwd"][key] = saved["fwd"]
    grads_ref = None
    for cfg in TUNE_BWD:
        kt.CONFIGS["bwd"][key] = cfg  # the chunk also sets the forward's checkpoints
        ckpt = kt._fwd(v, b, c, g32, A, None, False, True)[2]
        grads = kt._bwd(v, b, c, g32, A, None, ckpt, do, None)[:5]
        grads_ref = grads if grads_ref is None else grads_ref
        ms = time_ms(lambda ckpt=ckpt: kt._bwd(v, b, c, g32, A, None, ckpt, do, None), device)
        err = max(rel_err(x, y) for x, y in zip(grads, grads_ref, strict=True))
        out["bwd"].append({**cfg, "ms": ms, "rel_vs_first": err})
        print(f"  tune bwd {dtype_name} {cfg} {ms:.3f} ms", flush=True)
    kt.CONFIGS["bwd"][key] = saved["bwd"]
    same = 1e-5 if dtype == torch.float32 else 1e-2  # 16-bit outputs round differently
    best = {name: min(out[name], key=lambda r: r["ms"] if r["rel_vs_first"] < same else 1e9)
            for name in ("fwd", "bwd")}
    out["best"] = {name: {k: r[k] for k in r if k not in ("ms", "rel_vs_first")}
                   for name, r in best.items()}
    return out


# ------------------------------------------------------------------------------ main
def environment(device, script, argv=None):
    """benchmarks.record's stamp, hardware and versions (fla-core too) in one flat section,
    and on CUDA the device-to-device copy rate the kernels are held against."""
    env = {**record.stamp(script, argv), **record.hardware(device),
           **record.versions("fla-core")}
    if device.type == "cuda":
        x = torch.empty(2**28, device=device)  # 1 GiB: device-to-device copy bandwidth
        ms = time_ms(lambda: x.clone(), device)
        env["copy_GBps"] = round(2 * x.numel() * 4 / ms / 1e6, 1)  # read + write
        del x
    return env


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=DEFAULT_SHAPES,
                        help="B<b>_T<t>_H<h>[_S<s>_D<d>] (S = D = 32 unless given)")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=DTYPES)
    parser.add_argument("--backends", nargs="+", default=None,
                        help=f"subset of {HYMO_BACKENDS + FLA_BACKENDS} (default: all found)")
    parser.add_argument("--sweep-T", dest="sweep", action="store_true",
                        help="also time B=1, H=40 over T (first dtype)")
    parser.add_argument("--sweep-values", dest="sweep_T", nargs="+", type=int, default=SWEEP_T)
    parser.add_argument("--sweep-only", action="store_true", help="skip the shape table")
    parser.add_argument("--tune", action="store_true",
                        help="time the recurrent kernel's launch configs first and use the best")
    parser.add_argument("--rates", default="model", choices=RATES,
                        help="the inputs' decay rates: as the GDN block initialises them "
                        "(model), weak, or the model's moved key by key (spread)")
    parser.add_argument("--eager-max-T", type=int, default=16384)
    parser.add_argument("--sweep-eager-max-T", type=int, default=2048)
    parser.add_argument("--grad-check-max-T", type=int, default=4096)
    parser.add_argument("--out", default=None, help="JSON path (default: benchmarks/out/"
                        "gdn_<gpu>_<date>.json)")
    parser.add_argument("--figure", default=None, help="also draw the results into this PNG")
    args = parser.parse_args(argv)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False  # the eager oracle stays fp32
    torch.backends.cudnn.allow_tf32 = False
    backends = available_backends(device)
    if args.backends:
        unknown = set(args.backends) - set(HYMO_BACKENDS + FLA_BACKENDS)
        if unknown:
            parser.error(f"unknown backends {sorted(unknown)}")
        backends = {n: fn for n, fn in backends.items() if n in args.backends}
    env = environment(device, __file__, argv)
    out_path = Path(args.out) if args.out else record.out_path(
        f"gdn_{env.get('gpu', 'cpu').replace(' ', '_').lower()}_{env['date'][:10]}.json")
    report = {"environment": env, "backends": list(backends), "shapes": {}}
    print(f"{env}\nbackends: {list(backends)}", flush=True)

    def save():
        if "recurrent_triton" in backends:
            from hymo_mini.ops.gla import recurrent_triton as gdn_triton
            report["triton_configs"] = {k: {str(s): c for s, c in v.items()}
                                        for k, v in gdn_triton.CONFIGS.items()}
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(report, indent=1))

    if args.tune and "recurrent_triton" in backends:
        from hymo_mini.ops.gla import recurrent_triton as gdn_triton
        report["tune"] = {}
        for dtype_name in args.dtypes:
            result = tune(args.shapes[0], dtype_name, device)
            report["tune"][dtype_name] = result
            key = gdn_triton._itemsize_key(torch.empty(0, dtype=DTYPES[dtype_name]))
            for name, cfg in result["best"].items():
                gdn_triton.CONFIGS[name][key] = cfg
            save()
    if not args.sweep_only:
        for shape in args.shapes:
            for dtype_name in args.dtypes:
                report["shapes"][f"{shape}_{dtype_name}"] = bench_shape(
                    shape, dtype_name, backends, args, device)
                save()
                gc.collect()
                torch.cuda.empty_cache() if device.type == "cuda" else None
    if args.sweep:
        report["sweep_T"] = {}
        sweep(backends, args, device, report["sweep_T"], save)
        save()
    print_table(report)
    print(f"wrote {out_path}")
    if args.figure:
        sys.path.insert(0, str(ROOT / "book"))  # the book's helpers draw the results
        from hymo_book.plots.kernel_benchmarks import benchmark_figure

        from hymo_mini.train.curves import save_figure
        save_figure(benchmark_figure(report), Path(args.figure))
        print(f"wrote {args.figure}")
    return 0


def print_table(report):
    print(f"\n{'shape':32s} {'backend':22s} {'fwd ms':>10s} {'fwd+bwd ms':>11s} {'peak MiB':>9s}")
    for key, entry in report["shapes"].items():
        for name, r in entry["results"].items():
            fmt = lambda x, f: (f % x) if isinstance(x, (int, float)) else "-"
            print(f"{key:32s} {name:22s} {fmt(r.get('fwd_ms'), '%10.3f')} "
                  f"{fmt(r.get('fwdbwd_ms'), '%11.3f')} {fmt(r.get('peak_mib'), '%9.1f')}")
        for pair, ratio in entry.get("ratios", {}).items():
            print(f"{key:32s} {pair:22s} " + " ".join(f"{k}={v:.3f}" for k, v in ratio.items()))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
