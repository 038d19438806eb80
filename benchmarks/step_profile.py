"""Where a training step's GPU time goes, from ``torch.profiler`` (used by train_step.py).

Labels. While the profiled steps run, :class:`Labels` wraps chosen modules (by class name)
and functions in ``record_function("step/<label>")`` ranges. A forward op takes the label of
the innermost range around it. A backward op has no range around it (it runs on autograd's
thread), but the engine records each node with the sequence number of the forward op that
made it, so it takes that op's label. A kernel takes the label of the CPU op that launched
it. The GDN recurrence is recognised by its autograd Function's name (forward and backward).

Per step, in milliseconds of kernel time: by label (``components``), by kind of kernel
(``kinds``: matmul, attention, copy/cast, ...), the copies and casts inside each label, the
largest kernels, the largest (label, kind, op, input shapes) groups when the profile
recorded shapes (``ops_ms``: the op is the chain of ATen ops that launched the kernels,
innermost last); and how busy the GPU was: the union of kernel intervals over the wall
time of the profiled steps. On a CPU (a smoke run) CPU self time stands in for kernels.
"""

from __future__ import annotations

import re
from collections import defaultdict

import torch
from torch.autograd import DeviceType

PREFIX = "step/"
RECURRENCE = re.compile(r"(GLA|GatedDelta|Delta)\w*Function")  # hymo_mini.ops' Functions
MODULE_LABELS = {  # class name -> label (the innermost wins: an MLA block's MoE is "moe")
    # blocks, not their inner modules: hooks on modules inside a compiled function
    # (gdn_impl, mla_impl) would be traced into its graph or force a recompile
    "GDNBlock": "gdn", "MLABlock": "mla_attention", "DeepSeekMoE": "moe",
    "MultiTokenPrediction": "mtp", "LlamaAttention": "attention", "LlamaMLP": "mlp",
    "GatedLinearAttention": "attention", "GLAMLP": "mlp", "GatedMLP": "mlp",
}
KINDS = (  # first match wins: a CUTLASS GEMM's name can hold "Copy" (its copy atoms)
    ("attention", re.compile(r"flash|fmha|attention|Attention|sdpa")),
    ("matmul", re.compile(r"gemm|Gemm|cutlass|xmma|nvjet|wgmma|sm90|cublas|matmul|_mm")),
    ("copy/cast", re.compile(r"copy|Copy|Memcpy|memcpy|cast|Cast|transpose")),
    ("hymo kernels", re.compile(r"^_\w+_kernel$")),  # hymo_mini's Triton kernels
    ("compiled (inductor)", re.compile(r"^triton_")),
    ("reduction", re.compile(r"reduce|Reduce|norm|softmax|sum|mean")),
)


class Labels:
    """``with Labels(model, functions):`` label the modules of MODULE_LABELS (plus
    ``named``: {module: label}) and ``functions``: [(owner, attribute name, label)]."""

    def __init__(self, model, functions=(), named=None):
        self.model, self.functions, self.named = model, list(functions), named or {}
        self.handles, self.saved, self.stack = [], [], []

    def _wrap_module(self, module, label):
        def pre(_module, _args):
            rf = torch.profiler.record_function(PREFIX + label)
            rf.__enter__()
            self.stack.append(rf)

        def post(_module, _args, _out):
            self.stack.pop().__exit__(None, None, None)

        self.handles.append(module.register_forward_pre_hook(pre))
        self.handles.append(module.register_forward_hook(post, always_call=True))

    def __enter__(self):
        for module in self.model.modules():
            label = self.named.get(module) or MODULE_LABELS.get(type(module).__name__)
            if label:
                self._wrap_module(module, label)
        for owner, name, label in self.functions:
            original = getattr(owner, name)
            self.saved.append((owner, name, original))
            setattr(owner, name, _labelled(original, label))
        return self

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()
        for owner, name, original in reversed(self.saved):
            setattr(owner, name, original)
        self.handles, self.saved = [], []


def _labelled(fn, label):
    def run(*args, **kwargs):
        with torch.profiler.record_function(PREFIX + label):
            return fn(*args, **kwargs)
    return run


