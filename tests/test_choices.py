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
    one_of("gla", "gdn_rule", ("gla", "delta"))  # a valid choice: no error
    with pytest.raises(ValueError) as err:
        one_of("deltaa", "gdn_rule", ("gla", "delta"))
    assert str(err.value) == ("gdn_rule must be one of 'gla', 'delta', got 'deltaa' "
                              "(did you mean 'delta'?)")
    with pytest.raises(ValueError, match=r"block must be one of 16, 32 \(at most the chunk, 64\), "
                                         r"got 24 \(did you mean 16\?\)"):
        one_of(24, "block", (16, 32), " (at most the chunk, 64)")

