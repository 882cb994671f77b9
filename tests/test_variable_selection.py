"""The variable-selection target (the flow paper's Table 3) against exact answers: its closed form
against a second route to the same integral (beta through y's normal marginal, sigma^2 by
quadrature), its rank-one flip ratios and gradient against differences, registry samplers
against the enumerated posterior, bad inputs refused in a sentence, and the study's quick run."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from lsbcore import make_sampler
from lsbcore.exact import all_states, exact_distribution, state_codes
from lsbcore.studies import variable_selection as study
from lsbcore.targets.base import Target
from lsbcore.targets.variable_selection import VariableSelection, synthetic_regression


def direct_log_joint(X, y, gamma, nu2, w, lam):
    """``log p(y, gamma)`` by another route: ``y | sigma^2 ~ N(0, sigma^2 (I + nu2 X_g X_g'))``
    (beta integrated as a normal marginal), then ``sigma^2`` by quadrature against its
    inverse-gamma prior, plus the uniform prior ``2^-k``."""
    d, k = X.shape
    Xg = X[:, np.asarray(gamma, dtype=bool)]
    cov = np.eye(d) + nu2 * Xg @ Xg.T
    prior = stats.invgamma(a=w / 2, scale=w * lam / 2)

    def log_integrand(s2):
        return stats.multivariate_normal(np.zeros(d), s2 * cov).logpdf(y) + prior.logpdf(s2)

    # scale the integrand by its peak so quad sees numbers near 1
    grid = np.exp(np.linspace(-8, 8, 161))
    peak = max(log_integrand(s) for s in grid)
    value, _ = integrate.quad(
        lambda s2: math.exp(log_integrand(s2) - peak), 0, np.inf, epsabs=0, epsrel=1e-11,
        limit=500,
    )  # fmt: skip
    return peak + math.log(value) - k * math.log(2.0)


@pytest.mark.parametrize("hyper", [{}, {"nu2": 2.5, "w": 1.5, "lam": 0.3}])
def test_the_closed_form_is_the_integral_for_every_inclusion_set(hyper):
    data = synthetic_regression(3, 2, n_observations=6, seed=4)
    target = VariableSelection.from_data(data, **hyper)
    x = all_states(3)  # all 8 inclusion sets, the empty one among them
    got = target.log_prob(x).numpy()
    want = [
        direct_log_joint(data.X, data.y, (row > 0).numpy(), target.nu2, target.w, target.lam)
        for row in x
    ]
    assert np.abs(got - want).max() < 1e-7
    # and they differ enough between sets for the check to mean something
    assert np.ptp(want) > 0.5


def test_flip_ratios_are_the_log_prob_differences_and_the_batch_equals_each_chain():
    data = synthetic_regression(8, 3, n_observations=12, seed=1)
    target = VariableSelection.from_data(data)
    x = all_states(8)  # chains of every size q in one padded batch
    log_p = target.log_prob(x)
    codes = state_codes(x)
    flipped = torch.stack([log_p[codes ^ (1 << i)] for i in range(8)], 1)
    assert torch.allclose(target.flip_log_ratios(x), flipped - log_p[:, None], atol=1e-10)
    each = torch.cat([target.log_prob(row[None]) for row in x])
    assert torch.allclose(log_p, each, atol=1e-10, rtol=0)


def test_flip_ratios_at_a_larger_size_equal_the_re_evaluated_ones():
    data = synthetic_regression(60, 6, seed=2)
    target = VariableSelection.from_data(data)
    g = torch.Generator().manual_seed(0)
    x = torch.where(
        torch.rand(5, 60, generator=g) < torch.tensor([[0.0], [0.05], [0.2], [0.5], [1.0]]),
        1.0,
        -1.0,
    )
    x = x.double()
    assert torch.allclose(target.flip_log_ratios(x), Target.flip_log_ratios(target, x),
                          atol=1e-8, rtol=1e-10)  # fmt: skip


def test_the_gradient_is_the_derivative_of_the_extension():
    """At the states, against central differences of ``log p(y | gamma)`` with
    ``X diag(gamma) X'`` in the covariance (the extension the docstring names)."""
    data = synthetic_regression(6, 2, n_observations=9, seed=5)
    target = VariableSelection.from_data(data)
    X, y, d = data.X, data.y, len(data.y)

    def extension(gamma):
        cov = np.eye(d) + target.nu2 * (X * gamma) @ X.T
        quad = y @ np.linalg.solve(cov, y)
        return -np.linalg.slogdet(cov)[1] / 2 - (d + target.w) / 2 * np.log(
            target.w * target.lam + quad
        )

    x = all_states(6)[::5]
    _, grad = target.log_prob_and_grad(x)
    eps = 1e-6
    for row, g in zip(x.numpy(), grad.numpy(), strict=True):
        gamma = (1 + row) / 2
        fd = [
            (extension(gamma + eps * e) - extension(gamma - eps * e)) / (2 * eps) / 2
            for e in np.eye(6)
        ]
        assert np.allclose(g, fd, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("name", "options", "burn_in", "thin"),
    [("gibbs", {}, 200, 10), ("barker", {}, 100, 5), ("bit-flip-mh", {}, 200, 10)],
)  # fmt: skip
def test_samplers_reach_the_enumerated_posterior(name, options, burn_in, thin):
    data = synthetic_regression(8, 3, n_observations=10, seed=3)
    target = VariableSelection.from_data(data)
    pi = exact_distribution(target)
    chains, draws = 1000, 40
    sampler = make_sampler(name, target, chains, seed=11, **options)
    counts = np.zeros(256)
    sampler.step(burn_in)
    for _ in range(draws):
        sampler.step(thin)
        counts += np.bincount(state_codes(sampler.x).numpy(), minlength=256)
    tv = 0.5 * np.abs(counts / counts.sum() - pi).sum()
    floor = 0.4 * math.sqrt(float(np.sqrt(pi).sum()) ** 2 / (chains * draws))
    assert tv < 3.0 * floor
    assert pi.max() < 0.5 and (pi > 1e-3).sum() > 10  # not a point mass: the check has power


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"X": np.ones(5), "y": np.ones(5)}, "X must be a 2-D array"),
        ({"X": np.ones((5, 3)), "y": np.ones(4)}, "one response per row of X (5)"),
        ({"X": np.full((5, 3), np.nan), "y": np.ones(5)}, "X must hold finite numbers"),
        ({"X": np.ones((5, 3)), "y": [1, 2, np.inf, 4, 5]}, "y must hold finite numbers"),
        ({"X": np.ones((5, 3)), "y": np.ones(5), "nu2": 0.0}, "nu2 must be a positive number"),
        ({"X": np.ones((5, 3)), "y": np.ones(5), "w": -1.0}, "w must be a real number"),
        ({"X": np.ones((5, 3)), "y": np.ones(5), "lam": math.inf}, "lam must be"),
    ],
)
def test_bad_inputs_are_refused_in_a_sentence(args, message):
    with pytest.raises(ValueError, match="^.*\\.$") as err:
        VariableSelection(**args)
    assert message in str(err.value)


