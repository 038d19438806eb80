"""``hymo-mini train`` (also ``python -m hymo_mini.train`` and ``torchrun -m hymo_mini.train``),
``hymo-mini convert-checkpoint`` and ``hymo-mini export-model``."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from hymo_mini.cli.common import (
    COMMANDS,
    INTERRUPTED,
    CommandLineError,
    Parser,
    closed_pipe_safe,
    parse,
    parse_device,
    run,
)
from hymo_mini.config import HyMoConfig, load_config, preset_names, replace
from hymo_mini.data import DEFAULT_MAX_BYTES

__all__ = ["train_main", "convert_main", "export_main", "train_parser", "apply_overrides",
           "CONFIG_FLAGS", "check_output_folder"]


# ---- train ------------------------------------------------------------------------------
# the flags that set a config field: left out, the field keeps the config's value
CONFIG_FLAGS = {  # flag: (config field, argparse's options, help)
    "--max-steps": ("training.max_steps", {"type": int}, "schedule length"),
    "--batch-size": ("training.batch_size", {"type": int}, "sequences per micro-batch"),
    "--seq-len": ("training.seq_len", {"type": int}, "tokens the model reads per sequence"),
    "--dtype": ("training.dtype", {"choices": ["float32", "bfloat16"]},
                "float32, or bfloat16 autocast over fp32 weights"),
    "--optimizer": ("optimizer.name", {"choices": ["adamw", "muon"]},
                    "muon: Muon on the MLA and GDN matrices, AdamW on the rest; adamw: AdamW "
                    "on everything"),
    "--normuon": ("optimizer.normuon", {"action": argparse.BooleanOptionalAction},
                  "with muon: NorMuon's per-neuron update normalisation"),
    "--lr": ("optimizer.lr", {"type": float}, "AdamW learning rate"),
    "--muon-lr": ("optimizer.muon_lr", {"type": float}, "Muon learning rate"),
    "--seed": ("run.seed", {"type": int}, "run seed"),
}


def train_parser() -> Parser:
    p = Parser(prog="hymo-mini train",
               description="Train a HyMo on bytes of text (default: the Python standard "
                           "library's .py files). A flag left out keeps the config's value.")
    p.add_argument("--config", default="hymo_mini",
                   help=f"preset ({', '.join(preset_names())}) or YAML path")
    p.add_argument("--data", nargs="*", default=None, metavar="PATH",
                   help="text files or folders (default: the standard library's .py files)")
    p.add_argument("--pattern", default="*.py", help="file pattern inside folders")
    p.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES, help="corpus size cap")
    p.add_argument("--out", default=None, help="output folder (default: the config's "
                   "run.output_dir)")
    p.add_argument("--steps", type=int, default=None, help="stop after this step (default: "
                   "the schedule's length)")
    for flag, (_, options, what) in CONFIG_FLAGS.items():
        p.add_argument(flag, default=None, help=f"{what} (default: the config's)", **options)
    p.add_argument("--device", default="cuda" if _cuda() else "cpu",
                   help="cpu, cuda or cuda:N")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads "
                   "(default: torch's)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt "
                   "(--distributed: the newest OUT/dcp/step_*, from any number of processes)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--distributed", action="store_true",
                   help="data-parallel FSDP2 training; on by itself under torchrun "
                        "(torchrun --nproc-per-node N -m hymo_mini.train ...); --batch-size "
                        "is then the global batch")
    p.add_argument("--activation-checkpointing", action="store_true",
                   help="recompute each layer in the backward pass instead of keeping its "
                        "activations")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="--distributed: seconds to wait for the other ranks (rendezvous, "
                        "collectives, barriers)")
    return p


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def apply_overrides(config: HyMoConfig, args) -> HyMoConfig:
    """The config with the values of the flags given; contradictory flags are errors."""
    changes: dict[str, dict] = {}  # section: {field: value}
    for flag, (field, _, _) in CONFIG_FLAGS.items():
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            section, name = field.split(".")
            changes.setdefault(section, {})[name] = value
    optimizer = changes.setdefault("optimizer", {})
    name = optimizer.get("name", config.optimizer.name)
    if name != "muon" and optimizer.get("normuon", config.optimizer.normuon):
        if optimizer.get("normuon"):
            raise CommandLineError("--normuon normalises Muon's update, so it needs --optimizer "
                                   f"muon; got --optimizer {name}")
        optimizer["normuon"] = False  # the config's NorMuon belongs to its Muon
    for section, values in changes.items():
        config = replace(config, **{section: replace(getattr(config, section), **values)})
    return config


def check_output_folder(out: Path) -> None:
    """Create ``out`` and make sure a file can be written there, before any work."""
    if out.exists() and not out.is_dir():
        raise CommandLineError(f"--out {str(out)!r}: there is a file of that name, not a "
                               f"folder; choose a folder, e.g. {str(out) + '_run'!r}")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as err:
        raise CommandLineError(f"--out {str(out)!r}: cannot write there "
                               f"({err.strerror or err}); choose a folder you can write to"
                               ) from None


def _settings(args, config: HyMoConfig, device, out: Path, argv: list[str]) -> dict:
    """What the run uses besides its config (saved with each checkpoint)."""
    import torch

    return {"command": " ".join(["hymo-mini", "train", *argv]), "config": args.config,
            "data": args.data or "the Python standard library", "pattern": args.pattern,
            "max_bytes": args.max_bytes, "steps": args.steps or config.training.max_steps,
            "device": str(device), "threads": torch.get_num_threads(), "out": str(out)}


def _describe(config: HyMoConfig, settings: dict) -> str:
    t, o = config.training, config.optimizer
    optimizer = (f"muon (lr {o.muon_lr:g}, AdamW lr {o.lr:g}{', NorMuon' if o.normuon else ''})"
                 if o.name == "muon" else f"adamw (lr {o.lr:g})")
    return (f"settings: {config.run.name}; optimizer {optimizer}; batch {t.batch_size} x "
            f"{t.seq_len} tokens; steps {settings['steps']} (schedule {t.max_steps}); "
            f"{t.dtype}; seed {config.run.seed}; device {settings['device']} (threads "
            f"{settings['threads']}); out {settings['out']}")


def _summary(result, out: Path) -> str:
    h = result.history
    main_loss = h["parts"].get("main", h["loss"])[-1]
    s = result.stats
    resumed = (f"resumed from step {result.resumed_from}, "
               if result.resumed_from is not None else "")
    return (f"{resumed}step {h['step'][-1]}: main (next-token) loss {main_loss:.3f} train, "
            f"{h['val_loss'][-1]:.3f} validation; {s['tokens_per_s']:,.0f} tokens/s; data "
            f"{100 * s['data_fraction']:.1f}% and logging {100 * s['log_fraction']:.1f}% of "
            f"the time\nwrote {result.checkpoint}, {out / 'history.json'}, "
            f"{out / 'loss_curve.png'}")


def _interrupted(result, out: Path, steps: int) -> str:
    reached = result.history["step"][-1] if result.history["step"] else 0
    if result.saved_step is None:
        kept = "no checkpoint was written yet"
    else:
        kept = (f"{out / 'checkpoint.pt'} holds step {result.saved_step} (--resume continues "
                "from it)")
    return (f"hymo-mini train: interrupted after step {reached} of {steps}; {kept}; history "
            f"and loss curve written up to step {reached}")


def _train(args, argv: list[str]) -> int:
    import os

    import torch

    from hymo_mini.data import load_corpus
    from hymo_mini.train import CheckpointError, TrainingInterrupted, train

    device = parse_device(args.device)
    if args.threads is not None:
        if args.threads <= 0:
            raise CommandLineError(f"--threads must be a positive integer, got {args.threads}")
        torch.set_num_threads(args.threads)
    config = apply_overrides(load_config(args.config), args)
    out = Path(config.run.output_dir if args.out is None else args.out)
    if args.distributed or "WORLD_SIZE" in os.environ:
        return _train_distributed(args, config, device, out)
    if args.activation_checkpointing:
        raise CommandLineError("--activation-checkpointing is a switch of --distributed "
                               "training; without it set model.gradient_checkpointing")
    from hymo_mini.train.curves import loss_curve, save_figure
    from hymo_mini.train.loop import check_resume, check_sizes, check_steps

    steps = check_steps(config, args.steps)
    checkpoint = out / "checkpoint.pt"
    if not args.resume and checkpoint.exists():
        raise CheckpointError(f"{str(checkpoint)!r} exists: pass --resume to continue "
                              "that run, or choose another --out")
    check_resume(config, out, args.resume, steps)
    if args.max_bytes <= 0:
        raise CommandLineError(f"--max-bytes must be a positive number of bytes, got "
                               f"{args.max_bytes}; the default is {DEFAULT_MAX_BYTES:,}")
    corpus = load_corpus(args.data, max_bytes=args.max_bytes, pattern=args.pattern)
    check_sizes(config, corpus)
    check_output_folder(out)  # last: a check that fails earlier leaves no folder behind
    settings = _settings(args, config, device, out, argv)
    print(corpus.describe())
    print(_describe(config, settings))
    try:
        result = train(config, corpus, steps=steps, out_dir=out, resume=args.resume,
                       device=device, progress=not args.no_progress, settings=settings)
    except TrainingInterrupted as stop:
        save_figure(loss_curve(stop.result.history, title=f"{config.run.name}: loss"),
                    out / "loss_curve.png")
        print(_interrupted(stop.result, out, steps), file=sys.stderr)
        return INTERRUPTED
    save_figure(loss_curve(result.history, title=f"{config.run.name}: loss"),
                out / "loss_curve.png")
    print(_summary(result, out))
    return 0


def _train_distributed(args, config: HyMoConfig, device, out: Path) -> int:
    """``hymo-mini train --distributed``: every rank runs this; rank 0 prints and writes."""
    import os

    from hymo_mini.data import load_corpus
    from hymo_mini.train import CheckpointError
    from hymo_mini.train.dcp import latest_dcp
    from hymo_mini.train.distributed import check_batch, close_distributed, init_distributed
    from hymo_mini.train.fsdp_loop import check_resume, train_distributed

    if device.index is not None:
        raise CommandLineError(f"--device {device}: with --distributed each rank takes the GPU "
                               "of its LOCAL_RANK; pass --device cuda")
    if args.timeout <= 0:
        raise CommandLineError(f"--timeout must be a positive number of seconds, got "
                               f"{args.timeout:g}")
    if not args.resume and latest_dcp(out) is not None:
        raise CheckpointError(f"{str(latest_dcp(out))!r} exists: pass --resume to continue "
                              "that run, or choose another --out")
    # what can fail alone fails before the rendezvous: no rank waits for one that stopped
    check_batch(config, int(os.environ.get("WORLD_SIZE", "1")))
    check_resume(config, out, args.resume, args.steps or config.training.max_steps)
    world = init_distributed(device.type, args.timeout)
    try:
        lead = world.rank == 0
        corpus = load_corpus(args.data, max_bytes=args.max_bytes, pattern=args.pattern)
        if lead:
            print(corpus.describe())
            print(f"FSDP2 on {world.size} process(es) ({device.type}); global batch "
                  f"{config.training.batch_size}, {config.training.batch_size // world.size} "
                  "sequences per process")
        result = train_distributed(config, world, corpus, steps=args.steps, out_dir=out,
                                   resume=args.resume, progress=lead and not args.no_progress,
                                   activation_checkpointing=args.activation_checkpointing,
                                   timeout_s=args.timeout)
        if lead:  # the plotting imports on rank 0 only
            from hymo_mini.train.curves import loss_curve, save_figure

            save_figure(loss_curve(result.history, title=f"{config.run.name}: loss"),
                        out / "loss_curve.png")
            print(_summary(result, out))
    finally:
        close_distributed()
    return 0


def convert_main(argv: list[str]) -> int:
    parser = Parser(prog="hymo-mini convert-checkpoint", description=COMMANDS[
        "convert-checkpoint"] + "; hymo-mini train --resume reads it on one device")
    parser.add_argument("source", help="a dcp/step_* folder, or a run folder holding dcp/ "
                        "(its newest step)")
    parser.add_argument("out", help="the checkpoint file to write, e.g. RUN/checkpoint.pt")
    args, status = parse(parser, argv)
    if args is None:
        return status
    from hymo_mini.train.dcp import dcp_to_checkpoint

    print(f"wrote {dcp_to_checkpoint(args.source, args.out)}")
    return 0


def export_main(argv: list[str]) -> int:
    parser = Parser(prog="hymo-mini export-model", description=COMMANDS["export-model"]
                    + " (weights in bf16 and the config; what hymo-mini generate reads)")
    parser.add_argument("checkpoint", help="a checkpoint.pt that hymo-mini train wrote")
    parser.add_argument("out", help="the file to write, e.g. model.safetensors")
    args, status = parse(parser, argv)
    if args is None:
        return status
    from hymo_mini.model import build_hymo
    from hymo_mini.model_file import save_model
    from hymo_mini.train import load_checkpoint

    payload = load_checkpoint(args.checkpoint)
    model = build_hymo(payload["config"])
    model.load_state_dict(payload["model"])
    print(f"wrote {save_model(args.out, model, payload['config'])} (step {payload['step']})")
    return 0


@closed_pipe_safe
def train_main(argv: list[str] | None = None) -> int:
    """``hymo-mini train`` / ``python -m hymo_mini.train``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args, status = parse(train_parser(), argv)
    return status if args is None else run("hymo-mini train", lambda: _train(args, argv))


