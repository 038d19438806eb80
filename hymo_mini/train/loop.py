"""The training loop: :func:`train`.

One optimizer step is

    lr    = initial_lr * wsd(step)                    per group (hymo_mini.optim.schedule)
    loss  = model.loss(batch)                         main CE + weighted MTP losses
    grads → clip to optimizer.grad_clip → optimizer step → model.update_moe_biases()

with ``training.grad_accum_steps`` micro-batches per step. Batch ``step`` is a pure
function of ``(run.seed, step)`` (see :mod:`hymo_mini.data`), and a checkpoint holds
everything else the loop depends on, so a resumed run continues the same loss curve.
Losses stay on the device until a log step, so the loop syncs with a GPU once per
``log_every`` steps, not once per step.

The distributed loop (:mod:`hymo_mini.train.fsdp_loop`) runs the same steps with its own
batches, optimizer step and evaluation, through the parts here they share: the checks
(:func:`check_steps`, :func:`check_sizes`), what a run carries (:class:`RunState`), the
learning rate of a step (:func:`set_learning_rate`), the history and timings
(:class:`TrainingLog`), the loop over steps (:func:`run_steps`) and the result
(:func:`train_result`).
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from hymo_mini.config import ConfigError, HyMoConfig
from hymo_mini.data import ByteCorpus, DataError, load_corpus
from hymo_mini.model import build_hymo
from hymo_mini.optim import build_optimizer, clip_and_step
from hymo_mini.optim.schedule import wsd_multiplier
from hymo_mini.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint

__all__ = ["TrainResult", "TrainingInterrupted", "evaluate", "train", "RunState", "TrainingLog",
           "check_steps", "check_sizes", "check_resume", "set_learning_rate", "run_steps",
           "train_result"]


@dataclass
class TrainResult:
    model: torch.nn.Module
    history: dict  # step, loss, lr, grad_norm, parts{name: [...]}, val_step, val_loss
    stats: dict = field(default_factory=dict)  # timings: tokens/s, data/log fractions
    checkpoint: Path | None = None
    optimizer: torch.optim.Optimizer | None = None
    resumed_from: int | None = None  # the checkpoint's step, when the run resumed
    saved_step: int | None = None  # the step the checkpoint on disk holds, if any


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`train`. ``result`` is the run up to its last finished step
    (``history.json`` is written up to there too); the checkpoint on disk is the last one
    saved, at ``result.saved_step``, and ``--resume`` continues exactly from it."""

    def __init__(self, result: TrainResult):
        super().__init__("training interrupted")
        self.result = result


def check_sizes(config: HyMoConfig, corpus: ByteCorpus) -> None:
    t, m = config.training, config.model
    if t.seq_len < m.mtp_depth + 2:
        raise ConfigError(f"TrainingConfig.seq_len: {t.seq_len} leaves no target for MTP "
                          f"depth {m.mtp_depth}; use seq_len >= {m.mtp_depth + 2}")
    for split in ("train", "val"):
        n = getattr(corpus, split).numel()
        if n < t.seq_len + 1:
            raise DataError(f"the {split} split has {n:,} bytes, fewer than seq_len + 1 = "
                            f"{t.seq_len + 1}: pass more text or a shorter --seq-len")


def _autocast(config: HyMoConfig, device: torch.device):
    enabled = config.training.dtype == "bfloat16"
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled)


@torch.no_grad()
def evaluate(model, batches, config: HyMoConfig, device) -> float:
    """Mean main (next-token) cross-entropy over fixed validation batches."""
    was_training = model.training
    model.eval()
    device = torch.device(device)
    losses = []
    for batch in batches:
        with _autocast(config, device):
            total, parts = model.loss(batch.to(device))
        losses.append(float(parts.get("main", total)))
    model.train(was_training)
    return sum(losses) / len(losses)


@dataclass
class RunState:
    """What the loop carries from step to step."""

    config: HyMoConfig
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    corpus: ByteCorpus
    device: torch.device
    steps: int
    start: int = 0
    history: dict = field(default_factory=lambda: {
        "step": [], "loss": [], "lr": [], "grad_norm": [], "parts": {},
        "val_step": [], "val_loss": []})
    ckpt_path: Path | None = None
    saved_step: int | None = None  # the step of the checkpoint on disk
    settings: dict = field(default_factory=dict)  # saved with each checkpoint


def check_steps(config: HyMoConfig, steps: int | None) -> int:
    """``steps`` (default ``training.max_steps``), checked to lie in [1, max_steps]."""
    max_steps = config.training.max_steps
    steps = max_steps if steps is None else steps
    if not (isinstance(steps, int) and 0 < steps <= max_steps):
        raise ConfigError(f"steps must be an integer in [1, max_steps={max_steps}], "
                          f"got {steps!r}")
    return steps


