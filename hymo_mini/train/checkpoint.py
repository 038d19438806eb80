"""Checkpoints: written atomically, read back only for the config that wrote them.

A checkpoint holds the model (with the MoE balancing buffers), the optimizer moments, the
step, the loss history and the settings of the run. It is written to a temporary file in
the same folder, then renamed over the old one, so an interrupted save never leaves half a
file. It is read with ``torch.load(..., weights_only=True)``: tensors, numbers, strings,
lists and dicts only, so a file from someone else can hold data but never run code.
"""

from __future__ import annotations

import os
import pickle
import warnings
from pathlib import Path

import torch

from hymo_mini.config import HyMoConfig, config_from_dict, config_to_dict

__all__ = ["CHECKPOINT_FORMAT", "CheckpointError", "check_same_config", "save_checkpoint",
           "load_checkpoint"]

CHECKPOINT_FORMAT = "hymo_mini-checkpoint-1"


class CheckpointError(ValueError):
    """A checkpoint cannot be used: not a checkpoint, or written for another config."""


def _config_differences(saved: dict, current: dict) -> list[str]:
    diffs = []
    for section in sorted(set(saved) | set(current)):
        a, b = saved.get(section, {}), current.get(section, {})
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                diffs.append(f"{section}.{key}: checkpoint {a.get(key)!r}, now {b.get(key)!r}")
    return diffs


def check_same_config(where, saved: dict, config: HyMoConfig) -> None:
    """Raise :class:`CheckpointError`, listing every differing field, unless the config a
    checkpoint was written for (``saved``, as a dict) is ``config``; ``where`` names the
    checkpoint (a file or a DCP folder)."""
    diffs = _config_differences(saved, config_to_dict(config))
    if diffs:
        raise CheckpointError(f"{str(where)!r} was written for another config; differences:\n  "
                              + "\n  ".join(diffs)
                              + "\nresume with the checkpoint's config, or start a new run "
                              "elsewhere")


def save_checkpoint(path, model, optimizer, step: int, history: dict,
                    config: HyMoConfig, settings: dict | None = None) -> Path:
    """Write a checkpoint atomically (temporary file + rename) and return its path.
    ``settings``: what else the run was started with (data, device...), kept beside the
    config so that a reader can see how the checkpoint was made."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "config": config_to_dict(config),
        "settings": dict(settings or {}),
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "history": history,
    }
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)  # atomic on POSIX and Windows: old file or new, never half
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def load_checkpoint(path, config: HyMoConfig | None = None, mmap: bool = False) -> dict:
    """Read a checkpoint; with ``config``, raise :class:`CheckpointError` unless it was
    written for exactly that config. The returned dict has a ``config`` HyMoConfig.
    ``mmap``: map the tensors instead of reading them (a check that needs only the rest)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {str(path)!r}")
    try:
        with warnings.catch_warnings():  # a foreign file's pickle protocol is not news
            warnings.simplefilter("ignore", UserWarning)
            payload = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as err:  # noqa: BLE001 - whatever the reader says, one of two causes
        if isinstance(err, pickle.UnpicklingError) and "Unsupported global" in str(err):
            raise CheckpointError(f"{str(path)!r} holds objects other than tensors and plain "
                                  "values; it was not loaded, since loading it could run code"
                                  ) from None
        raise CheckpointError(f"{str(path)!r} is not a complete checkpoint (the file is "
                              "truncated or corrupt)") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{str(path)!r} is not a hymo_mini checkpoint "
                              f"(expected format {CHECKPOINT_FORMAT!r})")
    missing = [k for k in ("config", "step", "model", "optimizer", "history") if k not in payload]
    if missing:
        raise CheckpointError(f"{str(path)!r} is not a complete checkpoint (no "
                              f"{', '.join(missing)})")
    payload.setdefault("settings", {})
    if config is not None:
        check_same_config(path, payload["config"], config)
    payload["config"] = config_from_dict(payload["config"])
    return payload
