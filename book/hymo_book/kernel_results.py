"""The committed GPU measurements of chapter 06 (``benchmarks/results/gdn_*.json``).

:func:`load_reports` reads the reports ``benchmarks/gdn.py`` wrote on the GPU machine;
:func:`results_table` merges them into one table whose rows name their run,
:func:`speedup_figure` draws one run's times beside section 6.1's launch arithmetic,
:func:`gpu_results` returns both, and :func:`sweep_table` reads the time-against-T sweep.
Every table and figure names the GPU, the date and the command of its run. Nothing here
measures time. Checked by ``tests/test_viz_kernel_results.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from hymo_mini.viz.kernel_chapter import document_launches

__all__ = ["RESULTS_DIR", "LABELS", "load_reports", "Table", "results_table", "latest_run",
           "speedup_figure", "gpu_results", "run_caption", "Text", "sweep_table"]

RESULTS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "results"

# how each backend of benchmarks/gdn.py is named and coloured in the chapter's tables and figures
LABELS = {"eager": "eager loop", "chunk": "hymo chunk (torch)", "triton": "hymo Triton recurrent",
          "triton_kernel": "hymo Triton recurrent, no checks", "triton_chunk": "hymo Triton chunk",
          "triton_chunk_kernel": "hymo Triton chunk, no checks",
          "fla_fused_recurrent": "fla fused_recurrent_gla", "fla_chunk": "fla chunk_gla"}
_COLORS = {"eager": "#7f7f7f", "chunk": "#9467bd", "triton": "#d62728",
           "triton_kernel": "#e377c2", "triton_chunk": "#ff7f0e",
           "triton_chunk_kernel": "#ffbb78",
           "fla_fused_recurrent": "#1f77b4", "fla_chunk": "#17becf"}


# --------------------------------------------------------------------------------------
# The measured results
# --------------------------------------------------------------------------------------
def load_reports(paths=None) -> list[dict]:
    """The benchmark reports, oldest first: ``paths`` if given, else every
    ``benchmarks/results/gdn_*.json``. Each report's ``environment`` gets its file name.
    Raises FileNotFoundError if there is none."""
    files = ([Path(p) for p in paths] if paths is not None
             else sorted(RESULTS_DIR.glob("gdn_*.json")))
    missing = [str(f) for f in files if not f.is_file()]
    if missing or not files:
        raise FileNotFoundError(
            f"no GDN benchmark results ({', '.join(missing) or str(RESULTS_DIR / 'gdn_*.json')}):"
            " run `python3 benchmarks/gdn.py` on a GPU machine and commit the JSON it writes "
            "to benchmarks/results/")
    reports = []
    for file in files:
        report = json.loads(file.read_text())
        if "shapes" not in report or "environment" not in report:
            raise ValueError(f"{file} is not a benchmarks/gdn.py report (no 'shapes' or "
                             "'environment')")
        report["environment"]["file"] = file.name
        reports.append(report)
    return sorted(reports, key=lambda r: r["environment"].get("date", ""))


def run_caption(reports: list[dict], letters: bool = False) -> str:
    """File, GPU, versions, date and command of each report, two lines each; marked [a],
    [b], ... in order if ``letters``."""
    lines = []
    for i, r in enumerate(reports):
        env = r["environment"]
        mark = f"[{_letter(i)}] " if letters else ""
        lines.append(f"{mark}{env.get('file', '')}: {env.get('gpu', 'no GPU')}, torch "
                     f"{env.get('torch', '?')}, Triton {env.get('triton', '?')}, fla-core "
                     f"{env.get('fla_core') or '-'}, {env.get('date', '?')}\n"
                     f"  {' ' * len(mark)}{env.get('command', '?')}")
    return "\n".join(lines)


def _letter(i: int) -> str:
    return "abcdefghijklmnopqrstuvwxyz"[i % 26]


@dataclass
class Table:
    """Rows of measured results; shows itself as aligned text, each row marked with the run
    it came from ([a], [b], ... as listed under the table)."""

    rows: list[dict]
    caption: str

    def __repr__(self) -> str:
        def fmt(x, spec):
            width = int(spec.split(".")[0])
            return format(x, spec) if isinstance(x, (int, float)) else "-".rjust(width)
        head = (f"{'shape':<15} {'dtype':<9} {'backend':<34} {'fwd ms':>9} {'fwd+bwd ms':>11} "
                f"{'peak MiB':>9}  {'o vs loop':>9}  run")
        lines = [head, "-" * len(head)]
        for r in self.rows:
            name = LABELS.get(r["backend"], r["backend"])
            lines.append(f"{r['shape']:<15} {r['dtype']:<9} {name:<34}"
                         f" {fmt(r['fwd_ms'], '9.3f')} {fmt(r['fwdbwd_ms'], '11.2f')}"
                         f" {fmt(r['peak_mib'], '9.1f')}  {fmt(r['o_rel_err'], '9.0e')}"
                         f"  [{r.get('run', '?')}]")
        return "\n".join(lines + ["", self.caption])


def results_table(reports: list[dict]) -> Table:
    """One row per (shape, dtype, backend) of every report; a later report's row replaces
    an earlier one's for the same backend and shape, so rows of one shape may come from
    different runs: each names its run. Rows are ordered by shape, dtype and backend."""
    reports = [r for r in reports if r["shapes"]]  # a sweep-only run has no rows here
    rows: dict[tuple, dict] = {}
    shapes, dtypes = {}, {}  # order of first appearance
    for i, report in enumerate(reports):
        for entry in report["shapes"].values():
            shape = f"B{entry['B']} T{entry['T']} H{entry['H']}"
            shapes.setdefault(shape, len(shapes))
            dtypes.setdefault(entry["dtype"], len(dtypes))
            for name, res in entry["results"].items():
                rows[(shape, entry["dtype"], name)] = {
                    "shape": shape, "dtype": entry["dtype"], "backend": name,
                    "fwd_ms": res.get("fwd_ms"), "fwdbwd_ms": res.get("fwdbwd_ms"),
                    "peak_mib": res.get("peak_mib"),
                    "o_rel_err": entry["checks"].get(name, {}).get("o"),
                    "file": report["environment"]["file"], "run": _letter(i)}
    order = list(LABELS)
    def rank(row):
        return (shapes[row["shape"]], dtypes[row["dtype"]],
                order.index(row["backend"]) if row["backend"] in order else len(order))
    return Table(sorted(rows.values(), key=rank), run_caption(reports, letters=True))


def latest_run(reports: list[dict], key: str, backend: str | None = None) -> dict:
    """The most recent report with results at shape ``key`` (and for ``backend``, if given).
    Raises KeyError if there is none."""
    for report in reversed(reports):
        results = report["shapes"].get(key, {}).get("results", {})
        if results and (backend is None or backend in results):
            return report
    raise KeyError(f"no report has shape {key!r}" + (f" with {backend!r}" if backend else ""))


def speedup_figure(reports: list[dict], key: str = "B4_T4096_H40_float32") -> Figure:
    """Forward and forward + backward time (ms, log scale) of every backend measured at one
    shape in the latest run that has it (:func:`latest_run`; one run, so that every ratio
    compares times taken together), beside section 6.1's predicted 13.1 s loop and 1.6 ms
    kernel (hatched) and the time a device copy of the forward's minimum bytes takes. Each
    bar is labelled with its time and its speed-up over that run's eager loop."""
    report = latest_run(reports, key)
    entry = report["shapes"][key]
    results = entry["results"]
    doc = document_launches(entry["B"], entry["T"], entry["H"])
    copy_gbps = report["environment"].get("copy_GBps")
    # rows: (label, forward ms, forward+backward ms, colour, from the document?)
    rows = [(f"document: {doc['loop_launches']:,} launches x 10 µs", doc["loop_s"] * 1e3, None,
             "white", True)]
    rows += [(LABELS[n], results[n].get("fwd_ms"), results[n].get("fwdbwd_ms"), _COLORS[n],
              False) for n in LABELS if n in results]
    rows.append((f"document: {doc['kernel_launches']} launches x 10 µs", doc["kernel_ms"], None,
                 "white", True))
    if copy_gbps and entry.get("bytes_min_fwd"):
        rows.append(("device copy of the forward's bytes",
                     entry["bytes_min_fwd"] / copy_gbps / 1e6, None, "#bbbbbb", False))
    eager = results.get("eager", {})
    fig = Figure(figsize=(11, 4.8), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, column, metric, title in ((axes[0], 1, "fwd_ms", "forward"),
                                      (axes[1], 2, "fwdbwd_ms", "forward + backward")):
        for y, row in enumerate(rows):
            ms, color, documented = row[column], row[3], row[4]
            if not ms:
                continue
            ax.barh(y, ms, color=color, edgecolor="k" if documented else color,
                    hatch="//" if documented else None)
            ref = eager.get(metric)
            measured = not documented and row[0] != LABELS["eager"]
            speedup = f"  ({ref / ms:,.0f}x)" if ref and measured else ""
            text = f"{ms:,.0f}" if ms >= 100 else f"{ms:.3g}"
            ax.text(ms * 1.15, y, f"{text} ms{speedup}", va="center", fontsize=7)
        ax.set_xscale("log")
        ax.set_xlim(right=max(r[column] or 0 for r in rows) * 60)
        ax.set_xlabel("milliseconds (log)")
        ax.set_title(f"{title}; (Nx) = speed-up over the measured eager loop", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(rows)))
    axes[0].set_yticklabels([r[0] for r in rows], fontsize=7)
    axes[0].invert_yaxis()
    fig.suptitle(f"GDN recurrence, B = {entry['B']}, T = {entry['T']:,}, H = {entry['H']}, "
                 f"S = {entry['S']}, D = {entry['D']}, {entry['dtype']}; hatched: the "
                 f"document's launch arithmetic\n" + run_caption([report]), fontsize=7)
    return fig


