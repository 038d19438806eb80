"""hymo_book.kernels.primer (book chapter 09): TF32 rounding on the bits, one and three TF32
products against float64, the two floors and the ridge point, the operations' bytes against the
benchmark's, the pipelining model, and the figures' rules."""

import pytest
import torch
from figure_checks import assert_integer_ticks, assert_series_distinct
from hymo_book.kernels import primer as kp
from hymo_book.results import load_result
from hymo_book.site.legibility import FIGURE_MIN_FONT_PT, smallest_text_pt


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.view(torch.int32)


def test_tf32_round_keeps_ten_mantissa_bits_within_half_an_ulp():
    x = torch.randn(10_000) * 10 ** torch.randint(-20, 20, (10_000,)).float()
    r = kp.tf32_round(x)
    assert r.dtype == torch.float32
    assert ((_bits(r) & 0x1FFF) == 0).all()  # the 13 dropped bits are zero
    assert ((r - x).abs() <= x.abs() * 2.0 ** -(kp.TF32_BITS + 1)).all()
    assert torch.equal(kp.tf32_round(r), r)  # TF32 numbers are their own rounding


def test_tf32_round_breaks_ties_to_even_and_passes_infinities():
    one = torch.tensor([1.0])
    ulp = 2.0 ** -kp.TF32_BITS
    assert kp.tf32_round(one + ulp / 2).item() == 1.0  # tie, 1.0 is even: down
    assert kp.tf32_round(one + 1.5 * ulp).item() == 1.0 + 2 * ulp  # tie, odd: up
    assert kp.tf32_round(one + ulp / 2 + 2.0 ** -23).item() == 1.0 + ulp  # above the tie
    special = torch.tensor([float("inf"), -float("inf"), 0.0, -0.0])
    assert torch.equal(kp.tf32_round(special), special)
    assert torch.isnan(kp.tf32_round(torch.tensor([float("nan")]))).all()
    largest = torch.tensor([torch.finfo(torch.float32).max])
    assert kp.tf32_round(largest).isinf().all()  # rounds past the largest TF32 number
    with pytest.raises(TypeError, match="float32"):
        kp.tf32_round(torch.ones(2, dtype=torch.float64))


def test_three_tf32_products_are_fp32_grade_and_one_is_not():
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 96, generator=gen), torch.randn(96, 48, generator=gen)
    exact = a.double() @ b.double()
    one, three = (kp.rel_error(f(a, b), exact) for f in (kp.tf32_matmul, kp.tf32x3_matmul))
    fp32 = kp.rel_error(a @ b, exact)
    assert 1e-4 < one < 1e-3
    assert three < 3 * fp32 + 1e-7 and three < one / 100


def test_three_bf16_pieces_hold_a_float32_and_six_products_are_fp32_grade():
    x = torch.randn(10_000) * 10 ** torch.randint(-20, 20, (10_000,)).float()
    pieces = kp.bf16_pieces(x)
    for p in pieces:
        assert torch.equal(p, p.to(torch.bfloat16).float())  # each piece is a bf16 number
    assert torch.equal((pieces[0] + pieces[1]) + pieces[2], x)  # 3 x 8 bits carry all 24
    assert (pieces[1].abs() <= x.abs() * 2.0**-8).all()  # each piece is the rest's rounding
    gen = torch.Generator().manual_seed(1)
    a, b = torch.randn(64, 96, generator=gen), torch.randn(96, 48, generator=gen)
    exact = a.double() @ b.double()
    six, fp32 = kp.rel_error(kp.bf16x6_matmul(a, b), exact), kp.rel_error(a @ b, exact)
    one = kp.rel_error(a.bfloat16().float() @ b.bfloat16().float(), exact)
    assert six < 3 * fp32 + 1e-7 and six < one / 1000
    with pytest.raises(TypeError, match="float32"):
        kp.bf16_pieces(torch.ones(2, dtype=torch.float64))


def test_floors_and_the_ridge_point():
    ridge = kp.ridge_point(67.0, 4000.0)
    assert ridge == pytest.approx(67e12 / 4e12)
    at = kp.floors(1e9, ridge * 1e9, 4000.0, 67.0)
    assert at["memory_ms"] == pytest.approx(at["compute_ms"])
    assert kp.floors(1e9, 1e9, 4000.0, 67.0)["bound"] == "memory"
    heavy = kp.floors(1e6, 1e12, 4000.0, 67.0)
    assert heavy["bound"] == "compute" and heavy["floor_ms"] == heavy["compute_ms"]
    assert kp.floors(0.0, 1.0, 1.0, 1.0)["intensity"] == float("inf")
    with pytest.raises(ValueError, match="rates"):
        kp.floors(1.0, 1.0, 0.0, 1.0)


