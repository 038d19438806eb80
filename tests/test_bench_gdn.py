"""benchmarks/gdn.py's hymo backends on the CPU (the Triton interpreter): the dispatcher as
the GDN mixer calls it (no finiteness check, so no host sync) gives the checked dispatcher's
output, and only the checked one refuses a non-finite decay."""

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import gdn  # noqa: E402
from hymo_mini import ops  # noqa: E402


@pytest.mark.skipif(not ops.triton_usable(torch.device("cpu")),
                    reason="needs Triton's interpreter (TRITON_INTERPRET=1 before import)")
def test_the_unchecked_dispatcher_is_the_checked_one_without_the_check():
    found = gdn.available_backends(torch.device("cpu"))
    assert {"chunk_triton", "chunk_triton_unchecked"} <= set(found)
    gen = torch.Generator().manual_seed(0)
    B, T, H, S, D = 1, 19, 2, 8, 8  # T not a multiple of the chunk
    v = torch.randn(B, T, H, D, generator=gen)
    b, c = (torch.nn.functional.normalize(torch.randn(B, T, H, S, generator=gen), dim=-1)
            for _ in range(2))
    g = torch.rand(B, T, H, generator=gen)
    A = -torch.rand(H, S, generator=gen)
    checked, unchecked = (found[n](v, b, c, g, A)
                          for n in ("chunk_triton", "chunk_triton_unchecked"))
    assert torch.equal(checked, unchecked)
    g[0, 3, 1] = float("inf")
    with pytest.raises(ValueError, match="must be finite"):
        found["chunk_triton"](v, b, c, g, A)
    found["chunk_triton_unchecked"](v, b, c, g, A)  # no check: no error, and no host sync
