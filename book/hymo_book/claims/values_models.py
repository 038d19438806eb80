"""Quantities the claims find by running the package: small experiments on real modules.

Each function answers one question a claim asks (does a write add or overwrite? how
many tensors does a layer keep for the backward? how often does ``forward`` call the
head?) by running hymo_mini's own code on small inputs, seeded. The Triton kernel's
facts run in a child process under the Triton interpreter, so that this process's
kernels are left as they were built. Results are cached: each runs once per session.
"""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys

import torch
from torch.autograd.graph import saved_tensors_hooks
from torch.utils.flop_counter import FlopCounterMode


def _mini():
    from hymo_mini.config import load_config

    return load_config("hymo_mini").model


# ---- the stack (section 3) ---------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def checkpoint_profile() -> dict:
    """One training step of the mini model (2 sequences of 64 tokens), without and with
    every layer checkpointed: bytes autograd keeps for the backward (each storage once,
    parameters left out, plus the layer inputs a checkpoint holds), layer forward calls and
    FLOPs (``FlopCounterMode``). Also the size of one layer input, (b, t, dim) fp32."""
    from hymo_mini.model import HyMo

    torch.manual_seed(0)
    model = HyMo(_mini()).train()
    tokens = torch.randint(0, model.config.vocab_size, (2, 64))
    out = {name: _profile_step(model, tokens, ckpt)
           for name, ckpt in (("plain", False), ("checkpointed", True))}
    out["layer_input_bytes"] = tokens.numel() * model.config.dim * 4
    out["n_layers"] = len(model.layers)
    return out


def _profile_step(model, tokens, checkpointing: bool) -> dict:
    model.gradient_checkpointing = checkpointing
    model.zero_grad()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved, alive = {}, []  # storage -> bytes; references keep every storage distinct

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
            alive.append(tensor)
        return tensor

    calls = []
    hooks = [layer.register_forward_pre_hook(lambda mod, args: calls.append(mod))
             for layer in model.layers]
    try:
        with FlopCounterMode(display=False) as flops:
            with saved_tensors_hooks(pack, lambda tensor: tensor):
                loss, _ = model.loss(tokens)
            loss.backward()
    finally:
        for hook in hooks:
            hook.remove()
        model.gradient_checkpointing = False
    kept = len(model.layers) * tokens.numel() * model.config.dim * 4 if checkpointing else 0
    return {"saved_bytes": sum(saved.values()) + kept, "layer_calls": len(calls),
            "flops": flops.get_total_flops()}


def checkpoint_saving() -> float:
    """The share of the saved bytes that checkpointing every layer removes."""
    p = checkpoint_profile()
    return 1 - p["checkpointed"]["saved_bytes"] / p["plain"]["saved_bytes"]


def saved_layer_inputs_per_layer() -> float:
    """What one layer keeps for the backward, in layer inputs (b, t, dim) fp32."""
    p = checkpoint_profile()
    per_layer = ((p["plain"]["saved_bytes"] - p["checkpointed"]["saved_bytes"]) / p["n_layers"]
                 + p["layer_input_bytes"])
    return per_layer / p["layer_input_bytes"]


def head_calls_in_forward() -> int:
    """How many times ``HyMo.forward`` runs the output head (a forward hook counts)."""
    from hymo_mini.model import HyMo

    torch.manual_seed(0)
    model = HyMo(_mini()).eval()
    calls = []
    hook = model.head.register_forward_hook(lambda mod, args, out: calls.append(1))
    with torch.no_grad():
        model(torch.randint(0, model.config.vocab_size, (1, 8)))
    hook.remove()
    return len(calls)


