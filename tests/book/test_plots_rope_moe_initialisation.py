"""The functions behind the figures and widgets of chapters 04 (hymo_book.plots.rope), 11
(hymo_book.plots.moe, hymo_book.moe_experiments) and 13 (hymo_book.plots.initialisation)."""

import math

import pytest
import torch
from hymo_book.plots import rope as rope_plots
from matplotlib.figure import Figure

from hymo_mini.rope import RotaryEmbedding


# ---- chapter 04: RoPE ------------------------------------------------------------------
def test_spectrum_table_matches_closed_form():
    rows = rope_plots.spectrum_table(32, 10_000.0)
    assert len(rows) == 16
    for k, theta, wavelength in rows:
        assert theta == pytest.approx(10_000.0 ** (-2 * k / 32), rel=1e-12)
        assert wavelength == pytest.approx(2 * math.pi / theta, rel=1e-12)
    assert rows[1][1] == pytest.approx(0.5623413, rel=1e-6)
    assert rows[2][1] == pytest.approx(0.3162278, rel=1e-6)


@pytest.mark.parametrize("kind", ["ones", "random"])
def test_relative_scores_match_the_rotary_module(kind):
    rope_dim, max_distance, start = 8, 40, 17
    distance, score = rope_plots.relative_scores(rope_dim, 100.0, max_distance, kind, seed=3)
    if kind == "ones":
        q = torch.ones(rope_dim, dtype=torch.float64)
    else:
        q = torch.randn(rope_dim, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    rope = RotaryEmbedding(rope_dim, start + max_distance + 1, base=100.0)
    x = q.float().expand(1, start + max_distance + 1, 1, rope_dim)
    rotated = rope(x)[0, :, 0].double()  # (t, d)
    # query at `start`, key at `start + delta`: the curve must not depend on `start`
    direct = rotated[start:] @ rotated[start] / rope_dim
    assert torch.allclose(score, direct, atol=1e-5)
    assert distance[0] == 0 and distance[-1] == max_distance
    assert score[0] == pytest.approx(float(q @ q) / rope_dim)


def test_relative_scores_reject_bad_input():
    with pytest.raises(ValueError, match="kind"):
        rope_plots.relative_scores(kind="zeros")
    with pytest.raises(ValueError, match="max_distance"):
        rope_plots.relative_scores(max_distance=0)


def test_rotation_2d_rejects_bad_pair_and_position():
    with pytest.raises(ValueError, match="pair"):
        rope_plots.rotation_2d_figure(pair=16, rope_dim=32)
    with pytest.raises(ValueError, match="position"):
        rope_plots.rotation_2d_figure(position=-1)


def test_partial_rope_rejects_rope_dim_above_head_dim():
    with pytest.raises(ValueError, match="rope_dim"):
        rope_plots.partial_rope_figure(head_dim=16, rope_dim=32)


@pytest.mark.parametrize("name", sorted(rope_plots.FIGURES))
def test_registered_rope_figures_draw(name):
    fig = rope_plots.FIGURES[name]()
    assert isinstance(fig, Figure)
    assert all(ax.get_title() for ax in fig.axes if ax.get_label() != "<colorbar>")


def test_rope_widget_functions_take_widget_values():
    fig = rope_plots.rope_spectrum_figure(500.0, 8, 512)
    assert [len(line.get_xdata()) for line in fig.axes[0].get_lines()][0] == 4  # 4 pairs
    assert isinstance(rope_plots.rotation_2d_figure(pair=3, position=40), Figure)
    fig = rope_plots.relative_score_figure(16, 1_000.0, 100, seed=2)
    assert [len(line.get_xdata()) for line in fig.axes[0].get_lines()[:2]] == [101, 101]


# ---- chapter 11: MoE -------------------------------------------------------------------
from hymo_book.moe_experiments import shared_direction  # noqa: E402
from hymo_book.plots import moe as moe_plots  # noqa: E402

from hymo_mini.config import load_config, replace  # noqa: E402


@pytest.fixture(scope="module")
def mini_config():
    return load_config("hymo_mini").model


@pytest.fixture(scope="module")
def prod():
    return load_config("hymo_750m").model


def test_imbalanced_router_has_no_preference_at_zero_skew(prod):
    moe = moe_plots.imbalanced_router(prod, skew=0.0)
    u = shared_direction(prod.dim)
    assert (moe.gate.weight @ u).abs().max() < 1e-4  # nothing along the shared direction
    x = moe_plots.router_tokens(prod, 2048)
    with torch.no_grad():
        load = moe.route(x).counts.float() / (2048 * 2) * 16
    assert load.max() < 1.3 and load.min() > 0.7


def test_skew_moves_load_to_the_last_experts(prod):
    x = moe_plots.router_tokens(prod, 2048)
    with torch.no_grad():
        counts = moe_plots.imbalanced_router(prod, skew=0.1).route(x).counts.float()
    assert counts[8:].sum() > 2 * counts[:8].sum()


def test_dropped_fraction_matches_the_routing(prod):
    x = moe_plots.router_tokens(prod, 512)
    roomy = moe_plots.imbalanced_router(replace(prod, capacity_factor=16.0), skew=0.1)
    tight = moe_plots.imbalanced_router(replace(prod, capacity_factor=1.0), skew=0.1)
    assert moe_plots.dropped_fraction(roomy, x) == 0.0
    with torch.no_grad():
        kept = tight.route(x).kept
    assert moe_plots.dropped_fraction(tight, x) == pytest.approx(1 - kept.float().mean().item())
    assert moe_plots.dropped_fraction(tight, x) > 0.05


def test_bias_balancing_pulls_load_towards_uniform(prod):
    kwargs = dict(skew=0.1, steps=150, n_tokens=256, load_ema_alpha=0.1)
    on = moe_plots.simulate_balancing(prod, **kwargs)
    off = moe_plots.simulate_balancing(prod, balance=False, **kwargs)
    end_on, end_off = on.loads[-30:].mean(0) * 16, off.loads[-30:].mean(0) * 16
    assert end_off.max() > 1.8  # the router alone stays imbalanced
    assert end_on.max() < 1.2 and end_on.min() > 0.8
    assert off.biases.abs().max() == 0  # no update without balancing
    assert on.biases.shape == (150, 16) and on.dropped.shape == (150,)
    # overloaded experts (the last ones) end with a negative bias
    assert on.biases[-1, -4:].mean() < 0 < on.biases[-1, :4].mean()
    with pytest.raises(ValueError, match="steps"):
        moe_plots.simulate_balancing(prod, steps=0)


def test_router_precision_bf16_changes_some_choices(prod):
    result = moe_plots.router_precision(prod, n_tokens=2048)
    assert result["bf16_spacing"] == 2.0 ** -11
    assert 0 < result["changed"] < 0.2
    assert result["gaps"].shape == (2048,) and (result["gaps"] >= 0).all()
    # a peakier router (larger init) separates its choices by more than bf16's spacing
    peaky = moe_plots.router_precision(prod, n_tokens=2048, router_std=0.1)
    assert peaky["changed"] < result["changed"]


def test_moe_figures_take_widget_values():
    assert isinstance(moe_plots.routing_figure(n_tokens=5, router_std=0.05, skew=0.2), Figure)
    assert len(moe_plots.capacity_figure(1.0, 0.2, 512).axes) == 2
    assert len(moe_plots.balancing_figure(0.1, 30, 0.1, 0.001, 0.05, 128).axes) == 3
    assert isinstance(moe_plots.router_precision_figure(0.006, 512), Figure)
    assert set(moe_plots.FIGURES) == {"moe_routing.png", "moe_capacity.png",
                                      "moe_balancing.png", "moe_router_precision.png"}


# ---- chapter 13: initialisation --------------------------------------------------------
from hymo_book.plots import initialisation  # noqa: E402


def test_parameter_stats_against_pytorch_defaults():
    block = torch.nn.Sequential(torch.nn.Linear(512, 256), torch.nn.RMSNorm(256))
    stats = {s.name: s for s in initialisation.parameter_stats(block)}
    linear = stats["0.weight"]
    assert linear.shape == (256, 512)
    assert linear.default_std == pytest.approx(1 / math.sqrt(3 * 512))
    assert linear.std == pytest.approx(linear.default_std, rel=0.02)
    assert stats["1.weight"].mean == 1.0 and stats["1.weight"].std == 0.0
    assert stats["1.weight"].default_std is None and stats["0.bias"].default_std is None


def test_stream_rms_follows_the_model(mini_config):
    from hymo_mini.model import HyMo

    torch.manual_seed(0)
    model = HyMo(mini_config)
    x = torch.randn(2, 10, mini_config.dim)
    rms = initialisation.stream_rms(model.layers, x)
    assert len(rms) == mini_config.n_layers + 1
    assert rms[0] == pytest.approx(x.pow(2).mean().sqrt().item())
    with torch.no_grad():
        assert rms[-1] == pytest.approx(model.run_layers(x).pow(2).mean().sqrt().item(), rel=1e-5)


def test_embedding_rows_use_the_models_init(mini_config):
    tokens = torch.arange(64).reshape(2, 32)
    scaled = initialisation.embedding_rows(replace(mini_config, dim=256, embed_init="scaled"),
                                           tokens)
    plain = initialisation.embedding_rows(replace(mini_config, dim=256, embed_init="torch"),
                                          tokens)
    assert scaled.shape == (2, 32, 256)
    assert scaled.std().item() == pytest.approx(256 ** -0.5, rel=0.05)
    assert plain.std().item() == pytest.approx(1.0, rel=0.05)


def test_residual_rms_modes(mini_config):
    results = initialisation.residual_rms(mini_config, T=16)
    assert set(results) == {(m, i) for m in ("identity", "document") for i in ("scaled", "torch")}
    assert all(len(v) == mini_config.n_layers + 1 for v in results.values())
    assert results[("identity", "torch")][0] == pytest.approx(1.0, rel=0.1)
    assert results[("identity", "scaled")][0] == pytest.approx(mini_config.dim ** -0.5, rel=0.1)
    # entry i is the stream entering layer i; without an identity path a GDN layer shrinks it
    doc, ident = results[("document", "torch")], results[("identity", "torch")]
    g = mini_config.gdn_positions[0]
    assert doc[g + 1] < 0.8 * doc[g]
    assert ident[g + 1] > 0.9 * ident[g]
    # the MLA layers are the same in both modes: seen on the text's layout, where the first
    # MLA layer reads the embedding in both
    first = replace(mini_config, mla_position="first")
    assert first.mla_positions[0] == 0
    text = initialisation.residual_rms(first, T=16)
    assert text[("document", "torch")][1] == pytest.approx(text[("identity", "torch")][1])
    assert initialisation.residual_rms(mini_config, T=16) is results  # cached
    with pytest.raises(ValueError, match="T and B"):
        initialisation.residual_rms(mini_config, T=0)


def test_residual_rms_figure_toggles(mini_config):
    fig = initialisation.residual_rms_figure(mini_config, T=16)
    assert len(fig.axes[0].lines) == 4
    fig = initialisation.residual_rms_figure(mini_config, document=False, torch_init=False, T=16)
    assert len(fig.axes[0].lines) == 1
    fig = initialisation.residual_rms_figure(mini_config, identity=False, document=False, T=16)
    assert fig.axes[0].get_legend() is None
