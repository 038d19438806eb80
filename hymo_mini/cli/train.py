"""``hymo-mini train`` (also ``python -m hymo_mini.train`` and ``torchrun -m hymo_mini.train``)
and ``hymo-mini convert-checkpoint``."""

from __future__ import annotations

import sys
from pathlib import Path

from hymo_mini.cli.common import COMMANDS, CommandLineError, Parser, parse, parse_device, run
from hymo_mini.config import HyMoConfig, load_config, preset_names, replace

__all__ = ["train_main", "convert_main"]


# ---- train ------------------------------------------------------------------------------
def _train_parser() -> Parser:
    p = Parser(prog="hymo-mini train",
                description="Train a HyMo on bytes of text (default: the Python standard "
                            "library's .py files).")
    p.add_argument("--config", default="hymo_mini",
                   help=f"preset ({', '.join(preset_names())}) or YAML path")
    p.add_argument("--data", nargs="*", default=None, metavar="PATH",
                   help="text files or folders (default: the standard library's .py files)")
    p.add_argument("--pattern", default="*.py", help="file pattern inside folders")
    p.add_argument("--max-bytes", type=int, default=4_000_000, help="corpus size cap")
    p.add_argument("--out", default=None, help="output folder (default: the config's "
                   "run.output_dir)")
    p.add_argument("--steps", type=int, default=None, help="stop after this step (default: "
                   "the schedule's length)")
    for flag, kind, what in (("--max-steps", int, "schedule length"),
                             ("--batch-size", int, "sequences per micro-batch"),
                             ("--seq-len", int, "tokens per sequence"),
                             ("--lr", float, "AdamW learning rate"),
                             ("--muon-lr", float, "Muon learning rate"),
                             ("--seed", int, "run seed")):
        p.add_argument(flag, type=kind, default=None, help=f"{what} (default: the config's)")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default=None,
                   help="float32, or bfloat16 autocast over fp32 weights (default: the "
                        "config's)")
    p.add_argument("--optimizer", choices=["adamw", "muon"], default="muon",
                   help="muon (the document's choice): Muon on the MLA and GDN matrices, "
                        "AdamW on the rest; adamw: AdamW on everything")
    p.add_argument("--normuon", action="store_true",
                   help="with --optimizer muon: NorMuon's per-neuron update normalisation")
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


def _apply_overrides(config: HyMoConfig, args) -> HyMoConfig:
    """The config with the command line's values; contradictory flags are errors."""
    if args.normuon and args.optimizer != "muon":
        raise CommandLineError("--normuon normalises Muon's update, so it needs --optimizer "
                               f"muon; got --optimizer {args.optimizer}")
    training = {k: getattr(args, k) for k in ("max_steps", "batch_size", "seq_len", "dtype")}
    training = {k: v for k, v in training.items() if v is not None}
    if training:
        config = replace(config, training=replace(config.training, **training))
    optimizer = {"name": args.optimizer,
                 "normuon": args.optimizer == "muon" and (args.normuon or config.optimizer.normuon)}
    optimizer.update({k: v for k in ("lr", "muon_lr") if (v := getattr(args, k)) is not None})
    config = replace(config, optimizer=replace(config.optimizer, **optimizer))
    if args.seed is not None:
        config = replace(config, run=replace(config.run, seed=args.seed))
    return config


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


def _train(args) -> int:
    import os

    import torch

    from hymo_mini.data import load_corpus
    from hymo_mini.train import CheckpointError, train

    device = parse_device(args.device)
    if args.threads is not None:
        if args.threads <= 0:
            raise CommandLineError(f"--threads must be a positive integer, got {args.threads}")
        torch.set_num_threads(args.threads)
    config = _apply_overrides(load_config(args.config), args)
    out = Path(config.run.output_dir if args.out is None else args.out)
    if args.distributed or "WORLD_SIZE" in os.environ:
        return _train_distributed(args, config, device, out)
    if args.activation_checkpointing:
        raise CommandLineError("--activation-checkpointing is a switch of --distributed "
                               "training; without it set model.gradient_checkpointing")
    from hymo_mini.train.curves import loss_curve, save_figure

    if not args.resume and (out / "checkpoint.pt").exists():
        raise CheckpointError(f"{str(out / 'checkpoint.pt')!r} exists: pass --resume to "
                              "continue that run, or choose another --out")
    corpus = load_corpus(args.data, max_bytes=args.max_bytes, pattern=args.pattern)
    print(corpus.describe())
    result = train(config, corpus, steps=args.steps, out_dir=out, resume=args.resume,
                   device=device, progress=not args.no_progress)
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


def train_main(argv: list[str] | None = None) -> int:
    """``hymo-mini train`` / ``python -m hymo_mini.train``."""
    args, status = parse(_train_parser(), sys.argv[1:] if argv is None else argv)
    return status if args is None else run("hymo-mini train", lambda: _train(args))


