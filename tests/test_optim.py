"""The Muon/AdamW split; Muon against torch.optim.Muon step for step; NorMuon against a direct
float64 computation; bf16 weights; state-dict resume; the partition and setting errors."""

import copy
import inspect
import io
import re

import pytest
import torch
from torch import nn

from hymo_mini.config import OptimizerConfig, load_config, replace
from hymo_mini.model import build_hymo
from hymo_mini.optim import (
    MuonAdamW,
    OptimizerSplitError,
    build_optimizer,
    check_partition,
    clip_and_step,
    newton_schulz5,
    optimizer_groups,
    takes_grad_scale,
)
from hymo_mini.optim.split import _compress

MUON_CFG = OptimizerConfig(name="muon", lr=1e-3, muon_lr=0.02, weight_decay=0.1)
needs_torch_muon = pytest.mark.skipif(not hasattr(torch.optim, "Muon"),
                                      reason=f"torch {torch.__version__} has no torch.optim.Muon "
                                             "to compare with (it came in torch 2.9)")


def _torch_muon(params, **settings):
    """torch.optim.Muon computing NS5 with addmm as ours does (some torch versions make
    that an option, ``use_addmm``, off by default; others always use it)."""
    if "use_addmm" in inspect.signature(torch.optim.Muon).parameters:
        settings["use_addmm"] = True
    return torch.optim.Muon(params, **settings)


@pytest.fixture(scope="module")
def mini():
    torch.manual_seed(0)
    return build_hymo(load_config("hymo_mini"))


@pytest.fixture(scope="module")
def small():
    """Four layers (three GDN, one MLA) with MoE and MTP: every kind, cheap to step."""
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


