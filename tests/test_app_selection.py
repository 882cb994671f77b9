"""Bayesian variable selection on the network page (issue 42, item 6): the target picker's
"Variable selection (synthetic)", its settings and links, the inclusion probabilities against an
exact enumeration, and the page's Inclusion view.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import torch
from app_support import open_app, stop_runs_fixture  # noqa: F401  (autouse)

from app import config as cfgmod
from app import network_run, network_targets, selection_target, sources, state
from app.target_kind import TargetKind, kind_of
from app.views import inclusion

VS = selection_target.TARGET
SAMPLES = sources.sample_names()


def healthy(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


# ----------------------------------------------------------------------------- settings
def test_variable_selection_is_a_network_target_with_its_own_defaults():
    assert kind_of(VS) is TargetKind.NETWORK
    assert network_targets.TARGET_LABELS[VS] == "Variable selection (synthetic)"
    cfg = cfgmod.defaults_for(target=VS)
    assert (cfg.features, cfg.informative, cfg.data_seed) == (100, 10, 0)
    assert cfg.samplers == selection_target.DEFAULT_SAMPLERS and cfg.chains == 5
    # every default sampler runs on the target (the registry says so)
    offered, refused = network_targets.runnable(selection_target.SyntheticSelection(20, 3, 0))
    assert set(cfg.samplers) <= set(offered) and "gwg" in offered
    assert "Checkerboard Gibbs" in refused["pairwise"]


def test_links_carry_the_data_settings_for_variable_selection_only():
    cfg = replace(cfgmod.defaults_for(target=VS), features=40, informative=4, data_seed=7)
    params = cfgmod.to_query_params(cfg)
    assert (params["features"], params["informative"], params["data_seed"]) == ("40", "4", "7")
    back, warnings = cfgmod.from_query_params(params, SAMPLES)
    assert warnings == [] and back == cfg
    mn1 = cfgmod.to_query_params(cfgmod.defaults_for(target="mn1"))
    assert not {"features", "informative", "data_seed"} & set(mn1)


def test_bad_data_settings_are_repaired_in_one_sentence_each():
    cfg, warnings = cfgmod.validate({"target": VS, "features": "1000"})
    assert cfg.features == 400 and warnings == ["features: 1000 is outside [2, 400]; using 400."]
    cfg, warnings = cfgmod.validate({"target": VS, "features": "abc"})
    assert cfg.features == 100 and len(warnings) == 1 and "not a number" in warnings[0]
    # more informative features than features: at most k
    cfg, warnings = cfgmod.validate({"target": VS, "features": "8", "informative": "20"})
    assert (cfg.features, cfg.informative) == (8, 8)
    assert warnings == ["Informative features: 20 is outside [1, 8] (the features); using 8."]
    # fewer features than the default's informative: it follows k down
    cfg, warnings = cfgmod.validate({"target": VS, "features": "5"})
    assert (cfg.features, cfg.informative) == (5, 5) and len(warnings) == 1
    cfg, warnings = cfgmod.validate({"target": VS, "informative": "0"})
    assert cfg.informative == 1 and len(warnings) == 1
    cfg, warnings = cfgmod.validate({"target": VS, "data_seed": "-3"})
    assert cfg.data_seed == 0 and len(warnings) == 1


def test_the_target_is_the_library_posterior_on_the_seeded_data_laid_in_one_row():
    from lsbcore.targets.variable_selection import VariableSelection, synthetic_regression

    target = selection_target.SyntheticSelection(30, 4, 5)
    data = synthetic_regression(30, 4, seed=5)
    assert target.shape == (1, 30) and target.informative == data.informative
    x = torch.randint(0, 2, (6, 1, 30), generator=torch.Generator().manual_seed(0)) * 2.0 - 1
    library = VariableSelection(data.X, data.y)
    assert torch.equal(target.log_prob(x), library.log_prob(x.view(6, 30)))
    other = selection_target.SyntheticSelection(30, 4, 6)
    assert not torch.equal(other.log_prob(x), target.log_prob(x))


# ----------------------------------------------------------------------------- the estimates
def test_exact_inclusion_is_the_enumerated_posterior_marginal():
    target = selection_target.SyntheticSelection(6, 2, 1)
    states = torch.tensor(list(itertools.product((-1.0, 1.0), repeat=6)), dtype=torch.float64)
    weights = torch.softmax(target.log_prob(states), 0)  # an independent enumeration
    expected = (weights.unsqueeze(1) * (states + 1) / 2).sum(0).numpy()
    assert np.allclose(selection_target.exact_inclusion(target), expected, atol=1e-12)
    big = selection_target.SyntheticSelection(17, 2, 1)
    try:
        selection_target.exact_inclusion(big)
    except ValueError as err:
        assert "at most 16 features, got 17" in str(err)
    else:
        raise AssertionError("17 features were enumerated")


def test_estimate_from_states_is_the_share_of_states_that_include_each_feature():
    states = np.array([[[1, -1, 1], [1, 1, -1]], [[-1, -1, 1], [1, -1, 1]]])  # [steps, chains, k]
    assert np.array_equal(selection_target.estimate_from_states(states), [0.75, 0.25, 0.75])
    assert selection_target.found(np.array([0.9, 0.6, 0.1, 0.2]), (0, 2)) == (1, 1)


def test_a_long_run_estimates_the_exact_inclusion_probabilities():
    """The run the page draws: each sampler's inclusion probabilities from its mixing records
    within Monte Carlo error of the enumeration on 8 features."""
    target = selection_target.SyntheticSelection(8, 3, 2)
    cfg = replace(
        cfgmod.defaults_for(target=VS), samplers=("barker", "gibbs", "bit-flip-mh"),
        features=8, informative=3, data_seed=2, chains=8, burn_in=200,
    )  # fmt: skip
    run, _ = state.build_network_run(cfg, target, "variable selection")
    assert network_run.is_selection_run(run) and not network_run.draws_a_network(run)
    assert run.problem.informative == target.informative
    state.advance(run, 120.0, max_steps=4200)
    assert run.phase == "mixing"
    exact = inclusion.exact(run)
    assert np.allclose(exact, selection_target.exact_inclusion(target))
    for name in cfg.samplers:
        p, what = inclusion.marginal(run, name)
        assert "mixing records" in what
        assert np.abs(p - exact).max() < 0.06, (name, p, exact)
    fig = inclusion.figure({"barker": exact}, target.informative, exact, "t")
    bars, dashes, dots = fig.data
    assert list(bars.x) == [i + 1 for i in target.informative]
    assert np.array_equal(dots.y, exact) and np.array_equal(dashes.y, exact)


# ----------------------------------------------------------------------------- the page
def test_the_page_picks_variable_selection_runs_and_draws_the_inclusion_view():
    at = open_app()
    at.sidebar.selectbox(key="target").set_value(VS).run()
    healthy(at)
    run = at.session_state["_run"]
    assert network_run.is_selection_run(run)
    assert run.problem.target.n_sites == 100 and len(run.problem.informative) == 10
    # k below m: m follows, with a sentence; the run is rebuilt on the new data
    at.number_input(key="features").set_value(6).run()
    healthy(at)
    assert at.session_state["informative"] == 6
    assert any("Informative features: 10 is outside [1, 6]" in str(c.value) for c in at.caption)
    at.number_input(key="burn_in").set_value(20).run()
    run = at.session_state["_run"]
    assert run.problem.target.n_sites == 6
    state.advance(run, 10.0, max_steps=40)
    at.run()
    healthy(at)
    assert at.session_state["network_view"] == "Inclusion"
    assert at.get("plotly_chart")
    assert any("exact values" in str(c.value) for c in at.caption)
    assert any("does not offer the Network" in str(c.value) for c in at.caption)
    # another target and back: the data settings survive
    at.sidebar.selectbox(key="target").set_value("mn1").run()
    healthy(at)
    at.sidebar.selectbox(key="target").set_value(VS).run()
    healthy(at)
    assert (at.session_state["features"], at.session_state["informative"]) == (6, 6)
    assert at.query_params["features"] == "6"
