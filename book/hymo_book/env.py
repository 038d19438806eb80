"""Environment check for the book (chapter 00).

``check_environment()`` looks at what this Python can import and what hardware it sees,
and returns an :class:`EnvReport`: a table with one row per check, a status
(``ok``, ``missing``, ``too old``, ``note``), a detail and what to do about it. The table
prints as text and renders as HTML in a notebook.

Three ways to run a Triton kernel, and how we tell which applies:

* **compiled**: an NVIDIA GPU is visible to PyTorch and ``triton`` imports;
* **interpreted**: no GPU, but ``TRITON_INTERPRET=1`` is set: Triton runs the kernel
  body in NumPy on the CPU (correct, but around a millisecond per program step). It must
  be set *before* the module defining the kernels is imported;
* **not available**: no ``triton`` package (it ships for Linux only), or no GPU and no
  interpreter. hymo_mini then uses its PyTorch paths (``backend="chunk_torch"`` or ``"naive"``).

With ``run_kernel=True`` the check also launches a 13-element Triton kernel and compares
its result with PyTorch, so "will run" is tested rather than guessed.

The printed text carries no timings or addresses; installed versions appear as
``version X.Y.Z``, which the book's nbval sanitize file masks. The table is a
:class:`hymo_mini.analysis.tables.TextTable`.
"""

from __future__ import annotations

import html
import importlib
import os
import platform
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hymo_mini.analysis.tables import TextTable

if TYPE_CHECKING:  # the kernel's annotation stays a string until Triton reads it
    import triton.language as tl

__all__ = ["MINIMUM_VERSIONS", "EnvCheck", "EnvReport", "check_environment",
           "parse_version", "triton_mode", "use_triton_interpreter_if_no_gpu"]

# import name -> (distribution name, minimum version); the same floors as pyproject.toml
# (tests/book/test_book_env.py checks that the two agree)
MINIMUM_VERSIONS: dict[str, tuple[str, str]] = {
    "torch": ("torch", "2.11"),
    "triton": ("triton", "3.2"),
    "einops": ("einops", "0.8"),
    "numpy": ("numpy", "1.26"),
    "yaml": ("pyyaml", "6.0"),
    "matplotlib": ("matplotlib", "3.8"),
    "ipywidgets": ("ipywidgets", "8.1"),
    "tqdm": ("tqdm", "4.66"),
    "safetensors": ("safetensors", "0.4"),
}
MINIMUM_PYTHON = "3.10"

_ADVICE_INSTALL = "run: python3 -m pip install -e '.[dev]' in the repository"


def parse_version(text: str) -> tuple[int, ...]:
    """The leading numbers of a version string: '2.13.0+cpu' -> (2, 13, 0)."""
    match = re.match(r"\s*(\d+(?:\.\d+)*)", str(text))
    if not match:
        raise ValueError(f"not a version string: {text!r}")
    return tuple(int(part) for part in match.group(1).split("."))


def _at_least(installed: str, minimum: str) -> bool:
    have, need = parse_version(installed), parse_version(minimum)
    width = max(len(have), len(need))
    return have + (0,) * (width - len(have)) >= need + (0,) * (width - len(need))


@dataclass(frozen=True)
class EnvCheck:
    name: str
    status: str  # "ok", "missing", "too old", "note"
    detail: str
    advice: str = ""

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "note")


@dataclass(frozen=True)
class EnvReport:
    """The checks in order. Prints as a text table; renders as HTML in Jupyter."""

    checks: tuple[EnvCheck, ...]

    @property
    def ok(self) -> bool:
        """True when everything the book needs is present (notes do not count)."""
        return all(check.ok for check in self.checks)

    def __getitem__(self, name: str) -> EnvCheck:
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(f"no check named {name!r}; checks: {[c.name for c in self.checks]}")

    def _table(self) -> TextTable:
        return TextTable(("check", "status", "detail", "what to do"),
                         [(c.name, c.status, c.detail, c.advice or "-") for c in self.checks],
                         align="llll")

    def _verdict(self) -> str:
        return "ready" if self.ok else "something is missing: see 'what to do'"

    def __str__(self) -> str:
        return f"{self._table()}\n\noverall: {self._verdict()}"

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return f"{self._table()._repr_html_()}<p>overall: <b>{html.escape(self._verdict())}</b></p>"


