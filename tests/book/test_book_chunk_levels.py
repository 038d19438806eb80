"""hymo_book.kernels.chunk_levels (book chapter 10, rung 3): the chunk kernel's levels cover every
pair of a block once, as the kernel masks them, and give the direct weights (the decay matrix of
hymo_book.kernels.arithmetic) where the one-factor form overflows; the level-map figure."""

import math

import pytest
import torch
from hymo_book.kernels import chunk_levels as lv
from hymo_book.kernels.arithmetic import _example, decay_matrix, max_rel_error
from matplotlib.patches import Rectangle

from hymo_mini.ops import naive_gla, one_product_chunks
from hymo_mini.ops.utils.pairs import SPAN


def test_pair_level_splits_every_pair_between_its_halves():
    assert lv.pair_level(13, 2) == (3, 8)
    assert lv.pair_level(1, 0) == (0, 1) and lv.pair_level(7, 6) == (0, 7)
    assert lv.pair_level(6, 4) == (1, 6) and lv.pair_level(31, 0) == (4, 16)
    for t in range(1, 32):
        for s in range(t):
            k, r = lv.pair_level(t, s)
            assert s < r <= t and r % 2**k == 0  # r starts the upper half ...
            assert t // 2 ** (k + 1) == s // 2 ** (k + 1)  # ... of one 2^(k+1) sub-block
            assert (t >> k) & 1 == 1 and (s >> k) & 1 == 0
    for t, s in ((2, 2), (1, 3), (-1, -2), (2.0, 1)):
        with pytest.raises(ValueError, match="0 <= s < t"):
            lv.pair_level(t, s)


@pytest.mark.parametrize("block", [2, 4, 8, 16, 32])
def test_level_map_covers_every_pair_once_as_the_kernel_masks_it(block):
    levels = lv.level_map(block)
    step = torch.arange(block)
    below = step[:, None] > step[None, :]
    assert torch.equal(levels < 0, ~below)  # -1 on and above the diagonal
    for k in range(block.bit_length() - 1):
        hi = step >> k  # the kernel's mask (pairs.level), restated
        kernel_mask = (hi[:, None] == hi[None, :] + 1) & ((hi[:, None] & 1) == 1)
        assert torch.equal(levels == k, kernel_mask), k
        assert int((levels == k).sum()) == block * 2**k // 2  # block / 2^(k+1) squares of 4^k
    assert int((levels >= 0).sum()) == block * (block - 1) // 2
    assert all(int(levels[t, s]) == lv.pair_level(t, s)[0] for t in range(block) for s in range(t))
    for bad in (0, 1, 12, 16.0):
        with pytest.raises(ValueError, match="power of two"):
            lv.level_map(bad)


@pytest.mark.parametrize("T, S, decay", [(2, 3, 1.0), (8, 5, 0.3), (16, 8, 1.0), (16, 8, 40.0),
                                         (32, 4, 3.0)])
