"""Data-parallel training with FSDP2 on the CPU (gloo): two processes follow the one-process
loss curve, sharded DCP checkpoints resume on another number of processes and convert to
the single-file checkpoint, the balancing bias stays equal on every rank, and each bad
input (a world larger than the batch, another config's checkpoint, a rank that never
comes) is one line on rank 0 with no rank left waiting.

Runs start ``torchrun --standalone`` (a free port each) as subprocesses; the model is the
tiny 2-layer HyMo on 4 x 16-token batches. Checks that need only one rank run in this
process, in a process group of one.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from distributed_worker import tiny

from hymo_mini.config import ConfigError, dump_config, load_config, replace
from hymo_mini.data import load_corpus
from hymo_mini.train import CheckpointError, load_checkpoint, train
from hymo_mini.train.dcp import dcp_to_checkpoint, latest_dcp, load_dcp, read_meta

pytestmark = pytest.mark.distributed

ROOT = Path(__file__).resolve().parents[1]
STEPS = 4
# Muon's Newton-Schulz runs in bf16: the two-process gradient (the mean of two half-batch
# gradients) differs from the one-process one by rounding, which bf16 turns into ~1e-4 of
# loss by step 4. AdamW's steps keep the curves within ~1e-6.
MUON_TOLERANCE, ADAMW_TOLERANCE = 2e-3, 1e-4


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")]), "OMP_NUM_THREADS": "1"}


def torchrun(n: int, *args, timeout: float = 120) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", str(n), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          env=_env(), cwd=ROOT)


def train_command(n: int, config: Path, data: Path, out: Path, *extra, timeout: float = 120):
    return torchrun(n, "-m", "hymo_mini.train", "--distributed", "--config", str(config),
                    "--data", str(data), "--out", str(out), "--no-progress", "--threads", "1",
                    *extra, timeout=timeout)


def ran(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def history(folder: Path) -> dict:
    return json.loads((folder / "history.json").read_text())


def errors(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if "hymo-mini train: error:" in line]


def close(a: list[float], b: list[float], tolerance: float) -> bool:
    return len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b, strict=True)) <= tolerance


# ---- the runs the tests compare ----------------------------------------------------------
@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("fsdp")
    text = root / "text"
    text.mkdir()
    for i in range(12):
        (text / f"f{i}.py").write_text(f"def add_{i}(a, b):\n    return a + b\n" * 30)
    configs = {}
    for name in ("muon", "adamw"):
        configs[name] = root / f"{name}.yaml"
        dump_config(tiny(name), configs[name])
    return {"root": root, "text": text, "config": configs,
            "corpus": load_corpus(text, max_bytes=4_000_000)}


@pytest.fixture(scope="module")
def one_process(files):
    """The reference: the one-process loop on the same global batches."""
    return {name: train(tiny(name), files["corpus"], steps=STEPS, progress=False)
            for name in ("muon", "adamw")}


@pytest.fixture(scope="module")
def on_two(files):
    """Muon on 2 processes, DCP checkpoints at steps 2 and 4."""
    out = files["root"] / "on_two"
    ran(train_command(2, files["config"]["muon"], files["text"], out, "--steps", str(STEPS),
                      "--normuon"))
    return out


def train_here(config, corpus, out: Path, steps: int, resume: bool = False):
    """train_distributed in this process, in a process group of one."""
    from hymo_mini.train.distributed import close_distributed, init_distributed
    from hymo_mini.train.fsdp_loop import train_distributed

    assert "WORLD_SIZE" not in os.environ  # not a rank of a launched run
    world = init_distributed("cpu", timeout_s=30)
    try:
        return train_distributed(config, world, corpus, steps=steps, out_dir=out,
                                 resume=resume, progress=False)
    finally:
        close_distributed()


@pytest.fixture(scope="module")
def on_one_then_two(files):
    """AdamW: 2 steps on 1 process, then on 2 processes from its checkpoint to step 4,
    with activation checkpointing."""
    out = files["root"] / "on_one_then_two"
    first = train_here(tiny("adamw"), files["corpus"], out, 2).history
    ran(train_command(2, files["config"]["adamw"], files["text"], out, "--steps", str(STEPS),
                      "--optimizer", "adamw", "--resume", "--activation-checkpointing"))
    return first, history(out)


# ---- the same curve ------------------------------------------------------------------------
def test_two_processes_follow_the_one_process_curve(files, one_process, on_two):
    mine, ref = history(on_two), one_process["muon"].history
    assert mine["step"] == ref["step"] == list(range(1, STEPS + 1))
    assert abs(mine["loss"][0] - ref["loss"][0]) < 1e-5  # before any update: rounding only
    assert close(mine["loss"], ref["loss"], MUON_TOLERANCE), (mine["loss"], ref["loss"])
    assert close(mine["parts"]["main"], ref["parts"]["main"], MUON_TOLERANCE)
    assert close(mine["val_loss"], ref["val_loss"], MUON_TOLERANCE)
    assert close(mine["grad_norm"], ref["grad_norm"], 10 * MUON_TOLERANCE)


def test_the_balancing_bias_is_the_one_process_bias(files, one_process, on_two):
    """The checkpoint's bias (the ranks agreed on it before saving) is exactly the one
    process's: the same global counts move it by the same steps."""
    model = one_process["muon"].model
    saved = tiny("muon")
    from hymo_mini.model import build_hymo
    from hymo_mini.optim import build_optimizer

    fresh = build_hymo(saved)
    load_dcp(latest_dcp(on_two), fresh, build_optimizer(fresh, saved.optimizer))
    for a, b in zip(model.moe_layers(), fresh.moe_layers(), strict=True):
        assert torch.equal(a.expert_bias, b.expert_bias) and torch.equal(a.load_ema, b.load_ema)


