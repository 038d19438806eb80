"""The true gated delta rule (decay, erase, write): its loop and its fast paths."""
