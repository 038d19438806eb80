"""The claims table: verdict rules, the exact claims, and the table's form."""

import math

import nbformat
import pytest
from hymo_book.claims import (
    CLAIMS,
    ERRATA,
    Claim,
    ClaimsTable,
    check,
    check_all,
    errata_table,
    section_key,
    values_errata,
    verdict,
)
from hymo_book.claims.values import cfg, layout
from hymo_book.claims.values_measured import hybrid_over_all_mla, speedup_range
from hymo_book.curriculum import BOOK, CHAPTERS
from hymo_book.kernels.arithmetic import launches_per_step
from hymo_book.results import load_result
from hymo_book.site.readme import headline_section

from hymo_mini.analysis.params import formula_params
from hymo_mini.config import replace


@pytest.fixture(scope="module")
def table() -> ClaimsTable:
    return check_all()


# ---- verdict rules ---------------------------------------------------------------------
def claim(documented, **kwargs):
    return Claim("x", "0", "test", documented, lambda: None, **kwargs)


def test_verdict_rules():
    assert verdict(claim(100), 100) == "correct"
    assert verdict(claim(100), 100.4) == "correct"  # within 0.5%: the document rounds
    assert verdict(claim(100), 104) == "approximately right"
    assert verdict(claim(100), 120) == "wrong"
    assert verdict(claim(100, approx=0.0), 101) == "wrong"
    assert verdict(claim(100, tol=0.05), 104) == "correct"
    assert verdict(claim(0.0), 0.0) == "correct"
    assert verdict(claim(1.0), 0.0) == "wrong"
    assert verdict(claim("b, c"), "b, c") == "correct"
    assert verdict(claim("v"), "b, c") == "wrong"
    assert verdict(claim(100, versus="elsewhere: 200"), 100) == "contradiction"
    assert verdict(claim(None), "what hymo_mini does") == "not specified"


def test_a_note_may_be_computed():
    result = check(Claim("n", "1", "two", 2, lambda: 2, note=lambda: f"{1 + 1} computed"))
    assert result.note == "2 computed" and "2 computed" in str(ClaimsTable([result]))


def test_unknown_unit_is_an_error():
    with pytest.raises(ValueError, match="unknown unit"):
        claim(1, unit="furlongs")


def test_check_uses_the_compute_function():
    result = check(Claim("y", "1", "two", 2, lambda: 1 + 1))
    assert result.computed == 2 and result.verdict == "correct"
    assert check(Claim("z", "1", "three", 3, lambda: 2)).verdict == "wrong"


# ---- exact claims ----------------------------------------------------------------------
EXACT = {
    "gdn-heads": 40,
    "capacity": 3_072,  # not 768
    "kv-32mb": 33_554_432,
    "kv-16mb": 33_554_432,  # K and V
    "mla-cache-256": 160,  # values per token, k_pe stored once
    "state-4kb": 4_096,
    "gdn-state-80k": 81_920,
    "decay-head10": -11.0,
    "decay-head39": -40.0,
    "launch-count": sum(launches_per_step().values()) * 4096,  # counted, times T
    "launch-count-intro": sum(launches_per_step().values()) * 4096,
    "triton-launches": 1,  # one launch of a (B·H) grid
    "kv-8-layers-32k": 2 * 2 ** 30,
    "kv-8-layers-128k": 8 * 2 ** 30,
    "ckpt-235mb": 8 * 4 * 4096 * 896 * 2,
    "head-twice": 1,
    "latent-norm-params": 224 + 128,
    "qk-matrix": 4096 ** 2,
    "head-dim": 128,
    "linattn-special": "g = 0",
    "delta-name": "adds (reads v1 + v2)",
    "erasure-per-dim": "head (one scalar)",
    "linattn-state": "S × D",
    "linattn-cost": "S × D",
    "groups-cache": "the same for 1, 4, 8, 16 groups",
    "replace-variant": "TypeError",
    "vocab-constant": "a config field",
    "q-shape": "(2, 128, 2048)",
    "v-shape": "(2, 128, 896)",
    "attn-out-shape": "(2, 128, 2048)",
    "kv-latent-shape": "(2, 128, 160)",
    "gdn-bc-shape": "(2, 128, 40, 32)",
    "hbm-writes": 33,
    "gqa-cache": 4.0,
    "latent-1mb": 320,
    "moe-active-layer": 18_593_792,
    "moe-stored-layer": 105_297_920,
    "embedding": 57_573_376,
    "mtp-params": 12_386_304,
    "kv-proj-mha": 3_670_016,
    "kv-proj-mla": 258_048,
    "head-115M": 2 * 896 * 64_256,
    "act-940mb": 939_524_096,
    "trajectory": 2_684_354_560,
    "mla-positions": "3, 7, ..., 31",  # the figure's layout, MLA last in each group of four
    "nope-positions": "2, 6, ..., 30",  # the GDN layer just before each of those
    "A_log-shape": "(40, 32)",
    "decay-gate": "dt_proj",
    "rope-gdn": "b, c",
    "theta-slowest": "k=15",
    "mtp-lengths": "T-2, T-3",
    "bf16-tie": "bf16 equal, fp32 distinct",
    "router-fp32": "float32 probs and top-k for bf16 input",
    # the errata of chapters 04-06 and 11-13
    "rope-distance": "norm preservation",
    "rope-intuition": "small k: high frequency",
    "expert-bias": 3 * 896 * 2304 + 2 * 2304 + 896,  # nn.Linear's default biases counted
    "gate-bias-grad": "gets a gradient",
    "mtp-formula": "MTP_1(h_t, x_{t+1})",
    "gqa-cache-text": 4 / 16,
    "absorb-cache": "latent c_t and k_pe",
    "absorb-flops": "absorbed costs less",
    "kv-8-mla": 8 * 4096 * (128 + 32) * 2,
    "kv-8-mla-32k": 8 * 32_768 * (128 + 32) * 2,
}


