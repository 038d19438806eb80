"""``hymo-mini generate`` and ``hymo-mini export-model``: greedy text equals the full
forward's likeliest byte at every step; a model file or a training checkpoint; the prompt
from an argument, a file or stdin; nucleus sampling; every mistake one line, status 2."""

from __future__ import annotations

import io
import pickle

import pytest
import torch

from hymo_mini import cli
from hymo_mini.config import dump_config, load_config, replace
from hymo_mini.data import decode, encode
from hymo_mini.generate import generate, next_token
from hymo_mini.model import build_hymo
from hymo_mini.model_file import load_model, save_model


def tiny():
    cfg = load_config("hymo_mini")
    m = cfg.model
    model = replace(m, n_layers=4, max_seq_len=64,
                    capacity_factor=m.n_routed_experts / m.n_activated_experts)
    return replace(cfg, model=model, training=replace(cfg.training, batch_size=2, seq_len=16,
                                                      max_steps=2, eval_every=2,
                                                      eval_batches=1))


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    torch.manual_seed(0)
    cfg = tiny()
    path = tmp_path_factory.mktemp("model") / "model.safetensors"
    save_model(path, build_hymo(cfg), cfg)
    return path


def run(capsys, argv):
    status = cli.main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def greedy_without_cache(model, prompt: str, n: int) -> str:
    tokens = encode(prompt)[None]
    for _ in range(n):
        with torch.no_grad():
            tokens = torch.cat([tokens, model(tokens)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return decode(tokens[0])


def test_greedy_text_is_the_full_forwards_choice_at_every_step(model_file, capsys):
    status, out, err = run(capsys, ["generate", str(model_file), "def add(a, b):",
                                    "--temperature", "0", "--max-new-tokens", "24"])
    assert status == 0 and not err
    model, _ = load_model(model_file)
    assert out == greedy_without_cache(model, "def add(a, b):", 24) + "\n"


def test_the_file_keeps_the_weights_in_bf16_and_the_tied_head_once(model_file):
    from safetensors import safe_open

    with safe_open(str(model_file), framework="pt") as f:
        names = set(f.keys())
        assert f.get_tensor("embed.weight").dtype == torch.bfloat16
    assert "embed.weight" in names and "head.weight" not in names
    model, config = load_model(model_file)
    assert model.head.weight is model.embed.weight and config == tiny()


def test_a_training_checkpoint_and_its_export_both_generate(tmp_path, capsys):
    dump_config(tiny(), tmp_path / "tiny.yaml")
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "a.py").write_text("print('hello world')\n" * 60)
    assert cli.main(["train", "--config", str(tmp_path / "tiny.yaml"), "--data",
                     str(tmp_path / "text"), "--out", str(tmp_path / "run"), "--no-progress",
                     "--threads", "1"]) == 0
    capsys.readouterr()
    checkpoint = tmp_path / "run" / "checkpoint.pt"
    status, out, _ = run(capsys, ["generate", str(checkpoint), "print", "--max-new-tokens", "8",
                                  "--temperature", "0"])
    assert status == 0 and out.startswith("print") and out.endswith("\n")
    status, out, _ = run(capsys, ["export-model", str(checkpoint), str(tmp_path / "m.st")])
    assert status == 0 and "step 2" in out
    status, out, _ = run(capsys, ["generate", str(tmp_path / "m.st"), "print",
                                  "--max-new-tokens", "8"])
    assert status == 0 and out.startswith("print")


def test_the_prompt_from_a_file_or_stdin(model_file, tmp_path, capsys, monkeypatch):
    (tmp_path / "prompt.txt").write_text("for i in")
    args = ["--temperature", "0", "--max-new-tokens", "5"]
    _, from_file, _ = run(capsys, ["generate", str(model_file), "--prompt-file",
                                   str(tmp_path / "prompt.txt"), *args])
    monkeypatch.setattr("sys.stdin", io.StringIO("for i in"))
    _, from_stdin, _ = run(capsys, ["generate", str(model_file), *args])
    _, from_argument, _ = run(capsys, ["generate", str(model_file), "for i in", *args])
    assert from_file == from_stdin == from_argument


def test_nucleus_sampling_keeps_the_fewest_likeliest():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    gen = torch.Generator().manual_seed(0)
    drawn = {int(next_token(logits, 1.0, None, 0.7, gen)) for _ in range(200)}
    assert drawn == {0, 1}  # 0.5 + 0.3 >= 0.7: the two likeliest, never the others
    only_first = {int(next_token(logits, 1.0, None, 0.4, gen)) for _ in range(50)}
    assert only_first == {0}
    model = build_hymo(tiny().model)
    prompt = encode("x = ")[None]
    assert torch.equal(generate(model, prompt, 6, top_p=1e-6),
                       generate(model, prompt, 6, temperature=0))


class Planted:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("case, expected", [
    ("missing", "no such file; pass a .safetensors model or a checkpoint.pt"),
    ("foreign_safetensors", "is not a hymo_mini model file"),
    ("planted_checkpoint", "could run code"),
    ("bare_pickle", "is not a safetensors file"),
    ("empty_prompt", "the prompt is empty"),
    ("negative_temperature", "--temperature must be >= 0"),
    ("top_k_zero", "--top-k must be in [1, vocab_size=256], got 0"),
    ("top_p_zero", "--top-p must be in (0, 1], got 0.0"),
    ("negative_tokens", "--max-new-tokens must be a non-negative integer, got -3"),
    ("prompt_too_long", "the prompt has 64 bytes; the model reads at most max_seq_len=64"),
    ("two_prompts", "give the prompt once"),
])
def test_a_mistake_is_one_line_and_status_2(case, expected, model_file, tmp_path, capsys):
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(2)}, str(tmp_path / "other.safetensors"))
    torch.save({"model": Planted(tmp_path / "ran")}, tmp_path / "planted.pt")
    (tmp_path / "bare.pt").write_bytes(pickle.dumps(Planted(tmp_path / "ran")))
    (tmp_path / "p.txt").write_text("x")
    good = str(model_file)
    argv = {
        "missing": [str(tmp_path / "none.safetensors"), "x"],
        "foreign_safetensors": [str(tmp_path / "other.safetensors"), "x"],
        "planted_checkpoint": [str(tmp_path / "planted.pt"), "x"],
        "bare_pickle": [str(tmp_path / "bare.pt"), "x"],
        "empty_prompt": [good, ""],
        "negative_temperature": [good, "x", "--temperature", "-1"],
        "top_k_zero": [good, "x", "--top-k", "0"],
        "top_p_zero": [good, "x", "--top-p", "0"],
        "negative_tokens": [good, "x", "--max-new-tokens", "-3"],
        "prompt_too_long": [good, "y" * 64],
        "two_prompts": [good, "x", "--prompt-file", str(tmp_path / "p.txt")],
    }[case]
    status, out, err = run(capsys, ["generate", *argv])
    assert status == 2 and not out and err.count("\n") == 1 and expected in err, err
    assert not (tmp_path / "ran").exists()
