"""hymo_book.results (the one reader of book/results), hymo_book.style, the figures
registry (every file of figures/, the model's and the measured runs') and the figures of
chapter 17 (optimizers, training), on synthetic results."""

import json

import pytest
from figure_checks import assert_series_distinct
from hymo_book import results, style
from hymo_book.plots import figures
from hymo_book.plots import optimizers as optim_plots
from matplotlib.figure import Figure

from hymo_mini.optim import optimizer_groups


def _write(directory, name, report):
    (directory / name).write_text(json.dumps(report))
    return directory / name


# ---- the reader --------------------------------------------------------------------------
def test_load_result_reads_by_name_or_path_and_records_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    _write(tmp_path, "train_x.json", {"runs": [1], "date": "d"})
    assert results.load_result("train_x.json") == {"runs": [1], "date": "d",
                                                   "file": "train_x.json"}
    other = _write(tmp_path.parent, "elsewhere.json", {"runs": [2]})
    assert results.load_result(other)["runs"] == [2]
    assert [p.name for p in results.list_results("train_*")] == ["train_x.json"]


def test_a_missing_file_names_the_path_and_the_command_that_writes_it(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    for name, command in (("mqar_gpu.json", "python3 benchmarks/mqar.py --out "
                                            "benchmarks/out/mqar_gpu.json"),
                          ("optimizers_cpu.json", "benchmarks/optimizers.py"),
                          ("train_h100.json", "benchmarks/train_throughput.py"),
                          ("mqar_seeds_h100.json", "benchmarks/mqar_seeds.py"),
                          ("train_step_h100.json", "benchmarks/train_step.py"),
                          ("gdn_h100_2027.json", "benchmarks/gdn.py")):
        with pytest.raises(FileNotFoundError) as err:
            results.load_result(name)
        assert str(tmp_path / name) in str(err.value) and command in str(err.value)


def test_a_file_without_the_sections_asked_for_is_an_error(tmp_path):
    path = _write(tmp_path, "mqar_x.json", {"settings": {}, "variants": {"MLA": {}}})
    with pytest.raises(ValueError, match="'settings'"):
        results.load_result(path, need=("settings", "variants"))
    with pytest.raises(ValueError, match="JSON object"):
        results.load_result(_write(tmp_path, "list.json", [1, 2]))


def test_run_caption_reads_both_metadata_layouts():
    gpu = {"environment": {"gpu": "G1", "torch": "2.11", "triton": "3.6", "fla_core": "0.6",
                           "date": "2026-11-30", "command": "python3 benchmarks/gdn.py"},
           "file": "gdn_g1.json"}
    assert results.run_caption(gpu) == ("gdn_g1.json: G1, torch 2.11, Triton 3.6, fla-core 0.6, "
                                        "2026-11-30\n  python3 benchmarks/gdn.py")
    cpu = {"hardware": {"cpu": "C", "cores": 2, "torch_threads": 1, "torch": "2.13"},
           "date": "2026-11-29", "command": "python benchmarks/optimizers.py"}
    head, command = results.run_caption(cpu, mark="[a] ").split("\n")
    assert head == "[a] : C, 2 cores, 1 torch thread, torch 2.13, 2026-11-29"
    assert command.strip() == "python benchmarks/optimizers.py"
    long = {**cpu, "command": "x " * 80}
    assert max(map(len, results.run_caption(long, width=40).splitlines())) <= 60


# ---- the styles --------------------------------------------------------------------------
@pytest.mark.parametrize("group", ["backend", "mqar", "optimizer", "recall"])
def test_every_series_of_a_group_looks_different_in_grey(group):
    styles = {"backend": style.BACKENDS, "mqar": style.MQAR_VARIANTS,
              "optimizer": style.OPTIMIZERS, "recall": style.RECALL_RULES}[group]
    looks = list(styles.values())
    assert len({(s.marker, s.linestyle) for s in looks}) == len(looks)
    assert len({s.label for s in looks}) == len(looks)
    if group == "backend":
        assert len({s.marker for s in looks}) == len(looks)  # the sweep uses lines for metrics
        assert len({s.hatch for s in looks} | {style.DOCUMENT_BAR.hatch}) == len(looks) + 1


def test_old_and_new_backend_names_share_one_style():
    for old, new in style.OLD_BACKEND_NAMES.items():
        assert new in style.BACKENDS and style.backend_style(old) == style.backend_style(new)
    with pytest.raises(KeyError, match="no backend style for 'cuda'"):
        style.backend_style("cuda")
    with pytest.raises(KeyError, match="group must be"):
        style.style("colour", "naive")


# ---- chapter 15's figures ----------------------------------------------------------------
def _comparison(steps=20):
    def variant(offset, muon_lr):
        return {"lr": 3e-3, "muon_lr": muon_lr, "train_step": list(range(1, steps + 1)),
                "train_main": [5.0 - 0.1 * i + offset for i in range(steps)],
                "val_step": [0, 10, 20], "val_loss": [5.5, 4.6 + offset, 4.1 + offset]}
    return {"settings": {"config": "hymo_mini", "steps": steps, "batch_size": 8,
                         "seq_len": 128},
            "hardware": {"cpu": "test cpu", "torch_threads": 1, "torch": "x"},
            "date": "2026-01-01", "command": "python benchmarks/optimizers.py",
            "variants": {"adamw": variant(0.0, None), "muon": variant(-0.1, 0.02),
                         "normuon": variant(-0.2, 0.02)}}


def test_optimizer_comparison_marks_each_final_loss_in_its_own_look():
    result = _comparison()
    fig = optim_plots.optimizer_comparison(result)
    assert len(fig.axes[0].get_legend().get_texts()) == len(result["variants"])
    finals = [float(t.get_text()) for t in fig.axes[1].texts]  # the final val losses, marked
    assert finals == pytest.approx([v["val_loss"][-1] for v in result["variants"].values()],
                                   abs=1e-3)
    assert_series_distinct(fig)


def test_split_figure_hatches_each_group():
    from hymo_mini.config import load_config
    from hymo_mini.model import build_hymo

    fig = optim_plots.split_figure(optimizer_groups(build_hymo(load_config("hymo_mini").model)))
    hatches = {p.get_hatch() for p in fig.axes[0].patches}
    assert len(hatches) == 3  # muon, adamw with and without decay


# ---- the registry ------------------------------------------------------------------------
def test_registry_collects_every_result_figure_once():
    found = figures.collect_figures(figures.RESULT_MODULES)
    assert {"gdn_benchmark.png", "gdn_benchmark_sweep.png", "optimizers_cpu.png",
            "state_capacity.png"} == set(found)
    with pytest.raises(RuntimeError, match="registered twice"):
        figures.collect_figures(("hymo_book.plots.mqar", "hymo_book.plots.mqar"))


def test_the_registry_draws_exactly_the_files_of_figures():
    """One command redraws the repository's figures/: every file there is registered, and
    every registered figure has its file."""
    drawn = set(figures.collect_figures())
    assert drawn == {p.name for p in figures.DEFAULT_OUT.glob("*.png")}
    assert set(figures.collect_figures(figures.MODEL_MODULES)) < drawn


def test_the_registry_checks_names_and_draws_into_a_new_folder(tmp_path, capsys):
    def square():
        fig = Figure(figsize=(1, 1))
        fig.add_subplot().plot([0, 1])
        return fig

    found = {"b.png": square, "a.png": square}
    assert figures.figure_names(found, None, "cmd --list") == ["a.png", "b.png"]  # all, sorted
    assert figures.figure_names(found, ["b.png"], "cmd --list") == ["b.png"]
    with pytest.raises(ValueError, match=r"--only 'a.pnf': no such figure \(did you mean "
                                         r"'a.png'\?\); cmd --list shows them"):
        figures.figure_names(found, ["b.png", "a.pnf"], "cmd --list")
    figures.draw_figures(found, ["b.png"], tmp_path / "new")
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["b.png"]
    assert capsys.readouterr().out == f"wrote {tmp_path / 'new' / 'b.png'}\n"


def test_registry_command_writes_the_figures_asked_for(tmp_path, capsys):
    assert figures.main(["--out", str(tmp_path), "--only", "gdn_benchmark_sweep.png"]) == 0
    assert (tmp_path / "gdn_benchmark_sweep.png").stat().st_size > 0
    assert figures.main(["--list"]) == 0
    listed = capsys.readouterr().out.split()
    assert "gdn_benchmark.png" in listed and "layer_map.png" in listed  # measured and model
    with pytest.raises(SystemExit):
        figures.main(["--only", "nothing.png"])


# ---- legibility: every figure the book's helpers draw keeps its text at 8 pt or more -----
def _chapter_only_figures():
    from hymo_book.kernels import arithmetic as kernel_chapter
    from hymo_book.kernels import chunk_levels
    from hymo_book.plots import kernel_benchmarks as kernel_plots

    from hymo_mini.config import load_config
    from hymo_mini.model import build_hymo

    mini = load_config("hymo_mini").model
    return {"speedup (06)": kernel_plots.speedup_figure,
            "memory (06)": kernel_chapter.memory_figure,
            "levels (06)": chunk_levels.level_map_figure,
            "split (15)": lambda: optim_plots.split_figure(optimizer_groups(build_hymo(mini)))}


@pytest.mark.slow
@pytest.mark.parametrize("name", [*sorted(figures.collect_figures()),
                                  *sorted(_chapter_only_figures())])
def test_book_figure_text_is_at_least_the_floor(name):
    import matplotlib.pyplot as plt
    from hymo_book.site.legibility import FIGURE_MIN_FONT_PT, smallest_text_pt

    fig = {**figures.collect_figures(), **_chapter_only_figures()}[name]()
    try:
        smallest = smallest_text_pt(fig)
    finally:
        plt.close(fig)
    assert smallest is not None, f"{name} draws no text (no title, labels or ticks?)"
    assert smallest >= FIGURE_MIN_FONT_PT, (
        f"{name}: its smallest text is {smallest:g} pt; the book's figures use at least "
        f"{FIGURE_MIN_FONT_PT:g} pt (STYLE.md), so it shows below 8 pt on the site")
