"""The shape tracer on the mini model, on meta-device production modules, its table,
filters and errors."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from hymo_mini.analysis.trace import ShapeTable, describe, trace_shapes
from hymo_mini.config import load_config
from hymo_mini.model import HyMo


@pytest.fixture(scope="module")
def mini_model():
    torch.manual_seed(0)
    return HyMo(load_config("hymo_mini").model).eval()


def tokens(b=2, t=16, device=None):
    return torch.zeros(b, t, dtype=torch.long, device=device)


def test_describe():
    assert describe(torch.zeros(2, 3)) == "(2, 3)"
    assert describe(torch.zeros(5)) == "(5,)"
    assert describe(torch.zeros(2, 3, dtype=torch.long)) == "(2, 3) int64"
    assert describe((torch.zeros(1), 0)) == "((1,), 0)"
    assert describe((torch.zeros(4, 2),)) == "(4, 2)"
    assert describe([torch.zeros(1), None]) == "[(1,), None]"
    assert describe({"a": torch.zeros(2, 2)}) == "{a: (2, 2)}"
    assert describe(nn.Linear(2, 2)) == "Linear"  # no repr, no address


def test_mini_trace_rows(mini_model):
    config = mini_model.config
    table = trace_shapes(mini_model, tokens())
    root = table.rows[0]
    assert (root.path, root.depth, root.kind) == ("", 0, "HyMo")
    assert root.inputs == "(2, 16) int64" and root.outputs == "(2, 16, 256)"
    assert root.params == sum(p.numel() for p in mini_model.parameters())
    layers = table.filter(pattern=r"^layers\.\d+$")
    assert [r.kind for r in layers] == ["MLABlock" if k == "mla" else "GDNBlock"
                                        for k in config.layer_types]
    for i, row in enumerate(layers):
        assert row.inputs == row.outputs == "(2, 16, 64)"
        assert row.params == sum(p.numel() for p in mini_model.layers[i].parameters())
    # calls come parents first, in execution order
    paths = [r.path for r in table.filter(depth=1)]
    assert paths == ["", "embed", "norm", "head"]  # ModuleList has no forward
    g, a = config.gdn_positions[0], config.mla_positions[0]
    rope = table.filter(pattern=rf"^layers\.{g}\.mixer\.rope$")
    assert rope.rows[0].inputs == "((2, 16, 4, 16), 0)"
    assert len(rope) == 2  # b, then c
    wkv_a = table.filter(pattern=rf"^layers\.{a}\.attn\.wkv_a$").rows[0]
    assert wkv_a.outputs == f"(2, 16, {config.kv_lora_rank + config.qk_rope_head_dim})"
    assert table.filter(kind="DeepSeekMoE").rows[0].outputs == "(2, 16, 64)"


def test_depth_limit_and_loss_method(mini_model):
    shallow = trace_shapes(mini_model, tokens(), depth=2)
    assert max(r.depth for r in shallow) == 2
    assert len(shallow) == len(trace_shapes(mini_model, tokens()).filter(depth=2))
    loss_trace = trace_shapes(mini_model, tokens(), method="loss", depth=3)
    mtp = loss_trace.filter(pattern=r"^mtp\.blocks\.\d+$")
    assert [r.outputs for r in mtp] == ["(2, 14, 64)", "(2, 13, 64)"]  # 15 read, 1 predicted
    assert loss_trace.rows[0].outputs.startswith("((), {main: ()")  # (total, parts)
    # the head runs once for the main logits and once per MTP depth
    assert [r.outputs for r in loss_trace.filter(pattern="^head$")] == [
        "(2, 15, 256)", "(2, 14, 256)", "(2, 13, 256)"]


def test_deterministic_text_and_html(mini_model):
    a = trace_shapes(mini_model, tokens(), depth=2)
    b = trace_shapes(mini_model, tokens(), depth=2)
    assert str(a) == str(b) and a._repr_html_() == b._repr_html_()
    text = str(a)
    assert "0x" not in text and text.splitlines()[0].split() == [
        "module", "class", "input", "shapes", "output", "shapes", "params"]
    mla = f"layers.{mini_model.config.mla_positions[0]}"
    assert f"{mla} " in text and f"{mla}.attn" not in text  # depth 2 stops above attn
    assert f"{mla}.attn" in str(trace_shapes(mini_model, tokens(), depth=3))
    html = a._repr_html_()
    assert html.startswith("<table") and html.count("<tr>") == len(a) + 1
    assert isinstance(a.filter(pattern="attn"), ShapeTable)


def test_hooks_are_removed(mini_model):
    trace_shapes(mini_model, tokens())
    for module in mini_model.modules():
        assert not module._forward_hooks and not module._forward_pre_hooks


def test_production_attention_on_meta():
    """Section 4.4's shapes, traced on the meta device: no memory is allocated."""
    config = load_config("hymo_750m").model
    with torch.device("meta"):
        model = HyMo(config)
    x = torch.zeros(2, 128, config.dim, device="meta")
    table = trace_shapes(model.layers[config.mla_positions[0]].attn, x)
    rows = {r.path: r for r in table}
    assert rows["wq_a"].outputs == "(2, 128, 224)"
    assert rows["wq_b"].outputs == "(2, 128, 2048)"
    assert rows["wkv_a"].outputs == "(2, 128, 160)"
    assert rows["wkv_b"].outputs == "(2, 128, 896)"  # 4 groups x (96 + 128)
    assert rows["wo"].inputs == "(2, 128, 2048)" and rows["wo"].outputs == "(2, 128, 896)"
    assert table.rows[0].params == 2_755_040


def test_production_model_on_meta():
    config = load_config("hymo_750m").model
    with torch.device("meta"):
        model = HyMo(config)
    table = trace_shapes(model, tokens(2, 128, device="meta"), depth=2)
    assert table.rows[0].outputs == "(2, 128, 64256)"
    assert len(table.filter(pattern=r"^layers\.\d+$")) == 32


def test_errors(mini_model):
    with pytest.raises(TypeError, match="nn.Module"):
        trace_shapes(lambda x: x, tokens())
    with pytest.raises(ValueError, match="depth"):
        trace_shapes(mini_model, tokens(), depth=-1)
    with pytest.raises(AttributeError):
        trace_shapes(mini_model, tokens(), method="no_such_method")
    small = HyMo(dataclasses.replace(mini_model.config, n_layers=4))
    with pytest.raises(ValueError, match="2-D"):  # the model's own error passes through
        trace_shapes(small, torch.zeros(3, dtype=torch.long))
    for module in small.modules():  # and the hooks are gone after an error too
        assert not module._forward_hooks and not module._forward_pre_hooks
