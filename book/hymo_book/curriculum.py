"""The book's reading order, basics first, and where each term is first taught.

Every chapter uses only what an earlier chapter (or itself) taught. ``TERMS`` maps a term a
reader must know to the chapter that teaches it and to the spellings that count as using it;
``tests/book/test_curriculum.py`` scans every chapter's prose and fails on a term met
before its chapter. The site's table of contents and the README's chapter list follow
``PARTS``.

``SYMBOLS`` is the book's notation, one meaning per symbol: the symbol as the notation page
(``book/notation.md``) prints it, the chapter that introduces it, its shape, its meaning, and
the spellings that count as using it inside a formula (None for index letters, which are
bound where they are used). The same test fails on a symbol met before its chapter, and
``notation_table`` writes the page's table, so the page and the test cannot disagree.
``RETIRED`` lists the spellings the book used before the page for a meaning the page gives
another symbol; the test fails on any left in a chapter's formulas.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["PARTS", "CHAPTERS", "TERMS", "SYMBOLS", "NOTATION_PAGE", "PAGES_AFTER", "chapter_index",
           "terms_used", "symbols_used", "notation_table", "formulas_of",
           "retired_used", "RETIRED"]

BOOK = Path(__file__).resolve().parents[1]

# (part caption, [chapter file stems in reading order])
PARTS = [
    ("Start", ["00_environment", "01_overview", "02_configuration"]),
    ("The building blocks", ["03_norms_and_swiglu", "04_rope", "05_attention", "06_mla",
                             "07_gdn", "08_chunked_form", "09_gpu_primer",
                             "10_triton_kernels", "11_moe", "12_mtp"]),
    ("The whole model", ["13_stack", "14_forward_trace", "15_parameters"]),
    ("Beyond the document", ["16_mhc", "17_training", "18_training_at_scale",
                             "19_hybrid_experiment"]),
    ("Reports", ["20_claims", "21_kernel_report"]),
]
CHAPTERS = [stem for _, stems in PARTS for stem in stems]

# term -> (the chapter that teaches it, regular expression of the spellings that use it).
# The overview (01) names the model's parts in one sentence each; the chapters that teach
# them in full come later, so the overview is where most terms are first met.
TERMS: dict[str, tuple[str, str]] = {
    "RMSNorm": ("03_norms_and_swiglu", r"\bRMS ?Norm\b"),
    "SwiGLU": ("03_norms_and_swiglu", r"\bSwiGLU\b"),
    "RoPE": ("01_overview", r"\bRoPE\b|\brotary\b"),
    "multi-query attention": ("05_attention", r"\bMQA\b|\bmulti-query\b"),
    "grouped-query attention": ("05_attention", r"\bGQA\b|\bgrouped-query\b"),
    "KV cache": ("01_overview", r"\bKV[- ]cache\b"),  # 01 says what it is; 05 teaches it
    "MLA": ("01_overview", r"\bMLA\b"),
    "latent": ("05_attention", r"\blatent\b"),  # 05 names it, 06 teaches it
    "GDN": ("01_overview", r"\bGDN\b|\bGated Delta Net\b"),
    "delta rule": ("07_gdn", r"\bdelta rule\b"),
    "chunkwise": ("08_chunked_form", r"\bchunkwise\b|\bchunked form\b"),
    "WY representation": ("08_chunked_form", r"\bWY\b"),
    "warp": ("09_gpu_primer", r"\bwarps?\b"),
    "streaming multiprocessor": ("09_gpu_primer", r"\bSMs?\b|\bstreaming multiprocessor"),
    "HBM": ("09_gpu_primer", r"\bHBM\b"),
    "TF32": ("09_gpu_primer", r"\bTF32\b"),
    "num_stages": ("09_gpu_primer", r"\bnum_stages\b"),
    "autograd.Function": ("09_gpu_primer", r"\bautograd\.Function\b"),
    "Triton": ("00_environment", r"\bTriton\b"),  # 00 says what it is; 09 teaches it
    "MoE": ("01_overview", r"\bMoE\b|\bmixture of experts\b"),
    "router": ("11_moe", r"\brouter\b"),
    "capacity factor": ("11_moe", r"\bcapacity factor\b"),
    "MTP": ("01_overview", r"\bMTP\b|\bmulti-token prediction\b"),
    "soft-cap": ("13_stack", r"\bsoft-?cap\b"),
    "tied embeddings": ("13_stack", r"\btied\b"),
    "mHC": ("16_mhc", r"\bmHC\b|\bhyper-connections?\b"),
    "Sinkhorn": ("16_mhc", r"\bSinkhorn\b"),
    "Muon": ("17_training", r"\bMuon\b"),
    "WSD schedule": ("17_training", r"\bWSD\b"),
    "FSDP": ("18_training_at_scale", r"\bFSDP2?\b"),
    "MQAR": ("19_hybrid_experiment", r"\bMQAR\b|\bassociative recall\b"),
    # the names of tools
    "fla": ("08_chunked_form", r"\bfla\b|\bflash-linear-attention\b"),
    "autocast": ("11_moe", r"\bautocast\b"),
    "AdamW": ("17_training", r"\bAdamW\b"),
    "bf16": ("01_overview", r"\bbf16\b|\bbfloat16\b"),  # 01 says what it is; 09 teaches it
    "fp16": ("03_norms_and_swiglu", r"\bfp16\b|\bfloat16\b"),
    "CUDA graph": ("17_training", r"\bCUDA graphs?\b"),
    "SDPA": ("17_training", r"\bSDPA\b"),
}

NOTATION_PAGE = BOOK / "notation.md"
# pages that are not chapters (no exercises, nothing to execute) -> the chapter they follow
PAGES_AFTER = {"notation": "01_overview"}

# a letter standing alone in a formula: not part of a longer name, not after a backslash
_ALONE = r"(?<![\\A-Za-z0-9_^])"
_END = r"(?![A-Za-z0-9])"


def _alone(letter: str) -> str:
    return _ALONE + letter + _END


# symbol (as printed) -> (chapter that introduces it, shape, meaning, pattern in formulas)
SYMBOLS: dict[str, tuple[str, str, str, str | None]] = {
    "T": ("01_overview", "number", "tokens in a sequence", _alone("T")),
    "x": ("03_norms_and_swiglu", "$(d)$", "a token's vector as a layer receives it", None),
    "d": ("03_norms_and_swiglu", "number", "the length of the vectors an operation acts on: a "
          "token's features (03, 13, 16), one attention head's queries and keys (05, 06)", None),
    r"\gamma": ("03_norms_and_swiglu", "$(d)$", "RMSNorm's learned weight", r"\\gamma"),
    "W_1, W^{UK}": ("03_norms_and_swiglu", "matrix", "a layer's weight, named by its index "
                    "(without one, $W$ is the chunked form's)", None),
    "E, k": ("02_configuration", "number", "the routed experts, and how many of them "
             "(the top $k$) a token uses", None),
    "R(p)": ("04_rope", "$(d, d)$", "RoPE's rotation at position $p$", r"R\("),
    "I": ("04_rope", "square", "the identity matrix", None),
    "b_t, c_t": ("04_rope", "$(S)$", "GDN's write key and read key of token $t$ (chapter 07 "
                 "teaches them)", None),
    "t, s": ("05_attention", "index", "positions: token $t$ reads, $s \\le t$ is read (or "
             "written)", None),
    "q_t, k_s, v_s": ("05_attention", "$(d)$, $(d)$, $(d_v)$", "attention's query, key and "
                      "value of one head; GDN's values are $v_t$ too, of size $D$", None),
    "d_v": ("05_attention", "number", "the size of one attention head's values", None),
    "Q, K, V": ("05_attention", "$(T, d)$, $(T, d)$, $(T, d_v)$", "queries, keys and values "
                "stacked over tokens; in the chunked form over a chunk's $C$ tokens, $Q$ "
                "stacking the read keys $c_t$ and $K$ the write keys $b_t$", None),
    "P": ("05_attention", "$(T, T)$ or $(C, C)$", "attention weights, row $t$ over the "
          "$s \\le t$ it reads: the softmax's (05), the recurrence's decayed ones (07), those "
          "inside one chunk (08)", _alone("P")),
    "O, o_t": ("05_attention", "$(T, D)$, $(D)$", "outputs, stacked and of one token", None),
    "H, G": ("05_attention", "number", "attention heads and key/value groups (with an index, "
             "$H$ is the state)", None),
    "h": ("06_mla", "index", "a head", None),
    r"\mathcal{U}": ("06_mla", "a distribution", "the uniform distribution", None),
    "S": ("07_gdn", "number", "GDN's key size, the rows of the state (`gdn_d_state`)",
          _alone("S")),
    "D": ("07_gdn", "number", "GDN's value size, the columns of the state (`gdn_headdim`); "
          "the mixer's skip weight is the parameter `D`, always in code font", _alone("D")),
    "H_t": ("07_gdn", "$(S, D)$", "the state after step $t$; $H'_t$ the decayed state before "
            "step $t$ writes; $H_0$ the state a chunk starts with, $H_C$ the one it hands on",
            r"H_\{?[t0C]|H'"),
    "g_t": ("07_gdn", "number", "the gate of one head at token $t$", _ALONE + r"g_\{?t"),
    "A": ("07_gdn", "$(S)$ per head", "the decay rates, negative: "
          r"$A = -\exp(A_\mathrm{log})$", _alone("A")),
    "n": ("07_gdn", "index", "a row of the state (a key dimension)", None),
    r"\beta_t": ("07_gdn", "number", "the delta rule's write strength", r"\\beta"),
    r"\alpha_t": ("08_chunked_form", "$(S)$", r"one step's decay, $e^{g_t A}$",
                  r"\\alpha_\{?t"),
    "C": ("08_chunked_form", "number", "the chunk length (`chunk_size`; `BT` in the kernels)",
          _alone("C")),
    "L_t": ("08_chunked_form", "number", r"the gate summed from the start of the sequence",
            _ALONE + r"L_"),
    "l_t": ("08_chunked_form", "number", "the gate summed from the start of the chunk (the "
            "library's `L`); $l_C$ over the whole chunk", _ALONE + r"l_"),
    "E_{ts}": ("08_chunked_form", "$(S)$; $(C, C, S)$ stacked", "the decay after step $s$ "
               r"through step $t$, $e^{(l_t - l_s) A}$ (without an index, $E$ counts experts)",
               _ALONE + r"E_"),
    r"\Gamma_t": ("08_chunked_form", "$(S)$", r"the decay from the chunk start through step "
                  r"$t$, $e^{l_t A}$", r"\\Gamma"),
    r"\tilde Q, \tilde K": ("08_chunked_form", "$(C, S)$", "read and write keys decayed from "
                            r"the chunk start: $Q \odot \Gamma$, $K \odot \Gamma$",
                            r"\\tilde\s*\{?\s*[QK]"),
    r"\hat K": ("08_chunked_form", "$(C, S)$", r"write keys decayed to the chunk end, "
                r"$K \odot e^{(l_C - l) A}$", r"\\hat\s*\{?\s*K"),
    "M": ("08_chunked_form", "$(C, C)$", "the delta rule's key pairs, strictly lower-"
          r"triangular: $M_{ts} = \beta_t \sum_n K_{tn} K_{sn} E_{tsn}$ for $s < t$",
          _alone("M")),
    "W": ("08_chunked_form", "$(C, S)$", r"the WY form's keys, "
          r"$(I + M)^{-1} \mathrm{diag}(\beta)\, \tilde K$", _ALONE + r"W(?![A-Za-z0-9_^])"),
    "U, u_t": ("08_chunked_form", "$(C, D)$, $(D)$", "the chunk's pseudo-values, "
               "$U = U_v - W H_0$", _alone("U")),
    "U_v": ("08_chunked_form", "$(C, D)$", "the pseudo-values from a zero state, "
            r"$(I + M)^{-1} \mathrm{diag}(\beta)\, V$", _ALONE + r"U_\{?v"),
    "N, F": ("09_gpu_primer", "number", "the bytes an operation moves and the floating-point "
             "operations it does", None),
    r"\mathcal{L}, dH": ("09_gpu_primer", "number; the shape of $H$", "the loss, and its "
                         "gradient with respect to a quantity, here $H$", None),
    "H_k, N_C": ("10_triton_kernels", "as without $k$; number", "the state chunk $k$ starts "
                 "with (a subscript $k$ numbers chunks), and the number of chunks", None),
    "Z_k": ("10_triton_kernels", "(`BT`, $S$)", "a block's decay factors on level $k$ of its "
            "pairs: $e^{(l_t - l_r) A}$ for a step $t$ of the level, $e^{(l_r - l_s) A}$ for a "
            "step $s$ (here $k$ numbers levels)", _ALONE + r"Z_"),
    r"\mathrm{bias}": ("11_moe", "$(E)$", "the router's balancing bias, one per routed expert; it "
                       "moves the choice, not the weights", None),
    "m, w_m": ("12_mtp", "index, number", "an MTP depth ($m \\ge 1$; depth 0 is the main head) "
               "and the weight of its loss", None),
    "c^{KV}_s": ("06_mla", "$(r)$, $r$ = `kv_lora_rank`", "MLA's cached latent of token $s$ "
                 "(the superscript keeps it apart from GDN's read key $c_t$)", None),
    "f": ("16_mhc", "function", "a sub-layer (attention, mixer or feed-forward) as a function "
          "of its input", None),
    "X": ("16_mhc", "$(n, d)$", "a token's $n$ residual streams (mHC)", None),
    r"\Pi_L": ("16_mhc", "$(n, n)$", "the streams' residual path through $L$ sub-layers, a "
                "product of comb maps", None),
    r"\mathrm{cap}": ("11_moe", "number", "an expert's capacity: the most assignments it "
                      "serves in a training batch", None),
}



# spellings the book used before the notation page, each for a symbol the page gives another
# meaning: formula pattern -> what the notation writes instead
RETIRED: dict[str, tuple[str, str]] = {  # as printed -> (pattern in formulas, write instead)
    "W_ts": (r"W_\{?ts", "P_ts (W is the WY form's keys; the weights inside a chunk are P)"),
    "M_ts or Y_ts = do_t v_s": (r"[MY]_\{ts\} = do",
                                "dP_ts, the gradient of P (M is the delta rule's key pairs)"),
    "U^v": (r"U\^\{?v", "U_v"),
    "l_end": (r"l_\\text\{end\}", "l_C, the gate summed over the whole chunk"),
    "M_g, B_g": (r"(?<![A-Za-z\\])[MB]_g", "another letter: M is the delta rule's key pairs"),
    "A_k": (r"(?<![A-Za-z\\])A_k", "another letter: A is the decay rates"),
    "T, the inverse by levels": (r"T \\leftarrow|T = I - M_0|T = \(I \+ M\)\^",
                                 "(I + M)⁻¹ by levels, not T (T is the sequence length)"),
    "B~, B^": (r"\\tilde\s*\{?\s*B|\\hat\s*\{?\s*B", "K~, K^ (a chunk's write keys stack as K)"),
    "B_T": (r"(?<![A-Za-z\\])B_T", "C, or `BT` in code font"),
}


def chapter_index(stem: str) -> int:
    """Position of a chapter in the reading order."""
    if stem not in CHAPTERS:
        raise KeyError(f"{stem!r} is not in the reading order (hymo_book.curriculum.PARTS)")
    return CHAPTERS.index(stem)


def _without_code(text: str) -> str:
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    return re.sub(r"`[^`]*`", " ", text)


def terms_used(text: str) -> set[str]:
    """The terms of ``TERMS`` that ``text`` uses (code spans and blocks left out)."""
    text = _without_code(text)
    return {term for term, (_, pattern) in TERMS.items() if re.search(pattern, text)}


def formulas_of(text: str) -> str:
    """The formulas of ``text`` (``$...$``, ``$$...$$``; code left out), joined by spaces."""
    return " ".join(a or b for a, b in re.findall(r"\$\$(.+?)\$\$|\$([^$]+)\$",
                                                  _without_code(text), flags=re.S))


def symbols_used(text: str) -> set[str]:
    """The symbols of ``SYMBOLS`` that the formulas of ``text`` use."""
    formulas = re.sub(r"\\(mathrm|mathcal|text|operatorname)\{[^}]*\}", " ", formulas_of(text))
    return {symbol for symbol, (*_, pattern) in SYMBOLS.items()
            if pattern and re.search(pattern, formulas)}


def retired_used(text: str) -> list[str]:
    """The spellings of ``RETIRED`` that the formulas of ``text`` still use, with the
    notation's word for each."""
    formulas = formulas_of(text)
    return [f"{old} -> {instead}" for old, (pattern, instead) in RETIRED.items()
            if re.search(pattern, formulas)]


def notation_table() -> str:
    """The notation page's table, in reading order of the introducing chapters."""
    rows = ["| symbol | shape | meaning | introduced in |", "|---|---|---|---|"]
    order = sorted(SYMBOLS, key=lambda sym: chapter_index(SYMBOLS[sym][0]))
    for symbol in order:
        stem, shape, meaning, _ = SYMBOLS[symbol]
        shown = ", ".join(f"${part}$" for part in symbol.split(", "))
        rows.append(f"| {shown} | {shape} | {meaning} | [{stem[:2]}]({stem}.ipynb) |")
    return "\n".join(rows) + "\n"
