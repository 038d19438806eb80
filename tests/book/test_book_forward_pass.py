"""Chapter 14's helpers: section 11's shapes against a trace, FLOPs counted against the
formulas, the figure's rules, the measured step beside the cost model."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from figure_checks import assert_series_distinct  # noqa: E402
from hymo_book import forward_pass as fp  # noqa: E402
from hymo_book.site.legibility import FIGURE_MIN_FONT_PT, smallest_text_pt  # noqa: E402

from hymo_mini.analysis.flops import forward_flops  # noqa: E402
from hymo_mini.config import load_config  # noqa: E402


def test_section_11_shapes_are_read_from_the_trace():
    rows = fp.section_11_shapes()
    assert len(rows) == len(fp.SECTION_11)
    by_tensor = {r.tensor: r for r in rows}
    prod = load_config("hymo_750m").model
    assert by_tensor["query"].traced == (2, 128, prod.n_heads * prod.head_dim)
    assert by_tensor["query"].verdict == "differs"
    assert by_tensor["latent and k_pe"].verdict == "same"
    assert by_tensor["shared expert hidden"].verdict == "same size, other layout"
    assert all(f"layers.{prod.mla_positions[0]}." in r.module for r in rows if "attn" in r.module)
    assert "section 11 says" in str(fp.shapes_table(rows))


def test_the_counter_agrees_with_the_formulas():
    table = fp.flop_check()
    verdicts = {row[0]: row[3] for row in table.rows}
    for name in ("output head", "MLA projections", "MLA attention core",
                 "MoE (router, 2 routed, shared)", "GDN projections", "GDN recurrence"):
        assert verdicts[name] == "equal", (name, verdicts[name])
    mini = load_config("hymo_mini").model
    T = 64
    assert verdicts["GDN causal conv"] == f"{(T + mini.gdn_d_conv - 1) / T:.3f}×"  # the padding


def test_the_flops_figure_reads_in_grey_scale():
    fig = fp.flops_figure(T_max=8192)
    assert_series_distinct(fig)
    assert smallest_text_pt(fig) >= FIGURE_MIN_FONT_PT
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    core = lines["MLA attention core"].get_ydata()
    flat = lines["MoE"].get_ydata()
    assert core[-1] > core[0] and flat[-1] == flat[0]  # only the attention core grows with T


def test_the_step_table_computes_the_recorded_flops():
    table = fp.step_table()
    assert all(row[2] == "yes" for row in table.rows), table
    run = fp.step_run()
    case = run["cases"]["hybrid_fast_b4t4096"]
    assert fp.step_flops("hybrid_fast_b4t4096") == pytest.approx(
        3 * forward_flops(load_config("hymo_750m").model, 4096)["total"])
    assert f"{case['tokens_per_s']:,}" in str(table)


def test_the_time_table_shares_add_up():
    table = fp.time_against_flops()
    flops = sum(float(row[1].rstrip("%")) for row in table.rows if row[1] != "-")
    time = sum(float(row[2].rstrip("%")) for row in table.rows)
    assert flops == pytest.approx(100, abs=0.5) and time == pytest.approx(100, abs=0.5)
    assert fp.STEP_RUN in table.title
