"""benchmarks/pairs_variants.py: every variant's edits still apply to the package's source
(each matches exactly once), and its fp64 in-block term is the whole output of a sequence of
one block that starts from a zero state."""

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gdn_oracle import make_leaves, reference, rel_err  # noqa: E402

from benchmarks import pairs_variants  # noqa: E402


@pytest.mark.parametrize("name", list(pairs_variants.VARIANTS))
def test_every_variant_applies(tmp_path, name):
    copy = pairs_variants.edited_copy(name, tmp_path)
    edited = [(copy / rel).read_text() != (ROOT / rel).read_text()
              for rel in (pairs_variants.BLOCKS, pairs_variants.DELTA)]
    assert any(edited) == bool(pairs_variants.VARIANTS[name][1])


def test_an_edit_that_matches_nothing_is_refused(tmp_path, monkeypatch):
    monkeypatch.setitem(pairs_variants.VARIANTS, "bad", ("none", [("no such line", "x")]))
    with pytest.raises(ValueError, match="'bad'"):
        pairs_variants.edited_copy("bad", tmp_path)


def test_in_block_term_is_the_output_of_one_block_from_zero():
    torch.manual_seed(0)
    v, b, c, g, A_log, h0 = make_leaves(2, 13, 3, 5, 4, torch.float64, True, "cpu")
    A = -torch.exp(A_log).detach()
    o, _ = reference(v, b, c, g, A, torch.zeros_like(h0))
    assert rel_err(pairs_variants.in_block_term(v, b, c, g, A), o) < 1e-12
