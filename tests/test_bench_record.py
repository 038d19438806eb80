"""benchmarks/record.py, the header every benchmark writes: the commit sent in
HYMO_GIT_COMMIT wins over git's HEAD (the GPU machine's copy of the tree carries a stale
.git), the command runs again from the repository root, and the hardware and versions are
the ones the book's captions read."""

import json
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import record  # noqa: E402

SENT = "0123456789abcdef0123456789abcdef01234567"


def test_the_sent_commit_wins_and_only_a_full_hash_counts(monkeypatch):
    monkeypatch.setenv("HYMO_GIT_COMMIT", SENT)
    assert record.git_commit() == SENT
    monkeypatch.setenv("HYMO_GIT_COMMIT", "0123abc")  # a short hash names no one commit
    assert record.git_commit() is None
    monkeypatch.delenv("HYMO_GIT_COMMIT")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True,
                          capture_output=True).stdout.strip()
    assert record.git_commit() == (head if len(head) == 40 else None)


def test_the_command_runs_again_from_the_repository_root():
    script = ROOT / "benchmarks" / "gdn.py"
    line = record.command(script, ["--out", "a b.json", "--sweep-T"])
    assert line == "python3 benchmarks/gdn.py --out 'a b.json' --sweep-T"
    assert shlex.split(line)[1:] == ["benchmarks/gdn.py", "--out", "a b.json", "--sweep-T"]
    assert record.command("/elsewhere/x.py", []) == "python3 /elsewhere/x.py"


def test_the_header_on_the_cpu(monkeypatch):
    monkeypatch.setenv("HYMO_GIT_COMMIT", SENT)
    head = record.header("cpu", ROOT / "benchmarks" / "moe_dispatch.py", ["--tokens", "8"],
                         packages=("einops", "no-such-package-here"))
    assert head["git_commit"] == SENT and head["date"][:4].isdigit()
    assert head["command"] == "python3 benchmarks/moe_dispatch.py --tokens 8"
    hardware = head["hardware"]
    assert "gpu" not in hardware and hardware["processor"] and hardware["cpu_count"] >= 1
    assert hardware["torch"] == torch.__version__ and hardware["python"]
    assert hardware["einops"] == metadata.version("einops")
    assert hardware["no_such_package_here"] is None  # asked for, not installed: says so
    json.dumps(head)  # the whole header goes into the JSON as it is
