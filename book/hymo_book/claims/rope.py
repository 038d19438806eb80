"""The document's claims about rotary position embedding (section 7)."""

from __future__ import annotations

from hymo_book.claims.core import Claim
from hymo_book.claims.values import (
    cfg,
    rotated_gdn_vectors,
    slowest_pair,
    theta,
)
from hymo_book.claims.values_errata import (
    pairs_without_a_turn,
    rope_distance_facts,
    rope_distance_reading,
    rope_wavelengths,
    small_k_frequency,
)
from hymo_book.prose import fmt


def _rope_distance_note() -> str:
    f = rope_distance_facts()
    yes = {True: "holds", False: "fails"}
    return (f"the identity rotates both vectors by the same p, so p drops out: it "
            f"{yes[f['random_keeps_distance']]} for a random orthogonal map drawn anew at every "
            f"position too, whose scores at one distance s − p "
            f"{'agree' if f['random_relative'] else 'disagree'}. What gives relative positions "
            f"is R(p)ᵀR(s) = R(s − p): R(p)x · R(s)y = x · R(s − p)y "
            f"{yes[f['rope_shift_rule']]} for the package's rotation (chapter 04)")


def _wavelength_note() -> str:
    w = rope_wavelengths()
    return (f"θ_k = base^(−2k/{cfg().qk_rope_head_dim}) falls with k: pair 0 turns once every "
            f"{fmt(float(w[0]))} tokens, pair {len(w) - 1} once every {fmt(round(float(w[-1])))}; "
            "the long-range pairs are those of large k")


def _extrapolation_note() -> str:
    c, n_pairs, slow = cfg(), len(rope_wavelengths()), pairs_without_a_turn()
    return (f"how many of the {n_pairs} pairs (rope_dim {c.qk_rope_head_dim}, base "
            f"{fmt(c.rope_theta)}) have a wavelength 2π/θ_k longer than the "
            f"{fmt(c.max_seq_len)} trained positions: those never complete a turn in training, "
            f"so past position {fmt(c.max_seq_len - 1)} their angles, and those of token pairs "
            f"further apart, were never seen. The other {n_pairs - slow} turn at least once, so "
            "any later angle of theirs was: only for those fast pairs is a new position 'one "
            "step beyond'")


CLAIMS: list[Claim] = [
    # section 7
    Claim("theta-1", "7.2.3", "θ_1 = 1/10000^0.5 = 0.01", 0.01, lambda: theta(1), "",
          "θ_k = base^(−2k/32): the listed values use an exponent 2k/4"),
    Claim("theta-2", "7.2.3", "θ_2 = 1/10000^1.0 = 0.0001", 1e-4, lambda: theta(2), ""),
    Claim("theta-slowest", "7.2.3", "θ_0 = 1 is the slowest rotation", "k=0", slowest_pair, "",
          lambda: f"θ_0 = 1 rad/token is the fastest pair; {slowest_pair()} turns slowest"),
    Claim("rope-gdn", "7.6", "GDN rotates its value v (all 32 dims)", "v",
          rotated_gdn_vectors, "",
          "reading: b and c (found by shifting positions); only vectors that meet in a dot "
          "product give relative positions, rotating v writes absolute angles into the output "
          "(chapter 04)",
          versus="appendix: RoPE on the GDN keys b and c"),
    # section 7
    Claim("rope-distance", "7.2.2", "‖R(p)x − R(p)y‖ = ‖x − y‖: so relative position is encoded",
          "relative position", rope_distance_reading, "", _rope_distance_note),
    Claim("rope-intuition", "7.2.3", "low-frequency components (small k) encode long-range "
          "position", "small k: low frequency", small_k_frequency, "", _wavelength_note),
    Claim("rope-extrapolation", "7.4.3", "RoPE extrapolates: position 4096 is only 'one step "
          "beyond' training (pairs at unseen angles: none)", 0, pairs_without_a_turn, "",
          _extrapolation_note),
]
