"""What the compiler makes of the chunked GDN kernels for a Hopper GPU, without one: each
kernel compiled for sm90 on this machine, its registers and spill bytes, and the machine
instructions (SASS) of each of its loops (per path, where a loop branches on a condition
made warp-uniform by a REDUX; the kernels of 2026-12-03 did, before the choice between one
product and the levels moved to separate launches). The cases compile each kernel with
PAIRS = "levels" and with "product".

A static count: the instructions a path has, not how long they take. It says how much work a
change removes from a loop body; only a GPU run says what that is worth in time.

    python3 benchmarks/sass_count.py --out book/results/sass_sm90_<date>.json
    PYTHONPATH=/path/to/triton-3.6/site python3 benchmarks/sass_count.py ...  # another Triton

Triton compiles as its JIT would for 16-byte aligned tensors and the integer arguments named
in each case's ``div16`` (T and the program counts of the benchmark shapes are multiples of
16). Its own ``cuobjdump`` (shipped in the wheel) lists the registers and the SASS.

JSON: environment (date, command, git commit, triton), cases {name: {kernel, dtype, settings,
registers, stack_bytes, instructions, paths (the whole kernel, where it branches), loops:
[{first, last, instructions, opcodes, paths: {"one product": n, "levels": n} where the loop
branches}]}}.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LINE = re.compile(r"\s+/\*([0-9a-f]{4,6})\*/\s+(.*?)\s*;")
TARGET = re.compile(r"BRA\s+(?:`\()?0x([0-9a-f]+)")


# --------------------------------------------------------------------------------- SASS
def parse(sass: str) -> list[tuple[int, str, str]]:
    """(address, opcode, text) of every instruction in cuobjdump's listing."""
    out = []
    for line in sass.splitlines():
        m = LINE.match(line)
        if m:
            text = m.group(2).strip()
            bare = re.sub(r"^@!?U?P[T0-9]+\s+", "", text)  # drop the predicate
            out.append((int(m.group(1), 16), bare.split()[0].split(".")[0], text))
    return out


def _target(text: str) -> int | None:
    m = TARGET.search(text)
    return int(m.group(1), 16) if m else None


