"""The chunked Triton kernel against the targets set for it (chapter 21, part 3).

:data:`TARGETS` are the project's issue #4; :func:`chunk_targets` scores the benchmark of
record against them, :func:`chunk_forward_bytes` counts the bytes the forward moves and
:func:`chunk_peak_bytes` predicts its peak memory. :func:`kernel_only` reads the run that
timed the kernel's autograd Function without the dispatcher's input checks. Nothing here
measures time. Checked by ``tests/book/test_book_kernel_results.py``.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

from hymo_book.kernels.arithmetic import memory_bytes
from hymo_book.kernels.gdn_runs import ITEMSIZE, load_reports
from hymo_book.results import run_caption
from hymo_book.style import backend_style
from hymo_mini.analysis.tables import TextTable

__all__ = ["TARGETS", "chunk_forward_bytes", "chunk_peak_bytes", "Targets", "chunk_targets",
           "KERNEL_ONLY_RUN", "KernelOnly", "kernel_only"]

# The targets set for the chunked Triton kernel (the project's issue #4), against fla's
# chunk_gla measured in the same run: forward + backward time at most 0.9 of the peer's,
# peak memory at most the peer's, forward at most 3 times a device copy of its minimum bytes.
TARGETS = {"fwdbwd_vs_peer": 0.9, "peak_vs_peer": 1.0, "fwd_vs_copy": 3.0}
# the run that timed the kernel alone beside the dispatcher and the peer (one shape)
KERNEL_ONLY_RUN = "chunk_kernel_only_h200_2026-11-30.json"


# --------------------------------------------------------------------------------------
# Bytes and memory
# --------------------------------------------------------------------------------------
def chunk_peak_bytes(B: int = 4, T: int = 4096, H: int = 40, S: int = 32, D: int = 32,
                     itemsize: int = 4, chunk: int = 64, block: int = 16) -> dict:
    """What one forward + backward of the chunked kernel (``hymo_mini.ops.gla.chunk_triton``)
    allocates beyond its inputs (and do), by tensor, as
    :func:`hymo_book.kernels.arithmetic.recurrent_peak_bytes` does for the recurrent one.
    Inputs, o and gradients have ``itemsize`` bytes an element, states are fp32.
    Live at the end of its backward: o, the block-start states the forward stored, the
    state gradient at every chunk's end, the per-chunk partial sums of dA, and the
    gradients of v, b, c and g. (The chunk states of the forward are gone by then.)"""
    n_chunks = math.ceil(T / chunk)
    rows = {"o": B * T * H * D * itemsize,
            "block-start states": memory_bytes(B, T, H, S, D, chunk, block)["block_states"],
            "chunk-end state gradients": B * H * n_chunks * S * D * 4,
            "dA per chunk": B * H * n_chunks * S * 4,
            "dv, db, dc": B * T * H * (D + 2 * S) * itemsize, "dg": B * T * H * itemsize}
    rows["total"] = sum(rows.values())
    return rows


def chunk_forward_bytes(B: int = 4, T: int = 4096, H: int = 40, S: int = 32, D: int = 32,
                        itemsize: int = 4, chunk: int = 64) -> dict:
    """Bytes the chunked kernel's forward (no autograd, "scan" mode) reads and writes, by
    kernel, against the minimum (read v, b, c, g once, write o once), the benchmark's
    ``bytes_min_fwd``. Inputs and o have ``itemsize`` bytes an element, states fp32:

    chunk deltas   read b, v, g; write each chunk's own ΔH_k (S·D) and decay (S)
    scan           read ΔH_k and the decay, write H_k in place
    outputs        read v, b, c, g and H_k; write o
    """
    n = B * T * H  # steps of all (batch, head) pairs
    states = B * H * math.ceil(T / chunk)  # chunk states of all (batch, head) pairs
    rows = {"minimum": n * (2 * D + 2 * S + 1) * itemsize,
            "chunk deltas": n * (S + D + 1) * itemsize + states * (S * D + S) * 4,
            "scan": states * (2 * S * D + S) * 4,
            "outputs": n * (2 * D + 2 * S + 1) * itemsize + states * S * D * 4}
    rows["total"] = rows["chunk deltas"] + rows["scan"] + rows["outputs"]
    return rows


# --------------------------------------------------------------------------------------
# The chunked kernel against its targets
# --------------------------------------------------------------------------------------
_TARGET_NAMES = {"fwdbwd_vs_peer": "forward + backward / {peer}",
                 "peak_vs_peer": "peak memory / {peer}",
                 "fwd_vs_copy": "forward / a device copy of its bytes"}


@dataclass
class Targets:
    """The chunked kernel scored against :data:`TARGETS`, shape by shape, in one run.

    rows: per shape and dtype, the times, memories and their ratios; verdicts: per target,
    (the worst value over the shapes, the limit, whether every shape meets it)."""

    rows: list[dict]
    verdicts: dict
    labels: tuple[str, str]
    caption: str

    def _tables(self) -> tuple[TextTable, TextTable]:
        ours, peer = self.labels
        shapes = TextTable(
            ("shape", "dtype", "fwd+bwd ms", "ratio", "peak MiB", "ratio", "fwd ms", "fwd/copy",
             "(peer)"),
            [(r["shape"], r["dtype"], f"{r['fwdbwd_ms']:.2f} / {r['peer_fwdbwd_ms']:.2f}",
              f"{r['fwdbwd_ratio']:.2f}x", f"{r['peak_mib']:.0f} / {r['peer_peak_mib']:.0f}",
              f"{r['peak_ratio']:.2f}x", f"{r['fwd_ms']:.2f} / {r['peer_fwd_ms']:.2f}",
              f"{r['fwd_vs_copy']:.1f}x", f"{r['peer_fwd_vs_copy']:.1f}x") for r in self.rows],
            title=f"{ours} (ours) against {peer} (peer), measured in one run:", align="llrrrrrrr")
        verdicts = []
        for key, (worst, limit, met) in self.verdicts.items():
            verdict = (f"met, {1 - worst / limit:.0%} below the limit" if met
                       else f"missed, {worst / limit:.1f}x the limit")
            verdicts.append((_TARGET_NAMES[key].format(peer=peer), f"{limit:.1f}x",
                             f"{worst:.2f}x", verdict))
        return shapes, TextTable(("target", "limit", "worst", "verdict"), verdicts, align="lrrl")

    def __str__(self) -> str:
        shapes, verdicts = self._tables()
        return f"{shapes}\n\n{verdicts}\n\n{self.caption}"

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        shapes, verdicts = self._tables()
        return (f"{shapes._repr_html_()}<br>{verdicts._repr_html_()}"
                f"<pre>{html.escape(self.caption)}</pre>")


def chunk_targets(reports: list[dict] | None = None, ours: str = "chunk_triton",
                  peer: str = "fla_chunk") -> Targets:
    """Score ``ours`` against ``peer`` and :data:`TARGETS` in the latest report that
    measured both (every ratio compares times of one run). The copy time of a shape is its
    ``bytes_min_fwd`` (read v, b, c, g, write o) at the run's measured copy bandwidth."""
    reports = load_reports() if reports is None else reports
    report = next((r for r in reversed(reports) if any(
        ours in e["results"] and peer in e["results"] for e in r["shapes"].values())), None)
    if report is None:
        raise KeyError(f"no report measured both {ours!r} and {peer!r}")
    gbps = report["environment"]["copy_GBps"]
    rows = []
    for entry in report["shapes"].values():
        found = entry["results"]
        if ours not in found or peer not in found:
            continue
        copy_ms = entry["bytes_min_fwd"] / gbps / 1e6
        a, p = found[ours], found[peer]
        rows.append({"shape": f"B{entry['B']} T{entry['T']} H{entry['H']}", "dtype": entry["dtype"],
                     "fwd_ms": a["fwd_ms"], "peer_fwd_ms": p["fwd_ms"], "copy_ms": copy_ms,
                     "fwdbwd_ms": a["fwdbwd_ms"], "peer_fwdbwd_ms": p["fwdbwd_ms"],
                     "fwdbwd_ratio": a["fwdbwd_ms"] / p["fwdbwd_ms"],
                     "peak_mib": a["peak_mib"], "peer_peak_mib": p["peak_mib"],
                     "peak_ratio": a["peak_mib"] / p["peak_mib"],
                     "fwd_vs_copy": a["fwd_ms"] / copy_ms,
                     "peer_fwd_vs_copy": p["fwd_ms"] / copy_ms})
    verdicts = {}
    for key, column in (("fwdbwd_vs_peer", "fwdbwd_ratio"), ("peak_vs_peer", "peak_ratio"),
                        ("fwd_vs_copy", "fwd_vs_copy")):
        worst = max(r[column] for r in rows)
        verdicts[key] = (worst, TARGETS[key], worst <= TARGETS[key])
    return Targets(rows, verdicts, (backend_style(ours).label, backend_style(peer).label),
                   run_caption(report))