# ---- the GDN recurrence (section 5) -----------------------------------------------------
def _probe(T=6, H=2, S=3, D=5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(1, T, H, D, generator=gen, dtype=torch.float64)
    k = torch.randn(1, T, H, S, generator=gen, dtype=torch.float64)
    A = -torch.rand(H, S, generator=gen, dtype=torch.float64) - 0.5
    return v, k, A


def linear_attention_gate() -> str:
    """Which constant gate g makes the gla rule with b = c = k plain linear attention
    (o_t = k_tᵀ Σ_{s≤t} k_s v_sᵀ): g = 0 (no decay) or g = 1, the document's choice."""
    from hymo_mini.ops import naive_gla

    v, k, A = _probe()
    states = torch.einsum("bths,bthd->bthsd", k, v).cumsum(1)  # (b, t, h, s, d)
    plain = torch.einsum("bths,bthsd->bthd", k, states)
    found = [f"g = {g}" for g in (0, 1)
             if torch.allclose(naive_gla(v, k, k, torch.full(v.shape[:3], float(g),
                                                             dtype=v.dtype), A)[0], plain)]
    return " and ".join(found) or "neither"


def second_write() -> str:
    """Write value v1 then v2 under the same unit key, no decay, and read with that key:
    the documented rule returns their sum; a delta rule (β = 1) returns v2."""
    from hymo_mini.ops import naive_gated_delta, naive_gla

    _, k, A = _probe(T=2, H=1)
    key = torch.nn.functional.normalize(k[:, :1].expand(1, 2, 1, k.shape[-1]), dim=-1)
    v = torch.tensor([[1.0, 2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 3.0, 4.0, 0.0]],
                     dtype=torch.float64).reshape(1, 2, 1, 5)
    g = torch.zeros(1, 2, 1, dtype=torch.float64)
    read = naive_gla(v, key, key, g, A)[0][0, -1, 0]  # (d,)
    delta = naive_gated_delta(v, key, key, g, A, torch.ones_like(g))[0][0, -1, 0]
    if torch.allclose(read, v[0, 0, 0] + v[0, 1, 0]) and torch.allclose(delta, v[0, 1, 0]):
        return "adds (reads v1 + v2)"
    return "overwrites (reads v2)" if torch.allclose(read, v[0, 1, 0]) else "neither"


def state_shape() -> str:
    """The state's shape for S = 3 keys and D = 5 values per head, from the loop."""
    from hymo_mini.ops import naive_gla

    v, k, A = _probe()
    state = naive_gla(v, k, k, torch.zeros(v.shape[:3], dtype=v.dtype), A)[1]  # (b, h, s, d)
    names = {3: "S", 5: "D"}
    return " × ".join(names[n] for n in state.shape[2:])


def gate_per() -> str:
    """What the decay gate g varies over, from the mixer's own g (b, t, h)."""
    from hymo_book.claims.values import cfg, gdn_block

    block, x = gdn_block()
    with torch.no_grad():
        g = block.mixer.gdn_inputs(x)[3]
    return "head (one scalar)" if g.shape[-1] == cfg().gdn_n_heads else f"{g.shape[-1]} values"


def longest_half_life() -> float:
    """The longest half-life, in steps, of any head at init: the weight of a token halves
    after ln 2 / (g |A|) steps at the mean initial gate g."""
    from hymo_book.claims.values import cfg, decay, gate_at_init

    g = gate_at_init()
    return max(math.log(2) / (g * -decay(h)) for h in range(cfg().gdn_n_heads))


def documented_block_cosine() -> float:
    """The cosine between input and output of the document's GDN block at init
    (``gdn_residual="document"``: out_proj(o) + skip_proj(x), no identity path), at the
    production width, mean over 32 tokens."""
    from hymo_book.claims.values import cfg
    from hymo_mini.blocks import GDNBlock
    from hymo_mini.config import replace

    torch.manual_seed(0)
    block = GDNBlock(replace(cfg(), gdn_residual="document"), layer_idx=cfg().gdn_positions[0])
    x = torch.randn(1, 32, cfg().dim)
    with torch.no_grad():
        y = block(x)
    cosine = float(torch.nn.functional.cosine_similarity(x, y, dim=-1).mean())
    return round(cosine, 2) + 0.0  # near zero: its last digits vary between CPUs (and no -0.0)


# ---- the recurrent Triton kernel (section 6) ---------------------------------------------
_KERNEL_FACTS = r"""
import json, torch
from hymo_mini.ops import naive_gla
from hymo_mini.ops.gla import recurrent_triton as rt
launches = []
kernel = rt._fwd_kernel
class Counted:
    def __getitem__(self, grid):
        launches.append(grid)
        return kernel[grid]
rt._fwd_kernel = Counted()
gen = torch.Generator().manual_seed(0)
B, T, H, S, D = 2, 5, 3, 3, 5
v = torch.randn(B, T, H, D, generator=gen)
b, c = (torch.randn(B, T, H, S, generator=gen) for _ in range(2))
g, A = torch.rand(B, T, H, generator=gen), -torch.rand(H, S, generator=gen)
o = rt.recurrent_gla_triton(v, b, c, g, A)[0]
ref = naive_gla(v, b, c, g, A)[0]
print(json.dumps({"launches": len(launches), "programs": [list(x) for x in launches],
                  "B": B, "H": H, "shape": [T, S, D],
                  "matches_loop": bool(torch.allclose(o, ref, rtol=1e-5, atol=1e-6))}))
"""


@functools.lru_cache(maxsize=1)
def kernel_facts() -> dict:
    """One forward of the recurrent kernel on awkward sizes (T = 5, S = 3, D = 5: none a
    power of two), under the Triton interpreter in a child process: the kernel launches it
    makes, their grids, and whether it matches the loop (rtol 1e-5)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _KERNEL_FACTS], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    if done.returncode:
        raise RuntimeError(f"the recurrent kernel's probe failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def kernel_launches() -> int:
    return kernel_facts()["launches"]


def non_power_of_two_runs() -> str:
    facts = kernel_facts()
    T, S, D = facts["shape"]
    return (f"not needed: T={T}, S={S}, D={D} match the loop unpadded" if facts["matches_loop"]
            else "needed: the unpadded kernel differs from the loop")