def test_the_gla_forwards_bytes_are_the_benchmarks_minimum():
    entry = load_result(kp.MEASURED_RUN)["shapes"]["B4_T4096_H40_float32"]
    ops = kp.operations(entry["B"], entry["T"], entry["H"], entry["S"], entry["D"])
    assert ops["gla forward"]["bytes"] == entry["bytes_min_fwd"]
    assert ops["matmul"]["flops"] == 2 * 4096**3
    measured = kp.measured_gpu()
    assert measured["sm_count"] == kp.H200.sm_count and measured["copy_GBps"] > 1000


@pytest.mark.parametrize("load, compute", [(4, 2), (2, 4), (3, 3), (1, 1)])
def test_pipeline_schedule_overlaps_loads_with_computation(load, compute):
    n = 20
    serial = kp.pipeline_schedule(n, load, compute, 1)
    assert serial[-1]["compute_end"] == n * (load + compute)
    ends = [kp.pipeline_schedule(n, load, compute, s)[-1]["compute_end"] for s in range(1, 8)]
    assert ends == sorted(ends, reverse=True)  # more stages never hurt
    deep = kp.pipeline_schedule(n, load, compute, 8)
    assert deep[-1]["compute_end"] == load + n * compute  # the computation never waits
    for rows in (serial, deep):
        assert all(r["compute_start"] >= r["load_end"] for r in rows)
        pairs = zip(rows, rows[1:], strict=False)
        assert all(b["compute_start"] >= a["compute_end"] for a, b in pairs)
    with pytest.raises(ValueError, match="stages"):
        kp.pipeline_schedule(4, 1, 1, 0)


def test_figures_keep_the_books_rules():
    roofline = kp.roofline_figure(bandwidth_GBps=4000.0)
    assert_series_distinct(roofline)
    fig = kp.pipeline_figure(n_iter=5, load=3, compute=2, stages=(1, 2))
    for figure in (roofline, fig):
        assert smallest_text_pt(figure) >= FIGURE_MIN_FONT_PT
    assert len(fig.axes) == 2
    assert_integer_ticks(fig.axes[-1].xaxis)
    assert "end at time 25" in fig.axes[0].get_title()  # 5 x (3 + 2)


@pytest.mark.parametrize("host, device", [(4, 3), (3, 4), (2, 2), (0, 5), (7, 1)])
def test_launch_schedule_is_the_slower_clock_after_the_first_call(host, device):
    """Back to back, the calls end at host + device + (calls - 1) · max(host, device): the
    first call pays both clocks, every later one the slower; the GPU never starts a kernel
    before it is queued or before the one ahead of it ends, and the host never waits."""
    for calls in (1, 2, 9):
        rows = kp.launch_schedule(calls, host, device)
        assert rows[-1]["gpu_end"] == host + device + (calls - 1) * max(host, device)
        assert [r["queued"] for r in rows] == [host * (i + 1) for i in range(calls)]
        assert all(r["gpu_start"] >= r["queued"] for r in rows)
        pairs = zip(rows, rows[1:], strict=False)
        assert all(b["gpu_start"] >= a["gpu_end"] for a, b in pairs)
    for bad in ({"calls": 0}, {"host": -1}, {"device": 0}, {"device": 2.5}, {"calls": True}):
        args = {"calls": 3, "host": 2, "device": 2, **bad}
        with pytest.raises(ValueError, match=next(iter(bad))):
            kp.launch_schedule(**args)


def test_launch_figure_keeps_the_books_rules():
    fig = kp.launch_figure(calls=5, host=4, device=3)
    assert smallest_text_pt(fig) >= FIGURE_MIN_FONT_PT
    assert_integer_ticks(fig.axes[0].xaxis)
    assert "end at time 23" in fig.axes[0].get_title()  # 4 + 3 + 4 x 4
    assert "host-bound" in fig.axes[0].get_title()
    assert "device-bound" in kp.launch_figure(4, 2, 5).axes[0].get_title()
    assert "balanced" in kp.launch_figure(3, 2, 2).axes[0].get_title()


def test_products_table_asks_the_library_about_a_gpu_and_the_interpreter():
    """Chapter 9's table of what the chunk kernels multiply: fp32-grade products are six
    bf16 ones on a GPU in both directions and plain fp32 under the interpreter; 16-bit inputs
    multiply bf16 forward and TF32 backward in either place. The library's flag is put back."""
    from hymo_mini.ops.utils import precision

    before = precision.INTERPRET
    rows = {r[0]: r[1:] for r in kp.products_table().rows}
    assert rows["float32"] == ("bf16x6", "bf16x6", "ieee", "ieee")
    assert rows["bfloat16"] == rows["float16"] == ("bf16", "tf32", "bf16", "tf32")
    assert precision.INTERPRET == before
