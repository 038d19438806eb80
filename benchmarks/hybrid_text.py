"""The hybrid on real text: layer layouts of one small model, trained alike on English.

Trains each layout of the ``hymo_small`` preset, and a Llama-style transformer of about its
parameter count, for the same steps on the same bytes (the Python documentation's sources,
``hymo-mini fetch-docs``), once per seed, and records for each run: validation bits per
byte, training tokens per second, parameters, and the held-out loss by position in the
sequence (does a layout use the context it has read?). Layouts:

    hybrid_last    3:1 with MLA last in each group of four (the document's)
    hybrid_first   3:1 with MLA first
    gdn_gla        every layer GDN, the gla rule (no MLA, so no MoE either)
    gdn_delta      every layer GDN, the gated delta rule
    mla            every layer MLA, each with its MoE
    llama          Hugging Face's LlamaForCausalLM (RoPE, SwiGLU, RMSNorm), untied, as many
                   layers as fit in hymo_small's stored parameter count

On a GPU (after ``hymo-mini fetch-docs data/python-docs``)::

    python3 benchmarks/hybrid_text.py --data data/python-docs --device cuda \\
        --steps 1000 --seeds 0 1 2 --out book/results/hybrid_text_<gpu>_<date>.json

The JSON is rewritten after every run, so a call cut short keeps the runs it finished.
``--cpu-smoke`` runs two steps of a narrow model per layout on the CPU (a test runs it).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.record import header, out_path  # noqa: E402
from benchmarks.train_step_cases import matched_layers  # noqa: E402
from hymo_mini.analysis.params import count_params  # noqa: E402
from hymo_mini.config import load_config, replace  # noqa: E402
from hymo_mini.data import load_corpus  # noqa: E402
from hymo_mini.optim.schedule import wsd_multiplier  # noqa: E402
from hymo_mini.train import train  # noqa: E402

LAYOUTS = {  # name: the ModelConfig fields that make it (None: the Llama baseline)
    "hybrid_last": {"mla_every": 4, "mla_position": "last"},
    "hybrid_first": {"mla_every": 4, "mla_position": "first"},
    "gdn_gla": {"mla_every": 0, "gdn_rule": "gla"},
    "gdn_delta": {"mla_every": 0, "gdn_rule": "delta"},
    "mla": {"mla_every": 1},
    "llama": None,
}


def base_config(args):
    config = load_config("hymo_small")
    model = config.model
    training = {"max_steps": args.steps, "eval_every": args.steps, "log_every": args.steps}
    if args.cpu_smoke:
        model = replace(model, dim=64, n_layers=4, n_heads=4, n_kv_groups=2, head_dim=16,
                        v_head_dim=16, gdn_d_inner=64, gdn_headdim=16, gdn_d_state=16,
                        moe_inter_dim=96, mtp_inter_dim=96, max_seq_len=64)
        training.update(batch_size=2, seq_len=32, eval_batches=1, dtype="float32")
    return replace(config, model=model, training=replace(config.training, **training))


@torch.no_grad()
def loss_by_position(logits_of, batches) -> list[float]:
    """Mean next-byte loss (nats) at each position of the held-out windows."""
    total = None
    for batch in batches:
        logits = logits_of(batch[:, :-1]).float()  # (b, T, vocab)
        ce = F.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none")  # (b, T)
        total = ce.sum(0) if total is None else total + ce.sum(0)
    return (total / sum(b.shape[0] for b in batches)).tolist()


def run_hymo(name, config, corpus, device, seed) -> dict:
    config = replace(config, model=replace(config.model, **LAYOUTS[name]),
                     run=replace(config.run, seed=seed))
    t = config.training
    result = train(config, corpus, device=device, progress=False)
    model = result.model.eval()
    batches = corpus.to(device).val_batches(t.eval_batches, t.batch_size, t.seq_len)
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16,
                        enabled=t.dtype == "bfloat16"):
        by_position = loss_by_position(model, batches)
    counts = count_params(config)
    return {"params_stored": counts.stored, "params_active": counts.active,
            "layer_types": "".join("A" if k == "mla" else "G" for k in config.model.layer_types),
            "val_bits_per_byte": result.history["val_loss"][-1] / math.log(2),
            "tokens_per_s": result.stats["tokens_per_s"],
            "train_loss_curve": result.history["loss"][:: max(1, t.max_steps // 100)],
            "val_loss_by_position": by_position}


def llama_model(config, target: int, device):
    """The Llama with the most layers whose parameters stay within ``target``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    m = config.model

    def make(layers):
        cfg = LlamaConfig(vocab_size=m.vocab_size, hidden_size=m.dim,
                          intermediate_size=m.moe_inter_dim, num_hidden_layers=layers,
                          num_attention_heads=m.n_heads, num_key_value_heads=m.n_heads,
                          max_position_embeddings=m.max_seq_len, tie_word_embeddings=False)
        return LlamaForCausalLM(cfg)

    def size(layers):  # parameters, embeddings included, counted on the meta device
        with torch.device("meta"):
            return sum(p.numel() for p in make(layers).parameters())
    layers = matched_layers(size, target)
    return make(layers).to(device), layers


