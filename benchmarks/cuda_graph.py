"""A whole training step as one CUDA graph: record its launches once, replay them each step.

A step of the fast path (forward, backward, clip and optimizer step, balancing update) is a
few thousand kernel launches. The host queues them through Python, Dynamo's guards and the
launch API; between two kernels the GPU waits for the next launch to arrive, a microsecond
or two each even when the host keeps ahead. A CUDA graph records the launches of one step
as the host issues them (stream capture) and then replays the whole recording with one call:
no Python, no guards, no per-kernel launch cost.

Replaying a recording is only right when the step is the same recording every time:

* **static shapes and addresses**: the step reads its batch from tensors that each step
  overwrites in place (``copy_``), and every tensor it makes comes from the graph's own
  memory pool, at the addresses of the capture;
* **no host synchronisation and no Python branch on a device value**: nothing in the step
  may wait for a result (``.item()``, ``nonzero``, a size read back); the fast path is built
  that way (the grouped MoE reads its group offsets on the device, the chunked loss counts
  its targets on the device, the clip is folded into the fused optimizer step);
* **a capturable optimizer**: ``capturable=True`` on every param group (PyTorch's fused
  AdamW supports it), with a learning rate that is a tensor if a schedule changes it;
* **kernels compiled and tuned before the capture**: the first calls compile
  (``torch.compile``, Triton) and tune (autotuners, cuDNN), which may not happen inside
  a capture; they run eagerly on a side stream first.

:class:`GraphedStep` wraps a step function that satisfies these. Each call is one real
step: the first ``warmup`` run eagerly, the next captures and replays, every later one
replays. What the step returns (e.g. the detached loss) is the graph's output tensor,
overwritten by each replay. The eager step stays the oracle: the tests compare a run of
replays with the same steps run eagerly (GPU only; a CPU has no graphs).

Used by ``train_step.py`` (the ``hybrid_fast_graph`` cases), not run on its own. The
library's ``train()`` runs its steps eagerly: in the committed runs the graph made the whole
step 1.4–3.9% faster, short of what a second way to run a step would have to earn.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["GraphedStep"]


class GraphedStep:
    """``step()`` (no arguments, returns a tensor) run as one CUDA graph after ``warmup``
    eager calls. ``optimizers``: checked up front to be capturable, so a missing
    ``capturable=True`` is named here rather than in the middle of a capture."""

    def __init__(self, step: Callable[[], torch.Tensor], *, warmup: int = 2,
                 optimizers: tuple[torch.optim.Optimizer, ...] = ()):
        if not torch.cuda.is_available():
            raise RuntimeError("GraphedStep needs a CUDA GPU (CUDA graphs do not exist on "
                               "the CPU); call the step function itself instead")
        if not (isinstance(warmup, int) and warmup >= 1):
            raise ValueError(f"warmup must be a whole number >= 1 (the first call compiles "
                             f"and tunes outside the capture), got {warmup!r}")
        for opt in optimizers:
            if not all(group.get("capturable", False) for group in opt.param_groups):
                raise ValueError(f"optimizers: {type(opt).__name__} must be built with "
                                 f"capturable=True to run inside a CUDA graph")
        self.step, self.warmup = step, warmup
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self._out: torch.Tensor | None = None
        self._side = torch.cuda.Stream()

    def __call__(self) -> torch.Tensor:
        self.calls += 1
        if self.calls <= self.warmup:  # eager, on a side stream (as capture wants)
            self._side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self._side):
                out = self.step()
            torch.cuda.current_stream().wait_stream(self._side)
            return out
        if self.graph is None:  # record one step (nothing runs), then run it
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._out = self.step()
        self.graph.replay()
        return self._out
