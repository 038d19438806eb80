"""DeepSeekMoE: routing, capacity, balancing bias, fp32 router, against a plain loop; the
stacked experts; the fast dispatch paths against the reference loop (outputs and gradients,
with and without drops, fp32 and bf16 autocast); no dropping in evaluation mode."""

import copy
from collections import Counter
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.utils import counters
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from hymo_mini import compiling
from hymo_mini.config import ConfigError, ModelConfig, load_config
from hymo_mini.ffn import SwiGLU, activation_for, swiglu_activation, swiglu_param_count
from hymo_mini.model import build_hymo
from hymo_mini.moe import DeepSeekMoE, RoutedExperts, dispatch, moe_param_counts, queue_positions
from hymo_mini.moe.dispatch import resolve_impl
from hymo_mini.moe.layer import swiglu

FAST = ["grouped", "padded"]


@pytest.fixture
def config():
    return load_config("hymo_mini").model


def rel_err(a, b):
    return ((a - b).float().pow(2).mean().sqrt() / b.float().pow(2).mean().sqrt()).item()


def with_impl(moe: DeepSeekMoE, impl: str) -> DeepSeekMoE:
    """A copy of ``moe`` (same weights and routing state) that dispatches with ``impl``."""
    other = copy.deepcopy(moe)
    other.config = replace(other.config, moe_impl=impl)
    return other


def decisive(config, capacity_factor, seed=0, **overrides):
    """A MoE with a decisive, biased router so that loads are uneven."""
    config = replace(config, capacity_factor=capacity_factor, **overrides)
    torch.manual_seed(seed)
    moe = DeepSeekMoE(config)
    with torch.no_grad():
        moe.gate.weight.normal_(0, 1.0)
        moe.expert_bias.copy_(torch.linspace(0.3, -0.1, config.n_routed_experts))
    return moe


def loop_reference(moe: DeepSeekMoE, x: torch.Tensor):
    """Token by token, choice by choice: the literal reading of the routing rules."""
    moe = copy.deepcopy(moe).double()
    xs = x.reshape(-1, moe.dim).double()
    n, E, k = xs.shape[0], moe.n_routed, moe.top_k
    capacity = moe.config.moe_capacity(n) if moe.training else n
    probs = torch.softmax(xs @ moe.gate.weight.double().T, dim=-1)  # (n, e)
    chosen = [torch.topk(probs[i] + moe.expert_bias.double(), k).indices.tolist()
              for i in range(n)]
    used = [0] * E
    kept = [[False] * k for _ in range(n)]
    for slot in range(k):  # first choices before second choices
        for i in range(n):  # then token order
            e = chosen[i][slot]
            if used[e] < capacity:
                used[e] += 1
                kept[i][slot] = True
    out = torch.zeros_like(xs)
    for i in range(n):
        for slot in range(k):
            if kept[i][slot]:
                e = chosen[i][slot]
                w1, w3, w2 = moe.experts.w1[e], moe.experts.w3[e], moe.experts.w2[e]
                out[i] += probs[i, e] * (w2 @ (F.silu(w1 @ xs[i]) * (w3 @ xs[i])))
        for shared in moe.shared_experts:
            out[i] += shared(xs[i])
    return out.reshape(x.shape), torch.tensor(chosen), torch.tensor(kept)


# ---- the experts ------------------------------------------------------------------------
def test_swiglu_matches_formula_and_has_no_bias():
    ffn = SwiGLU(8, 12)
    x = torch.randn(3, 8)
    ref = F.silu(x @ ffn.w1.weight.T) * (x @ ffn.w3.weight.T) @ ffn.w2.weight.T
    assert rel_err(ffn(x), ref) < 1e-6
    assert rel_err(swiglu(x, ffn.w1.weight, ffn.w3.weight, ffn.w2.weight), ref) < 1e-6
    assert sum(p.numel() for p in ffn.parameters()) == swiglu_param_count(8, 12) == 3 * 8 * 12


