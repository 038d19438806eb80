"""The figure functions of chapters 01-07 (hymo_book.plots.architecture, .attention, .gdn):
each returns a Figure whose content follows its arguments, and bad values raise."""

import math

import numpy as np
import pytest
from hymo_book.plots import architecture
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from hymo_mini.analysis.costs import stack_cost
from hymo_mini.config import ConfigError, load_config, replace

PROD = load_config("hymo_750m").model


def _boxes(fig: Figure) -> list[Rectangle]:
    return [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]


def _texts(fig: Figure) -> str:
    parts = [fig._suptitle.get_text() if fig._suptitle else ""]
    for ax in fig.axes:
        parts.append(ax.get_title())
        parts += [t.get_text() for t in ax.texts]
    return " | ".join(parts)


# ---- chapters 01, 13: architecture --------------------------------------------------------------
@pytest.mark.parametrize("position", ["last", "first"])  # the figure's layout, the text's
def test_layer_map_draws_one_box_per_layer_coloured_by_type(position):
    fig = architecture.layer_map_figure(mla_every=4, mla_position=position, n_layers=32)
    boxes = _boxes(fig)
    assert len(boxes) == 32
    mla = [i for i, b in enumerate(boxes) if b.get_facecolor()[:3] == pytest.approx(
        tuple(int(architecture.COLOURS["MLA"][k:k + 2], 16) / 255 for k in (1, 3, 5)))]
    assert mla == list(replace(PROD, mla_position=position).mla_positions)
    two_rows = architecture.layer_map_figure(mla_position=position, compare_position="first",
                                             n_layers=8)
    assert len(_boxes(two_rows)) == 16
    hatched = architecture.layer_map_figure(mla_position=position, nope_hybrid_gdn=True)
    nope = replace(PROD, mla_position=position, nope_hybrid_gdn=True).nope_gdn_positions
    assert [i for i, b in enumerate(_boxes(hatched)) if b.get_hatch()] == list(nope)
    assert len(_boxes(architecture.layer_map_figure(mla_every=0, n_layers=12))) == 12


def test_layer_map_rejects_an_impossible_layout():
    with pytest.raises(ConfigError, match="mla_position"):
        architecture.layer_map_figure(mla_every=4, mla_position="middle")


def test_cost_curves_title_reports_the_whole_stack():
    fig = architecture.cost_curves_figure(gdn_per_mla=3, T=4096)
    hybrid = stack_cost(PROD, 4096, feed_forward=True).flops
    all_mla = stack_cost(PROD, 4096, 0, feed_forward=True).flops
    all_mha = stack_cost(PROD, 4096, 0, attention="mha", feed_forward=True).flops
    assert f"{hybrid / all_mla:.0%} of all-MLA, {hybrid / all_mha:.0%} of all-MHA" in _texts(fig)
    assert len(fig.axes) == 2 and len(fig.axes[0].lines) == 4  # 3 stacks + the T marker
    other = architecture.cost_curves_figure(gdn_per_mla=7, T=1000)
    assert "28 GDN + 4 × (MLA + MoE)" in [line.get_label() for line in other.axes[0].lines]
    assert "T=1,000" in _texts(other)


def test_whole_stack_costs_are_the_cost_model():
    costs = architecture.whole_stack_costs(PROD, 4096)
    assert [c.flops for c in costs.values()] == [
        stack_cost(PROD, 4096, 0, attention="mha", feed_forward=True).flops,
        stack_cost(PROD, 4096, 0, feed_forward=True).flops,
        stack_cost(PROD, 4096, 3, feed_forward=True).flops]


def test_hybrid_share_lines_end_near_the_mla_fraction():
    fig = architecture.hybrid_share_figure(ratios=(3,), baseline="mla")
    curve = fig.axes[0].lines[0]
    assert curve.get_ydata()[-1] == pytest.approx(
        stack_cost(PROD, 2**17, feed_forward=True).flops
        / stack_cost(PROD, 2**17, 0, feed_forward=True).flops)
    assert 0.25 < curve.get_ydata()[-1] < 0.3
    mha = architecture.hybrid_share_figure(ratios=(3,)).axes[0].lines[0].get_ydata()
    assert all(0.25 < y < curve.get_ydata()[i] for i, y in enumerate(mha))
    with pytest.raises(ValueError, match="baseline"):
        architecture.hybrid_share_figure(baseline="gqa")


