"""The figure functions of chapters 01-05 (hymo_mini.viz.arch, .mla_plots, .gdn_plots):
each returns a Figure whose content follows its arguments, and bad values raise."""

import math

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from hymo_mini.config import ConfigError, load_config
from hymo_mini.costs import stack_cost
from hymo_mini.viz import arch

PROD = load_config("hymo_750m").model


def _boxes(fig: Figure) -> list[Rectangle]:
    return [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]


def _texts(fig: Figure) -> str:
    parts = [fig._suptitle.get_text() if fig._suptitle else ""]
    for ax in fig.axes:
        parts.append(ax.get_title())
        parts += [t.get_text() for t in ax.texts]
    return " | ".join(parts)


# ---- chapter 01/03: arch ---------------------------------------------------------------
def test_layer_map_draws_one_box_per_layer_coloured_by_type():
    fig = arch.layer_map_figure(mla_every=4, mla_offset=0, n_layers=32)
    boxes = _boxes(fig)
    assert len(boxes) == 32
    mla = [i for i, b in enumerate(boxes) if b.get_facecolor()[:3] == pytest.approx(
        tuple(int(arch.COLOURS["MLA"][k:k + 2], 16) / 255 for k in (1, 3, 5)))]
    assert mla == list(PROD.mla_positions)
    two_rows = arch.layer_map_figure(compare_offset=3, n_layers=8)
    assert len(_boxes(two_rows)) == 16
    hatched = arch.layer_map_figure(nope_hybrid_gdn=True)
    assert sum(1 for b in _boxes(hatched) if b.get_hatch()) == 7
    assert len(_boxes(arch.layer_map_figure(mla_every=0, n_layers=12))) == 12


def test_layer_map_rejects_an_impossible_layout():
    with pytest.raises(ConfigError, match="mla_offset"):
        arch.layer_map_figure(mla_every=4, mla_offset=4)


def test_cost_curves_title_reports_the_cost_model():
    fig = arch.cost_curves_figure(gdn_per_mla=3, T=4096)
    share = stack_cost(PROD, 4096).flops / stack_cost(PROD, 4096, 0).flops
    assert f"{share:.0%} of all-MLA" in _texts(fig)
    assert len(fig.axes) == 2 and len(fig.axes[0].lines) == 5  # 4 stacks + the T marker
    other = arch.cost_curves_figure(gdn_per_mla=7, T=1000)
    assert "28 GDN + 4 MLA" in [line.get_label() for line in other.axes[0].lines]
    assert "T=1,000" in _texts(other)


def test_hybrid_share_lines_end_near_the_mla_fraction():
    fig = arch.hybrid_share_figure(ratios=(3,))
    curve = fig.axes[0].lines[0]
    assert curve.get_ydata()[-1] == pytest.approx(
        stack_cost(PROD, 2**17).flops / stack_cost(PROD, 2**17, 0).flops)
    assert 0.25 < curve.get_ydata()[-1] < 0.3


def test_softcap_gradient_values():
    assert float(arch.softcap_gradient(5, 15)) == pytest.approx(1 - math.tanh(1 / 3) ** 2)
    assert float(arch.softcap_gradient(5, 15)) == pytest.approx(0.8966, abs=1e-4)
    assert float(arch.softcap_gradient(10, 15)) == pytest.approx(0.6604, abs=1e-4)
    assert float(arch.softcap_gradient(15, 15)) == pytest.approx(0.42, abs=1e-2)
    grads = arch.softcap_gradient(np.array([0.0, 30.0]), 15)
    assert grads[0] == 1 and 0 < grads[1] < 0.1


def test_softcap_figure_follows_the_cap():
    fig = arch.softcap_figure(cap=15)
    assert "0.897 at 5" in _texts(fig) and "0.660 at 10" in _texts(fig)
    curve = fig.axes[0].lines[1]
    assert max(curve.get_ydata()) < 15
    wide = arch.softcap_figure(cap=30)
    assert "0.973 at 5" in _texts(wide)
    with pytest.raises(ValueError, match="cap"):
        arch.softcap_figure(cap=0)


def test_checkpoint_figure():
    fig = arch.checkpoint_figure({"plain": {"saved_mib": 2.0, "forward_calls": 8},
                                  "checkpointed": {"saved_mib": 0.5, "forward_calls": 16}})
    widths = [p.get_width() for p in fig.axes[0].patches]
    assert widths == [2.0, 0.5]
    with pytest.raises(ValueError, match="empty"):
        arch.checkpoint_figure({})


def test_registered_figures_build():
    for name, fn in arch.FIGURES.items():
        assert name.endswith(".png")
        assert isinstance(fn(), Figure)
