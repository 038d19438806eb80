"""How long the host takes to issue one forward of each rule's chunked Triton kernel, and
what it spends that time on: a development tool for the GPU machine.

    python3 benchmarks/host_profile.py --out benchmarks/host_profile_h200.json

For each rule (gla, delta) and dtype (bf16, fp32), at B4 T4096 H40, two calls, each with
A computed beforehand: the kernel's autograd Function alone ("kernel") and the dispatcher as
the GDN mixer calls it, without the value check ("mixer"). Each under ``torch.no_grad``:

    host_us_per_call   the host's time to issue 100 calls back to back, per call
    wall_us_per_call   until the GPU has finished them too, per call: the larger of the
                       host's and the device's time, whichever the other waits for
    do_bench_ms        triton.testing.do_bench of one call (the L2 flushed before each)

and a cProfile listing of 100 calls (by own time, the top 30) in the log it prints; then
the same rows with ``hymo_mini.launching.DIRECT`` on (keys ending in "_direct": each
compiled kernel launched directly once Triton has launched it). Then four costs the
forwards pay on the host: launching an empty Triton kernel of 13 arguments (through Triton,
and directly),
``torch.zeros`` of 20,000 int32 (the one-launch forwards' flags) and ``new_empty``, each per
call over 1,000. The host's times depend on the machine's CPU and how busy it is: compare
within one run.

    python3 benchmarks/host_profile.py --own --out benchmarks/host_own_cpu.json

``--own`` needs no GPU: the package's own share of that host time, each rule's kernel alone
(its autograd Function) and the dispatcher as the mixer calls it ("mixer", its device check
skipped), on small CPU tensors (``OWN_SHAPE``) with the GPU's settings and
every Triton kernel of the chunked forwards replaced by a launch that does nothing, so that
what is timed is the package's Python, allocations and launch arithmetic
(``own_us_per_call``, the median of five rounds of ``calls``), not Triton's launcher or the
GPU.

    python3 benchmarks/host_profile.py --launch --out benchmarks/host_launch_cpu.json

``--launch`` needs no GPU either, but Triton's compiler (run it without
``TRITON_INTERPRET=1``): the empty kernel compiled for sm90 on this machine and launched
through Triton's ``JITFunction.run`` and through ``hymo_mini.launching.Direct``, with a
stand-in driver that loads and launches nothing, so that each path's host work up to the
CUDA launcher is timed (``jit_us_per_launch``, ``direct_us_per_launch``), and whether both
hand the launcher the same arguments; then every Triton kernel of the package, forward and
backward, bf16 and fp32, compiled here and launched both ways (``kernels``: the same
launches, and none through ``JITFunction.run`` once each key has been launched); and each
rule's forward as the mixer calls it, the package's host work and Triton's up to the
launcher, with ``DIRECT`` off and on (``forwards``, µs per call).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import record  # noqa: E402
from benchmarks.gated_delta_backends import dispatched, kernel_alone, make_inputs  # noqa: E402
from benchmarks.gdn import parse_shape  # noqa: E402

SHAPE = "B4_T4096_H40"
# --own: small CPU tensors, so that the CPU's allocator (large blocks map fresh pages) does
# not stand in for the GPU's caching allocator; the host's work per call does not depend
# on the shape
OWN_SHAPE = "B1_T512_H4"


@triton.jit
def _empty(a, b, c, d, e, f, g, h, i, j, k, T, BH, X: tl.constexpr, Y: tl.constexpr,
           Z: tl.constexpr):
    """Nothing: what a launch costs the host, with 13 arguments and 3 constexprs."""
    pass


def per_call_us(fn, calls: int) -> float:
    """Host microseconds per call of ``fn``, over ``calls`` calls, the GPU idle before."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    took = time.perf_counter() - start
    torch.cuda.synchronize()
    return took / calls * 1e6


def profile_calls(rule: str, dtype: torch.dtype, device, direct: bool = False) -> dict:
    """The rows of one rule and dtype; with ``direct``, hymo_mini.launching.DIRECT on
    (keys ending in "_direct")."""
    from hymo_mini import launching

    saved = launching.DIRECT
    launching.DIRECT = direct
    try:
        return _profile_calls(rule, dtype, device, "_direct" if direct else "")
    finally:
        launching.DIRECT = saved