def run_llama(config, corpus, device, seed, target) -> dict:
    t, o = config.training, config.optimizer
    torch.manual_seed(seed)
    model, layers = llama_model(config, target, device)
    opt = torch.optim.AdamW(model.parameters(), lr=o.lr, betas=o.betas,
                            weight_decay=o.weight_decay)
    data = corpus.to(device)
    autocast = torch.autocast(torch.device(device).type, dtype=torch.bfloat16,
                              enabled=t.dtype == "bfloat16")
    losses, start = [], time.perf_counter()
    for step in range(t.max_steps):
        for group in opt.param_groups:
            group["lr"] = o.lr * wsd_multiplier(step, t.max_steps, config.scheduler)
        batch = data.batch(step, t.batch_size, t.seq_len, seed=seed)
        with autocast:
            logits = model(input_ids=batch[:, :-1]).logits.float()
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), o.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())
    seconds = time.perf_counter() - start  # (the last step's sync is in the item below)
    losses = [float(x) for x in losses]
    model.eval()
    batches = data.val_batches(t.eval_batches, t.batch_size, t.seq_len)
    with autocast:
        by_position = loss_by_position(lambda x: model(input_ids=x).logits, batches)
    return {"params_stored": sum(p.numel() for p in model.parameters()), "layers": layers,
            "val_bits_per_byte": sum(by_position) / len(by_position) / math.log(2),
            "tokens_per_s": t.max_steps * t.batch_size * t.seq_len / seconds,
            "train_loss_curve": losses[:: max(1, t.max_steps // 100)],
            "val_loss_by_position": by_position}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=None, help="the text folder (default: the "
                        "standard library, for --cpu-smoke)")
    parser.add_argument("--pattern", default="*.rst.txt")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS))
    parser.add_argument("--cpu-smoke", action="store_true", help="2 steps of a narrow model")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.cpu_smoke:
        args.steps, args.device = 2, "cpu"
    config = base_config(args)
    pattern = args.pattern if args.data else "*.py"
    corpus = load_corpus(args.data, max_bytes=20_000_000 if args.data else 400_000,
                         pattern=pattern)
    out = Path(args.out or out_path(f"hybrid_text_{time.strftime('%Y-%m-%d')}.json"))
    report = {**header(args.device, __file__, argv, packages=("transformers",)),
              "benchmark": "hybrid_text", "corpus": corpus.describe(),
              "settings": {"preset": "hymo_small", "steps": args.steps, "seeds": args.seeds,
                           "batch_size": config.training.batch_size,
                           "seq_len": config.training.seq_len,
                           "dtype": config.training.dtype, "layouts": args.layouts},
              "runs": []}
    target = count_params(config).stored
    for seed in args.seeds:  # every layout of a seed before the next seed
        for name in args.layouts:
            began = time.perf_counter()
            try:
                found = (run_llama(config, corpus, args.device, seed, target) if name == "llama"
                         else run_hymo(name, config, corpus, args.device, seed))
            except ImportError as err:  # no transformers here: the baseline is left out
                found = {"error": f"{type(err).__name__}: {err}"}
            report["runs"].append({"layout": name, "seed": seed,
                                   "seconds": time.perf_counter() - began, **found})
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report, indent=1) + "\n")
            print(name, seed, {k: found.get(k) for k in ("val_bits_per_byte", "tokens_per_s",
                                                          "error")}, flush=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
