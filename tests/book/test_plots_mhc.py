"""The experiments and figures of the mHC chapter (hymo_book.plots.mhc, book chapter 16):
unconstrained hyper-connections blow up through depth and mHC stays bounded, Sinkhorn's
error falls with iterations, and every figure builds."""

import numpy as np
from hymo_book.plots import mhc as mhc_plots
from matplotlib.figure import Figure

from hymo_mini.mhc import HC_EPS


def test_composite_gain_hc_grows_mhc_stays_bounded():
    """HC: the product of I + 0.2 Z grows with depth. mHC: the forward gain (row sums of
    comb^T products = comb's exact column sums) stays at one up to eps per layer; the
    backward gain rests on comb's rows, a few per cent off at large logits, and can never
    exceed n (a non-negative matrix with unit row sums)."""
    hc_f, hc_b = mhc_plots.composite_gains(mhc_plots.hc_residual_maps(64, 4, 0.2, 32))
    assert np.median(hc_f[:, -1]) > 10 * np.median(hc_f[:, 3])
    assert np.median(hc_b[:, -1]) > 10
    for scale in (0.0, 4.0, 16.0):
        f, b = mhc_plots.composite_gains(mhc_plots.mhc_residual_maps(64, 4, scale, 32))
        assert np.abs(f - 1).max() < 64 * 4 * HC_EPS, scale
        assert b.max() < 4 and np.median(b[:, -1]) < 1.2, scale


def test_sinkhorn_error_curves_shape_and_trend():
    iters, row, col = mhc_plots.sinkhorn_error_curves((0.5, 4.0), max_iters=6, count=100)
    assert list(iters) == [1, 2, 3, 4, 5, 6] and row.shape == col.shape == (2, 6)
    assert row[1, -1] > row[0, -1] and (col[:, 1:] < 1e-5).all()


def test_mhc_figures_build():
    figs = [mhc_plots.plot_widened_residual(n=3, comb_logit=1.0),
            mhc_plots.plot_sinkhorn_convergence(max_scale=2.0, max_iters=5),
            mhc_plots.plot_mixing_heatmaps(logit_scale=1.0, iters=3, n=3),
            mhc_plots.plot_composite_gain(depth=8, trials=4)]
    assert all(isinstance(f, Figure) for f in figs)
    assert set(mhc_plots.FIGURES) == {"mhc_widened_residual.png", "mhc_sinkhorn_convergence.png",
                                      "mhc_mixing_heatmaps.png", "mhc_composite_gain.png"}
