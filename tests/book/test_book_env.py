"""The environment check of chapter 00 (hymo_book.env)."""

import importlib
import re
import sys
import types
from pathlib import Path

import pytest
import torch
from hymo_book import env

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]


def test_parse_version():
    assert env.parse_version("2.13.0+cpu") == (2, 13, 0)
    assert env.parse_version("3.9") == (3, 9)
    assert env.parse_version("6.0.3") == (6, 0, 3)
    with pytest.raises(ValueError, match="not a version"):
        env.parse_version("dev")
    assert env._at_least("2.5", "2.5.0") and env._at_least("2.13", "2.5")
    assert not env._at_least("1.25.2", "1.26")


def test_minimum_versions_match_pyproject():
    """The floors chapter 00 checks are the floors pyproject.toml installs."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = {}
    for line in deps:
        match = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*>=\s*([0-9.]+)", line)
        assert match, f"pyproject dependency without a >= floor: {line!r}"
        floors[match.group(1).lower()] = match.group(2)
    ours = {dist.lower(): version for dist, version in env.MINIMUM_VERSIONS.values()}
    assert ours == floors


def test_report_lists_every_check_and_is_deterministic():
    first, second = env.check_environment(), env.check_environment()
    names = [c.name for c in first.checks]
    assert names[0] == "python"
    for dist, _ in env.MINIMUM_VERSIONS.values():
        assert dist in names
    assert "device" in names and "triton kernels" in names
    assert str(first) == str(second) == repr(first)
    assert first._repr_html_() == second._repr_html_()
    assert "0x" not in str(first)
    assert first["torch"].status == "ok"
    assert f"version {torch.__version__}" in first["torch"].detail
    with pytest.raises(KeyError, match="no check named"):
        first["nonsense"]


def test_versions_are_masked_by_the_book_sanitizer():
    """The sanitize file turns every 'version X' into the same text."""
    cfg = (ROOT / "book" / "nbval_sanitize.cfg").read_text()
    patterns = re.findall(r"regex:\s*(.+)\nreplace:\s*(.*)", cfg)
    text = str(env.check_environment())
    for regex, replacement in patterns:
        text = re.sub(regex, replacement, text)
    assert not re.search(r"version \d", text), text


def test_triton_mode_follows_the_interpreter_switch(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert env.triton_mode() == "interpreted"
    monkeypatch.delenv("TRITON_INTERPRET")
    expected = "compiled" if torch.cuda.is_available() else "unavailable"
    assert env.triton_mode() == expected
    report = env.check_environment()
    if expected == "unavailable":
        assert report["triton kernels"].status == "missing"
        assert "TRITON_INTERPRET" in report["triton kernels"].advice
        assert not report.ok


def test_missing_and_old_packages_are_reported(monkeypatch):
    real_import = importlib.import_module

    def fake_import(name, *args, **kwargs):
        if name == "einops":
            raise ImportError("No module named 'einops'")
        if name == "tqdm":
            return types.SimpleNamespace(__version__="4.0.1")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(env.importlib, "import_module", fake_import)
    report = env.check_environment()
    assert report["einops"].status == "missing"
    assert "pip install" in report["einops"].advice
    assert report["tqdm"].status == "too old"
    assert "tqdm>=4.66" in report["tqdm"].advice
    assert not report.ok
    assert "something is missing" in str(report)
    html = report._repr_html_()
    assert html.startswith("<table") and "too old" in html


def test_triton_missing_means_kernels_unavailable(monkeypatch):
    real_import = importlib.import_module

    def no_triton(name, *args, **kwargs):
        if name == "triton":
            raise ImportError("No module named 'triton'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(env.importlib, "import_module", no_triton)
    assert env.triton_mode() == "unavailable"
    report = env.check_environment(run_kernel=True)
    assert report["triton"].status == "missing"
    assert "backend='chunk_torch'" in report["triton kernels"].advice
    assert "kernel smoke test" not in [c.name for c in report.checks]


def test_html_is_escaped():
    report = env.EnvReport((env.EnvCheck("<x>", "ok", "a & b"),))
    assert "&lt;x&gt;" in report._repr_html_() and "a &amp; b" in report._repr_html_()


def test_use_interpreter_if_no_gpu(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    on = env.use_triton_interpreter_if_no_gpu()
    assert on == (not torch.cuda.is_available())


@pytest.mark.triton
def test_kernel_smoke_test_runs():
    if "triton" not in sys.modules:
        pytest.importorskip("triton")
    if env.triton_mode() == "unavailable":
        pytest.skip("no GPU and no TRITON_INTERPRET")
    report = env.check_environment(run_kernel=True)
    assert report["kernel smoke test"].status == "ok", report["kernel smoke test"].detail
