"""The table of command-line mistakes (``tests/cli_mistakes.md``): each mistake a user might
make, the one line ``hymo-mini`` answers with, and its exit status. The test runs every
case and fails when the committed table differs from what the commands say now; to write
the table anew, run ``python3 tests/test_cli_mistakes.py``.

Paths under the test's temporary folder show as ``TMP``. Each case runs in this process,
so the whole table takes a few seconds (the one tiny training run included)."""

from __future__ import annotations

import contextlib
import io
import pickle
import sys
import tempfile
from pathlib import Path

import torch

from hymo_mini import cli
from hymo_mini.config import dump_config, load_config, replace

TABLE = Path(__file__).with_name("cli_mistakes.md")


class Planted:
    """A pickle that, loaded by a trusting reader, would create the file ``marker``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _setup(tmp: Path) -> None:
    """A tiny config, some text, a finished run and damaged or foreign checkpoints."""
    config = load_config("hymo_mini")
    config = replace(config, model=replace(config.model, n_layers=2, mla_every=2),
                     training=replace(config.training, batch_size=2, seq_len=16, max_steps=2,
                                      eval_every=2, eval_batches=1))
    dump_config(config, tmp / "tiny.yaml")
    dump_config(replace(config, model=replace(config.model, dim=32)), tmp / "other.yaml")
    (tmp / "text").mkdir()
    (tmp / "text" / "a.py").write_text("print('hello')\n" * 100)
    (tmp / "short").mkdir()
    (tmp / "short" / "a.py").write_text("x = 1\n")
    (tmp / "empty").mkdir()
    (tmp / "file.txt").write_text("not a folder")
    (tmp / "empty.txt").write_text("")
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["train", *_tiny(tmp), "--out", str(tmp / "done")]) == 0
    whole = (tmp / "done" / "checkpoint.pt").read_bytes()
    for name, data in (("cut", whole[: len(whole) // 2]), ("junk", b"not a checkpoint")):
        (tmp / name).mkdir()
        (tmp / name / "checkpoint.pt").write_bytes(data)
    (tmp / "planted").mkdir()
    torch.save({"format": "hymo_mini-checkpoint-1", "model": Planted(tmp / "ran")},
               tmp / "planted" / "checkpoint.pt")
    (tmp / "pickle").mkdir()
    (tmp / "pickle" / "checkpoint.pt").write_bytes(pickle.dumps(Planted(tmp / "ran")))
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["export-model", str(tmp / "done" / "checkpoint.pt"),
                         str(tmp / "model.safetensors")]) == 0


def _tiny(tmp: Path) -> list[str]:
    return ["--config", str(tmp / "tiny.yaml"), "--data", str(tmp / "text"), "--no-progress",
            "--threads", "1"]


# (what the user meant, the command after "hymo-mini"; "{tmp}" is the temporary folder and
# "TINY" stands for the tiny config, its text and quiet options)
CASES = [
    ("a preset's name misspelt", "config hymo_75m"),
    ("an unknown preset", "params nope"),
    ("a config file that is not there", "config no/such/file.yaml"),
    ("a misspelt command", "trian"),
    ("a device that does not exist", "train --device banana"),
    ("an optimizer that does not exist", "train --optimizer adam"),
    ("NorMuon without Muon", "train --normuon --optimizer adamw"),
    ("a dtype PyTorch has but training does not", "train --dtype float16"),
    ("an abbreviated option", "train --step 5"),
    ("an option that does not exist", "train --lerning-rate 0.1"),
    ("a stray argument", "train hymo_mini"),
    ("a value of the wrong kind", "train --steps five"),
    ("no steps", "train --steps 0"),
    ("more steps than the schedule", "train --steps 100000"),
    ("an empty batch", "train --batch-size 0"),
    ("sequences longer than the model reads", "train --seq-len 100000"),
    ("sequences too short for the MTP targets", "train TINY --seq-len 2"),
    ("a negative learning rate", "train --lr -1"),
    ("no CPU threads", "train --threads 0"),
    ("text that is not there", "train TINY --data {tmp}/missing"),
    ("a folder with no matching files", "train TINY --data {tmp}/empty"),
    ("less text than one sequence", "train TINY --data {tmp}/short --out {tmp}/new"),
    ("no bytes at all", "train TINY --max-bytes 0 --out {tmp}/new2"),
    ("an output folder that is a file", "train TINY --out {tmp}/file.txt"),
    ("an output folder that cannot be made", "train TINY --out {tmp}/file.txt/run"),
    ("a new run over a finished one", "train TINY --out {tmp}/done"),
    ("resuming a run that never started", "train TINY --out {tmp}/nothing --resume"),
    ("resuming past the schedule", "train TINY --out {tmp}/done --resume"),
    ("resuming with another config", "train --config {tmp}/other.yaml --out {tmp}/done "
                                     "--resume --no-progress"),
    ("resuming from a truncated checkpoint", "train TINY --out {tmp}/cut --resume"),
    ("resuming from a file that is not a checkpoint", "train TINY --out {tmp}/junk --resume"),
    ("a checkpoint that would run code", "train TINY --out {tmp}/planted --resume"),
    ("a bare pickle that would run code", "train TINY --out {tmp}/pickle --resume"),
    ("activation checkpointing on one process", "train TINY --activation-checkpointing"),
    ("converting a folder with no DCP checkpoint", "convert-checkpoint {tmp}/empty out.pt"),
    ("generating from a model that is not there", "generate {tmp}/none.safetensors Hello"),
    ("generating from a file that is not a model", "generate {tmp}/file.txt Hello"),
    ("generating from a checkpoint that would run code",
     "generate {tmp}/planted/checkpoint.pt Hello"),
    ("an empty prompt", "generate {tmp}/model.safetensors --prompt-file {tmp}/empty.txt"),
    ("a negative temperature", "generate {tmp}/model.safetensors Hello --temperature -1"),
    ("top-p out of range", "generate {tmp}/model.safetensors Hello --top-p 2"),
    ("top-k out of range", "generate {tmp}/model.safetensors Hello --top-k 300"),
    ("exporting a checkpoint that is not there", "export-model {tmp}/nothing/checkpoint.pt "
                                                 "{tmp}/m.safetensors"),
    ("fetching into a folder that holds files", "fetch-docs {tmp}/text"),
]


def _argv(command: str, tmp: Path) -> list[str]:
    argv = []
    for word in command.format(tmp=tmp).split():
        argv += _tiny(tmp) if word == "TINY" else [word]
    return argv


def rows(tmp: Path) -> list[tuple[str, str, str, int]]:
    """(what was meant, the command, stderr's only line, exit status) for every case."""
    _setup(tmp)
    found = []
    for meant, command in CASES:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = cli.main(_argv(command, tmp))
        lines = err.getvalue().splitlines()
        assert len(lines) == 1, f"{command}: {len(lines)} lines on stderr: {err.getvalue()}"
        said = lines[0].replace(str(tmp), "TMP")
        said = said.split("; this machine has")[0] + ("; this machine has (its devices)"
                                                      if "; this machine has" in said else "")
        found.append((meant, f"hymo-mini {command}".replace("{tmp}", "TMP"), said, status))
    assert not (tmp / "ran").exists(), "a planted pickle ran"
    return found


def table(found) -> str:
    head = ["# What `hymo-mini` says to each mistake", "",
            "Written by `python3 tests/test_cli_mistakes.py`, checked by the test of the same "
            "name: each row is a command a user might type, the one line it prints on stderr, "
            "and its exit status. `TMP` is a temporary folder; `TINY` stands for a two-layer "
            "config, a little text and `--no-progress --threads 1`.", "",
            "| meant | command | says | status |", "|---|---|---|---|"]
    cells = [f"| {meant} | `{command}` | {said.replace('|', '¦')} | {status} |"
             for meant, command, said, status in found]
    return "\n".join(head + cells) + "\n"


def test_every_mistake_is_one_line_with_status_2_and_the_table_is_current(tmp_path):
    found = rows(tmp_path)
    assert {status for *_, status in found} == {2}
    assert TABLE.read_text() == table(found), (
        "tests/cli_mistakes.md is stale: run python3 tests/test_cli_mistakes.py")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        TABLE.write_text(table(rows(Path(folder))))
    print(f"wrote {TABLE}", file=sys.stderr)