def test_saved_on_two_resumes_on_one(files, one_process, on_two):
    out = files["root"] / "two_to_one"
    (out / "dcp").mkdir(parents=True)
    shutil.copytree(on_two / "dcp" / "step_00000002", out / "dcp" / "step_00000002")
    mine = train_here(tiny("muon"), files["corpus"], out, STEPS, resume=True).history
    two = history(on_two)
    assert mine["loss"][:2] == two["loss"][:2]  # carried by the checkpoint
    assert close(mine["loss"], two["loss"], MUON_TOLERANCE)
    assert close(mine["loss"], one_process["muon"].history["loss"], MUON_TOLERANCE)


def test_saved_on_one_resumes_on_two_with_activation_checkpointing(one_process,
                                                                   on_one_then_two):
    first, resumed = on_one_then_two
    ref = one_process["adamw"].history
    assert resumed["loss"][:2] == first["loss"]
    assert close(resumed["loss"], ref["loss"], ADAMW_TOLERANCE), (resumed["loss"], ref["loss"])
    assert close(resumed["val_loss"], ref["val_loss"], ADAMW_TOLERANCE)


def test_a_converted_checkpoint_resumes_in_one_process(files, one_process, on_two, tmp_path):
    path = dcp_to_checkpoint(on_two / "dcp" / "step_00000002", tmp_path / "checkpoint.pt")
    assert load_checkpoint(path, tiny("muon"))["step"] == 2  # the single-file format
    result = train(tiny("muon"), files["corpus"], steps=STEPS, out_dir=tmp_path, resume=True,
                   progress=False)
    assert result.history["loss"][:2] == history(on_two)["loss"][:2]
    assert close(result.history["loss"], one_process["muon"].history["loss"], MUON_TOLERANCE)


def test_a_step_folder_is_complete_or_absent(on_two):
    folders = sorted(p.name for p in (on_two / "dcp").iterdir())
    assert folders == ["step_00000002", "step_00000004"]  # no temporary left
    meta = read_meta(on_two / "dcp" / "step_00000004", tiny("muon"))
    assert meta["step"] == 4 and meta["world_size"] == 2
    (on_two / "dcp" / ".step_00000006.tmp").mkdir()  # as a run killed while saving leaves it
    assert latest_dcp(on_two).name == "step_00000004"