# --------------------------------------------------------------------------------------
# The kernel alone, without the dispatcher's checks
# --------------------------------------------------------------------------------------
_ALONE, _DISPATCHED, _PEER = "chunk_triton_kernel", "chunk_triton", "fla_chunk"


@dataclass
class KernelOnly:
    """The chunked kernel timed alone (its autograd Function, no input checks) and through
    the dispatcher, beside fla's chunk_gla, in one run; per shape measured (``rows``): the
    results of each, the copy time of the forward's minimum bytes and the bytes the forward
    moves (:func:`chunk_forward_bytes`)."""

    rows: list[dict]
    gbps: float
    caption: str

    def _shape_text(self, r: dict) -> list[str]:
        found, copy_ms, peer = r["results"], r["copy_ms"], r["results"][_PEER]
        table = TextTable(
            ("backend", "fwd ms", "fwd/copy", "fwd/fla", "fwd+bwd ms", "f+b/fla", "peak MiB"),
            [(backend_style(n).label, f"{found[n]['fwd_ms']:.3f}",
              f"{found[n]['fwd_ms'] / copy_ms:.1f}x", f"{found[n]['fwd_ms'] / peer['fwd_ms']:.2f}x",
              f"{found[n]['fwdbwd_ms']:.2f}", f"{found[n]['fwdbwd_ms'] / peer['fwdbwd_ms']:.2f}x",
              f"{found[n]['peak_mib']:.1f}") for n in (_ALONE, _DISPATCHED, _PEER)],
            title=(f"{r['shape']} {r['dtype']}: ms; forward against a device copy of its "
                   f"{r['minimum'] / 1e6:.0f} MB ({copy_ms:.4f} ms) and against "
                   f"{backend_style(_PEER).label}"))
        alone, checked = found[_ALONE], found[_DISPATCHED]
        ratio, limit = alone["fwd_ms"] / copy_ms, TARGETS["fwd_vs_copy"]
        verdict = "met" if ratio <= limit else f"missed, {ratio / limit:.2f}x the limit"
        extra = [checked[k] - alone[k] for k in ("fwd_ms", "fwdbwd_ms")]
        tbps = r["moved"] / alone["fwd_ms"] / 1e9
        return [str(table),
                f"the dispatcher (its input checks) adds {extra[0]:.3f} ms to the forward, "
                f"{extra[1]:.3f} ms to forward + backward",
                f"forward target, at most {limit:.0f}x the copy: the kernel alone takes "
                f"{ratio:.1f}x, {verdict}",
                f"the kernel alone moves {r['moved'] / 1e6:.0f} MB "
                f"({r['moved'] / r['minimum']:.2f}x the minimum) in {alone['fwd_ms']:.3f} ms:"
                f" {tbps:.2f} TB/s (a device copy: {self.gbps / 1e3:.2f} TB/s)", ""]

    def __str__(self) -> str:
        return "\n".join([line for r in self.rows for line in self._shape_text(r)]
                         + [self.caption])

    def __repr__(self) -> str:
        return str(self)


