"""The book's stored outputs are the same on every CPU: strict nbval passes with PyTorch's
scalar kernels (``ATEN_CPU_CAPABILITY=default``, as on an older CPU) and with two threads,
not only with the machine's own vector kernels on one thread (the main test run).

A chapter prints verdicts against stated tolerances, never the digits of a rounding error:
those change with the CPU's vector width and the number of threads."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((REPO / "book").glob("[0-9][0-9]_*.ipynb"))

# a rounding error's digits: d.dde-05 .. d.dde-19 (values such as 1.0e-06 are allowed
# where a chapter prints a constant; they are listed here with the reason)
ROUNDING = re.compile(r"\b\d\.\d+e-(?:0[5-9]|1\d)\b")
CONSTANTS = {
    "1.0e-06",  # ModelConfig.norm_eps, printed by the configuration chapter
    "2.06e-09",  # exp(-0.5 * 40), the slowest head's decay per step in the GDN chapter
}


def _text(output) -> str:
    return "".join(output.get("text", "")) + "".join(output.get("data", {}).get("text/plain", ""))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_no_printed_rounding_error(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "nbval-ignore-output" in cell.metadata.get("tags", []):
            continue
        found = {m for o in cell.get("outputs", []) for m in ROUNDING.findall(_text(o))}
        assert not found - CONSTANTS, (f"{path.name} cell {i} prints {sorted(found)}: print a "
                                       "verdict against a stated tolerance instead")


@pytest.mark.slow
@pytest.mark.parametrize("env", [{"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"},
                                 {"OMP_NUM_THREADS": "2"}],
                         ids=["scalar-kernels-1-thread", "native-2-threads"])
def test_book_validates_on_another_cpu_path(env):
    run_env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY",)}
    run_env.update(env)
    cmd = [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider",
           "-p", "no:xdist", "--nbval", "--nbval-current-env", "--nbval-sanitize-with",
           str(REPO / "book" / "nbval_sanitize.cfg"), *map(str, CHAPTERS)]
    result = subprocess.run(cmd, cwd=REPO, env=run_env, capture_output=True, text=True,
                            timeout=1500)
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
    assert result.returncode == 0, "\n".join(failed) + "\n" + _failures(result.stdout)


def _failures(stdout: str, keep: int = 6000) -> str:
    """The report's FAILURES section (each failed cell's traceback), its last ``keep``
    characters: what went wrong, not only where."""
    start = stdout.find("= FAILURES =")
    end = stdout.find("short test summary info", max(start, 0))
    section = stdout[start:end] if start >= 0 else stdout
    return section[-keep:]