def sides(ins: list[tuple[int, str, str]], first: int, last: int) -> dict | None:
    """For the uniform branches between addresses first and last (each a REDUX, then a
    predicated branch forward over one side to an unconditional jump past the other), the
    instructions of that stretch when every branch takes its shorter side ("one product":
    in these kernels one tl.dot and an exponential against the levels' four of each) and
    when every branch takes its longer ("levels"); None where there is no such branch."""
    at = {a: i for i, (a, _, _) in enumerate(ins)}
    span = [x for x in ins if first <= x[0] <= last]
    found = []
    for i, (ra, rop, _) in enumerate(ins):
        if rop != "REDUX" or not first <= ra <= last:
            continue
        for ba, bop, btext in ins[i + 1:]:
            if bop == "BRA" and btext.startswith("@"):
                skip = _target(btext)  # past the side run when the branch is not taken
                before = ins[at[skip] - 1] if skip in at else None
                end = _target(before[2]) if before and before[1] == "BRA" else skip
                found.append(((skip - ba) // 16 - 1, (end - skip) // 16))
                break
    if not found:
        return None
    return {"one product": len(span) - sum(max(f) for f in found),
            "levels": len(span) - sum(min(f) for f in found)}


def loops(ins: list[tuple[int, str, str]]) -> list[dict]:
    """Every loop (a branch back to an earlier address) with its instruction count, its
    opcodes and, where it holds uniform branches, its ``sides``."""
    found = []
    for a, op, text in ins:
        t = _target(text) if op == "BRA" else None
        if t is None or t >= a:
            continue
        body = [x for x in ins if t <= x[0] <= a]
        entry = {"first": t, "last": a, "instructions": len(body),
                 "opcodes": dict(Counter(o for _, o, _ in body).most_common(12))}
        if (paths := sides(ins, t, a)) is not None:
            entry["paths"] = paths
        found.append(entry)
    return found


def resources(cuobjdump_res: str) -> dict:
    regs = re.search(r"REG:(\d+)", cuobjdump_res)
    stack = re.search(r"STACK:(\d+)", cuobjdump_res)
    return {"registers": int(regs.group(1)) if regs else None,
            "stack_bytes": int(stack.group(1)) if stack else None}


# ------------------------------------------------------------------------------ compile
def compile_sm90(fn, signature: dict, constexprs: dict, div16=(), **options):
    """The kernel compiled for sm90 as the JIT would (16-byte aligned pointers, the integer
    arguments in div16 multiples of 16): Triton's CompiledKernel."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = dict(signature, **{k: "constexpr" for k in constexprs})
    names = fn.arg_names
    attrs = {(names.index(k),): [["tt.divisibility", 16]] for k, kind in sig.items()
             if kind.startswith("*") or k in div16}
    src = ASTSource(fn=fn, signature=sig, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def summarise(kernel) -> dict:
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        Path(path).write_bytes(kernel.asm["cubin"])
        res = subprocess.run([str(tool), "-res-usage", path], capture_output=True, text=True,
                             check=True).stdout
        sass = subprocess.run([str(tool), "-sass", path], capture_output=True, text=True,
                              check=True).stdout
    ins = parse(sass)
    out = {**resources(res), "instructions": len(ins), "loops": loops(ins)}
    if ins and (paths := sides(ins, ins[0][0], ins[-1][0])) is not None:
        out["paths"] = paths  # the whole kernel: per program where it has no loop
    return out


# -------------------------------------------------------------------------------- cases
def _io(dtype: str) -> str:
    return "*bf16" if dtype == "bf16" else "*fp32"


PRECISION = {"bf16": "tf32", "fp32": "tf32x3"}  # fp32 inputs: fp32-grade products (default)


def gla_chain(dtype: str, pairs: str, reach: int = 1) -> tuple:
    """The gla forward in one launch at the benchmark's S = D = 32, H = 40."""
    from hymo_mini.ops.gla.chunk_chain import _chain_fwd_kernel
    io = _io(dtype)
    sig = dict(v=io, b=io, c=io, g=io, A="*fp32", h0="*fp32", hs="*fp32", ht="*fp32", o=io,
               hb="*fp32", dh="*fp32", ls="*fp32", flags="*i32", marks="*i32", T="i32",
               BH="i32")
    consts = dict(H=40, S=32, D=32, BC=128, BS=32, BD=32, BT=16, LOG2_BT=4, PIECE=64,
                  REACH=reach, USE_H0=False, STORE_HT=False, STORE_HB=False, PAIRS=pairs,
                  PRECISION=PRECISION[dtype])
    return _chain_fwd_kernel, sig, consts


def delta_chain(dtype: str, pairs: str, keep: bool, redo: str = "none") -> tuple:
    """The delta rule's forward in one launch, stretches of 8 chunks of 16 steps."""
    from hymo_mini.ops.gated_delta.chunk_chain import _chain_fwd_kernel
    io = _io(dtype)
    sig = dict(v=io, b=io, c=io, g=io, A="*fp32", beta=io, h0="*fp32", hs="*fp32", ht="*fp32",
               u="*fp32", w="*fp32", mk="*fp32", ti="*fp32", o=io, flags="*i32", T="i32",
               BH="i32", T0="i32")
    consts = dict(H=40, S=32, D=32, BS=32, BD=32, BT=16, LOG2_BT=4, NB=8, USE_H0=False,
                  STORE_HT=False, PRECISION=PRECISION[dtype], INVERSE="levels", PAIRS=pairs,
                  KEEP=keep, REDO=redo)
    return _chain_fwd_kernel, sig, consts


def delta_in_chunk(kernel: str, dtype: str, pairs: str) -> tuple:
    """The delta rule's in-chunk kernels of the forward in passes (fp32's default), a
    program per 16-step chunk."""
    from hymo_mini.ops.gated_delta import chunk_kernels
    io = _io(dtype)
    consts = dict(H=40, S=32, D=32, BS=32, BD=32, BT=16, LOG2_BT=4, PRECISION=PRECISION[dtype],
                  PAIRS=pairs)
    if kernel == "wy_fwd":
        sig = dict(v=io, b=io, g=io, A="*fp32", beta=io, uv="*fp32", w="*fp32", mk="*fp32",
                   ti="*fp32", marks="*i32", T="i32")
        return chunk_kernels._wy_fwd_kernel, sig, dict(consts, INVERSE="levels", KEEP=False)
    sig = dict(b=io, c=io, g=io, A="*fp32", hs="*fp32", u="*fp32", o=io, marks="*i32",
               T="i32")
    return chunk_kernels._output_kernel, sig, consts


def cases() -> dict:
    """name -> (what, build): every kernel variant the report compares."""
    out = {}
    for dtype in ("bf16", "fp32"):
        for pairs in ("levels", "product"):
            out[f"gla_chain_{dtype}_{pairs}"] = (
                dict(kernel="gla chunk_chain._chain_fwd_kernel", dtype=dtype, pairs=pairs),
                lambda d=dtype, p=pairs: gla_chain(d, p))
        out[f"gla_chain_{dtype}_product_reach4"] = (
            dict(kernel="gla chunk_chain._chain_fwd_kernel", dtype=dtype, pairs="product",
                 reach=4), lambda d=dtype: gla_chain(d, "product", 4))
        out[f"delta_chain_{dtype}_product_redo"] = (
            dict(kernel="gated_delta chunk_chain._chain_fwd_kernel", dtype=dtype,
                 pairs="product", keep=False, redo="all"),
            lambda d=dtype: delta_chain(d, "product", False, "all"))
        out[f"delta_chain_{dtype}_product_redo_inverse"] = (
            dict(kernel="gated_delta chunk_chain._chain_fwd_kernel", dtype=dtype,
                 pairs="product", keep=False, redo="inverse"),
            lambda d=dtype: delta_chain(d, "product", False, "inverse"))
        for pairs, keep in (("levels", True), ("levels", False), ("product", True),
                            ("product", False)):
            out[f"delta_chain_{dtype}_{pairs}_{'keep' if keep else 'lean'}"] = (
                dict(kernel="gated_delta chunk_chain._chain_fwd_kernel", dtype=dtype,
                     pairs=pairs, keep=keep),
                lambda d=dtype, p=pairs, k=keep: delta_chain(d, p, k))
    for kernel in ("wy_fwd", "output"):
        for pairs in ("levels", "product"):
            out[f"delta_{kernel}_fp32_{pairs}"] = (
                dict(kernel=f"gated_delta chunk_kernels._{kernel}_kernel", dtype="fp32",
                     pairs=pairs),
                lambda k=kernel, p=pairs: delta_in_chunk(k, "fp32", p))
    return out


def environment(argv) -> dict:
    from benchmarks import record

    return {**record.stamp(__file__, argv), **record.versions(),
            "device": "code for sm90 (Hopper), compiled on a CPU machine: no kernel ran"}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="*", default=None, help="names (default: all)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    table = cases()
    unknown = sorted(set(args.cases or []) - set(table))
    if unknown:
        parser.error(f"unknown case(s) {unknown}; the cases are {sorted(table)}")
    report = {"environment": environment(argv), "cases": {}}
    for name in args.cases or table:
        what, build = table[name]
        fn, sig, consts = build()
        result = summarise(compile_sm90(fn, sig, consts, div16=("T", "BH"), num_warps=1,
                                        num_stages=1))
        report["cases"][name] = {**what, **result}
        loops_ = ", ".join(f"{x['instructions']}" + (f" {x['paths']}" if "paths" in x else "")
                           for x in result["loops"])
        print(f"{name}: {result['registers']} registers, {result['stack_bytes']} B stack, "
              f"{result['instructions']} instructions {result.get('paths', '')}; "
              f"loops {loops_ or 'none'}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