class Matrices(nn.Module):
    """Bare matrices of the given shapes (tall, wide, square), as parameters m0, m1, ..."""

    def __init__(self, shapes, dtype=torch.float32, seed=0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        for i, shape in enumerate(shapes):
            self.register_parameter(f"m{i}", nn.Parameter((torch.randn(shape, generator=gen)
                                                           * 0.1).to(dtype)))


SHAPES = [(12, 5), (5, 12), (8, 8), (48, 20)]


def _uneven_grads(params, step):
    """Gradients whose rows are on very different scales (where NorMuon differs from Muon)."""
    gen = torch.Generator().manual_seed(100 + step)
    for p in params:
        scale = torch.logspace(-2, 1, p.shape[0])[:, None]  # (rows, 1)
        p.grad = (torch.randn(p.shape, generator=gen) * scale).to(p.dtype)


def _muon_only(model, **settings):
    return MuonAdamW(model, [{"optimizer": "muon", "params": list(model.parameters()),
                              **settings}])


# ---- the split --------------------------------------------------------------------------
def _in_layer(model, layer, leaf):
    """The name of parameter ``leaf`` of ``layers.<layer>``, wherever inside the layer it sits."""
    names = [n for n, _ in model.named_parameters()
             if n.startswith(f"layers.{layer}.") and n.endswith(f".{leaf}")]
    assert len(names) == 1, (layer, leaf, names)
    return names[0]


def test_split_of_the_mini_model(mini):
    c = mini.config
    table = optimizer_groups(mini)
    mla = [f"layers.{i}.attn.{w}.weight" for i in c.mla_positions
           for w in ("wq_a", "wq_b", "wkv_a", "wkv_b", "wo")]
    gdn = [_in_layer(mini, i, f"{w}.weight") for i in c.gdn_positions
           for w in ("in_proj", "b_proj", "c_proj", "dt_proj", "g_proj", "out_proj", "skip_proj")]
    assert sorted(table.names("muon")) == sorted(mla + gdn)
    params = dict(mini.named_parameters())
    assert table.counts()["muon"] == (len(mla + gdn), sum(params[n].numel() for n in mla + gdn))
    unique = {id(p): p for p in mini.parameters()}
    assert sum(t for t, _ in table.counts().values()) == len(unique)
    assert sum(n for _, n in table.counts().values()) == sum(p.numel() for p in unique.values())
    rows = {r.name: r for r in table.rows}
    assert rows["embed.weight"].aliases == ("head.weight",)  # tied: one row, on AdamW
    assert rows["embed.weight"].group == "adamw_decay"
    # 2-D but not maps: on AdamW, undecayed
    a, g = c.mla_positions[0], c.gdn_positions[0]
    for name in (f"layers.{a}.attn.q_scale", f"layers.{a}.attn.k_scale",
                 _in_layer(mini, g, "A_log"), f"layers.{a}.moe.gate.weight",
                 _in_layer(mini, g, "dt_bias"), "norm.weight"):
        assert rows[name].group == "adamw_no_decay", name
    for name in (f"layers.{a}.moe.experts.w1", "mtp.blocks.0.w2.weight",
                 _in_layer(mini, g, "conv1d.weight")):
        assert rows[name].group == "adamw_decay", name


def test_split_follows_modules_not_names():
    cfg = load_config("hymo_mini").model
    delta = build_hymo(replace(cfg, gdn_rule="delta", n_layers=4))
    names = optimizer_groups(delta).names("muon")
    beta = _in_layer(delta, delta.config.gdn_positions[0], "beta_proj.weight")
    assert beta in names  # a new GDN matrix: Muon, by rule
    adamw_only = optimizer_groups(delta, "adamw")
    assert adamw_only.names("muon") == []
    assert set(names) <= set(adamw_only.names("adamw_decay"))


def test_frozen_parameters_are_left_out(small):
    model = copy.deepcopy(small)
    a = model.config.mla_positions[0]
    model.layers[a].attn.wo.weight.requires_grad_(False)
    table = optimizer_groups(model)
    assert f"layers.{a}.attn.wo.weight" not in table.names("muon")
    build_optimizer(model, MUON_CFG)  # the check accepts the frozen tensor's absence


def test_table_lists_every_tensor_once(mini):
    table = optimizer_groups(mini)
    summary = table.summary()
    assert sum(n for _, _, _, n, _, _, _ in summary) == len(table.rows)
    assert sum(p for _, _, _, _, p, _, _ in summary) == sum(r.numel for r in table.rows)
    assert "embed.weight = head.weight" in str(table)  # the tied tensor shows both names
    assert "0x" not in str(table) and "0x" not in table._repr_html_()
    assert table._repr_html_().count("<tr>") == len(summary) + 1


def test_compress_names():
    assert _compress(["a.1.w", "a.2.w", "a.3.w"]) == ["a.{1-3}.w"]
    assert _compress(["a.0.b.1.w", "a.0.b.2.w", "a.4.b.1.w", "a.4.b.2.w"]) == ["a.{0,4}.b.{1,2}.w"]
    # not a full product: listed one by one rather than claiming a.4.b.2.w exists
    assert _compress(["a.0.b.1.w", "a.0.b.2.w", "a.4.b.1.w"]) == ["a.0.b.1.w", "a.0.b.2.w",
                                                                   "a.4.b.1.w"]


# ---- Muon against torch.optim.Muon -------------------------------------------------------
def test_newton_schulz_keeps_directions_and_evens_singular_values():
    gen = torch.Generator().manual_seed(0)
    for shape in SHAPES:
        m = torch.randn(shape, generator=gen) @ torch.diag(torch.logspace(-1, 1, shape[1]))
        o = newton_schulz5(m).float()  # (rows, cols)
        assert o.shape == m.shape and o.dtype == torch.float32
        s = torch.linalg.svdvals(o)
        assert float(s.min()) > 0.5 and float(s.max()) < 1.5, (shape, s)
        u, _, vh = torch.linalg.svd(m, full_matrices=False)
        assert float((o * (u @ vh)).sum() / (o.norm() * (u @ vh).norm())) > 0.95  # ≈ U Vᵀ


@needs_torch_muon
@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
@pytest.mark.parametrize("adjust_lr_fn", [None, "match_rms_adamw"])
def test_muon_equals_torch_muon_step_for_step(nesterov, weight_decay, adjust_lr_fn):
    ours, ref = Matrices(SHAPES), Matrices(SHAPES)
    settings = {"weight_decay": weight_decay, "nesterov": nesterov, "adjust_lr_fn": adjust_lr_fn}
    opt = _muon_only(ours, lr=0.02, **settings)
    torch_opt = _torch_muon(ref.parameters(), lr=0.02, **settings)
    for step in range(4):
        for o, model in ((opt, ours), (torch_opt, ref)):
            o.param_groups[0]["lr"] = 0.02 * (4 - step) / 4  # a schedule: the rate changes
            _uneven_grads(model.parameters(), step)
        opt.step()
        torch_opt.step()
        for a, b in zip(ours.parameters(), ref.parameters(), strict=True):
            assert torch.equal(a, b), (step, tuple(a.shape))


@needs_torch_muon
def test_muon_on_bf16_weights_equals_torch_muon():
    ours, ref = Matrices(SHAPES, torch.bfloat16), Matrices(SHAPES, torch.bfloat16)
    opt, torch_opt = _muon_only(ours, lr=0.02), _torch_muon(ref.parameters(), lr=0.02)
    for step in range(3):
        _uneven_grads(ours.parameters(), step)
        _uneven_grads(ref.parameters(), step)
        opt.step()
        torch_opt.step()
    for a, b in zip(ours.parameters(), ref.parameters(), strict=True):
        assert a.dtype == torch.bfloat16 and torch.equal(a, b)


def test_momentum_buffer_is_not_overwritten_by_the_orthogonalisation():
    """Without Nesterov M is the buffer itself; on bf16 weights torch.optim.Muon (2.13) divides
    it in place (pytorch/pytorch#194664). Here the buffer stays the running mean."""
    for dtype in (torch.float32, torch.bfloat16):
        model = Matrices(SHAPES, dtype)
        opt = _muon_only(model, nesterov=False)
        _uneven_grads(model.parameters(), 0)
        opt.step()
        for p in model.parameters():
            expected = torch.zeros_like(p.grad).lerp_(p.grad, 1 - 0.95)
            assert torch.equal(opt.state[p]["momentum_buffer"], expected), dtype


@needs_torch_muon
def test_muon_step_changes_only_muon_params_as_torch_muon_would(small):
    ours, ref = copy.deepcopy(small), copy.deepcopy(small)
    opt = build_optimizer(ours, MUON_CFG)
    muon_names = set(optimizer_groups(ref).names("muon"))
    ref_params = dict(ref.named_parameters())
    direct = _torch_muon([ref_params[n] for n in sorted(muon_names)],
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


@needs_torch_muon
def test_full_step_equals_muon_plus_adamw(small):
    ours, ref = copy.deepcopy(small), copy.deepcopy(small)
    opt = build_optimizer(ours, MUON_CFG)
    table = optimizer_groups(ref)
    p = dict(ref.named_parameters())
    c = MUON_CFG
    muon = _torch_muon([p[n] for n in table.names("muon")], lr=c.muon_lr,
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
    assert [g["lr"] for g in opt.param_groups] == [c.muon_lr, c.lr, c.lr]
    assert [g["initial_lr"] for g in opt.param_groups] == [c.muon_lr, c.lr, c.lr]


def test_adamw_config_gives_plain_adamw(mini):
    opt = build_optimizer(mini, OptimizerConfig(name="adamw", weight_decay=0.05))
    assert type(opt) is torch.optim.AdamW
    assert [g["weight_decay"] for g in opt.param_groups] == [0.05, 0.0]
    assert sum(len(g["params"]) for g in opt.param_groups) == len(list(mini.parameters()))


# ---- NorMuon -----------------------------------------------------------------------------
def test_normuon_one_step_equal_row_rms_and_muon_norm():
    lr, wd = 0.05, 0.1
    nor_model, muon_model = Matrices(SHAPES), Matrices(SHAPES)
    nor = _muon_only(nor_model, lr=lr, weight_decay=wd, normuon=True)
    muon = _muon_only(muon_model, lr=lr, weight_decay=wd)
    before = [p.detach().clone() for p in nor_model.parameters()]
    _uneven_grads(nor_model.parameters(), 0)
    _uneven_grads(muon_model.parameters(), 0)
    nor.step()
    muon.step()
    for w0, a, b in zip(before, nor_model.parameters(), muon_model.parameters(), strict=True):
        upd_nor = w0.double() * (1 - lr * wd) - a.detach().double()  # (rows, cols)
        upd_muon = w0.double() * (1 - lr * wd) - b.detach().double()
        rms_nor = upd_nor.square().mean(dim=1).sqrt()  # (rows,)
        rms_muon = upd_muon.square().mean(dim=1).sqrt()
        assert float(rms_muon.max() / rms_muon.min()) > 1.2  # Muon's rows are uneven here
        assert float(rms_nor.max() / rms_nor.min()) < 1 + 1e-4  # NorMuon's are equal
        assert abs(float(upd_nor.norm() / upd_muon.norm()) - 1) < 1e-5  # same total size


def _normuon_reference(shapes, steps, lr, wd, beta2, dtype):
    """NorMuon computed directly: the same momentum and NS5 as Muon (checked above against
    torch), then v ← β₂ v + (1 − β₂) mean(O²), Ô = O / √v rescaled to |O|, and
    W ← W (1 − lr λ) − lr √max(1, rows/cols) Ô, all of it after NS5 in float64."""
    model = Matrices(shapes, dtype)
    weights = [p.detach().double() for p in model.parameters()]
    bufs = [torch.zeros_like(p) for p in model.parameters()]
    vs = [torch.zeros(p.shape[0], dtype=torch.float64) for p in model.parameters()]
    for step in range(steps):
        _uneven_grads(model.parameters(), step)
        for i, p in enumerate(model.parameters()):
            rows, cols = p.shape
            bufs[i].lerp_(p.grad, 1 - 0.95)
            o = newton_schulz5(p.grad.lerp(bufs[i], 0.95)).double()  # (rows, cols)
            vs[i] = beta2 * vs[i] + (1 - beta2) * o.square().mean(dim=1)
            o_hat = o / vs[i].sqrt()[:, None]
            o_hat = o_hat * o.norm() / o_hat.norm()
            rate = lr(step) * max(1.0, rows / cols) ** 0.5
            weights[i] = weights[i] * (1 - lr(step) * wd) - rate * o_hat
    return weights, vs


def test_normuon_matches_a_direct_float64_computation_over_steps():
    wd, beta2, steps = 0.1, 0.9, 4
    lr = lambda step: 0.02 * (step + 1) / steps  # noqa: E731  (a warmup: the rate changes)
    model = Matrices(SHAPES)
    opt = _muon_only(model, lr=0.02, weight_decay=wd, normuon=True, normuon_beta2=beta2)
    for step in range(steps):
        opt.param_groups[0]["lr"] = lr(step)
        _uneven_grads(model.parameters(), step)
        opt.step()
    weights, vs = _normuon_reference(SHAPES, steps, lr, wd, beta2, torch.float32)
    for p, w, v in zip(model.parameters(), weights, vs, strict=True):
        assert _rel(p.detach(), w) < 1e-6, tuple(p.shape)
        assert _rel(opt.state[p]["normuon_v"], v) < 1e-6, tuple(p.shape)


def test_normuon_on_bf16_weights_uses_the_true_update():
    """The row statistics come from O itself, not from a difference of bf16 weights: they match
    the float64 computation to bf16 precision even where a step moves W by a few bf16 steps
    (recovering O from the change of the bf16 weights, as an earlier version did, misses this
    bound several times over)."""
    wd, beta2, steps = 0.1, 0.95, 3
    lr = lambda step: 0.002  # noqa: E731
    model = Matrices(SHAPES, torch.bfloat16)
    opt = _muon_only(model, lr=0.002, weight_decay=wd, normuon=True, normuon_beta2=beta2)
    for step in range(steps):
        _uneven_grads(model.parameters(), step)
        opt.step()
    weights, vs = _normuon_reference(SHAPES, steps, lr, wd, beta2, torch.bfloat16)
    for p, w, v in zip(model.parameters(), weights, vs, strict=True):
        assert p.dtype == opt.state[p]["normuon_v"].dtype == torch.bfloat16
        assert _rel(opt.state[p]["normuon_v"], v) < 1e-2, tuple(p.shape)
        assert _rel(p.detach(), w) < 1e-2, tuple(p.shape)  # W is rounded to bf16 twice a step


# ---- one optimizer, one state dict ---------------------------------------------------------
def _round_trip(model, opt):
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


@pytest.mark.parametrize("name,normuon", [("muon", False), ("muon", True), ("adamw", False)])
def test_state_dict_round_trip_gives_identical_steps(small, name, normuon):
    cfg = replace(MUON_CFG, name=name)
    model = copy.deepcopy(small)
    opt = build_optimizer(model, cfg, normuon=normuon)
    for step in range(2):
        _grads(model, seed=step)
        opt.step()
    saved = _round_trip(model, opt)
    if name == "muon":  # Muon's momenta, NorMuon's row statistics and Adam's moments, in one
        keys = set().union(*(s.keys() for s in saved["opt"]["state"].values()))
        assert {"momentum_buffer", "exp_avg", "exp_avg_sq"} <= keys
        assert ("normuon_v" in keys) == normuon
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


def test_bf16_normuon_resumes_identically():
    model = Matrices(SHAPES, torch.bfloat16)
    opt = _muon_only(model, lr=0.02, normuon=True)
    for step in range(2):
        _uneven_grads(model.parameters(), step)
        opt.step()
    saved = _round_trip(model, opt)
    resumed = Matrices(SHAPES, torch.bfloat16, seed=1)
    resumed.load_state_dict(saved["model"])
    opt2 = _muon_only(resumed, lr=0.02, normuon=True)
    opt2.load_state_dict(saved["opt"])
    for step in range(2, 4):
        for m, o in ((model, opt), (resumed, opt2)):
            _uneven_grads(m.parameters(), step)
            o.step()
    for a, b in zip(model.parameters(), resumed.parameters(), strict=True):
        assert torch.equal(a, b)


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


# ---- bad input ---------------------------------------------------------------------------
def _muon_groups(model):
    return [{"optimizer": "muon" if g["group"] == "muon" else "adamw",
             "params": list(g["params"]), "lr": 1e-3, "weight_decay": 0.0}
            for g in optimizer_groups(model).param_groups()]


def test_parameter_in_no_group_is_an_error(mini):
    groups = _muon_groups(mini)
    name = f"layers.{mini.config.mla_positions[-1]}.attn.wo.weight"
    assert any(x[0] == name for x in groups[0]["params"])  # the muon group holds it
    groups[0]["params"] = [x for x in groups[0]["params"] if x[0] != name]
    with pytest.raises(OptimizerSplitError, match=f"in no group: {re.escape(name)}"):
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


@pytest.mark.parametrize("setting,value,message", [
    ("momentun", 0.9, r"groups\[0\] \(muon\) has unknown setting\(s\) \['momentun'\]"),
    ("momentum", 1.0, r"groups\[0\]\['momentum'\] must be in \[0, 1\), got 1.0"),
    ("lr", -1.0, r"groups\[0\]\['lr'\] must be >= 0"),
    ("ns_steps", 0, r"groups\[0\]\['ns_steps'\] must be a whole number >= 1"),
    ("adjust_lr_fn", "rms", r"groups\[0\]\['adjust_lr_fn'\] must be None, 'original' or"),
])
def test_muon_setting_errors(setting, value, message):
    model = Matrices(SHAPES)
    with pytest.raises(ValueError, match=message):
        _muon_only(model, **{setting: value})


def test_muon_takes_matrices_only(mini):
    groups = _muon_groups(mini)
    groups[0]["params"] = groups[0]["params"] + [("norm.weight", mini.norm.weight)]
    groups[2]["params"] = [x for x in groups[2]["params"] if x[0] != "norm.weight"]
    with pytest.raises(ValueError, match=r"norm\.weight has shape \(\d+,\); Muon takes 2-D"):
        MuonAdamW(mini, groups)


def test_argument_errors(mini):
    with pytest.raises(TypeError, match="config must be an OptimizerConfig"):
        build_optimizer(mini, load_config("hymo_mini"))
    with pytest.raises(ValueError, match="optimizer must be 'muon' or 'adamw'"):
        optimizer_groups(mini, "sgd")
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        optimizer_groups("model")
    with pytest.raises(ValueError, match=r"normuon_beta2'\] must be in \[0, 1\)"):
        MuonAdamW(mini, _muon_groups(mini), normuon=True, normuon_beta2=1.0)
    with pytest.raises(TypeError, match="normuon must be True or False"):
        build_optimizer(mini, MUON_CFG, normuon="yes")


def test_groups_may_give_params_as_a_generator_or_a_tensor():
    model = Matrices(SHAPES[:2])
    opt = MuonAdamW(model, [{"optimizer": "muon", "params": model.m0},
                            {"optimizer": "adamw", "params": (p for p in [model.m1])}])
    assert [len(g["params"]) for g in opt.param_groups] == [1, 1]


# ---- the clip folded into the fused step ------------------------------------------------
def _pair(fused: bool):
    torch.manual_seed(0)
    a = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 3))
    b = copy.deepcopy(a)
    return [(m, torch.optim.AdamW(m.parameters(), lr=1e-2, fused=fused)) for m in (a, b)]


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("loss_scale", [100.0, 1e-3])  # clipped / under the bound
def test_clip_and_step_equals_clip_then_step(fused, loss_scale):
    (m1, o1), (m2, o2) = _pair(fused)
    assert takes_grad_scale(o2) is fused
    for _ in range(4):
        x = torch.randn(4, 8)
        for m in (m1, m2):
            (m(x).square().sum() * loss_scale).backward()
        n1 = torch.nn.utils.clip_grad_norm_(m1.parameters(), 0.5)
        o1.step()
        n2 = clip_and_step(o2, m2.parameters(), 0.5)
        assert not hasattr(o2, "grad_scale")  # the hook is cleared after the step
        torch.testing.assert_close(n2, n1, rtol=1e-6, atol=0)
        o1.zero_grad()
        o2.zero_grad()
        for p, q in zip(m1.parameters(), m2.parameters(), strict=True):
            torch.testing.assert_close(q, p, rtol=1e-6, atol=1e-7)


def test_clip_and_step_skips_parameters_without_gradients():
    (m, opt), _ = _pair(True)
    m[1](torch.randn(2, 16)).sum().backward()  # the first layer gets no gradient
    before = m[0].weight.detach().clone()
    clip_and_step(opt, m.parameters(), 1.0)
    assert torch.equal(m[0].weight, before)


def test_clip_and_step_rejects_a_bad_max_norm():
    (m, opt), _ = _pair(True)
    with pytest.raises(ValueError, match=r"max_norm must be > 0, got 0"):
        clip_and_step(opt, m.parameters(), 0)
