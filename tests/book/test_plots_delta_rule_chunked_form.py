"""The figures of the delta rule's erasure and of the chunked form (hymo_book.plots.delta_rule,
.chunked_form; book chapters 07 and 08): their arithmetic against the package's loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hymo_book.plots import chunked_form, delta_rule
from matplotlib.figure import Figure

from hymo_mini.ops import naive_gated_delta, naive_gla


@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0])
def test_erasure_step_is_one_step_of_each_loop(beta):
    step = delta_rule.erasure_step(state=(0.7, -1.3), angle_deg=55.0, value=2.0, beta=beta)
    b = step["b"]
    assert b.norm().item() == pytest.approx(1.0)
    as_step = lambda x: torch.as_tensor(x, dtype=torch.float64).reshape(1, 1, 1, -1)
    h0 = step["before"].reshape(1, 1, 2, 1)
    g, A = torch.zeros(1, 1, 1, dtype=torch.float64), -torch.ones(1, 2, dtype=torch.float64)
    strength = torch.full((1, 1, 1), beta, dtype=torch.float64)
    _, delta = naive_gated_delta(as_step(2.0), as_step(b), as_step(b), g, A, strength,
                                 initial_state=h0)
    _, gla = naive_gla(as_step(2.0), as_step(b), as_step(b), g, A, initial_state=h0)
    assert torch.allclose(delta.flatten(), step["delta"])
    assert torch.allclose(gla.flatten(), step["gla"])
    # the erasure leaves (1 - β) of what b read and nothing orthogonal to b changes
    assert step["read_erased"] == pytest.approx((1 - beta) * step["read_before"], abs=1e-12)
    normal = torch.tensor([-b[1], b[0]], dtype=torch.float64)
    assert (normal @ step["erased"]).item() == pytest.approx((normal @ step["before"]).item())
    assert step["read_delta"] == pytest.approx((1 - beta) * step["read_before"] + beta * 2.0)


def test_erasure_step_rejects_bad_input():
    with pytest.raises(ValueError, match="beta"):
        delta_rule.erasure_step(beta=1.5)
    with pytest.raises(ValueError, match="two numbers"):
        delta_rule.erasure_step(state=(1.0, 2.0, 3.0))


def test_recall_by_age_newest_exact_for_delta_only():
    errors = delta_rule.recall_by_age(n_pairs=16, S=8, D=8, seeds=20)
    assert errors["delta"].shape == (16,) and errors["gla"].shape == (16,)
    assert errors["delta"][-1] < 1e-10  # the last write is read back exactly
    assert errors["gla"][-1] > 0.1  # the adding rule blurs it with the others
    # older entries are disturbed more (means over a few pairs: one pair's error is noisy)
    assert errors["delta"][:4].mean() > errors["delta"][-5:-1].mean()
    with pytest.raises(ValueError, match="n_pairs"):
        delta_rule.recall_by_age(n_pairs=0)


def test_recurrence_matrix_is_the_loop():
    b, c, g, A = chunked_form.chunk_example(T=13, S=5, rate=3.0, seed=2)
    M = chunked_form.recurrence_matrix(b, c, g, A)  # (T, T)
    assert torch.equal(M.triu(1), torch.zeros_like(M))
    v = torch.randn(13, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    o, _ = naive_gla(v[None, :, None], b[None, :, None], c[None, :, None], g[None, :, None],
                     A[None])
    assert torch.allclose(M @ v, o[0, :, 0], atol=1e-12)
    with pytest.raises(ValueError, match="expected b, c"):
        chunked_form.recurrence_matrix(b, c[:-1], g, A)


def test_chunk_matrix_figure_outlines_every_chunk():
    fig = chunked_form.chunk_matrix_figure(T=20, chunk=8, rate=0.5)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert len(ax.patches) == math.ceil(20 / 8)  # one outline per chunk, the last one short
    assert ax.patches[-1].get_width() == 20 - 16
    shown = ax.images[0].get_array()
    assert np.ma.is_masked(shown) and shown.mask[0, 1]  # above the diagonal: not drawn
    for name, value in (("T", 0), ("chunk", 2.5)):
        with pytest.raises(ValueError, match=name):
            chunked_form.chunk_matrix_figure(**{name: value})
