"""The GPU primer of chapter 09: the machine's numbers, the two floors, TF32 on the CPU, and
a model of software pipelining. Nothing here measures time or needs a GPU.

* **The machine**: :data:`H200` holds the datasheet's numbers (NVIDIA H200 SXM, Hopper,
  compute capability 9.0); :func:`measured_gpu` reads what the benchmark runs recorded about
  the GPU they ran on (SM count, memory, device-to-device copy rate) through
  :mod:`hymo_book.results`; :func:`hierarchy_rows` lays them out level by level.
* **Two floors**: :func:`floors` gives the time an operation needs at least, by its bytes
  and by its FLOPs; :func:`ridge_point` the intensity where the two meet;
  :func:`operations` counts bytes and FLOPs of the operations the chapter places on
  :func:`roofline_figure`.
* **TF32**: :func:`tf32_round` rounds float32 to TF32's 10 mantissa bits on the CPU;
  :func:`tf32_matmul` and :func:`tf32x3_matmul` emulate one and three TF32 products,
  :func:`bf16_pieces` and :func:`bf16x6_matmul` an fp32-grade product from six bf16 ones;
  :func:`products_on` and :func:`products_table` say what the package's chunk kernels
  multiply for each input dtype and direction, on a GPU and under the Triton interpreter
  (``hymo_mini.ops.utils.precision.products``, asked for either place whichever this
  process runs).
* **Pipelining**: :func:`pipeline_schedule` times a loop of loads and computations with
  ``stages`` loads in flight, as ``num_stages`` asks the compiler to; :func:`pipeline_figure`
  draws it.

Checked by ``tests/book/test_book_kernel_primer.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from hymo_mini.analysis.tables import TextTable

__all__ = ["TF32_BITS", "DOT_MIN", "GpuSpec", "H200", "measured_gpu", "hierarchy_rows", "floors",
           "ridge_point", "operations", "roofline_figure", "tf32_round", "tf32_matmul",
           "tf32x3_matmul", "bf16_pieces", "bf16x6_matmul", "rel_error", "products_on",
           "products_table", "pipeline_schedule", "pipeline_figure"]


TF32_BITS = 10  # mantissa bits TF32 keeps of float32's 23
DOT_MIN = 16  # tl.dot's smallest tile side


@dataclass(frozen=True)
class GpuSpec:
    """A GPU's datasheet numbers. Rates are dense (no structured sparsity): NVIDIA's
    datasheet lists the tensor-core rates with sparsity, twice these."""

    name: str
    sm_count: int
    warp_size: int  # threads that execute one instruction together
    max_warps_per_sm: int  # resident at once
    registers_per_sm: int  # 32-bit registers
    shared_kib_per_sm: int  # shared memory (SRAM) a program can be given, per SM
    l2_mib: int
    hbm_gb: float
    hbm_tbps: float  # HBM bandwidth, TB/s
    fp32_tflops: float  # CUDA cores, no tensor cores
    tf32_tflops: float  # tensor cores, TF32 inputs, fp32 accumulation
    bf16_tflops: float  # tensor cores, bf16 inputs, fp32 accumulation
    source: str


H200 = GpuSpec(
    name="NVIDIA H200 SXM", sm_count=132, warp_size=32, max_warps_per_sm=64,
    registers_per_sm=65536, shared_kib_per_sm=228, l2_mib=50, hbm_gb=141, hbm_tbps=4.8,
    fp32_tflops=67.0, tf32_tflops=989 / 2, bf16_tflops=1979 / 2,
    source="NVIDIA H200 datasheet (rates halved: the datasheet's tensor-core rates assume "
           "sparsity); CUDA programming guide, compute capability 9.0 (warps, registers, "
           "shared memory)")

MEASURED_RUN = "gdn_h200_2026-11-30.json"  # its environment: the GPU the benchmarks ran on


def measured_gpu(name: str = MEASURED_RUN) -> dict:
    """What a benchmark run recorded about its GPU: name, SM count, memory (GiB) and the
    device-to-device copy rate (GB/s of bytes read plus written), with the run's caption."""
    from hymo_book.results import load_result, run_caption

    report = load_result(name, need=("environment",))
    env = report["environment"]
    return {"gpu": env["gpu"], "sm_count": env["sm_count"], "memory_gib": env["gpu_memory_gib"],
            "copy_GBps": env["copy_GBps"], "caption": run_caption(report)}


