"""Tests for lsbcore.diagnostics.mixing: autocorrelation, paper ESS, bulk ESS / R-hat wrappers."""

import json
import math

import numpy as np
import pytest
from scipy.signal import lfilter

from lsbcore.diagnostics.mixing import (
    MixingSummary,
    autocorrelation,
    ess_bulk,
    ess_bulk_per_chain,
    ess_from_autocorrelation,
    ess_paper,
    rhat,
    summarise_mixing,
)


def direct_autocorrelation(x: np.ndarray, max_lag: int) -> np.ndarray:
    """O(T * max_lag) textbook estimator with explicit loops (reference)."""
    out = np.zeros((x.shape[0], max_lag + 1))
    for b in range(x.shape[0]):
        row = x[b]
        n = len(row)
        c = row - sum(row) / n
        gamma0 = sum(c[t] * c[t] for t in range(n)) / n
        for j in range(max_lag + 1):
            out[b, j] = (sum(c[t] * c[t + j] for t in range(n - j)) / n) / gamma0
    return out


def ar1(phi: float, n_chains: int, n_draws: int, seed: int) -> np.ndarray:
    """Stationary AR(1) chains x_t = phi x_{t-1} + e_t, e_t ~ N(0, 1)."""
    eps = np.random.default_rng(seed).standard_normal((n_chains, n_draws))
    eps[:, 0] /= math.sqrt(1.0 - phi**2)  # x_0 from the stationary N(0, 1 / (1 - phi^2))
    return lfilter([1.0], [1.0, -phi], eps, axis=1)


def theoretical_paper_ess(phi: float, max_lag: int = 500, threshold: float = 0.05) -> float:
    j = np.arange(1, max_lag + 1)
    rho = phi**j
    keep = rho > threshold
    return (max_lag + 1) / (1 + 2 * np.sum(rho[keep] * (1 - j[keep] / (max_lag + 1))))


# --------------------------------------------------------------------------- autocorrelation
def test_autocorrelation_matches_direct_computation():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 300)).cumsum(axis=1)  # strongly correlated random walks
    x[1] = rng.standard_normal(300)  # and one white-noise row
    got = autocorrelation(x, max_lag=60)
    assert got.shape == (3, 61)
    np.testing.assert_allclose(got, direct_autocorrelation(x, 60), rtol=0, atol=1e-12)


def test_autocorrelation_hand_computed():
    # x = 1, 2, 3, 4: centred -1.5, -0.5, 0.5, 1.5; sum of squares 5.
    # lag 1: 0.75 - 0.25 + 0.75 = 1.25; lag 2: -0.75 - 0.75 = -1.5; lag 3: -2.25.
    got = autocorrelation(np.array([[1.0, 2.0, 3.0, 4.0]]), max_lag=3)
    np.testing.assert_allclose(got, [[1.0, 0.25, -0.3, -0.45]], atol=1e-14)


def test_autocorrelation_accepts_torch_tensor():
    torch = pytest.importorskip("torch")
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    np.testing.assert_allclose(autocorrelation(x, 1), [[1.0, 0.25]], atol=1e-14)


def test_constant_chain_is_perfectly_correlated_and_has_ess_one():
    x = np.vstack([np.full(600, 7.0), np.random.default_rng(0).standard_normal(600)])
    rho = autocorrelation(x, 500)
    assert np.all(rho[0] == 1.0)  # convention: constant series -> rho_j = 1
    assert np.all(np.isfinite(rho))
    ess = ess_paper(x)
    # rho_j = 1: sum_{j=1..L} (1 - j/(L+1)) = L - L/2 = L/2, so ESS = (L+1)/(1+L) = 1.
    assert ess[0] == pytest.approx(1.0, abs=1e-12)
    assert ess[1] > 100
    assert summarise_mixing(x).n_constant_chains == 1


# --------------------------------------------------------------------------- paper ESS by hand
def test_ess_paper_hand_computed_value():
    # rho = 1, 0.25, -0.3, -0.45 (see above), L = 3: only lag 1 is > 0.05, with weight
    # 1 - 1/4 = 3/4. ESS = 4 / (1 + 2 * 0.25 * 3/4) = 4 / 1.375 = 32/11.
    got = ess_paper(np.array([[1.0, 2.0, 3.0, 4.0]]), max_lag=3)
    assert got.shape == (1,)
    assert got[0] == pytest.approx(32 / 11, rel=1e-12)


