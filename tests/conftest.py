"""Test set-up shared by every test file.

Without a GPU, Triton kernels run under the Triton interpreter, which must be switched on
before the kernels are decorated, i.e. before hymo_mini's Triton modules are imported.
The book's helpers are put on the path.
"""

import os
import sys
from pathlib import Path

import torch

# the book's helpers (book/hymo_book) are imported as `hymo_book`, as the notebooks do
BOOK = Path(__file__).resolve().parent.parent / "book"
if str(BOOK) not in sys.path:
    sys.path.insert(0, str(BOOK))

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

# two xdist workers share two cores: more than one thread each makes torch up to 10x slower
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
