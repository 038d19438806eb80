"""The ``hymo-mini`` command line: config, params, figures, train, convert-checkpoint.

Every mistake on the command line is one line on stderr and exit status 2, naming the
argument, what was expected and the nearest valid choice; ``--help`` is plain text with
the defaults. Each sub-command imports what it needs only when it runs, so
``hymo-mini config`` stays instant.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hymo_mini.config import ConfigError, HyMoConfig, load_config, preset_names, replace
from hymo_mini.model_config import did_you_mean

__all__ = ["main", "train_main", "parse_device", "CommandLineError"]

COMMANDS = {
    "config": "print a config (preset or YAML file) with its derived fields",
    "params": "active and stored parameter counts per component",
    "figures": "draw the package's figures of the model into a folder",
    "train": "train a model on text (--distributed: on several processes, under torchrun)",
    "convert-checkpoint": "write the single-file checkpoint of a distributed run's DCP folder",
}


class CommandLineError(ValueError):
    """A command-line value that cannot be used; the message is the whole explanation."""


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except where there is none to show."""

    def _get_help_string(self, action):
        if action.default in (None, False) or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block) and the defaults in --help."""

    def __init__(self, **kwargs):
        super().__init__(formatter_class=_Help, **kwargs)

    def error(self, message: str):  # noqa: D102 - argparse's hook
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _overview() -> str:
    from hymo_mini.ops import RULES

    lines = ["usage: hymo-mini COMMAND [options]   (hymo-mini COMMAND --help for its options)",
             "", "commands:"]
    lines += [f"  {name:<18} {text}" for name, text in COMMANDS.items()]
    lines += ["", f"presets: {', '.join(preset_names())} (or the path of a YAML file)",
              "GDN backends (config model.gdn_backend): "
              + "; ".join(f"{rule}: auto, {', '.join(b)}" for rule, b in RULES.items())]
    return "\n".join(lines)


def parse_device(text: str):
    """A torch.device this machine has, or a CommandLineError listing the ones it has."""
    import torch

    available = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        available.append("mps")
    have = ", ".join(available)
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        hint = did_you_mean(text, available)
        raise CommandLineError(f"--device {text!r}: not a device name{hint}; "
                               f"this machine has {have}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise CommandLineError(f"--device {text}: no CUDA GPU is available here; "
                               f"this machine has {have}")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise CommandLineError(f"--device {text}: there are {torch.cuda.device_count()} CUDA "
                               f"devices; this machine has {have}")
    if device.type not in ("cpu", "cuda") and str(device) not in available:
        raise CommandLineError(f"--device {text}: not available; this machine has {have}")
    return device


# ---- config, params, figures ----------------------------------------------------------
def _config_main(argv: list[str]) -> int:
    parser = _Parser(prog="hymo-mini config", description=COMMANDS["config"])
    parser.add_argument("name", nargs="?", default="hymo_mini",
                        help=f"preset ({', '.join(preset_names())}) or YAML path")
    args, status = _parse(parser, argv)
    if args is None:
        return status
    from hymo_mini.config import dump_config

    config = load_config(args.name)
    print(dump_config(config), end="")
    m = config.model
    print("# derived")
    print(f"#   qk_nope_head_dim: {m.qk_nope_head_dim}")
    print(f"#   gdn_n_heads: {m.gdn_n_heads}")
    print(f"#   mla_positions: {list(m.mla_positions)}")
    print(f"#   gdn_positions: {list(m.gdn_positions)}")
    return 0


def _params_main(argv: list[str]) -> int:
    parser = _Parser(prog="hymo-mini params", description=COMMANDS["params"])
    parser.add_argument("name", nargs="?", default="hymo_750m",
                        help=f"preset ({', '.join(preset_names())}) or YAML path")
    parser.add_argument("--no-document", action="store_true",
                        help="leave out the comparison with the design document's figures")
    args, status = _parse(parser, argv)
    if args is None:
        return status
    from hymo_mini.params import count_params, document_comparison

    config = load_config(args.name)
    table = count_params(config)
    table.title = f"{config.run.name}: parameters (stored = in memory, active = used per token)"
    print(table)
    if not args.no_document and config.model == load_config("hymo_750m").model:
        print("\nThe design document's figures (section 12) against the computed counts:")
        print(document_comparison(config))
    return 0


def _figures_main(argv: list[str]) -> int:
    from hymo_mini.figures import FIGURES, save_figure

    parser = _Parser(prog="hymo-mini figures", description=COMMANDS["figures"])
    parser.add_argument("--out", default="figures", help="output folder")
    parser.add_argument("--only", nargs="*", default=None, metavar="NAME",
                        help="file names to draw (default: all; --list shows them)")
    parser.add_argument("--list", action="store_true", help="list the figures and exit")
    args, status = _parse(parser, argv)
    if args is None:
        return status
    if args.list:
        print("\n".join(sorted(FIGURES)))
        return 0
    names = sorted(FIGURES) if args.only is None else args.only
    for name in names:
        if name not in FIGURES:
            raise CommandLineError(f"--only {name!r}: no such figure"
                                   f"{did_you_mean(name, FIGURES)}; hymo-mini figures --list "
                                   "shows them")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        save_figure(FIGURES[name](), out / name)
        print(f"wrote {out / name}")
    return 0


# ---- train ------------------------------------------------------------------------------
def _train_parser() -> _Parser:
    p = _Parser(prog="hymo-mini train",
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
    from hymo_mini.figures import save_figure
    from hymo_mini.viz.train_plots import loss_curve

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
            from hymo_mini.figures import save_figure
            from hymo_mini.viz.train_plots import loss_curve

            save_figure(loss_curve(result.history, title=f"{config.run.name}: loss"),
                        out / "loss_curve.png")
            print(_summary(result, out))
    finally:
        close_distributed()
    return 0


def _convert_main(argv: list[str]) -> int:
    parser = _Parser(prog="hymo-mini convert-checkpoint", description=COMMANDS[
        "convert-checkpoint"] + "; hymo-mini train --resume reads it on one device")
    parser.add_argument("source", help="a dcp/step_* folder, or a run folder holding dcp/ "
                        "(its newest step)")
    parser.add_argument("out", help="the checkpoint file to write, e.g. RUN/checkpoint.pt")
    args, status = _parse(parser, argv)
    if args is None:
        return status
    from hymo_mini.train.dcp import dcp_to_checkpoint

    print(f"wrote {dcp_to_checkpoint(args.source, args.out)}")
    return 0


def _parse(parser: _Parser, argv: list[str]):
    """(args, None), or (None, exit status) after --help or a usage error."""
    try:
        return parser.parse_args(argv), None
    except SystemExit as done:
        return None, int(done.code or 0)


def train_main(argv: list[str] | None = None) -> int:
    """``hymo-mini train`` / ``python -m hymo_mini.train``."""
    args, status = _parse(_train_parser(), sys.argv[1:] if argv is None else argv)
    return status if args is None else _run("hymo-mini train", lambda: _train(args))


# ---- dispatch ---------------------------------------------------------------------------
def _errors():
    from hymo_mini.data import DataError
    from hymo_mini.train import CheckpointError
    from hymo_mini.train.distributed import DistributedError

    return (ConfigError, DataError, CheckpointError, CommandLineError, DistributedError)


def _reports(err: Exception) -> bool:
    """Whether this process prints ``err``: every process of a one-process run; of a
    distributed run rank 0, which has the same error as the others, unless the error says
    every rank must speak (one that cannot reach rank 0)."""
    import os

    return os.environ.get("RANK", "0") == "0" or getattr(err, "every_rank", False)


def _run(prog: str, command) -> int:
    try:
        return int(command() or 0)
    except _errors() as err:
        if _reports(err):
            text = " ".join(str(err).split())  # one line, whatever the message's layout
            print(f"{prog}: error: {text}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_overview())
        return 0
    command, rest = argv[0], argv[1:]
    runs = {"config": _config_main, "params": _params_main, "figures": _figures_main,
            "convert-checkpoint": _convert_main}
    if command == "train":
        return train_main(rest)
    if command not in runs:
        print(f"hymo-mini: error: unknown command {command!r}{did_you_mean(command, COMMANDS)}; "
              f"the commands are {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    return _run(f"hymo-mini {command}", lambda: runs[command](rest))


if __name__ == "__main__":
    raise SystemExit(main())