def _own_label(event) -> str | None:
    if RECURRENCE.search(event.name):
        return "gdn_recurrence"
    return event.name[len(PREFIX):] if event.name.startswith(PREFIX) else None


def _label(event, forward_labels: dict) -> str:
    """The innermost label of event or its ancestors (backward: through sequence numbers)."""
    while event is not None:
        label = _own_label(event)
        if label:
            return label
        if event.name.startswith("autograd::engine::evaluate_function"):
            return forward_labels.get(event.sequence_nr, "backward (unlabelled)")
        event = event.cpu_parent
    return "unlabelled"


def _in_forward(event) -> bool:
    while event is not None:
        if event.name == PREFIX + "forward":
            return True
        event = event.cpu_parent
    return False


def _kind(name: str) -> str:
    for kind, pattern in KINDS:
        if pattern.search(name):
            return kind
    return "elementwise/other"


def _union_us(intervals) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def analyse(prof, steps: int, wall_s: float, top_ops: int = 40) -> dict:
    """The breakdown of ``steps`` profiled steps that took ``wall_s`` seconds (the
    ``top_ops`` largest op groups)."""
    events = [e for e in prof.events() if e.device_type == DeviceType.CPU]
    forward_threads = {e.thread for e in events if e.name == PREFIX + "forward"}
    forward_labels = {}  # sequence number -> label of the forward op that made the node
    for e in events:
        if e.sequence_nr >= 0 and e.thread in forward_threads and _in_forward(e):
            forward_labels.setdefault(e.sequence_nr, _label(e, {}))
    work = [(e, k.name, k.duration) for e in events for k in e.kernels]
    on_gpu = bool(work)
    if not on_gpu:  # CPU smoke run: self CPU time of each op
        work = [(e, e.name, e.self_cpu_time_total) for e in events]
    comps, kinds, copies = defaultdict(float), defaultdict(float), defaultdict(float)
    names, ops = defaultdict(float), defaultdict(float)
    for e, name, us in work:
        label = _label(e, forward_labels)
        label = "gdn_other" if label == "gdn" else label
        kind = _kind(name)
        comps[label] += us
        kinds[kind] += us
        names[name[:120]] += us
        if kind == "copy/cast":
            copies[label] += us
        if on_gpu:
            ops[f"{label} | {kind} | {_op_chain(e)} | {_shapes(e)}"] += us
    device = [(e.time_range.start, e.time_range.end) for e in prof.events()
              if e.device_type == DeviceType.CUDA]
    per_step = 1e-3 / steps  # us over all steps -> ms per step
    out = {
        "timed": "kernel time (GPU)" if on_gpu else "CPU self time (no GPU: smoke run)",
        "wall_ms_per_step_profiled": 1e3 * wall_s / steps,
        "kernel_ms_per_step": sum(us for _, _, us in work) * per_step,
        "components_ms": _sorted_ms(comps, per_step),
        "kinds_ms": _sorted_ms(kinds, per_step),
        "copies_casts_ms_by_component": _sorted_ms(copies, per_step),
        "top_kernels_ms": dict(list(_sorted_ms(names, per_step).items())[:15]),
    }
    if on_gpu:
        out["ops_ms"] = dict(list(_sorted_ms(ops, per_step).items())[:top_ops])
    if device:
        out["busy_share_profiled"] = _union_us(device) * 1e-6 / wall_s
    return out


def _op_chain(event, depth: int = 3) -> str:
    """The ATen ops above event (itself included), outermost first, at most ``depth``."""
    chain = []
    while event is not None and len(chain) < depth and event.name.startswith("aten::"):
        chain.append(event.name[len("aten::"):])
        event = event.cpu_parent
    return " > ".join(reversed(chain)) or "-"


def _shapes(event) -> str:
    shapes = getattr(event, "input_shapes", None) or []
    return " ".join("x".join(map(str, s)) for s in shapes if s)[:80] or "-"


def _sorted_ms(table: dict, scale: float) -> dict:
    return {k: round(v * scale, 3) for k, v in sorted(table.items(), key=lambda kv: -kv[1])}
