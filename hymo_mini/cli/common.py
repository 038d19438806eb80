"""What every ``hymo-mini`` command shares: one-line errors with exit status 2, --help with
the defaults, the one device check, and how a command ends when its reader goes away
(a closed pipe: quietly, status 141) or the user presses Ctrl-C (one line, status 130)."""

from __future__ import annotations

import argparse
import functools
import os
import sys

from hymo_mini.config import ConfigError
from hymo_mini.model_config import did_you_mean

__all__ = ["COMMANDS", "CommandLineError", "Parser", "parse", "parse_device", "run",
           "closed_pipe_safe", "INTERRUPTED", "CLOSED_PIPE"]

INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a program stopped by Ctrl-C
CLOSED_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left

COMMANDS = {
    "config": "print a config (preset or YAML file) with its derived fields",
    "params": "active and stored parameter counts per component",
    "train": "train a model on text (--distributed: on several processes, under torchrun)",
    "convert-checkpoint": "write the single-file checkpoint of a distributed run's DCP folder",
    "generate": "continue a prompt with a trained byte-level model, streaming the text",
    "fetch-docs": "download the Python documentation's sources (English text) with apt-get",
    "export-model": "write a training checkpoint's model as one safetensors file",
}


class CommandLineError(ValueError):
    """A command-line value that cannot be used; the message is the whole explanation."""


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except where there is none to show."""

    def _get_help_string(self, action):
        if action.default in (None, False) or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block), the defaults in --help, and no
    abbreviated options (``--step 5`` is an unknown option, not ``--steps 5``)."""

    def __init__(self, **kwargs):
        super().__init__(formatter_class=_Help, allow_abbrev=False, **kwargs)

    def parse_args(self, args=None, namespace=None):  # noqa: D102
        known, extras = self.parse_known_args(args, namespace)
        if extras:
            first = extras[0]
            if first.startswith("-"):
                name = first.split("=", 1)[0]
                options = [o for action in self._actions for o in action.option_strings]
                self.error(f"unknown option {name}{did_you_mean(name, options)}; "
                           "the options are in --help")
            self.error(f"unexpected argument {first!r}; the options are in --help")
        return known

    def error(self, message: str):  # noqa: D102 - argparse's hook
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


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


def parse(parser: Parser, argv: list[str]):
    """(args, None), or (None, exit status) after --help or a usage error."""
    try:
        return parser.parse_args(argv), None
    except SystemExit as done:
        return None, int(done.code or 0)


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


def run(prog: str, command) -> int:
    """``command()``'s exit status; a user's mistake is one line and status 2, Ctrl-C one
    line and status 130."""
    try:
        return int(command() or 0)
    except _errors() as err:
        if _reports(err):
            text = " ".join(str(err).split())  # one line, whatever the message's layout
            print(f"{prog}: error: {text}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\n{prog}: interrupted", file=sys.stderr)
        return INTERRUPTED


def closed_pipe_safe(main):
    """``main`` (returning an exit status) that ends quietly with status 141 when what it
    prints has no reader any more (``hymo-mini config | head -1``)."""
    @functools.wraps(main)
    def wrapped(*args, **kwargs) -> int:
        try:
            status = main(*args, **kwargs)
            sys.stdout.flush()  # a closed pipe shows here if the output was buffered
            return status
        except BrokenPipeError:
            # the rest of the output, and Python's own flush at exit, go nowhere
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return CLOSED_PIPE
    return wrapped


