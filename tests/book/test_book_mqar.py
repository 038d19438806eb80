"""hymo_book.recall and hymo_book.plots.mqar (chapter 19): the no-training recall demos,
and the figures and tables of an MQAR sweep, on synthetic sweeps."""

import itertools
import json

import pytest
from figure_checks import assert_integer_ticks, assert_series_distinct
from hymo_book import results
from hymo_book.mqar import VARIANTS
from hymo_book.plots import mqar as mqar_plots
from hymo_book.recall import context_guess_accuracy, state_recall
from hymo_book.style import MQAR_VARIANTS
from matplotlib.figure import Figure


# ---- the no-training demos ---------------------------------------------------------------
def test_state_recall():
    assert all(state_recall(1, rule) == 1.0 for rule in ("gla", "delta", "attention"))
    assert state_recall(48, "attention") > 0.99  # attention keeps every pair
    gla, delta = state_recall(48, "gla"), state_recall(48, "delta")
    assert gla < 0.6 and delta < 0.6  # 48 random pairs do not fit a 16 x 16 state
    orthogonal_fits = state_recall(4, "gla", d_state=64)
    assert orthogonal_fits > 0.99  # few pairs in a wide state: nearly orthogonal keys
    with pytest.raises(ValueError, match="rule"):
        state_recall(4, "lstm")


def test_context_guess_accuracy():
    assert context_guess_accuracy(1, 16) == 1.0
    assert context_guess_accuracy(4, 10_000) == pytest.approx(0.25, abs=1e-3)  # no repeats
    # 10 values drawn from 16 repeat often: fewer distinct values, an easier guess
    assert 0.13 < context_guess_accuracy(10, 16) < 0.16
    exact = sum(1 / len(set(v)) for v in itertools.product(range(3), repeat=2)) / 9
    assert context_guess_accuracy(2, 3, n_sequences=200_000) == pytest.approx(exact, abs=5e-3)


# ---- the sweep's figures and tables ------------------------------------------------------
def fake_result(names=("GDN (gla)", "MLA")):
    rows = [[n, 64, 1.0 / n] for n in (2, 4, 8)] + [[4, t, 0.5] for t in (32, 48)]
    variant = {"layer_types": "GGGA", "gdn_rule": "gla", "parameters": 1000,
               "final_loss": 1.0, "loss_curve": [2.0, 1.0], "accuracy": rows, "seconds": 1.0}
    return {"settings": {"steps": 10, "n_layers": 4, "n_values": 16},
            "variants": {name: variant for name in names}}


def test_mqar_figure_draws_each_model_against_n_and_t():
    fig = mqar_plots.mqar_figure(fake_result())
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    line = fig.axes[0].lines[0]
    assert list(line.get_xdata()) == [2, 4, 8]  # accuracy against N at T = 64
    assert list(fig.axes[1].lines[0].get_xdata()) == [32, 48, 64]  # against T at N = 4
    for ax in fig.axes:
        assert_integer_ticks(ax.xaxis)


def test_every_mqar_model_has_its_own_look_in_one_figure():
    assert set(MQAR_VARIANTS) == set(VARIANTS)  # every model the library trains
    assert_series_distinct(mqar_plots.mqar_figure(fake_result(tuple(VARIANTS))))
    with pytest.raises(KeyError, match="no mqar style"):
        mqar_plots.mqar_figure(fake_result(("GDN (gla)", "LSTM")))


def test_mqar_tables():
    table = str(mqar_plots.mqar_table(fake_result()))
    assert "GDN (gla)" in table and "0.50" in table and "N8/T64" in table
    other = fake_result()
    del other["variants"]["MLA"]
    runs = mqar_plots.mqar_runs_table({"run a": fake_result(), "run b": other}, 4, 64)
    rows = {r[0]: r[1:] for r in runs.rows}
    assert rows == {"GDN (gla)": ("0.25", "0.25"), "MLA": ("0.25", "-")}


def test_state_capacity_figure():
    fig = mqar_plots.state_capacity_figure(max_pairs=8, trials=4)
    assert [list(line.get_xdata()) for line in fig.axes[0].lines[:3]] == [[1, 2, 4, 8]] * 3
    assert_series_distinct(fig)
    assert_integer_ticks(fig.axes[0].xaxis)


def test_load_sweep_reads_a_synthetic_file_and_names_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    (tmp_path / "mqar_x.json").write_text(json.dumps({**fake_result(), "command": "cmd"}))
    assert mqar_plots.load_sweep("mqar_x.json")["variants"].keys() == {"GDN (gla)", "MLA"}
    with pytest.raises(FileNotFoundError, match="benchmarks/mqar.py"):
        mqar_plots.load_sweep("mqar_missing.json")


# ---- the settled run: several seeds per layout -------------------------------------------
def fake_seeds():
    def run(variant, seed, learned):
        acc = 1.0 if learned else 0.3
        return {"variant": variant, "seed": seed, "layer_types": "GGGA", "gdn_rule": "gla",
                "parameters": 1000, "steps_done": 10, "final_loss": 0.1,
                "loss_curve": [3.0 - 0.1 * i for i in range(10)],
                "accuracy": [[2, 16, acc], [4, 16, acc], [4, 32, 0.95 if learned else acc]]}

    names = ["GDN (gla)", "GDN (delta)", "MLA", "3:1 MLA first (gla)", "3:1 MLA first (delta)",
             "3:1 MLA last (gla)", "3:1 MLA last (delta)"]
    runs = [run(name, seed, name.startswith("3:1 MLA last") and seed < 2)
            for name in names for seed in (0, 1, 2)]
    runs.append({"variant": "MLA", "seed": 3, "error": "RuntimeError: out of memory"})
    return {"settings": {"steps": 10, "n_layers": 4, "n_keys": 16, "seeds": [0, 1, 2],
                         "variants": names},
            "runs": runs, "summary": {n: {"accuracy": [[2, 16, 0.5, 0.3, 1.0, 0.1],
                                                     [4, 16, 0.5, 0.3, 1.0, 0.1],
                                                     [4, 32, 0.5, 0.3, 0.95, 0.1]]}
                                      for n in names},
            "command": "python3 benchmarks/mqar_seeds.py", "date": "today", "file": "x.json"}


def test_seeds_learned_counts_runs_that_reach_the_threshold_everywhere():
    report = fake_seeds()
    counts = mqar_plots.seeds_learned(report)
    assert counts["3:1 MLA last (gla)"] == (2, 3) and counts["MLA"] == (0, 3)  # error skipped
    assert mqar_plots.seeds_learned(report, threshold=0.99)["3:1 MLA last (gla)"] == (0, 3)
    rows = {r[0]: r for r in mqar_plots.seeds_table(report).rows}
    assert rows["3:1 MLA last (delta)"][3] == "2 of 3"


def test_seeds_figure_keeps_the_figure_rules():
    fig = mqar_plots.seeds_figure(fake_seeds())
    assert len(fig.axes) == 4
    assert_series_distinct(fig)
    for ax in fig.axes:
        assert_integer_ticks(ax.xaxis)  # steps and pairs
    loss = fig.axes[0].lines[0]
    assert list(loss.get_xdata())[:3] == [1, 2, 3]  # one point a step (run_sweep: 100 at most)
