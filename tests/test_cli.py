"""Every command-line mistake is one line on stderr and exit status 2, naming the argument,
what was expected and the nearest valid choice; --help is plain text with the defaults."""

from __future__ import annotations

import re

import pytest
import torch

from hymo_mini import cli
from hymo_mini.cli import train
from hymo_mini.config import load_config, replace


def run(capsys, argv):
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("argv, expected", [
    (["config", "hymo_75m"], "did you mean 'hymo_750m'?"),
    (["params", "nope"], "unknown preset 'nope'; presets are hymo_750m, hymo_mini, hymo_small"),
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
    assert "(default: hymo_mini)" in text and "--optimizer {adamw,muon} muon:" in text
    assert text.count("(default: the config's)") == len(train.CONFIG_FLAGS)
    for markup in ("``", ":mod:", ":func:", "(default: None)"):
        assert markup not in text, markup


def test_a_good_command_runs(capsys):
    code, out, err = run(capsys, ["config", "hymo_mini"])
    assert code == 0 and "mla_positions" in out and not err



# each flag that sets a config field: (the config's value, the flag, the flag's value)
FLAG_CASES = {
    "--max-steps": (123, ["--max-steps", "7"], 7),
    "--batch-size": (5, ["--batch-size", "3"], 3),
    "--seq-len": (64, ["--seq-len", "24"], 24),
    "--dtype": ("bfloat16", ["--dtype", "float32"], "float32"),
    "--optimizer": ("muon", ["--optimizer", "adamw"], "adamw"),
    "--normuon": (True, ["--no-normuon"], False),
    "--lr": (0.001, ["--lr", "0.005"], 0.005),
    "--muon-lr": (0.01, ["--muon-lr", "0.03"], 0.03),
    "--seed": (11, ["--seed", "5"], 5),
}


def test_every_flag_with_a_config_field_is_tested():
    assert set(FLAG_CASES) == set(train.CONFIG_FLAGS)


@pytest.mark.parametrize("flag", FLAG_CASES)
def test_a_flag_left_out_keeps_the_configs_value(flag):
    field, _, _ = train.CONFIG_FLAGS[flag]
    section, name = field.split(".")
    in_config, argv, given = FLAG_CASES[flag]
    base = load_config("hymo_mini")
    base = replace(base, optimizer=replace(base.optimizer, name="muon"))  # NorMuon needs it
    base = replace(base, **{section: replace(getattr(base, section), **{name: in_config})})
    parser = train.train_parser()
    kept = train.apply_overrides(base, parser.parse_args([]))
    assert getattr(getattr(kept, section), name) == in_config
    changed = train.apply_overrides(base, parser.parse_args(argv))
    assert getattr(getattr(changed, section), name) == given


def test_the_presets_optimizer_is_the_one_trained():
    parser = train.train_parser()
    for preset in ("hymo_mini", "hymo_750m"):
        config = load_config(preset)
        assert train.apply_overrides(config, parser.parse_args([])).optimizer == config.optimizer
    adamw = train.apply_overrides(load_config("hymo_750m"), parser.parse_args(
        ["--optimizer", "adamw"])).optimizer
    assert adamw.name == "adamw" and not adamw.normuon  # the preset's NorMuon was Muon's


def test_a_closed_pipe_ends_quietly(tmp_path):
    """``hymo-mini config hymo_750m | head -1``: the reader is gone before the output."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # no reader at all: every write fails
    try:
        done = subprocess.run([sys.executable, "-m", "hymo_mini.cli", "config", "hymo_750m"],
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert done.returncode == 141 and done.stderr == ""


def test_options_are_never_abbreviated(capsys):
    code, _, err = run(capsys, ["train", "--step", "5"])
    assert code == 2 and err.count("\n") == 1
    assert "unknown option --step (did you mean '--steps'?)" in err