def hierarchy_rows(spec: GpuSpec = H200) -> list[tuple[str, str, str]]:
    """(level, size, shared by) of the memory hierarchy, from the fastest to the largest."""
    return [
        ("registers", f"{spec.registers_per_sm * 4 // 1024} KiB per SM", "one thread each"),
        ("shared memory", f"up to {spec.shared_kib_per_sm} KiB per SM",
         "the warps of one program"),
        ("L2 cache", f"{spec.l2_mib} MB", "every SM"),
        ("HBM", f"{spec.hbm_gb:g} GB at {spec.hbm_tbps:g} TB/s",
         "every SM (copies from the host land here)"),
    ]


# --------------------------------------------------------------------------------------
# Two floors
# --------------------------------------------------------------------------------------
def floors(n_bytes: float, flops: float, bandwidth_GBps: float, tflops: float) -> dict:
    """The least time (ms) an operation can take: moving ``n_bytes`` at ``bandwidth_GBps``,
    and doing ``flops`` at ``tflops``; the floor is the larger, and names its bound."""
    if min(n_bytes, flops) < 0 or min(bandwidth_GBps, tflops) <= 0:
        raise ValueError("bytes and FLOPs must be >= 0 and the rates > 0, got "
                         f"{n_bytes}, {flops}, {bandwidth_GBps}, {tflops}")
    memory_ms = n_bytes / (bandwidth_GBps * 1e9) * 1e3
    compute_ms = flops / (tflops * 1e12) * 1e3
    return {"memory_ms": memory_ms, "compute_ms": compute_ms,
            "floor_ms": max(memory_ms, compute_ms),
            "bound": "memory" if memory_ms >= compute_ms else "compute",
            "intensity": flops / n_bytes if n_bytes else float("inf")}


def ridge_point(tflops: float, bandwidth_GBps: float) -> float:
    """FLOPs per byte at which moving the bytes and doing the FLOPs take equally long."""
    return tflops * 1e12 / (bandwidth_GBps * 1e9)


def operations(B: int = 4, T: int = 4096, H: int = 40, S: int = 32, D: int = 32,
               n: int = 4096) -> dict:
    """Bytes and FLOPs (fp32, 4 bytes an element) of three operations:

    add          z = x + y on B·T·H·D elements: read two, write one, one FLOP each
    gla forward  the GDN recurrence's forward (chapter 07) at its fewest bytes: read v, b,
                 c, g and write o once, the state never leaving the chip; per step and
                 head S exponentials and 5·S·D FLOPs (decay, write, add, and the read's
                 multiply-add)
    matmul       an (n, n) by (n, n) product: read two matrices, write one, 2·n³ FLOPs
    """
    elements = B * T * H * D
    steps = B * T * H
    return {
        "add": {"bytes": 3 * elements * 4, "flops": elements},
        "gla forward": {"bytes": steps * (2 * D + 2 * S + 1) * 4, "flops": steps * (5 * S * D + S)},
        "matmul": {"bytes": 3 * n * n * 4, "flops": 2 * n**3},
    }


_RATES = [("fp32_tflops", "fp32, CUDA cores", "-"), ("tf32_tflops", "TF32, tensor cores", "--"),
          ("bf16_tflops", "bf16, tensor cores", "-.")]
_MARKERS = {"add": "o", "gla forward": "s", "matmul": "^"}


