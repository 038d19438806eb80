"""Quantities the claims read from the committed GPU runs in ``book/results/``.

Read only through :func:`hymo_book.results.load_result`, from the same files and in the
same way as README.md's measured section (:mod:`hymo_book.site.readme`) and the kernel report,
so that a verdict here and a number there are one value. Nothing here measures.
"""

from __future__ import annotations

import functools
from math import comb

from hymo_book.results import load_result

# the runs the claims read (the README's measured section reads the same files)
RECURRENT_RUN = "gdn_recurrent_h200_2026-11-30.json"  # the recurrent kernel and the naive loop
STEP_RUN = "train_step_all_h200_2026-12-02g.json"  # the whole training step of hymo_750m
SHAPE = "B4_T4096_H40_float32"  # section 6's shape: B = 4, T = 4,096, H = 40, fp32


@functools.lru_cache(maxsize=1)
def recurrent_run() -> dict:
    return load_result(RECURRENT_RUN, need=("shapes", "environment"))


def recurrent_ms(backend: str, metric: str = "fwd_ms") -> float:
    """Measured milliseconds of ``backend`` at section 6's shape (``naive``: the loop;
    ``recurrent_triton``: the kernel through the dispatcher; ``recurrent_triton_kernel``:
    the kernel alone)."""
    return recurrent_run()["shapes"][SHAPE]["results"][backend][metric]


def speedup(backend: str = "recurrent_triton_kernel", metric: str = "fwd_ms") -> float:
    """The naive loop's time over ``backend``'s, measured in the same run."""
    return recurrent_ms("naive", metric) / recurrent_ms(backend, metric)


def speedup_range() -> tuple[float, float]:
    """Lowest and highest forward speed-up over the loop wherever the loop was timed,
    through the dispatcher and of the kernel alone (as README.md states them)."""
    found = [entry["results"]["naive"]["fwd_ms"] / entry["results"][k]["fwd_ms"]
             for entry in recurrent_run()["shapes"].values() if "naive" in entry["results"]
             for k in ("recurrent_triton", "recurrent_triton_kernel")]
    return min(found), max(found)


def copy_bandwidth() -> float:
    """Bytes per second a device copy moved (read + write) on the run's GPU."""
    return recurrent_run()["environment"]["copy_GBps"] * 1e9


def gpu() -> str:
    return recurrent_run()["environment"]["gpu"]


@functools.lru_cache(maxsize=1)
def step_run() -> dict:
    return load_result(STEP_RUN, need=("cases",))


def step_case(name: str) -> dict:
    """One measured case of the whole-step run (e.g. ``hybrid_fast_b4t4096``)."""
    return step_run()["cases"][name]


def tokens_per_s(name: str) -> float:
    return step_case(name)["tokens_per_s"]


def hybrid_over_all_mla(T: int = 4096) -> float:
    """Training tokens/s of the 3:1 hybrid over the all-MLA stack, both on the fast path."""
    B = {4096: 4, 16384: 1}[T]
    return tokens_per_s(f"hybrid_fast_b{B}t{T}") / tokens_per_s(f"mla_fast_b{B}t{T}")


MQAR_RUN = "mqar_seeds_h200_2026-12-01.json"  # the evidence for the MLA layout
MQAR_LONG_RUN = "mqar_seeds_3000_h100_2026-12-06.json"  # the same sweep, three times the steps


@functools.lru_cache(maxsize=2)
def mqar_run(name: str = MQAR_RUN) -> dict:
    return load_result(name, need=("runs",))


def mqar_learned(threshold: float = 0.9, run: str = MQAR_RUN, **fields) -> tuple[int, int]:
    """(runs that learned the recall task, runs) of the 4-layer stack that ``fields`` of the
    production config give (e.g. ``mla_position="last"``, ``mla_every=1``), in the sweep
    ``run``. A run learned the task when it scores at least ``threshold`` on every evaluated
    size."""
    from hymo_book.claims.values import cfg
    from hymo_mini.config import replace

    types = replace(cfg(), n_layers=4, **fields).layer_types
    code = "".join("A" if t == "mla" else "G" for t in types)
    runs = [r for r in mqar_run(run)["runs"] if r["layer_types"] == code]
    if not runs:
        raise KeyError(f"{run} has no run of the layout {code}")
    return sum(min(acc for _, _, acc in r["accuracy"]) >= threshold for r in runs), len(runs)


def fisher_two_sided(a: int, n_a: int, b: int, n_b: int) -> float:
    """Fisher's exact test of a successes in n_a runs against b in n_b: the probability, with
    the a + b successes dealt out at random, of a split no more likely than the one seen."""
    k, n = a + b, n_a + n_b

    def chance(x: int) -> float:  # x of the k successes in the first group
        return comb(n_a, x) * comb(n_b, k - x) / comb(n, k)

    seen = chance(a)
    return sum(chance(x) for x in range(max(0, k - n_b), min(k, n_a) + 1)
               if chance(x) <= seen * (1 + 1e-9))


def mqar_layout_note(run: str = MQAR_RUN) -> str:
    """The MQAR runs behind the layout's reading, in the sweep ``run``: counts, the exact
    test, and the controls."""
    (last, n_last), (first, n_first) = (mqar_learned(run=run, mla_position=p)
                                        for p in ("last", "first"))
    (mla, n_mla), (gdn, n_gdn) = (mqar_learned(run=run, mla_every=e) for e in (1, 0))
    return (f"the 3:1 hybrids with MLA last learned the task in {last} of {n_last} runs, those "
            f"with MLA first in {first} of {n_first} (Fisher's exact test, two-sided "
            f"p = {fisher_two_sided(last, n_last, first, n_first):.2f}); the all-MLA stack, "
            f"attention in every layer, learned it in {mla} of {n_mla} and the all-GDN stack in "
            f"{gdn} of {n_gdn}")