@pytest.mark.parametrize("claim_id", sorted(EXACT))
def test_exact_claims(table, claim_id):
    assert table[claim_id].computed == EXACT[claim_id]


def test_computed_values_close_to_closed_forms(table):
    assert table["theta-1"].computed == pytest.approx(10_000 ** (-2 / 32))
    assert table["mla-16x"].computed == pytest.approx(25.6)
    assert table["softcap-15"].computed == pytest.approx(0.41997, abs=1e-5)
    assert table["softcap-5"].computed == pytest.approx(0.896630, abs=1e-6)
    assert table["embed-std"].computed == pytest.approx(896 ** -0.5, rel=0.01)
    assert table["embed-unit-var"].computed == pytest.approx(1 / 896, rel=0.02)
    assert 0.55 < table["decay-head0"].computed < 0.67  # exp(-g) with g ≈ 0.5 at init
    formula = formula_params("hymo_750m")
    assert table["total-active"].computed == formula.active
    assert table["total-stored"].computed == formula.stored


def test_the_texts_layout_gives_the_documented_lists(table):
    text = replace(cfg(), mla_position="first", nope_hybrid_gdn=True)
    assert layout(text.mla_positions) == table["mla-positions"].claim.documented
    assert layout(text.nope_gdn_positions) == table["nope-positions"].claim.documented


def test_the_nope_note_gives_both_rules_on_both_layouts(table):
    note = table["nope-positions"].claim.note
    for position in ("first", "last"):
        c = replace(cfg(), mla_position=position, nope_hybrid_gdn=True)
        after = tuple(p + 1 for p in c.mla_positions if p + 1 in c.gdn_positions)
        assert f"after would be {layout(after)}" in note, position
        if position == "last":  # the default: the list's layers are MLA layers there
            assert set(range(3, 28, 4)) <= set(c.mla_positions)
            assert f"before is {layout(c.nope_gdn_positions)}" in note


def test_the_mla_reading_rests_on_the_mqar_seeds(table):
    """The note's evidence, counted from the results file it names: a run learned MQAR when
    it scores at least 90% on every evaluated task (chance is 1/N for N keys)."""
    report = load_result("mqar_seeds_h200_2026-12-01.json", need=("runs",))

    def learned(**fields):  # (runs that learned, runs) of the 4-layer stack with ``fields``
        types = replace(cfg(), n_layers=4, **fields).layer_types
        code = "".join("A" if t == "mla" else "G" for t in types)
        runs = [r for r in report["runs"] if r["layer_types"] == code]
        assert runs, code
        return sum(min(acc for _, _, acc in r["accuracy"]) >= 0.9 for r in runs), len(runs)

    (last, n_last), (first, n_first) = learned(mla_position="last"), learned(mla_position="first")
    assert last > first  # the preference the reading rests on
    assert learned(mla_every=1)[0] == learned(mla_every=0)[0] == 0  # neither pure stack did
    note = table["mla-positions"].claim.note()
    assert cfg().mla_position == "last" and "reading: the figure's" in note
    assert f"MLA last learned the task in {last} of {n_last} runs" in note
    assert f"MLA first in {first} of {n_first}" in note and "within that recipe" in note


