"""The hybrid hypothesis on multi-query associative recall (see book/hymo_book/mqar.py).

    python3 benchmarks/mqar.py --out benchmarks/out/mqar_cpu.json                # CPU sweep
    python benchmarks/mqar.py --device cuda --jobs 7 --steps 3000 --batch-size 128 \
        --train 4:64 8:64 16:64 8:128 16:128 32:128 --out $OUT/mqar_h200.json

Every variant (all-GDN, all-MLA, 3:1 hybrids with MLA first or last, each GDN with the
documented recurrence "gla" or the true gated delta rule "delta") trains from the same
seed on the same mixture of ``--train N:T`` tasks, then is scored on every ``--eval N:T``
task (default: the training tasks plus shorter and longer N at each T). ``--jobs`` runs
variants in parallel processes: on a GPU the small models are launch-bound, so several
share it well. The JSON holds the settings, each model's layout, parameter count, loss
curve and accuracies, and benchmarks/record.py's header (the date, this command, the commit,
the machine and the versions); the book's chapter 19 and ``python3 -m hymo_book.plots``
(run in book/) plot it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "book"))  # the experiment is the book's (hymo_book.mqar)

from hymo_book.mqar import VARIANTS, MQARTask, run_sweep  # noqa: E402

from benchmarks import record  # noqa: E402

DEFAULT_TRAIN = ["2:32", "4:32", "8:32"]
DEFAULT_EVAL = ["1:32", "2:32", "4:32", "6:32", "8:32", "10:32",
                "4:12", "4:16", "4:24", "4:48", "4:64"]  # T > 32: longer than trained


def parse_tasks(items: list[str], n_keys: int) -> list[MQARTask]:
    tasks = []
    for item in items:
        try:
            n, t = (int(x) for x in item.split(":"))
        except ValueError:
            raise SystemExit(f"tasks are N:T pairs such as 8:64, got {item!r}") from None
        tasks.append(MQARTask(n, t, n_keys=n_keys, n_values=n_keys))
    return tasks


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--train", nargs="+", default=DEFAULT_TRAIN, help="N:T tasks to train on")
    p.add_argument("--eval", nargs="+", default=None, help="N:T tasks to score")
    p.add_argument("--n-keys", type=int, default=16, help="keys (and values) to draw from")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--n-layers", type=int, default=4)
    p.add_argument("--n-eval", type=int, default=256, help="sequences per eval task")
    p.add_argument("--dim", type=int, default=None, help="model width (default: hymo_mini)")
    p.add_argument("--gdn-backend", default=None, help="GDN recurrence backend (default: auto)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--jobs", type=int, default=1, help="variants trained in parallel processes")
    p.add_argument("--max-seconds", type=float, default=None,
                   help="stop a variant's training early after this long (steps_done says)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    train_tasks = parse_tasks(args.train, args.n_keys)
    eval_tasks = parse_tasks(args.eval or DEFAULT_EVAL, args.n_keys)
    overrides = {} if args.dim is None else {"dim": args.dim}
    if args.gdn_backend is not None:
        overrides["gdn_backend"] = args.gdn_backend

    if args.jobs > 1 and len(args.variants) > 1:
        results = _parallel(argv, args)
    else:
        results = run_sweep(args.variants, train_tasks, eval_tasks, steps=args.steps,
                            batch_size=args.batch_size, lr=args.lr, n_layers=args.n_layers,
                            seed=args.seed, device=args.device, n_eval=args.n_eval,
                            verbose=True, max_seconds=args.max_seconds, **overrides)
        for name, v in results["variants"].items():  # one line per variant, for logs
            print("RESULT " + json.dumps({name: v}), flush=True)
    results["benchmark"] = "mqar"
    results.update(record.header(args.device, __file__, argv))  # date, command, commit, machine
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


def _without(argv: list[str], flag: str) -> list[str]:
    """argv minus ``flag`` and its values (up to the next --option)."""
    out, skip = [], False
    for a in argv:
        if a == flag:
            skip = True
            continue
        if skip and not a.startswith("--"):
            continue
        skip = False
        out.append(a)
    return out


def _parallel(argv: list[str], args) -> dict:
    """One process per variant, ``args.jobs`` at a time; merge their JSON files."""
    base = _without(_without(_without(argv, "--variants"), "--out"), "--jobs")
    with tempfile.TemporaryDirectory() as tmp:
        pending = list(enumerate(args.variants))
        running, parts = [], {}
        while pending or running:
            while pending and len(running) < args.jobs:
                i, name = pending.pop(0)
                out = Path(tmp) / f"{i}.json"
                cmd = [sys.executable, __file__, *base, "--variants", name, "--out", str(out)]
                running.append((i, out, subprocess.Popen(cmd)))
            i, out, proc = running.pop(0)
            if proc.wait() != 0:
                raise SystemExit(f"variant {args.variants[i]!r} failed")
            parts[i] = json.loads(out.read_text())
        variants = {}
        for i in sorted(parts):
            variants.update(parts[i]["variants"])
        merged = parts[0]
        merged["variants"] = variants
        merged["settings"]["jobs"] = args.jobs
        return merged


if __name__ == "__main__":
    raise SystemExit(main())
