"""hymo_mini: the HyMo hybrid language model, readable and executable.

One module per section of the design document:

    config      section 2   frozen dataclass configs, YAML presets, validation
    rope        section 7   rotary embedding, partial RoPE
    mla         section 4   multi-head latent attention and the MLA block
    gdn         section 5   gated delta net: reference recurrence, dispatcher, block
    gdn_triton  section 6   the recurrent Triton kernel
    moe         section 8   DeepSeekMoE (layer.py) and its fast dispatch (dispatch.py)
    mtp         section 9   multi-token prediction heads
    model       section 3   the HyMo stack, build_hymo
    analysis    11, 12      parameter counts, FLOPs, cache costs, the shape tracer, memory
    mhc                     manifold-constrained hyper-connections (DeepSeek-V4)
"""

from hymo_mini.config import HyMoConfig, ModelConfig, load_config

__version__ = "0.1.0"

__all__ = ["HyMoConfig", "ModelConfig", "load_config", "__version__"]
