"""The document's claims about multi-token prediction (section 9)."""

from __future__ import annotations

from hymo_book.claims.core import Claim
from hymo_book.claims.values import (
    cfg,
    mtp_predictions,
)
from hymo_book.claims.values_errata import (
    mtp_gradient_share,
    mtp_reads_next_token,
)
from hymo_book.prose import fmt


def _mtp_signal_note() -> str:
    w = cfg().mtp_loss_weights
    share = mtp_gradient_share()
    return (f"the weighted MTP terms' gradient on the layers over the main loss's, in norm, "
            f"measured on the mini model at init (chapter 12's batch; the two gradients have a "
            f"cosine of {fmt(share['cosine'], 2)}). By weight the terms count "
            f"{' + '.join(map(str, w))} = {fmt(sum(w))} of the main loss "
            f"({fmt(100 * sum(w) / (1 + sum(w)))}% of the total weight)")


CLAIMS: list[Claim] = [
    # section 9
    Claim("mtp-lengths", "9.2.2", "MTP head 0 predicts T−1 tokens, head 1 T−2", "T-1, T-2",
          mtp_predictions, "",
          "the depths produce T−1 and T−2 states, but only T−2 and T−3 have a target"),
    # section 9
    Claim("mtp-formula", "9.1.2", "P(x_{t+2} | h_t) = softmax(W_vocab · MTP_1(h_t))",
          "MTP_1(h_t)", mtp_reads_next_token, "",
          "changing token t + 1 with the main hidden states held fixed moves depth 1's output "
          "at t: each depth adds the embedding of the token d places ahead (section 9.2.2's "
          "chain, and hymo_mini's)"),
    Claim("mtp-signal", "9.4.3", "at weights 0.3 and 0.1, MTP adds '~30% additional gradient "
          "signal'", 0.30, lambda: mtp_gradient_share()["ratio"], "%", _mtp_signal_note),
]
