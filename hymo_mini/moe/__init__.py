"""Mixture of experts (section 8 of the design document), in two parts:

    layer.py     DeepSeekMoE: the router, capacity, aux-loss-free balancing, the routed
                 experts' stacked weights (RoutedExperts) and the reference loop over experts
    dispatch.py  the fast dispatch the layer calls instead of the loop: the padded batched
                 path, the grouped matmul path and its row shuffles
    kernels.py   those row shuffles as Triton kernels, used on a CUDA GPU

Read ``layer.py`` first: the loop there is what every fast path is tested against.
"""

from hymo_mini.moe.layer import (
    DeepSeekMoE,
    ExpertView,
    RoutedExperts,
    Routing,
    moe_param_counts,
    queue_positions,
)

__all__ = ["DeepSeekMoE", "Routing", "RoutedExperts", "ExpertView", "moe_param_counts",
           "queue_positions"]