def gpu_results(paths=None, key: str = "B4_T4096_H40_float32") -> tuple[Table, Figure]:
    """The committed GPU measurements: (table of every shape and backend, speed-up figure at
    ``key``). Raises FileNotFoundError if no results file is committed."""
    reports = load_reports(paths)
    return results_table(reports), speedup_figure(reports, key)


# --------------------------------------------------------------------------------------
# The sweep over T
# --------------------------------------------------------------------------------------
class Text(str):
    """A string that shows itself as plain text (no quotes) as a cell's last expression."""

    def __repr__(self) -> str:
        return str(self)


_SHORT = {"eager": "eager", "triton": "recurrent", "chunk": "chunk torch",
          "triton_chunk": "Triton chunk", "fla_chunk": "fla chunk",
          "triton_kernel": "rec. no checks", "fla_fused_recurrent": "fla recurrent"}


def sweep_table(report: dict | None = None) -> Text:
    """The time-against-T sweep as text: forward / forward + backward ms of every backend
    at each T, the fastest forward + backward, and the chunked Triton kernel's forward +
    backward against the recurrent kernel ("chunk/rec") and against fla chunk_gla
    ("chunk/fla"), and its forward against a device copy of the minimum bytes.
    ``report``: the latest run with a ``sweep_T`` section if not given."""
    if report is None:
        report = next((r for r in reversed(load_reports()) if r.get("sweep_T")), None)
        if report is None:
            raise KeyError("no report has a sweep_T section")
    sweep = report["sweep_T"]
    names = [n for n in _SHORT if n in sweep["results"]]
    width = max(len(_SHORT[n]) for n in names) + 2
    head = (f"{'T':>7} " + "".join(f"{_SHORT[n]:>{width}}" for n in names)
            + f"  {'fastest f+b':<13}{'chunk/rec':>9} {'chunk/fla':>9} {'fwd/copy':>8}")
    lines = [f"B = {sweep['B']}, H = {sweep['H']}, S = {sweep['S']}, D = {sweep['D']}, "
             f"{sweep['dtype']}: ms, forward / forward + backward", head, "-" * len(head)]
    itemsize = {"float32": 4, "bfloat16": 2, "float16": 2}[sweep["dtype"]]

    def at(name, key, i):
        values = sweep["results"].get(name, {}).get(key) or []
        return values[i] if i < len(values) else None

    def ratio(x, y):
        return f"{x / y:.2f}x" if x and y else "-"

    for i, T in enumerate(sweep["T"]):
        cells = []
        for n in names:
            f, fb = at(n, "fwd_ms", i), at(n, "fwdbwd_ms", i)
            cells.append(f"{_ms(f)} / {_ms(fb)}".rjust(width))
        timed = {n: at(n, "fwdbwd_ms", i) for n in names if at(n, "fwdbwd_ms", i)}
        fastest = _SHORT[min(timed, key=timed.get)] if timed else "-"
        tc = at("triton_chunk", "fwdbwd_ms", i)
        copy_ms = (sweep["B"] * T * sweep["H"] * (2 * sweep["D"] + 2 * sweep["S"] + 1) * itemsize
                   / report["environment"]["copy_GBps"] / 1e6)
        fwd_copy = at("triton_chunk", "fwd_ms", i)
        lines.append(f"{T:>7,} " + "".join(cells) + f"  {fastest:<13}"
                     f"{ratio(tc, at('triton', 'fwdbwd_ms', i)):>9} "
                     f"{ratio(tc, at('fla_chunk', 'fwdbwd_ms', i)):>9} "
                     + (f"{fwd_copy / copy_ms:7.1f}x" if fwd_copy else f"{'-':>8}"))
    return Text("\n".join(lines + ["", run_caption([report])]))


def _ms(x) -> str:
    if not x:
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"
