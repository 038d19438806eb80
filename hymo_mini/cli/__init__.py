"""The ``hymo-mini`` command line: config, params, train, convert-checkpoint, generate,
fetch-docs, export-model.

Every mistake on the command line is one line on stderr and exit status 2, naming the
argument, what was expected and the nearest valid choice; ``--help`` is plain text with
the defaults. Each sub-command imports what it needs only when it runs, so
``hymo-mini config`` stays instant. ``main`` (here) runs the commands config and params:

    common.py     what every command shares: the parser, one-line errors, the device check
    train.py      ``hymo-mini train``, ``convert-checkpoint`` and ``export-model``
    generate.py   ``hymo-mini generate`` and ``hymo-mini fetch-docs``
    __main__.py   ``python -m hymo_mini.cli``
"""

from __future__ import annotations

import sys

from hymo_mini.cli.common import COMMANDS, Parser, closed_pipe_safe, parse, run
from hymo_mini.cli.generate import fetch_docs_main, generate_main
from hymo_mini.cli.train import convert_main, export_main, train_main
from hymo_mini.config import load_config, preset_names
from hymo_mini.model_config import did_you_mean

__all__ = ["main", "train_main"]


def _overview() -> str:
    from hymo_mini.ops import RULES

    lines = ["usage: hymo-mini COMMAND [options]   (hymo-mini COMMAND --help for its options)",
             "", "commands:"]
    lines += [f"  {name:<18} {text}" for name, text in COMMANDS.items()]
    lines += ["", f"presets: {', '.join(preset_names())} (or the path of a YAML file)",
              "GDN backends (config model.gdn_backend): "
              + "; ".join(f"{rule}: auto, {', '.join(b)}" for rule, b in RULES.items())]
    return "\n".join(lines)


# ---- config, params -------------------------------------------------------------------
def _config_main(argv: list[str]) -> int:
    parser = Parser(prog="hymo-mini config", description=COMMANDS["config"])
    parser.add_argument("name", nargs="?", default="hymo_mini",
                        help=f"preset ({', '.join(preset_names())}) or YAML path")
    args, status = parse(parser, argv)
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
    parser = Parser(prog="hymo-mini params", description=COMMANDS["params"])
    parser.add_argument("name", nargs="?", default="hymo_750m",
                        help=f"preset ({', '.join(preset_names())}) or YAML path")
    parser.add_argument("--no-document", action="store_true",
                        help="leave out the comparison with the design document's figures")
    args, status = parse(parser, argv)
    if args is None:
        return status
    from hymo_mini.analysis.params import count_params, document_comparison

    config = load_config(args.name)
    table = count_params(config)
    table.title = f"{config.run.name}: parameters (stored = in memory, active = used per token)"
    print(table)
    if not args.no_document and config.model == load_config("hymo_750m").model:
        print("\nThe design document's figures (section 12) against the computed counts:")
        print(document_comparison(config))
    return 0


@closed_pipe_safe
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_overview())
        return 0
    command, rest = argv[0], argv[1:]
    runs = {"config": _config_main, "params": _params_main, "convert-checkpoint": convert_main,
            "generate": generate_main, "fetch-docs": fetch_docs_main,
            "export-model": export_main}
    if command == "train":
        return train_main(rest)
    if command not in runs:
        print(f"hymo-mini: error: unknown command {command!r}{did_you_mean(command, COMMANDS)}; "
              f"the commands are {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    return run(f"hymo-mini {command}", lambda: runs[command](rest))


