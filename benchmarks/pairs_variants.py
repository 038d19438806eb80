"""Which source shapes of the one-product pairs (``CONFIGS["pairs"] = "auto"``) compile to
right answers on the GPU: a development tool for the miscompile found on an H200 with
Triton 3.6, where "auto" gives wrong outputs in some kernels and shapes and the levels never
do (``hymo_mini.ops.gla.chunk_blocks.check_pairs`` refuses "auto" there).

Each variant is a few text edits of the package's source: the edited package goes into a copy
of its own (``/tmp/pairs_variant_<name>``, with the tests beside it) and runs in a process of
its own, so that every variant compiles its own kernels and all of them compile at once.

    python3 benchmarks/pairs_variants.py                       # every variant
    python3 benchmarks/pairs_variants.py control WT --tests    # some, and the GPU pair tests

For each variant: the forward of the gla kernel (one launch and three, fp32 and bf16, at the
(S, D) that failed and one that did not) and of the delta kernel (passes and one launch),
against the fp64 loop; for the gla, also against the in-block term alone (Σ over pairs s ≤ t
of one 16-step block) and the rest, which says which of the two terms is wrong. With --tests,
the pair tests of both kernels' test files, in the copy, with "auto" allowed: each
"auto" test is marked xfail on a GPU, so XPASS is a right answer and XFAIL a wrong one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = "hymo_mini/ops/gla/chunk_blocks.py"
DELTA = "hymo_mini/ops/gated_delta/chunk_triton.py"

# ------------------------------------------------------------------------------- the edits


def _source(rel: str, first: str, last: str) -> str:
    """The package's source of file rel from the line that starts with first up to the
    one that starts with last (not included)."""
    text = (ROOT / rel).read_text()
    start = text.index(first)
    return text[start:text.index(last, start)]


# the branch of _pairs between the one product and the levels, as the source has it
BRANCH = _source(BLOCKS, "        if _same_in_warp(", "    return b_W, b_yH")
PRODUCT = "b_W = tl.dot(b_xE, tl.trans(b_yE), input_precision=PRECISION)  # [BT, BT]"
PRODUCT_T = "b_W = tl.trans(tl.dot(b_yE, tl.trans(b_xE), input_precision=PRECISION))"
# the product always (its exponents clamped, so nothing overflows), the levels over it
# where the decay is out of range: as an if without else, or as a loop of 0 or 1 trips
SELECT = """\
        ok = _same_in_warp(tl.max(tl.abs(b_l), axis=0) * amax2 <= SPAN)
        b_yE = b_y * tl.exp2(tl.minimum(-b_l[:, None] * b_A2[None, :], SPAN))
        b_W = tl.dot(b_xE, tl.trans(b_yE), input_precision=PRECISION)  # [BT, BT]
        b_W = tl.where(o_i[:, None] >= o_i[None, :], b_W, 0.0)
        b_yH = b_yE * tl.exp2(b_lend * b_A2)[None, :]  # [BT, BS]
        if not ok:
            b_W, b_yH = _pairs_by_levels(b_x, b_y, b_l, b_lend, b_A2, o_i, LOG2_BT,
                                         PRECISION)
"""
LOOP = SELECT.replace("        if not ok:\n", "        for _ in range(0, 1 - ok.to(tl.int32)):\n")
SWAPPED = """\
        if not _same_in_warp(tl.max(tl.abs(b_l), axis=0) * amax2 <= SPAN):
            b_W, b_yH = _pairs_by_levels(b_x, b_y, b_l, b_lend, b_A2, o_i, LOG2_BT,
                                         PRECISION)
        else:
            b_yE = b_y * tl.exp2(-b_l[:, None] * b_A2[None, :])  # [BT, BS] at most 2^SPAN
            b_W = tl.dot(b_xE, tl.trans(b_yE), input_precision=PRECISION)  # [BT, BT]
            b_W = tl.where(o_i[:, None] >= o_i[None, :], b_W, 0.0)
            b_yH = b_yE * tl.exp2(b_lend * b_A2)[None, :]  # [BT, BS]