def _profile_calls(rule: str, dtype: torch.dtype, device, suffix: str) -> dict:
    inputs, _ = make_inputs(*parse_shape(SHAPE), dtype, device)
    v, b, c, g, A_log, beta = inputs
    A = -torch.exp(A_log)
    out = {}
    for name, fn in (("kernel", kernel_alone(rule)),
                     ("mixer", dispatched(rule, "chunk_triton", False))):
        def call(fn=fn):
            return fn(v, b, c, g, A, beta)
        with torch.no_grad():
            for _ in range(5):  # compile, warm up
                call()
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(100):
                call()
            host = time.perf_counter() - start
            torch.cuda.synchronize()
            wall = time.perf_counter() - start
            bench = triton.testing.do_bench(call, warmup=20, rep=200)
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(100):
                call()
            prof.disable()
            torch.cuda.synchronize()
        listing = io.StringIO()
        pstats.Stats(prof, stream=listing).sort_stats("tottime").print_stats(30)
        key = f"{rule}_{str(dtype).removeprefix('torch.')}_{name}{suffix}"
        out[key] = {"host_us_per_call": host * 1e4, "wall_us_per_call": wall * 1e4,
                    "do_bench_ms": bench}
        print(key, out[key], flush=True)
        print(listing.getvalue()[:6000], flush=True)
    return out


def launch_costs(device) -> dict:
    """Per call, microseconds: an empty Triton kernel's launch (through Triton, and through
    hymo_mini.launching.Direct once Triton has launched it), torch.zeros, new_empty."""
    from hymo_mini import launching

    x = torch.empty(16, device=device)
    wrapped = launching.Direct(_empty)

    def launch(kernel=_empty):
        kernel[(1,)](x, x, x, x, x, x, x, x, x, x, x, 5, 7, X=1, Y=2, Z="a")
    saved = launching.DIRECT
    launching.DIRECT = True
    try:
        for _ in range(5):
            launch(), launch(wrapped)
        direct_us = per_call_us(lambda: launch(wrapped), 1000)
    finally:
        launching.DIRECT = saved
    return {"empty_launch_us": per_call_us(launch, 1000),
            "empty_launch_direct_us": direct_us,
            "zeros_us": per_call_us(
                lambda: torch.zeros(20000, dtype=torch.int32, device=device), 1000),
            "new_empty_us": per_call_us(lambda: x.new_empty(160, 32, 32, 32), 1000)}


class _StandInDriver:
    """Triton's active driver for ``--launch``: a Hopper GPU that loads and launches
    nothing (the last launch's arguments are kept in ``last``, and every launch's kernel
    and arguments in ``record`` while it is a list), so that Triton's own host path runs on
    a machine without a GPU, up to the launcher."""

    last = None
    record = None

    class utils:
        @staticmethod
        def get_device_properties(device):
            return {"max_shared_mem": 232448, "multiprocessor_count": 132}

        @staticmethod
        def load_binary(name, kernel, shared, device):
            return object(), "function", 0, 0, 1024  # module, function, regs, spills, threads

        @staticmethod
        def unload_module(module):
            pass

    @staticmethod
    def launcher_cls(src, metadata):
        name = getattr(getattr(src, "fn", None), "__name__", str(src))

        def launch(*args):
            _StandInDriver.last = args
            if _StandInDriver.record is not None:
                _StandInDriver.record.append((name, args))
        return launch

    @staticmethod
    def get_current_device():
        return 0

    @staticmethod
    def get_current_stream(device):
        return 0

    @staticmethod
    def get_current_target():
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)


@contextlib.contextmanager
def _stand_in():
    """Triton's active driver replaced by ``_StandInDriver``, and
    ``hymo_mini.launching.DIRECT`` as it was, afterwards."""
    from triton.runtime.driver import driver

    from hymo_mini import launching

    saved = driver._active, launching.DIRECT
    driver.set_active(_StandInDriver())
    try:
        yield
    finally:
        driver._active, launching.DIRECT = saved
        _StandInDriver.record = None


