"""benchmarks/sass_count.py: the SASS listing parsed into instructions, loops (a branch back)
and the two sides of a uniform branch (a REDUX, a predicated branch over one side, a jump
past the other); and one real compile for sm90 on this CPU machine, in a process of its
own (the suite's kernels are decorated for the interpreter)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import sass_count  # noqa: E402


def _line(addr, text):
    return f"        /*{addr:04x}*/                   {text} ;   /* 0x0000000000000000 */"


# a loop from 0x20 to 0xe0: a REDUX, a branch over one product (0x50, 0x60 and the jump at
# 0x70) to 0x80, where the four products of the other side end at 0xc0, the jump's target
LISTING = "\n".join([
    _line(0x00, "MOV R1, c[0x0][0x28]"),
    _line(0x10, "S2R R0, SR_TID.X"),
    _line(0x20, "REDUX UR4, R2"),
    _line(0x30, "ISETP.NE.AND P0, PT, R3, RZ, PT"),
    _line(0x40, "@!P0 BRA 0x80"),
    _line(0x50, "HMMA.1688.F32.TF32 R4, R8, R12, R4"),
    _line(0x60, "FMUL R5, R5, R6"),
    _line(0x70, "BRA 0xc0"),
    *(_line(a, "HMMA.1688.F32.TF32 R4, R8, R12, R4") for a in (0x80, 0x90, 0xa0, 0xb0)),
    _line(0xc0, "IADD3 R7, R7, 0x1, RZ"),
    _line(0xd0, "ISETP.GE.AND P1, PT, R7, R9, PT"),
    _line(0xe0, "@!P1 BRA 0x20"),
    _line(0xf0, "EXIT"),
])


def test_parse_loops_and_uniform_branches():
    ins = sass_count.parse(LISTING)
    assert len(ins) == 16 and ins[4] == (0x40, "BRA", "@!P0 BRA 0x80")
    assert ins[5][1] == "HMMA"  # opcode without its modifiers
    (loop,) = sass_count.loops(ins)
    assert (loop["first"], loop["last"], loop["instructions"]) == (0x20, 0xe0, 13)
    # the loop runs 13 instructions less the side it skips: the four products (one product)
    # or the product, the multiply and the jump (the levels)
    assert loop["paths"] == {"one product": 9, "levels": 10}
    assert loop["opcodes"]["HMMA"] == 5


def test_resources():
    res = "Function k:\n REG:168 STACK:24 SHARED:1024 LOCAL:0 CONSTANT[0]:544"
    assert sass_count.resources(res) == {"registers": 168, "stack_bytes": 24}


@pytest.mark.slow
def test_compiles_a_kernel_for_sm90_here(tmp_path):
    """The gla forward in one launch, compiled for sm90 without a GPU, with the pairs by
    one product and by the levels: registers, and a block walk that is shorter by one
    product."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = tmp_path / "sass.json"
    names = ["gla_chain_bf16_product", "gla_chain_bf16_levels"]
    subprocess.run([sys.executable, "benchmarks/sass_count.py", "--cases", *names, "--out",
                    str(out)], cwd=ROOT, env=env, check=True, capture_output=True, text=True,
                   timeout=300)
    product, levels = (json.loads(out.read_text())["cases"][n] for n in names)
    assert all(0 < c["registers"] <= 255 and c["instructions"] > 100 for c in (product, levels))
    assert product["loops"][-1]["instructions"] < levels["loops"][-1]["instructions"]


def test_unknown_case_is_refused():
    with pytest.raises(SystemExit):
        sass_count.main(["--cases", "no_such_case"])
