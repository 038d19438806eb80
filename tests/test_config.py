"""Config: presets, the documented production values, derived fields, YAML round trip and
every validation rule (each must raise ConfigError naming the field at fault)."""

from __future__ import annotations

import dataclasses

import pytest

from hymo_mini.config import (
    ConfigError,
    HyMoConfig,
    ModelConfig,
    SchedulerConfig,
    TrainingConfig,
    config_from_dict,
    config_to_dict,
    dump_config,
    load_config,
    preset_names,
)


def test_presets_load():
    assert {"hymo_mini", "hymo_750m"} <= set(preset_names())
    for name in ("hymo_mini", "hymo_750m"):
        config = load_config(name)
        assert isinstance(config, HyMoConfig)
        assert config.run.name == name


def test_production_values_match_the_document():
    m = load_config("hymo_750m").model
    documented = dict(
        vocab_size=64_256, dim=896, n_layers=32, n_heads=16, n_kv_groups=4, head_dim=128,
        qk_rope_head_dim=32, v_head_dim=128, q_lora_rank=224, kv_lora_rank=128,
        rope_theta=10_000.0, max_seq_len=4096, gdn_d_inner=1280, gdn_headdim=32,
        gdn_d_state=32, gdn_d_conv=4, n_routed_experts=16, n_shared_experts=1,
        n_activated_experts=2, moe_inter_dim=2304, capacity_factor=1.5, mtp_depth=2,
        mtp_loss_weights=(0.3, 0.1), logit_softcap=15.0, router_init_std=0.006,
        load_ema_alpha=0.001, load_deadband=0.05,
    )
    for name, value in documented.items():
        assert getattr(m, name) == value, name
    # derived
    assert m.qk_nope_head_dim == 96
    assert m.gdn_n_heads == 40
    assert m.heads_per_group == 4
    # the document's closing figure; its text's {0, 4, ..., 28} is mla_position="first"
    assert m.mla_position == "last" and m.mla_positions == (3, 7, 11, 15, 19, 23, 27, 31)
    assert len(m.gdn_positions) == 24
    assert m.layer_types.count("mla") == 8 and m.layer_types.count("gdn") == 24
    # section 2.5.3 writes "1.5 * (4 * 4096 * 2) / 16 = 1.5 * 512 = 768"; the bracket is
    # 32768 and 32768 / 16 = 2048, so the capacity is 3072 slots per expert
    assert m.moe_capacity(4 * 4096) == 3072 != 768
    # the production defaults of ModelConfig are the preset
    assert ModelConfig() == m


def test_derived_layout_variants():
    m = ModelConfig()
    assert m.mla_positions == (3, 7, 11, 15, 19, 23, 27, 31)  # MLA last in each group of four
    assert m.nope_gdn_positions == ()
    nope = dataclasses.replace(m, nope_hybrid_gdn=True)
    assert nope.nope_gdn_positions == (2, 6, 10, 14, 18, 22, 26, 30)  # just before each MLA
    text = dataclasses.replace(m, mla_position="first")  # the layout of the document's text
    assert text.mla_positions == (0, 4, 8, 12, 16, 20, 24, 28)
    assert dataclasses.replace(text, nope_hybrid_gdn=True).nope_gdn_positions == (
        3, 7, 11, 15, 19, 23, 27)  # the document's list
    all_gdn = dataclasses.replace(m, mla_every=0)
    assert all_gdn.mla_positions == () and all_gdn.layer_types == ("gdn",) * 32
    all_mla = dataclasses.replace(m, mla_every=1)
    assert all_mla.gdn_positions == () and all_mla.nope_gdn_positions == ()
    mini = load_config("hymo_mini").model
    assert mini.layer_types == ("gdn", "gdn", "gdn", "mla", "gdn", "gdn", "gdn", "mla")
    assert mini.moe_capacity(1) == 1  # never zero slots


def test_yaml_round_trip(tmp_path):
    for name in ("hymo_mini", "hymo_750m"):
        config = load_config(name)
        path = tmp_path / f"{name}.yaml"
        text = dump_config(config, path)
        assert path.read_text() == text
        assert load_config(path) == config
        assert config_from_dict(config_to_dict(config)) == config


def test_frozen():
    config = load_config("hymo_mini")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.model.dim = 128  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.model = ModelConfig()  # type: ignore[misc]


def test_replace_revalidates():
    m = load_config("hymo_mini").model
    assert dataclasses.replace(m, dim=32).dim == 32
    with pytest.raises(ConfigError, match="n_kv_groups"):
        dataclasses.replace(m, n_kv_groups=3)


