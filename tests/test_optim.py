"""The Muon/AdamW split, MuonAdamW against torch.optim.Muon and AdamW used directly,
NorMuon against a float64 loop, state-dict resume, and the partition errors."""

import copy
import io

import pytest
import torch
from torch import nn

from hymo_mini.config import OptimizerConfig, load_config, replace
from hymo_mini.model import build_hymo
from hymo_mini.optim import (
    MuonAdamW,
    OptimizerSplitError,
    _compress,
    build_optimizer,
    check_partition,
    optimizer_groups,
)

MUON_CFG = OptimizerConfig(name="muon", lr=1e-3, muon_lr=0.02, weight_decay=0.1)


@pytest.fixture(scope="module")
def mini():
    torch.manual_seed(0)
    return build_hymo(load_config("hymo_mini"))


@pytest.fixture(scope="module")
def small():
    """Four layers (MLA, then three GDN) with MoE and MTP: every kind, cheap to step."""
    torch.manual_seed(0)
    return build_hymo(replace(load_config("hymo_mini").model, n_layers=4))


def _grads(model, seed=0):
    """Fill .grad from the model's loss on a small random batch."""
    model.zero_grad(set_to_none=True)
    tokens = torch.randint(0, model.config.vocab_size, (2, 8),
                           generator=torch.Generator().manual_seed(seed))
    model.loss(tokens)[0].backward()


def _rel(a, b):
    return float((a.double() - b.double()).square().mean().sqrt()
                 / b.double().square().mean().sqrt().clamp_min(1e-30))


# ---- the split --------------------------------------------------------------------------
def test_split_of_the_mini_model(mini):
    c = mini.config
    table = optimizer_groups(mini)
    mla = [f"layers.{i}.attn.{w}.weight" for i in c.mla_positions
           for w in ("wq_a", "wq_b", "wkv_a", "wkv_b", "wo")]
    gdn = [f"layers.{i}.mixer.{w}.weight" for i in c.gdn_positions
           for w in ("in_proj", "b_proj", "c_proj", "dt_proj", "g_proj", "out_proj", "skip_proj")]
    assert sorted(table.names("muon")) == sorted(mla + gdn)
    assert table.counts() == {"muon": (52, 169_728), "adamw_decay": (43, 239_104),
                              "adamw_no_decay": (39, 1_888)}
    unique = {id(p): p for p in mini.parameters()}
    assert sum(t for t, _ in table.counts().values()) == len(unique)
    assert sum(n for _, n in table.counts().values()) == sum(p.numel() for p in unique.values())
    rows = {r.name: r for r in table.rows}
    assert rows["embed.weight"].aliases == ("head.weight",)  # tied: one row, on AdamW
    assert rows["embed.weight"].group == "adamw_decay"
    # 2-D but not maps: on AdamW, undecayed
    for name in ("layers.0.attn.q_scale", "layers.0.attn.k_scale", "layers.1.mixer.A_log",
                 "layers.0.moe.gate.weight", "layers.1.mixer.dt_bias", "norm.weight"):
        assert rows[name].group == "adamw_no_decay", name
    for name in ("layers.0.moe.experts.0.w1.weight", "mtp.blocks.0.w2.weight",
                 "layers.1.mixer.conv1d.weight"):
        assert rows[name].group == "adamw_decay", name


def test_split_follows_modules_not_names():
    cfg = load_config("hymo_mini").model
    delta = build_hymo(replace(cfg, gdn_rule="delta", n_layers=4))
    names = optimizer_groups(delta).names("muon")
    assert "layers.1.mixer.beta_proj.weight" in names  # a new GDN matrix goes to Muon by rule
    adamw_only = optimizer_groups(delta, "adamw")
    assert adamw_only.names("muon") == []
    assert set(names) <= set(adamw_only.names("adamw_decay"))


def test_frozen_parameters_are_left_out(small):
    model = copy.deepcopy(small)
    model.layers[0].attn.wo.weight.requires_grad_(False)
    table = optimizer_groups(model)
    assert "layers.0.attn.wo.weight" not in table.names("muon")
    build_optimizer(model, MUON_CFG)  # the check accepts the frozen tensor's absence


def test_table_text_and_html(mini):
    table = optimizer_groups(mini)
    text = str(table)
    assert text.splitlines()[0].startswith("optimizer 'muon': muon 52 tensors 169,728 params")
    assert "layers.{1,2,3,5,6,7}.mixer.b_proj.weight" in text
    assert "embed.weight = head.weight" in text
    assert "0x" not in text and "0x" not in table._repr_html_()
    assert table._repr_html_().count("<tr>") == len(table.summary()) + 1