def test_threshold_rule_includes_later_lags_above_threshold():
    # Period-4 square wave, T = 8, mean 0, sum of squares 8. Products x_t x_{t+j} summed:
    #   j: 1   2   3   4   5   6   7
    #      1  -6  -1   4   1  -2  -1   -> rho_j = 1/8, -3/4, -1/8, 1/2, 1/8, -1/4, -1/8
    x = np.array([[1.0, 1.0, -1.0, -1.0, 1.0, 1.0, -1.0, -1.0]])
    rho = autocorrelation(x, 7)
    np.testing.assert_allclose(rho[0], [1, 1 / 8, -3 / 4, -1 / 8, 1 / 2, 1 / 8, -1 / 4, -1 / 8])
    # L = 7, weights 1 - j/8. Lags 1, 4, 5 are > 0.05 (lag 4 and 5 come after negative lags):
    # sum = (1/8)(7/8) + (1/2)(4/8) + (1/8)(3/8) = 26/64; ESS = 8 / (1 + 52/64) = 128/29.
    assert ess_paper(x, max_lag=7)[0] == pytest.approx(128 / 29, rel=1e-12)
    # Truncating at the first drop (lag 1 only) would give 8 / (1 + 14/64) = 512/78.
    assert ess_paper(x, max_lag=7)[0] != pytest.approx(512 / 78, rel=1e-3)
    # threshold 0.13 drops lags 1 and 5 (0.125 <= 0.13): ESS = 8 / (1 + 2 * (1/2)(1/2)) = 16/3.
    assert ess_paper(x, max_lag=7, threshold=0.13)[0] == pytest.approx(16 / 3, rel=1e-12)


def test_threshold_is_strict_and_excludes_negative_lags():
    # L = 2, weights 2/3 and 1/3. rho_1 == threshold is excluded (strict >).
    rho = np.array(
        [
            [1.0, 0.05, 0.6],  # only lag 2: 3 / (1 + 2 * 0.6 / 3) = 3 / 1.4
            [1.0, 0.0500001, 0.6],  # both: 3 / (1 + 2 * (0.0500001 * 2/3 + 0.2))
            [1.0, -0.9, -0.9],  # nothing: 3 / 1 = 3
        ]
    )
    got = ess_from_autocorrelation(rho, threshold=0.05)
    expected = [3 / 1.4, 3 / (1 + 2 * (0.0500001 * 2 / 3 + 0.2)), 3.0]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_white_noise_reaches_the_maximum_window():
    # i.i.d. N(0,1), T = 30 000: sd(rho_j) ~ 1/sqrt(T) = 0.0058, so 0.05 is ~8.7 sd away and
    # no lag passes the threshold: ESS = L + 1 = 501 exactly, for every chain.
    x = np.random.default_rng(3).standard_normal((30, 30_000))
    np.testing.assert_array_equal(ess_paper(x), np.full(30, 501.0))


@pytest.mark.parametrize(
    ("phi", "expected"),
    [
        # phi = 0.3: rho = 0.3, 0.09 pass, 0.027 does not -> 501 / (1 + 2(0.3*500/501 +
        # 0.09*499/501)) = 281.76
        (0.3, 281.76),
        # phi = -0.3: only the even lag 2 (0.09) passes, lag 1 is negative -> 424.84
        (-0.3, 424.84),
    ],
)
def test_ess_paper_of_ar1_matches_theory(phi, expected):
    theory = theoretical_paper_ess(phi)
    assert theory == pytest.approx(expected, abs=0.01)
    n_chains, n_draws = 40, 50_000
    ess = ess_paper(ar1(phi, n_chains, n_draws, seed=11))
    # Tolerance: chains are independent, so the standard error of the mean over chains is
    # sd(ESS) / sqrt(B). By the delta method, sd(ESS) ~ 2 (L+1)/(1 + 2S)^2 * sd(S_hat) with
    # sd(rho_hat_j) ~ 0.005 at T = 5e4: about 2 per chain, SE ~ 0.3. We allow 4 SE (plus the
    # O(1/T) bias of the estimator, < 0.01 here). Lags near the threshold are >= 4.5 sd of
    # rho_hat away from 0.05 for these phi, so threshold flips do not shift the mean.
    se = np.std(ess, ddof=1) / math.sqrt(n_chains)
    assert se < 0.005 * theory  # the check below is informative (tight)
    assert abs(ess.mean() - theory) < 4 * se + 0.01


# --------------------------------------------------------------------------- arviz wrappers
def test_ess_bulk_iid_close_to_number_of_draws_and_small_for_ar1():
    x = np.random.default_rng(5).standard_normal((4, 2000))
    n = x.size
    # For i.i.d. draws Geyer's truncation stops after a few lags k, and
    # sd(tau_hat) ~ 2 sqrt(k / N) ~ 0.05 for N = 8000: 15 % is > 3 sd.
    value = ess_bulk(x)
    assert isinstance(value, float)
    assert 0.85 * n < value < 1.15 * n
    # AR(1) phi = 0.9: ESS ~ N (1 - phi) / (1 + phi) = 0.053 N.
    y = ar1(0.9, 4, 2000, seed=6)
    assert 0.02 * n < ess_bulk(y) < 0.1 * n