def check_resume(config: HyMoConfig, out_dir, resume: bool, steps: int) -> int | None:
    """The step of ``out_dir/checkpoint.pt`` to resume from, or None without ``resume``; a
    :class:`CheckpointError` when there is none, or it is another config's or done. Only
    the step and the config are read (the tensors are mapped), so it is cheap to call
    before any work."""
    if not resume:
        return None
    if out_dir is None:
        raise CheckpointError("resume=True needs out_dir (the folder of checkpoint.pt)")
    path = Path(out_dir) / "checkpoint.pt"
    saved = load_checkpoint(path, config, mmap=True)["step"]
    if saved >= steps:
        raise CheckpointError(f"{str(path)!r} is already at step {saved}; ask for more steps "
                              f"(at most max_steps={config.training.max_steps})")
    return saved


def _prepare(config, corpus, steps, out_dir, resume, device, model) -> RunState:
    steps = check_steps(config, steps)
    corpus = load_corpus() if corpus is None else corpus
    check_sizes(config, corpus)
    check_resume(config, out_dir, resume, steps)
    device = torch.device(device)
    torch.manual_seed(config.run.seed)
    model = (build_hymo(config) if model is None else model).to(device)
    run = RunState(config, model, build_optimizer(model, config.optimizer),
               corpus.to(device), device, steps)  # batches are cut on the device
    run.ckpt_path = None if out_dir is None else Path(out_dir) / "checkpoint.pt"
    if resume:
        payload = load_checkpoint(run.ckpt_path, config)
        model.load_state_dict(payload["model"])
        run.optimizer.load_state_dict(payload["optimizer"])
        run.history, run.start = payload["history"], payload["step"]
        run.saved_step = run.start
    return run


def _batches(run: RunState, step: int) -> list[torch.Tensor]:
    """The ``grad_accum_steps`` micro-batches of optimizer step ``step``."""
    tc = run.config.training
    return [run.corpus.batch(step * tc.grad_accum_steps + i, tc.batch_size, tc.seq_len,
                             seed=run.config.run.seed) for i in range(tc.grad_accum_steps)]


def _tokens_per_step(config: HyMoConfig) -> int:
    tc = config.training
    return tc.batch_size * tc.seq_len * tc.grad_accum_steps


def set_learning_rate(run: RunState, step: int) -> float:
    """Set every group's learning rate for step ``step`` (WSD); returns the logged rate."""
    tc, config = run.config.training, run.config
    lr_scale = wsd_multiplier(step, tc.max_steps, config.scheduler)
    for group in run.optimizer.param_groups:
        group["lr"] = group["initial_lr"] * lr_scale
    return config.optimizer.lr * lr_scale


def _optimizer_step(run: RunState, step: int, batches: list[torch.Tensor]):
    """One optimizer step over the micro-batches; the losses stay on the device.
    Returns (loss, parts, grad_norm, lr)."""
    tc, config = run.config.training, run.config
    lr = set_learning_rate(run, step)
    loss, parts = 0.0, {}
    for batch in batches:
        with _autocast(config, run.device):
            total, micro_parts = run.model.loss(batch)
        (total / tc.grad_accum_steps).backward()
        loss = loss + total.detach() / tc.grad_accum_steps
        for name, value in micro_parts.items():
            parts[name] = parts.get(name, 0.0) + value.detach() / tc.grad_accum_steps
    grad_norm = clip_and_step(run.optimizer, run.model.parameters(), config.optimizer.grad_clip)
    run.optimizer.zero_grad(set_to_none=True)
    run.model.update_moe_biases()
    return loss, parts, grad_norm.detach(), lr


class TrainingLog:
    """The history, the progress bar, printing and the time spent on each part."""

    def __init__(self, run: RunState, progress: bool, print_every: int | None):
        self.run, self.print_every = run, print_every
        self.pending: list = []
        self.seconds = {"data": 0.0, "compute": 0.0, "log": 0.0, "eval": 0.0}
        self.steps_done = 0  # by this process, since it started or resumed
        self.windows: list[float] = []
        self.window_start, self.window_steps = time.perf_counter(), 0
        self.bar = None
        if progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=run.steps, initial=run.start, desc="train", unit="step")

    @contextmanager
    def timed(self, part: str):
        t0 = time.perf_counter()
        yield
        self.seconds[part] += time.perf_counter() - t0

    def flush(self) -> None:
        """Move buffered losses to the history (one device sync)."""
        h = self.run.history
        # read everything back first (the wait for the device is where Ctrl-C lands), so
        # an interruption leaves the history as it was
        rows = [(step, float(loss), {name: float(v) for name, v in parts.items()},
                 float(norm), lr) for step, loss, parts, norm, lr in self.pending]
        self.pending.clear()
        for step, loss, parts, norm, lr in rows:
            h["step"].append(step)
            h["loss"].append(loss)
            h["lr"].append(lr)
            h["grad_norm"].append(norm)
            for name, value in parts.items():
                h["parts"].setdefault(name, []).append(value)

    def log_step(self) -> None:
        """A log step: sync (queued GPU work counts as compute), then the history."""
        tokens = _tokens_per_step(self.run.config)
        with self.timed("compute"):
            if self.run.device.type == "cuda":
                torch.cuda.synchronize(self.run.device)
        with self.timed("log"):
            self.flush()
            rate = self.window_steps * tokens / max(time.perf_counter() - self.window_start, 1e-9)
            self.windows.append(rate)
            if self.bar is not None:
                self.bar.set_postfix(loss=f"{self.run.history['loss'][-1]:.3f}",
                                     tok_s=f"{rate:,.0f}")
        self.window_start, self.window_steps = time.perf_counter(), 0

    def maybe_print(self, done: int) -> None:
        if not self.print_every or (done % self.print_every and done != self.run.steps):
            return
        self.flush()
        h = self.run.history
        val = (f"  val {h['val_loss'][-1]:.2f}"
               if h["val_step"] and h["val_step"][-1] == done else "")
        main = h["parts"].get("main")
        main = f" (main {main[-1]:.2f})" if main else ""
        print(f"step {done:4d}  loss {h['loss'][-1]:.2f}{main}{val}")

    def stats(self) -> dict:
        n_steps = self.steps_done
        tokens = _tokens_per_step(self.run.config)
        loop = self.seconds["data"] + self.seconds["compute"] + self.seconds["log"]
        return {"steps": n_steps, "tokens_per_step": tokens,
                "tokens_per_s": n_steps * tokens / max(loop, 1e-9),
                "data_fraction": self.seconds["data"] / max(loop, 1e-9),
                "log_fraction": self.seconds["log"] / max(loop, 1e-9),
                "seconds": self.seconds,
                "window_tokens_per_s": self.windows}  # one per log interval, no evaluation


