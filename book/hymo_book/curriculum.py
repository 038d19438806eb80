"""The book's reading order, basics first, and where each term is first taught.

Every chapter uses only what an earlier chapter (or itself) taught. ``TERMS`` maps a term a
reader must know to the chapter that teaches it and to the spellings that count as using it;
``tests/book/test_curriculum.py`` scans every chapter's prose and fails on a term met
before its chapter. The site's table of contents and the README's chapter list follow
``PARTS``.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["PARTS", "CHAPTERS", "TERMS", "chapter_index", "terms_used"]

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
}


def chapter_index(stem: str) -> int:
    """Position of a chapter in the reading order."""
    if stem not in CHAPTERS:
        raise KeyError(f"{stem!r} is not in the reading order (hymo_book.curriculum.PARTS)")
    return CHAPTERS.index(stem)


def terms_used(text: str) -> set[str]:
    """The terms of ``TERMS`` that ``text`` uses (code spans and blocks left out)."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"`[^`]*`", " ", text)
    return {term for term, (_, pattern) in TERMS.items() if re.search(pattern, text)}
