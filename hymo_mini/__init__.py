"""hymo_mini: the HyMo hybrid language model, readable and executable.

The package, one line a module (the sections are the design document's; every subpackage's
``__init__`` has a table of its own):

    config.py         section 2   the config tree, its YAML presets and ``load_config``
    model_config.py   section 2   the architecture config, every field checked
    model.py          section 3   the HyMo stack and ``build_hymo``
    blocks.py         section 3   the MLA block and the GDN block, assembled from their parts
    mla.py            section 4   multi-head latent attention
    gdn.py            section 5   the Gated Delta Net mixer around the recurrence
    ops/              section 5-6 the recurrences: loops, chunked forms, Triton kernels
    rope.py           section 7   rotary position embedding, partial RoPE
    moe/              section 8   DeepSeekMoE and its fast dispatch
    ffn.py            section 8   the SwiGLU feed-forward of every expert and MTP depth
    mtp.py            section 9   multi-token prediction heads
    mhc.py                        manifold-constrained hyper-connections (DeepSeek-V4)
    loss.py                       the tied head's soft-capped loss, in chunks
    loss_triton.py                the chunked loss's row kernel
    generate.py                   decoding token by token with the caches
    model_file.py                 a trained model as one safetensors file
    data.py                       byte-level text: files on the machine, the Python docs
    analysis/         section 11-12  parameters, FLOPs, cache costs, shapes, memory
    optim/                        Muon and AdamW, the parameter split, the schedule
    train/                        the training loop, checkpoints, FSDP2
    cli/                          the ``hymo-mini`` command line
    compiling.py                  when a part runs under torch.compile
    launching.py                  Triton kernels launched on their tensors' GPU
    choices.py                    one-line errors for a setting outside its choices
"""

from hymo_mini.config import HyMoConfig, ModelConfig, load_config

__version__ = "0.1.0"

__all__ = ["HyMoConfig", "ModelConfig", "load_config", "__version__"]
