"""The coverage tool's score: signed, so that its "below log Z" share counts low estimates."""

from __future__ import annotations

import math
from types import SimpleNamespace

from tools.importance_coverage import z_score


def estimate(log_z: float, se: float):
    return SimpleNamespace(log_z=log_z, log_z_se=se)


def test_the_score_is_the_error_in_standard_errors_with_its_sign():
    assert z_score(estimate(9.0, 0.5), 10.0) == -2.0
    assert math.isclose(z_score(estimate(10.3, 0.1), 10.0), 3.0)


def test_without_a_bar_an_exact_estimate_scores_zero_and_a_wrong_one_infinity_of_its_sign():
    assert z_score(estimate(10.0, 0.0), 10.0) == 0.0
    assert z_score(estimate(9.0, 0.0), 10.0) == -math.inf
    assert z_score(estimate(11.0, 0.0), 10.0) == math.inf
