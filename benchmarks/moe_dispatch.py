"""One DeepSeekMoE layer of hymo_750m, dispatched three ways: check, then time.

    python3 benchmarks/moe_dispatch.py [--tokens 16384] [--dtype bfloat16] [--repeats 20]

For ``moe_impl`` "loop" (the reference), "grouped" (``torch._grouped_mm``, where this
device and dtype allow it) and "padded" (one batched matmul over (e, C, dim)) it builds
the same layer (same seed, so the same weights and routing), checks each fast path's
output and gradients (x, gate, the stacked expert weights) against the loop, checks on
CUDA that the fast path's forward + backward runs under ``torch.cuda.set_sync_debug_mode
("error")`` (a host sync raises), and times forward and forward + backward in training
mode and the forward in evaluation mode (capacity = every token). ``--dtype bfloat16``
runs under autocast, as ``training.dtype: bfloat16`` does. Results go to
benchmarks/out/moe_dispatch_<device>.json with the hardware, versions, date, command and
git commit (benchmarks/record.py). Not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import record  # noqa: E402
from hymo_mini.config import load_config  # noqa: E402
from hymo_mini.moe import DeepSeekMoE  # noqa: E402


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().float(), b.detach().float()
    return float((a - b).pow(2).mean().sqrt() / b.pow(2).mean().sqrt())


def autocast(device: torch.device, dtype: str):
    if dtype == "bfloat16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def fwd(moe: DeepSeekMoE, x: torch.Tensor, dtype: str) -> torch.Tensor:
    with autocast(x.device, dtype):
        return moe(x)


def fwd_bwd(moe: DeepSeekMoE, x: torch.Tensor, grad: torch.Tensor, dtype: str):
    x = x.detach().requires_grad_(True)
    moe.zero_grad(set_to_none=True)
    with autocast(x.device, dtype):
        y = moe(x)
    y.backward(grad.to(y.dtype))
    return y, {"x": x.grad, **{n: p.grad for n, p in moe.named_parameters()}}


def timed(fn, device: torch.device, repeats: int) -> float:
    """Median seconds of ``fn()`` after two warm-up calls."""
    for _ in range(2):
        fn()
    seconds = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def no_sync(moe, x, grad, dtype) -> bool | None:
    """True if forward + backward ran with CUDA's sync debug mode set to 'error'."""
    if x.device.type != "cuda":
        return None
    torch.cuda.set_sync_debug_mode("error")
    try:
        fwd_bwd(moe, x, grad, dtype)
        return True
    except RuntimeError:
        return False
    finally:
        torch.cuda.set_sync_debug_mode("default")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4 * 4096)
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=None,
                        help="results file (default benchmarks/out/moe_dispatch_<device>.json)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    torch.manual_seed(0)
    base = DeepSeekMoE(replace(load_config("hymo_750m").model, moe_impl="loop")).to(device)
    x = torch.randn(args.tokens, base.dim, device=device)
    grad = torch.randn_like(x)
    y_ref, g_ref = fwd_bwd(copy.deepcopy(base), x, grad, args.dtype)  # the reference loop
    runs = []
    for impl in ("loop", "grouped", "padded"):
        moe = copy.deepcopy(base)
        moe.config = replace(moe.config, moe_impl=impl)
        try:
            y, g = fwd_bwd(moe, x, grad, args.dtype)
        except ValueError as error:  # "grouped" where _grouped_mm cannot run without a sync
            runs.append({"impl": impl, "skipped": str(error)})
            continue
        errors = {"out": rel_err(y, y_ref),
                  **{n: rel_err(g[n], g_ref[n]) for n in g_ref if g_ref[n].abs().sum() > 0}}
        run = {"impl": impl, "worst_rel_err": max(errors.values()),
               "worst_tensor": max(errors, key=errors.get),
               "no_host_sync": no_sync(moe, x, grad, args.dtype) if impl != "loop" else None,
               "train_fwd_s": timed(lambda m=moe: fwd(m, x, args.dtype), device, args.repeats),
               "train_fwd_bwd_s": timed(lambda m=moe: fwd_bwd(m, x, grad, args.dtype), device,
                                        args.repeats)}
        moe.eval()
        with torch.no_grad():
            run["eval_fwd_s"] = timed(lambda m=moe: fwd(m, x, args.dtype), device, args.repeats)
        runs.append(run)
        print({k: (f"{v:.3g}" if isinstance(v, float) else v) for k, v in run.items()})
    result = {
        **record.header(device, __file__, argv),
        "settings": {"tokens": args.tokens, "dtype": args.dtype, "repeats": args.repeats},
        "runs": runs,
    }
    out = args.out or record.out_path(f"moe_dispatch_{device.type}.json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