# (field overrides, the field name the message must contain)
MODEL_ERRORS = [
    (dict(n_heads=16, n_kv_groups=3), "n_kv_groups"),
    (dict(qk_rope_head_dim=31), "qk_rope_head_dim"),
    (dict(qk_rope_head_dim=130), "qk_rope_head_dim"),
    (dict(gdn_rope_dim=33), "gdn_rope_dim"),
    (dict(gdn_rope_dim=34), "gdn_rope_dim"),
    (dict(gdn_d_inner=1000), "gdn_d_inner"),
    (dict(n_activated_experts=17), "n_activated_experts"),
    (dict(mtp_loss_weights=(0.3,)), "mtp_loss_weights"),
    (dict(mtp_depth=3), "mtp_loss_weights"),
    (dict(mtp_loss_weights=(0.3, -0.1)), "mtp_loss_weights"),
    (dict(dim=0), "dim"),
    (dict(dim=-8), "dim"),
    (dict(n_layers=0), "n_layers"),
    (dict(vocab_size=-1), "vocab_size"),
    (dict(moe_inter_dim=0), "moe_inter_dim"),
    (dict(n_routed_experts=0, n_activated_experts=0), "n_routed_experts"),
    (dict(capacity_factor=0.0), "capacity_factor"),
    (dict(norm_eps=0.0), "norm_eps"),
    (dict(dim=896.0), "dim"),
    (dict(dim=True), "dim"),
    (dict(logit_softcap=-1.0), "logit_softcap"),
    (dict(mtp_depth=-1, mtp_loss_weights=()), "mtp_depth"),
    (dict(mla_position="middle"), "mla_position"),
    (dict(load_ema_alpha=1.5), "load_ema_alpha"),
    (dict(gdn_residual="none"), "gdn_residual"),
    (dict(gdn_backend="cuda"), "gdn_backend"),
    (dict(embed_init="xavier"), "embed_init"),
    (dict(gdn_rule="delta-net"), "gdn_rule"),
    (dict(mla_every=-1), "mla_every"),
]


@pytest.mark.parametrize("overrides, field_name", MODEL_ERRORS)
def test_model_validation_names_the_field(overrides, field_name):
    with pytest.raises(ConfigError, match=field_name):
        ModelConfig(**overrides)


def test_other_section_errors():
    with pytest.raises(ConfigError, match="decay_frac"):
        SchedulerConfig(warmup_frac=0.1, stable_frac=0.8, decay_frac=0.2)
    with pytest.raises(ConfigError, match="warmup_frac"):
        SchedulerConfig(warmup_frac=-0.1, stable_frac=0.9, decay_frac=0.2)
    with pytest.raises(ConfigError, match="seq_len"):
        HyMoConfig(model=ModelConfig(max_seq_len=128), training=TrainingConfig(seq_len=256))
    with pytest.raises(ConfigError, match="dtype"):
        TrainingConfig(dtype="float8")
    with pytest.raises(ConfigError, match="batch_size"):
        TrainingConfig(batch_size=0)
    with pytest.raises(ConfigError, match="name"):
        config_from_dict({"optimizer": {"name": "sgd"}})
    with pytest.raises(ConfigError, match="betas"):
        config_from_dict({"optimizer": {"betas": [0.9, 1.0]}})


def test_yaml_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown section"):
        config_from_dict({"modle": {}})
    with pytest.raises(ConfigError, match=r"ModelConfig.*dimm.*\(did you mean 'dim'\?\)"):
        config_from_dict({"model": {"dimm": 3}})
    with pytest.raises(ConfigError, match=r"unknown section\(s\) \['modle'\] \(did you mean"):
        config_from_dict({"modle": {}})
    with pytest.raises(ConfigError) as err:  # nothing close: no suggestion
        config_from_dict({"model": {"zzzzzz": 3}})
    assert "did you mean" not in str(err.value)
    with pytest.raises(ConfigError, match="model"):
        config_from_dict({"model": [1, 2]})
    with pytest.raises(ConfigError, match="mapping"):
        config_from_dict([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown preset"):
        load_config("hymo_9000")
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  n_heads: 16\n  n_kv_groups: 5\n")
    with pytest.raises(ConfigError, match="n_kv_groups"):
        load_config(bad)
    bad.write_text("model:\n  gdn_residual: nope\n")
    with pytest.raises(ConfigError, match="gdn_residual"):
        load_config(bad)
