"""The one reader of the measured runs the book shows (``book/results/``).

Every results file was written by a script in ``benchmarks/`` and committed; nothing here
measures. :func:`load_result` reads one (by file name in :data:`RESULTS_DIR`, or by path),
checks that it has the sections the caller needs, records its file name under ``"file"``
and, for a ``benchmarks/gdn.py`` report, renames the backends of runs made before the
rename to today's names (:data:`hymo_book.style.OLD_BACKEND_NAMES`). A missing file is an
error that names the path and the script that writes it. :func:`run_caption` gives the
line every table and figure carries: the file, the hardware, the versions, the date and the
command of the run. :func:`runs_read` lists what this process has read: the last cell of a
chapter that reads runs shows it, and the index (:mod:`hymo_book.results_index`) reads it
back.
"""

from __future__ import annotations

import html
import json
import textwrap
from pathlib import Path

from hymo_book.prose import Prose
from hymo_book.style import canonical_backend

__all__ = ["RESULTS_DIR", "PRODUCERS", "producer", "list_results", "load_result", "runs_read",
           "run_info", "run_caption", "CaptionedTable"]

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"
# every file of RESULTS_DIR this process read, in the order first read (for runs_read)
_READ: dict[str, None] = {}

# file-name prefix -> the script that writes such a file (the first match wins); the command
# of every kept run is in its own record and in the index (book/results/README.md)
PRODUCERS = {
    "chunk_kernel_only": ("python3 benchmarks/gdn.py --backends chunk_triton chunk_triton_kernel "
                          "fla_chunk --grad-check-max-T 0 --out benchmarks/out/{name}"),
    "gdn_": "python3 benchmarks/gdn.py --out benchmarks/out/{name}",
    "gla_": "python3 benchmarks/gdn.py --out benchmarks/out/{name}",
    "gated_delta": "python3 benchmarks/gated_delta.py --out benchmarks/out/{name}",
    "moe_dispatch": "python3 benchmarks/moe_dispatch.py --out benchmarks/out/{name}",
    "mqar_seeds": "python3 benchmarks/mqar_seeds.py --out benchmarks/out/{name}",
    "hybrid_text": "python3 benchmarks/hybrid_text.py --data data/python-docs --out "
                   "benchmarks/out/{name}",
    "mqar_": "python3 benchmarks/mqar.py --out benchmarks/out/{name}",
    "fsdp_": "python3 benchmarks/fsdp_one_gpu.py --out benchmarks/out/{name}",
    "train_step": "python3 benchmarks/train_step.py --out benchmarks/out/{name}",
    "optimizers": "python3 benchmarks/optimizers.py --out benchmarks/out/{name}",
    "train_": "python3 benchmarks/train_throughput.py --out benchmarks/out/{name}",
    "tree_ab": "python3 benchmarks/tree_ab.py benchmarks/out/{name}",
}


def producer(name: str) -> str:
    """The command that writes results file ``name`` (for error messages)."""
    for prefix, command in PRODUCERS.items():
        if name.startswith(prefix):
            return command.format(name=name)
    return "the script in benchmarks/ that writes it (benchmarks/README.md lists them)"


def _path(name_or_path: str | Path) -> Path:
    path = Path(name_or_path)
    return path if path.parent != Path(".") else RESULTS_DIR / path


def list_results(pattern: str = "*.json", directory: str | Path | None = None) -> list[Path]:
    """The results files matching ``pattern``, sorted by name."""
    return sorted(Path(directory or RESULTS_DIR).glob(pattern))


def _rename_backends(report: dict) -> None:
    """Old backend names -> new, in place, in a benchmarks/gdn.py report."""
    def renamed(d: dict) -> dict:
        return {canonical_backend(k): v for k, v in d.items()}

    if "backends" in report:
        report["backends"] = [canonical_backend(n) for n in report["backends"]]
    for entry in (report.get("shapes") or {}).values():
        entry["results"] = renamed(entry.get("results", {}))
        entry["checks"] = renamed(entry.get("checks", {}))
    if report.get("sweep_T"):
        report["sweep_T"]["results"] = renamed(report["sweep_T"].get("results", {}))