def test_level_weights_are_the_direct_weights(T, S, decay):
    b, c, g, A = _example(T, S, decay, seed=T + S)
    W_direct = decay_matrix(b, c, g, A)
    W = lv.level_weights(b, c, g, A)
    assert torch.equal(W, W.tril())
    torch.testing.assert_close(W, W_direct, rtol=1e-13, atol=1e-300)
    v = torch.randn(T, 3, dtype=torch.float64)
    o_loop, _ = naive_gla(v[None, :, None], b[None, :, None], c[None, :, None],
                                     g[None, :, None], A[None])
    torch.testing.assert_close(W @ v, o_loop[0, :, 0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype, decay", [(torch.float64, 200.0), (torch.float32, 40.0)])
def test_level_weights_stay_finite_where_one_factor_per_step_overflows(dtype, decay):
    b, c, g, A = _example(16, 8, decay, seed=0)  # l_15 · |A| far past the dtype's limit
    W_direct = decay_matrix(b, c, g, A)  # float64, direct: the reference
    b, c, g, A = (x.to(dtype) for x in (b, c, g, A))
    W_one = lv.one_factor_weights(b, c, g, A)
    W = lv.level_weights(b, c, g, A)
    assert not torch.isfinite(W_one).all()  # inf · 0 = nan below the diagonal
    assert torch.isfinite(W).all()
    tol = 1e-13 if dtype == torch.float64 else 1e-5
    assert max_rel_error(W, W_direct) < tol
    mild = _example(16, 8, 0.5, seed=0)  # at a mild decay the shortcut is right too
    torch.testing.assert_close(lv.one_factor_weights(*mild), decay_matrix(*mild),
                               rtol=1e-10, atol=1e-14)


def test_level_weights_reject_bad_shapes_and_block_lengths():
    b, c, g, A = _example(12, 4, 1.0, seed=0)
    with pytest.raises(ValueError, match="power of two"):
        lv.level_weights(b, c, g, A)
    b, c, g, A = _example(8, 4, 1.0, seed=0)
    with pytest.raises(ValueError, match="expected b, c"):
        lv.level_weights(b, c[:, :3], g, A)
    with pytest.raises(ValueError, match="expected b, c"):
        lv.one_factor_weights(b, c, g[:4], A)


@pytest.mark.parametrize("block, t, s", [(16, 13, 2), (32, 29, 2), (8, 7, 6), (16, 5, 4)])
def test_level_map_figure_colours_the_levels_and_marks_the_split(block, t, s):
    fig = lv.level_map_figure(block, t, s)
    ax = fig.axes[0]
    image = ax.images[0].get_array()
    n_levels = block.bit_length() - 1
    levels = lv.level_map(block).numpy()
    assert image.mask.sum() == block * (block - 1) // 2  # the upper triangle is blank
    assert (image.data[levels >= 0] == levels[levels >= 0]).all()
    assert (image.data.diagonal() == n_levels).all()  # the diagonal has its own colour
    k, r = lv.pair_level(t, s)
    box = next(p for p in ax.patches if isinstance(p, Rectangle))
    assert (box.get_x(), box.get_y(), box.get_width()) == (r - 2**k - 0.5, r - 0.5, 2**k)
    star, circles = ax.lines[0], ax.lines[1]
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (s, t)
    assert list(circles.get_xdata()) == [r, s] and list(circles.get_ydata()) == [t, r]
    assert f"level {k}, split at r = {r}" in ax.get_title()
    assert len(ax.get_legend().get_texts()) == n_levels + 1


def test_level_map_figure_rejects_bad_arguments():
    with pytest.raises(ValueError, match="power of two"):
        lv.level_map_figure(block=12)
    with pytest.raises(ValueError, match="0 <= s < t < block"):
        lv.level_map_figure(block=16, t=16, s=2)
    with pytest.raises(ValueError, match="0 <= s < t < block"):
        lv.level_map_figure(block=16, t=3, s=3)


def test_fits_one_product_is_the_kernels_test():
    """The book's condition is the package's (``one_product_chunks``, the kernels' rule on
    whole tensors, itself tested against the kernels): a block whose largest exponent of the
    excess decay (base 2) is just inside SPAN fits, one just outside does not; a negative
    gate counts by its size; one rate on every key fits at any decay; bad arguments are
    refused."""
    span = float(SPAN.value)
    T, S = 16, 8
    gen = torch.Generator().manual_seed(3)
    g = torch.rand(1, T, 1, generator=gen) + 0.1
    rates = torch.rand(1, S, generator=gen) + 0.5
    for share, fits in ((0.95, True), (1.05, False)):
        top = g[0, :, 0].cumsum(0).max() * (rates.max() - rates.min()) * math.log2(math.e)
        A = -rates * share * span / top  # the largest exponent at share · SPAN
        assert lv.fits_one_product(g[0, :, 0], A[0]) is fits
        assert bool(one_product_chunks(g, A, T, T)[0, 0, 0]) is fits
    assert lv.fits_one_product(torch.tensor([-1.0, -1.0]), torch.tensor([-1.0, -2.0]), span=2.9)
    assert not lv.fits_one_product(torch.tensor([-1.0, -1.0]), torch.tensor([-1.0, -2.0]),
                                   span=2.8)
    assert lv.fits_one_product(torch.full((16,), 0.5), torch.full((8,), -1e4))
    with pytest.raises(ValueError, match="expected g"):
        lv.fits_one_product(g, A[0])
    with pytest.raises(ValueError, match="span must be positive"):
        lv.fits_one_product(g[0, :, 0], A[0], span=0.0)


@pytest.mark.parametrize("rates", ["one fast rate", "spread"])
def test_shared_rate_weights_are_the_weights(rates):
    """The one product after the shared decay is taken out gives the direct weights in
    float64: at one rate of 500 on every key (where the plain one-factor form overflows) and
    at rates that spread over a few units."""
    gen = torch.Generator().manual_seed(5)
    b, c = (torch.randn(16, 8, generator=gen, dtype=torch.float64) for _ in range(2))
    g = torch.rand(16, generator=gen, dtype=torch.float64)
    A = (torch.full((8,), -500.0, dtype=torch.float64) if rates == "one fast rate"
         else -torch.linspace(0.5, 3.0, 8, dtype=torch.float64))
    W = lv.shared_rate_weights(b, c, g, A)
    assert torch.isfinite(W).all()
    assert max_rel_error(W, decay_matrix(b, c, g, A)) < 1e-13
    if rates == "one fast rate":
        assert not torch.isfinite(lv.one_factor_weights(b, c, g, A)).all()
