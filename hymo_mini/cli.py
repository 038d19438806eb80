"""The ``hymo-mini`` command line.

    hymo-mini config [NAME]      print a preset (or YAML file) with its derived fields
    hymo-mini params [NAME]      active and stored parameter counts per component
    hymo-mini figures [--out D]  regenerate every figure in figures/
    hymo-mini train ...          train a model (see ``hymo-mini train --help``)
    hymo-mini book ...           build the book as a static website

Each sub-command lives in the module that owns it and is imported only when used, so
``hymo-mini config`` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# sub-command -> (module, function taking the remaining argv, one-line help)
COMMANDS = {
    "config": ("hymo_mini.cli", "_config_main", "print a config with its derived fields"),
    "params": ("hymo_mini.params", "main", "parameter counts per component"),
    "figures": ("hymo_mini.figures", "main", "regenerate the figures in figures/"),
    "train": ("hymo_mini.train", "main", "train a model on text"),
    "book": ("hymo_mini.book", "main", "build the book as a static website"),
}


def _config_main(argv: list[str]) -> int:
    from hymo_mini.config import dump_config, load_config

    parser = argparse.ArgumentParser(prog="hymo-mini config")
    parser.add_argument("name", nargs="?", default="hymo_mini", help="preset name or YAML path")
    args = parser.parse_args(argv)
    config = load_config(args.name)
    print(dump_config(config), end="")
    m = config.model
    print("# derived")
    print(f"#   qk_nope_head_dim: {m.qk_nope_head_dim}")
    print(f"#   gdn_n_heads: {m.gdn_n_heads}")
    print(f"#   mla_positions: {list(m.mla_positions)}")
    print(f"#   gdn_positions: {list(m.gdn_positions)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"hymo-mini: unknown command {command!r}; choose one of {sorted(COMMANDS)}",
              file=sys.stderr)
        return 2
    module_name, function_name, _ = COMMANDS[command]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        print(f"hymo-mini {command}: not available yet ({err})", file=sys.stderr)
        return 2
    return int(getattr(module, function_name)(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
