"""``hymo-mini generate``: continue a prompt with a trained model, printing each byte as it
is chosen; and ``hymo-mini fetch-docs``, the English text the small model learns from."""

from __future__ import annotations

import codecs
import sys
from pathlib import Path

from hymo_mini.cli.common import COMMANDS, CommandLineError, Parser, parse, parse_device

__all__ = ["generate_main", "fetch_docs_main", "read_model"]


def _parser() -> Parser:
    p = Parser(prog="hymo-mini generate", description=COMMANDS["generate"])
    p.add_argument("model", help="a model file (.safetensors, as the book ships) or a "
                   "training checkpoint (checkpoint.pt)")
    p.add_argument("prompt", nargs="?", default=None,
                   help="the text to continue (default: --prompt-file, else stdin)")
    p.add_argument("--prompt-file", default=None, help="read the prompt from this file")
    p.add_argument("--max-new-tokens", type=int, default=400, help="bytes to add")
    p.add_argument("--temperature", type=float, default=0.8,
                   help="0: always the likeliest byte; higher: more varied")
    p.add_argument("--top-k", type=int, default=None, help="sample among the k likeliest")
    p.add_argument("--top-p", type=float, default=None,
                   help="sample among the fewest likeliest whose probability adds up to p")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    return p


def read_model(path: str, device):
    """``(model, config)`` from a model file or a training checkpoint."""
    from hymo_mini.model import build_hymo
    from hymo_mini.model_file import load_model
    from hymo_mini.train import CheckpointError, load_checkpoint

    if not Path(path).is_file():
        raise CommandLineError(f"model {path!r}: no such file; pass a .safetensors model or "
                               "a checkpoint.pt that hymo-mini train wrote")
    with open(path, "rb") as f:
        zipped = f.read(4) == b"PK\x03\x04"  # torch.save's format is a zip archive
    if not zipped:
        try:
            return load_model(path, device)
        except ValueError as err:
            raise CommandLineError(f"model {err}") from None
    try:
        payload = load_checkpoint(path)
    except CheckpointError as err:
        raise CommandLineError(f"model {err}") from None
    config = payload["config"]
    model = build_hymo(config)
    model.load_state_dict(payload["model"])
    return model.to(device).eval(), config


def _prompt(args) -> str:
    if args.prompt is not None and args.prompt_file is not None:
        raise CommandLineError("give the prompt once: as an argument or with --prompt-file")
    if args.prompt_file is not None:
        try:
            text = Path(args.prompt_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise CommandLineError(f"--prompt-file {args.prompt_file!r}: cannot read it as "
                                   f"UTF-8 text ({err.__class__.__name__})") from None
    elif args.prompt is not None:
        text = args.prompt
    elif not sys.stdin.isatty():
        text = sys.stdin.read()
    else:
        raise CommandLineError("no prompt: pass it as an argument, with --prompt-file or on "
                               "stdin")
    if not text:
        raise CommandLineError("the prompt is empty: the model needs at least one byte to "
                               "continue")
    return text


def _generate(args) -> int:
    from hymo_mini.data import encode
    from hymo_mini.generate import check_sampling, stream

    device = parse_device(args.device)
    text = _prompt(args)
    model, config = read_model(args.model, device)
    if config.model.vocab_size != 256:
        raise CommandLineError(f"model {args.model!r}: its vocabulary has "
                               f"{config.model.vocab_size} tokens; generate reads and writes "
                               "bytes, so it needs a byte-level model (vocab_size 256)")
    try:
        check_sampling(model, args.max_new_tokens, args.temperature, args.top_k, args.top_p)
    except ValueError as err:  # "top_k must be ...": the setting's name comes first
        name, rest = str(err).split(" ", 1)
        raise CommandLineError(f"--{name.replace('_', '-')} {rest}") from None
    prompt = encode(text)
    if prompt.numel() >= config.model.max_seq_len:
        raise CommandLineError(f"the prompt has {prompt.numel()} bytes; the model reads at "
                               f"most max_seq_len={config.model.max_seq_len}, with room for "
                               "one more")
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")  # bytes split characters
    sys.stdout.write(text)
    for token in stream(model, prompt, args.max_new_tokens, temperature=args.temperature,
                        top_k=args.top_k, top_p=args.top_p, seed=args.seed):
        sys.stdout.write(utf8.decode(bytes([int(token)])))
        sys.stdout.flush()
    sys.stdout.write(utf8.decode(b"", final=True) + "\n")
    return 0


def generate_main(argv: list[str]) -> int:
    args, status = parse(_parser(), argv)
    return status if args is None else _generate(args)


def fetch_docs_main(argv: list[str]) -> int:
    parser = Parser(prog="hymo-mini fetch-docs", description=COMMANDS["fetch-docs"])
    parser.add_argument("out", help="a new folder for the *.rst.txt files and COPYRIGHT")
    args, status = parse(parser, argv)
    if args is None:
        return status
    from hymo_mini.data import fetch_python_docs

    got = fetch_python_docs(args.out)
    print(f"wrote {got['files']} files, {got['bytes']:,} bytes ({got['package']} "
          f"{got['version']}, PSF licence: {args.out}/COPYRIGHT) to {args.out}\n"
          f"sha256 of the corpus: {got['sha256']}\n"
          f"train on it: hymo-mini train --data {args.out} --pattern '*.rst.txt'")
    return 0
