"""One tree's forwards against an earlier tree's, in one process, alternated.

The earlier tree's package is a copy renamed so that both import side by side::

    mkdir -p .gpu/old && git archive <commit> hymo_mini | tar x -C .gpu/old
    mv .gpu/old/hymo_mini .gpu/old/hymo_old
    grep -rl hymo_mini .gpu/old/hymo_old | xargs sed -i 's/\\bhymo_mini\\b/hymo_old/g'
    python3 benchmarks/tree_ab.py out.json --old .gpu/old --before <commit> --after <commit>

For each rule (``--rules``: the delta rule, ``gated_delta_rule``; the gla rule,
``gated_linear_attention``), decay rates (``--rates``, as ``gated_delta_backends.make_inputs``
draws them), benchmark shape and dtype it times the forward as the GDN mixer calls it
(backend "chunk_triton", ``check_values=False``, no autograd), the earlier tree's ("before")
and this one's ("after") in turn, ``--rounds`` times each with ``triton.testing.do_bench``,
and compares their outputs (relative difference of o). Written for the inverse's first
level without a product (commit a96a84b; book/results/inverse_level0_ab_h100_2026-12-05.json
came from its first form: the delta rule on "weak" rates only, keys without the rule's name).
"""
import argparse
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--old", default=".gpu/old", help="the folder holding hymo_old")
    parser.add_argument("--before", required=True, help="the earlier tree's commit")
    parser.add_argument("--after", required=True, help="this tree's commit")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--rules", nargs="+", default=["delta"], choices=["delta", "gla"])
    parser.add_argument("--rates", nargs="+", default=["weak"], choices=["weak", "model", "spread"])
    args = parser.parse_args(argv)
    sys.path[:0] = [str(ROOT), args.old]
    import torch
    import triton
    from hymo_old import ops as old_ops

    from benchmarks.gated_delta_backends import make_inputs
    from benchmarks.gdn import parse_shape
    from hymo_mini import ops as new_ops

    rows = {}
    for rule, rates, shape, dtype in itertools.product(
            args.rules, args.rates, ("B4_T4096_H40", "B1_T16384_H40"),
            (torch.bfloat16, torch.float32)):
        (v, b, c, g, A_log, beta), _ = make_inputs(*parse_shape(shape), dtype,
                                                    torch.device("cuda"), rates=rates)
        A = -torch.exp(A_log)

        def call(ops, rule=rule, v=v, b=b, c=c, g=g, A=A, beta=beta):
            if rule == "delta":
                return lambda: ops.gated_delta_rule(v, b, c, g, A, beta, backend="chunk_triton",
                                                    check_values=False)[0]
            return lambda: ops.gated_linear_attention(v, b, c, g, A, backend="chunk_triton",
                                                      check_values=False)[0]
        calls = {"before": call(old_ops), "after": call(new_ops)}
        times = {k: [] for k in calls}
        with torch.no_grad():
            o = {k: f().float() for k, f in calls.items()}
            diff = ((o["before"] - o["after"]).norm() / o["before"].norm()).item()
            for _ in range(args.rounds):
                for k, f in calls.items():
                    times[k].append(triton.testing.do_bench(f, warmup=10, rep=100))
        key = f"{rule}_{rates}_{shape}_{str(dtype).removeprefix('torch.')}"
        rows[key] = {**times, "rel_diff_o": diff}
        print(key, {k: [round(t, 4) for t in x] for k, x in times.items()},
              f"rel diff {diff:.1e}", flush=True)
    Path(args.out).write_text(json.dumps(
        {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
         "triton": triton.__version__, "command": " ".join(sys.argv), "commit_after": args.after,
         "commit_before": args.before, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
