"""Training: schedule, weight-decay groups, a loss that falls, an exact resume, atomic and
config-checked checkpoints, and the command line's errors."""

from __future__ import annotations

import json

import pytest
import torch

from hymo_mini.cli import train as cli
from hymo_mini.config import ConfigError, SchedulerConfig, dump_config, load_config, replace
from hymo_mini.data import DataError, load_corpus
from hymo_mini.model import build_hymo
from hymo_mini.optim import build_optimizer
from hymo_mini.train import (
    CheckpointError,
    load_checkpoint,
    loop,
    save_checkpoint,
    train,
    wsd_multiplier,
)


def tiny_config(**training):
    """hymo_mini cut to 2 layers (one MLA with MoE, one GDN) and short sequences."""
    cfg = load_config("hymo_mini")
    model = replace(cfg.model, n_layers=2, mla_every=2, max_seq_len=64)
    fields = dict(batch_size=2, seq_len=16, max_steps=8, eval_every=4, eval_batches=1,
                  log_every=2)
    fields.update(training)
    return replace(cfg, model=model, training=replace(cfg.training, **fields))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("text")
    for i in range(12):
        (folder / f"f{i}.py").write_text(f"def add_{i}(a, b):\n    return a + b\n" * 30)
    return load_corpus(folder, val_percent=25)


# ---- schedule ---------------------------------------------------------------------------
def test_wsd_schedule_shape():
    sched = SchedulerConfig(warmup_frac=0.1, stable_frac=0.6, decay_frac=0.3, min_lr_ratio=0.1)
    lrs = [wsd_multiplier(s, 100, sched) for s in range(100)]
    assert lrs[:10] == pytest.approx([(s + 1) / 10 for s in range(10)])  # linear warmup
    assert all(x == 1.0 for x in lrs[10:70])  # stable
    assert lrs[70:] == pytest.approx([1 - 0.9 * (s + 1) / 30 for s in range(30)])  # decay
    assert lrs[-1] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="step"):
        wsd_multiplier(100, 100, sched)


def test_wsd_without_warmup_or_decay():
    sched = SchedulerConfig(warmup_frac=0.0, stable_frac=1.0, decay_frac=0.0)
    assert [wsd_multiplier(s, 5, sched) for s in range(5)] == [1.0] * 5


# ---- optimizer groups -------------------------------------------------------------------
def test_training_uses_the_configs_optimizer_groups(corpus):
    """AdamW with no decay on norms, biases, scales, GDN decay parameters and the router."""
    result = train(tiny_config(max_steps=1), corpus, progress=False)
    model = result.model
    names = {id(p): n for n, p in model.named_parameters()}
    opt = result.optimizer
    assert isinstance(opt, torch.optim.AdamW)
    decayed = {names[id(p)] for g in opt.param_groups if g["weight_decay"] > 0
               for p in g["params"]}
    plain = {names[id(p)] for g in opt.param_groups if g["weight_decay"] == 0
             for p in g["params"]}
    assert decayed | plain == set(names.values()) and not decayed & plain
    for name in plain:
        leaf = name.split(".")[-1]
        assert ("norm" in name or leaf in ("A_log", "dt_bias", "D", "q_scale", "k_scale")
                or name.endswith("moe.gate.weight")), name
    a, g = model.config.mla_positions[0], model.config.gdn_positions[0]
    for name in ("embed.weight", f"layers.{a}.attn.wq_a.weight",
                 f"layers.{g}.mixer.in_proj.weight", f"layers.{a}.moe.experts.w1"):
        assert name in decayed, name


def test_muon_trains_too(corpus):
    cfg = tiny_config(max_steps=2)
    cfg = replace(cfg, optimizer=replace(cfg.optimizer, name="muon"))
    result = train(cfg, corpus, progress=False)
    assert len(result.history["loss"]) == 2
    scale = wsd_multiplier(1, 2, cfg.scheduler)  # the last step's schedule factor
    lrs = sorted({g["lr"] for g in result.optimizer.param_groups})
    assert lrs == pytest.approx([cfg.optimizer.lr * scale, cfg.optimizer.muon_lr * scale])


