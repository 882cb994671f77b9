"""The Pareto k-hat of importance weights: the same number as arviz-stats' reference from only
the largest log weights, streamed batch by batch, and the verdicts it gives on known tails."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from arviz_stats.base import array_stats

from lsbcore.importance import WeightSums, importance_sample, pareto, synthetic_posterior
from lsbcore.importance.estimate import make_proposal


def reference_khat(log_w: np.ndarray) -> float:
    """arviz-stats' k-hat of the weights' right tail (its ``log_weights=True`` fits the log
    weights' own tail, not the weights')."""
    weights = np.exp(log_w - log_w.max())
    return float(array_stats.pareto_khat(weights, chain_axis=None, r_eff=1.0, tail="right"))


@pytest.mark.parametrize("n", [30, 200, 226, 1000, 20_000])
@pytest.mark.parametrize("tail", ["normal", "pareto 0.3", "pareto 0.9", "cauchy"])
def test_khat_equals_arviz_stats_from_the_largest_log_weights_only(n, tail):
    rng = np.random.default_rng(n)
    if tail == "normal":  # log-normal weights: every moment finite
        log_w = rng.normal(0.0, 1.5, n)
    elif tail == "cauchy":  # |Cauchy| weights: k = 1
        log_w = np.log(np.abs(rng.standard_cauchy(n)))
    else:  # Pareto weights of shape k
        k = float(tail.split()[1])
        log_w = k * -np.log(rng.random(n))  # w = U^(-k)
    expected = reference_khat(log_w)
    top = np.sort(log_w)[-(pareto.tail_size(n) + 1) :]
    assert pareto.pareto_khat(np.random.default_rng(0).permutation(top), n) == pytest.approx(
        expected, abs=1e-10
    )
    assert pareto.pareto_khat(log_w + 700.0, n) == pytest.approx(expected, abs=1e-9)  # no overflow


def test_the_weights_kept_batch_by_batch_are_the_largest():
    rng = torch.Generator().manual_seed(1)
    log_w = torch.randn(5000, generator=rng, dtype=torch.float64) * 3
    sums = WeightSums(2, keep=pareto.tail_size(5000) + 1)
    for batch in log_w.split(333):
        sums.add(torch.ones(len(batch), 2), batch)
    assert torch.equal(sums.top.sort().values, log_w.sort().values[-(pareto.tail_size(5000) + 1) :])
    assert pareto.pareto_khat(sums.top, 5000) == pytest.approx(
        reference_khat(log_w.numpy()), abs=1e-10
    )


def test_khat_finds_the_shape_of_a_pareto_tail():
    """On 100,000 Pareto weights of shape k the estimate lies within 0.1 of k (its standard
    error is about (1 + k) / sqrt(948), 0.04-0.06, over the 948 tail draws)."""
    rng = np.random.default_rng(7)
    for k in (0.2, 0.5, 0.8):
        log_w = k * -np.log(rng.random(100_000))
        top = np.sort(log_w)[-(pareto.tail_size(100_000) + 1) :]
        assert abs(pareto.pareto_khat(top, 100_000) - k) < 0.1, k


def test_the_threshold_follows_the_sample_size():
    assert pareto.threshold(100) == pytest.approx(0.5)
    assert pareto.threshold(1000) == pytest.approx(1 - 1 / 3)
    assert pareto.threshold(10_000) == 0.7 and pareto.threshold(10**7) == 0.7
    assert pareto.tail_size(225) == 45 and pareto.tail_size(10_000) == 300


def test_no_fit_on_too_few_draws_or_a_staircase_a_flat_tail_is_light_a_vast_one_heavy():
    assert math.isnan(pareto.pareto_khat(np.zeros(24), 24))  # 4 tail draws
    # the 95 largest: 40 distinct, then 55 ties with the cutoff (a few states drawn often)
    repeated = np.r_[np.zeros(900), np.full(60, 1.0), np.linspace(1.5, 3.0, 40)]
    assert math.isnan(pareto.pareto_khat(repeated, 1000))
    assert pareto.pareto_khat(np.full(1000, 3.0), 1000) == -math.inf
    vast = np.linspace(0.0, 50_000.0, 1000)  # distinct, but most of the tail is 0 beside the top
    assert pareto.pareto_khat(vast, 1000) == math.inf
    with pytest.raises(ValueError, match="the 95 largest"):
        pareto.pareto_khat(np.zeros(10), 1000)


def test_the_field_proposals_weights_are_a_staircase_and_get_no_fit():
    """Under the field proposal ``log w = lambda sum_ij x_i x_j`` plus a constant (the data term
    cancels): the log weights lie on a grid of step 2 lambda, and the tail is not fitted."""
    target = synthetic_posterior(8)
    est = importance_sample(target, "field", 4000, seed=3)
    assert math.isnan(est.pareto_k) and est.reliable is None
    q, _ = make_proposal(target, "field")
    x = q.sample(500, torch.Generator().manual_seed(0))
    steps = (target.log_prob(x) - q.log_prob(x)) / (2 * target.lam)
    assert torch.allclose(steps - steps[0], torch.round(steps - steps[0]), atol=1e-9)


def test_importance_sampling_says_when_its_weights_cannot_be_trusted():
    """Mean field on the 8 x 8 synthetic posterior: k-hat 0.68-0.86 over seeds 0-3 at
    N = 4,000, 0.68 (below 0.7) for seed 2; on 24 x 24 the tail is heavy (the ESS collapse,
    1.33-1.74) and it says so."""
    light = importance_sample(synthetic_posterior(8), "mean field", 4000, seed=2)
    heavy = importance_sample(synthetic_posterior(24), "mean field", 4000, seed=2)
    assert light.pareto_k <= pareto.threshold(4000) and light.reliable is True
    assert heavy.pareto_k > 1 and heavy.reliable is False


def test_the_benchmark_prints_k_hat_and_strict_json(capsys):
    import json

    from lsbcore.studies.benchmarks import importance as bench

    assert bench.main(["--sides", "2,12,24", "--samples", "2000", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out, parse_constant=pytest.fail)["rows"]
    by = {(r["side"], r["proposal"]): r["pareto_k"] for r in rows}
    assert by[(2, "mean field")] in ("-inf", None)  # 16 states: a flat or tied tail
    assert by[(12, "field")] is None and by[(24, "mean field")] > 1  # a staircase; the collapse
    assert bench.main(["--sides", "12", "--samples", "2000"]) == 0
    assert "k-hat" in capsys.readouterr().out
