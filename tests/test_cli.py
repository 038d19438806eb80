"""Every command-line mistake is one line on stderr and exit status 2, naming the argument,
what was expected and the nearest valid choice; --help is plain text with the defaults."""

from __future__ import annotations

import re

import pytest
import torch

from hymo_mini import cli


def run(capsys, argv):
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("argv, expected", [
    (["config", "hymo_75m"], "did you mean 'hymo_750m'?"),
    (["params", "nope"], "unknown preset 'nope'; presets are hymo_750m, hymo_mini"),
    (["config", "no/such/file.yaml"], "no such file 'no/such/file.yaml'"),
    (["train", "--device", "banana"], "--device 'banana': not a device name"),
    (["train", "--normuon", "--optimizer", "adamw"], "--normuon normalises Muon's update"),
    (["train", "--optimizer", "adam"], "invalid choice: 'adam'"),
    (["trian"], "unknown command 'trian' (did you mean 'train'?)"),
])
def test_a_mistake_is_one_line_and_status_2(capsys, argv, expected):
    code, out, err = run(capsys, argv)
    assert code == 2 and not out
    assert err.count("\n") == 1 and expected in err, err


def test_malformed_yaml_gives_its_line_and_column(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  dim: 64\n  n_layers: [4\n")
    code, _, err = run(capsys, ["config", str(bad)])
    assert code == 2 and err.count("\n") == 1
    assert re.search(r"not valid YAML at line \d+, column \d+", err), err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_a_gpu_lists_the_devices_there_are(capsys):
    code, _, err = run(capsys, ["train", "--device", "cuda"])
    assert code == 2 and "no CUDA GPU is available here; this machine has cpu" in err


def test_help_is_plain_text_with_presets_backends_and_defaults(capsys):
    code, out, _ = run(capsys, ["--help"])
    assert code == 0 and "hymo_750m" in out and "chunk_triton" in out and "delta:" in out
    code, text, _ = run(capsys, ["train", "--help"])
    assert code == 0
    text = " ".join(text.split())  # argparse wraps lines
    assert "(default: hymo_mini)" in text and "(default: muon)" in text
    for markup in ("``", ":mod:", ":func:", "(default: None)"):
        assert markup not in text, markup


def test_a_good_command_runs(capsys):
    code, out, err = run(capsys, ["config", "hymo_mini"])
    assert code == 0 and "mla_positions" in out and not err

