"""The design document's checkable claims, each recomputed by hymo_mini: book chapter 17.

A :class:`Claim` records what the document states (section, a short paraphrase, the value
it gives) and a function that computes the same quantity from the package: the config
presets, :mod:`hymo_mini.params`, :mod:`hymo_mini.costs`, :mod:`hymo_mini.flops`,
:mod:`hymo_mini.rope`, the modules themselves. :func:`check_all` runs them all and returns a
:class:`ClaimsTable` (text and HTML), so the verdicts follow the code if the code changes.

Verdicts, decided by comparing the two values (never typed by hand):

* ``correct`` — equal, or within ``tol`` (relative, default 0.5%: the document rounds);
* ``approximately right`` — within ``approx`` (default 10%);
* ``wrong`` — further off, or a different structure;
* ``contradiction`` — the document states something else elsewhere (``versus``); the
  computed value is the reading hymo_mini chose, and the note says why.

Values are numbers in base units (parameters, FLOPs, bytes, seconds) or short strings for
structural claims; ``unit`` only sets how they are printed.
"""

from __future__ import annotations

import functools
import html
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Claim", "ClaimResult", "ClaimsTable", "CLAIMS", "check", "check_all", "verdict"]

VERDICTS = ("correct", "approximately right", "wrong", "contradiction")

_UNITS = {  # display unit -> size of one unit in base units
    "": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12,
    "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30,
    "s": 1, "ms": 1e-3, "µs": 1e-6, "%": 1e-2, "×": 1, "tok/s": 1, "days": 86_400,
}


@dataclass(frozen=True)
class Claim:
    id: str
    section: str
    statement: str  # the document's claim, paraphrased
    documented: Any  # number in base units, or a short string
    compute: Callable[[], Any]  # hymo_mini's value, from the package
    unit: str = ""
    note: str = ""
    tol: float = 0.005
    approx: float = 0.10
    versus: str | None = None  # what the document says elsewhere, if it contradicts itself

    def __post_init__(self) -> None:
        if self.unit not in _UNITS:
            raise ValueError(f"claim {self.id}: unknown unit {self.unit!r}; "
                             f"use one of {list(_UNITS)}")


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    computed: Any
    verdict: str

    @property
    def documented_text(self) -> str:
        return _format(self.claim.documented, self.claim.unit)

    @property
    def computed_text(self) -> str:
        return _format(self.computed, self.claim.unit)


def verdict(claim: Claim, computed: Any) -> str:
    """Compare the documented value with the computed one (see the module docstring)."""
    if claim.versus is not None:
        return "contradiction"
    doc = claim.documented
    if isinstance(doc, str) or isinstance(computed, str):
        return "correct" if str(doc) == str(computed) else "wrong"
    if computed == doc:
        return "correct"
    if computed == 0:
        return "wrong"
    rel = abs(doc - computed) / abs(computed)
    if rel <= claim.tol:
        return "correct"
    return "approximately right" if rel <= claim.approx else "wrong"


