"""The models train_step.py times, and the agreement checks it runs first.

Each builder returns a :class:`Built`: the model, its optimizer, one training step
(forward under bf16 autocast, backward, clip, optimizer step), the training FLOPs per token
and how they were counted. Peers: Hugging Face Llama with SDPA attention and fla's
GLAForCausalLM, both 1024 wide × 24 layers (308 M parameters without embeddings, SwiGLU
2,816, untied embeddings), the size of the peers in /work/shared/anchors; and the same two
made as deep as they can be without more parameters than hymo_750m has active (without
embeddings), the peers at the same active size (``layers="matched"``, :func:`matched_layers`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import torch

import hymo_mini.model as hymo_model
from benchmarks.cuda_graph import GraphedStep
from benchmarks.step_profile import PREFIX
from hymo_mini.analysis.flops import forward_flops
from hymo_mini.analysis.params import count_params
from hymo_mini.blocks import GDNBlock, MLABlock
from hymo_mini.config import ModelConfig, OptimizerConfig, load_config
from hymo_mini.loss import linear_softcap_cross_entropy, plain_softcap_cross_entropy
from hymo_mini.model import HyMo, build_hymo
from hymo_mini.moe import DeepSeekMoE
from hymo_mini.optim import build_optimizer, clip_and_step, optimizer_groups

PEER = dict(vocab=64_256, dim=1024, layers=24, inter=2816, heads=16)


@dataclass
class Built:
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    step: object  # () -> loss tensor (detached)
    flops_per_token: float  # training FLOPs: 3 x forward
    info: dict = field(default_factory=dict)
    labels: tuple = ()  # (owner, attribute, label) functions to label while profiling
    named: dict = field(default_factory=dict)  # module -> label
    profile_step: object = None  # the step to profile, if not ``step`` (a graphed step's
    # eager twin: a replay runs no Python, so no kernel would carry a component's label)


def record(name: str):
    return torch.profiler.record_function(PREFIX + name)


def fused_adamw(model, config: OptimizerConfig, capturable: bool = False):
    """torch.optim.AdamW, fused, with hymo_mini's decay groups (``capturable`` for a step
    replayed as a CUDA graph)."""
    groups = []
    for g in optimizer_groups(model, "adamw").param_groups():
        decay = config.weight_decay if g["weight_decay_on"] else 0.0
        groups.append({"params": g["params"], "weight_decay": decay})
    fused = next(model.parameters()).is_cuda
    return torch.optim.AdamW(groups, lr=config.lr, betas=config.betas, eps=config.eps,
                             fused=fused, capturable=capturable)


def _train_step(model, optimizer, loss_fn, after=None, clip="plain"):
    """One step; ``clip``: "plain" (clip_grad_norm_, then the step) or "folded" (the clip's
    factor divided out inside the fused AdamW step, hymo_mini.optim.clip_and_step)."""
    device = next(model.parameters()).device.type

    def step():
        with record("forward"), torch.autocast(device, dtype=torch.bfloat16):
            loss = loss_fn()
        with record("backward"):
            loss.backward()
        with record("optimizer"):
            if clip == "folded":
                clip_and_step(optimizer, model.parameters(), 1.0)
            else:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if after is not None:
                after()
        return loss.detach()
    return step


def hymo_config(preset: str, T: int, switches: dict) -> ModelConfig:
    return replace(load_config(preset).model, max_seq_len=T, **switches)


def build_hymo_case(preset, B, T, switches, optimizer, device, clip="plain",
                    graph=False) -> Built:
    """``graph``: the step replayed as one CUDA graph (benchmarks/cuda_graph.py), its
    eager twin profiled."""
    if graph and optimizer != "adamw":
        raise ValueError("graph=True needs the fused AdamW (capturable); got "
                         f"optimizer={optimizer!r}")
    config = hymo_config(preset, T, switches)
    torch.manual_seed(0)
    with torch.device(device):
        model = build_hymo(config)
    model.train()
    opt_config = load_config(preset).optimizer
    opt = (fused_adamw(model, opt_config, capturable=graph) if optimizer == "adamw"
           else build_optimizer(model, replace(opt_config, name="muon")))
    gen = torch.Generator(device).manual_seed(1)
    # T + 1 tokens: the model reads T of them and predicts T
    tokens = torch.randint(0, config.vocab_size, (B, T + 1), device=device, generator=gen)
    eager = _train_step(model, opt, lambda: model.loss(tokens)[0], model.update_moe_biases, clip)
    step = GraphedStep(eager, optimizers=(opt,)) if graph else eager
    active = count_params(config).active
    info = {"config": {k: getattr(config, k) for k in
                       ("mla_every", "loss_impl", "gdn_impl", "mla_impl", "gdn_backend",
                        "moe_impl", "swiglu_impl")
                       if hasattr(config, k)},
            "optimizer": "fused AdamW" if optimizer == "adamw" else
            f"Muon split (MuonAdamW, normuon={opt_config.normuon})",
            "clip": clip, "cuda_graph": graph,
            "params_stored": count_params(config).stored, "params_active": active,
            "n_active_no_embed": active_no_embed(config),
            "flops": "3 x hymo_mini.analysis.flops.forward_flops (MTP included)"}
    labels = [(hymo_model, "_cross_entropy", "loss"),
              (hymo_model, "linear_softcap_cross_entropy_heads", "loss"), (HyMo, "logits", "loss")]
    return Built(model, opt, step, 3 * forward_flops(config, T)["total"], info, tuple(labels),
                 {model.norm: "loss", model.embed: "embedding"},
                 profile_step=eager if graph else None)


def _peer_flops(n_no_embed: int, T: int, attention: bool, p: dict) -> float:
    """6 N (no embeddings) + the LM head's 6 V d, + Llama's causal attention core 6 L d T."""
    core = 6 * p["layers"] * p["dim"] * T if attention else 0
    return 6 * n_no_embed + 6 * p["vocab"] * p["dim"] + core


def _peer(model, B, T, device, attention: bool, what: str, p: dict = PEER) -> Built:
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1,
                            fused=torch.device(device).type == "cuda")
    gen = torch.Generator(device).manual_seed(1)
    tokens = torch.randint(0, PEER["vocab"], (B, T), device=device, generator=gen)
    step = _train_step(model, opt, lambda: model(input_ids=tokens, labels=tokens).loss)
    embed = 2 * p["vocab"] * p["dim"]  # untied: embedding and LM head
    n = sum(w.numel() for w in model.parameters()) - embed
    info = {"model": what, "params": n + embed, "n_active_no_embed": n,
            "optimizer": "fused AdamW", "flops": "6N + 6 V d (head)"
            + (" + 6 L d T (causal attention)" if attention else ""),
            "size": {k: p[k] for k in ("dim", "layers", "inter", "heads", "vocab")}}
    return Built(model, opt, step, _peer_flops(n, T, attention, p), info,
                 named={model.get_output_embeddings(): "loss"})


def active_no_embed(config: ModelConfig) -> int:
    """The parameters one token uses, less the (tied) embedding."""
    return count_params(config).active - config.vocab_size * config.dim


def hymo_active_no_embed(preset: str = "hymo_750m") -> int:
    return active_no_embed(load_config(preset).model)


def matched_layers(no_embed, target: int) -> int:
    """The most layers a peer can have without more parameters (embeddings aside) than
    ``target``: ``no_embed(L)``, the count at L layers, is affine in L, so two counts fix
    it. Rounding down gives the peer the benefit of the doubt."""
    one, two = no_embed(1), no_embed(2)
    per_layer, rest = two - one, one - (two - one)
    layers = (target - rest) // per_layer
    if layers < 1:
        raise ValueError(f"target: {target:,} parameters is less than one peer layer "
                         f"({per_layer + rest:,}); expected at least that")
    return int(layers)


def _no_embed_on_meta(make, p: dict):
    """L -> the parameter count, less the untied embedding and head, of make(L) built on
    the meta device (no memory, no initialisation cost)."""
    def count(layers: int) -> int:
        with torch.device("meta"):
            model = make(layers)
        return sum(w.numel() for w in model.parameters()) - 2 * p["vocab"] * p["dim"]
    return count


def _resolve_layers(layers, make, p: dict) -> tuple[int, dict]:
    """(the depth to build, what the info should say about it) for layers = None (the
    issue's 24) or "matched" (hymo_750m's active size)."""
    if layers is None:
        return p["layers"], {}
    if layers != "matched":
        raise ValueError(f"layers: expected None or 'matched', got {layers!r}")
    target = hymo_active_no_embed()
    found = matched_layers(_no_embed_on_meta(make, p), target)
    return found, {"matched_to": {"preset": "hymo_750m", "n_active_no_embed": target,
                                  "rule": "the most layers without more parameters"}}


def build_llama(B, T, device, small=False, layers=None) -> Built:
    from transformers import LlamaConfig, LlamaForCausalLM

    p = dict(PEER, layers=2, dim=64, inter=128, heads=4) if small else dict(PEER)

    def make(n_layers):
        cfg = LlamaConfig(vocab_size=p["vocab"], hidden_size=p["dim"],
                          intermediate_size=p["inter"], num_hidden_layers=n_layers,
                          num_attention_heads=p["heads"], num_key_value_heads=p["heads"],
                          max_position_embeddings=T, tie_word_embeddings=False)
        try:
            return LlamaForCausalLM._from_config(cfg, attn_implementation="sdpa",
                                                 dtype=torch.float32)
        except TypeError:  # transformers 4: torch_dtype
            return LlamaForCausalLM._from_config(cfg, attn_implementation="sdpa",
                                                 torch_dtype=torch.float32)

    p["layers"], matched = _resolve_layers(layers, make, p)
    torch.manual_seed(0)
    with torch.device(device):
        model = make(p["layers"])
    built = _peer(model, B, T, device, True, "transformers LlamaForCausalLM, SDPA attention", p)
    built.info.update(matched)
    return built


def build_gla(B, T, device, layers=None) -> Built:
    from fla.models import GLAConfig, GLAForCausalLM

    def config(n_layers):
        return GLAConfig(hidden_size=PEER["dim"], num_hidden_layers=n_layers,
                         vocab_size=PEER["vocab"], max_position_embeddings=T)

    # fla's defaults: 4 heads (not Llama's 16); the SwiGLU width 2,816 is its default too
    p = dict(PEER, heads=config(1).num_heads)
    p["layers"], matched = _resolve_layers(layers, lambda n: GLAForCausalLM(config(n)), p)
    torch.manual_seed(0)
    with torch.device(device):
        model = GLAForCausalLM(config(p["layers"])).float()
    built = _peer(model, B, T, device, False, "fla GLAForCausalLM (defaults, chunk mode)", p)
    built.info.update(matched)
    return built


# ---- agreement checks ----------------------------------------------------------------------
def _rel(a, b) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def _timed(fn, reps: int, device) -> tuple[float, float]:
    """(ms per call, peak GiB over the calls) of fn(), after one warm-up call."""
    fn()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    ms = 1e3 * (time.perf_counter() - t0) / reps
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
    return ms, peak


def check_loss(device, N=16_380, d=896, V=64_256, cap=15.0, reps=3) -> dict:
    """The head loss on one batch of hymo_750m: plain against chunked (Triton rows and
    PyTorch rows) under bf16 autocast: agreement of loss, dh, dW; fwd+bwd time and peak."""
    gen = torch.Generator(device).manual_seed(0)
    h = torch.randn(N, d, device=device, generator=gen).requires_grad_()
    w = (torch.randn(V, d, device=device, generator=gen) * d ** -0.5).requires_grad_()
    t = torch.randint(0, V, (N,), device=device, generator=gen)
    paths = {"plain": lambda: plain_softcap_cross_entropy(h, w, t, cap)}
    for backend in ("triton", "torch") if device == "cuda" else ("torch",):
        paths[f"chunked_{backend}"] = (
            lambda b=backend: linear_softcap_cross_entropy(h, w, t, cap, backend=b))
    out, ref = {"shape": f"N={N}, d={d}, V={V}, soft-cap {cap}, bf16 autocast"}, None
    for name, loss_fn in paths.items():
        def run(loss_fn=loss_fn):
            with torch.autocast(device, dtype=torch.bfloat16):
                loss = loss_fn()
            return (loss, *torch.autograd.grad(loss, (h, w)))
        ms, peak = _timed(run, reps, device)
        got = run()
        row = {"fwd_bwd_ms": round(ms, 3), "peak_GiB": round(peak, 3)}
        if ref is None:
            ref = got
        else:
            row.update({f"rel_{k}": _rel(a, b) for k, a, b in zip(("loss", "dh", "dW"), got,
                                                                    ref, strict=True)})
        out[name] = row
    return out


def check_gdn_block(device, B=4, T=4096, reps=5) -> dict:
    """One hymo_750m GDN block, compiled against eager (bf16 autocast): output and every
    gradient, and the fwd+bwd time of each."""
    return _check_block(GDNBlock, device, B, T, reps)


def check_mla_block(device, B=4, T=4096, reps=5) -> dict:
    """The same for one MLA block (mla_impl: its attention sublayer compiled; the MoE
    eager in both)."""
    return _check_block(MLABlock, device, B, T, reps)


def check_moe(device, B=4, T=4096, reps=5) -> dict:
    """One hymo_750m MoE layer (the grouped dispatch on sm90), its experts' activation
    (swiglu_impl) eager against compiled, routed and shared experts alike."""
    return _check_block(DeepSeekMoE, device, B, T, reps, switch="swiglu_impl")


def _check_block(kind, device, B, T, reps, switch="impl") -> dict:
    config = replace(load_config("hymo_750m").model, max_seq_len=T)
    torch.manual_seed(0)
    with torch.device(device):
        block = kind(config, layer_idx=1)
        x = torch.randn(B, T, config.dim).requires_grad_()
        r = torch.randn(B, T, config.dim)
    params = [x, *(p for p in block.parameters() if p.requires_grad)]
    out, ref = {"shape": f"B={B}, T={T}, bf16 autocast"}, None
    for impl in ("eager", "compiled"):
        setattr(block, switch, impl)
        t0 = time.perf_counter()

        def run():
            with torch.autocast(device, dtype=torch.bfloat16):
                y = block(x)
            return (y, *torch.autograd.grad((y.float() * r).sum(), params,
                                            allow_unused=True))
        got = run()  # first call: compiles
        first = time.perf_counter() - t0
        ms, peak = _timed(run, reps, device)
        row = {"fwd_bwd_ms": round(ms, 3), "peak_GiB": round(peak, 3),
               "first_call_s": round(first, 1)}
        if ref is None:
            ref = got
        else:
            rels = [_rel(a, b) for a, b in zip(got, ref, strict=True)
                    if a is not None and b is not None]
            row.update({"rel_output": rels[0], "rel_grad_x": rels[1],
                        "max_rel_param_grad": max(rels[2:])})
        out[impl] = row
    return out
