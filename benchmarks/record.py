"""What every benchmark writes beside its numbers: when, how, which commit, where, with what.

    stamp(script, argv)    date (UTC, to the minute), the command that runs it again from
                           the repository root, and git_commit
    hardware(device)       platform, host, CPU, cores, torch threads, load; the GPU on CUDA
    versions(*packages)    python, torch, CUDA, Triton, and each distribution asked for
                           (None where it is not installed; "fla-core" is keyed "fla_core")
    header(device, script, argv, packages)   {date, command, git_commit, hardware: {...}}
    out_path(name)         benchmarks/out/<name>: where a run lands by default (ignored by git)

A script that keeps one flat "environment" section merges the first three instead.
git_commit prefers the HYMO_GIT_COMMIT environment variable: the GPU machine's copy of the
tree carries a stale .git, so whoever sends the tree sends the commit it is.
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
# where a run lands unless --out says otherwise: git ignores the folder; a run worth keeping
# is copied into book/results/ and added to its index (book/results/README.md says how)
OUT = ROOT / "benchmarks" / "out"


def out_path(name: str) -> Path:
    """``benchmarks/out/<name>``, with the folder made."""
    OUT.mkdir(parents=True, exist_ok=True)
    return OUT / name


def git_commit() -> str | None:
    """HYMO_GIT_COMMIT if set, else git's HEAD; None unless it is a full 40-digit hash."""
    commit = os.environ.get("HYMO_GIT_COMMIT", "")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True,
                                    capture_output=True).stdout.strip()
        except OSError:  # no git on this machine
            commit = ""
    return commit if len(commit) == 40 else None


def command(script, argv: list[str] | None = None) -> str:
    """``python3 <script> <argv>``, the script relative to the repository root when it is
    inside it; argv defaults to this process's arguments."""
    argv = sys.argv[1:] if argv is None else list(argv)
    path = Path(script).resolve()
    if path.is_relative_to(ROOT):
        path = path.relative_to(ROOT)
    return "python3 " + shlex.join([str(path), *argv])


def stamp(script, argv: list[str] | None = None) -> dict:
    now = datetime.datetime.now(datetime.timezone.utc)
    return {"date": f"{now:%Y-%m-%d %H:%M} UTC", "command": command(script, argv),
            "git_commit": git_commit()}


def hardware(device) -> dict:
    device = torch.device(device)
    info = {"platform": platform.platform(), "host": platform.node(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    if hasattr(os, "getloadavg"):  # a shared machine's other work slows a CPU run
        info["load_average_1_5_15min"] = [round(x, 2) for x in os.getloadavg()]
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    sm_count=props.multi_processor_count,
                    capability=list(torch.cuda.get_device_capability(device)))
    return info


def versions(*packages: str) -> dict:
    info = {"python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda}
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    for name in packages:
        try:
            info[name.replace("-", "_")] = metadata.version(name)
        except metadata.PackageNotFoundError:
            info[name.replace("-", "_")] = None
    return info


def header(device, script, argv: list[str] | None = None, packages=()) -> dict:
    """The stamp, then ``hardware``: the machine and the versions together."""
    return {**stamp(script, argv), "hardware": {**hardware(device), **versions(*packages)}}