def test_compress_names():
    assert _compress(["a.1.w", "a.2.w", "a.3.w"]) == ["a.{1-3}.w"]
    assert _compress(["a.0.b.1.w", "a.0.b.2.w", "a.4.b.1.w", "a.4.b.2.w"]) == ["a.{0,4}.b.{1,2}.w"]
    # not a full product: listed one by one rather than claiming a.4.b.2.w exists
    assert _compress(["a.0.b.1.w", "a.0.b.2.w", "a.4.b.1.w"]) == ["a.0.b.1.w", "a.0.b.2.w",
                                                                   "a.4.b.1.w"]


# ---- MuonAdamW against torch's optimizers used directly -----------------------------------
def test_muon_step_changes_only_muon_params_as_torch_muon_would(small):
    ours, ref = copy.deepcopy(small), copy.deepcopy(small)
    opt = build_optimizer(ours, MUON_CFG)
    muon_names = set(optimizer_groups(ref).names("muon"))
    ref_params = dict(ref.named_parameters())
    direct = torch.optim.Muon([ref_params[n] for n in sorted(muon_names)],
                              lr=MUON_CFG.muon_lr, weight_decay=MUON_CFG.weight_decay)
    before = {n: p.detach().clone() for n, p in ours.named_parameters()}
    for step in range(2):  # the second step uses the momentum buffer
        for model in (ours, ref):
            _grads(model, seed=step)
            for name, p in model.named_parameters():
                if name not in muon_names:
                    p.grad = None  # only the Muon matrices have gradients
        opt.step()
        direct.step()
    for name, p in ours.named_parameters():
        if name in muon_names:
            assert not torch.equal(p, before[name]), name
            assert torch.equal(p, ref_params[name]), name
        else:
            assert torch.equal(p, before[name]), name


def test_full_step_equals_muon_plus_adamw(small):
    ours, ref = copy.deepcopy(small), copy.deepcopy(small)
    opt = build_optimizer(ours, MUON_CFG)
    table = optimizer_groups(ref)
    p = dict(ref.named_parameters())
    c = MUON_CFG
    muon = torch.optim.Muon([p[n] for n in table.names("muon")], lr=c.muon_lr,
                            weight_decay=c.weight_decay)
    adamw = torch.optim.AdamW(
        [{"params": [p[n] for n in table.names("adamw_decay")], "weight_decay": c.weight_decay},
         {"params": [p[n] for n in table.names("adamw_no_decay")], "weight_decay": 0.0}],
        lr=c.lr, betas=c.betas, eps=c.eps)
    for step in range(2):
        _grads(ours, seed=step)
        _grads(ref, seed=step)
        opt.step()
        muon.step()
        adamw.step()
    for (name, a), b in zip(ours.named_parameters(), ref.parameters(), strict=True):
        assert torch.equal(a, b), name
    assert [g["lr"] for g in opt.param_groups] == [0.02, 1e-3, 1e-3]
    assert [g["initial_lr"] for g in opt.param_groups] == [0.02, 1e-3, 1e-3]


def test_adamw_config_gives_plain_adamw(mini):
    opt = build_optimizer(mini, OptimizerConfig(name="adamw", weight_decay=0.05))
    assert type(opt) is torch.optim.AdamW
    assert [g["weight_decay"] for g in opt.param_groups] == [0.05, 0.0]
    assert sum(len(g["params"]) for g in opt.param_groups) == len(list(mini.parameters()))


@pytest.mark.parametrize("name,normuon", [("muon", False), ("muon", True), ("adamw", False)])
def test_state_dict_round_trip_gives_identical_steps(small, name, normuon):
    cfg = replace(MUON_CFG, name=name)
    model = copy.deepcopy(small)
    opt = build_optimizer(model, cfg, normuon=normuon)
    for step in range(2):
        _grads(model, seed=step)
        opt.step()
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=False)
    resumed = copy.deepcopy(small)  # fresh weights, fresh optimizer, then load both
    resumed.load_state_dict(saved["model"])
    opt2 = build_optimizer(resumed, cfg, normuon=normuon)
    opt2.load_state_dict(saved["opt"])
    for step in range(2, 4):
        for m, o in ((model, opt), (resumed, opt2)):
            _grads(m, seed=step)
            for g in o.param_groups:  # a schedule changing the rates must reach both
                g["lr"] = 0.5 * g["initial_lr"]
            o.step()
    for (n, a), b in zip(model.named_parameters(), resumed.parameters(), strict=True):
        assert torch.equal(a, b), n


