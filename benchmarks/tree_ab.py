"""This tree's GDN kernels against an earlier tree's, in one process, alternated.

Measures, for each rule (the gla rule, ``gated_linear_attention``; the delta rule,
``gated_delta_rule``), benchmark shape, input dtype ("bfloat16", "float32", and "tf32":
fp32 inputs with PyTorch's TF32 switch on) and decay rates (``--rates``, as
``gated_delta_backends.make_inputs`` draws them): the forward as the GDN mixer calls it
(backend "chunk_triton", ``check_values=False``, no autograd), and forward + backward (the
gradient of every input), the earlier tree ("before") and this one ("after") in turn,
``--rounds`` times each with ``triton.testing.do_bench``; the peak memory of one forward +
backward; and how far apart their outputs and gradients are (relative RMS). With
``--peers``, fla's ``chunk_gla`` (gla) and ``chunk_kda`` (delta) in the same run, bf16.

On a GPU machine, the earlier tree's package as a renamed copy beside this one::

    mkdir -p .gpu/old && git archive <commit> hymo_mini | tar x -C .gpu/old
    mv .gpu/old/hymo_mini .gpu/old/hymo_old
    grep -rl hymo_mini .gpu/old/hymo_old | xargs sed -i 's/\\bhymo_mini\\b/hymo_old/g'
    python3 benchmarks/tree_ab.py out.json --old .gpu/old --before <commit> --after <commit>

fla's first call per shape autotunes for minutes: it is warmed once before its timing.
"""
import argparse
import contextlib
import importlib
import itertools
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPES = ("B4_T4096_H40", "B1_T16384_H40")
DTYPES = ("bfloat16", "float32", "tf32")


@contextlib.contextmanager
def tf32(on: bool):
    import torch
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def rule_call(ops, rule):
    if rule == "delta":
        return lambda v, b, c, g, A, beta: ops.gated_delta_rule(
            v, b, c, g, A, beta, backend="chunk_triton", check_values=False)[0]
    return lambda v, b, c, g, A, beta: ops.gated_linear_attention(
        v, b, c, g, A, backend="chunk_triton", check_values=False)[0]


def peer_call(rule):
    """fla's peer of the rule, on the same leaves (the decay g·A formed inside the call)."""
    if rule == "delta":
        from fla.ops.kda import chunk_kda
        return lambda v, b, c, g, A, beta: chunk_kda(c, b, v, g.float()[..., None] * A, beta,
                                                     scale=1.0)[0]
    from fla.ops.gla import chunk_gla
    return lambda v, b, c, g, A, beta: chunk_gla(c, b, v, g.float()[..., None] * A,
                                                 scale=1.0)[0]


def timings(fn, leaves, do):
    """(forward, forward + backward) as callables on ``leaves``."""
    import torch
    inputs = [t.detach() for t in leaves]
    grads = [t.detach().requires_grad_() for t in leaves]

    def forward():
        with torch.no_grad():
            return fn(*inputs)

    def both():
        o = fn(*grads)
        return torch.autograd.grad(o, grads, do, allow_unused=True)  # (the gla rule: no beta)
    return forward, both


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30)).item()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--old", default=".gpu/old", help="the folder holding hymo_old")
    parser.add_argument("--before", required=True, help="the earlier tree's commit")
    parser.add_argument("--after", required=True, help="this tree's commit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rules", nargs="+", default=["gla", "delta"], choices=["delta", "gla"])
    parser.add_argument("--rates", nargs="+", default=["model"],
                        choices=["weak", "model", "spread"])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=DTYPES)
    parser.add_argument("--peers", action="store_true", help="fla's peers too (bf16)")
    parser.add_argument("--set", nargs="*", default=[], metavar="MODULE:NAME=JSON",
                        help="values of this tree's module-level settings to time instead, "
                        "e.g. gated_delta.chunk_triton:GROUPS_BELOW=1000 (under hymo_mini.ops)")
    args = parser.parse_args(argv)
    sys.path[:0] = [str(ROOT), args.old]
    import torch
    import triton
    from hymo_old import ops as old_ops

    from benchmarks.gated_delta_backends import make_inputs
    from benchmarks.gdn import parse_shape
    from hymo_mini import ops as new_ops

    for change in args.set:  # e.g. gated_delta.chunk_triton:LAUNCH_16BIT={}
        where, value = change.split("=", 1)
        module, name = where.split(":")
        setattr(importlib.import_module(f"hymo_mini.ops.{module}"), name, json.loads(value))

    rows, started = {}, time.time()
    for rule, rates, shape, dtype in itertools.product(args.rules, args.rates, args.shapes,
                                                        args.dtypes):
        leaves, do = make_inputs(*parse_shape(shape), getattr(torch, dtype.replace("tf32",
                                 "float32")), torch.device("cuda"), rates=rates)
        v, b, c, g, A_log, beta = leaves
        leaves = [v, b, c, g, -torch.exp(A_log), beta]
        calls = {"before": rule_call(old_ops, rule), "after": rule_call(new_ops, rule)}
        if args.peers and dtype == "bfloat16":
            calls["fla"] = peer_call(rule)
        row = {k: {"fwd_ms": [], "fwdbwd_ms": []} for k in calls}
        with tf32(dtype == "tf32"):
            results = {}
            for name, fn in calls.items():  # warm-up (compiles, fla's autotuning), checks
                forward, both = timings(fn, leaves, do)
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                results[name] = (forward(), both())
                torch.cuda.synchronize()
                row[name]["peak_mib"] = (torch.cuda.max_memory_allocated() - base) / 2**20
            ref_o, ref_grads = results["before"]
            for name, (o, grads) in results.items():
                row[name]["rel_o"] = rel(o, ref_o)
                row[name]["rel_grads"] = [rel(x, r) for x, r in zip(grads, ref_grads,
                                                                     strict=True) if r is not None]
            del results
            for _ in range(args.rounds):
                for name, fn in calls.items():
                    forward, both = timings(fn, leaves, do)
                    row[name]["fwd_ms"].append(triton.testing.do_bench(forward, warmup=10,
                                                                       rep=100))
                    row[name]["fwdbwd_ms"].append(triton.testing.do_bench(both, warmup=10,
                                                                          rep=100))
        key = f"{rule}_{rates}_{shape}_{dtype}"
        rows[key] = row
        mid = {k: round(sorted(x["fwdbwd_ms"])[len(x["fwdbwd_ms"]) // 2], 3)
               for k, x in row.items()}
        print(key, "fwd+bwd median ms", mid, f"({time.time() - started:.0f} s)", flush=True)
        Path(args.out).write_text(json.dumps(
            {"environment": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                             "triton": triton.__version__, "python": platform.python_version(),
                             "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                             "command": " ".join(sys.argv)},
             "commit_after": args.after, "commit_before": args.before, "set": args.set,
             "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