def _format(value: Any, unit: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    scaled = value / _UNITS[unit]
    if float(scaled).is_integer() and abs(scaled) >= 1000:
        text = f"{int(scaled):,}"
    elif abs(scaled) >= 1000:
        text = f"{scaled:,.1f}"
    else:
        text = f"{scaled:.4g}"
    return text + (f" {unit}" if unit and unit not in ("%", "×") else unit)


class ClaimsTable:
    """The checked claims; ``str`` gives a fixed-width table and its notes, and the
    notebook shows ``_repr_html_``. Deterministic: no timings, no addresses."""

    def __init__(self, results: list[ClaimResult]):
        self.results = list(results)

    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self):
        return iter(self.results)

    def __getitem__(self, claim_id: str) -> ClaimResult:
        for r in self.results:
            if r.claim.id == claim_id:
                return r
        raise KeyError(f"no claim {claim_id!r}")

    def counts(self) -> dict[str, int]:
        return {v: sum(r.verdict == v for r in self.results) for v in VERDICTS}

    def filter(self, verdict: str | None = None, section: str | None = None) -> ClaimsTable:
        """Claims with this verdict and/or whose section starts with ``section``."""
        if verdict is not None and verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
        return ClaimsTable([r for r in self.results
                            if (verdict is None or r.verdict == verdict)
                            and (section is None or r.claim.section.startswith(section))])

    def select(self, ids) -> ClaimsTable:
        """The claims with these ids, in the order given."""
        return ClaimsTable([self[i] for i in ids])

    _header = ("id", "§", "the document says", "document", "hymo_mini", "verdict")

    def _cells(self) -> list[tuple[str, ...]]:
        return [(r.claim.id, r.claim.section, r.claim.statement, r.documented_text,
                 r.computed_text, r.verdict) for r in self.results]

    def __str__(self) -> str:
        cells = [self._header, *self._cells()]
        widths = [max(len(c[i]) for c in cells) for i in range(6)]
        lines = ["  ".join(c[i].rjust(widths[i]) if i in (3, 4) else c[i].ljust(widths[i])
                           for i in range(6)).rstrip() for c in cells]
        lines.insert(1, "-" * max(len(line) for line in lines))
        summary = ", ".join(f"{n} {v}" for v, n in self.counts().items())
        notes = [f"{r.claim.id}: {r.claim.note}" for r in self.results if r.claim.note]
        return "\n".join([*lines, "", f"{len(self)} claims: {summary}", "", "Notes", *notes])

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        colours = {"correct": "#1b9e77", "approximately right": "#7570b3", "wrong": "#c62828",
                   "contradiction": "#d95f02"}
        head = "".join(f"<th>{html.escape(h)}</th>" for h in (*self._header, "note"))
        rows = []
        for r, cells in zip(self.results, self._cells(), strict=True):
            tds = [f"<td>{html.escape(c)}</td>" for c in cells[:5]]
            tds.append(f"<td style='color:{colours[r.verdict]};font-weight:bold'>"
                       f"{html.escape(r.verdict)}</td>")
            note = r.claim.note + (f" (elsewhere: {r.claim.versus})" if r.claim.versus else "")
            tds.append(f"<td style='text-align:left'>{html.escape(note)}</td>")
            rows.append("<tr>" + "".join(tds) + "</tr>")
        summary = ", ".join(f"{n} {v}" for v, n in self.counts().items())
        return (f"<table><caption>{len(self)} claims: {html.escape(summary)}</caption>"
                f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def check(claim: Claim) -> ClaimResult:
    computed = claim.compute()
    return ClaimResult(claim, computed, verdict(claim, computed))


def check_all(claims: list[Claim] | None = None) -> ClaimsTable:
    """Compute every claim (a few seconds on a CPU: nothing big is allocated)."""
    return ClaimsTable([check(c) for c in (CLAIMS if claims is None else claims)])


# ---- what the claims are computed from -------------------------------------------------
@functools.lru_cache(maxsize=1)
def _prod():
    from hymo_mini.config import load_config

    return load_config("hymo_750m")


def _m():
    return _prod().model


@functools.lru_cache(maxsize=1)
def _params():
    from hymo_mini.params import count_params

    return count_params(_m())  # walks HyMo built on the meta device


def _p(component: str, kind: str = "stored") -> int:
    return getattr(_params()[component], kind)


def _flops(T: int = 4096, **kwargs) -> dict[str, float]:
    from hymo_mini.flops import forward_flops

    return forward_flops(_m(), T, **kwargs)


def _costs():
    from hymo_mini import costs

    return costs


@functools.lru_cache(maxsize=1)
def _gdn_block():
    """One production-width GDN block at init (8M parameters) and a probe input."""
    from hymo_mini.blocks import GDNBlock

    torch.manual_seed(0)
    block = GDNBlock(_m(), layer_idx=1)
    x = torch.randn(1, 32, _m().dim)
    return block, x


def _decay(head: int) -> float:
    block, _ = _gdn_block()
    a = -torch.exp(block.mixer.A_log.detach())  # exp(log 11) ≠ 11 in fp32
    return round(float(a[head, 0]), 4)


def _gate_at_init() -> float:
    block, x = _gdn_block()
    with torch.no_grad():
        g = block.mixer.gdn_inputs(block.norm(x) if block.norm is not None else x)[3]
    return float(g.mean())


def _rotated_gdn_vectors() -> str:
    """Which of v, b, c change when every position is shifted: those are rotated."""
    block, x = _gdn_block()
    with torch.no_grad():
        at0, at10 = block.mixer.gdn_inputs(x, 0), block.mixer.gdn_inputs(x, 10)
    names = [n for n, a, b in zip("vbc", at0[:3], at10[:3], strict=True) if not torch.equal(a, b)]
    return ", ".join(names) or "none"


def _decay_gate_source() -> str:
    """Perturb dt_proj and g_proj in turn and see which one moves the decay gate g."""
    from hymo_mini.config import load_config
    from hymo_mini.gdn import GatedDeltaNet

    torch.manual_seed(0)
    block = GatedDeltaNet(load_config("hymo_mini").model)
    x = torch.randn(1, 8, block.config.dim)
    moved = []
    for name in ("dt_proj", "g_proj"):
        with torch.no_grad():
            before = block.gdn_inputs(x)[3]
            getattr(block, name).weight.add_(0.5)
            if not torch.allclose(block.gdn_inputs(x)[3], before):
                moved.append(name)
            getattr(block, name).weight.sub_(0.5)
    return " and ".join(moved) or "neither"


@functools.lru_cache(maxsize=1)
def _embedding():
    """HyMo's embedding at init, for dim 896 (a small vocabulary and stack keep it cheap)."""
    from hymo_mini.config import load_config, replace
    from hymo_mini.model import HyMo

    torch.manual_seed(0)
    return HyMo(replace(load_config("hymo_mini").model, dim=_m().dim)).embed.weight.detach()


def _softcap_grad(x: float) -> float:
    from hymo_mini.model import softcap

    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    softcap(t, _m().logit_softcap).backward()
    return float(t.grad)


def _theta(k: int) -> float:
    from hymo_mini.rope import rope_frequencies

    return float(rope_frequencies(_m().qk_rope_head_dim, _m().rope_theta)[k])


def _slowest_pair() -> str:
    from hymo_mini.rope import rope_frequencies

    thetas = rope_frequencies(_m().qk_rope_head_dim, _m().rope_theta)
    return f"k={int(thetas.argmin())}"


def _bf16_tie() -> str:
    a, b = torch.tensor([0.1234567, 0.1234570])
    same16, same32 = bool(a.bfloat16() == b.bfloat16()), bool(a == b)
    return f"bf16 {'equal' if same16 else 'distinct'}, fp32 {'equal' if same32 else 'distinct'}"


def _router_dtype() -> str:
    from hymo_mini.config import load_config
    from hymo_mini.moe import DeepSeekMoE

    moe = DeepSeekMoE(load_config("hymo_mini").model)
    with torch.no_grad():
        routing = moe.route(torch.randn(4, moe.dim).bfloat16())
    return f"{str(routing.probs.dtype).removeprefix('torch.')} probs and top-k for bf16 input"


def _mtp_predictions() -> str:
    from hymo_mini.mtp import mtp_targets

    T = _prod().training.seq_len
    tokens = torch.zeros(1, T, dtype=torch.long)
    counts = [mtp_targets(tokens, d)[0] for d in range(1, _m().mtp_depth + 1)]
    return ", ".join(f"T-{T - n}" for n in counts)


def _nope_positions() -> str:
    from hymo_mini.config import replace

    return _layout(replace(_m(), nope_hybrid_gdn=True).nope_gdn_positions)


def _batch_tokens() -> int:
    t = _prod().training
    return t.batch_size * t.seq_len


def _active() -> int:
    return _params().active


def _stored() -> int:
    return _params().stored


def _moe_layer(kind: str) -> int:
    from hymo_mini.moe import moe_param_counts

    stored, active = moe_param_counts(_m())
    return active if kind == "active" else stored


def _train_flops_per_token() -> float:
    return 3 * _flops()["total"]  # forward + backward ≈ 3 × forward


def _launches_per_layer() -> int:
    # one update and one read per step; the loop is vectorised over batch and heads
    return 2 * _prod().training.seq_len


_M = 10e-6  # the document's 10 µs per kernel launch


# ---- the claims ------------------------------------------------------------------------
CLAIMS: list[Claim] = [
    # section 1
    Claim("attn-flops", "1.1.1", "full attention at T=4096: 4096² × 896 ≈ 15 GFLOPs per layer",
          15e9, lambda: _costs().mha_cost(_m(), 4096, causal=False).mixing_flops, "G",
          "q·kᵀ and p·v over 16 heads of 128: 2·T²·16·(128+128) = 137 GFLOPs (68.7 with a "
          "causal mask); 896 is the model width, not the attention width (2,048)"),
    Claim("kv-16mb", "1.1.1", "KV memory: 4096 × 16 × 128 × 2 bytes ≈ 16 MB per layer",
          16 * 2 ** 20, lambda: _costs().mha_cost(_m(), 4096).cache_bytes, "MiB",
          "counts K only; K and V take 32 MiB, as section 4.1.1 itself computes"),
    Claim("kv-8-layers", "1.1.1", "8 attention layers: 128 MB of KV cache at T=4096",
          128 * 2 ** 20, lambda: 8 * _costs().mha_cost(_m(), 4096).cache_bytes, "MiB",
          "full K and V of 16 heads; HyMo's MLA latent cache is 10 MiB (chapter 13)"),
    Claim("gdn-400x", "1.1.2", "GDN (S=D=32) is ~400× faster than full attention",
          400, lambda: (_costs().mha_cost(_m(), 4096).mixing_flops
                        / _costs().gdn_cost(_m(), 4096).mixing_flops), "×",
          "token-mixing FLOPs at T=4096, causal attention vs the recurrence: 82× (164× without "
          "the causal mask); no reading of the terms gives 400"),
    Claim("hybrid-40pct", "1.1.3", "the 3:1 hybrid costs ~40% of full attention's compute",
          0.40, lambda: (_costs().stack_cost(_m(), 4096).flops
                         / _costs().stack_cost(_m(), 4096, gdn_per_mla=0).flops), "%",
          "forward FLOPs of 24 GDN + 8 MLA vs 32 MLA layers at T=4096: a GDN layer's seven "
          "projections cost about as much as MLA at this length; the share falls towards "
          "25% (the MLA layers' share) only as T grows"),
    Claim("mla-positions", "1.2.1", "MLA layers at {0, 4, ..., 28}", "0, 4, ..., 28",
          lambda: _layout(_m().mla_positions), "",
          "reading: the text's layout, stated five times with a rationale and a per-layer RoPE "
          "table; config.mla_offset = 3 gives the figure's",
          versus="the closing figure draws MLA at L03, L07, ..., L31"),
    Claim("gdn-params-2.5M", "1.3.1", "a GDN layer has ~2.5M parameters", 2.5e6,
          lambda: _p("gdn") / len(_m().gdn_positions), "M",
          "reading: the modules (section 5's block), whose tensors 12.2.2 lists correctly",
          versus="12.2.2: ~8.07M per GDN block"),
    Claim("mla-params-5.8M", "1.3.1", "an MLA layer has ~5.8M parameters", 5.8e6,
          lambda: _p("mla") / len(_m().mla_positions), "M",
          "reading: the attention of section 4 (wq_a, wq_b, wkv_a, wkv_b, wo, norms, scales); "
          "12.2.3's list describes matrices it does not have",
          versus="12.2.3 list: ~1.23M; 12.3 table: 22.2M / 8 = 2.78M"),
    Claim("tied-saves", "1.5", "weight tying saves 57.6M parameters", 57.6e6,
          lambda: _m().vocab_size * _m().dim, "M"),
    # section 2
    Claim("gdn-heads", "2.5.2", "gdn_n_heads = 1280 / 32 = 40", 40, lambda: _m().gdn_n_heads,
          approx=0.0),
    Claim("capacity", "2.5.3", "capacity = 1.5 × (4 × 4096 × 2) / 16 = 768 per expert", 768,
          lambda: _m().moe_capacity(_batch_tokens()), "",
          "4 × 4096 × 2 / 16 = 2,048, × 1.5 = 3,072; 768 is the capacity for 4,096 tokens",
          approx=0.0),
    # section 3
    Claim("embed-std", "3.2", "embedding init std = 1/√896 ≈ 0.033", 0.033,
          lambda: float(_embedding().std()), "",
          "measured on HyMo's embedding at dim 896 (embed_init='scaled')", tol=0.02),
    Claim("embed-unit-var", "3.2", "so the embedding vectors have unit variance", 1.0,
          lambda: float(_embedding().var()), "",
          "each coordinate has variance 1/896; it is the vector's squared norm that is ~1. "
          "(Section 10 then says no init pass runs: nn.Embedding's default N(0, 1).)"),
    Claim("act-940mb", "3.4", "activations 32 × 4 × 4096 × 896 × 2 bytes ≈ 940 MB", 940e6,
          lambda: _m().n_layers * _batch_tokens() * _m().dim * 2, "MB",
          "layer inputs only (bf16); everything inside a layer comes on top"),
    Claim("softcap-5", "3.5", "soft-cap 15: gradient ~0.91 for logits within ±5", 0.91,
          lambda: _softcap_grad(5.0), "", "1 − tanh²(1/3) at the edge of the range"),
    Claim("softcap-10", "3.5", "soft-cap 15: gradient ~0.64 for logits within ±10", 0.64,
          lambda: _softcap_grad(10.0), "", "1 − tanh²(2/3) at the edge of the range"),
    Claim("softcap-15", "3.5", "soft-cap 15: gradient → 0 beyond ±15", 0.0,
          lambda: _softcap_grad(15.0), "",
          "at 15 the gradient is still 0.42 (1 − tanh²(1)); it is 0.07 at 30"),
    # section 4
    Claim("kv-32mb", "4.1.1", "KV cache 2 × 16 × 128 × 4096 × 2 bytes = 33,554,432 B", 33_554_432,
          lambda: _costs().mha_cost(_m(), 4096).cache_bytes),
    Claim("pairs-2G", "4.1.2", "T=4096: ~2 billion query-key pairs (16 heads × 8 layers)", 2e9,
          lambda: _costs().attention_pairs(4096, causal=False) * _m().n_heads * 8, "B",
          "4096² × 16 × 8 = 2.15 billion; half of them with a causal mask", approx=0.1),
    Claim("kv-proj-mha", "4.2.1", "standard K, V projections: 2 × d × (16 × 128) = 1.84M",
          1.84e6, lambda: 2 * _m().dim * _m().n_heads * _m().head_dim, "M",
          "1.84M is one of the two matrices"),
    Claim("kv-proj-mla", "4.2.1", "MLA KV projections: d × 160 + 128 × 896 = 257K", 257e3,
          lambda: _m().dim * (_m().kv_lora_rank + _m().qk_rope_head_dim)
          + _m().kv_lora_rank * _m().n_kv_groups * (_m().qk_nope_head_dim + _m().v_head_dim),
          "K", "143,360 + 114,688 = 258,048"),
    Claim("mla-cache-256", "4.2.1", "MLA caches 128 + 4 × 32 = 256 values per token", 256,
          lambda: _costs().mla_cost(_m(), 1, cache="latent", cache_dtype_bytes=1).cache_bytes,
          "", "k_pe is one 32-channel key shared by the 4 groups: 128 + 32 = 160 values",
          approx=0.0),
    Claim("mla-16x", "4.2.1", "16× KV cache compression against MHA", 16,
          lambda: (_costs().mha_cost(_m(), 1).cache_bytes
                   / _costs().mla_cost(_m(), 1, cache="latent").cache_bytes), "×",
          "4,096 / 160 values per token"),
    Claim("q-lowrank", "4.3.1", "low-rank queries: 659K vs 1.84M parameters (2.8× savings)", 2.8,
          lambda: (_m().dim * _m().n_heads * _m().head_dim)
          / (_m().dim * _m().q_lora_rank + _m().q_lora_rank * _m().n_heads * _m().head_dim),
          "×", tol=0.01),
    Claim("kv-rank-32mb", "4.5.1", "kv_lora_rank = 128: KV cache 32 MB per layer", 32e6,
          lambda: _costs().mla_cost(_m(), 4096, cache="latent").cache_bytes, "MB",
          "the latent cache of 4,096 tokens in bf16; 32 MB is full MHA's"),
    Claim("q-rank-pct", "4.5.2", "q_lora_rank 224 = 22.5% of the 2,048-wide query", 0.225,
          lambda: _m().q_lora_rank / (_m().n_heads * _m().head_dim), "%",
          "224 / 2,048 = 10.9%; 22.5% of 2,048 would be 461"),
    # section 5
    Claim("decay-head0", "5.3.2", "head 0 decays by exp(−1) = 0.37 per step (~3 steps)", 0.37,
          lambda: math.exp(_gate_at_init() * _decay(0)), "",
          "the decay is exp(g·A) and at init g = sigmoid(dt_proj(u) + 0) ≈ 0.5: head 0 keeps "
          "0.61 per step and falls below 5% after 6 steps, not 3"),
    Claim("decay-head10", "5.3.2", "head 10: A = −10", -10.0, lambda: _decay(10), "",
          "A_log = log(1..40), so head h has A = −(h + 1)", approx=0.0),
    Claim("decay-head39", "5.3.2", "head 39: A = −39", -39.0, lambda: _decay(39), "",
          approx=0.0),
    Claim("A_log-shape", "5.2.1", "A ∈ R^S; A_log initialised as log(arange(1, H+1))",
          "(32,) / (40,)", lambda: str(tuple(_gdn_block()[0].mixer.A_log.shape)), "",
          "reading: per head and state dimension, as the parameter count says (a per-head "
          "vector is its special case); every column starts at log(h + 1)",
          versus="12.2.2: A_log is 40 × 32"),
    Claim("decay-gate", "5.2.1", "the decay gate g_t = sigmoid(dt_proj(...))", "dt_proj",
          _decay_gate_source, "",
          "reading: g = sigmoid(dt_proj(u) + dt_bias), found by perturbing each projection; "
          "g_proj's mean is the output gate, so every projection gets a gradient (with g_proj "
          "for both, dt_proj and dt_bias would be dead)",
          versus="5.4.3: g = mean over D of sigmoid(g_proj(v))"),
    Claim("state-500x", "5.3.3", "GDN state 1,024 per head: ~500× smaller than 4096 × 128",
          500, lambda: 4096 * _m().head_dim / (_m().gdn_d_state * _m().gdn_headdim), "×",
          "512×", tol=0.03),
    Claim("d-inner-ratio", "5.4.1", "d_inner / d_model ≈ 1.43 (896 × 1.43 ≈ 1280)", 1.43,
          lambda: _m().gdn_d_inner / _m().dim, ""),
    # section 6
    Claim("launch-arith", "6.1", "1,310,720 launches × 10 µs = 13.1 s", 13.1,
          lambda: _launches_per_layer() * _m().gdn_n_heads * _prod().training.batch_size * _M,
          "s", "the multiplication itself"),
    Claim("launch-count", "6.1", "8,192 kernels × 40 heads × 4 batches = 1,310,720 launches",
          1_310_720, _launches_per_layer, "",
          "the loop is vectorised over batch and heads: 2 launches per step, T = 4096 steps"),
    Claim("launch-time", "6.1", "the PyTorch loop: 13.1 s of launch overhead per layer", 13.1,
          lambda: _launches_per_layer() * _M, "s",
          "8,192 launches × 10 µs = 82 ms (section 6's opening says 655,360 launches, 6.5 s: one "
          "launch per step, then two)"),
    Claim("triton-launch", "6.1", "the Triton kernel: 160 launches × 10 µs = 1.6 ms", 1.6e-3,
          lambda: 1 * _M, "ms", "one launch of a (B, H) = (4, 40) grid"),
    Claim("speedup-8000", "6.1", "~8,000× faster (launch overhead)", 8000,
          lambda: _launches_per_layer() * _M / _M, "×",
          "the ratio survives both counting errors: 8,192 launches vs 1"),
    Claim("state-4kb", "6.3", "state 32 × 32 × 4 bytes = 4 KB per program", 4096,
          lambda: _m().gdn_d_state * _m().gdn_headdim * 4, ""),
    Claim("trajectory", "6.5", "saved states 4 × 4096 × 40 × 32 × 32 × 4 B = 2.6 GB per layer",
          2.6e9, lambda: (_batch_tokens() * _m().gdn_n_heads * _m().gdn_d_state
                          * _m().gdn_headdim * 4), "GB",
          "2.68 GB (2.50 GiB) per GDN layer, 64 GB for all 24"),
    Claim("hbm-writes", "6.8", "HBM writes T×D + T×S×D: 1.5× more than T×D", 1.5,
          lambda: 1 + _m().gdn_d_state, "×", "(T·D + T·S·D) / (T·D) = 1 + S"),
    # section 7
    Claim("theta-1", "7.2.3", "θ_1 = 1/10000^0.5 = 0.01", 0.01, lambda: _theta(1), "",
          "θ_k = base^(−2k/32): the listed values use an exponent 2k/4"),
    Claim("theta-2", "7.2.3", "θ_2 = 1/10000^1.0 = 0.0001", 1e-4, lambda: _theta(2), ""),
    Claim("theta-slowest", "7.2.3", "θ_0 = 1 is the slowest rotation", "k=0", _slowest_pair, "",
          "θ_0 = 1 rad/token is the fastest pair; k=15 turns slowest"),
    Claim("rope-gdn", "7.6", "GDN rotates its value v (all 32 dims)", "v",
          _rotated_gdn_vectors, "",
          "reading: b and c (found by shifting positions); only vectors that meet in a dot "
          "product give relative positions, rotating v writes absolute angles into the output "
          "(chapter 07)",
          versus="appendix: RoPE on the GDN keys b and c"),
    Claim("nope-positions", "3.3", "NoPE GDN layers {3, 7, ..., 27}", "3, 7, ..., 27",
          _nope_positions, "",
          "reading: the list; those layers sit immediately before each MLA layer (after would "
          "be 1, 5, ..., 29)",
          versus="appendix: 'the GDN layer immediately after each MLA layer'"),
    # section 8
    Claim("expert", "8.5", "one SwiGLU expert: 896 × 2304 × 3 = 6.19M", 6.19e6,
          lambda: _p("moe_shared") / len(_m().mla_positions), "M"),
    Claim("capacity-2.6x", "8.1.2", "1.13B stored = 2.6× the 434M active", 2.6,
          lambda: _stored() / _active(), "×"),
    Claim("bf16-tie", "8.7", "0.1234567 and 0.1234570: equal in BF16, distinct in FP32",
          "bf16 equal, fp32 distinct", _bf16_tie),
    Claim("router-fp32", "8.7", "the FP32 upcast keeps routing decisions precise",
          "fp32 routing", _router_dtype, "",
          "reading: the text; hymo_mini keeps logits, probabilities and top-k in fp32",
          versus="the same section's code returns logits.to(x.dtype), i.e. bf16 again"),
    Claim("moe-active-layer", "12.2.4", "one MoE layer: 132.1M active parameters", 132.1e6,
          lambda: _moe_layer("active"), "M",
          "reading: the section's own arithmetic, which is right (2 routed + 1 shared expert, "
          "plus the 14,336-weight router it leaves out)",
          versus="same section: 2 × 6.19M + 6.19M = 18.57M"),
    Claim("moe-stored-layer", "12.2.4", "one MoE layer: 1,170.4M stored parameters", 1170.4e6,
          lambda: _moe_layer("stored"), "M",
          "reading: the section's own arithmetic (16 routed + 1 shared expert, plus the router)",
          versus="same section: 16 × 6.19M + 6.19M = 105.2M"),
    Claim("moe-active-8", "12.2.4", "8 MoE layers: 148.6M active", 148.6e6,
          lambda: _p("moe_routed", "active") + _p("moe_shared") + _p("moe_router"), "M"),
    Claim("moe-stored-8", "12.2.4", "8 MoE layers: 841.6M stored", 841.6e6,
          lambda: _p("moe_routed") + _p("moe_shared") + _p("moe_router"), "M"),
    # section 9
    Claim("mtp-lengths", "9.2.2", "MTP head 0 predicts T−1 tokens, head 1 T−2", "T-1, T-2",
          _mtp_predictions, "",
          "the depths produce T−1 and T−2 states, but only T−2 and T−3 have a target"),
    Claim("mtp-weight", "9.4.3", "MTP adds ~30% to the training signal", 0.30,
          lambda: sum(_m().mtp_loss_weights), "%",
          "weights 0.3 + 0.1 = 0.4 of the main loss (28.6% of the total weight); the gradient "
          "share has to be measured"),
    Claim("mtp-params", "12.2.5", "MTP heads: 2 × 6.19M = 12.38M", 12.38e6,
          lambda: _p("mtp"), "M"),
    # section 11
    Claim("embed-act", "11.1", "embedding output 2 × 128 × 896 × 4 B = 0.92 MB", 0.92e6,
          lambda: 2 * 128 * _m().dim * 4, "MB"),
    Claim("scores-mem", "11.2.1", "attention scores (2, 16, 128, 128) = 0.52 MB", 0.52e6,
          lambda: 2 * _m().n_heads * 128 * 128 * 4, "MB", "524,288 values × 4 bytes"),
    Claim("bc-mem", "11.3.1", "b and c (2, 128, 40, 32) × 2 = 0.65 MB", 0.65e6,
          lambda: 2 * 2 * 128 * _m().gdn_n_heads * _m().gdn_d_state * 4, "MB",
          "655,360 values × 4 bytes"),
    Claim("state-mem", "11.3.1", "recurrent state (2, 40, 32, 32) = 0.25 MB", 0.25e6,
          lambda: 2 * _m().gdn_n_heads * _m().gdn_d_state * _m().gdn_headdim * 4, "MB",
          "327,680 bytes in fp32"),
    Claim("gdn-cheaper", "11.3.2", "GDN is 2.3× cheaper per layer than MLA", 2.3,
          lambda: (_costs().mla_cost(_m(), 4096).flops_per_token
                   / _costs().gdn_cost(_m(), 4096).flops_per_token), "×",
          "forward FLOPs per token at T=4096, attention layers without the MoE; by parameters "
          "GDN is the larger (8.07M vs 2.76M)"),
    Claim("head-weight", "11.5.1", "W_vocab (896, 64256) × 4 bytes = 228 MB", 228e6,
          lambda: _m().dim * _m().vocab_size * 4, "MB", "230.3 MB (219.6 MiB)"),
    Claim("logits-mem", "11.5.1", "logits (2, 128, 64256) × 4 bytes = 57.6 MB", 57.6e6,
          lambda: 2 * 128 * _m().vocab_size * 4, "MB",
          "57.6 is the embedding's parameter count in millions"),
    Claim("train-mem", "11.5.2", "weights 4.51 GB + Adam 9.04 GB + activations ≈ 22.4 GB", 22.4e9,
          lambda: 12 * _stored() + 67e6, "GB",
          "the listed items add up to 13.6 GB (18.1 GB with fp32 gradients)"),
    Claim("attn-412G", "11.6.1", "MLA attention costs 412 GFLOPs per token at 4K", 412e9,
          lambda: _flops()["MLA attention core (q·k, p·v)"], "G",
          "8 layers × 16 heads × (128 + 128) × (T + 1) with a causal mask (chapter 11)"),
    Claim("head-115M", "11.6.1", "output head 115M FLOPs per token", 115e6,
          lambda: _flops()["output head (logits)"], "M"),
    Claim("moe-99M", "11.6.1", "MoE (8 layers) 99M FLOPs per token", 99e6,
          lambda: _flops()["MoE (router, top-k routed, shared)"], "M",
          "2 FLOPs per active parameter: 99M is the routed experts' parameter count"),
    Claim("gdn-227M", "11.6.1", "GDN projections (in/g/out/skip) 227M FLOPs per token", 227e6,
          lambda: _flops()["GDN projections (in, g, out, skip)"], "M",
          "right for the four named; b_proj, c_proj, dt_proj add 160M"),
    Claim("total-413G", "11.6.1", "forward ~413 GFLOPs per token at 4K", 413e9,
          lambda: _flops()["total"], "G", "with the two MTP depths; 0.98 G without them"),
    Claim("tput-arith", "11.6.2", "0.50 × 312 TFLOPS / 413G ≈ 378 tokens/s", 378,
          lambda: 0.5 * 312e12 / 413e9, "tok/s", "the division itself"),
    Claim("tput", "11.6.2", "~378 training tokens/s per H100 at 50% MFU", 378,
          lambda: 0.5 * 312e12 / _train_flops_per_token(), "tok/s",
          "3 × the computed forward FLOPs at the document's 312 TFLOPS (an A100's bf16 peak)"),
    Claim("days", "11.6.2", "30B tokens at ~1,500 tok/s ≈ 5.7 days", 5.7 * 86_400,
          lambda: 30e9 / 1500, "days", "30e9 / 1,500 tok/s = 231 days"),
    # section 12
    Claim("stored-gb", "12.1.1", "stored 1.13B × 4 bytes = 4.51 GB (BF16)", 4.51e9,
          lambda: 2 * _stored(), "GB", "4 bytes is fp32; bf16 weights take 2.26 GB"),
    Claim("active-gb", "12.1.2", "active 434M × 4 bytes = 1.74 GB (BF16)", 1.74e9,
          lambda: 2 * _active(), "GB", "again fp32 bytes labelled bf16"),
    Claim("efficiency", "12.1.3", "active / stored = 434M / 1.13B ≈ 40%", 0.40,
          lambda: _active() / _stored(), "%"),
    Claim("embedding", "12.2.1", "embedding 64,256 × 896 = 57.6M", 57.6e6,
          lambda: _p("embedding"), "M"),
    Claim("gdn-layer", "12.2.2", "one GDN block: ~8.07M parameters", 8.07e6,
          lambda: _p("gdn") / len(_m().gdn_positions), "M"),
    Claim("gdn-total", "12.2.2", "24 GDN blocks: 193.7M", 193.7e6, lambda: _p("gdn"), "M"),
    Claim("gdn-state-80k", "12.2.2", "recurrent state [40, 32, 32] bf16 = 80 KB per layer",
          80 * 2 ** 10, lambda: _m().gdn_n_heads * _m().gdn_d_state * _m().gdn_headdim * 2,
          "KiB", "hymo_mini keeps the state in fp32: 160 KiB"),
    Claim("mla-total", "12.3", "8 MLA attentions: 22.2M", 22.2e6, lambda: _p("mla"), "M"),
    Claim("total-active", "12.3", "active parameters: ~434M", 434e6, _active, "M"),
    Claim("total-stored", "12.3", "stored parameters: ~1.13B", 1.13e9, _stored, "B"),
    Claim("flops-0.87G", "12.4.1", "2 × 434M = 0.87 GFLOPs per token", 0.87e9,
          lambda: 2 * _active(), "G",
          "two FLOPs per active weight; attention's token mixing comes on top"),
    Claim("flops-1.5G", "12.4.1", "each token uses 1.5 GFLOPs", 1.5e9,
          lambda: _flops()["total"], "G",
          "neither: the forward at T=4096 costs 0.98 G, 1.24 G with the MTP depths (chapter 11); "
          "0.87 G counts the weight multiplies only", versus="two lines earlier: 0.87 GFLOPs"),
    Claim("scale-7.44B", "12.4.2", "1.5B active would need 3B × 2.6 = 7.44B stored", 7.44e9,
          lambda: 1.5e9 * _stored() / _active(), "B",
          "1.5B × 2.60 = 3.9B; (3B × 2.60 is 7.81B, not 7.44B)"),
    Claim("model-750M", "12.5", "the model has ~750M (active) parameters (hymo_750m)", 750e6,
          _active, "M", "reading: the count; no count gives 750M (12.5 reaches for it by adding "
          "a dense FFN the GDN blocks do not have)",
          versus="12.3: ~434M active"),
    # appendix
    Claim("gqa-cache", "appendix", "GQA cache per token = MHA / n_heads / n_kv_groups", 64,
          lambda: (_costs().mha_cost(_m(), 1).cache_bytes
                   / _costs().mha_cost(_m(), 1, n_kv_heads=_m().n_kv_groups).cache_bytes), "×",
          "GQA-4 keeps 4 of 16 KV heads: MHA / 4 (the table says MHA/64, the text "
          "'n_heads / n_kv_groups × MHA')"),
    Claim("latent-1mb", "appendix", "the latent cache: 4096 × 128 × 2 = 1 MB per token",
          2 ** 20, lambda: _costs().mla_cost(_m(), 1, cache="latent").cache_bytes, "",
          "1 MB is 4,096 tokens of one layer; one token takes (128 + 32) × 2 = 320 bytes",
          approx=0.0),
    Claim("latent-4x", "appendix", "the shared latent saves ~4× on KV cache", 4,
          lambda: (_costs().mha_cost(_m(), 1).cache_bytes
                   / _costs().mla_cost(_m(), 1, cache="latent").cache_bytes), "×"),
]


def _layout(positions: tuple[int, ...]) -> str:
    p = list(positions)
    if len(p) > 3 and len({b - a for a, b in zip(p, p[1:], strict=False)}) == 1:
        return f"{p[0]}, {p[1]}, ..., {p[-1]}"
    return ", ".join(map(str, p))
