"""Training: :func:`train`, its checkpoints, and ``hymo-mini train``.

    loop.py        the optimizer step, logging, evaluation (``train``, ``evaluate``)
    checkpoint.py  atomic, config-checked checkpoints
    curves.py      the loss curve ``hymo-mini train`` draws
    __main__.py    ``python -m hymo_mini.train`` (the same as ``hymo-mini train``)

On several processes (``torchrun --nproc-per-node N -m hymo_mini.train``), with FSDP2:

    distributed.py  the process group, sharding the model, each rank's rows, the global bias
    fsdp_loop.py    ``train_distributed``: the loop above on N processes, the same curve
    dcp.py          sharded, atomic DCP checkpoints; ``dcp_to_checkpoint`` (single file)

Choices the document leaves open (its optimizer and scheduler sections are empty), made
here and shown in the book:

* **Optimizer groups** come from :func:`hymo_mini.optim.build_optimizer`: with
  ``optimizer.name = "adamw"`` AdamW decays matrices and not norm scales, biases, q/k
  scales, the GDN decay parameters (``A_log``, ``dt_bias``, ``D``) or the MoE router;
  ``"muon"`` puts the MLA and GDN matrices on Muon.
* **WSD** (:mod:`hymo_mini.optim.schedule`): linear warmup, a flat stretch, linear decay.
* **Resumable.** Batch ``step`` is a pure function of ``(run.seed, step)`` and the
  checkpoint holds the model (with the MoE balancing buffers), the optimizer moments, the
  step and the loss history, so a resumed run continues the same loss curve.
"""

from hymo_mini.optim.schedule import wsd_multiplier
from hymo_mini.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from hymo_mini.train.loop import TrainingInterrupted, TrainResult, evaluate, train

__all__ = ["CheckpointError", "TrainResult", "TrainingInterrupted", "wsd_multiplier",
           "save_checkpoint", "load_checkpoint", "evaluate", "train"]
