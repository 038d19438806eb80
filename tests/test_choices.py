"""hymo_mini.choices: a setting outside its choices gets one line naming the setting, the
choices and the nearest of them."""

import pytest

from hymo_mini.choices import did_you_mean, one_of
from hymo_mini.model_config import did_you_mean as config_did_you_mean


def test_nearest_by_spelling_and_by_distance():
    assert did_you_mean("bf16x", ("tf32x3", "bf16x6")) == " (did you mean 'bf16x6'?)"
    assert did_you_mean("zzzz", ("tf32x3", "bf16x6")) == ""  # nothing close
    assert did_you_mean(20, (16, 32)) == " (did you mean 16?)"  # numbers: by distance
    assert did_you_mean(True, (16, 32)) == ""  # a bool is not a number here
    assert config_did_you_mean is did_you_mean  # one helper, re-exported


def test_one_of_names_the_setting_the_choices_and_the_nearest():
    one_of("auto", "CONFIGS['pairs']", ("levels", "auto"))  # a valid choice: no error
    with pytest.raises(ValueError) as err:
        one_of("leves", "CONFIGS['pairs']", ("levels", "auto"))
    assert str(err.value) == ("CONFIGS['pairs'] must be one of 'levels', 'auto', got 'leves' "
                              "(did you mean 'levels'?)")
    with pytest.raises(ValueError, match=r"block must be one of 16, 32 \(at most the chunk, 64\), "
                                         r"got 24 \(did you mean 16\?\)"):
        one_of(24, "block", (16, 32), " (at most the chunk, 64)")


def test_a_kernel_setting_misspelled_says_what_was_meant(monkeypatch):
    import torch

    from hymo_mini.ops.precision import kernel_precision

    with pytest.raises(ValueError, match=r"got 'bf16x' \(did you mean 'bf16x6'\?\)"):
        kernel_precision(torch.float32, "bf16", forward=False, interpret=True,
                         fp32_products={"forward": "tf32x3", "backward": "bf16x"})