# ---- the loop ---------------------------------------------------------------------------
def test_loss_falls_and_moe_balances(corpus):
    cfg = tiny_config(max_steps=12)
    cfg = replace(cfg, optimizer=replace(cfg.optimizer, lr=1e-2))
    result = train(cfg, corpus, progress=False)
    h = result.history
    assert h["step"] == list(range(1, 13))
    assert sum(h["loss"][-3:]) / 3 < sum(h["loss"][:3]) / 3 - 0.5
    assert set(h["parts"]) == {"main", "mtp_1", "mtp_2"}
    # total = main + 0.3 mtp_1 + 0.1 mtp_2 at every step
    for i in range(12):
        parts = {k: v[i] for k, v in h["parts"].items()}
        expected = parts["main"] + 0.3 * parts["mtp_1"] + 0.1 * parts["mtp_2"]
        assert h["loss"][i] == pytest.approx(expected, rel=1e-5)
    assert h["val_step"] == [4, 8, 12] and len(h["val_loss"]) == 3
    moe = result.model.moe_layers()[0]
    assert not torch.equal(moe.load_ema, torch.full_like(moe.load_ema, 0.25))  # updated
    assert result.stats["tokens_per_step"] == 2 * 16


def test_the_shared_loop_calls_each_part_on_schedule():
    """The loop both train() and train_distributed() run: every step draws its batches and
    steps once, in order, from the resumed step; evaluation every eval_every and at the end;
    every step's losses reach the history."""
    from hymo_mini.train.loop import RunState, TrainingLog, run_steps

    cfg = tiny_config(max_steps=10, eval_every=4, log_every=3)
    run = RunState(cfg, torch.nn.Linear(1, 1), None, None, torch.device("cpu"), steps=9, start=2)
    calls = []

    def optimizer_step(run_, step, batches):
        assert run_ is run and batches == [step]
        calls.append(("step", step))
        return torch.tensor(float(step)), {"main": torch.tensor(0.5 * step)}, torch.tensor(1.0), 0.1

    def evaluate_and_save(done):
        calls.append(("eval", done))

    log = TrainingLog(run, progress=False, print_every=None)
    run_steps(run, log, lambda step: [step], optimizer_step, evaluate_and_save)
    assert calls == [("step", 2), ("step", 3), ("eval", 4), ("step", 4), ("step", 5),
                     ("step", 6), ("step", 7), ("eval", 8), ("step", 8), ("eval", 9)]
    h = run.history
    assert h["step"] == list(range(3, 10)) and h["loss"] == [float(s) for s in range(2, 9)]
    assert h["parts"]["main"] == [0.5 * s for s in range(2, 9)] and h["lr"] == [0.1] * 7
    assert log.stats()["steps"] == 7


def test_gradients_are_clipped(corpus, monkeypatch):
    seen = []
    real = loop.clip_and_step

    def spy(optimizer, params, max_norm):
        seen.append(max_norm)
        return real(optimizer, params, max_norm)

    monkeypatch.setattr(loop, "clip_and_step", spy)
    cfg = tiny_config(max_steps=2)
    cfg = replace(cfg, optimizer=replace(cfg.optimizer, grad_clip=0.5))
    train(cfg, corpus, progress=False)
    assert seen == [0.5, 0.5]


def test_resume_continues_the_same_curve(corpus, tmp_path):
    torch.use_deterministic_algorithms(True)
    try:
        cfg = tiny_config(max_steps=6, grad_accum_steps=2)
        straight = train(cfg, corpus, progress=False).history
        train(cfg, corpus, steps=3, out_dir=tmp_path, progress=False)
        resumed = train(cfg, corpus, out_dir=tmp_path, resume=True, progress=False).history
    finally:
        torch.use_deterministic_algorithms(False)
    assert resumed["step"] == straight["step"] == [1, 2, 3, 4, 5, 6]
    assert resumed["loss"] == straight["loss"]  # exactly: same batches, same state
    assert resumed["lr"] == straight["lr"]
    saved = json.loads((tmp_path / "history.json").read_text())
    assert saved["loss"] == straight["loss"]
    with pytest.raises(CheckpointError, match="already at step 6"):
        train(cfg, corpus, out_dir=tmp_path, resume=True, progress=False)