def test_softcap_gradient_values():
    assert float(architecture.softcap_gradient(5, 15)) == pytest.approx(1 - math.tanh(1 / 3) ** 2)
    assert float(architecture.softcap_gradient(5, 15)) == pytest.approx(0.8966, abs=1e-4)
    assert float(architecture.softcap_gradient(10, 15)) == pytest.approx(0.6604, abs=1e-4)
    assert float(architecture.softcap_gradient(15, 15)) == pytest.approx(0.42, abs=1e-2)
    grads = architecture.softcap_gradient(np.array([0.0, 30.0]), 15)
    assert grads[0] == 1 and 0 < grads[1] < 0.1


def test_softcap_figure_follows_the_cap():
    fig = architecture.softcap_figure(cap=15)
    assert "0.897 at 5" in _texts(fig) and "0.660 at 10" in _texts(fig)
    curve = fig.axes[0].lines[1]
    assert max(curve.get_ydata()) < 15
    wide = architecture.softcap_figure(cap=30)
    assert "0.973 at 5" in _texts(wide)
    with pytest.raises(ValueError, match="cap"):
        architecture.softcap_figure(cap=0)


def test_checkpoint_figure():
    fig = architecture.checkpoint_figure({"plain": {"saved_mib": 2.0, "forward_calls": 8},
                                  "checkpointed": {"saved_mib": 0.5, "forward_calls": 16}})
    widths = [p.get_width() for p in fig.axes[0].patches]
    assert widths == [2.0, 0.5]
    with pytest.raises(ValueError, match="empty"):
        architecture.checkpoint_figure({})


def test_registered_figures_build():
    for name, fn in architecture.FIGURES.items():
        assert name.endswith(".png")
        assert isinstance(fn(), Figure)


# ---- chapters 05, 06: attention ----------------------------------------------------------
def test_kv_cache_figure_reports_the_cost_model():
    import torch
    from hymo_book.plots import attention as attention_plots

    from hymo_mini.analysis.costs import kv_cache_bytes_per_token

    fig = attention_plots.kv_cache_figure(T=4096, n_layers=8)
    bars = fig.axes[0].patches
    assert [b.get_width() for b in bars] == list(kv_cache_bytes_per_token(PROD).values())
    assert "MLA 10.0 MiB, MHA 256 MiB" in _texts(fig)
    assert "MLA 20.0 MiB" in _texts(attention_plots.kv_cache_figure(T=8192, n_layers=8))
    with pytest.raises(ValueError, match="T"):
        attention_plots.kv_cache_figure(T=0)
    probs = torch.softmax(torch.randn(3, 5, 5), dim=-1)
    fig = attention_plots.attention_map_figure(probs, head=2, labels=list("abcde"))
    shown = fig.axes[0].images[0].get_array()
    assert np.allclose(shown, probs[2].numpy())
    assert np.allclose(fig.axes[1].images[0].get_array(), probs.mean(0).numpy())
    with pytest.raises(ValueError, match="head"):
        attention_plots.attention_map_figure(probs, head=3)
    with pytest.raises(ValueError, match="heads, t, s"):
        attention_plots.attention_map_figure(probs[0])


# ---- chapter 07: gdn ------------------------------------------------------------
def test_initial_a_log_is_the_blocks_own_init():
    import torch
    from hymo_book.plots import gdn as gdn_plots

    from hymo_mini.gdn import GatedDeltaNet

    mini = load_config("hymo_mini").model
    assert torch.equal(gdn_plots.initial_a_log(mini), GatedDeltaNet(mini).A_log.detach())
    a_log = gdn_plots.initial_a_log(PROD)
    assert a_log.shape == (40, 32)
    assert torch.allclose(torch.exp(a_log[:, 0]), torch.arange(1.0, 41.0))