def roofline_figure(bandwidth_GBps: float | None = None, spec: GpuSpec = H200,
                    ops: dict | None = None) -> Figure:
    """The roofline: the highest rate (TFLOP/s, log) an operation of a given intensity
    (FLOPs per byte, log) can reach, min(rate, intensity · bandwidth), one roof per kind of
    arithmetic; the operations of :func:`operations` at their intensities."""
    bandwidth_GBps = bandwidth_GBps or spec.hbm_tbps * 1e3
    ops = operations() if ops is None else ops
    x = np.logspace(-2, 4, 400)  # FLOPs per byte
    fig = Figure(figsize=(7.5, 4.6), layout="constrained")
    ax = fig.subplots()
    for key, label, style in _RATES:
        rate = getattr(spec, key)
        ridge = ridge_point(rate, bandwidth_GBps)
        ax.plot(x, np.minimum(rate, x * bandwidth_GBps / 1e3), color="k", linestyle=style,
                label=f"{label}: {rate:.0f} TFLOP/s, ridge at {ridge:.0f}")
    for name, cost in ops.items():
        intensity = cost["flops"] / cost["bytes"]
        reach = min(spec.fp32_tflops, intensity * bandwidth_GBps / 1e3)
        ax.plot([intensity], [reach], marker=_MARKERS.get(name, "D"), ms=9, linestyle="none",
                color="C0", label=f"{name}: {intensity:.3g} FLOPs/byte")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs per byte moved, log)")
    ax.set_ylabel("attainable TFLOP/s (log)")
    ax.set_title(f"{spec.name}: the roofline at {bandwidth_GBps / 1e3:.2f} TB/s\n"
                 "left of a ridge memory sets the floor, right of it arithmetic", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="lower right")
    return fig


# --------------------------------------------------------------------------------------
# TF32
# --------------------------------------------------------------------------------------
def tf32_round(x: torch.Tensor) -> torch.Tensor:
    """float32 rounded to TF32 (8 exponent bits as float32, 10 mantissa bits instead of
    23): to the nearest, ties to even; infinities and nan pass through. The result is a
    float32 whose 13 lowest mantissa bits are zero."""
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
        raise TypeError(f"x must be a float32 tensor, got {getattr(x, 'dtype', type(x))}")
    bits = x.contiguous().view(torch.int32)
    odd = (bits >> 13) & 1  # the last kept bit: a tie goes to the even neighbour
    rounded = ((bits + 0xFFF + odd) & ~0x1FFF).view(torch.float32)
    return torch.where(torch.isfinite(x), rounded, x)


def tf32_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """One TF32 product as a tensor core makes it: inputs rounded to TF32, products (exact in
    float32: 11 by 11 significant bits) summed in float32."""
    return tf32_round(a) @ tf32_round(b)


def tf32x3_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """fp32-grade product from three TF32 products ("tf32x3"): split a = a_big + a_small
    with a_big = tf32(a), likewise b, and drop only a_small @ b_small (about 2⁻²² of the
    product): a_big @ b_big + (a_big @ b_small + a_small @ b_big)."""
    a_big, b_big = tf32_round(a), tf32_round(b)
    a_small, b_small = tf32_round(a - a_big), tf32_round(b - b_big)
    return a_big @ b_big + (a_big @ b_small + a_small @ b_big)


def bf16_pieces(x: torch.Tensor, n: int = 3) -> list[torch.Tensor]:
    """float32 x as n bf16 pieces, largest first, each the bf16 rounding (to nearest) of what
    the pieces before it left: x = pieces[0] + pieces[1] + ... up to what the last one
    leaves. Each piece carries 8 significant bits, so three carry float32's 24. The pieces are
    returned as float32 tensors holding bf16 values."""
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
        raise TypeError(f"x must be a float32 tensor, got {getattr(x, 'dtype', type(x))}")
    pieces, rest = [], x
    for _ in range(n):
        piece = rest.to(torch.bfloat16).float()
        pieces.append(piece)
        rest = rest - piece  # exact in float32
    return pieces


def bf16x6_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """fp32-grade product from six bf16 products ("bf16x6"): three bf16 pieces of each input
    (``bf16_pieces``), and of the nine products of pieces a_i @ b_j (i, j = 1, 2, 3) the six
    with i + j <= 4, summed smallest first. Each of the three left out is about 2⁻²⁷ of the
    product or less, below float32's own rounding. A bf16 product is exact in float32 (8 by
    8 significant bits) and summed in float32, as on the tensor cores."""
    a1, a2, a3 = bf16_pieces(a)
    b1, b2, b3 = bf16_pieces(b)
    total = a3 @ b1 + a1 @ b3 + a2 @ b2  # the smallest first
    return (total + (a2 @ b1 + a1 @ b2)) + a1 @ b1