def _package_check(module_name: str) -> EnvCheck:
    dist, minimum = MINIMUM_VERSIONS[module_name]
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        if module_name == "triton":
            return EnvCheck(dist, "missing", f"needs >= {minimum}",
                            "Linux: pip install triton; elsewhere the kernel chapter only "
                            "reads, and the GDN uses its PyTorch paths")
        return EnvCheck(dist, "missing", f"needs >= {minimum}", _ADVICE_INSTALL)
    version = getattr(module, "__version__", "0")
    detail = f"version {version} (needs >= {minimum})"
    if not _at_least(version, minimum):
        return EnvCheck(dist, "too old", detail, f"python3 -m pip install -U '{dist}>={minimum}'")
    return EnvCheck(dist, "ok", detail)


def triton_mode() -> str:
    """'compiled', 'interpreted' or 'unavailable' for Triton kernels in this process."""
    try:
        importlib.import_module("triton")
    except ImportError:
        return "unavailable"
    import torch

    if os.environ.get("TRITON_INTERPRET") == "1":  # wins even on a GPU machine
        return "interpreted"
    return "compiled" if torch.cuda.is_available() else "unavailable"


def use_triton_interpreter_if_no_gpu() -> bool:
    """Set ``TRITON_INTERPRET=1`` when PyTorch sees no GPU; returns whether it is set.

    Call it before anything imports hymo_mini's Triton modules (first cell of a notebook).
    """
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    return os.environ.get("TRITON_INTERPRET") == "1"


def _add_one(p_x, p_out, n, BLOCK: tl.constexpr):
    """out = x + 1, one block per program: the smallest real kernel. Left undecorated
    here and decorated when the check runs, so TRITON_INTERPRET is read at that moment
    and importing this module does not import Triton."""
    import triton.language as tl

    o_x = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # [BLOCK]
    m_x = o_x < n  # [BLOCK]
    b_x = tl.load(p_x + o_x, mask=m_x)  # [BLOCK]
    tl.store(p_out + o_x, b_x + 1, mask=m_x)


def _kernel_smoke_test() -> str | None:
    """Launch a tiny Triton kernel; None on success, else the error in one line."""
    try:
        import torch
        import triton

        kernel = triton.jit(_add_one)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        x = torch.arange(13, dtype=torch.float32, device=device)
        out = torch.empty_like(x)
        kernel[(2,)](x, out, x.numel(), BLOCK=8)
        if not torch.equal(out.cpu(), x.cpu() + 1):
            return "the kernel ran but returned wrong values"
        return None
    except Exception as err:  # report, never raise: this is a diagnosis tool
        first_line = str(err).splitlines()[0] if str(err) else ""
        return f"{type(err).__name__}: {first_line}"


def check_environment(run_kernel: bool = False) -> EnvReport:
    """Inspect this Python: packages, device, and how Triton kernels will run."""
    checks = []
    py = platform.python_version()
    checks.append(EnvCheck(
        "python", "ok" if _at_least(py, MINIMUM_PYTHON) else "too old",
        f"version {py} (needs >= {MINIMUM_PYTHON})",
        "" if _at_least(py, MINIMUM_PYTHON) else "use Python 3.10 or newer"))
    for module_name in MINIMUM_VERSIONS:
        checks.append(_package_check(module_name))

    try:
        import torch
        has_gpu = torch.cuda.is_available()
        device = f"GPU: {torch.cuda.get_device_name(0)}" if has_gpu else "CPU only"
        checks.append(EnvCheck("device", "note", device,
                               "" if has_gpu else "fine: every chapter is sized for a 2-core CPU"))
    except ImportError:
        has_gpu = False

    mode = triton_mode()
    advice = {
        "compiled": "",
        "interpreted": "fine for the book's small shapes; slow for long sequences",
        "unavailable": ("set os.environ['TRITON_INTERPRET'] = '1' before importing "
                        "hymo_mini's Triton modules (or call "
                        "use_triton_interpreter_if_no_gpu())"),
    }[mode]
    if mode == "unavailable" and _package_check("triton").status == "missing":
        advice = ("the GDN runs backend='chunk_torch' or 'naive' (what 'auto' picks without "
                  "Triton); kernel cells cannot run")
    detail = {"compiled": "compiled for the GPU", "interpreted": "interpreted (TRITON_INTERPRET=1)",
              "unavailable": "will not run"}[mode]
    checks.append(EnvCheck("triton kernels", "ok" if mode != "unavailable" else "missing",
                           detail, advice))
    if run_kernel and mode != "unavailable":
        error = _kernel_smoke_test()
        checks.append(EnvCheck("kernel smoke test", "ok" if error is None else "missing",
                               "a 13-element Triton kernel matches PyTorch" if error is None
                               else error,
                               "" if error is None else "see PITFALLS: Triton on CPU"))
    return EnvReport(tuple(checks))