def load_result(name_or_path: str | Path, need: tuple[str, ...] = ()) -> dict:
    """The results file ``name_or_path`` (a bare name is looked up in RESULTS_DIR).

    ``need``: top-level sections it must have (present and not empty). Raises
    FileNotFoundError (naming the path and the command that writes the file) or
    ValueError (naming the file and the sections missing)."""
    path = _path(name_or_path)
    if not path.is_file():
        raise FileNotFoundError(f"no results file {str(path)!r}: run `{producer(path.name)}` "
                                "(on the machine the book's run names), copy it into "
                                "book/results/ and add it to the index (book/results/README.md)")
    report = json.loads(path.read_text())
    if not isinstance(report, dict):
        raise ValueError(f"{path} is not a results report (a JSON object)")
    missing = [key for key in need if not report.get(key)]
    if missing:
        raise ValueError(f"{path.name} has no {', '.join(map(repr, missing))} section: it is not "
                         f"the kind of run asked for (written by `{producer(path.name)}`?)")
    if "shapes" in report or "sweep_T" in report:
        _rename_backends(report)
    report["file"] = path.name
    _note_read(path)
    return report


def _note_read(path: Path) -> None:
    if path.resolve().parent == RESULTS_DIR.resolve():
        _READ.setdefault(path.name)


def runs_read() -> Prose:
    """The results files this process has read so far, sorted, one a line: a chapter's last
    cell shows them, so the index (``book/results/README.md``) knows which chapter reads
    which run, and strict nbval checks the list on every run."""
    names = sorted(_READ)
    head = (f"This chapter read {len(names)} run{'' if len(names) == 1 else 's'} of "
            "`book/results/` (its index says what each measures, on what, when and by which "
            "command):")
    return Prose("\n".join([head, "", *(f"- `{name}`" for name in names)]))


def run_info(report: dict) -> dict:
    """Where, with what and when a run was made: file, hardware, versions, date, command.

    Reads the layouts the benchmarks write (``environment``, or ``hardware`` and
    ``software``), that of the one-off scripts' runs (``env``) and that of tree_ab.py's first
    form (``gpu``, ``torch``, ``triton`` at the top)."""
    top = {k: report[k] for k in ("gpu", "torch", "triton") if isinstance(report.get(k), str)}
    meta = {**top, **report.get("software", {}), **report.get("hardware", {}),
            **report.get("env", {}), **report.get("environment", {})}
    if isinstance(meta.get("hardware"), dict):  # record.header's layout: environment.hardware
        meta = {**meta.pop("hardware"), **meta}
    if meta.get("gpu"):
        hardware = meta["gpu"]
    else:
        cpu = (meta.get("cpu") or meta.get("processor") or meta.get("device")
               or meta.get("machine") or "CPU")
        cores = meta.get("cores") or meta.get("cpu_count")
        threads = meta.get("torch_threads")
        hardware = cpu + (f", {cores} cores" if cores else "") + (
            f", {threads} torch thread{'s' if threads != 1 else ''}" if threads else "")
    versions = [f"{name} {meta[key]}" for name, key in
                (("torch", "torch"), ("Triton", "triton"), ("fla-core", "fla_core"))
                if meta.get(key)]
    return {"file": report.get("file", meta.get("file", "")), "hardware": hardware,
            "versions": ", ".join(versions), "date": report.get("date") or meta.get("date", "?"),
            "command": report.get("command") or meta.get("command", "?")}


def run_caption(report: dict, width: int | None = None, mark: str = "") -> str:
    """Two lines: ``file: hardware, versions, date`` and the command (wrapped at ``width``
    characters if given, so that it does not run past a figure); ``mark`` (e.g. "[a] ")
    goes in front."""
    info = run_info(report)
    head = ", ".join(x for x in (info["hardware"], info["versions"], info["date"]) if x)
    indent = "  " + " " * len(mark)
    command = info["command"]
    if width:
        command = textwrap.fill(command, width, subsequent_indent=indent + "  ",
                                break_on_hyphens=False)
    return f"{mark}{info['file']}: {head}\n{indent}{command}"


class CaptionedTable:
    """A :class:`hymo_mini.analysis.tables.TextTable` of measured values and, under it, the
    caption of the run(s) it came from; ``rows`` keeps the values themselves (dicts) for
    computing."""

    def __init__(self, table, caption: str, rows: list[dict] | None = None):
        self.table, self.caption, self.rows = table, caption, list(rows or [])

    def __str__(self) -> str:
        return f"{self.table}\n\n{self.caption}"

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return f"{self.table._repr_html_()}<pre>{html.escape(self.caption)}</pre>"
