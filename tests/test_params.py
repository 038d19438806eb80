"""Parameter counts: the closed form equals the walked model for the presets and for
variants, the production figures, the document comparison and the CLI."""

from __future__ import annotations

import dataclasses

import pytest

from hymo_mini.analysis.params import (
    COMPONENTS,
    DOCUMENT_FIGURES,
    ParamTable,
    count_params,
    document_comparison,
    formula_params,
)
from hymo_mini.config import load_config
from hymo_mini.mla import mla_param_count
from hymo_mini.model import HyMo
from hymo_mini.moe import moe_param_counts


@pytest.mark.parametrize("name", ["hymo_mini", "hymo_750m"])
def test_formula_equals_walked_for_presets(name):
    walked, formula = count_params(name), formula_params(name)
    assert walked.as_dict() == formula.as_dict()
    assert walked == formula


VARIANTS = [
    dict(gdn_residual="document"),
    dict(gdn_rule="delta"),
    dict(nope_hybrid_gdn=True),
    dict(mla_position="first"),
    dict(mla_every=0),  # all GDN: no attention, no MoE
    dict(mla_every=1),  # all MLA
    dict(mtp_depth=0, mtp_loss_weights=()),
    dict(mtp_depth=3, mtp_loss_weights=(0.3, 0.2, 0.1), mtp_inter_dim=40),
    dict(n_shared_experts=0),
    dict(n_shared_experts=2, n_routed_experts=8, n_activated_experts=3),
    dict(n_kv_groups=1, qk_rope_head_dim=0, v_head_dim=8),
    dict(n_layers=5),
    dict(hc_mult=3),  # mHC: one connection per residual branch
]


@pytest.mark.parametrize("overrides", VARIANTS, ids=lambda o: ",".join(o))
def test_formula_equals_walked_for_variants(overrides):
    config = dataclasses.replace(load_config("hymo_mini").model, **overrides)
    assert count_params(config).as_dict() == formula_params(config).as_dict()


def test_walking_a_real_model_matches_meta():
    config = load_config("hymo_mini").model
    model = HyMo(config)
    assert count_params(model).as_dict() == count_params(config).as_dict()
    assert count_params(model).stored == sum(p.numel() for p in model.parameters())


def test_production_figures():
    config = load_config("hymo_750m").model
    t = count_params(config)
    expert = 3 * 896 * 2304  # 6,193,152
    assert t["embedding"].stored == 64_256 * 896 == 57_573_376
    assert t["gdn"].stored == 24 * 8_069_456
    assert t["mla"].stored == 8 * 2_755_040 == 8 * mla_param_count(config)
    assert (t["moe_routed"].stored, t["moe_routed"].active) == (8 * 16 * expert, 8 * 2 * expert)
    assert t["moe_routed"].stored == 792_723_456 and t["moe_routed"].active == 99_090_432
    assert t["moe_shared"].stored == 8 * expert == 49_545_216
    assert t["moe_router"].stored == 8 * 896 * 16
    assert t["mtp"].stored == 2 * expert == 12_386_304
    assert t["norms"].stored == 896 * (1 + 2 * 8 + 24)  # final, MLA pre-norms, GDN pre-norms
    assert t.stored == 1_128_087_040
    assert t.active == 434_454_016
    # the MoE module's own count agrees, per layer
    moe_stored, moe_active = moe_param_counts(config)
    per_layer = lambda attr: sum(getattr(t[c], attr) for c in
                                 ("moe_routed", "moe_shared", "moe_router")) // 8
    assert (per_layer("stored"), per_layer("active")) == (moe_stored, moe_active)
    # active differs from stored only in the routed experts
    for row in t.rows:
        assert (row.active == row.stored) == (row.component != "moe_routed")


def test_document_mode_gdn_is_the_documented_8_07m():
    config = dataclasses.replace(load_config("hymo_750m").model, gdn_residual="document")
    t = count_params(config)
    assert t["gdn"].stored / 24 == 8_069_456  # no pre-norm in the documented block
    assert t["norms"].stored == 896 * 17


def test_mhc_component():
    config = dataclasses.replace(load_config("hymo_750m").model, hc_mult=4)
    t = count_params(config)
    # 2 per MLA block + 1 per GDN block = 40 modules of (24 x 3584) + 24 + 3
    assert t["mhc"].stored == 40 * (24 * 4 * 896 + 24 + 3) == 3_441_720
    assert t.stored == 1_128_087_040 + 3_441_720
    assert "mHC" not in str(count_params("hymo_750m"))  # absent when hc_mult = 1


def test_document_figures_side_by_side():
    text = document_comparison("hymo_750m")
    for key in DOCUMENT_FIGURES:
        assert key in text
    computed = count_params("hymo_750m")
    close = lambda key, value: abs(value / DOCUMENT_FIGURES[key] - 1) < 0.01
    # where the document is right (to its rounding)
    assert close("embedding", computed["embedding"].stored)
    assert close("gdn", computed["gdn"].stored)
    assert close("mla", computed["mla"].stored)
    assert close("moe_routed_stored", computed["moe_routed"].stored)
    assert close("moe_routed_active", computed["moe_routed"].active)
    assert close("mtp", computed["mtp"].stored)
    assert close("total_active", computed.active) and close("total_stored", computed.stored)
    # and where it is not
    assert not close("mla_per_layer (12.2.3)", computed["mla"].stored / 8)
    assert not close("moe_per_layer_stored (12.2.4 heading)", 105_297_920)
    assert not close("model name (750M)", computed.active)
    assert not close("model name (750M)", computed.stored)


def test_table_text_and_html():
    t = count_params("hymo_mini")
    text = str(t)
    assert text == str(count_params("hymo_mini"))
    assert "Total" in text and "410,720" in text and "336,992" in text
    for component in ("embedding", "gdn", "mla", "moe_routed", "mtp"):
        assert COMPONENTS[component] in text
    assert "Other" not in text  # nothing unclassified
    html = t._repr_html_()
    assert html.startswith("<table") and html.count("<tr>") == len(t.rows) + 2
    assert isinstance(t, ParamTable) and t.as_dict()["total"] == (t.stored, t.active)


def test_errors():
    with pytest.raises(TypeError, match="preset name, HyMoConfig or ModelConfig"):
        count_params(42)
    with pytest.raises(TypeError, match="preset name, HyMoConfig or ModelConfig"):
        formula_params(None)
    with pytest.raises(KeyError, match="unknown component"):
        count_params("hymo_mini")["attention"]
    assert count_params("hymo_mini")["other"].stored == 0


def test_cli(capsys):
    from hymo_mini.cli import main

    assert main(["params", "hymo_mini"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("hymo_mini: parameters") and "document" not in out
    assert main(["params"]) == 0  # hymo_750m with the document comparison
    out = capsys.readouterr().out
    assert "1,128,087,040" in out and "434,454,016" in out and "model name (750M)" in out