def _evaluate_and_save(run: RunState, log: TrainingLog, val_batches, done: int) -> None:
    run.history["val_step"].append(done)
    run.history["val_loss"].append(evaluate(run.model, val_batches, run.config, run.device))
    if run.ckpt_path is not None:  # a crash loses at most eval_every steps
        log.flush()
        save_checkpoint(run.ckpt_path, run.model, run.optimizer, done, run.history, run.config,
                        run.settings)
        run.saved_step = done


def run_steps(run: RunState, log: TrainingLog, batches, optimizer_step, evaluate_and_save) -> None:
    """Steps ``run.start`` to ``run.steps``, shared by one process and N: ``batches(step)``,
    ``optimizer_step(run, step, batches)`` → (loss, parts, grad_norm, lr) on the device, a
    log step every ``log_every``, ``evaluate_and_save(done)`` every ``eval_every`` and last."""
    tc = run.config.training
    run.model.train()
    for step in range(run.start, run.steps):
        with log.timed("data"):
            micro_batches = batches(step)
        with log.timed("compute"):
            loss, parts, norm, lr = optimizer_step(run, step, micro_batches)
        done = step + 1
        log.pending.append((done, loss, parts, norm, lr))
        log.window_steps += 1
        log.steps_done += 1
        if done % tc.log_every == 0 or done == run.steps:
            log.log_step()
        with log.timed("log"):
            if log.bar is not None:
                log.bar.update(1)
        with log.timed("eval"):
            if done % tc.eval_every == 0 or done == run.steps:
                evaluate_and_save(done)
        with log.timed("log"):
            log.maybe_print(done)
    log.flush()
    if log.bar is not None:
        log.bar.close()


def train_result(run: RunState, log: TrainingLog, resume: bool) -> TrainResult:
    return TrainResult(model=run.model, history=run.history, stats=log.stats(),
                       checkpoint=run.ckpt_path, optimizer=run.optimizer,
                       resumed_from=run.start if resume else None, saved_step=run.saved_step)


def train(config: HyMoConfig, corpus: ByteCorpus | None = None, *, steps: int | None = None,
          out_dir=None, resume: bool = False, device="cpu", progress: bool = True,
          print_every: int | None = None, model=None, settings: dict | None = None
          ) -> TrainResult:
    """Train ``build_hymo(config)`` on ``corpus`` (default: the standard library).

    steps: stop after this optimizer step (default ``training.max_steps``; the schedule
    always spans ``max_steps``, so a run can be stopped early and resumed). out_dir: where
    ``checkpoint.pt`` (written at every evaluation and at the end) and ``history.json`` go
    (None: no files). resume: continue from ``out_dir/checkpoint.pt``. print_every: print
    rounded losses every so many steps (for notebooks, where a progress bar's timings
    would change every run). settings: what else the run was started with, saved with
    each checkpoint. Ctrl-C raises :class:`TrainingInterrupted`.
    """
    run = _prepare(config, corpus, steps, out_dir, resume, device, model)
    run.settings = dict(settings or {})
    tc = config.training
    val_batches = run.corpus.val_batches(tc.eval_batches, tc.batch_size, tc.seq_len)
    log = TrainingLog(run, progress, print_every)
    try:
        run_steps(run, log, lambda step: _batches(run, step), _optimizer_step,
                  lambda done: _evaluate_and_save(run, log, val_batches, done))
    except KeyboardInterrupt:
        log.flush()  # the finished steps' losses
        if log.bar is not None:
            log.bar.close()
        if out_dir is not None:
            (Path(out_dir) / "history.json").write_text(json.dumps(run.history))
        raise TrainingInterrupted(train_result(run, log, resume)) from None
    if run.ckpt_path is not None:  # the last step is an evaluation step: already saved
        (Path(out_dir) / "history.json").write_text(json.dumps(run.history))
    return train_result(run, log, resume)