def test_stacked_experts_draw_what_separate_linears_drew(config):
    """The same seed gives the same numbers as E separate SwiGLU modules (the layout before
    the experts were stacked), and the gate and shared experts after them too."""
    torch.manual_seed(3)
    separate = nn.ModuleList(SwiGLU(config.dim, config.moe_inter_dim)
                             for _ in range(config.n_routed_experts))
    shared = SwiGLU(config.dim, config.moe_inter_dim)
    gate = nn.Linear(config.dim, config.n_routed_experts, bias=False)
    nn.init.normal_(gate.weight, mean=0.0, std=config.router_init_std)
    torch.manual_seed(3)
    moe = DeepSeekMoE(config)
    for e, old in enumerate(separate):
        for name in ("w1", "w3", "w2"):
            assert torch.equal(getattr(moe.experts, name)[e], getattr(old, name).weight), (e, name)
    assert torch.equal(moe.shared_experts[0].w2.weight, shared.w2.weight)
    assert torch.equal(moe.gate.weight, gate.weight)


def test_expert_view_is_a_swiglu_on_the_stack():
    experts = RoutedExperts(3, 8, 16)
    x = torch.randn(5, 8)
    view = experts.expert(1)
    assert view.w1.shape == (16, 8) and view.w2.shape == (8, 16)
    copy_ = SwiGLU(8, 16)
    with torch.no_grad():
        for name in ("w1", "w3", "w2"):
            getattr(copy_, name).weight.copy_(getattr(experts, name)[1])
    assert torch.equal(view(x), copy_(x))
    view(x).square().sum().backward()  # gradients reach the stacked parameters, row 1 only
    assert experts.w1.grad[1].abs().sum() > 0 and experts.w2.grad[1].abs().sum() > 0
    assert experts.w1.grad[0].abs().sum() == 0 == experts.w3.grad[2].abs().sum()
    with pytest.raises(IndexError, match=r"\[0, 3\)"):
        experts.expert(3)


def test_shapes_and_param_count(config):
    moe = DeepSeekMoE(config)
    x = torch.randn(2, 7, config.dim)
    assert moe(x).shape == (2, 7, config.dim)
    r = moe.route(x)
    n, E, k = 14, config.n_routed_experts, config.n_activated_experts
    assert r.probs.shape == (n, E) and r.indices.shape == (n, k) and r.kept.shape == (n, k)
    assert r.position.shape == (n, k) and r.by_expert.shape == (n * k,)
    stored, _ = moe_param_counts(config)
    assert sum(p.numel() for p in moe.parameters()) == stored
    assert moe.experts.w1.shape == (E, config.moe_inter_dim, config.dim)
    assert moe.experts.w2.shape == (E, config.dim, config.moe_inter_dim)


def test_production_counts_and_capacity():
    big = ModelConfig()  # hymo_750m defaults; counted, not built
    assert moe_param_counts(big) == (105_297_920, 18_593_792)
    assert big.moe_capacity(4 * 4096) == 3072  # the document says 768