def test_bulk_ess_per_chain_is_each_chain_on_its_own():
    """Chains that mix very differently (the paper cases: every chain its own posterior): each
    chain's ESS is its own, the i.i.d. chain near its length, the AR(1) chain far below."""
    x = np.vstack([np.random.default_rng(8).standard_normal(2000), ar1(0.9, 1, 2000, seed=9)[0]])
    own = ess_bulk_per_chain(np.vstack([x, np.ones(2000)]))
    assert own.shape == (3,) and math.isnan(own[2])  # a constant chain has no ESS
    for row in range(2):
        assert own[row] == pytest.approx(ess_bulk(x[row : row + 1]), rel=1e-12)
    assert own[0] > 1500 and own[1] < 250


def test_rhat_near_one_for_same_distribution_and_large_for_shifted_chains():
    rng = np.random.default_rng(7)
    same = rng.standard_normal((4, 1000))
    r = rhat(same)
    assert isinstance(r, float)
    # Split R-hat of 8 half-chains of 500 i.i.d. draws deviates from 1 by ~1e-3.
    assert 0.99 < r < 1.01
    shifted = same + np.array([[0.0], [0.0], [0.0], [2.0]])
    assert rhat(shifted) > 1.1


def test_rhat_and_bulk_ess_degenerate_inputs():
    const = np.full((3, 50), 2.0)
    assert math.isnan(rhat(const))
    assert math.isnan(ess_bulk(const))
    stuck_apart = np.repeat(np.array([[1.0], [2.0], [3.0]]), 50, axis=1)
    assert rhat(stuck_apart) == math.inf
    with pytest.raises(ValueError, match="at least 2 chains"):
        rhat(np.zeros((1, 50)))
    with pytest.raises(ValueError, match="at least 4"):
        ess_bulk(np.arange(3.0)[None])


# --------------------------------------------------------------------------- summary
def test_summarise_mixing_fields_and_json():
    x = ar1(0.3, 6, 3000, seed=8)
    s = summarise_mixing(x)
    assert isinstance(s, MixingSummary)
    per_chain = ess_paper(x)
    assert s.ess_paper_mean == pytest.approx(per_chain.mean())
    assert s.ess_paper_std == pytest.approx(per_chain.std())
    assert s.ess_bulk == pytest.approx(ess_bulk(x))
    assert s.rhat == pytest.approx(rhat(x))
    assert (s.n_chains, s.n_draws, s.max_lag, s.n_constant_chains) == (6, 3000, 500, 0)
    d = s.as_dict()
    assert all(type(d[k]) is float for k in ("ess_paper_mean", "ess_paper_std", "ess_bulk", "rhat"))
    json.dumps(d, allow_nan=False)


def test_summarise_mixing_short_or_single_chain_gives_nan_with_notes():
    s = summarise_mixing(np.random.default_rng(9).standard_normal((1, 100)))
    assert math.isnan(s.ess_paper_mean) and math.isnan(s.ess_paper_std) and math.isnan(s.rhat)
    assert math.isfinite(s.ess_bulk)
    assert any("max_lag=500" in n for n in s.notes)
    assert any("2 chains" in n for n in s.notes)
    d = s.as_dict(nonfinite_as_none=True)
    assert d["rhat"] is None and d["ess_paper_mean"] is None
    json.dumps(d, allow_nan=False)  # strict JSON works after the replacement


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("series", "max_lag", "error", "match"),
    [
        (np.zeros(600), 500, ValueError, "2-D"),
        (np.zeros((2, 3, 600)), 500, ValueError, "2-D"),
        (np.zeros((2, 0)), 5, ValueError, "at least one"),
        (np.array([[0.0, np.nan, 1.0, 2.0]]), 2, ValueError, "non-finite"),
        (np.array([[0.0, np.inf, 1.0, 2.0]]), 2, ValueError, "non-finite"),
        (np.zeros((2, 500)), 500, ValueError, "max_lag=500"),
        (np.zeros((2, 10)), 0, ValueError, "max_lag must be >= 1"),
        (np.zeros((2, 10)), 2.0, TypeError, "max_lag must be an int"),
        (np.zeros((2, 10)), True, TypeError, "max_lag must be an int"),
    ],
)
def test_input_validation(series, max_lag, error, match):
    with pytest.raises(error, match=match):
        ess_paper(series, max_lag=max_lag)


def test_threshold_validation():
    x = np.random.default_rng(0).standard_normal((2, 50))
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(ValueError, match="threshold"):
            ess_paper(x, max_lag=10, threshold=bad)
    with pytest.raises(ValueError, match="threshold"):
        summarise_mixing(x, threshold=2.0)
    with pytest.raises(ValueError, match="rho must have shape"):
        ess_from_autocorrelation(np.ones(5))
