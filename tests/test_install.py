"""A regular (non-editable) install works on its own: build the wheel, install it into a
fresh virtual environment that reuses the dependencies of the environment running the
tests (the system's Python or a virtual environment), and run the command line from a
folder outside the repository."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _run(cmd, cwd, env=None):
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    tail = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert result.returncode == 0, f"{cmd} failed:\n{tail}"
    return result.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python of the new environment, its bin folder, a work folder outside the repo)."""
    tmp = tmp_path_factory.mktemp("install")
    source = tmp / "source"  # a copy, so that the build leaves nothing in the repository
    shutil.copytree(REPO / "hymo_mini", source / "hymo_mini",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    wheels = tmp / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
          "-w", str(wheels), str(source)], cwd=tmp)
    (wheel,) = wheels.glob("hymo_mini-*.whl")
    env_dir = tmp / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # the running environment's packages, after the new one's own (a .pth line adds a folder
    # to sys.path without running that folder's .pth files, so an editable hymo_mini there
    # stays out of sight)
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    own = Path(_run([str(python), "-c", where], cwd=tmp).strip())
    theirs = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
              *site.getsitepackages()}
    if site.ENABLE_USER_SITE:
        theirs.add(site.getusersitepackages())
    (own / "running_environment.pth").write_text(
        "".join(f"{folder}\n" for folder in sorted(theirs) if Path(folder).is_dir()))
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
          "--no-index", str(wheel)], cwd=tmp, env=_env(env_dir / "bin"))  # (pip would take
    # a hymo_mini on PYTHONPATH for the installed one)
    work = tmp / "elsewhere"
    work.mkdir()
    return python, env_dir / "bin", work


def _env(bin_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    return env


def test_the_installed_copy_is_the_one_imported(installed):
    python, bin_dir, work = installed
    where = _run([str(python), "-c", "import hymo_mini; print(hymo_mini.__file__)"], work,
                 _env(bin_dir))
    assert Path(where.strip()).is_relative_to(bin_dir.parent), where
    assert not Path(where.strip()).is_relative_to(REPO), where


def test_params_and_the_loss_curve_run_from_anywhere(installed):
    python, bin_dir, work = installed
    text = _run([str(bin_dir / "hymo-mini"), "params", "hymo_750m"], work, _env(bin_dir))
    assert "Total" in text
    draw = ("from hymo_mini.train.curves import loss_curve, save_figure; "
            "save_figure(loss_curve({'step': [1, 2, 3], 'loss': [5.0, 4.0, 3.5]}), 'loss.png')")
    _run([str(python), "-c", draw], work, _env(bin_dir))
    assert (work / "loss.png").stat().st_size > 0