def test_training_steps_reduce_the_loss():
    cfg = replace(load_config("hymo_mini").model, n_layers=4, mtp_depth=0, mtp_loss_weights=())
    torch.manual_seed(0)
    model = build_hymo(cfg)
    opt = build_optimizer(model, replace(MUON_CFG, lr=3e-3), normuon=True)
    tokens = torch.randint(0, 256, (4, 32), generator=torch.Generator().manual_seed(0))
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = model.loss(tokens)[0]
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0] - 0.5, losses


# ---- NorMuon ---------------------------------------------------------------------------------
class TwoMatrices(nn.Module):
    def __init__(self):
        super().__init__()
        self.tall = nn.Parameter(torch.randn(12, 5) * 0.1)  # rows > cols: rate × sqrt(12/5)
        self.wide = nn.Parameter(torch.randn(5, 12) * 0.1)


def _uneven_grads(model, step):
    gen = torch.Generator().manual_seed(100 + step)
    for p in model.parameters():  # rows on very different scales
        scale = torch.logspace(-2, 1, p.shape[0])[:, None]
        p.grad = torch.randn(p.shape, generator=gen) * scale


def test_normuon_one_step_equal_row_rms_and_muon_norm():
    torch.manual_seed(0)
    model = TwoMatrices()
    plain = copy.deepcopy(model)
    lr, wd = 0.05, 0.1
    group = lambda m: [{"optimizer": "muon", "params": list(m.parameters()), "lr": lr,  # noqa: E731
                        "weight_decay": wd}]
    nor, muon = MuonAdamW(model, group(model), normuon=True), MuonAdamW(plain, group(plain))
    before = [p.detach().clone() for p in model.parameters()]
    _uneven_grads(model, 0)
    _uneven_grads(plain, 0)
    nor.step()
    muon.step()
    for w0, a, b in zip(before, model.parameters(), plain.parameters(), strict=True):
        a, b = a.detach(), b.detach()
        upd_nor, upd_muon = w0 * (1 - lr * wd) - a, w0 * (1 - lr * wd) - b
        rms_nor = upd_nor.square().mean(dim=1).sqrt()
        rms_muon = upd_muon.square().mean(dim=1).sqrt()
        assert float(rms_muon.max() / rms_muon.min()) > 1.2  # Muon's rows are uneven here
        assert float(rms_nor.max() / rms_nor.min()) < 1 + 1e-4  # NorMuon's are equal
        assert abs(float(upd_nor.norm() / upd_muon.norm()) - 1) < 1e-5  # same total size


def test_normuon_matches_a_float64_loop_over_steps():
    """Several steps with a changing rate: against v ← β v + (1-β) mean(O²), Ô = O/√v
    rescaled to |O|, W ← W(1 - lr λ) - lr' Ô, where O comes from torch.optim.Muon on an
    independent tensor fed the same gradients (O depends on the gradients only)."""
    torch.manual_seed(1)
    model = TwoMatrices()
    wd, beta2 = 0.1, 0.9
    opt = MuonAdamW(model, [{"optimizer": "muon", "params": list(model.parameters()),
                             "lr": 0.02, "weight_decay": wd}], normuon=True,
                    normuon_beta2=beta2)
    shadows = [torch.zeros(p.shape, requires_grad=True) for p in model.parameters()]
    shadow_opt = torch.optim.Muon(shadows, lr=1.0, weight_decay=0.0)  # applies sqrt(max(1, r/c)) O
    ref = [p.detach().double().clone() for p in model.parameters()]
    v = [torch.zeros(p.shape[0], dtype=torch.float64) for p in model.parameters()]
    for step in range(4):
        lr = 0.02 * (step + 1) / 4
        opt.param_groups[0]["lr"] = lr
        _uneven_grads(model, step)
        for s, p in zip(shadows, model.parameters(), strict=True):
            s.grad = p.grad.clone()
        olds = [s.detach().clone() for s in shadows]
        shadow_opt.step()
        opt.step()
        params = model.parameters()
        for i, (s, old, p) in enumerate(zip(shadows, olds, params, strict=True)):
            rows, cols = p.shape
            o = (old - s.detach()).double() / max(1.0, rows / cols) ** 0.5  # Muon's O
            v[i] = beta2 * v[i] + (1 - beta2) * o.square().mean(dim=1)
            o_hat = o / v[i].sqrt()[:, None]
            o_hat = o_hat * o.norm() / o_hat.norm()
            ref[i] = ref[i] * (1 - lr * wd) - lr * max(1.0, rows / cols) ** 0.5 * o_hat
            assert _rel(p.detach(), ref[i]) < 1e-5, (step, i)