"""
OUTPUT = """\
        b_o = tl.dot(b_cH, b_h, input_precision=PRECISION)  # [BT, BD]
        b_W, b_bH = _pairs(b_c, b_b, b_cH, b_l, b_lend, b_A2, amax2, o_i, LOG2_BT, PAIRS,
                           PRECISION)
        b_o += tl.dot(b_W, b_v, input_precision=PRECISION)  # [BT, BD]
"""
OUTPUT_SWAPPED = """\
        b_W, b_bH = _pairs(b_c, b_b, b_cH, b_l, b_lend, b_A2, amax2, o_i, LOG2_BT, PAIRS,
                           PRECISION)
        b_o = tl.dot(b_W, b_v, input_precision=PRECISION)  # [BT, BD]
        b_o += tl.dot(b_cH, b_h, input_precision=PRECISION)  # [BT, BD]
"""
# which of the delta rule's in-chunk kernels keep "auto" (the others take the levels)
WY = ('INVERSE=_config("inverse"), PAIRS=pairs, KEEP=keep,',
      'INVERSE=_config("inverse"), PAIRS="levels", KEEP=keep,')
OUT = ("_output_kernel[(NC, B * H)](b, c, g, A, hs, u, o, T, **in_chunk, PAIRS=pairs,",
       '_output_kernel[(NC, B * H)](b, c, g, A, hs, u, o, T, **in_chunk, PAIRS="levels",')
DU = ('_du_local_kernel[(NC, B * H)](b, c, g, A, do, du, T, **in_chunk, PAIRS=_config("pairs"),',
      '_du_local_kernel[(NC, B * H)](b, c, g, A, do, du, T, **in_chunk, PAIRS="levels",')
TRANSPOSED = (PRODUCT, PRODUCT_T)

VARIANTS = {  # name: (what it changes, [(old, new), ...])
    "control": ("the source as it is", []),
    "x_local": ("x ⊙ exp2(l A2) formed again inside the branch, not the caller's",
                [(PRODUCT, "b_W = tl.dot(b_x * tl.exp2(b_l[:, None] * b_A2[None, :]), "
                  "tl.trans(b_yE), input_precision=PRECISION)")]),
    "ieee": ("the product's dot in IEEE fp32 (no tensor cores)",
             [(PRODUCT, PRODUCT.replace("input_precision=PRECISION", 'input_precision="ieee"'))]),
    "WT": ("the product formed transposed, W = (Ỹ X̃ᵀ)ᵀ", [TRANSPOSED]),
    "no_branch": ("the product in every block, no levels (wrong where the decay is strong)",
                  [("        if _same_in_warp(tl.max(tl.abs(b_l), axis=0) * amax2 <= SPAN):",
                    "        if True:")]),
    "inter_only": ("the gla outputs without the in-block term",
                   [(OUTPUT, OUTPUT.replace("b_o += tl.dot(b_W", "b_o += 0.0 * tl.dot(b_W"))]),
    "intra_only": ("the gla outputs with the in-block term alone",
                   [(OUTPUT, OUTPUT.replace("b_o = tl.dot(b_cH", "b_o = 0.0 * tl.dot(b_cH"))]),
    "o_first": ("the gla's in-block term formed first, then the start state's",
                [(OUTPUT, OUTPUT_SWAPPED)]),
    "select": ("the product always, the levels in an if without else", [(BRANCH, SELECT)]),
    "select_WT": ("select, with the product transposed",
                  [(BRANCH, SELECT.replace(PRODUCT, PRODUCT_T))]),
    "swap": ("the branch's two sides swapped", [(BRANCH, SWAPPED)]),
    "swap_WT": ("swap, with the product transposed",
                [(BRANCH, SWAPPED.replace(PRODUCT, PRODUCT_T))]),
    "plain_WT": ("WT, the condition without redux.sync",
                 [TRANSPOSED, ("        if _same_in_warp(tl.max(", "        if (tl.max(")]),
    "loop": ("the product always, the levels in a loop of 0 or 1 trips", [(BRANCH, LOOP)]),
    "loop_WT": ("loop, with the product transposed", [(BRANCH, LOOP.replace(PRODUCT, PRODUCT_T))]),
    "WT_wy_auto": ("WT; of the delta passes, only the W, U kernel takes auto",
                   [TRANSPOSED, OUT, DU]),
    "WT_out_auto": ("WT; of the delta passes, only the output kernel", [TRANSPOSED, WY, DU]),
    "WT_du_auto": ("WT; of the delta passes, only the dU kernel (backward)",
                   [TRANSPOSED, WY, OUT]),
}

# variants of the compilation, not of the source: the control under other ptxas settings
# (Triton's knobs, read from the environment when Triton is imported)
ENVIRONMENTS = {
    "ptxas_O0": ("the control, ptxas without optimization", {"DISABLE_PTXAS_OPT": "1"}),
    "ptxas_O1": ("the control, ptxas --opt-level 1", {"PTXAS_OPTIONS": "--opt-level 1"}),
    "ptxas_O2": ("the control, ptxas --opt-level 2", {"PTXAS_OPTIONS": "--opt-level 2"}),
}
VARIANTS.update({name: (what, []) for name, (what, _) in ENVIRONMENTS.items()})


def edited_copy(name: str, root: Path = Path("/tmp")) -> Path:
    """The package and the tests with variant ``name``'s edits, under root; each edit must
    match exactly once in one of the two files it may touch."""
    dst = root / f"pairs_variant_{name}"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(ROOT / "hymo_mini", dst / "hymo_mini")
    shutil.copytree(ROOT / "tests", dst / "tests")
    shutil.copy(ROOT / "pyproject.toml", dst)
    for old, new in VARIANTS[name][1]:
        for rel in (BLOCKS, DELTA):
            text = (dst / rel).read_text()
            if text.count(old) == 1:
                (dst / rel).write_text(text.replace(old, new))
                break
        else:
            raise ValueError(f"variant {name!r}: an edit matches no line once: {old[:60]!r}")
    return dst


# ---------------------------------------------------------------------------- the checks
def in_block_term(v, b, c, g, A, BT=16):
    """The gla outputs' in-block term in fp64: each BT-step block's outputs from a zero
    state, by the loop (``gdn_oracle.reference``)."""
    import torch
    from gdn_oracle import reference

    v, b, c, g, A = (t.double() for t in (v, b, c, g, A))
    zero = torch.zeros(v.shape[0], v.shape[2], b.shape[3], v.shape[3], dtype=torch.float64,
                       device=v.device)
    return torch.cat([reference(v[:, j:j + BT], b[:, j:j + BT], c[:, j:j + BT],
                                g[:, j:j + BT], A, zero)[0] for j in range(0, v.shape[1], BT)],
                     dim=1)


def forward_checks(device: str = "cuda") -> list[str]:
    """The forward cases, one line each (run inside a variant's copy)."""
    import delta_oracle
    import gdn_oracle as go
    import torch

    import hymo_mini.ops.gated_delta.chunk_triton as gdt
    import hymo_mini.ops.gla.chunk_blocks as cb
    import hymo_mini.ops.gla.chunk_triton as gtc

    cb.AUTO_PAIRS_COMPILED = True
    lines = []
    gla_cases = [("chain", (2, 63, 2, 12, 20), torch.float32),
                 ("chain", (1, 40, 2, 32, 16), torch.float32),
                 ("chain", (1, 40, 2, 16, 32), torch.float32),
                 ("chain", (1, 63, 2, 32, 32), torch.float32),
                 ("chain", (2, 63, 2, 12, 20), torch.bfloat16),
                 ("scan", (1, 63, 2, 32, 32), torch.float32),
                 ("scan", (2, 63, 2, 12, 20), torch.float32)]
    for forward, (B, T, H, S, D), dtype in gla_cases:
        tag = f"gla {forward} {str(dtype)[6:]} S{S} D{D}:"
        try:
            gtc.CONFIGS.update(forward=forward, pairs="auto")
            torch.manual_seed(1)
            v, b, c, g, A_log, h0 = go.make_leaves(B, T, H, S, D, dtype, True, device)
            A = -torch.exp(A_log).detach()
            with torch.no_grad():
                o, final = gtc.chunk_gla_triton(v, b, c, g, A, h0, True)
                ref, final_ref = go.reference(*[t.double() for t in (v, b, c, g, A, h0)])
                intra = in_block_term(v, b, c, g, A)
            lines.append(f"{tag} o {go.rel_err(o, ref):.1e}, against the in-block term "
                         f"{go.rel_err(o, intra):.1e}, the rest {go.rel_err(o, ref - intra):.1e}"
                         f"; final state {go.rel_err(final, final_ref):.1e}")
        except Exception as e:  # a compile failure is a result too
            lines.append(f"{tag} {type(e).__name__}: {str(e).splitlines()[0][:160]}")
    delta_cases = [("passes", (1, 64, 2, 32, 32), torch.float32),
                   ("passes", (1, 37, 2, 12, 20), torch.bfloat16),
                   ("chain", (1, 64, 2, 32, 32), torch.bfloat16)]
    for forward, shape, dtype in delta_cases:
        tag = f"delta {forward} {str(dtype)[6:]} S{shape[3]} D{shape[4]}:"
        try:
            for configs in (gdt.CONFIGS, gdt.CONFIGS_16BIT):
                configs.update(forward=forward, pairs="auto")
            torch.manual_seed(1)
            leaves = delta_oracle.make_leaves(*shape, dtype, 1.0, "mid", True, device)
            with torch.no_grad():
                o, final = gdt.chunk_gated_delta_triton(*leaves, True)
                ref, final_ref = delta_oracle.reference(*[t.double() for t in leaves])
            lines.append(f"{tag} o {go.rel_err(o, ref):.1e}; final state "
                         f"{go.rel_err(final, final_ref):.1e}")
        except Exception as e:
            lines.append(f"{tag} {type(e).__name__}: {str(e).splitlines()[0][:160]}")
    return lines


def pair_tests(copy: Path) -> list[str]:
    """The pair tests of both kernels in the copy: the summary and each XFAIL/XPASS/FAIL."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider",
         "-rfxX", "tests/test_ops_gla_chunk_triton.py", "tests/test_gated_delta_chunk_triton.py",
         "-k", "pairs"], cwd=copy, env=dict(os.environ, PYTHONPATH=str(copy)),
        capture_output=True, text=True)
    keep = ("XPASS", "XFAIL", "FAILED", "ERROR")
    return [line.split(" - ")[0] for line in run.stdout.splitlines()
            if line.startswith(keep) or " passed" in line or " failed" in line]


def one(name: str, tests: bool) -> None:
    """Run inside the copy of variant name (the parent starts this)."""
    copy = Path("/tmp") / f"pairs_variant_{name}"
    sys.path[:0] = [str(copy), str(copy / "tests")]
    import hymo_mini

    assert Path(hymo_mini.__file__).is_relative_to(copy), hymo_mini.__file__
    lines = forward_checks() + (pair_tests(copy) if tests else [])
    print("\n".join(f"[{name}] {line}" for line in lines), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"variants (default: all of {list(VARIANTS)})")
    parser.add_argument("--tests", action="store_true", help="also the pair tests")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        one(args.one, args.tests)
        return 0
    unknown = sorted(set(args.names) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; the variants are {list(VARIANTS)}")
    start, procs = time.time(), []
    for name in args.names or VARIANTS:
        edited_copy(name)
        print(f"[{name}] {VARIANTS[name][0]}", flush=True)
        env = dict(os.environ, TRITON_CACHE_DIR=f"/tmp/pairs_variant_cache_{name}",
                   **ENVIRONMENTS.get(name, ("", {}))[1])
        cmd = [sys.executable, __file__, "--one", name] + (["--tests"] if args.tests else [])
        procs.append(subprocess.Popen(cmd, env=env, cwd="/tmp", stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    for proc in procs:
        out, _ = proc.communicate()
        lines = [line for line in out.splitlines() if line.startswith("[")]
        print("\n".join(lines or out.splitlines()[-5:]), flush=True)
    print(f"all variants done in {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