def test_fisher_two_sided_matches_the_hypergeometric_by_hand():
    from hymo_book.claims.values_measured import fisher_two_sided

    # 3 of 6 against 0 of 6: the two extreme splits each have 20/220; both count
    assert fisher_two_sided(3, 6, 0, 6) == pytest.approx(40 / 220)
    assert fisher_two_sided(6, 6, 0, 6) == pytest.approx(2 / 924)
    assert fisher_two_sided(1, 2, 1, 2) == pytest.approx(1.0)


def test_verdicts_of_key_claims(table):
    expected = {
        "capacity": "wrong", "theta-1": "wrong", "launch-arith": "correct",
        "launch-count": "wrong", "speedup-8000": "wrong", "triton-launch": "wrong",
        "hybrid-40pct": "wrong", "hybrid-3-5x": "wrong", "padding": "wrong",
        "derive-config": "not specified", "block-identity": "wrong", "ckpt-235mb": "correct",
        "trajectory": "approximately right", "mla-positions": "contradiction",
        "nope-positions": "contradiction",
        "moe-active-layer": "contradiction", "stored-gb": "wrong", "gdn-state-80k": "correct",
        "total-active": "correct", "total-stored": "correct", "attn-412G": "wrong",
        "tput-arith": "correct", "tput": "wrong", "softcap-5": "approximately right",
        "softcap-15": "wrong", "decay-head10": "wrong", "bf16-tie": "correct",
        "rope-extrapolation": "wrong", "moe-dropped": "wrong", "router-roundtrip": "wrong",
        "mtp-signal": "wrong", "no-init-pass": "contradiction", "expert-bias": "wrong",
        "kv-32mb": "correct", "kv-8-mla": "wrong", "act-940mb": "correct",
    }
    assert {k: table[k].verdict for k in expected} == expected


# ---- the table -------------------------------------------------------------------------
def test_table_form(table):
    assert len(table) == len(CLAIMS) >= 30
    ids = [r.claim.id for r in table]
    assert len(set(ids)) == len(ids)
    counts = table.counts()
    assert sum(counts.values()) == len(table) and all(counts.values())
    text = str(table)
    assert text == str(check_all())  # deterministic
    assert all(i in text for i in ids) and "Notes" in text
    page = table._repr_html_()
    assert page.count("<tr>") == len(table) + 1 and "contradiction" in page
    assert len(table.filter(verdict="contradiction")) == counts["contradiction"]
    assert {r.claim.section for r in table.filter(section="12")} >= {"12.3", "12.2.4"}
    assert [r.claim.id for r in table.select(["capacity", "theta-1"])] == ["capacity", "theta-1"]
    with pytest.raises(KeyError, match="no claim"):
        table["nothing"]
    with pytest.raises(ValueError, match="verdict must be"):
        table.filter(verdict="maybe")


def test_every_contradiction_says_what_the_document_says_elsewhere(table):
    for r in table.filter(verdict="contradiction"):
        assert r.claim.versus and r.note
    for r in table.filter(verdict="wrong"):
        assert r.note or r.claim.id in {"theta-2", "decay-head39", "latent-4x"}


def test_claims_come_in_the_documents_order(table):
    keys = [section_key(r.claim.section) for r in table]
    assert keys == sorted(keys)
    assert section_key("6") < section_key("6.1") < section_key("11.2") < section_key("appendix")


# ---- one number, shared with the kernel report and the README ---------------------------
def test_the_launch_count_is_the_dispatchers(table):
    per_step = sum(launches_per_step().values())
    assert per_step > 2  # the loop's operators, not the document's "~2 kernels"
    assert f"{per_step} kernels per step" in table["launch-count"].note


def test_the_speedup_is_the_measured_one(table):
    low, high = speedup_range()
    computed = table["speedup-8000"].computed
    assert computed == high and low < high < 8000 / 10  # the kernel alone, forward
    assert table["hybrid-3-5x"].computed == hybrid_over_all_mla(4096)