# ---- bad input ---------------------------------------------------------------------------
def _muon_groups(model):
    return [{"optimizer": "muon" if g["group"] == "muon" else "adamw",
             "params": list(g["params"]), "lr": 1e-3, "weight_decay": 0.0}
            for g in optimizer_groups(model).param_groups()]


def test_parameter_in_no_group_is_an_error(mini):
    groups = _muon_groups(mini)
    groups[0]["params"] = [x for x in groups[0]["params"] if x[0] != "layers.4.attn.wo.weight"]
    with pytest.raises(OptimizerSplitError, match=r"in no group: layers\.4\.attn\.wo\.weight"):
        MuonAdamW(mini, groups)


def test_parameter_in_two_groups_is_an_error(mini):
    groups = _muon_groups(mini)
    head = ("head.weight", mini.head.weight)  # the tied tensor again, under its other name
    groups[0]["params"] = groups[0]["params"] + [head]
    twice = r"more than one group: embed\.weight = head\.weight \(groups \[0, 1\]\)"
    with pytest.raises(OptimizerSplitError, match=twice):
        MuonAdamW(mini, groups)


def test_tied_tensor_under_its_other_name_counts_once(mini):
    groups = _muon_groups(mini)
    groups[1]["params"] = [("head.weight", mini.head.weight) if n == "embed.weight" else (n, p)
                           for n, p in groups[1]["params"]]
    check_partition(mini, groups)  # no error: same tensor


def test_foreign_and_malformed_groups_are_errors(mini):
    groups = _muon_groups(mini)
    groups[1]["params"] = groups[1]["params"] + [torch.zeros(3, requires_grad=True)]
    with pytest.raises(OptimizerSplitError, match=r"not a trainable parameter of the model"):
        check_partition(mini, groups)
    with pytest.raises(OptimizerSplitError, match=r"groups\[0\] must be a dict with 'params'"):
        check_partition(mini, [[]])
    groups = _muon_groups(mini)
    groups[0]["optimizer"] = "sgd"
    with pytest.raises(ValueError, match=r"groups\[0\]\['optimizer'\] must be 'muon' or 'adamw'"):
        MuonAdamW(mini, groups)


def test_argument_errors(mini):
    with pytest.raises(TypeError, match="config must be an OptimizerConfig"):
        build_optimizer(mini, load_config("hymo_mini"))
    with pytest.raises(ValueError, match="optimizer must be 'muon' or 'adamw'"):
        optimizer_groups(mini, "sgd")
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        optimizer_groups("model")
    with pytest.raises(ValueError, match=r"normuon_beta2 must be in \[0, 1\)"):
        MuonAdamW(mini, _muon_groups(mini), normuon=True, normuon_beta2=1.0)
    with pytest.raises(TypeError, match="normuon must be True or False"):
        build_optimizer(mini, MUON_CFG, normuon="yes")


# ---- figures -----------------------------------------------------------------------------
def _fake_result(steps=10):
    def variant(offset, muon_lr):
        return {"lr": 3e-3, "muon_lr": muon_lr, "train_step": list(range(1, steps + 1)),
                "train_main": [5 - 0.1 * i + offset for i in range(steps)],
                "val_step": [0, 5, 10], "val_loss": [5.5, 4.6 + offset, 4.1 + offset]}
    return {"settings": {"config": "hymo_mini", "steps": steps, "batch_size": 8, "seq_len": 128},
            "hardware": {"cpu": "test cpu", "torch_threads": 1, "torch": "x"},
            "date": "2026-01-01", "command": "python benchmarks/optimizers.py",
            "variants": {"adamw": variant(0.0, None), "muon": variant(-0.1, 0.02)}}


def test_figures(mini):
    from matplotlib.figure import Figure

    from hymo_mini.viz.optim_plots import FIGURES, optimizer_comparison, split_figure

    fig = optimizer_comparison(_fake_result())
    assert isinstance(fig, Figure)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["AdamW on everything  (lr 0.003)",
                      "Muon (MLA + GDN matrices) + AdamW  (muon_lr 0.02, lr 0.003)"]
    assert [t.get_text() for t in fig.axes[1].texts] == ["4.100", "4.000"]  # final val losses
    assert isinstance(split_figure(optimizer_groups(mini)), Figure)
    assert "optimizers_cpu.png" in FIGURES
