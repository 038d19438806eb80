"""The project's files stay in step with each other: environment.yml with pyproject.toml,
CI with the README's test command, the book's index with the notebooks in book/."""

import re
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _normalise(requirement: str) -> tuple[str, str]:
    """('package-name', 'specifier;marker') with PEP 503 names and no spaces."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9_.\-]*)(.*)$", requirement)
    assert match, f"not a requirement: {requirement!r}"
    name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
    rest = re.sub(r"\s+", "", match.group(2)).replace('"', "'")
    return name, rest


def _environment() -> dict:
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def test_environment_yml_header():
    env = _environment()
    assert env["name"] == "hymo-mini"
    assert env["channels"] == ["conda-forge"]
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    python = [d for d in conda if d.startswith("python")]
    assert python == ["python" + _pyproject()["project"]["requires-python"]]
    assert "pip" in conda


def test_environment_yml_pip_section_matches_pyproject():
    env = _environment()
    sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(sections) == 1, "environment.yml needs exactly one pip: section"
    pip = sections[0]
    editable = [line for line in pip if line.startswith("-e")]
    assert len(editable) == 1, f"one editable install of the package expected, got {editable}"
    if editable[0].replace(" ", "") == "-e.[dev]":
        return  # pip resolves pyproject's own lists: nothing can drift
    assert editable[0].replace(" ", "") == "-e.", editable
    project = _pyproject()["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["dev"]
    listed = [line for line in pip if not line.startswith("-")]
    assert sorted(map(_normalise, listed)) == sorted(map(_normalise, wanted))


def test_installed_torch_meets_the_declared_floor():
    """pyproject.toml's dependency line is the one place the torch floor is declared (the
    lowest torch the package is run on: 2.11 on the GPU machine); environment.yml asks for the
    same, and the torch running these tests satisfies it."""
    import torch
    from hymo_book.env import parse_version

    lines = [d for d in _pyproject()["project"]["dependencies"] if _normalise(d)[0] == "torch"]
    assert len(lines) == 1, f"pyproject.toml should list torch once, got {lines}"
    floor = re.fullmatch(r">=([0-9.]+)", _normalise(lines[0])[1])
    assert floor, f"pyproject.toml's torch line should be 'torch>=X.Y', got {lines[0]!r}"
    pip = next(d["pip"] for d in _environment()["dependencies"] if isinstance(d, dict))
    listed = [_normalise(x) for x in pip if not x.startswith("-")]
    assert [x for x in listed if x[0] == "torch"] in ([], [("torch", floor.group(0))]), (
        "environment.yml asks for another torch than pyproject.toml")
    assert parse_version(torch.__version__) >= parse_version(floor.group(1)), (
        f"torch {torch.__version__} is older than the declared torch>={floor.group(1)}")


def _readme_test_command() -> str:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```(?:bash|sh|console)?\n(.*?)```", readme, flags=re.S)
    commands = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    tests = [c for c in commands if "pytest" in c]
    assert tests, "README.md shows no pytest command"
    return tests[0]


def test_ci_runs_the_readme_test_command():
    command = _readme_test_command()
    assert command == "python3 -m pytest"
    ci_lines = [line.split("#")[0].strip() for line in (ROOT / ".ci" / "run").read_text()
                .splitlines()]
    assert command in ci_lines, f".ci/run does not run the README's {command!r}"


def test_pytest_runs_notebooks_in_strict_mode():
    options = _pyproject()["tool"]["pytest"]["ini_options"]
    addopts = options["addopts"].split()
    assert "--nbval" in addopts and "--nbval-lax" not in addopts
    assert "--dist" in addopts and addopts[addopts.index("--dist") + 1] == "loadfile"
    sanitize = addopts[addopts.index("--nbval-sanitize-with") + 1]
    assert (ROOT / sanitize).is_file()
    assert "book" in options["testpaths"]


def _notebooks() -> list[Path]:
    return sorted(p for p in BOOK.glob("*.ipynb"))


def test_every_notebook_is_listed_in_the_book_readme():
    index = (BOOK / "README.md").read_text()
    missing = [p.name for p in _notebooks() if f"({p.name})" not in index]
    assert not missing, f"book/README.md does not link {missing}"


def test_every_notebook_link_in_the_book_readme_exists():
    index = (BOOK / "README.md").read_text()
    links = re.findall(r"\]\(([^)]+\.ipynb)\)", index)
    assert links, "book/README.md links no chapter"
    assert [link for link in links if not (BOOK / link).is_file()] == []


def test_chapters_are_numbered_and_in_order():
    index = (BOOK / "README.md").read_text()
    numbers = [int(n) for n in re.findall(r"^\|\s*(\d\d)\s*\|", index, flags=re.M)]
    assert numbers == sorted(numbers) and len(numbers) == len(set(numbers))
    for path in _notebooks():
        assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", path.name), path.name


def test_the_license_is_stated_the_current_way():
    """An SPDX expression and the file it names (PEP 639), not the deprecated table."""
    project = _pyproject()["project"]
    assert project["license"] == "MIT", project["license"]
    assert project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


@pytest.mark.slow
def test_the_wheel_builds_without_warnings(tmp_path):
    import os
    import shutil
    import subprocess
    import sys

    source = tmp_path / "source"  # a copy, so that the build leaves nothing in the repository
    shutil.copytree(ROOT / "hymo_mini", source / "hymo_mini",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps",
                            "--no-build-isolation", "-w", str(tmp_path / "wheels"), str(source)],
                           capture_output=True, text=True, env=env, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    warnings = [line for line in (built.stdout + built.stderr).splitlines()
                if "warning" in line.lower()]
    assert not warnings, "\n".join(warnings)


def test_benchmarks_holds_scripts_and_one_readme():
    """Runs land in the ignored benchmarks/out/; what is kept is a file of book/results/."""
    import ast

    bench = ROOT / "benchmarks"
    tracked = [p for p in bench.iterdir() if p.is_file()]
    others = [p.name for p in tracked if p.suffix not in (".py", ".sh") and p.name != "README.md"]
    assert not others, f"benchmarks/ holds scripts only (runs go to book/results/): {others}"
    readme = (bench / "README.md").read_text()
    for path in tracked:
        if path.suffix == ".py":
            assert ast.get_docstring(ast.parse(path.read_text())), f"{path.name}: no docstring"
        if path.suffix in (".py", ".sh"):
            assert f"`{path.name}`" in readme, f"benchmarks/README.md does not list {path.name}"
    assert "/benchmarks/out/" in (ROOT / ".gitignore").read_text().splitlines()