def launch_paths(calls: int = 20000, rounds: int = 5) -> dict:
    """Host microseconds per launch of ``_empty`` (13 arguments, 3 constexprs), compiled
    for sm90 on this machine, through Triton's ``JITFunction.run`` and through
    ``hymo_mini.launching.Direct``, each the median of ``rounds`` rounds of ``calls``,
    with a stand-in driver that launches nothing (``_StandInDriver``): Triton's and our
    host work up to the launcher, not the launcher itself (its C code, which packs the
    arguments for CUDA). Also whether both paths hand the launcher the same arguments."""
    from hymo_mini import launching

    if not hasattr(_empty, "arg_names") or type(_empty).__name__ != "JITFunction":
        raise SystemExit("--launch needs Triton's compiler: run it without TRITON_INTERPRET=1")
    with _stand_in():
        launching.DIRECT = True
        x = torch.empty(16)
        args = (x,) * 11 + (4096, 160)
        wrapped = launching.Direct(_empty)
        paths = {"jit": lambda: _empty[(1,)](*args, X=1, Y=2, Z="a"),
                 "direct": lambda: wrapped[(1,)](*args, X=1, Y=2, Z="a")}
        handed = {}
        for name, launch in paths.items():  # compiles, the key's first launch, then one more
            launch(), launch(), launch()
            handed[name] = _launched(_StandInDriver.last)
        out = {"same_launcher_arguments": handed["jit"] == handed["direct"]}
        for name, launch in paths.items():
            times = _us_per_call(launch, (), calls, rounds, warmup=0)
            out[f"{name}_us_per_launch"] = sorted(times)[rounds // 2]
            out[f"{name}_rounds_us"] = times
    print(out, flush=True)
    return out


def _launched(args) -> list:
    """A launch's arguments as comparable values: a tensor by its dtype, shape and whether
    its address is a multiple of 16 (each call allocates anew), the launch metadata (built
    anew each launch) by its kind, anything else as it is."""
    return [("tensor", a.dtype, tuple(a.shape), a.data_ptr() % 16 == 0)
            if isinstance(a, torch.Tensor) else
            "launch metadata" if type(a).__name__ == "LazyDict" else a for a in args]


def launch_kernels() -> dict:
    """Every Triton kernel of the package, forward and backward, bf16 and fp32 (CPU tensors,
    the GPU's settings): both chunked rules (B1 T300 H2 S = D = 32), the recurrent gla
    kernel, the MoE row shuffles and the soft-capped loss's rows, each launched through
    Triton and then, with ``hymo_mini.launching.DIRECT``, twice more (the keys' first
    launches go through Triton): per case and dtype, the launches, whether the third call
    handed the launcher the same kernels and arguments as the first, and how many of its
    launches went through ``JITFunction.run`` (none, if every one was direct). The stand-in
    driver is active meanwhile; the autograd Functions and the loss's row function are
    called directly (the dispatchers would refuse CPU tensors)."""
    from triton.runtime.jit import JITFunction

    from hymo_mini import launching
    from hymo_mini.loss_triton import softcap_ce_rows_triton
    from hymo_mini.moe.dispatch import row_maps
    from hymo_mini.moe.kernels import combine_rows_triton, gather_rows_triton
    from hymo_mini.ops.gated_delta.chunk_triton import ChunkGatedDeltaFunction
    from hymo_mini.ops.gla.chunk_triton import ChunkGLAFunction
    from hymo_mini.ops.gla.recurrent_triton import RecurrentGLAFunction

    through, real = [], JITFunction.run

    def counted(self, *args, **kwargs):
        through.append(1)
        return real(self, *args, **kwargs)

    def one_call(case, dtype):
        gen = torch.Generator().manual_seed(0)
        if case == "rows":  # 5 tokens, 2 of 4 experts each, one choice dropped
            n, k, width = 5, 2, 48
            order = torch.stack([torch.randperm(4, generator=gen)[:k] for _ in range(n)])
            by_expert = torch.sort(order.t().reshape(-1), stable=True)[1]
            kept = torch.ones(n, k, dtype=torch.bool)
            kept[3, 1] = False
            maps = row_maps(by_expert, kept)
            x = torch.randn(n, width, generator=gen).requires_grad_()
            y = torch.randn(n * k, width, generator=gen).to(dtype).requires_grad_()
            w = torch.rand(n, k, generator=gen).requires_grad_()
            out = gather_rows_triton(x, maps, dtype).float().sum()
            out = out + combine_rows_triton(y, maps, w).float().sum()
            out.backward()
            return
        if case == "loss":
            z = torch.randn(6, 1000, generator=gen).to(dtype)
            softcap_ce_rows_triton(z, torch.tensor([0, 3, 1, -100, 999, 7]), 15.0, -100,
                                   grad=True)
            return
        v, b, c = (torch.randn(1, 300, 2, 32, generator=gen).to(dtype).requires_grad_()
                   for _ in range(3))
        g, beta = (torch.rand(1, 300, 2, generator=gen).to(dtype).requires_grad_()
                   for _ in range(2))
        A = (-torch.rand(2, 32, generator=gen)).requires_grad_()
        if case == "gla":
            o, _ = ChunkGLAFunction.apply(v, b, c, g, A, None, False)
        elif case == "gla_recurrent":
            o, _ = RecurrentGLAFunction.apply(v, b, c, g, A, None, False, True)
        else:
            o, _ = ChunkGatedDeltaFunction.apply(v, b, c, g, A, beta, None, False)
        o.float().sum().backward()

    def launches(case, dtype, direct):
        launching.DIRECT = direct
        _StandInDriver.record, through[:] = [], []
        one_call(case, dtype)
        return [(name, _launched(args)) for name, args in _StandInDriver.record], len(through)

    out = {}
    JITFunction.run = counted
    try:
        with _stand_in(), _gpu_settings_on_cpu():
            for case in ("gla", "delta", "gla_recurrent", "rows", "loss"):
                for dtype in (torch.bfloat16, torch.float32):
                    by_triton, _ = launches(case, dtype, False)
                    launches(case, dtype, True)  # each key's first launch: through Triton
                    direct, via_triton = launches(case, dtype, True)
                    out[f"{case}_{str(dtype).removeprefix('torch.')}"] = {
                        "launches": len(by_triton), "kernels": sorted({n for n, _ in by_triton}),
                        "same_launches": by_triton == direct,
                        "through_triton_when_repeated": via_triton}
    finally:
        JITFunction.run = real
    return out


@contextlib.contextmanager
def _gpu_settings_on_cpu():
    """The chunk launchers with the GPU's settings (INTERPRET off) and the dispatcher's
    device check off (it would refuse CPU tensors), as they were afterwards."""
    import hymo_mini.ops as ops
    import hymo_mini.ops.gated_delta.chunk_triton as dct
    import hymo_mini.ops.gla.chunk_triton as gct

    modules = (ops, gct, dct)
    saved = [m.check_triton_device for m in modules], (gct.INTERPRET, dct.INTERPRET)
    for module in modules:
        module.check_triton_device = lambda *args, **kwargs: None
    gct.INTERPRET = dct.INTERPRET = False
    try:
        yield
    finally:
        for module, check in zip(modules, saved[0], strict=True):
            module.check_triton_device = check
        gct.INTERPRET, dct.INTERPRET = saved[1]


def _own_inputs(dtype) -> tuple:
    """(v, b, c, g, A, beta) on the CPU at OWN_SHAPE, A = -exp(A_log) computed."""
    inputs, _ = make_inputs(*parse_shape(OWN_SHAPE), dtype, torch.device("cpu"))
    v, b, c, g, A_log, beta = inputs
    return v, b, c, g, -torch.exp(A_log), beta


def _us_per_call(fn, args, calls: int, rounds: int, warmup: int) -> list[float]:
    """Host µs per call of ``fn(*args)`` under torch.no_grad, each of ``rounds`` rounds of
    ``calls`` calls, after ``warmup`` calls."""
    times = []
    with torch.no_grad():
        for _ in range(warmup):
            fn(*args)
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(calls):
                fn(*args)
            times.append((time.perf_counter() - start) / calls * 1e6)
    return times


def launch_forwards(calls: int = 500, rounds: int = 5) -> dict:
    """Host microseconds per forward as the mixer calls it (``torch.no_grad``, no value
    check), each rule and dtype on small CPU tensors (``OWN_SHAPE``) with the GPU's
    settings and the real kernels, compiled here and launched through Triton's own path to
    a stand-in driver that launches nothing: the package's host work and Triton's up to the
    CUDA launcher, with ``hymo_mini.launching.DIRECT`` off and on (the median of ``rounds``
    rounds of ``calls``)."""
    from hymo_mini import launching

    out = {}
    with _stand_in(), _gpu_settings_on_cpu():
        for rule in ("gla", "delta"):
            for dtype in (torch.bfloat16, torch.float32):
                args, fn = _own_inputs(dtype), dispatched(rule, "chunk_triton", False)
                row = {}
                for direct in (False, True):
                    launching.DIRECT = direct  # 20 calls: compiles, each key's first
                    times = _us_per_call(fn, args, calls, rounds, warmup=20)
                    row["direct_us" if direct else "triton_us"] = sorted(times)[rounds // 2]
                key = f"{rule}_{str(dtype).removeprefix('torch.')}_mixer"
                out[key] = row
                print(key, row, flush=True)
    return out


class _NoLaunch:
    """Stands in for a Triton kernel: ``kernel[grid](...)`` does nothing."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


def own_calls(calls: int = 2000, rounds: int = 5) -> dict:
    """The package's own host microseconds per forward (see the module): for each rule and
    dtype, the median over ``rounds`` of ``calls`` calls, the kernels faked, the GPU's
    settings in force."""
    import hymo_mini.ops.gated_delta.chunk_triton as dct
    import hymo_mini.ops.gla.chunk_chain as gcc
    import hymo_mini.ops.gla.chunk_triton as gct

    saved = {}
    for module in (gct, gcc, dct):
        for name in dir(module):
            if name.startswith("_") and name.endswith("_kernel"):
                saved[(module, name)] = getattr(module, name)
                setattr(module, name, _NoLaunch())
    out = {}
    try:
        with _gpu_settings_on_cpu():
            for rule in ("gla", "delta"):
                for dtype in (torch.bfloat16, torch.float32):
                    args = _own_inputs(dtype)
                    for how, fn in (("kernel", kernel_alone(rule)),
                                    ("mixer", dispatched(rule, "chunk_triton", False))):
                        times = _us_per_call(fn, args, calls, rounds, warmup=50)
                        key = f"{rule}_{str(dtype).removeprefix('torch.')}_{how}"
                        out[key] = {"own_us_per_call": sorted(times)[rounds // 2],
                                    "rounds_us": times}
                        print(key, out[key], flush=True)
    finally:
        for (module, name), kernel in saved.items():
            setattr(module, name, kernel)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="JSON path")
    parser.add_argument("--own", action="store_true",
                        help="the package's own host time, kernels faked (no GPU needed)")
    parser.add_argument("--launch", action="store_true",
                        help="one empty kernel's launch through Triton and through "
                        "hymo_mini.launching.Direct, a stand-in driver (no GPU needed)")
    parser.add_argument("--calls", type=int, default=2000,
                        help="calls per round (--own, --launch)")
    args = parser.parse_args(argv)
    if args.launch:
        report = {"environment": record.header(torch.device("cpu"), __file__, argv),
                  **launch_paths(args.calls)}
        report["kernels"] = launch_kernels()
        print(report["kernels"], flush=True)
        report["forwards"] = launch_forwards(max(1, args.calls // 40))
        Path(args.out).write_text(json.dumps(report, indent=1))
        return
    if args.own:
        report = {"environment": record.header(torch.device("cpu"), __file__, argv),
                  "shape": OWN_SHAPE, **own_calls(args.calls)}
        Path(args.out).write_text(json.dumps(report, indent=1))
        return
    if not torch.cuda.is_available():
        raise SystemExit("host_profile.py times kernel launches on a CUDA GPU; this machine "
                         "has none")
    device = torch.device("cuda")
    report = {"environment": record.header(device, __file__, argv), "shape": SHAPE}
    for direct in (False, True):
        for rule in ("gla", "delta"):
            for dtype in (torch.bfloat16, torch.float32):
                report.update(profile_calls(rule, dtype, device, direct))
    report.update(launch_costs(device))
    print({k: v for k, v in report.items() if k.endswith("_us")}, flush=True)
    Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