def test_the_readme_shows_the_hybrid_against_all_mla_as_measured():
    assert f"{hybrid_over_all_mla(16384):.2f}× the all-MLA stack" in headline_section()


def test_the_hybrid_share_counts_the_moe_of_every_mla_layer(table):
    from hymo_mini.analysis.flops import forward_flops

    mixers_only = table["hybrid-40pct"].note
    all_mla = forward_flops(replace(cfg(), mla_every=1), 4096, include_mtp=False)
    hybrid = forward_flops(cfg(), 4096, include_mtp=False)
    head = hybrid["output head (logits)"]
    expected = (hybrid["total"] - head) / (all_mla["total"] - head)
    assert table["hybrid-40pct"].computed == pytest.approx(expected)
    assert expected < 0.5 and "mixers alone give 80%" in mixers_only


# ---- the errata the teaching chapters carried ---------------------------------------------
def test_every_errata_row_is_a_claim(table):
    ids = {r.claim.id for r in table}
    for chapter, (title, rows) in ERRATA.items():
        assert chapter in CHAPTERS and title and rows, chapter
        assert set(rows) <= ids, (chapter, set(rows) - ids)
        assert len(set(rows)) == len(rows), chapter
        assert [r.claim.id for r in errata_table(chapter, table)] == rows
    with pytest.raises(KeyError, match="no errata for chapter"):
        errata_table("99_nothing", table)


def test_every_chapter_that_links_here_has_its_errata():
    """A teaching chapter that sends its reader to chapter 20 for the document's errors
    finds its own list there."""
    linking = [stem for stem in CHAPTERS if (BOOK / f"{stem}.ipynb").exists()
               and not stem.startswith("20") and any(
                   c.cell_type == "markdown" and "chapter 20" in c.source.lower()
                   for c in nbformat.read(BOOK / f"{stem}.ipynb", as_version=4).cells)]
    assert linking and set(linking) <= set(ERRATA), set(linking) - set(ERRATA)


# ---- the experiments behind the errata ---------------------------------------------------
def test_rope_errata(table):
    facts = values_errata.rope_distance_facts()
    assert facts == {"rope_keeps_distance": True, "rope_relative": True,
                     "random_keeps_distance": True, "random_relative": False,
                     "rope_shift_rule": True}
    # pairs k of 16 whose wavelength 2π · 10000^(k/16) exceeds 4096 positions
    slow = sum(2 * math.pi * 10_000 ** (k / 16) > 4096 for k in range(16))
    assert table["rope-extrapolation"].computed == slow == 4
    assert values_errata.pairs_without_a_turn(T=10 ** 6) == 0  # everything turns eventually


def test_moe_errata(table):
    from hymo_book.moe_experiments import router_precision

    shares = [values_errata.dropped_share(s) for s in (0.0, 0.05, 0.1)]
    assert shares[0] == 0 and shares[0] < shares[1] < shares[2]  # depends on the balance
    assert table["moe-dropped"].computed == shares[2] > 0.001
    assert table["router-roundtrip"].computed == router_precision(cfg())["changed"] > 0
    assert values_errata.documented_gate_bias()["bias"] > 0
    assert values_errata.expert_bias_is_buffer()


def test_mtp_and_init_errata(table):
    share = values_errata.mtp_gradient_share()
    assert table["mtp-signal"].computed == share["ratio"] > 0
    assert f"{sum(cfg().mtp_loss_weights):g} of the main loss" in table["mtp-signal"].note
    default, scaled = values_errata.first_logits("torch"), values_errata.first_logits("scaled")
    assert default["std"] == pytest.approx(896 ** 0.5, rel=0.05)  # √(dim · 1 · 1)
    assert scaled["std"] == pytest.approx(1.0, rel=0.05) and scaled["beyond_cap"] == 0
    assert default["beyond_cap"] > 0.5


def test_gdn_and_mla_errata(table):
    assert values_errata.state_read_share() < 0.1  # small keys: o ≈ D·v inside the mixer
    f = values_errata.decode_flops(4096)
    explicit, kv, absorbed = f.values()
    assert kv < absorbed < explicit  # cheaper than re-expanding, dearer than a K/V cache
    assert f"{explicit / absorbed:.0f}× fewer" in table["absorb-flops"].note
