"""One set of labels, colours, markers, line styles and hatches for every figure of the book.

Each series the book draws (a GDN backend of ``benchmarks/gdn.py``, an MQAR model, an
optimizer, a recall rule) has a :class:`Style` here, and no figure picks its own. The
figures must read in grey-scale, so within each group every series has its own marker, its
own (marker, line style) pair and its own bar hatch, not only its own colour.

Backend names: the benchmark now writes "naive", "chunk_torch", "recurrent_triton",
"recurrent_triton_kernel", "chunk_triton" and "chunk_triton_kernel"; the runs committed
before the rename wrote "eager", "chunk", "triton", "triton_kernel", "triton_chunk" and
"triton_chunk_kernel". :func:`canonical_backend` maps an old name to its new one (the
results reader applies it on loading), and :func:`backend_style` accepts either.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Style", "BACKENDS", "OLD_BACKEND_NAMES", "MQAR_VARIANTS", "TEXT_LAYOUTS", "OPTIMIZERS",
           "RECALL_RULES", "DOCUMENT_BAR", "canonical_backend", "backend_style", "style",
           "running_mean"]


@dataclass(frozen=True)
class Style:
    label: str
    color: str
    marker: str
    linestyle: str
    hatch: str = ""

    def line(self) -> dict:
        """Keyword arguments for ``Axes.plot``."""
        return {"color": self.color, "marker": self.marker, "linestyle": self.linestyle}

    def bar(self) -> dict:
        """Keyword arguments for ``Axes.bar`` / ``barh`` (the hatch drawn in black)."""
        return {"color": self.color, "hatch": self.hatch or None, "edgecolor": "black",
                "linewidth": 0.4}


# the GDN backends of benchmarks/gdn.py and the fla peers, slowest first
BACKENDS: dict[str, Style] = {
    "naive": Style("naive loop", "#7f7f7f", "x", ":", "xx"),
    "chunk_torch": Style("hymo chunk (torch)", "#9467bd", "s", "-.", "\\\\"),
    "recurrent_triton": Style("hymo Triton recurrent", "#d62728", "o", "-", "//"),
    "recurrent_triton_kernel": Style("hymo Triton recurrent, no checks", "#e377c2", "P", "--",
                                     "/"),
    "chunk_triton": Style("hymo Triton chunk", "#ff7f0e", "^", "-", "||"),
    "chunk_triton_kernel": Style("hymo Triton chunk, no checks", "#ffbb78", "v", "--", "|"),
    "chunk_triton_unchecked": Style("hymo Triton chunk, the mixer's call", "#8c564b", "<", ":",
                                    "oo"),
    "fla_fused_recurrent": Style("fla fused_recurrent_gla", "#1f77b4", "D", "-", "++"),
    "fla_chunk": Style("fla chunk_gla", "#17becf", "*", "-.", "--"),
}
OLD_BACKEND_NAMES = {"eager": "naive", "chunk": "chunk_torch", "triton": "recurrent_triton",
                     "triton_kernel": "recurrent_triton_kernel", "triton_chunk": "chunk_triton",
                     "triton_chunk_kernel": "chunk_triton_kernel"}
# the document's predicted times, drawn beside the measured bars
DOCUMENT_BAR = Style("the document's launch arithmetic", "white", "", "-", "..")

# the models of the MQAR experiment (hymo_book.mqar.VARIANTS): the layout by marker and
# colour, the GDN rule by line style (documented gla dashed, delta rule solid)
MQAR_VARIANTS: dict[str, Style] = {
    "MLA": Style("MLA", "C3", "s", "-"),
    "GDN (gla)": Style("GDN (gla)", "C0", "o", "--"),
    "GDN (delta)": Style("GDN (delta)", "C0", "o", "-"),
    "3:1 MLA first (gla)": Style("3:1 MLA first (gla)", "C1", "v", "--"),
    "3:1 MLA first (delta)": Style("3:1 MLA first (delta)", "C1", "v", "-"),
    "3:1 MLA last (gla)": Style("3:1 MLA last (gla)", "C2", "^", "--"),
    "3:1 MLA last (delta)": Style("3:1 MLA last (delta)", "C2", "^", "-"),
}

# the layouts of the real-text experiment (benchmarks/hybrid_text.py), marked as their MQAR
# counterparts are; the Llama baseline in grey
TEXT_LAYOUTS: dict[str, Style] = {
    "hybrid_last": Style("3:1, MLA last (gla)", "C2", "^", "--"),
    "hybrid_first": Style("3:1, MLA first (gla)", "C1", "v", "--"),
    "gdn_gla": Style("all GDN (gla)", "C0", "o", "--"),
    "gdn_delta": Style("all GDN (delta)", "C0", "o", "-"),
    "mla": Style("all MLA", "C3", "s", "-"),
    "llama": Style("Llama (Hugging Face)", "C7", "D", ":"),
}

OPTIMIZERS: dict[str, Style] = {
    "adamw": Style("AdamW on everything", "C0", "o", "-"),
    "muon": Style("Muon (MLA + GDN matrices) + AdamW", "C3", "s", "--"),
    "normuon": Style("NorMuon (MLA + GDN matrices) + AdamW", "C2", "^", "-."),
}

# what one memory can recall (hymo_book.recall.state_recall)
RECALL_RULES: dict[str, Style] = {
    "gla": Style("GDN state, documented rule (sum of k vᵀ)", "C0", "o", "--"),
    "delta": Style("GDN state, delta rule (one pass, β = 1)", "C0", "s", "-"),
    "attention": Style("attention over the stored pairs (MLA)", "C3", "^", "-"),
}

_GROUPS = {"backend": BACKENDS, "mqar": MQAR_VARIANTS, "text": TEXT_LAYOUTS,
           "optimizer": OPTIMIZERS, "recall": RECALL_RULES}


def canonical_backend(name: str) -> str:
    """The backend's current name: old names of committed runs map to new ones."""
    return OLD_BACKEND_NAMES.get(name, name)


def style(group: str, name: str) -> Style:
    """The style of series ``name`` in ``group`` ("backend", "mqar", "text", "optimizer",
    "recall");
    a name without one is an error, so that no figure falls back to a look-alike."""
    if group not in _GROUPS:
        raise KeyError(f"group must be one of {sorted(_GROUPS)}, got {group!r}")
    styles = _GROUPS[group]
    key = canonical_backend(name) if group == "backend" else name
    if key not in styles:
        raise KeyError(f"no {group} style for {name!r}; known: {sorted(styles)} "
                       "(add one to hymo_book.style)")
    return styles[key]


def backend_style(name: str) -> Style:
    """The style of a GDN backend, by its new or its old name."""
    return style("backend", name)


def running_mean(values: list[float], window: int) -> list[float]:
    """The mean of each point and the ``window - 1`` before it (fewer at the start): how the
    book's figures draw a noisy curve, such as a loss per step or per position."""
    return [sum(values[max(i - window + 1, 0):i + 1]) / (i + 1 - max(i - window + 1, 0))
            for i in range(len(values))]
