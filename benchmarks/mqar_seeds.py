"""MQAR settled: every layer layout, several seeds, the same number of steps, one GPU call.

    python3 benchmarks/mqar_seeds.py --device cuda               # the sweep (defaults below)
    python3 benchmarks/mqar_seeds.py --cpu-smoke --out /tmp/smoke.json    # 2 steps each, CPU

Variants (hymo_book.mqar.VARIANTS): all-GDN with either rule (the documented "gla" or the
true gated delta rule "delta"), all-MLA, and the 3:1 hybrid with MLA first
(mla_position="first") or last ("last"), each with either rule. Every (variant, seed) run
trains exactly --steps steps on the --train mixture (no time limit cuts a run short: the
seed sets the model's initialisation, the batches and the task order), then is scored on
every --eval N:T task, on the same held-out sequences for every run. Runs go to --jobs
worker processes, seed by seed (all variants of seed 0 first), so a sweep stopped early
keeps whole seeds; the JSON is rewritten after every finished run, and at --budget-s the
runs still going are stopped and listed as unfinished.

JSON (default benchmarks/out/mqar_seeds_<gpu or cpu>_<date>.json):
    benchmark   "mqar_seeds";  date, command, git_commit, hardware (platform, python,
                torch, gpu, ...: benchmarks/record.py)
    settings    steps, batch_size, lr, n_layers, n_keys, train_tasks and eval_tasks
                ([N, T] lists), n_eval (sequences per eval task), seeds, variants, jobs,
                device, gdn_backend, budget_s
    runs        one per finished run: variant, seed, layer_types ("G" GDN, "A" MLA),
                gdn_rule, parameters, steps_done, final_loss (mean of the last 5% of
                steps), loss_curve (about 100 points), accuracy [[N, T, accuracy]], seconds
                (or variant, seed, error for a run that raised)
    summary     {variant: {runs, seeds, accuracy: [[N, T, mean, min, max, std]],
                final_loss: [mean, min, max, std]}}, std the sample standard deviation
                (n - 1; 0 for a single run)
    unfinished  [[variant, seed]] not done by --budget-s
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "book"))  # the experiment is the book's (hymo_book.mqar)

from hymo_book.mqar import VARIANTS, run_sweep  # noqa: E402

from benchmarks import record  # noqa: E402
from benchmarks.mqar import parse_tasks  # noqa: E402

DEFAULT_TRAIN = ["4:64", "8:64", "16:64", "8:128", "16:128"]
DEFAULT_EVAL = ["2:128", "4:128", "8:128", "12:128", "16:128",  # N at T = 128
                "8:32", "8:48", "8:64", "8:96", "8:192", "8:256"]  # T at N = 8; > 128: longer
SMOKE = dict(steps=2, batch_size=4, train=["2:12"], eval=["1:12", "2:16"], n_eval=4,
             seeds=[0, 1], device="cpu")  # and --jobs 1 unless given


def one_run(job: dict) -> dict:
    """Train and score one (variant, seed); runs in a worker process. Never raises: a
    failure comes back as {"variant", "seed", "error"}."""
    torch.set_num_threads(1)  # the workers share the CPU cores
    s = job["settings"]
    try:
        overrides = {} if s["gdn_backend"] == "auto" else {"gdn_backend": s["gdn_backend"]}
        result = run_sweep([job["variant"]], parse_tasks(s["train"], s["n_keys"]),
                           parse_tasks(s["eval"], s["n_keys"]), steps=s["steps"],
                           batch_size=s["batch_size"], lr=s["lr"], n_layers=s["n_layers"],
                           seed=job["seed"], device=s["device"], n_eval=s["n_eval"],
                           **overrides)
        return {"variant": job["variant"], "seed": job["seed"],
                **result["variants"][job["variant"]]}
    except Exception as err:
        return {"variant": job["variant"], "seed": job["seed"],
                "error": f"{type(err).__name__}: {err}"[:500]}


def spread(values: list[float]) -> list[float]:
    """[mean, min, max, sample std (0 for one value)]."""
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return [statistics.fmean(values), min(values), max(values), std]


def summarise(runs: list[dict]) -> dict:
    """Per variant: each eval task's accuracy and the final loss as [mean, min, max, std]."""
    out = {}
    for name in dict.fromkeys(r["variant"] for r in runs if "error" not in r):
        mine = [r for r in runs if r["variant"] == name and "error" not in r]
        tasks = [(n, t) for n, t, _ in mine[0]["accuracy"]]
        accuracy = [[n, t, *spread([r["accuracy"][i][2] for r in mine])]
                    for i, (n, t) in enumerate(tasks)]
        out[name] = {"runs": len(mine), "seeds": sorted(r["seed"] for r in mine),
                     "accuracy": accuracy,
                     "final_loss": spread([r["final_loss"] for r in mine])}
    return out


