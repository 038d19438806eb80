"""The document's claims about the Gated Delta Net and its kernel (sections 5 and 6)."""

from __future__ import annotations

import math

from hymo_book.claims.core import Claim
from hymo_book.claims.values import (
    LAUNCH_S,
    batch_tokens,
    cfg,
    decay,
    decay_gate_source,
    gate_at_init,
    gdn_block,
    launches_per_layer,
    loop_launches_per_step,
    n_gdn,
)
from hymo_book.claims.values_errata import state_read_share
from hymo_book.claims.values_measured import (
    RECURRENT_RUN,
    copy_bandwidth,
    gpu,
    recurrent_ms,
    speedup,
)
from hymo_book.claims.values_models import (
    documented_block_cosine,
    gate_per,
    kernel_facts,
    kernel_launches,
    linear_attention_gate,
    longest_half_life,
    non_power_of_two_runs,
    second_write,
    state_shape,
)
from hymo_book.prose import fmt
from hymo_mini.analysis import costs


def _steps_below(share: float) -> int:
    """Steps after which head 0 keeps less than ``share`` of a token at the initial gate."""
    return math.ceil(math.log(share) / (gate_at_init() * decay(0)))


def _trajectory() -> int:
    c = cfg()
    return batch_tokens() * c.gdn_n_heads * c.gdn_d_state * c.gdn_headdim * 4


def _recurrence_cost() -> str:
    """How the recurrence's FLOPs per token and head grow with S and D (costs.gdn_cost)."""
    from hymo_mini.config import replace

    def per(S, D):
        c = replace(cfg(), gdn_d_state=S, gdn_headdim=D, gdn_d_inner=D * cfg().gdn_n_heads)
        return costs.gdn_cost(c, 64).mixing_flops / (64 * c.gdn_n_heads)

    base = per(32, 32)
    factors = {"S": per(64, 32) / base, "D": per(32, 64) / base}
    return " × ".join(n for n, f in factors.items() if f == 2) if set(factors.values()) <= {
        1.0, 2.0} else "other"


def _programs() -> str:
    facts = kernel_facts()
    return f"{facts['programs'][0][0]} programs for B = {facts['B']}, H = {facts['H']}"