def test_decay_table_half_lives():
    from hymo_book.plots import gdn as gdn_plots

    rows = gdn_plots.decay_table(gate=0.5)
    assert rows[0]["decay"] == pytest.approx(math.exp(-0.5))
    assert rows[0]["half_life"] == pytest.approx(2 * math.log(2))  # 1.386 steps, not ~3
    assert rows[10]["rate"] == pytest.approx(11.0, rel=1e-6)  # head 10 has A = -11
    assert rows[39]["decay"] == pytest.approx(math.exp(-20), rel=1e-5)
    slow = gdn_plots.decay_table(gate=0.5, a_log_shift=-math.log(100))
    assert slow[0]["half_life"] == pytest.approx(100 * rows[0]["half_life"], rel=1e-5)
    with pytest.raises(ValueError, match="gate"):
        gdn_plots.decay_table(gate=0)


def test_decay_spectrum_figure_follows_the_gate():
    from hymo_book.plots import gdn as gdn_plots

    fig = gdn_plots.decay_spectrum_figure(gate=0.5)
    image = fig.axes[0].images[0].get_array()
    assert image.shape == (40, 32)
    assert image[0, 0] == pytest.approx(math.exp(-0.5))
    assert "half-life 1.39 steps" in _texts(fig)
    assert "half-life 2.77 steps" in _texts(gdn_plots.decay_spectrum_figure(gate=0.25))
    with pytest.raises(ValueError, match="gate"):
        gdn_plots.decay_spectrum_figure(gate=1.5)


def test_effective_attention_reproduces_the_recurrence():
    """The parallel form W v equals the reference loop, on awkward sizes and strong decay."""
    import torch
    from hymo_book.plots import gdn as gdn_plots

    from hymo_mini.ops import naive_gla

    gen = torch.Generator().manual_seed(1)
    B, T, H, S, D = 2, 13, 3, 5, 7
    v = torch.randn(B, T, H, D, generator=gen, dtype=torch.float64)
    b = torch.randn(B, T, H, S, generator=gen, dtype=torch.float64)
    c = torch.randn(B, T, H, S, generator=gen, dtype=torch.float64)
    g = torch.rand(B, T, H, generator=gen, dtype=torch.float64)
    A = -torch.rand(H, S, generator=gen, dtype=torch.float64) * 6
    W = gdn_plots.effective_attention(b, c, g, A)  # (B, H, T, T)
    assert torch.equal(W.triu(1), torch.zeros_like(W))  # causal
    o = torch.einsum("bhts,bshd->bthd", W, v)
    o_ref, _ = naive_gla(v, b, c, g, A)
    rel = (o - o_ref).pow(2).mean().sqrt() / o_ref.pow(2).mean().sqrt()
    assert rel < 1e-12


def test_state_trajectory_matches_the_final_state():
    import torch
    from hymo_book.plots import gdn as gdn_plots

    from hymo_mini.ops import naive_gla

    v, b, c, g, A = gdn_plots.toy_inputs(T=9, H=2, S=3, D=5, gate=0.7)
    states = gdn_plots.state_trajectory(v, b, c, g, A)
    assert states.shape == (1, 9, 2, 3, 5)
    for t in (0, 4, 8):
        _, state = naive_gla(v[:, :t + 1], b[:, :t + 1], c[:, :t + 1], g[:, :t + 1], A)
        assert torch.allclose(states[:, t], state, atol=1e-6)
    fig = gdn_plots.state_evolution_figure(states[0], times=(0, 4, 8), head=1)
    assert np.allclose(fig.axes[1].images[0].get_array(), states[0, 4, 1].numpy())
    snapshot = gdn_plots.state_snapshot_figure(states[0], t=8)
    assert np.allclose(snapshot.axes[0].images[0].get_array(), states[0, 8, 0].numpy())
    with pytest.raises(ValueError, match="t must be"):
        gdn_plots.state_snapshot_figure(states[0], t=9)
    with pytest.raises(ValueError, match="T, H, S, D"):
        gdn_plots.state_evolution_figure(states)


def test_weights_figure():
    from hymo_book.plots import gdn as gdn_plots

    fig = gdn_plots.weights_figure({"a": np.eye(3), "b": -np.ones((3, 3))}, suptitle="x")
    assert len(fig.axes) == 4  # two maps, two colour bars
    with pytest.raises(ValueError, match="empty"):
        gdn_plots.weights_figure({})


def test_book1_registered_figures_build():
    from hymo_book.plots import attention as attention_plots
    from hymo_book.plots import gdn as gdn_plots

    for module in (attention_plots, gdn_plots):
        for name, fn in module.FIGURES.items():
            assert name.endswith(".png") and isinstance(fn(), Figure)
