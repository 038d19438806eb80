"""The committed GPU runs of chapter 21 (``book/results/gdn_*.json``), as tables.

:func:`load_reports` reads the reports ``benchmarks/gdn.py`` wrote on the GPU machine
(through :func:`hymo_book.results.load_result`, so old backend names read as new ones);
:func:`latest_report` and :func:`latest_run` pick the run a figure or ratio should use;
:func:`results_table` merges the runs into one table whose rows name their run, and
:func:`sweep_table` reads the time-against-T sweep. The figures are in
:mod:`hymo_book.plots.kernel_benchmarks`. Every table names the GPU, the date and the command of its
run. Nothing here measures time.
"""

from __future__ import annotations

from hymo_book import results
from hymo_book.results import CaptionedTable, run_caption
from hymo_book.style import BACKENDS, backend_style
from hymo_mini.analysis.tables import TextTable

__all__ = ["load_reports", "latest_report", "latest_run", "letter", "runs_caption",
           "results_table", "sweep_table", "ITEMSIZE"]

ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}


def load_reports(paths=None) -> list[dict]:
    """The benchmark reports, oldest first (by their recorded date): ``paths`` if given, else
    every ``gdn_*.json`` in the results folder. Raises FileNotFoundError if there is none."""
    files = list(paths) if paths is not None else results.list_results("gdn_*.json")
    if not files:
        raise FileNotFoundError(
            f"no GDN benchmark results ({results.RESULTS_DIR / 'gdn_*.json'}): run "
            f"`{results.producer('gdn_<gpu>_<date>.json')}` on a GPU machine and commit the JSON")
    reports = []
    for file in files:
        report = results.load_result(file, need=("environment",))
        if "shapes" not in report:
            raise ValueError(f"{report['file']} is not a benchmarks/gdn.py report (no 'shapes')")
        reports.append(report)
    return sorted(reports, key=lambda r: r["environment"].get("date", ""))


def latest_report(section: str, reports: list[dict] | None = None) -> dict:
    """The most recent report whose ``section`` ("shapes" or "sweep_T") is not empty."""
    reports = load_reports() if reports is None else reports
    for report in reversed(reports):
        if report.get(section):
            return report
    raise KeyError(f"no report has a {section} section")


def latest_run(reports: list[dict], key: str, backend: str | None = None) -> dict:
    """The most recent report with results at shape ``key`` (and for ``backend``, if given).
    Raises KeyError if there is none."""
    for report in reversed(reports):
        found = report["shapes"].get(key, {}).get("results", {})
        if found and (backend is None or backend in found):
            return report
    raise KeyError(f"no report has shape {key!r}" + (f" with {backend!r}" if backend else ""))


def letter(i: int) -> str:
    return "abcdefghijklmnopqrstuvwxyz"[i % 26]


def runs_caption(reports: list[dict], letters: bool = False) -> str:
    """The caption of each report, marked [a], [b], ... in order if ``letters``."""
    return "\n".join(run_caption(r, mark=f"[{letter(i)}] " if letters else "")
                     for i, r in enumerate(reports))


def _num(x, spec: str) -> str:
    return format(x, spec) if isinstance(x, (int, float)) else "-"


def results_table(reports: list[dict]) -> CaptionedTable:
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
                    "o_rel_err": entry.get("checks", {}).get(name, {}).get("o"),
                    "file": report["file"], "run": letter(i)}
    order = list(BACKENDS)

    def rank(row):
        return (shapes[row["shape"]], dtypes[row["dtype"]],
                order.index(row["backend"]) if row["backend"] in order else len(order))

    ordered = sorted(rows.values(), key=rank)
    table = TextTable(
        ("shape", "dtype", "backend", "fwd ms", "fwd+bwd ms", "peak MiB", "o vs loop", "run"),
        [(r["shape"], r["dtype"], backend_style(r["backend"]).label, _num(r["fwd_ms"], ".3f"),
          _num(r["fwdbwd_ms"], ".2f"), _num(r["peak_mib"], ".1f"), _num(r["o_rel_err"], ".0e"),
          f"[{r['run']}]") for r in ordered], align="lllrrrrl")
    return CaptionedTable(table, runs_caption(reports, letters=True), ordered)


def _ms(x) -> str:
    if not x:
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _ratio(x, y) -> str:
    return f"{x / y:.2f}x" if x and y else "-"


def sweep_table(report: dict | None = None) -> CaptionedTable:
    """The time-against-T sweep: forward / forward + backward ms of every backend at each T,
    the fastest forward + backward, the chunked Triton kernel's forward + backward against
    the recurrent kernel ("chunk/rec") and against fla chunk_gla ("chunk/fla"), and its
    forward against a device copy of the minimum bytes ("fwd/copy").
    ``report``: the latest run with a ``sweep_T`` section if not given."""
    report = latest_report("sweep_T") if report is None else report
    sweep = report["sweep_T"]
    names = [n for n in BACKENDS if n in sweep["results"]]
    itemsize = ITEMSIZE[sweep["dtype"]]
    gbps = report["environment"]["copy_GBps"]

    def at(name, key, i):
        values = sweep["results"].get(name, {}).get(key) or []
        return values[i] if i < len(values) else None

    rows = []
    for i, T in enumerate(sweep["T"]):
        cells = [f"{_ms(at(n, 'fwd_ms', i))} / {_ms(at(n, 'fwdbwd_ms', i))}" for n in names]
        timed = {n: at(n, "fwdbwd_ms", i) for n in names if at(n, "fwdbwd_ms", i)}
        fastest = min(timed, key=timed.get) if timed else "-"
        chunk = at("chunk_triton", "fwdbwd_ms", i)
        copy_ms = (sweep["B"] * T * sweep["H"] * (2 * sweep["D"] + 2 * sweep["S"] + 1)
                   * itemsize / gbps / 1e6)  # read v, b, c, g once, write o once
        fwd = at("chunk_triton", "fwd_ms", i)
        rows.append((f"{T:,}", *cells, fastest,
                     _ratio(chunk, at("recurrent_triton", "fwdbwd_ms", i)),
                     _ratio(chunk, at("fla_chunk", "fwdbwd_ms", i)),
                     f"{fwd / copy_ms:.1f}x" if fwd else "-"))
    title = (f"B = {sweep['B']}, H = {sweep['H']}, S = {sweep['S']}, D = {sweep['D']}, "
             f"{sweep['dtype']}: ms, forward / forward + backward")
    table = TextTable(("T", *names, "fastest f+b", "chunk/rec", "chunk/fla", "fwd/copy"), rows,
                      title=title, align="r" * (len(names) + 1) + "lrrr")
    return CaptionedTable(table, run_caption(report))