def test_bad_states_and_gradients_off_the_states_are_refused():
    target = VariableSelection.from_data(synthetic_regression(4, 1, seed=0))
    with pytest.raises(ValueError, match="x must have shape"):
        target.log_prob(torch.ones(2, 5, dtype=torch.float64))
    with pytest.raises(ValueError, match="states of \\+-1 only"):
        target.grad_log_prob(torch.full((1, 4), 0.5, dtype=torch.float64))
    with pytest.raises(ValueError, match="n_informative must be"):
        synthetic_regression(4, 5)


def test_the_generator_is_seeded_and_plants_the_informative_features():
    a, b = synthetic_regression(30, 4, seed=7), synthetic_regression(30, 4, seed=7)
    assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
    assert a.X.shape == (30, 30) and len(a.informative) == 4
    assert set(np.flatnonzero(a.beta)) == set(a.informative)
    assert not np.array_equal(a.y, synthetic_regression(30, 4, seed=8).y)


def test_the_quick_study_prints_a_row_per_sampler_and_writes_json(tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert study.main(["--quick", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "quick protocol" in printed
    rows = json.loads(out.read_text())["rows"]
    assert [r["sampler"] for r in rows] == list(study.SAMPLERS)
    for r in rows:
        assert r["ess_per_1e4"] > 0 and math.isfinite(r["mean_log_p"])
        assert r["sampler"] in printed


def _row(k, sampler, ess, se):
    return study.Row(k, k // 10, sampler, ess, se, 1.0, -1.0, 0, 0, 1.0)


def test_the_flow_claims_verdict_needs_every_setting_clear_of_two_standard_errors(tmp_path):
    clear = [_row(100, "flow-exact", 400, 10), _row(100, "gibbs", 20, 5),
             _row(200, "flow-exact", 200, 10), _row(200, "gibbs", 9, 2)]  # fmt: skip
    assert study.flow_verdict(clear)[0] == "holds"
    close = [_row(100, "flow-exact", 30, 10), _row(100, "gibbs", 20, 5)]
    assert study.flow_verdict(close)[0] == "inconclusive"  # 10 apart, within 2 (10 + 5)
    below = [_row(100, "flow-exact", 5, 1), _row(100, "gibbs", 40, 5)]
    assert study.flow_verdict(below)[0] == "does not hold"
    assert study.flow_verdict([_row(100, "gibbs", 1, 1)])[0] == "not measured"
    path = tmp_path / "doc.md"
    path.write_text("# Title\n\nkept\n")
    text = study.section(clear, study.QUICK, 60.0)
    study.replace_section(path, text, study.BEGIN, study.END)
    study.replace_section(path, text, study.BEGIN, study.END)  # again: replaced, not appended
    written = path.read_text()
    assert written.count(study.BEGIN) == 1 and written.startswith("# Title\n\nkept\n")
    assert "**Holds here.** flow-exact against Gibbs per 10^4 steps at 100: 400.0" in written


def test_a_flow_above_every_mixed_exact_sampler_is_named_as_biased_to_its_mode():
    rows = [study.Row(100, 10, "gibbs", 70, 9, 1.0, -257.3, 9, 2, 1.0),
            study.Row(100, 10, "gwg", 6, 0, 1.0, -287.6, 0, 0, 1.0),  # stuck: not compared
            study.Row(100, 10, "flow-exact", 55, 10, 1.0, -249.4, 9, 3, 1.0)]  # fmt: skip
    assert "100: -249.4 against at most -257.3" in study.mode_bias(rows)
    rows[2] = study.Row(100, 10, "flow-exact", 55, 10, 1.0, -260.0, 9, 3, 1.0)
    assert study.mode_bias(rows) is None
