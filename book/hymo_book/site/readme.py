"""README.md's generated sections: the parts of the book, and the headline measurements.

    python3 book/hymo_book/site/readme.py          # rewrite both sections between their markers
    python3 book/hymo_book/site/readme.py --check  # exit 1 if README.md is out of date

The headline is a few lines: the whole training step against its peers, each rule's kernel
against fla's, and FSDP2 on one GPU, each read from a run of :data:`HEADLINE_RUNS`. The kernel
report (chapter 21) and the results index (``book/results/README.md``) have the rest.
``tests/book/test_readme.py`` fails when README.md differs from what this writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make ``hymo_book`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hymo_book.curriculum import BOOK, PARTS  # noqa: E402
from hymo_book.fsdp import FSDP_RUN, load_fsdp  # noqa: E402
from hymo_book.kernels.standing import STANDING, standing  # noqa: E402
from hymo_book.results import load_result, run_info  # noqa: E402
from hymo_book.site import markers  # noqa: E402
from hymo_book.site.book_index import title_and_summary  # noqa: E402
from hymo_book.training import TRAIN_STEP  # noqa: E402

__all__ = ["README", "HEADLINE_RUNS", "headline_section", "parts_section", "SECTIONS",
           "rewrite"]

README = Path(__file__).resolve().parents[3] / "README.md"
# every results file the headline reads
HEADLINE_RUNS = (TRAIN_STEP, *(name for runs, *_ in STANDING.values() for name in runs), FSDP_RUN)


def _span(values: list[float]) -> str:
    """``0.43–0.46×`` (or one value where they print alike)."""
    low, high = f"{min(values):.2f}", f"{max(values):.2f}"
    return f"{low}×" if low == high else f"{low}–{high}×"


def _step_rows(step: dict) -> list[str]:
    """The whole training step against its peers at hymo's active size and its own
    reference path; the hybrid against the all-MLA stack at the longest sequence."""
    c = step["cases"]
    graph = c["hybrid_fast_graph_b4t4096"]
    tokens = graph["tokens_per_s"]
    llama, gla, ref = (c[k]["tokens_per_s"] for k in (
        "llama_sdpa_matched_b4t4096", "fla_gla_matched_b4t4096", "hybrid_reference_b4t4096"))
    hybrid, mla = (c[f"{k}_fast_b1t16384"]["tokens_per_s"] for k in ("hybrid", "mla"))
    return [f"| training step, `hymo_750m`, B = 4, T = 4,096 | {tokens:,.0f} tokens/s, "
            f"{100 * graph['mfu']:.1f}% MFU (one CUDA graph) | {tokens / llama:.2f}× HF Llama, "
            f"{tokens / gla:.2f}× fla GLA (each as deep as hymo's active size allows); "
            f"{tokens / ref:.2f}× hymo's reference path |",
            f"| the 3:1 hybrid against all-MLA, B = 1, T = 16,384 | {hybrid:,.0f} tokens/s | "
            f"{hybrid / mla:.2f}× the all-MLA stack (the document says \"3–5× faster\") |"]


def _kernel_rows(table) -> list[str]:
    """Each rule's chunked kernel, as the GDN mixer calls it, against its fla peer."""
    peers = {"gla": "fla `chunk_gla`", "delta": "fla `chunk_kda`"}
    names = {"gla": "gla kernel (the document's rule)", "delta": "gated delta kernel"}
    lines = []
    for rule, peer in peers.items():
        rows = [r for r in table.rows if r["rule"] == rule]
        times = {d: _span([r["fwdbwd_ratio"] for r in rows if r["dtype"] == d])
                 for d in ("bfloat16", "float32")}
        lines.append(f"| {names[rule]}, forward + backward | bf16 {times['bfloat16']}, fp32 "
                     f"{times['float32']} the time | {peer}, both shapes (fp32: our fp32-grade "
                     f"products, its TF32); peak memory {_span([r['peak_ratio'] for r in rows])} |")
    return lines


def _fsdp_row(run: dict) -> str:
    """FSDP2 in a process group of one against the plain single-GPU step."""
    modes = {r["mode"]: r for r in run["runs"]}
    fsdp, plain = modes["fsdp"], modes["plain"]
    return (f"| FSDP2 in a process group of one | {fsdp['tokens_per_s']:,.0f} tokens/s, "
            f"{fsdp['peak_allocated_gib']:.1f} GiB peak | "
            f"{fsdp['tokens_per_s'] / plain['tokens_per_s']:.2f}× the plain step's tokens/s, "
            f"{fsdp['peak_allocated_gib'] / plain['peak_allocated_gib']:.2f}× its peak "
            "(one step each) |")


def headline_section() -> str:
    """The headline table and the line under it, every number read from ``HEADLINE_RUNS``."""
    step = load_result(TRAIN_STEP, need=("cases",))
    kernels = standing()
    infos = [run_info(load_result(name)) for name in HEADLINE_RUNS]
    cards = {i["hardware"] for i in infos}
    if len(cards) != 1:
        raise ValueError(f"the headline runs were made on several cards: {sorted(cards)}")
    versions = max((i["versions"] for i in infos), key=len)
    lines = ["| measured | hymo_mini | against |", "|---|---|---|", *_step_rows(step),
             *_kernel_rows(kernels), _fsdp_row(load_fsdp())]
    lines += ["", f"One {cards.pop()} ({versions}); every ratio divides times of one run. "
                 "Chapters 18 and 21 show these runs and the rest; "
                 "[book/results/README.md](book/results/README.md) lists every run."]
    return "\n".join(lines)


def parts_section() -> str:
    """The parts of the book with their chapters' numbers and titles, in reading order."""
    lines = ["| part | chapters |", "|---|---|"]
    for caption, stems in PARTS:
        titles = [f"{s[:2]} {title_and_summary(s)[0]}" for s in stems
                  if (BOOK / f"{s}.ipynb").exists()]
        lines.append(f"| {caption} | {' · '.join(titles)} |")
    return "\n".join(lines)


# marker name -> the function that writes what stands between its two markers
SECTIONS = {"headline": headline_section, "parts": parts_section}


def rewrite(readme: Path = README, check: bool = False) -> bool:
    """Put every generated section between its markers; returns whether README.md was
    already up to date (with ``check``, nothing is written)."""
    return markers.rewrite_sections(readme, SECTIONS, check)


def main(argv: list[str] | None = None) -> int:
    return markers.main(argv, "README.md", rewrite, __doc__.splitlines()[0])


if __name__ == "__main__":
    raise SystemExit(main())
