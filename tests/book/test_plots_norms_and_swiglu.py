"""The figures of chapter 03 (hymo_book.plots.norms_and_swiglu): RMSNorm's output scale follows
nn.RMSNorm, SiLU's marked minimum is where its slope is 0, and both figures keep the
figure rules (series told apart without colour, text at 8 pt or more)."""

import math

import pytest
import torch
from figure_checks import assert_series_distinct
from hymo_book.plots import norms_and_swiglu
from hymo_book.site.legibility import FIGURE_MIN_FONT_PT, smallest_text_pt


def test_the_formula_is_what_nn_rmsnorm_does():
    rms = [1e-5, 1e-3, 0.3, 1.0, 250.0]
    for eps in (1e-6, 1e-2, 0.0):
        measured = norms_and_swiglu.measured_rms_after_norm(rms, eps, dim=17)
        formula = norms_and_swiglu.rms_after_norm(rms, eps)
        assert measured == pytest.approx(list(formula), rel=1e-9)
    assert norms_and_swiglu.rms_after_norm(math.sqrt(1e-6), 1e-6) == pytest.approx(1 / math.sqrt(2))
    with pytest.raises(ValueError, match="eps"):
        norms_and_swiglu.rms_after_norm(1.0, -1.0)
    with pytest.raises(ValueError, match="dim"):
        norms_and_swiglu.measured_rms_after_norm([1.0], 1e-6, dim=0)


def test_the_figures_follow_their_arguments_and_the_rules():
    fig = norms_and_swiglu.rms_norm_figure(eps_values=(1e-6, 1e-2, 1e-4))
    assert len([line for line in fig.axes[0].get_lines()
                if not line.get_label().startswith("_")]) == 6  # a line and points per eps
    silu = norms_and_swiglu.silu_figure()
    label = [line.get_label() for line in silu.axes[0].get_lines() if "minimum" in line.get_label()]
    z = torch.tensor(-1.2785, dtype=torch.float64, requires_grad=True)
    torch.nn.functional.silu(z).backward()
    assert abs(z.grad.item()) < 1e-3 and label == ["minimum -0.278 at z = -1.28"]
    for figure in (fig, silu):
        assert_series_distinct(figure)
        assert smallest_text_pt(figure) >= FIGURE_MIN_FONT_PT
    with pytest.raises(ValueError, match="eps_values"):
        norms_and_swiglu.rms_norm_figure(eps_values=())
    with pytest.raises(ValueError, match="z_max"):
        norms_and_swiglu.silu_figure(z_max=0)
