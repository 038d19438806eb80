"""A trained model as one safetensors file: its weights and its config, nothing else.

A training checkpoint (:mod:`hymo_mini.train.checkpoint`) also holds the optimizer's
moments and the loss history, three times the model's size. To share a model, only the
weights are needed, and a format that can hold nothing but tensors is the safe choice:
safetensors stores named arrays and a small text header, so loading a file from anyone
can never run code.

    save_model(path, model, config)   weights (bf16 by default) + the config, as JSON text
    load_model(path)                  (model, config), the model in fp32 and eval mode

Tied weights (the embedding and the output head share one matrix) are stored once; the
header lists which names share it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from hymo_mini.config import HyMoConfig, config_from_dict, config_to_dict

__all__ = ["MODEL_FORMAT", "save_model", "load_model"]

MODEL_FORMAT = "hymo_mini-model-1"


def save_model(path, model, config: HyMoConfig, dtype: torch.dtype = torch.bfloat16) -> Path:
    """Write ``model``'s weights in ``dtype`` (buffers keep theirs) and ``config``."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors, tied, seen = {}, {}, {}
    params = {name for name, _ in model.named_parameters()}
    for name, tensor in model.state_dict(keep_vars=False).items():
        first = seen.setdefault((tensor.data_ptr(), tensor.shape), name)
        if first != name:  # the same storage under a second name: a tied weight
            tied[name] = first
            continue
        t = tensor.detach().to("cpu")
        tensors[name] = (t.to(dtype) if name in params and t.is_floating_point() else t
                         ).contiguous()
    save_file(tensors, str(path), metadata={
        "format": MODEL_FORMAT, "config": json.dumps(config_to_dict(config)),
        "tied": json.dumps(tied)})
    return path


def load_model(path, device="cpu"):
    """``(model, config)`` from a file :func:`save_model` wrote; ``ValueError`` (one line,
    naming the file) for anything else."""
    from safetensors import SafetensorError, safe_open

    from hymo_mini.model import build_hymo

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no model file at {str(path)!r}")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except (SafetensorError, OSError, ValueError) as err:
        raise ValueError(f"{str(path)!r} is not a safetensors file ({err})") from None
    if meta.get("format") != MODEL_FORMAT:
        raise ValueError(f"{str(path)!r} is not a hymo_mini model file (expected format "
                         f"{MODEL_FORMAT!r} in its header)")
    config = config_from_dict(json.loads(meta["config"]))
    model = build_hymo(config)
    tied = json.loads(meta.get("tied", "{}"))
    missing, unexpected = model.load_state_dict(
        {name: t.float() if t.is_floating_point() else t for name, t in tensors.items()},
        strict=False)
    if unexpected or set(missing) != set(tied):
        raise ValueError(f"{str(path)!r} does not fit its own config (missing "
                         f"{sorted(set(missing) - set(tied))}, unexpected {unexpected})")
    return model.to(device).eval(), config