def rel_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    """Relative RMS error of x against ref, in float64."""
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm()).item()


def products_on(dtype: torch.dtype, forward: bool, interpreter: bool) -> str:
    """What the chunk kernels' products multiply for inputs of ``dtype`` in one direction
    (``hymo_mini.ops.utils.precision.products``), on a GPU (``interpreter=False``) or under
    the Triton interpreter, whichever of the two this process runs: the library's answer
    with its interpreter flag set for the question, then put back."""
    from unittest import mock

    from hymo_mini.ops.utils import precision

    with mock.patch.object(precision, "INTERPRET", interpreter):
        return precision.products(dtype, forward=forward)


def products_table(dtypes=(torch.float32, torch.bfloat16, torch.float16)) -> TextTable:
    """``products_on`` for each input dtype, forward and backward, on a GPU and under the
    interpreter, as PyTorch's TF32 switch stands now (off by default)."""
    rows = [(str(d).removeprefix("torch."),
             *(products_on(d, fwd, interp) for interp in (False, True) for fwd in (True, False)))
            for d in dtypes]
    return TextTable(("inputs", "GPU: forward", "GPU: backward", "interpreter: forward",
                      "interpreter: backward"), rows, align="lllll",
                     title="what the chunk kernels' products multiply "
                           "(hymo_mini.ops.utils.precision.products)")


