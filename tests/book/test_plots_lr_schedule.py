"""The learning-rate figure of chapter 17 (hymo_book.plots.lr_schedule): the trainer's
warmup-stable-decay rule at every step, and fractions that do not add up to 1 said on the
figure instead of drawn."""

import pytest
from hymo_book.plots.lr_schedule import lr_schedule_figure


def test_lr_schedule_figure():
    fig = lr_schedule_figure(100, 0.1, 0.6, 0.3, 0.1, 1.0)
    ys = fig.axes[0].lines[0].get_ydata()
    assert max(ys) == 1.0 and min(ys) == pytest.approx(0.1)
    broken = lr_schedule_figure(100, 0.5, 0.6, 0.3)  # fractions add up to 1.4
    assert "must be 1" in broken.axes[0].texts[0].get_text()
    with pytest.raises(TypeError, match="multiplier must be a function"):
        lr_schedule_figure(multiplier=0.5)
