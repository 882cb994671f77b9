"""The shared number formatter: significant digits, no float noise, a dash for no value."""

import math

import numpy as np
import pytest

from lsbcore.number_text import MISSING, number_text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (6e-16, "6e-16"),  # the TV once printed as 0.0000000000000006
        (0.0661234, "0.0661"),
        (2.2, "2.2"),
        (18.0, "18"),
        (999.7, "1,000"),  # rounded before the notation is chosen, never "1e+03"
        (32123.4, "32,100"),
        (-32123.0, "-32,100"),
        (0.00012345, "1.23e-4"),
        (1.8e15, "1.8e15"),
        (0.0, "0"),
        (12345, "12,345"),  # an integer keeps every digit
        (np.int64(12345), "12,345"),
        (np.float64(3.3), "3.3"),
        (math.inf, "∞"),
        (True, "yes"),
    ],
)
def test_numbers_read_with_three_significant_digits(value, text):
    assert number_text(value) == text


def test_no_value_is_a_dash_never_none_or_nan():
    assert number_text(None) == MISSING == "—"
    assert number_text(float("nan")) == MISSING
    assert number_text(None, missing="n/a") == "n/a"


def test_a_floor_hides_rounding_noise():
    assert number_text(6e-16, floor=1e-12) == "< 1e-12"
    assert number_text(-6e-16, floor=1e-12) == "< 1e-12"
    assert number_text(2e-12, floor=1e-12) == "2e-12"
    assert number_text(0.0, floor=1e-12) == "0"  # an exact zero is not noise


def test_digits_are_validated():
    assert number_text(1 / 3, digits=2) == "0.33"
    for bad in (0, 16, 2.0, True):
        with pytest.raises(ValueError, match="digits"):
            number_text(1.0, digits=bad)