CLAIMS: list[Claim] = [
    # section 5
    Claim("decay-head0", "5.3.2", "head 0 decays by exp(−1) = 0.37 per step (~3 steps)", 0.37,
          lambda: math.exp(gate_at_init() * decay(0)), "",
          lambda: (f"the decay is exp(g·A), and at init g = sigmoid(dt_proj(u) + 0) has mean "
                   f"{fmt(gate_at_init())}: head 0 keeps {fmt(math.exp(gate_at_init() * decay(0)))}"
                   f" per step and falls below 5% after {_steps_below(0.05)} steps")),
    Claim("decay-head10", "5.3.2", "head 10: A = −10", -10.0, lambda: decay(10), "",
          "A_log = log(1..40), so head h has A = −(h + 1)", approx=0.0),
    Claim("decay-head39", "5.3.2", "head 39: A = −39", -39.0, lambda: decay(39), "",
          approx=0.0),
    Claim("A_log-shape", "5.2.1", "A ∈ R^S; A_log initialised as log(arange(1, H+1))",
          "(32,) / (40,)", lambda: str(tuple(gdn_block()[0].mixer.A_log.shape)), "",
          "reading: per head and state dimension, as the parameter count says (a per-head "
          "vector is its special case); every column starts at log(h + 1)",
          versus="12.2.2: A_log is 40 × 32"),
    Claim("decay-gate", "5.2.1", "the decay gate g_t = sigmoid(dt_proj(...))", "dt_proj",
          decay_gate_source, "",
          "reading: g = sigmoid(dt_proj(u) + dt_bias), found by perturbing each projection; "
          "g_proj's mean is the output gate, so every projection gets a gradient (with g_proj "
          "for both, dt_proj and dt_bias would be dead)",
          versus="5.4.3: g = mean over D of sigmoid(g_proj(v))"),
    Claim("state-500x", "5.3.3", "GDN state 1,024 per head: ~500× smaller than 4096 × 128",
          500, lambda: 4096 * cfg().head_dim / (cfg().gdn_d_state * cfg().gdn_headdim), "×",
          lambda: (f"4096 × {cfg().head_dim} / ({cfg().gdn_d_state} × {cfg().gdn_headdim}) = "
                   f"{fmt(4096 * cfg().head_dim / (cfg().gdn_d_state * cfg().gdn_headdim))}×"),
          tol=0.03),
    Claim("d-inner-ratio", "5.4.1", "d_inner / d_model ≈ 1.43 (896 × 1.43 ≈ 1280)", 1.43,
          lambda: cfg().gdn_d_inner / cfg().dim, ""),
    # section 6
    Claim("launch-arith", "6.1", "1,310,720 launches × 10 µs = 13.1 s", 13.1,
          lambda: 1_310_720 * LAUNCH_S, "s", "the multiplication itself"),
    Claim("launch-count", "6.1", "8,192 kernels × 40 heads × 4 batches = 1,310,720 launches",
          1_310_720, launches_per_layer, "",
          lambda: (f"{loop_launches_per_step()} kernels per step, counted by PyTorch's "
                   "dispatcher on the naive loop, times T = 4,096 steps; the loop is vectorised "
                   "over batch and heads, so neither multiplies the count")),
    Claim("launch-time", "6.1", "the PyTorch loop: 13.1 s of launch overhead per layer", 13.1,
          lambda: recurrent_ms("naive") / 1e3, "s",
          lambda: (f"the whole naive loop, launches and work, measured forward on the {gpu()} "
                   f"at B = 4, T = 4,096, H = 40 ({RECURRENT_RUN}); its "
                   f"{fmt(launches_per_layer())} launches at the document's 10 µs would be "
                   f"{fmt(launches_per_layer() * LAUNCH_S)} s")),
    Claim("triton-launch", "6.1", "the Triton kernel: 160 launches × 10 µs = 1.6 ms", 1.6e-3,
          lambda: recurrent_ms("recurrent_triton_kernel") / 1e3, "ms",
          lambda: (f"the kernel alone, measured forward ({RECURRENT_RUN}): one launch of a "
                   "(B, H) grid, whose time is T dependent steps, not launch overhead")),
    Claim("speedup-8000", "6.1", "~8,000× faster (launch overhead)", 8000,
          lambda: speedup("recurrent_triton_kernel"), "×",
          lambda: (f"measured forward speed-up of the recurrent kernel over the naive loop "
                   f"({RECURRENT_RUN}): {fmt(speedup('recurrent_triton_kernel'))}× for the "
                   f"kernel alone, {fmt(speedup('recurrent_triton'))}× through the dispatcher; "
                   f"forward + backward {fmt(speedup('recurrent_triton_kernel', 'fwdbwd_ms'))}×. "
                   "The document's ratio counts launches a loop vectorised over batch and "
                   "heads never makes")),
    Claim("state-4kb", "6.3", "state 32 × 32 × 4 bytes = 4 KB per program", 4096,
          lambda: cfg().gdn_d_state * cfg().gdn_headdim * 4, ""),
    Claim("trajectory", "6.5", "saved states 4 × 4096 × 40 × 32 × 32 × 4 B = 2.6 GB per layer",
          2.6e9, lambda: (batch_tokens() * cfg().gdn_n_heads * cfg().gdn_d_state
                          * cfg().gdn_headdim * 4), "GB",
          lambda: (f"{fmt(_trajectory() / 1e9)} GB ({fmt(_trajectory() / 2 ** 30)} GiB) per GDN "
                   f"layer, {fmt(n_gdn() * _trajectory() / 1e9)} GB for all {n_gdn()}")),
    Claim("hbm-writes", "6.8", "HBM writes T×D + T×S×D: 1.5× more than T×D", 1.5,
          lambda: 1 + cfg().gdn_d_state, "×", "(T·D + T·S·D) / (T·D) = 1 + S"),
    # section 5
    Claim("linattn-cost", "5.1.2", "linear attention costs O(T × S²)", "S × S",
          _recurrence_cost, "",
          "how the FLOPs per token and head grow (costs.gdn_cost with S and then D doubled): "
          "the recurrence touches its S × D state, S keys by D values"),
    Claim("linattn-state", "5.1.3", "the linear-attention state is S × S", "S × S", state_shape,
          "", "the state the loop returns for S = 3 keys and D = 5 values per head: one row "
          "per key dimension, one column per value dimension"),
    Claim("delta-name", "5.2.2", "the update H + b ⊗ v is a delta rule",
          "overwrites (reads v2)", second_write, "",
          "two writes under one key, no decay, read with that key: the documented rule sums "
          "them (gated linear attention); the delta rule (gdn_rule='delta', β = 1) returns v2"),
    Claim("linattn-special", "5.2.3", "linear attention is the case b = c = k and g = 1", "g = 1",
          linear_attention_gate, "",
          lambda: ("g scales the log-decay: g = 0 keeps the state (exp(0) = 1), g = 1 is the "
                   f"strongest decay, exp(A) ({fmt(math.exp(-1))} at A = −1)")),
    Claim("erasure-per-dim", "5.2.3", "the gate g_t selectively decays specific state dimensions",
          "state dimension", gate_per, "",
          "g_t is one scalar per head and step; the per-dimension rates come from A, fixed "
          "per layer"),
    Claim("slow-heads", "5.3.2", "slow heads remember distant context; head 0 '~3 steps'", 3.0,
          longest_half_life, "",
          "the longest half-life of any head at init, in steps (the mean initial gate is "
          "about 0.5): long memory has to be learned through dt_bias and A_log"),
    Claim("qk-matrix", "5.3.3", "full attention stores 4,096 × 128 = 524,288 scalars per head "
          "(the QKᵀ matrix)", 524_288, lambda: 4096 * 4096, "",
          lambda: (f"QKᵀ of one head at T = 4,096 is 4,096²; its K and V cache is 4,096 × "
                   f"{cfg().head_dim + cfg().v_head_dim} = "
                   f"{fmt(4096 * (cfg().head_dim + cfg().v_head_dim))} values")),
    Claim("block-identity", "5.6", "at init the GDN block is approximately an identity", 1.0,
          documented_block_cosine, "",
          lambda: ("the cosine between the documented block's input and output at init (mean "
                   "over 32 tokens, production width, to two decimals). o ≈ D·v holds inside the "
                   f"mixer (the read c_tᵀH_t is {fmt(state_read_share(), 2)} of D·v in size, a "
                   "random input: the keys are small at init), but out_proj and skip_proj are "
                   "random, so the block's output is unrelated to its input")),
    # section 6
    Claim("launch-count-intro", "6", "4,096 launches × 40 heads × 4 batches = 655,360 launches",
          655_360, launches_per_layer, "",
          lambda: (f"{loop_launches_per_step()} kernels per step, counted by PyTorch's "
                   "dispatcher on the naive loop, times T = 4,096; batch and heads are "
                   "vectorised (section 6.1 then doubles the count)")),
    Claim("triton-launches", "6.1", "1 kernel launch per (batch, head) = 160 launches", 160,
          kernel_launches, "",
          lambda: (f"launches of the recurrent kernel's forward, counted under the Triton "
                   f"interpreter: one launch of a grid of programs ({_programs()})"),
          approx=0.0),
    Claim("hbm-3tbs", "6.3", "HBM bandwidth ~3 TB/s", 3e12, copy_bandwidth, "",
          lambda: (f"a device copy (read + write) measured {fmt(copy_bandwidth() / 1e12)} TB/s on "
                   f"the {gpu()} (gdn_recurrent_h200_2026-11-30.json); the document's table "
                   "gives 80 GB, an earlier GPU than the one measured, so the tolerance is "
                   "50%: the order of magnitude is what can be checked"), approx=0.5),
    Claim("recompute-2x", "6.5", "recomputing the states in the backward would double compute",
          2.0, lambda: (1 + 1 + 1) / (1 + 1), "×",
          "passes over the sequence: forward, replay, reverse against forward, reverse (the "
          "recurrent kernel replays from a checkpoint every C steps; the states kept drop "
          "C-fold)"),
    Claim("padding", "6.7", "Triton needs power-of-two sizes: inputs are padded", "needed",
          non_power_of_two_runs, "",
          "the recurrent kernel under the Triton interpreter on sizes that are not powers of "
          "two: blocks are the next power of two, loads and stores masked, no padded copies"),
]
