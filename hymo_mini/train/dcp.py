"""Sharded checkpoints with Distributed Checkpoint (DCP), and their single-file form.

A distributed run writes ``OUT/dcp/step_00000100/``: one file of tensors per rank (each
rank writes its own shards, nothing is gathered), DCP's ``.metadata`` (which global slice
of which tensor each file holds) and ``meta.json`` (format, config, step, loss history).
Because the metadata describes global tensors, the folder loads on any number of
processes: DCP reads for each rank exactly the slices of its new shards.

* **Atomic.** Everything is written into ``.step_00000100.tmp`` and renamed when the last
  file is complete, so a step folder is complete or absent; :func:`latest_dcp` skips
  anything else. The ``keep`` newest step folders are kept.
* **Config-checked.** :func:`read_meta` refuses a checkpoint written for another config and
  lists the differences (the number of processes is not part of the config).
* **Never runs code.** DCP keeps its ``.metadata`` and a run's small non-tensor values
  (the optimizer's settings) as pickles, which Python's reader would let call any
  function. Here ``.metadata`` is first read by an unpickler that knows only DCP's own
  record types, torch sizes and dtypes, and each small value through
  ``torch.load(weights_only=True)``; anything else is refused with
  :class:`CheckpointError` before a byte of it runs.
* **Single-file form.** :func:`dcp_to_checkpoint` (``hymo-mini convert-checkpoint``) loads
  the shards into one process, without a process group, and writes the checkpoint that
  :mod:`hymo_mini.train.checkpoint` reads, so a distributed run can go on with
  ``hymo-mini train --resume`` on one device.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import shutil
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.checkpoint import DefaultLoadPlanner

from hymo_mini.config import HyMoConfig, config_from_dict, config_to_dict
from hymo_mini.train.checkpoint import CheckpointError, check_same_config, save_checkpoint

__all__ = ["DCP_FORMAT", "step_dir", "latest_dcp", "read_meta", "check_metadata",
           "TensorOnlyPlanner", "save_dcp", "load_dcp", "dcp_to_checkpoint"]

DCP_FORMAT = "hymo_mini-dcp-1"
_STEP = re.compile(r"step_(\d{8})")


def step_dir(out_dir, step: int) -> Path:
    return Path(out_dir) / "dcp" / f"step_{step:08d}"


def _complete(folder: Path) -> bool:
    return (folder / "meta.json").is_file() and (folder / ".metadata").is_file()


def latest_dcp(out_dir) -> Path | None:
    """The newest complete step folder under ``out_dir/dcp`` (or ``out_dir`` itself when it
    is one), or None."""
    out_dir = Path(out_dir)
    if _STEP.fullmatch(out_dir.name) and _complete(out_dir):
        return out_dir
    found = [d for d in (out_dir / "dcp").glob("step_*")
             if _STEP.fullmatch(d.name) and _complete(d)]
    return max(found, key=lambda d: d.name) if found else None


def read_meta(folder, config: HyMoConfig | None = None) -> dict:
    """``meta.json`` of a step folder; with ``config``, a :class:`CheckpointError` unless
    the checkpoint was written for exactly that config."""
    folder = Path(folder)
    if not _complete(folder):
        raise CheckpointError(f"{str(folder)!r} is not a complete DCP checkpoint folder "
                              "(meta.json and .metadata expected)")
    meta = json.loads((folder / "meta.json").read_text())
    if meta.get("format") != DCP_FORMAT:
        raise CheckpointError(f"{str(folder)!r} is not a hymo_mini DCP checkpoint "
                              f"(expected format {DCP_FORMAT!r})")
    if config is not None:
        check_same_config(folder, meta["config"], config)
    return meta


# what DCP's .metadata pickle may name: its records, torch's sizes, dtypes and layouts
_METADATA_NAMES = {
    "torch.distributed.checkpoint.metadata": {
        "Metadata", "StorageMeta", "MetadataIndex", "TensorProperties", "ChunkStorageMetadata",
        "TensorStorageMetadata", "BytesStorageMetadata", "_MEM_FORMAT_ENCODING"},
    "torch.distributed.checkpoint.filesystem": {"_StorageInfo"},
    "torch.serialization": {"_get_layout"},
    "torch": {"Size"},
    "pathlib": {"Path", "PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath"},
}


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        dtype = module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)
        if not dtype and name not in _METADATA_NAMES.get(module, ()):
            raise pickle.UnpicklingError(f"{module}.{name} is not a DCP metadata type")
        return super().find_class(module, name)


def check_metadata(folder: Path) -> None:
    """Raise :class:`CheckpointError` unless the folder's ``.metadata`` holds only DCP's
    records (read without calling anything else)."""
    try:
        with open(folder / ".metadata", "rb") as f:
            _MetadataUnpickler(f).load()
    except Exception as err:  # noqa: BLE001 - refused or damaged: the same answer
        raise CheckpointError(f"{str(folder / '.metadata')!r} is not DCP metadata that can be "
                              f"read safely ({err})") from None


class TensorOnlyPlanner(DefaultLoadPlanner):
    """DCP's load planner, but each non-tensor value is read with ``weights_only=True``
    (then handed on in that checked form)."""

    def load_bytes(self, read_item, value: io.BytesIO) -> None:
        try:
            checked = torch.load(value, weights_only=True)
        except Exception:  # noqa: BLE001
            raise CheckpointError(f"the value {read_item.dest_index.fqn!r} of the DCP "
                                  "checkpoint holds more than plain data; not loaded") from None
        again = io.BytesIO()
        torch.save(checked, again)
        again.seek(0)
        super().load_bytes(read_item, again)


def _state(model, optimizer) -> dict:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optim_state = get_state_dict(model, optimizer)  # this rank's shards
    return {"model": model_state, "optimizer": optim_state}


def save_dcp(out_dir, model, optimizer, step: int, history: dict, config: HyMoConfig,
             *, keep: int = 2) -> Path:
    """Write ``out_dir/dcp/step_{step}`` from every rank (a collective) and return it."""
    import torch.distributed.checkpoint as dcp

    final = step_dir(out_dir, step)
    tmp = final.with_name(f".{final.name}.tmp")
    rank = dist.get_rank()
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)  # left by a run that died while saving
        tmp.mkdir(parents=True)
    dist.barrier()
    dcp.save(_state(model, optimizer), checkpoint_id=tmp)  # returns when every rank wrote
    if rank == 0:
        meta = {"format": DCP_FORMAT, "config": config_to_dict(config), "step": step,
                "history": history, "world_size": dist.get_world_size()}
        (tmp / "meta.json").write_text(json.dumps(meta))
        old = final.with_name(f".{final.name}.old")
        if final.exists():  # the same step saved again: keep the old one until the new is in
            os.replace(final, old)
        os.replace(tmp, final)  # atomic: the step folder is complete or absent
        shutil.rmtree(old, ignore_errors=True)
        steps = sorted(d for d in final.parent.glob("step_*") if _STEP.fullmatch(d.name))
        for stale in steps[:-keep] if keep > 0 else []:
            shutil.rmtree(stale, ignore_errors=True)
    dist.barrier()
    return final


def load_dcp(folder, model, optimizer) -> None:
    """Load a step folder into a (sharded or plain) model and its optimizer; the shards
    may have been written by any number of processes."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    folder = Path(folder)
    check_metadata(folder)  # before DCP's own reader unpickles it
    state = _state(model, optimizer)  # the shapes and shards to fill
    saved = dcp.FileSystemReader(folder).read_metadata().state_dict_metadata
    prefix = "optimizer.state."
    stepped = {key[len(prefix):].rsplit(".", 1)[0] for key in saved if key.startswith(prefix)}
    # a parameter the saved run never stepped (an expert no token chose yet) has no state;
    # after loading it has none here either, as after optimizer.load_state_dict
    never = [name for name in state["optimizer"]["state"] if name not in stepped]
    for name in never:
        del state["optimizer"]["state"][name]
    with warnings.catch_warnings():  # one process without a group is meant here
        warnings.filterwarnings("ignore", "torch.distributed is disabled")
        dcp.load(state, checkpoint_id=folder, planner=TensorOnlyPlanner(),
                 no_dist=not dist.is_initialized())
    set_model_state_dict(model, state["model"])
    set_optimizer_state_dict(model, optimizer, state["optimizer"],
                             options=StateDictOptions(strict=not never))


def dcp_to_checkpoint(folder, out_path) -> Path:
    """Write the single-file checkpoint (:func:`hymo_mini.train.save_checkpoint`) of a
    DCP step folder (or of the newest one under a run's folder). One process, no process
    group; the model and the optimizer are built in memory once, on the CPU."""
    from hymo_mini.model import build_hymo
    from hymo_mini.optim import build_optimizer

    source = latest_dcp(folder)
    if source is None:
        raise CheckpointError(f"no complete DCP checkpoint at {str(folder)!r} (a step_* "
                              "folder, or a run folder holding dcp/step_*)")
    meta = read_meta(source)
    config = config_from_dict(meta["config"])
    model = build_hymo(config)
    optimizer = build_optimizer(model, config.optimizer)
    load_dcp(source, model, optimizer)
    return save_checkpoint(out_path, model, optimizer, meta["step"], meta["history"], config)