# ---- two ranks in one group ----------------------------------------------------------------
def test_ranks_share_the_bias_and_muon_runs_on_shards(tmp_path):
    ran(torchrun(2, "tests/distributed_worker.py", str(tmp_path)))
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    a, b = (r["balancing"] for r in ranks)
    for step, summed in enumerate(a["summed_counts"]):
        total = [[x + y for x, y in zip(p, q, strict=True)]
                 for p, q in zip(a["local_counts"][step], b["local_counts"][step], strict=True)]
        assert summed == b["summed_counts"][step] == total
    assert a["bias"] == b["bias"]  # in step, after every update
    # the first update moves each expert's bias against its share of the summed counts
    # (the load EMA starts at the even share 1/E; no deadband)
    for counts, moved in zip(a["summed_counts"][0], a["bias"][0], strict=True):
        even = sum(counts) / len(counts)
        assert [(c < even) - (c > even) for c in counts] == [(v > 0) - (v < 0) for v in moved]
        assert any(v != 0 for v in moved)
    for r in (a, b):
        assert "the MoE balancing state differs between ranks" in r["disagreement"]
    for r in ranks:
        assert r["agree"].startswith("rank 1 was started differently from rank 0 (seed differ)")
        assert r["muon_max_difference"] == 0.0  # the gathered matrix: the same steps exactly
    from hymo_mini.analysis.memory import memory_per_gpu

    estimate = memory_per_gpu(tiny("muon"), 2, 4, 16, activations={k: 0.0 for k in (
        "gdn", "mla", "mtp", "head")})
    for r in (a, b):
        assert abs(r["parameter_bytes"] - estimate.parameters) <= 0.01 * estimate.parameters
        assert abs(r["optimizer_bytes"] - estimate.optimizer) <= 0.01 * estimate.optimizer


