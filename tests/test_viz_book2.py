"""The functions behind the figures and widgets of book chapters 07-13 (part 2)."""

import math

import pytest
import torch
from matplotlib.figure import Figure

from hymo_mini.rope import RotaryEmbedding
from hymo_mini.viz import rope_plots


# ---- chapter 07: RoPE ------------------------------------------------------------------
def test_spectrum_table_matches_closed_form():
    rows = rope_plots.spectrum_table(32, 10_000.0)
    assert len(rows) == 16
    for k, theta, wavelength in rows:
        assert theta == pytest.approx(10_000.0 ** (-2 * k / 32), rel=1e-12)
        assert wavelength == pytest.approx(2 * math.pi / theta, rel=1e-12)
    # the document's theta_1 = 0.01 and theta_2 = 0.0001 are not the rope_dim=32 values
    assert rows[1][1] == pytest.approx(0.5623413, rel=1e-6)
    assert rows[2][1] == pytest.approx(0.3162278, rel=1e-6)
    assert abs(rows[1][1] - rope_plots.DOCUMENT_THETAS[1]) > 0.5


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
    assert len(rope_plots.rope_spectrum_figure(500.0, 8, 16, 512, False).axes) == 2
    assert isinstance(rope_plots.rotation_2d_figure(pair=3, position=40), Figure)
    assert isinstance(rope_plots.relative_score_figure(16, 1_000.0, 100, "random"), Figure)
