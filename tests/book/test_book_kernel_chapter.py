"""hymo_book.kernels.arithmetic (book chapters 10 and 21): the error checks, the decay matrix of the
chunked form against the loop, the document's launch and memory arithmetic, and the predicted
peak memory of the recurrent kernel against the committed H200 measurement."""


import pytest
import torch
from figure_checks import assert_series_distinct
from hymo_book.kernels import arithmetic as kc
from hymo_book.results import load_result
from matplotlib.patches import Rectangle

from hymo_mini.ops import naive_gla

RECURRENT_RUN = "gdn_recurrent_h200_2026-11-30.json"  # the recurrent kernel's committed run


# ---- errors ----------------------------------------------------------------------------
def test_max_rel_error_is_the_largest_difference_over_the_largest_value():
    ref = torch.tensor([1.0, -4.0, 2.0])
    assert kc.max_rel_error(ref + torch.tensor([0.0, 0.0, 0.4]), ref) == pytest.approx(0.1)
    assert kc.max_rel_error(ref, ref) == 0.0
    with pytest.raises(ValueError, match="shape"):
        kc.max_rel_error(ref, ref[:2])


def test_check_line_reports_pass_and_failure_without_the_error_digits():
    ref = torch.linspace(-1, 1, 10)
    good = kc.check_line("rung", ref + 1e-8, ref, 1e-6)
    bad = kc.check_line("rung", ref * 1.01, ref, 1e-6)
    assert good.startswith("rung") and good.endswith("< 1e-06: True")
    assert bad.endswith(": False")
    with pytest.raises(ValueError, match="tol"):
        kc.check_line("rung", ref, ref, 0.0)


# ---- the chunked form ------------------------------------------------------------------
@pytest.mark.parametrize("T, S, decay", [(1, 3, 1.0), (13, 5, 0.3), (20, 4, 30.0)])
def test_decay_matrix_times_v_is_the_recurrence(T, S, decay):
    b, c, g, A = kc._example(T, S, decay, seed=T)
    v = torch.randn(T, 3, dtype=torch.float64)
    o_loop, _ = naive_gla(v[None, :, None], b[None, :, None], c[None, :, None],
                                     g[None, :, None], A[None])
    M = kc.decay_matrix(b, c, g, A)
    assert torch.equal(M, M.tril())
    torch.testing.assert_close(M @ v, o_loop[0, :, 0], rtol=1e-12, atol=1e-12)


def test_decay_matrix_rejects_mismatched_shapes():
    b, c, g, A = kc._example(6, 4, 1.0, seed=0)
    with pytest.raises(ValueError, match="expected b, c"):
        kc.decay_matrix(b, c[:, :3], g, A)
    with pytest.raises(ValueError, match="expected b, c"):
        kc.decay_matrix(b, c, g[:5], A)


# ---- launch arithmetic -----------------------------------------------------------------
def test_document_launch_arithmetic():
    doc = kc.document_launches()
    assert doc["loop_launches"] == 4096 * 2 * 40 * 4 == 1_310_720
    assert doc["loop_s"] == pytest.approx(13.1072)
    assert doc["kernel_launches"] == 160 and doc["kernel_ms"] == pytest.approx(1.6)
    assert doc["ratio"] == 8192
    assert kc.document_launches(per_step=1)["loop_launches"] == 655_360  # the other count


def test_launches_per_step_do_not_grow_with_batch_or_heads_and_exclude_views():
    small = kc.launches_per_step(B=2, H=3)
    assert small == kc.launches_per_step(B=4, H=40, S=32, D=32)  # the document's shape
    assert small == kc.launches_per_step(B=3, H=7, S=9, D=2)
    assert small["exp"] == 1 and sum(small.values()) >= 4  # decay, write, update, read
    assert not {"view", "permute", "select", "unsqueeze", "expand"} & set(small)


# ---- memory ----------------------------------------------------------------------------
def test_memory_bytes_at_the_documents_shape():
    mem = kc.memory_bytes()  # B=4, T=4096, H=40, S=D=32, C=64
    assert mem["trajectory"] == 4 * 4096 * 40 * 32 * 32 * 4 == 2_684_354_560
    assert mem["checkpoints"] == 160 * 64 * 4096 == mem["scratch"]
    assert mem["block_states"] == 4 * mem["checkpoints"]  # one state per 16 steps, not 64
    assert kc.memory_bytes(block=32)["block_states"] == 2 * mem["checkpoints"]
    assert kc.memory_bytes(T=65, chunk=64)["checkpoints"] == 160 * 2 * 4096  # rounds up
    with pytest.raises(ValueError, match="chunk"):
        kc.memory_bytes(chunk=0)


def test_predicted_peak_matches_the_committed_h200_measurement():
    report = load_result(RECURRENT_RUN)
    C = int(report["triton_configs"]["bwd"]["4"]["chunk"])
    for key in ("B4_T4096_H40_float32", "B1_T16384_H40_float32"):
        entry = report["shapes"][key]
        predicted = kc.recurrent_peak_bytes(entry["B"], entry["T"], entry["H"], entry["S"],
                                            entry["D"], chunk=C)["total"] / 2**20
        measured = entry["results"]["recurrent_triton_kernel"]["peak_mib"]
        assert predicted == pytest.approx(measured, rel=2e-3), key


def test_memory_figure_bars_are_the_arithmetic():
    fig = kc.memory_figure(T=2048, chunk=16, n_layers=3, gpu_gib=80.0)
    ax = fig.axes[0]
    mem = kc.memory_bytes(4, 2048, 40, 32, 32, 16)
    heights = sorted(round(p.get_height() * 2**30) for p in ax.patches if isinstance(p, Rectangle))
    expected = sorted(n * mem[k] for k in ("trajectory", "checkpoints", "block_states")
                      for n in (1, 3))
    assert heights == expected
    assert_series_distinct(fig)
    assert "3 GDN layers" in [t.get_text() for t in ax.get_xticklabels()]
    with pytest.raises(ValueError, match="n_layers"):
        kc.memory_figure(n_layers=0)