# ---- routing and capacity ---------------------------------------------------------------
@pytest.mark.parametrize("n_experts, a", [(4, 30), (5, 1), (1, 7), (16, 64), (3, 0)])
def test_queue_positions_match_the_cumsum_rule(n_experts, a):
    """The sort-based positions equal the one-hot cumsum (the old code) and a plain count."""
    order = torch.randint(0, n_experts, (a,))
    order[: a // 2] = order[: a // 2].clamp(max=max(n_experts - 2, 0))  # an expert left empty
    position, by_expert, counts = queue_positions(order, n_experts)
    one_hot = F.one_hot(order, n_experts)  # (a, e)
    assert torch.equal(position, (one_hot.cumsum(0) * one_hot).sum(-1) - 1)
    seen = [0] * n_experts
    for i, e in enumerate(order.tolist()):
        assert position[i] == seen[e]
        seen[e] += 1
    assert counts.tolist() == seen
    assert torch.equal(order[by_expert], order.sort(stable=True).values)
    assert torch.equal(by_expert.sort().values, torch.arange(a))  # a permutation


@pytest.mark.parametrize("impl", ["loop", *FAST])
@pytest.mark.parametrize("capacity_factor", [0.3, 1.5])
def test_forward_matches_loop_with_capacity(config, capacity_factor, impl):
    config = replace(config, n_routed_experts=5, n_activated_experts=2, n_shared_experts=2)
    moe = with_impl(decisive(config, capacity_factor), impl)
    x = torch.randn(3, 11, config.dim)
    y = moe(x)
    ref, chosen, kept = loop_reference(moe, x)
    r = moe.route(x)
    assert torch.equal(r.indices, chosen)
    assert torch.equal(r.kept, kept)
    assert rel_err(y, ref) < 1e-5
    counts = torch.bincount(chosen.flatten(), minlength=5)
    assert torch.equal(moe.last_counts, counts)
    dropped = int((counts - r.capacity).clamp(min=0).sum())
    assert isinstance(moe.last_dropped, torch.Tensor) and moe.last_dropped.ndim == 0
    assert int(moe.last_dropped) == dropped == int((~kept).sum())
    assert moe.last_capacity == moe.config.moe_capacity(33)
    if capacity_factor < 1:
        assert dropped > 0  # the test must exercise dropping
        assert r.kept[:, 0].sum() >= r.kept[:, 1].sum()


def test_combine_weights(config):
    moe = DeepSeekMoE(replace(config, capacity_factor=0.25))
    x = torch.randn(4, 9, config.dim)
    r = moe.route(x)
    assert (~r.kept).any()
    assert (r.combine[~r.kept] == 0).all()
    assert torch.equal(r.combine[r.kept], r.probs.gather(-1, r.indices)[r.kept])
    # not renormalised: the kept weights of a token sum to less than 1
    assert (r.weights.sum(-1) < 1).all()


def test_bias_changes_choice_not_weight(config):
    moe = DeepSeekMoE(config)
    x = torch.randn(2, 6, config.dim)
    with torch.no_grad():
        moe.expert_bias[3] = 10.0
    r = moe.route(x)
    assert (r.indices[:, 0] == 3).all()
    assert torch.equal(r.weights[:, 0], r.probs[:, 3])  # the unbiased probability
    assert (r.weights[:, 0] < 0.5).all()


# ---- the fast paths against the loop ----------------------------------------------------
def run(moe, x, grad):
    """Output and gradients (x, gate, every expert weight, shared experts) of one fwd+bwd."""
    x = x.clone().requires_grad_(True)
    y = moe(x)
    y.backward(grad.to(y.dtype))
    grads = {"x": x.grad, **{n: p.grad for n, p in moe.named_parameters()}}
    return y, grads


@pytest.mark.parametrize("impl", FAST)
@pytest.mark.parametrize("capacity_factor", [0.3, 8.0])
@pytest.mark.parametrize("shape", [(3, 11), (1, 1), (2, 16)])
def test_fast_paths_equal_the_loop_fp32(config, impl, capacity_factor, shape):
    moe = decisive(config, capacity_factor)
    x = torch.randn(*shape, config.dim)
    grad = torch.randn(*shape, config.dim)
    y_ref, g_ref = run(with_impl(moe, "loop"), x, grad)
    y, g = run(with_impl(moe, impl), x, grad)
    assert rel_err(y, y_ref) < 1e-6
    assert g.keys() == g_ref.keys()
    for name, ref in g_ref.items():
        if ref.abs().sum() == 0:  # an expert that served no token gets exact zeros
            assert g[name].abs().sum() == 0, name
        else:
            assert rel_err(g[name], ref) < 1e-5, name
    if capacity_factor < 1 and shape == (3, 11):
        assert moe.route(x).kept.logical_not().any()  # dropping is exercised


@pytest.mark.parametrize("impl", FAST)
@pytest.mark.parametrize("capacity_factor", [0.3, 8.0])
def test_fast_paths_equal_the_loop_under_bf16_autocast(config, impl, capacity_factor):
    moe = decisive(config, capacity_factor)
    x = torch.randn(3, 11, config.dim)
    grad = torch.randn(3, 11, config.dim)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y_ref, g_ref = run(with_impl(moe, "loop"), x, grad)
        y, g = run(with_impl(moe, impl), x, grad)
    assert y.dtype == y_ref.dtype == torch.bfloat16
    assert rel_err(y, y_ref) < 1e-2
    for name, ref in g_ref.items():
        assert g[name].dtype == torch.float32 and torch.isfinite(g[name]).all(), name
        if ref.abs().sum() > 0:
            assert rel_err(g[name], ref) < 2e-2, name


def _grouped_fwd_bwd(moe, x, grad, recompute, autocast):
    """routed_grouped's output and gradients, and how often the backward ran each op."""
    r = moe.route(x.detach())
    x = x.clone().requires_grad_(True)
    combine = r.combine.detach().requires_grad_(True)
    r = replace(r, combine=combine)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        y = dispatch.routed_grouped(x, r, moe.experts, recompute=recompute)
    with OpCounter() as ops:
        y.backward(grad.to(y.dtype))
    names = ("w1", "w3", "w2")
    grads = [x.grad, combine.grad, *(getattr(moe.experts, n).grad for n in names)]
    for n in names:
        getattr(moe.experts, n).grad = None
    return y, grads, ops.counts


class OpCounter(TorchDispatchMode):
    def __enter__(self):
        self.counts = Counter()
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


NO_CPU_GROUPED_MM = pytest.mark.skipif(
    not dispatch.grouped_mm_supported(torch.device("cpu"), torch.bfloat16, 64, 128),
    reason="this torch has no CPU _grouped_mm")


@NO_CPU_GROUPED_MM
@pytest.mark.parametrize("autocast", [False, True])
def test_grouped_path_recomputes_casts_and_swiglu(config, autocast):
    """routed_grouped(recompute=True) gives the very same numbers as without; its backward
    re-runs the gather and the SiLU, never a grouped product's forward or a weight's cast."""
    moe = decisive(config, 0.3)
    x = torch.randn(33, config.dim)
    grad = torch.randn(33, config.dim)
    y0, g0, ops0 = _grouped_fwd_bwd(moe, x, grad, False, autocast)
    y1, g1, ops1 = _grouped_fwd_bwd(moe, x, grad, True, autocast)
    assert torch.equal(y0, y1)
    for a, b in zip(g0, g1, strict=True):
        assert torch.equal(a, b)
    assert ops1["_grouped_mm"] == ops0["_grouped_mm"]  # only the gradients' products
    assert ops1["silu"] == ops0["silu"] + 2  # SiLU(h1) for its own slot and for the product
    # the gathered rows, once for each product that reads them (x W1, x W3), x cast to
    # bf16 with them, and the output rows in token order; the expert weights' casts are
    # kept from the forward
    assert ops1["index_select"] == ops0["index_select"] + 3
    assert ops1["_to_copy"] == ops0["_to_copy"] + (2 if autocast else 0)


@NO_CPU_GROUPED_MM
def test_grouped_path_keeps_the_cast_weights():
    """The backward reads the experts' bf16 casts the forward made (each unpacking gives the
    same tensor), not a fresh cast: casting three (e, inter, dim) weights again per layer
    cost more time than the products they are kept for."""
    moe = decisive(load_config("hymo_mini").model, 8.0)
    x = torch.randn(16, moe.config.dim, requires_grad=True)
    r = moe.route(x.detach())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = dispatch.routed_grouped(x, r, moe.experts, recompute=True)

    def saved_weights(y):
        nodes, seen, out = [y.grad_fn], set(), []
        while nodes:
            node = nodes.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            if "GroupedMm" in node.name():  # its weight operand, by this torch's name
                name = "_saved_mat2" if hasattr(node, "_saved_mat2") else "_saved_mat_b"
                out.append(getattr(node, name))
            nodes += [f for f, _ in node.next_functions]
        return out

    a, b = saved_weights(y), saved_weights(y)
    assert len(a) == 3 and all(s.dtype == torch.bfloat16 for s in a)
    assert all(u.data_ptr() == v.data_ptr() for u, v in zip(a, b, strict=True))


@NO_CPU_GROUPED_MM
def test_grouped_path_refuses_inputs_changed_before_the_backward(config):
    """x changed in place between forward and backward: the recomputed gather would read
    the new values, so the backward says so instead. An expert weight changed in place is
    no such case: the backward reads the bf16 cast the forward made (as autocast's own
    casts are kept), so its gradients are those of the forward's weights."""
    moe = with_impl(decisive(config, 8.0), "grouped")
    base = torch.randn(2, 8, config.dim, requires_grad=True)
    x = base * 1.0
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = moe(x)
    with torch.no_grad():
        x.mul_(2.0)
    with pytest.raises(RuntimeError, match=r"recompute=True.*modified in place.*recompute=False"):
        y.float().sum().backward()
    grads = []
    for change in (False, True):
        moe.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = moe(base)
        if change:
            with torch.no_grad():
                moe.experts.w2.mul_(2.0)
        y.float().sum().backward()
        grads.append(moe.experts.w1.grad.clone())
    assert torch.equal(grads[0], grads[1])


@NO_CPU_GROUPED_MM
def test_grouped_path_backward_twice_with_retain_graph(config):
    """Two backwards through one graph (retain_graph) give twice the gradients."""
    moe = decisive(config, 0.3)
    x = torch.randn(3, 11, config.dim, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = with_impl(moe, "grouped")(x)
    y.float().square().sum().backward(retain_graph=True)
    once = x.grad.clone()
    y.float().square().sum().backward()
    assert torch.equal(x.grad, 2 * once)


@pytest.mark.parametrize("impl", ["loop", *FAST])
def test_no_tokens(config, impl):
    moe = with_impl(DeepSeekMoE(config), impl)
    assert moe(torch.randn(2, 0, config.dim)).shape == (2, 0, config.dim)
    assert int(moe.last_dropped) == 0


def test_gradients_reach_gate_and_experts(config):
    moe = DeepSeekMoE(config)
    x = torch.randn(2, 16, config.dim, requires_grad=True)
    moe(x).square().sum().backward()
    assert moe.gate.weight.grad is not None and moe.gate.weight.grad.abs().sum() > 0
    r = moe.route(x)
    used = set(r.indices[r.kept].tolist())
    for e in range(config.n_routed_experts):
        grads = [getattr(moe.experts, name).grad[e] for name in ("w1", "w3", "w2")]
        assert all((g.abs().sum() > 0) == (e in used) for g in grads), e
    for p in moe.shared_experts.parameters():
        assert p.grad.abs().sum() > 0
    assert x.grad.abs().sum() > 0
    assert not moe.expert_bias.requires_grad


def test_grouped_path_flops_match_the_loop_when_nothing_is_dropped(config):
    """FlopCounterMode counts ``_grouped_mm`` (hymo_mini registers its formula)."""
    moe = DeepSeekMoE(replace(config, capacity_factor=8.0))
    x = torch.randn(3, 10, config.dim)

    def count(impl):
        with FlopCounterMode(display=False) as counter:
            with_impl(moe, impl)(x)
        return counter.get_total_flops()

    assert count("grouped") == count("loop") > 0


# ---- the compiled activation (swiglu_impl) ------------------------------------------------
@pytest.fixture
def aot_eager(monkeypatch):
    monkeypatch.setattr(compiling, "COMPILE_BACKEND", "aot_eager")
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def with_swiglu(moe: DeepSeekMoE, impl: str) -> DeepSeekMoE:
    """A copy of ``moe`` whose experts (routed and shared) take ``swiglu_impl=impl``."""
    other = copy.deepcopy(moe)
    other.swiglu_impl = impl
    assert all(shared.impl == impl for shared in other.shared_experts)
    return other


@pytest.mark.parametrize("impl", FAST)
@pytest.mark.parametrize("autocast", [False, True])
def test_compiled_activation_equals_eager(config, aot_eager, impl, autocast):
    """swiglu_impl="compiled" (traced and differentiated by aot_eager, as inductor would)
    against the eager activation: output and every gradient, with drops."""
    moe = with_impl(decisive(config, 0.3), impl)
    x, grad = torch.randn(3, 11, config.dim), torch.randn(3, 11, config.dim)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        y_ref, g_ref = run(with_swiglu(moe, "eager"), x, grad)
        counters.clear()
        y, g = run(with_swiglu(moe, "compiled"), x, grad)
    assert counters["stats"]["unique_graphs"] >= 1 and not counters["graph_break"]
    assert y.dtype == y_ref.dtype
    assert rel_err(y, y_ref) < (1e-2 if autocast else 1e-6)
    assert g.keys() == g_ref.keys()
    for name, ref in g_ref.items():
        if ref.abs().sum() > 0:
            assert rel_err(g[name], ref) < (2e-2 if autocast else 1e-5), name


def test_swiglu_impl_choice(config):
    x = torch.randn(4, config.dim)
    assert activation_for("auto", x, training=True) is swiglu_activation  # no GPU: eager
    assert activation_for("compiled", x, training=False) is not swiglu_activation
    with pytest.raises(ConfigError, match="swiglu_impl.*'auto', 'eager', 'compiled'"):
        replace(config, swiglu_impl="fused")
    with pytest.raises(ValueError, match="swiglu_impl must be one of"):
        activation_for("Eager", x, training=True)


# ---- choosing the path ------------------------------------------------------------------
def test_moe_impl_is_validated(config):
    with pytest.raises(ConfigError, match="moe_impl.*'auto', 'loop', 'grouped', 'padded'"):
        replace(config, moe_impl="fast")
    x = torch.randn(4, config.dim)
    assert resolve_impl("auto", x, RoutedExperts(4, config.dim, 96)) == "grouped"
    odd = RoutedExperts(4, config.dim, 90)  # 90 fp32 rows: 360 bytes, not 16-byte aligned
    assert resolve_impl("auto", x, odd) == "padded"
    with pytest.raises(ValueError, match="moe_impl='grouped'.*use 'auto' or 'padded'"):
        resolve_impl("grouped", x, odd)
    with pytest.raises(ValueError, match="moe_impl must be one of"):
        resolve_impl("Loop", x, odd)


def test_cuda_rule_for_grouped_mm(monkeypatch):
    """sm90 with bf16 only: elsewhere torch's fallback copies the offsets to the host."""
    cuda = torch.device("cuda", 0)
    for capability, dtype, expected in [((9, 0), torch.bfloat16, True),
                                        ((9, 0), torch.float32, False),
                                        ((10, 0), torch.bfloat16, False),
                                        ((8, 0), torch.bfloat16, False)]:
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device, c=capability: c)
        assert dispatch.grouped_mm_supported(cuda, dtype, 896, 2304) == expected
    assert not dispatch.grouped_mm_supported(cuda, torch.bfloat16, 896, 2300)


def test_training_step_reads_no_values_on_meta(config):
    """On the meta device every value read (.item(), nonzero, bool(tensor)) raises: the
    route, both fast paths, the statistics and the balancing update run there."""
    with torch.device("meta"):
        moe = DeepSeekMoE(config)
        x = torch.randn(2, 16, config.dim, requires_grad=True)
    moe(x).sum().backward()  # the padded path
    assert moe.last_dropped.is_meta and moe.experts.w1.grad.is_meta
    moe.update_bias()
    r = moe.route(x)
    xs = x.detach().reshape(32, config.dim).bfloat16()
    y = dispatch.routed_grouped(xs, r, moe.experts.bfloat16())
    assert y.shape == (32, config.dim) and y.is_meta


# ---- evaluation: nothing is dropped -----------------------------------------------------
@pytest.mark.parametrize("impl", ["loop", *FAST])
def test_eval_outputs_depend_only_on_the_prefix_and_the_sequence(config, impl):
    moe = with_impl(decisive(config, 0.5), impl)
    x = torch.randn(2, 12, config.dim)
    later = x.clone()
    later[:, 6:] = torch.randn(2, 6, config.dim)  # change tokens 6..11
    other = x.clone()
    other[1] = torch.randn(12, config.dim)  # change the second sequence
    with torch.no_grad():
        train_a, train_b = moe(x), moe(later)
        assert int(moe.last_dropped) > 0  # this capacity drops in training...
        assert not torch.allclose(train_a[:, :6], train_b[:, :6], atol=1e-5)  # ...and leaks
        moe.eval()
        a, b, c = moe(x), moe(later), moe(other)
    assert int(moe.last_dropped) == 0 and moe.last_capacity == 24
    assert torch.allclose(a[:, :6], b[:, :6], atol=1e-6)
    assert torch.allclose(a[0], c[0], atol=1e-6)
    ref, _, _ = loop_reference(moe, x)
    assert rel_err(a, ref) < 1e-5


def test_cached_decoding_matches_the_full_forward_at_a_dropping_capacity(config):
    """With a capacity factor that drops in training, a full eval forward and one-token-at-
    a-time decoding give the same logits: evaluation drops nothing."""
    from hymo_mini.generate import HyMoCache, forward_cached
    from hymo_mini.model import HyMo

    model = HyMo(replace(config, n_layers=4, capacity_factor=0.5))  # MLA + MoE at layer 0
    tokens = torch.randint(0, config.vocab_size, (2, 12))
    with torch.no_grad():
        model(tokens)
        assert int(model.moe_layers()[0].last_dropped) > 0  # training mode drops here
        model.eval()
        full = model(tokens)
        cache = HyMoCache.empty(model)
        steps = [forward_cached(model, tokens[:, :4], cache)]
        steps += [forward_cached(model, tokens[:, t:t + 1], cache) for t in range(4, 12)]
    assert rel_err(torch.cat(steps, dim=1), full) < 1e-5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("impl", ["auto", "padded"])
def test_training_step_has_no_host_sync_on_cuda(config, impl):
    moe = with_impl(decisive(config, 0.5), impl).cuda()
    x = torch.randn(4, 64, config.dim, device="cuda", requires_grad=True)
    moe(x)  # the first call may probe and cache what the device supports
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = moe(x)
        y.float().square().mean().backward()
        moe.update_bias()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert int(moe.last_dropped) > 0


# ---- balancing --------------------------------------------------------------------------
def test_update_bias_direction(config):
    config = replace(config, load_ema_alpha=1.0, load_deadband=0.05, bias_update_rate=0.01)
    moe = DeepSeekMoE(config)  # 4 experts: uniform load 0.25, band (0.2375, 0.2625)
    moe.pending_counts.copy_(torch.tensor([40, 25, 35, 0]))
    moe.update_bias()
    assert torch.allclose(moe.load_ema, torch.tensor([0.40, 0.25, 0.35, 0.0]))
    assert torch.allclose(moe.expert_bias, torch.tensor([-0.01, 0.0, -0.01, 0.01]))
    assert moe.pending_counts.sum() == 0
    moe.update_bias()  # nothing seen since: no change
    assert torch.allclose(moe.load_ema, torch.tensor([0.40, 0.25, 0.35, 0.0]))
    assert torch.allclose(moe.expert_bias, torch.tensor([-0.01, 0.0, -0.01, 0.01]))


def test_update_bias_ema_and_counting(config):
    alpha = 0.1
    moe = DeepSeekMoE(replace(config, load_ema_alpha=alpha))
    x1, x2 = torch.randn(2, 8, config.dim), torch.randn(3, 5, config.dim)
    moe(x1)
    c1 = moe.last_counts
    moe(x2)  # two micro-batches in one step
    c2 = moe.last_counts
    moe.eval()
    moe(torch.randn(1, 4, config.dim))  # evaluation does not count
    moe.train()
    expected = (1 - alpha) * torch.full((4,), 0.25) + alpha * (c1 + c2).float() / (c1 + c2).sum()
    moe.update_bias()
    assert torch.allclose(moe.load_ema, expected)


def test_balancing_pulls_a_favoured_expert_to_its_share(config):
    config = replace(config, load_ema_alpha=0.5, bias_update_rate=0.01)
    moe = DeepSeekMoE(config)
    with torch.no_grad():
        moe.gate.weight[0, :] += 0.01  # expert 0 favoured for inputs with a positive mean
    x = torch.randn(4, 32, config.dim) + 1.0  # 128 tokens, fair share 128 * 2 / 4 = 64
    assert moe.route(x).counts[0] == 128  # every token picks expert 0
    late = []
    for step in range(40):
        moe(x)
        moe.update_bias()
        if step >= 30:
            late.append(moe.route(x).counts[0].item())
    assert moe.expert_bias[0] < 0 < moe.expert_bias[1:].min()
    assert 40 <= sum(late) / len(late) <= 90


# ---- precision ---------------------------------------------------------------------------
def test_router_is_fp32_for_bf16(config):
    moe = DeepSeekMoE(config).bfloat16()
    assert moe.expert_bias.dtype == moe.load_ema.dtype == torch.float32
    x = torch.randn(2, 5, config.dim).bfloat16()
    r = moe.route(x)
    assert r.probs.dtype == torch.float32
    ref = torch.softmax(x.reshape(-1, config.dim).float() @ moe.gate.weight.float().T, -1)
    assert torch.equal(r.probs, ref)
    assert moe(x).dtype == torch.bfloat16


def test_router_is_fp32_under_autocast(config):
    moe = DeepSeekMoE(config)
    x = torch.randn(2, 5, config.dim)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        r = moe.route(x)
    assert r.probs.dtype == torch.float32
    assert torch.equal(r.probs, moe.route(x).probs)  # the autocast-free computation


def test_tiny_model_trains_a_step_under_bf16_autocast():
    config = load_config("hymo_mini").model
    model = build_hymo(replace(config, n_layers=4))  # one MLA block (with the MoE), 3 GDN
    tokens = torch.randint(0, config.vocab_size, (2, 16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _ = model.loss(tokens)
    loss.backward()
    assert torch.isfinite(loss)
    for name, p in model.named_parameters():
        assert p.grad is None or torch.isfinite(p.grad).all(), name
    assert model.moe_layers()[0].experts.w1.grad.abs().sum() > 0


def test_bf16_facts_in_the_docstring():
    a, b = torch.tensor(0.1234567), torch.tensor(0.1234570)
    assert a != b  # fp32 tells them apart
    assert a.bfloat16() == b.bfloat16() == 0.12353515625
    assert torch.tensor(1 - 0.001).bfloat16() == 1.0


def test_wrong_dim_raises(config):
    moe = DeepSeekMoE(config)
    with pytest.raises(ValueError, match="dim=64"):
        moe(torch.randn(2, 3, config.dim + 1))


def test_the_grouped_mm_probe_runs_inside_a_checkpointed_forward():
    """The first forward decides whether torch._grouped_mm runs here; when that forward is
    checkpointed, the probe's own tensors must not count as the layer's saved tensors."""
    from hymo_mini.model import build_hymo
    from hymo_mini.moe.dispatch import _cpu_grouped_mm_runs

    _cpu_grouped_mm_runs.cache_clear()
    model = build_hymo(replace(load_config("hymo_mini").model, moe_impl="auto", n_layers=4))
    model.train()
    model.gradient_checkpointing = True
    model.loss(torch.randint(0, 256, (2, 16)))[0].backward()  # raised CheckpointError before
    moe = model.layers[model.config.mla_positions[0]].moe  # the MoE sits on the MLA block
    assert all(p.grad is not None for p in moe.parameters() if p.requires_grad)


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode])
def test_the_grouped_mm_probe_does_not_depend_on_the_first_callers_grad_mode(context):
    """A first forward under no_grad (evaluation, a figure) must not make the probe fail
    and cache "no kernel" for the rest of the process."""
    from hymo_mini.moe.dispatch import _cpu_grouped_mm_runs

    _cpu_grouped_mm_runs.cache_clear()
    expected = _cpu_grouped_mm_runs(torch.float32)
    _cpu_grouped_mm_runs.cache_clear()
    with context():
        assert _cpu_grouped_mm_runs(torch.float32) == expected
    _cpu_grouped_mm_runs.cache_clear()