def kernel_only(path=None) -> KernelOnly:
    """Read ``path`` (default: :data:`KERNEL_ONLY_RUN` in the results folder), a run of
    ``benchmarks/gdn.py --backends chunk_triton chunk_triton_kernel fla_chunk``. Every shape
    it measured with all three backends is a row. Raises FileNotFoundError if the file is
    missing, KeyError if no shape has the three."""
    report = load_reports([KERNEL_ONLY_RUN if path is None else path])[0]
    gbps = report["environment"]["copy_GBps"]
    rows = []
    for entry in report["shapes"].values():
        if not all(name in entry["results"] for name in (_ALONE, _DISPATCHED, _PEER)):
            continue
        traffic = chunk_forward_bytes(entry["B"], entry["T"], entry["H"], entry["S"], entry["D"],
                                      ITEMSIZE[entry["dtype"]])
        rows.append({"shape": f"B{entry['B']} T{entry['T']} H{entry['H']}",
                     "dtype": entry["dtype"], "results": entry["results"],
                     "minimum": entry["bytes_min_fwd"], "moved": traffic["total"],
                     "copy_ms": entry["bytes_min_fwd"] / gbps / 1e6})
    if not rows:
        raise KeyError(f"{report['file']} has no shape measured with {_ALONE!r}, "
                       f"{_DISPATCHED!r} and {_PEER!r}")
    return KernelOnly(rows, gbps, run_caption(report))
