"""One training step of the production HyMo on one GPU: the fast path against the reference
path and against two peers of the same active size, in one run.

    python3 benchmarks/train_step.py --out $OUT/train_step_h200_<date>.json   (all cases)
    python3 benchmarks/train_step.py --quick --out $OUT/...       (fast, reference, peers)
    python3 benchmarks/train_step.py --device cpu --smoke         (the code paths, tiny model)

Written to fit one call of at most 10 minutes on one H200 (``--budget-s``, below).

Every case: hymo_750m (or a peer), bf16 autocast over fp32 weights, random tokens, one
optimizer step per step (forward, backward, grad-norm clip, optimizer, MoE bias update);
``--warmup`` steps (the first compiles), ``--steps`` timed with CUDA events, then
``--profile-steps`` under torch.profiler. Reported: ms per step, tokens/s (B·T per step),
MFU (training FLOPs = 3 × hymo_mini.analysis.flops forward FLOPs, MTP included, at PEAK_TFLOPS, the
H200's measured dense bf16 rate), the peak memory of the timed steps, the share of the step
the GPU is busy (profiled kernel time per step over the unprofiled step time, and the
union of kernel intervals over the profiled wall time), and where the kernel time goes
(step_profile.py). Cases, in this order (the run stops starting new ones after
``--budget-s``; results are written after every case, so a run cut short keeps them):

    checks                 the chunked loss, the compiled GDN and MLA blocks and the MoE's
                           compiled activation against their oracles
    hybrid_fast_*          loss_impl chunked, gdn_impl, mla_impl and swiglu_impl compiled,
                           moe_impl auto; fused AdamW
    hybrid_fast_graph_*    the same step replayed as one CUDA graph (GPU only; profiled
                           through its eager twin)
    hybrid_reference_*     the reference path: plain loss, eager GDN and MLA blocks and
                           activation, loop MoE
    llama_sdpa_*, fla_gla_*   the peers, 1024 wide x 24 layers (fla last: its kernels
                           autotune on first call)
    *_matched_*            the same peers as deep as they can be without more parameters
                           than hymo_750m has active, embeddings aside (29 layers each)
    *_muon, *_eager_gdn    the Muon split; the fast path with the eager GDN block
    *_eager_mla            the fast path with the eager MLA attention
    gdn_fast_*, mla_fast_* the all-GDN (mla_every=0) and all-MLA (mla_every=1) stacks
    ..._b4t4096, ..._b1t16384  B=4, T=4,096 and B=1, T=16,384

Needs on the GPU machine (torch 2.11, Triton 3.6 and transformers 5.17 are there): fla,
two pure-Python wheels (einops, their other need, is there too), fetched where pip works
with this one command (written on two lines here)::

    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12
        --implementation cp -d .whl fla-core==0.6.0 flash-linear-attention==0.6.0

and installed there with ``pip install --no-index --no-deps --target DIR .whl/*.whl``
(DIR on PYTHONPATH). Without them the fla case records the import error and the rest runs.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import record  # noqa: E402
from benchmarks.step_profile import Labels, analyse  # noqa: E402
from benchmarks.train_step_cases import (  # noqa: E402
    build_gla,
    build_hymo_case,
    build_llama,
    check_gdn_block,
    check_loss,
    check_mla_block,
    check_moe,
)
from hymo_mini import compiling  # noqa: E402

PEERS_PACKAGES = (  # versions recorded beside torch and Triton: the peers and their needs
    "transformers", "fla-core", "flash-linear-attention", "einops")
PEAK_TFLOPS = 790.0  # one H200, dense bf16, measured (device notes); MFU is against this
FAST = dict(loss_impl="chunked", gdn_impl="compiled", mla_impl="compiled", moe_impl="auto",
            swiglu_impl="compiled")
REFERENCE = dict(loss_impl="plain", gdn_impl="eager", mla_impl="eager", moe_impl="loop",
                 swiglu_impl="eager")
# the peers' case names: 1024 x 24 (the issue's size), and as deep as hymo_750m's active size
PEERS = ("llama_sdpa", "fla_gla", "llama_sdpa_matched", "fla_gla_matched")
STACKS = {"hybrid": 4, "gdn": 0, "mla": 1}  # mla_every
SHAPES = {"b4t4096": (4, 4096), "b1t16384": (1, 16384)}


def case_list(quick: bool, smoke: bool) -> list[tuple[str, dict]]:
    """(name, spec) in the order they run."""
    def hymo(stack, switches, shape, optimizer="adamw", graph=False):
        B, T = (2, 64) if smoke else SHAPES[shape]
        clip = "plain" if switches is REFERENCE else "folded"  # the reference: plain clip
        return {"kind": "hymo", "B": B, "T": T, "optimizer": optimizer, "clip": clip,
                "graph": graph, "switches": dict(switches, mla_every=STACKS[stack])}

    def peer(kind, shape, layers=None):
        B, T = (2, 64) if smoke else SHAPES[shape]
        return {"kind": kind, "B": B, "T": T, "layers": layers}

    s4, s16 = "b4t4096", "b1t16384"
    cases = [("hybrid_fast_" + s4, hymo("hybrid", FAST, s4))]
    if not smoke:  # CUDA graphs: a GPU only
        cases.append(("hybrid_fast_graph_" + s4, hymo("hybrid", FAST, s4, graph=True)))
    cases += [("hybrid_reference_" + s4, hymo("hybrid", REFERENCE, s4)),
              ("llama_sdpa_" + s4, peer("llama", s4))]
    if not smoke:  # the peers at hymo_750m's active size (counted on the meta device)
        cases.append(("llama_sdpa_matched_" + s4, peer("llama", s4, "matched")))
    if not quick:
        cases += [("hybrid_fast_muon_" + s4, hymo("hybrid", FAST, s4, "muon")),
                  ("hybrid_fast_eager_gdn_" + s4, hymo("hybrid", dict(FAST, gdn_impl="eager"),
                                                       s4)),
                  ("hybrid_fast_eager_mla_" + s4, hymo("hybrid", dict(FAST, mla_impl="eager"),
                                                       s4)),
                  ("gdn_fast_" + s4, hymo("gdn", FAST, s4)),
                  ("mla_fast_" + s4, hymo("mla", FAST, s4)),
                  ("hybrid_fast_" + s16, hymo("hybrid", FAST, s16)),
                  ("gdn_fast_" + s16, hymo("gdn", FAST, s16)),
                  ("mla_fast_" + s16, hymo("mla", FAST, s16)),
                  ("hybrid_reference_" + s16, hymo("hybrid", REFERENCE, s16)),
                  ("llama_sdpa_" + s16, peer("llama", s16))]
    cases.append(("fla_gla_" + s4, peer("gla", s4)))
    if not smoke:
        cases.append(("fla_gla_matched_" + s4, peer("gla", s4, "matched")))
    return cases


def build(spec, device, smoke):
    if spec["kind"] == "hymo":
        preset = "hymo_mini" if smoke else "hymo_750m"
        return build_hymo_case(preset, spec["B"], spec["T"], spec["switches"], spec["optimizer"],
                               device, clip=spec.get("clip", "plain"),
                               graph=spec.get("graph", False))
    if spec["kind"] == "llama":
        return build_llama(spec["B"], spec["T"], device, small=smoke, layers=spec.get("layers"))
    return build_gla(spec["B"], spec["T"], device, layers=spec.get("layers"))


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed_steps(built, n: int, device) -> tuple[list[float], float]:
    """(ms of each step by CUDA events, wall seconds of all n), no host sync in between."""
    if device != "cuda":
        t0 = time.perf_counter()
        times = []
        for _ in range(n):
            t = time.perf_counter()
            built.step()
            times.append(1e3 * (time.perf_counter() - t))
        return times, time.perf_counter() - t0
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    _sync(device)
    t0 = time.perf_counter()
    marks[0].record()
    for i in range(n):
        built.step()
        marks[i + 1].record()
    _sync(device)
    wall = time.perf_counter() - t0
    return [marks[i].elapsed_time(marks[i + 1]) for i in range(n)], wall


def measure(spec, args) -> dict:
    device = args.device
    before = torch.cuda.memory_allocated() / 2**30 if device == "cuda" else None
    t_start = time.perf_counter()
    built = build(spec, device, args.smoke)
    result = {"B": spec["B"], "T": spec["T"], **built.info,
              "build_s": round(time.perf_counter() - t_start, 1),
              "allocated_before_build_GiB": before}  # what earlier cases left behind
    graphed = built.profile_step is not None
    if device == "cuda" and graphed:  # a graph's memory is taken while it is captured
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    losses = [float(built.step()) for _ in range(args.warmup)]  # the first step compiles
    result.update(warmup_s=round(time.perf_counter() - t0, 1), loss_first_steps=losses)
    if device == "cuda" and not graphed:
        torch.cuda.reset_peak_memory_stats()
    times, wall = timed_steps(built, args.steps, device)
    step_ms = 1e3 * wall / args.steps
    tokens = spec["B"] * spec["T"]
    result.update(
        step_ms=round(step_ms, 2), step_ms_median_events=round(statistics.median(times), 2),
        step_ms_events=[round(t, 2) for t in times], tokens_per_s=round(tokens / step_ms * 1e3),
        flops_per_token=built.flops_per_token,
        mfu=built.flops_per_token * tokens / (step_ms * 1e-3) / (PEAK_TFLOPS * 1e12))
    if "n_active_no_embed" in built.info:
        result["mfu_6N"] = (6 * built.info["n_active_no_embed"] * tokens / (step_ms * 1e-3)
                            / (PEAK_TFLOPS * 1e12))
    if device == "cuda":
        result["peak_GiB"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        if graphed:
            result["peak_counted"] = "from the warm-up on: the capture allocates the " \
                "graph's memory, which every replay reuses"
        result["peak_reserved_GiB"] = round(torch.cuda.max_memory_reserved() / 2**30, 2)
    if args.profile_steps:
        result["profile"] = profile(built, args.profile_steps, device, args.profile_ops)
        if graphed:
            result["profile"]["profiled"] = "the eager twin of the step (same kernels, launched "\
                "one by one): the busy share is its kernel time over the graphed step's time"
        result["busy_share"] = result["profile"]["kernel_ms_per_step"] / step_ms
    return result


def profile(built, n: int, device, top_ops: int = 40) -> dict:
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with Labels(built.model, built.labels, built.named):
        with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            _sync(device)
            t0 = time.perf_counter()
            for _ in range(n):
                (built.profile_step or built.step)()
            _sync(device)
            wall = time.perf_counter() - t0
    return analyse(prof, n, wall, top_ops)


def summary(cases: dict) -> dict:
    """Tokens/s ratios (every hymo case against the reference and the peers of its shape)
    and the issue's targets for the fast hybrid at B4 T4096, launched kernel by kernel and
    replayed as a CUDA graph."""
    out = {}
    for name, case in cases.items():
        shape = name.rsplit("_", 1)[-1]
        if not name.startswith(("hybrid", "gdn", "mla")) or "tokens_per_s" not in case:
            continue
        for other in (f"hybrid_reference_{shape}", *(f"{peer}_{shape}" for peer in PEERS)):
            if other != name and "tokens_per_s" in cases.get(other, {}):
                out[f"{name} / {other}"] = case["tokens_per_s"] / cases[other]["tokens_per_s"]
    report = {"ratios": out}
    for key, name in (("targets_hybrid_b4t4096", "hybrid_fast_b4t4096"),
                      ("targets_hybrid_graph_b4t4096", "hybrid_fast_graph_b4t4096")):
        if "tokens_per_s" in cases.get(name, {}):
            report[key] = _targets(cases[name], out, name)
    return report


def _targets(fast: dict, ratios: dict, name: str) -> dict:
    """The issue's targets for one fast hybrid case at B4 T4096."""
    ratio = {peer: ratios.get(f"{name} / {peer}_b4t4096")
             for peer in ("hybrid_reference", *PEERS)}
    checks = {"tokens/s >= 3x the reference": (ratio["hybrid_reference"], 3.0),
              "MFU >= 35%": (fast.get("mfu"), 0.35),
              "faster than HF Llama": (ratio["llama_sdpa"], 1.0),
              "faster than fla GLA": (ratio["fla_gla"], 1.0),
              "faster than HF Llama at the same active size": (ratio["llama_sdpa_matched"], 1.0),
              "faster than fla GLA at the same active size": (ratio["fla_gla_matched"], 1.0),
              "GPU busy >= 90%": (fast.get("busy_share"), 0.9)}
    targets = {}
    for what, (value, goal) in checks.items():
        targets[what] = {"value": value, "met": None if value is None else value >= goal}
    peak = fast.get("peak_GiB")
    targets["peak <= 40 GiB"] = {"value": peak, "met": None if peak is None else peak <= 40}
    return targets


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--quick", action="store_true", help="fast, reference and Llama at B4 T4096 "
                   "(+ fla GLA), fewer steps")
    p.add_argument("--smoke", action="store_true", help="tiny models, for a CPU check of the code")
    p.add_argument("--cases", nargs="*", default=None, help="run only these (names as above)")
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--profile-steps", type=int, default=None)
    p.add_argument("--profile-ops", type=int, default=40, help="op groups kept in a profile")
    p.add_argument("--budget-s", type=float, default=540, help="start no case after this")
    p.add_argument("--out", default=None)
    p.add_argument("--inductor-options", default=None,
                   help="JSON of torch.compile options for inductor (compiling.INDUCTOR_OPTIONS)")
    args = p.parse_args(argv)
    if args.inductor_options:
        compiling.INDUCTOR_OPTIONS.update(json.loads(args.inductor_options))
    quick = args.quick or args.smoke
    args.warmup = args.warmup or (2 if quick else 3)
    args.steps = args.steps or (3 if quick else 6)
    args.profile_steps = 1 if quick and args.profile_steps is None else (args.profile_steps or 2)
    if args.smoke:
        compiling.COMPILE_BACKEND = "aot_eager"  # no code generation on a CPU check
    head = record.header(args.device, __file__, argv, packages=PEERS_PACKAGES)
    default = f"train_step_{'h200' if args.device == 'cuda' else 'cpu'}_{head['date'][:10]}.json"
    out = Path(args.out) if args.out else (
        Path(os.environ["OUT"]) / default if "OUT" in os.environ else record.out_path(default))
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {"benchmark": "train_step", **head, "peak_tflops": PEAK_TFLOPS,
              "settings": {"dtype": "bf16 autocast over fp32 weights", "warmup": args.warmup,
                           "steps": args.steps, "profile_steps": args.profile_steps,
                           "fast": FAST, "reference": REFERENCE,
                           "inductor_options": dict(compiling.INDUCTOR_OPTIONS)},
              "checks": {}, "cases": {}}
    t_run = time.perf_counter()

    def save():
        report.update(summary(report["cases"]), elapsed_s=round(time.perf_counter() - t_run))
        out.write_text(json.dumps(report, indent=1, default=str))

    for name, check in (("loss", check_loss), ("gdn_block", check_gdn_block),
                        ("mla_block", check_mla_block), ("moe", check_moe)):
        if args.cases is None or "checks" in args.cases:
            report["checks"][name] = attempt(lambda c=check: c(args.device) if not args.smoke
                                             else _smoke_check(c, args.device))
            save()
            print(name, json.dumps(report["checks"][name]), flush=True)
    for name, spec in case_list(args.quick, args.smoke):
        if args.cases is not None and name not in args.cases:
            continue
        if time.perf_counter() - t_run > args.budget_s:
            report["cases"][name] = {"skipped": f"over --budget-s {args.budget_s}"}
        else:
            report["cases"][name] = attempt(lambda s=spec: measure(s, args))
            cleanup(args.device)
        save()
        brief = {k: report["cases"][name].get(k) for k in
                 ("step_ms", "tokens_per_s", "mfu", "peak_GiB", "busy_share", "error")}
        print(name, json.dumps(brief, default=str), flush=True)
    print(json.dumps({k: v for k, v in report.items() if k == "ratios" or k.startswith("targets")},
                     indent=1))
    print(f"wrote {out}")
    return 0


def _smoke_check(check, device):
    if check is check_loss:
        return check(device, N=40, d=16, V=300, reps=1)
    return check(device, B=1, T=32, reps=1)


def attempt(fn) -> dict:
    """fn()'s result, or the error and the end of its traceback (the run goes on)."""
    try:
        return fn()
    except Exception as err:  # noqa: BLE001 - one failed case must not end the run
        return {"error": f"{type(err).__name__}: {err}"[:2000],
                "traceback": traceback.format_exc()[-3000:]}


def cleanup(device) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


if __name__ == "__main__":
    raise SystemExit(main())
