"""hymo_book.fsdp's correction of the committed FSDP2 run: the chunked loss's fixed head
buffers, folded into that run's per-token figure by its single-length probe, are counted
once; a run with the two-length probe's split is used as it is."""

from __future__ import annotations

import pytest
from hymo_book import fsdp

from hymo_mini.config import load_config


def test_head_buffers_are_one_bf16_matrix_per_depth():
    m = load_config("hymo_mini").model
    assert fsdp.head_buffers("hymo_mini") == (1 + m.mtp_depth) * m.vocab_size * m.dim * 2


def test_the_committed_run_is_corrected_and_a_split_run_is_kept():
    run = fsdp.load_fsdp()
    acts = fsdp.counted_once(run)
    per_token = run["activation_bytes_per_token"]["head"]
    fixed = fsdp.head_buffers(run["config"])
    assert acts["head_fixed"] == fixed
    assert acts["head"] == pytest.approx(per_token - fixed / fsdp.COMMITTED_PROBE_TOKENS)
    assert 0 < acts["head"] < per_token  # the correction leaves a positive slope
    split = dict(run, activation_bytes_per_token=acts)
    assert fsdp.counted_once(split) == acts  # already split: returned as it is
    assert fsdp.preset_activations(run["config"], run) == acts