def test_checkpoint_from_another_config(corpus, tmp_path):
    cfg = tiny_config(max_steps=2)
    train(cfg, corpus, steps=1, out_dir=tmp_path, progress=False)
    other = replace(cfg, model=replace(cfg.model, dim=32))
    with pytest.raises(CheckpointError, match=r"model\.dim: checkpoint 64, now 32"):
        train(other, corpus, out_dir=tmp_path, resume=True, progress=False)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        train(cfg, corpus, out_dir=tmp_path / "nothing", resume=True, progress=False)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="junk.pt' is not a complete checkpoint"):
        load_checkpoint(tmp_path / "junk.pt")
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a hymo_mini checkpoint"):
        load_checkpoint(tmp_path / "other.pt")


class Planted:
    """A pickle that, loaded by a trusting reader, would create the file ``marker``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_planted_pickle_never_runs(corpus, tmp_path, capsys):
    marker = tmp_path / "created_by_the_checkpoint"
    out = tmp_path / "run"
    out.mkdir()
    torch.save({"format": "hymo_mini-checkpoint-1", "model": Planted(marker)},
               out / "checkpoint.pt")
    with pytest.raises(CheckpointError, match="could run code"):
        load_checkpoint(out / "checkpoint.pt")
    cfg = tiny_config()
    with pytest.raises(CheckpointError, match="could run code"):
        train(cfg, corpus, out_dir=out, resume=True, progress=False)
    assert not marker.exists()


def test_a_truncated_checkpoint_names_its_file(corpus, tmp_path):
    cfg = tiny_config(max_steps=2)
    train(cfg, corpus, steps=1, out_dir=tmp_path, progress=False)
    whole = (tmp_path / "checkpoint.pt").read_bytes()
    for cut in (len(whole) // 2, 100, len(whole) - 30):
        (tmp_path / "checkpoint.pt").write_bytes(whole[:cut])
        with pytest.raises(CheckpointError,
                           match=r"checkpoint.pt' is not a complete checkpoint \(the file is "
                                 r"truncated or corrupt\)$"):
            load_checkpoint(tmp_path / "checkpoint.pt")
    torch.save({"format": "hymo_mini-checkpoint-1", "config": {}}, tmp_path / "checkpoint.pt")
    with pytest.raises(CheckpointError, match="not a complete checkpoint .no step, model"):
        load_checkpoint(tmp_path / "checkpoint.pt")


def test_the_config_check_both_checkpoint_kinds_share():
    from hymo_mini.config import config_to_dict
    from hymo_mini.train.checkpoint import check_same_config

    cfg = tiny_config()
    check_same_config("ckpt.pt", config_to_dict(cfg), cfg)  # the same config: no error
    saved = config_to_dict(replace(cfg, model=replace(cfg.model, dim=32),
                                   training=replace(cfg.training, seq_len=8)))
    with pytest.raises(CheckpointError) as error:
        check_same_config("out/dcp/step_00000004", saved, cfg)
    lines = str(error.value).splitlines()
    assert lines[0] == "'out/dcp/step_00000004' was written for another config; differences:"
    assert [line.strip() for line in lines[1:-1]] == [  # every difference, sorted
        "model.dim: checkpoint 32, now 64", "training.seq_len: checkpoint 8, now 16"]
    assert "start a new run" in lines[-1]


def test_checkpoint_is_never_half_written(tmp_path, monkeypatch):
    cfg = tiny_config()
    model = build_hymo(cfg)
    opt = build_optimizer(model, cfg.optimizer)
    path = save_checkpoint(tmp_path / "checkpoint.pt", model, opt, 1, {"loss": [1.0]}, cfg)
    good = path.read_bytes()

    def broken_save(obj, f, *args, **kwargs):
        with open(f, "wb") as handle:
            handle.write(b"half a checkpo")  # then the disk fills up, or the power fails
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, model, opt, 2, {"loss": [1.0, 0.5]}, cfg)
    assert path.read_bytes() == good  # the old checkpoint is untouched
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]  # no temporary left
    monkeypatch.undo()
    assert load_checkpoint(path, cfg)["step"] == 1


def test_impossible_sizes(corpus, tmp_path):
    with pytest.raises(ConfigError, match="steps"):
        train(tiny_config(), corpus, steps=9, progress=False)
    with pytest.raises(ConfigError, match="exceeds ModelConfig.max_seq_len"):
        train(tiny_config(seq_len=65), corpus, progress=False)  # max_seq_len is 64
    with pytest.raises(ConfigError, match="MTP"):
        train(tiny_config(seq_len=2), corpus, progress=False)
    (tmp_path / "short.txt").write_text("x" * 100)
    with pytest.raises(DataError, match="fewer than seq_len"):
        train(tiny_config(seq_len=60), load_corpus(tmp_path / "short.txt"), progress=False)


# ---- command line -----------------------------------------------------------------------
def test_cli_errors_are_clear(capsys, tmp_path):
    assert cli.train_main(["--config", "no_such_preset", "--no-progress"]) == 2
    assert "unknown preset 'no_such_preset'" in capsys.readouterr().err
    assert cli.train_main(["--seq-len", "100000", "--no-progress"]) == 2
    assert "exceeds ModelConfig.max_seq_len" in capsys.readouterr().err
    assert cli.train_main(["--batch-size", "0", "--no-progress"]) == 2
    assert "batch_size" in capsys.readouterr().err
    assert cli.train_main(["--data", str(tmp_path / "missing"), "--no-progress"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_cli_trains_and_resumes(tmp_path, capsys):
    config_path = tmp_path / "tiny.yaml"
    dump_config(tiny_config(max_steps=4, log_every=1), config_path)
    data = tmp_path / "data"
    data.mkdir()
    for i in range(8):
        (data / f"m{i}.py").write_text("print('hello world')\n" * 40)
    out = tmp_path / "run"
    args = ["--config", str(config_path), "--data", str(data), "--out", str(out),
            "--no-progress", "--threads", "1"]
    assert cli.train_main(args + ["--steps", "2"]) == 0
    first = capsys.readouterr().out
    assert "resumed" not in first and "main (next-token) loss" in first and "tokens/s" in first
    assert cli.train_main(args + ["--resume"]) == 0
    assert "resumed from step 2, step 4:" in capsys.readouterr().out
    assert (out / "loss_curve.png").stat().st_size > 0
    history = json.loads((out / "history.json").read_text())
    assert history["step"] == [1, 2, 3, 4]
    assert cli.train_main(args) == 2  # a new run would overwrite the checkpoint
    assert "pass --resume" in capsys.readouterr().err


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_cli_optimizer_choice_resumes_with_its_state(tmp_path, optimizer):
    config_path = tmp_path / "tiny.yaml"
    dump_config(tiny_config(max_steps=4, log_every=1), config_path)
    data = tmp_path / "data"
    data.mkdir()
    (data / "m.py").write_text("x = [i * i for i in range(10)]\n" * 80)
    out = tmp_path / "run"
    args = ["--config", str(config_path), "--data", str(data), "--out", str(out),
            "--no-progress", "--threads", "1", "--optimizer", optimizer]
    assert cli.train_main(args + ["--steps", "2"]) == 0
    saved = torch.load(out / "checkpoint.pt", weights_only=True)
    assert saved["config"]["optimizer"]["name"] == optimizer
    kinds = {g.get("optimizer", "adamw") for g in saved["optimizer"]["param_groups"]}
    assert ("muon" in kinds) == (optimizer == "muon")
    assert cli.train_main(args + ["--resume"]) == 0
    other = "adamw" if optimizer == "muon" else "muon"  # the other optimizer cannot resume it
    assert cli.train_main(args[:-1] + [other, "--resume"]) == 2


def test_checkpoint_at_every_evaluation(corpus, tmp_path):
    cfg = tiny_config(max_steps=8, eval_every=4)
    train(cfg, corpus, steps=6, out_dir=tmp_path, progress=False)  # evaluations at 4 and 6
    assert load_checkpoint(tmp_path / "checkpoint.pt", cfg)["step"] == 6
    history = load_checkpoint(tmp_path / "checkpoint.pt", cfg)["history"]
    assert history["step"] == [1, 2, 3, 4, 5, 6] and history["val_step"] == [4, 6]


def test_plots():
    from matplotlib.figure import Figure

    from hymo_mini.train.curves import loss_curve

    history = {"step": [1, 2, 3], "loss": [5.0, 4.0, 3.5], "parts": {"main": [4.0, 3.0, 2.5]},
               "val_step": [3], "val_loss": [2.6]}
    fig = loss_curve(history)
    assert isinstance(fig, Figure) and len(fig.axes[0].lines) >= 3


def _tiny_run(tmp_path, **training):
    tmp_path.mkdir(parents=True, exist_ok=True)
    config_path = tmp_path / "tiny.yaml"
    dump_config(tiny_config(**training), config_path)
    data = tmp_path / "data"
    data.mkdir()
    (data / "m.py").write_text("x = [i * i for i in range(10)]\n" * 80)
    out = tmp_path / "run"
    return out, ["--config", str(config_path), "--data", str(data), "--out", str(out),
                 "--no-progress", "--threads", "1"]


def test_the_run_prints_and_saves_its_settings(tmp_path, capsys):
    out, args = _tiny_run(tmp_path, max_steps=2)
    assert cli.train_main(args + ["--lr", "0.002"]) == 0
    printed = capsys.readouterr().out
    assert "settings: hymo_mini; optimizer adamw (lr 0.002); batch 2 x 16 tokens; steps 2 " \
           "(schedule 2); float32; seed 0; device cpu (threads 1)" in printed
    saved = load_checkpoint(out / "checkpoint.pt")
    assert saved["settings"]["command"] == "hymo-mini train " + " ".join(args + ["--lr", "0.002"])
    assert saved["settings"]["device"] == "cpu" and saved["settings"]["threads"] == 1
    assert saved["config"].optimizer.lr == 0.002


def test_ctrl_c_keeps_the_checkpoint_and_writes_the_history(tmp_path, capsys, monkeypatch):
    out, args = _tiny_run(tmp_path, max_steps=8, eval_every=2, log_every=1)
    calls = []

    def stop_in_step_5(*step_args):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt  # as Ctrl-C lands in the middle of step 5
        return real(*step_args)
    real = loop.clip_and_step
    monkeypatch.setattr(loop, "clip_and_step", stop_in_step_5)
    assert cli.train_main(args) == 130
    err = capsys.readouterr().err.strip()
    assert err == (f"hymo-mini train: interrupted after step 4 of 8; {out / 'checkpoint.pt'} "
                   "holds step 4 (--resume continues from it); history and loss curve written "
                   "up to step 4"), err
    assert json.loads((out / "history.json").read_text())["step"] == [1, 2, 3, 4]
    assert (out / "loss_curve.png").stat().st_size > 0
    monkeypatch.undo()
    assert cli.train_main(args + ["--resume"]) == 0  # and the resumed run is the same run
    resumed = json.loads((out / "history.json").read_text())
    straight, straight_args = _tiny_run(tmp_path / "straight", max_steps=8, eval_every=2,
                                        log_every=1)
    assert cli.train_main(straight_args) == 0
    assert resumed["loss"] == json.loads((straight / "history.json").read_text())["loss"]


def test_ctrl_c_before_the_first_checkpoint(tmp_path, capsys, monkeypatch):
    out, args = _tiny_run(tmp_path, max_steps=8, eval_every=4, log_every=1)

    def stop(*step_args):
        raise KeyboardInterrupt
    monkeypatch.setattr(loop, "clip_and_step", stop)
    assert cli.train_main(args) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "after step 0 of 8; no checkpoint was written yet" in err
    assert not (out / "checkpoint.pt").exists()


@pytest.mark.parametrize("preset", ["hymo_mini", "hymo_small", "hymo_750m"])
def test_every_shipped_preset_trains(preset):
    """What the command line checks before a run, then one full-length loss on the meta
    device (shapes only): a preset that fails here would fail ``hymo-mini train``."""
    from hymo_mini.config import preset_names
    from hymo_mini.data import ByteCorpus

    assert preset in preset_names()
    config = load_config(preset)
    t = config.training
    loop.check_steps(config, None)
    stream = torch.zeros(t.seq_len + 1, dtype=torch.uint8)
    loop.check_sizes(config, ByteCorpus(stream, stream, 1, "zeros"))
    with torch.device("meta"):
        model = build_hymo(config)
        total, parts = model.loss(torch.zeros(1, t.seq_len + 1, dtype=torch.long))
    assert total.shape == () and set(parts) == {"main"} | {
        f"mtp_{d}" for d in range(1, config.model.mtp_depth + 1)}


def test_every_preset_is_tested():
    from hymo_mini.config import preset_names

    marks = [m for m in test_every_shipped_preset_trains.pytestmark if m.name == "parametrize"]
    assert sorted(marks[0].args[1]) == sorted(preset_names())
