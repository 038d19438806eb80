"""The index of ``book/results/``: for every run, what it measures, on what, when, by which
command, and which chapter shows it.

    python3 book/hymo_book/results_index.py          # rewrite book/results/README.md
    python3 book/hymo_book/results_index.py --check  # exit 1 if the index is out of date

What a run measures is written here, in :data:`WHAT` (a file-name pattern a line, the first
match wins); the hardware, the date and the command come from the run's own record
(:func:`hymo_book.results.run_info`), or from :data:`RECORDED` for a run that records none.
Which chapter shows a run is read from the chapters themselves: the list their last cell
prints (:func:`hymo_book.results.runs_read`) and the names their cells spell out;
README.md's headline reads :data:`hymo_book.site.readme.HEADLINE_RUNS`.
``tests/book/test_results_index.py`` fails on a run that nothing reads, on a name a chapter
reads that is not here, and on an index that is out of date.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from pathlib import Path

import nbformat

if __package__ in (None, ""):  # run as a file: make ``hymo_book`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hymo_book.curriculum import BOOK  # noqa: E402
from hymo_book.results import RESULTS_DIR, load_result, run_info  # noqa: E402
from hymo_book.site import markers  # noqa: E402

__all__ = ["INDEX", "WHAT", "RECORDED", "RUN_NAME", "run_files", "what", "chapters_reading",
           "index_rows", "index_section", "rewrite"]

INDEX = RESULTS_DIR / "README.md"
# a results file's name: a run of a benchmark (.json), or a log kept beside the runs
RUN_NAME = re.compile(r"\b[a-z][a-z0-9_]*_(?:h100|h200|cpu|sm90)[a-z0-9_.-]*\.(?:json|log|txt)"
                      r"|\b(?:gpu_tests|optimizers|cpu_recipe)[a-z0-9_.-]*\.(?:json|log)\b")

# file-name pattern -> what the run measures (the first pattern that matches wins)
WHAT = {
    "gdn_h200_*": "every backend of the gla rule beside fla's GLA kernels, both benchmark "
                  "shapes and dtypes: the benchmark of record",
    "gdn_recurrent_*": "the recurrent kernel against the eager loop and fla's "
                       "fused_recurrent_gla, and the loop's launches",
    "gdn_sweep_*": "the gla backends' time against the sequence length",
    "chunk_kernel_only_*": "the gla chunked kernel alone, without the dispatcher, beside fla",
    "gla_record_*": "the gla rule as the GDN mixer calls it beside fla's chunk_gla, both "
                    "shapes and dtypes",
    "gla_forward_*": "the gla forward alone against a copy of its bytes, per launch",
    "gla_chain_*": "the gla forward in one launch against three, chunks of 64 and 128",
    "gla_pairs_*": "the gla forward with the pairs by one product where the decay allows "
                   "(\"auto\") against the levels",
    "gla_handoff_*": "the gla one-launch forward handing its state on by flags or by a "
                     "tagged ring",
    "gla_reach_*": "the gla one-launch forward reaching back past its chain",
    "gla_block_*": "the gla forward with blocks of 32 steps",
    "gla_half_*": "the gla forward of bf16 inputs with bf16 products",
    "delta_forward_chain_*": "the delta forward of 16-bit inputs in one launch against its "
                             "passes",
    "delta_pairs_*": "the delta forward with the pairs \"auto\" against the levels",
    "delta_redo_*": "the delta one-launch forward forming W and Uv again instead of storing "
                    "them",
    "delta_half_*": "the delta forward of bf16 inputs with bf16 products",
    "delta_stretch_*": "the delta one-launch forward's stretches and what it keeps between "
                       "its steps",
    "delta_cap*": "the delta fp32 forward's kernels capped at 128 registers",
    "delta_group_settings*": "the delta walks over groups set anew, and settings around them",
    "delta_walk_settings_*": "settings around the delta walks that form the outputs",
    "gated_delta_h200_2026-12-01*": "the delta rule's first run: fp32-grade products against "
                                    "TF32, the dispatcher, beside fla's chunk_kda",
    "gated_delta_b*": "the delta rule beside fla's chunk_kda, one shape and dtype a run",
    "gated_delta_group_sweep_*": "the delta state passes over groups of 16 to 128 chunks",
    "gated_delta_defaults_*": "the delta rule as the GDN mixer calls it beside fla's "
                              "chunk_kda, both shapes and dtypes",
    "gated_delta_peers_old_group*": "the delta forward at one long sequence in fp32 with the "
                                    "old group settings",
    "gated_delta_peers_*": "the delta rule as the GDN mixer calls it beside fla's chunk_kda",
    "fp32_products_*": "fp32-grade products made by three TF32 or six bf16 products",
    "direct_ab_*": "launching kernels directly against through Triton, alternated",
    "inverse_level0_*": "the delta forward with one product fewer in each chunk's inverse",
    "one_rate_ab_*": "both forwards before and after the one product by the shared rate",
    "tree_ab_*": "the restructured kernels against the tree before them, alternated",
    "train_step_guard_*": "the training step of the restructured tree and of the tree before",
    "train_step_*": "the whole training step of hymo_750m against its reference path and its "
                    "peers",
    "fsdp_*": "FSDP2 in a process group of one against the plain step",
    "moe_dispatch_*": "one MoE layer dispatched by the loop, grouped and padded",
    "mqar_seeds_3000_*": "associative recall at three times the steps: four layouts, four seeds",
    "mqar_seeds_*": "associative recall: every layer layout, three seeds each",
    "hybrid_text_throughput_*": "the real-text layouts' training speed, the GPU to itself",
    "hybrid_text_*": "the real-text comparison: hymo_small's layouts and a Llama of its size, "
                     "three seeds each, on the Python documentation",
    "optimizers_*": "AdamW against the Muon and NorMuon splits at one budget",
    "hymo_small_docs_*": "the shipped hymo_small model trained on the Python documentation's "
                         "sources",
    "cpu_recipe_*": "the CPU recipe: the mini model trained on the Python documentation on "
                    "two cores",
}

# what a run does not record itself: name -> (hardware, command); the date is its name's
RECORDED = {
    "inverse_level0_ab_h100_2026-12-05.json": (
        "NVIDIA H100 80GB HBM3", "python3 benchmarks/tree_ab.py (its first form)"),
}
_DATE = re.compile(r"20\d\d-\d\d-\d\d")


def run_files() -> list[str]:
    """Every run kept in RESULTS_DIR (the index itself aside), by name."""
    return sorted(p.name for p in RESULTS_DIR.iterdir() if p.name != INDEX.name)


def what(name: str) -> str:
    """What the run ``name`` measures, from :data:`WHAT`; KeyError if no pattern matches."""
    for pattern, words in WHAT.items():
        if fnmatch.fnmatch(name, pattern):
            return words
    raise KeyError(f"{name}: no line of WHAT says what it measures; add one")


def _recorded(name: str) -> dict:
    """Hardware, date and command of a run: its own record, then RECORDED, then the date in
    its name."""
    info = run_info(load_result(name)) if name.endswith(".json") else {}
    hardware, command = RECORDED.get(name, (info.get("hardware"), info.get("command")))
    date = _DATE.search(info.get("date", "") or "") or _DATE.search(name)
    return {"hardware": hardware or "?", "date": date.group(0) if date else "?",
            "command": command or "?"}


def chapters_reading(book: Path = BOOK) -> dict[str, list[str]]:
    """Run name -> the chapters that show it (their numbers), from each chapter's cells: the
    names its runs-read cell printed and the names its sources spell out."""
    found: dict[str, list[str]] = {}
    for path in sorted(book.glob("[0-9][0-9]_*.ipynb")):
        names = set()
        for cell in nbformat.read(path, as_version=4).cells:
            names.update(RUN_NAME.findall(cell.source))
            if "runs_read()" in cell.source:
                for output in cell.get("outputs", []):
                    names.update(RUN_NAME.findall(output.get("data", {}).get("text/plain", "")))
        for name in names:
            found.setdefault(name, []).append(path.name[:2])
    return found


def index_rows() -> list[dict]:
    """One row a run: file, what it measures, hardware, date, command, where it is shown."""
    from hymo_book.site.readme import HEADLINE_RUNS

    shown = chapters_reading()
    rows = []
    for name in run_files():
        where = [f"chapter {n}" for n in shown.get(name, [])]
        where += ["README"] if name in HEADLINE_RUNS else []
        rows.append({"file": name, "what": what(name), **_recorded(name),
                     "shown_in": ", ".join(where)})
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def index_section() -> str:
    """The index table, one row a run."""
    lines = ["| file | what it measures | hardware | date | shown in | command |",
             "|---|---|---|---|---|---|"]
    lines += [f"| `{r['file']}` | {_cell(r['what'])} | {r['hardware']} | {r['date']} | "
              f"{r['shown_in'] or 'nothing'} | `{_cell(r['command'])}` |" for r in index_rows()]
    return "\n".join(lines)


def rewrite(index: Path = INDEX, check: bool = False) -> bool:
    """Write the table between its markers; returns whether the index was up to date."""
    return markers.rewrite_sections(index, {"runs": index_section}, check)


def main(argv: list[str] | None = None) -> int:
    return markers.main(argv, "book/results/README.md", rewrite, __doc__.splitlines()[0])


if __name__ == "__main__":
    raise SystemExit(main())
