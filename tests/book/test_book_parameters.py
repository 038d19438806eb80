"""Chapter 15's helpers: every tensor has a formula that gives its size, and the figure
reads in grey-scale."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from figure_checks import assert_series_distinct  # noqa: E402
from hymo_book import parameters as pm  # noqa: E402
from hymo_book.site.legibility import FIGURE_MIN_FONT_PT, smallest_text_pt  # noqa: E402

from hymo_mini.config import load_config, replace  # noqa: E402

MINI = load_config("hymo_mini").model
CONFIGS = [None, MINI, replace(MINI, gdn_rule="delta"), replace(MINI, n_shared_experts=2),
           replace(MINI, gdn_d_state=8, gdn_rope_dim=8)]


@pytest.mark.parametrize("kind", ["mla", "gdn", "moe"])
@pytest.mark.parametrize("config", CONFIGS, ids=["prod", "mini", "delta", "shared2", "S8"])
def test_every_formula_gives_its_tensors_size(kind, config):
    table = pm.tensor_table(kind, config)
    assert table.rows and all(row[-1] == "yes" for row in table.rows), str(table)
    module = pm.build(kind, config)
    assert table.footer[0][2] == f"{sum(p.numel() for p in module.parameters()):,}"


def test_an_unknown_kind_is_refused():
    with pytest.raises(KeyError, match="kind must be one of"):
        pm.build("ffn")


def test_the_figure_reads_in_grey_scale():
    fig = pm.params_figure(n_routed_experts=64, n_activated_experts=6)
    assert_series_distinct(fig)
    assert smallest_text_pt(fig) >= FIGURE_MIN_FONT_PT
    assert "6 of 64 experts" in fig.axes[0].get_title()


def test_the_variant_caps_top_k():
    assert pm.variant(n_routed_experts=2, n_activated_experts=8).n_activated_experts == 2