# ---- bad input: one line on rank 0, nobody left waiting -----------------------------------
def each_rank(capsys, monkeypatch, argv: list[str]) -> list[tuple[int, str]]:
    """``hymo-mini train --distributed ARGV`` as rank 0 and as rank 1 of 2, in this
    process: (exit status, stderr) of each. Errors found before the rendezvous need no
    other process: each rank stops by itself."""
    from hymo_mini import cli

    out = []
    for rank in (0, 1):
        for name, value in (("RANK", rank), ("LOCAL_RANK", rank), ("WORLD_SIZE", 2),
                            ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", 1)):
            monkeypatch.setenv(name, str(value))
        status = cli.main(["train", "--distributed", "--no-progress", "--threads", "1", *argv])
        out.append((status, capsys.readouterr().err))
    return out


def test_a_world_larger_than_the_batch(files, tmp_path, capsys, monkeypatch):
    (s0, err0), (s1, err1) = each_rank(capsys, monkeypatch, [
        "--config", str(files["config"]["muon"]), "--data", str(files["text"]),
        "--out", str(tmp_path), "--batch-size", "1"])
    assert s0 == s1 == 2 and not err1  # rank 0 speaks for both
    assert err0.count("\n") == 1 and "batch_size=1 is the global batch" in err0
    assert "--batch-size 2 or more" in err0


def test_a_checkpoint_of_another_config(files, on_two, tmp_path, capsys, monkeypatch):
    shutil.copytree(on_two / "dcp", tmp_path / "dcp")
    (s0, err0), (s1, err1) = each_rank(capsys, monkeypatch, [
        "--config", str(files["config"]["muon"]), "--data", str(files["text"]),
        "--out", str(tmp_path), "--steps", "6", "--resume", "--seq-len", "12"])
    assert s0 == s1 == 2 and not err1
    assert err0.count("\n") == 1 and "was written for another config" in err0
    assert "training.seq_len: checkpoint 16, now 12" in err0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_rank_that_never_comes(files, tmp_path):
    """Rank 0 alone names rank 1; rank 1 alone says that rank 0 is not there."""
    runs = []
    for rank in (0, 1):
        env = {**_env(), "RANK": str(rank), "LOCAL_RANK": "0", "WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
        command = [sys.executable, "-m", "hymo_mini.train", "--distributed", "--config",
                   str(files["config"]["muon"]), "--data", str(files["text"]), "--out",
                   str(tmp_path / f"run{rank}"), "--no-progress", "--timeout", "2"]
        runs.append(subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True))
    outputs = [run.communicate(timeout=60) for run in runs]
    assert [run.returncode for run in runs] == [2, 2]
    alone0, alone1 = (err.strip().splitlines() for _, err in outputs)
    assert len(alone0) == 1 and "rank(s) 1 of 2 did not arrive at the rendezvous" in alone0[0]
    assert "within 2 s" in alone0[0]
    assert len(alone1) == 1 and "rank 1 could not reach the rendezvous" in alone1[0]
    assert "rank 0, which hosts it, did not arrive" in alone1[0]


# ---- one rank, in this process ---------------------------------------------------------------
@pytest.fixture
def world_of_one(monkeypatch):
    from hymo_mini.train.distributed import close_distributed, init_distributed

    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    world = init_distributed("cpu", timeout_s=30)
    yield world
    close_distributed()


def test_sharding_keeps_the_optimizer_split(world_of_one):
    from hymo_mini.model import build_hymo
    from hymo_mini.optim import optimizer_groups
    from hymo_mini.train.distributed import shard_model

    plain = optimizer_groups(build_hymo(tiny()), "muon")
    sharded = optimizer_groups(shard_model(build_hymo(tiny()), world_of_one), "muon")
    for group in ("muon", "adamw_decay", "adamw_no_decay"):
        assert sharded.names(group) == plain.names(group), group


def test_mhc_is_refused(world_of_one):
    from hymo_mini.model import build_hymo
    from hymo_mini.train.distributed import DistributedError, shard_model

    cfg = tiny()
    cfg = replace(cfg, model=replace(cfg.model, hc_mult=2))
    with pytest.raises(DistributedError, match=r"hc_mult > 1 \(mHC\)"):
        shard_model(build_hymo(cfg), world_of_one)


def test_a_batch_that_does_not_split_evenly():
    from hymo_mini.train.distributed import check_batch

    cfg = tiny()
    with pytest.raises(ConfigError, match="does not split evenly over 2 processes: use "
                                          "--batch-size 2 or 4"):
        check_batch(replace(cfg, training=replace(cfg.training, batch_size=3)), 2)
    check_batch(cfg, 4)  # one sequence each is enough


# ---- memory per GPU ---------------------------------------------------------------------------
def test_memory_per_gpu_shards_the_state_and_not_the_activations():
    from hymo_mini.analysis.memory import memory_per_gpu

    cfg = load_config("hymo_750m")
    a = {"gdn": 20_000.0, "mla": 30_000.0, "mtp": 3_000.0, "head": 50_000.0}
    one, eight = (memory_per_gpu(cfg, n, 4 * n, 4096, activations=a) for n in (1, 8))
    for part in ("parameters", "gradients", "optimizer"):
        assert 7.9 < getattr(one, part) / getattr(eight, part) <= 8.0, part
    assert one.activations == eight.activations and one.gathered == eight.gathered
    n_mla = len(cfg.model.mla_positions)
    per_token = (cfg.model.n_layers - n_mla) * 20_000 + n_mla * 30_000 + 3_000 + 50_000
    assert one.activations == 4 * 4097 * per_token
    ckpt = memory_per_gpu(cfg, 1, 4, 4096, activations=a, activation_checkpointing=True)
    assert ckpt.activations < one.activations and ckpt.parameters == one.parameters
    with pytest.raises(ValueError, match="batch=6 must be a multiple of n_gpus=4"):
        memory_per_gpu(cfg, 4, 6, 4096, activations=a)


@pytest.mark.parametrize("dims", [{}, {"dim": 96, "n_layers": 6, "gdn_d_inner": 128,
                                       "moe_inter_dim": 64, "mtp_depth": 1,
                                       "mtp_loss_weights": (0.3,)}])
def test_the_activation_term_matches_what_autograd_keeps(dims):
    """Per-token bytes measured on one block of each kind, times the layers, against the
    bytes the whole model's forward keeps for its backward (bf16, on this CPU)."""
    from hymo_mini.analysis.memory import activation_bytes_per_token, memory_per_gpu, saved_bytes
    from hymo_mini.model import build_hymo

    cfg = tiny()
    cfg = replace(cfg, model=replace(cfg.model, max_seq_len=128, **dims))
    estimate = memory_per_gpu(cfg, 1, 2, 96, activations=activation_bytes_per_token(cfg))
    torch.manual_seed(0)
    model = build_hymo(cfg.model).bfloat16()
    tokens = torch.randint(0, 256, (2, 97))
    kept = saved_bytes(lambda: model.loss(tokens), exclude=list(model.parameters()))
    assert 0.85 < estimate.activations / kept < 1.15


@pytest.mark.parametrize("seq_len", [32, 160])
def test_what_does_not_grow_with_the_tokens_is_counted_once(seq_len):
    """The chunked loss keeps one (V, d) weight-gradient buffer for all its heads whatever
    the tokens: measured apart at two probe lengths, the estimate matches the whole model's kept
    bytes at a short and a long sequence (one per-token figure cannot do both)."""
    from hymo_mini.analysis.memory import activation_bytes_per_token, memory_per_gpu, saved_bytes
    from hymo_mini.model import build_hymo

    cfg = tiny()
    cfg = replace(cfg, model=replace(cfg.model, max_seq_len=256, loss_impl="chunked"))
    a = activation_bytes_per_token(cfg, dtype=torch.float32, tokens=64)
    m = cfg.model
    assert a["head_fixed"] > 0.5 * m.vocab_size * m.dim * 4  # one fp32 (V, d) buffer
    estimate = memory_per_gpu(cfg, 1, 2, seq_len, activations=a)
    torch.manual_seed(0)
    model = build_hymo(m)
    tokens = torch.randint(0, 256, (2, seq_len + 1))  # (b, t + 1)
    kept = saved_bytes(lambda: model.loss(tokens), exclude=list(model.parameters()))
    assert 0.85 < estimate.activations / kept < 1.15
    per_token_only = {k: v for k, v in a.items() if not k.endswith("_fixed")}
    assert memory_per_gpu(cfg, 1, 2, seq_len, activations=per_token_only).activations < (
        estimate.activations)
    with pytest.raises(ValueError, match="tokens must be a whole number >= 1"):
        activation_bytes_per_token(cfg, tokens=0)


def test_the_bf16_policy_computes_in_bf16_and_keeps_fp32_shards(world_of_one, files):
    """MixedPrecisionPolicy(bf16 params, fp32 reduction) runs on the CPU with gloo: the
    blocks compute with bf16 copies, the shards, gradients and moments stay fp32, and the
    first loss is the fp32 one up to bf16 rounding."""
    from hymo_mini.model import build_hymo
    from hymo_mini.optim import build_optimizer
    from hymo_mini.train.distributed import shard_model, sum_expert_counts

    torch.manual_seed(0)
    model = shard_model(build_hymo(tiny("adamw")), world_of_one, bf16=True)
    optimizer = build_optimizer(model, tiny("adamw").optimizer)
    seen = []
    model.layers[1].register_forward_pre_hook(
        lambda module, args: seen.append({p.dtype for p in module.parameters()}))
    batch = files["corpus"].batch(0, 4, 16)
    loss = model.loss(batch)[0]
    loss.backward()
    sum_expert_counts(model)
    optimizer.step()
    assert seen == [{torch.bfloat16}]
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert {p.grad.dtype for p in model.parameters() if p.grad is not None} == {torch.float32}
    assert {v.dtype for s in optimizer.state.values() for v in s.values()
            if torch.is_tensor(v) and v.ndim} == {torch.float32}
    torch.manual_seed(0)
    fp32 = build_hymo(tiny("adamw")).loss(batch)[0]
    assert abs(float(loss.detach()) - float(fp32.detach())) < 0.05


def test_an_existing_run_needs_resume_and_convert_needs_a_checkpoint(files, on_two, tmp_path,
                                                                      capsys, monkeypatch):
    from hymo_mini import cli

    (s0, err0), (s1, err1) = each_rank(capsys, monkeypatch, [
        "--config", str(files["config"]["muon"]), "--data", str(files["text"]),
        "--out", str(on_two)])
    assert s0 == s1 == 2 and not err1
    assert err0.count("\n") == 1 and "step_00000004' exists: pass --resume" in err0
    monkeypatch.delenv("RANK")
    status = cli.main(["convert-checkpoint", str(tmp_path), str(tmp_path / "c.pt")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "no complete DCP checkpoint at" in err


class Planted:
    """A pickle that, loaded by a trusting reader, would create the file ``marker``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_planted_dcp_pickle_never_runs(on_two, tmp_path, capsys):
    import io
    import pickle

    from hymo_mini import cli
    from hymo_mini.train.dcp import TensorOnlyPlanner

    marker = tmp_path / "created_by_the_checkpoint"
    folder = tmp_path / "step_00000004"
    shutil.copytree(on_two / "dcp" / "step_00000004", folder)
    (folder / ".metadata").write_bytes(pickle.dumps(Planted(marker)))
    status = cli.main(["convert-checkpoint", str(folder), str(tmp_path / "c.pt")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "can be read safely" in err
    assert not marker.exists() and not (tmp_path / "c.pt").exists()

    class Item:  # what DCP hands the planner with a non-tensor value
        class dest_index:
            fqn = "optimizer.param_groups.0.lr"

    value = io.BytesIO()
    torch.save(Planted(marker), value)
    value.seek(0)
    with pytest.raises(CheckpointError, match="param_groups.0.lr' of the DCP checkpoint holds"):
        TensorOnlyPlanner().load_bytes(Item, value)
    assert not marker.exists()
