"""hymo_book.kernels.forward (book chapter 21): the gla forward's runs read back as they were
written, the settings named in words, and the ratios to the copy computed from the run."""

from hymo_book.kernels import forward as kf
from hymo_book.results import load_result


def test_setting_labels():
    assert kf.setting_label({}) == "as it was (three launches, chunks of 64)"
    assert kf.setting_label({"forward": "chain", "chunk": 128}) == "one launch, chunks of 128"
    assert kf.setting_label({"output_fwd": {"maxnreg": 168, "unroll": True}}) == (
        "at most 168 registers, the walk unrolled")


def test_chain_table_reads_every_change():
    chain = kf.chain_table()
    shapes = load_result(kf.CHAIN_RUN)["shapes"]
    assert len(chain.rows) == sum(len(s["changes"]) for s in shapes.values())
    first = chain.rows[0]
    assert first["bfloat16"]["fwd_ms"] == shapes["B4_T4096_H40"]["changes"][0]["forward"][
        "bfloat16"]["fwd_ms"]
    # the table leaves out the register caps, the values keep them
    assert sum("maxnreg" in r["change"].get("output_fwd", {}) for r in chain.rows) > 0
    assert "registers" not in str(chain.table)


def test_delta_chain_table_reads_every_change():
    assert kf.delta_setting_label({}) == "in passes (as it was)"
    assert kf.delta_setting_label({"forward": "chain", "chain": {"chunks": 8}}) == (
        "one launch, stretches of 8 chunks")
    table = kf.delta_chain_table()
    reports = [load_result(r) for r in kf.DELTA_CHAIN_RUNS]
    assert len(table.rows) == sum(len(r["delta_forward_changes"]["changes"]) for r in reports)
    assert all(run in table.caption for run in kf.DELTA_CHAIN_RUNS)


def test_pairs_table_reads_both_settings_of_every_run():
    """Per rule, shape and dtype timed: the levels' and auto's forward and their ratios to
    the copy, from the runs' two changes."""
    table = kf.pairs_table()
    assert {r["rule"] for r in table.rows} == {"gla", "delta"}
    assert all(name in table.caption for names in kf.PAIRS_RUNS.values() for name in names)
    for r in table.rows:
        assert r["auto_ratio"] == r["auto_ms"] / r["copy_ms"] and r["levels_ms"] > 0