def run_all(jobs: list[dict], n_workers: int, budget_s: float, on_result) -> list[dict]:
    """Every job through ``one_run``, ``n_workers`` processes at a time (in this process
    for one); ``on_result(run)`` after each. Returns the jobs not finished in time."""
    start = time.monotonic()
    if n_workers <= 1:
        for i, job in enumerate(jobs):
            if time.monotonic() - start > budget_s:
                return jobs[i:]
            on_result(one_run(job))
        return []
    pending = {(j["variant"], j["seed"]): j for j in jobs}
    ctx = multiprocessing.get_context("spawn")  # CUDA cannot be forked
    with ctx.Pool(n_workers, maxtasksperchild=1) as pool:
        results = pool.imap_unordered(one_run, jobs)  # handed out in the jobs' order
        while pending:
            left = budget_s - (time.monotonic() - start)
            try:
                run = results.next(timeout=max(left, 0.001))
            except multiprocessing.TimeoutError:
                pool.terminate()  # past the budget: stop the runs still going
                break
            pending.pop((run["variant"], run["seed"]))
            on_result(run)
    return list(pending.values())


def print_table(report: dict) -> None:
    """Accuracy mean (min-max) per variant and eval task, then the final loss."""
    summary = report["summary"]
    if not summary:
        print("no finished runs")
        return
    tasks = [f"{n}:{t}" for n, t, *_ in next(iter(summary.values()))["accuracy"]]
    print(f"\n{'variant':24s} {'runs':>4s} {'loss':>11s}  " + " ".join(f"{t:>11s}" for t in tasks))
    for name, s in summary.items():
        loss = s["final_loss"]
        cells = " ".join(f"{a[2]:.2f} ±{a[5]:.2f}".rjust(11) for a in s["accuracy"])
        print(f"{name:24s} {s['runs']:4d} {loss[0]:6.3f}±{loss[3]:.2f}  {cells}")
    print("(N:T columns: accuracy mean ± sample std over seeds; min and max are in the JSON)")
    if report["unfinished"]:
        print(f"unfinished at --budget-s: {report['unfinished']}")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=1000, help="training steps, every run")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--n-layers", type=int, default=4)
    p.add_argument("--n-keys", type=int, default=16, help="keys (and values) to draw from")
    p.add_argument("--train", nargs="+", default=DEFAULT_TRAIN, help="N:T tasks to train on")
    p.add_argument("--eval", nargs="+", default=DEFAULT_EVAL, help="N:T tasks to score")
    p.add_argument("--n-eval", type=int, default=256, help="sequences per eval task")
    p.add_argument("--gdn-backend", default="auto", help="GDN recurrence backend")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--jobs", type=int, default=None,
                   help="runs at a time, one process each (default: one per CPU core, "
                   "at most the number of runs; 1 runs them in this process)")
    p.add_argument("--budget-s", type=float, default=500.0,
                   help="stop the runs still going after this many seconds")
    p.add_argument("--cpu-smoke", action="store_true",
                   help=f"every variant, 2 steps, tiny tasks, on the CPU: {SMOKE}")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.cpu_smoke:
        for name, value in SMOKE.items():
            setattr(args, name, value)
        args.jobs = args.jobs or 1
    for name in ("steps", "batch_size", "n_eval", "n_layers"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    parse_tasks(args.train + args.eval, args.n_keys)  # a malformed task fails here, not later
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    runs_wanted = len(args.variants) * len(args.seeds)
    n_workers = args.jobs or min(runs_wanted, os.cpu_count() or 1)
    settings = {k: getattr(args, k) for k in ("steps", "batch_size", "lr", "n_layers", "n_keys",
                                              "n_eval", "seeds", "variants", "device",
                                              "gdn_backend", "budget_s")}
    settings.update(train=args.train, eval=args.eval, jobs=n_workers)
    head = record.header(args.device, __file__, argv)
    hw = head["hardware"]
    gpu = hw["gpu"].split()[-1].lower() if "gpu" in hw else "cpu"
    out = Path(args.out) if args.out else record.out_path(
        f"mqar_seeds_{gpu}_{head['date'][:10]}.json")
    report = {"benchmark": "mqar_seeds", **head, "settings": {
                  **settings, "train_tasks": [[t.n_pairs, t.seq_len] for t in
                                              parse_tasks(args.train, args.n_keys)],
                  "eval_tasks": [[t.n_pairs, t.seq_len] for t in
                                 parse_tasks(args.eval, args.n_keys)]},
              "runs": [], "summary": {}, "unfinished": []}

    def save():
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1) + "\n")

    def on_result(run):
        report["runs"].append(run)
        report["summary"] = summarise(report["runs"])
        save()
        if "error" in run:
            print(f"FAILED {run['variant']} seed {run['seed']}: {run['error']}", flush=True)
            return
        accs = " ".join(f"{n}:{t}={a:.2f}" for n, t, a in run["accuracy"])
        print(f"{run['variant']:24s} seed {run['seed']}  loss {run['final_loss']:.3f}  "
              f"{run['steps_done']} steps in {run['seconds']:.0f} s  {accs}", flush=True)

    jobs = [{"variant": v, "seed": s, "settings": settings}
            for s in args.seeds for v in args.variants]  # seed-major: a cut keeps whole seeds
    print(f"{runs_wanted} runs, {n_workers} at a time, {args.steps} steps each", flush=True)
    save()
    unfinished = run_all(jobs, n_workers, args.budget_s, on_result)
    report["unfinished"] = [[j["variant"], j["seed"]] for j in unfinished]
    save()
    print_table(report)
    print(f"wrote {out}")
    return 0 if not any("error" in r for r in report["runs"]) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