# --------------------------------------------------------------------------------------
# Software pipelining
# --------------------------------------------------------------------------------------
def pipeline_schedule(n_iter: int, load: int, compute: int, stages: int) -> list[dict]:
    """Start and end of every iteration's load and computation when up to ``stages`` loads
    are in flight, as ``num_stages`` asks the compiler for (``stages=1``: load, wait,
    compute, then the next load). A load is a wait (its latency), not work: several can be
    in flight at once, each into its own buffer. Iteration i's buffer is the one iteration
    i - stages used, free once that iteration has computed; loads are issued in order and
    computations run one after another."""
    for name, value in (("n_iter", n_iter), ("load", load), ("compute", compute),
                        ("stages", stages)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    rows: list[dict] = []
    for i in range(n_iter):
        issued = rows[-1]["load_start"] if rows else 0  # in order
        buffer_free = rows[i - stages]["compute_end"] if i >= stages else 0
        load_start = max(issued, buffer_free)
        load_end = load_start + load
        compute_start = max(load_end, rows[-1]["compute_end"] if rows else 0)
        rows.append({"load_start": load_start, "load_end": load_end,
                     "compute_start": compute_start, "compute_end": compute_start + compute})
    return rows


def pipeline_figure(n_iter: int = 6, load: int = 4, compute: int = 2,
                    stages: tuple[int, ...] = (1, 3)) -> Figure:
    """One timeline per ``stages``: each iteration's load (hatched) on the lane of its
    buffer and its computation (grey) on the compute lane, labelled by iteration."""
    heights = [s + 1 for s in stages]
    fig = Figure(figsize=(8.5, 1.0 + 0.55 * sum(heights)), layout="constrained")
    axes = fig.subplots(len(stages), 1, sharex=True, squeeze=False,
                        gridspec_kw={"height_ratios": heights})[:, 0]
    for ax, s in zip(axes, stages, strict=True):
        rows = pipeline_schedule(n_iter, load, compute, s)
        for i, r in enumerate(rows):
            lane = 1 + i % s  # the buffer this iteration loads into
            ax.broken_barh([(r["load_start"], load)], (lane + 0.1, 0.8), facecolor="white",
                           edgecolor="k", hatch="///")
            ax.broken_barh([(r["compute_start"], compute)], (0.1, 0.8), facecolor="#7f7f7f",
                           edgecolor="k")
            ax.text(r["load_start"] + load / 2, lane + 0.5, str(i), ha="center", va="center",
                    fontsize=8, bbox=dict(fc="white", ec="none", pad=0.5))
            ax.text(r["compute_start"] + compute / 2, 0.5, str(i), ha="center", va="center",
                    fontsize=8, color="white")
        ax.set_yticks([0.5 + k for k in range(s + 1)])
        ax.set_yticklabels(["compute"] + [f"load, buffer {k}" for k in range(s)], fontsize=8)
        ax.set_ylim(0, s + 1)
        ax.set_title(f"num_stages = {s}: {n_iter} iterations end at time "
                     f"{rows[-1]['compute_end']}", fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[-1].set_xlabel(f"time (a load waits {load}, a computation takes {compute}; "
                        "the number in a bar is its iteration)")
    fig.legend(handles=[Patch(facecolor="white", edgecolor="k", hatch="///", label="load"),
                        Patch(facecolor="#7f7f7f", edgecolor="k", label="compute")],
               loc="outside upper right", fontsize=8, ncols=2, frameon=False)
    return fig


def launch_schedule(calls: int, host: int, device: int) -> list[dict]:
    """``calls`` calls issued back to back, one kernel each: the host works ``host`` time
    units on a call (its Python, its allocations, the launch's own work), then puts the
    kernel on the GPU's queue and goes on to the next call without waiting; the GPU runs the
    queue in order, each kernel ``device`` units, from when it is queued or the kernel
    before it ends, whichever is later. Rows: host_start, queued, gpu_start, gpu_end."""
    for name, value, least in (("calls", calls, 1), ("host", host, 0), ("device", device, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int of at least {least}, got {value!r}")
    rows: list[dict] = []
    for _ in range(calls):
        host_start = rows[-1]["queued"] if rows else 0
        queued = host_start + host
        gpu_start = max(queued, rows[-1]["gpu_end"] if rows else 0)
        rows.append({"host_start": host_start, "queued": queued, "gpu_start": gpu_start,
                     "gpu_end": gpu_start + device})
    return rows


def launch_figure(calls: int = 6, host: int = 4, device: int = 3) -> Figure:
    """The two clocks of ``launch_schedule``: the host's work per call (hatched) on one
    lane, the kernels (grey) on the GPU's, labelled by call; the GPU's idle time is the
    gaps in its lane."""
    rows = launch_schedule(calls, host, device)
    fig = Figure(figsize=(8.5, 2.4), layout="constrained")
    ax = fig.subplots()
    for i, r in enumerate(rows):
        if host:
            ax.broken_barh([(r["host_start"], host)], (1.1, 0.8), facecolor="white",
                           edgecolor="k", hatch="///")
            ax.text(r["host_start"] + host / 2, 1.5, str(i), ha="center", va="center",
                    fontsize=8, bbox=dict(fc="white", ec="none", pad=0.5))
        ax.broken_barh([(r["gpu_start"], device)], (0.1, 0.8), facecolor="#7f7f7f",
                       edgecolor="k")
        ax.text(r["gpu_start"] + device / 2, 0.5, str(i), ha="center", va="center",
                fontsize=8, color="white")
    end = rows[-1]["gpu_end"]
    busy = calls * device
    ax.set_yticks([0.5, 1.5])
    ax.set_yticklabels(["GPU: kernels", "host: work per call"], fontsize=8)
    ax.set_ylim(0, 2)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    side = ("host-bound: the GPU waits" if host > device else
            "device-bound: the host runs ahead" if device > host else "balanced")
    ax.set_title(f"{calls} calls end at time {end}; the GPU is busy {busy} of it ({side})",
                 fontsize=9)
    ax.set_xlabel(f"time (the host works {host} per call, a kernel takes {device}; the "
                  "number in a bar is its call)")
    fig.legend(handles=[Patch(facecolor="white", edgecolor="k", hatch="///",
                              label="host work"),
                        Patch(facecolor="#7f7f7f", edgecolor="k", label="kernel")],
               loc="outside upper right", fontsize=8, ncols=2, frameon=False)
    return fig
