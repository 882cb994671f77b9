"""Annealing to a MAP: the schedule against its formulas, the annealed optimum against the
exact minimum cut on lattices up to 16 x 16, the annealing code path without annealing
(``beta = 1`` throughout) against enumeration for every sampler, the greedy polish, and
refusals in sentences."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore import IsingPosterior, PairwiseMRF, exact_map, make_balancing
from lsbcore import exact as exact_chain
from lsbcore.annealing import (
    AnnealingResult,
    Schedule,
    anneal,
    compare_with_map,
    energy,
    greedy_polish,
    relative_gap,
    time_to_gap,
)
from lsbcore.samplers.registry import REGISTRY, sweep_steps

pytestmark = pytest.mark.usefixtures("single_thread")


def ising(shape=(16, 16), lam=0.8, scale=0.5, seed=0, boundary="free"):
    generator = torch.Generator().manual_seed(seed)
    alpha = torch.randn(*shape, generator=generator, dtype=torch.float64) * scale
    return IsingPosterior(alpha, lam, boundary)


def steps_for(name: str, sweeps: int, target, **options) -> int:
    """Steps that make ``sweeps`` sweeps for ``name`` (a checkerboard step is a sweep)."""
    return sweeps * sweep_steps(name, target, **options)


# ----------------------------------------------------------------------------- the schedule
@pytest.mark.parametrize("n_stages", [2, 5, 37])
def test_geometric_schedule_has_equal_ratios_from_beta_0_to_beta_max(n_stages):
    schedule = Schedule("geometric", 0.5, 200.0, n_stages, 3)
    betas = schedule.betas
    k = np.arange(n_stages)
    assert np.allclose(betas, 0.5 * (200.0 / 0.5) ** (k / (n_stages - 1)), rtol=1e-13)
    assert betas[0] == 0.5 and betas[-1] == 200.0
    assert np.allclose(betas[1:] / betas[:-1], (400.0) ** (1 / (n_stages - 1)), rtol=1e-12)
    assert schedule.total_steps == 3 * n_stages


@pytest.mark.parametrize("n_stages", [2, 5, 37])
def test_linear_schedule_has_equal_steps_in_beta(n_stages):
    betas = Schedule("linear", 0.0, 60.0, n_stages, 1).betas
    assert np.allclose(betas, 60.0 * np.arange(n_stages) / (n_stages - 1), rtol=1e-13)
    assert betas[0] == 0.0 and betas[-1] == 60.0
    assert np.allclose(np.diff(betas), 60.0 / (n_stages - 1))


def test_constant_schedule_holds_one_temperature():
    schedule = Schedule.constant(1.0, 4, 25)
    assert schedule.kind == "constant" and list(schedule.betas) == [1.0] * 4
    assert schedule.total_steps == 100
    assert "beta = 1 throughout" in schedule.describe()
    assert list(Schedule("geometric", 3.0, 3.0, 1, 5).betas) == [3.0]


@pytest.mark.parametrize(
    "args, words",
    [
        (("cosine", 1.0, 100.0, 10, 10), "kind must be one of geometric, linear, constant"),
        (("geometric", 0.0, 100.0, 10, 10), "beta_0 must be a real number between 1e-06"),
        (("geometric", 1.0, math.inf, 10, 10), "beta_max must be finite"),
        (("linear", -1.0, 100.0, 10, 10), "beta_0 must be a real number between 0.0"),
        (("geometric", 10.0, 1.0, 10, 10), "annealing cools: beta_max (1) must be at least"),
        (("geometric", 1.0, 10.0, 1, 10), "needs at least 2 stages"),
        (("geometric", 1.0, 10.0, 0, 10), "n_stages must be an integer between 1"),
        (("geometric", 1.0, 10.0, 10, 0), "steps_per_stage must be an integer between 1"),
        (("geometric", 1.0, 10.0, 2.5, 10), "n_stages must be an integer"),
        (("geometric", True, 10.0, 2, 10), "beta_0 must be a real number"),
        (("constant", 1.0, 2.0, 3, 10), "a constant schedule holds one temperature"),
        (("linear", 1.0, 10.0, 100_000, 100_000), "at most 1,000,000,000 are supported"),
    ],
)
def test_bad_schedules_are_refused_with_a_sentence(args, words):
    with pytest.raises(ValueError) as err:
        Schedule(*args)
    assert words in str(err.value)


# ----------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"sampler": "annealer"}, "unknown sampler 'annealer'"),
        ({"sampler": "learned"}, "needs balancing="),
        ({"sampler": "barker", "learn": True}, "has no learnable function"),
        ({"sampler": "lsb1", "learn": 1}, "learn must be True or False"),
        ({"sampler": "barker", "balancing": make_balancing("lsb1")}, "balancing= is for the"),
        ({"sampler": "lsb1", "balancing": "weights.json"}, "balancing must be a balancing"),
        ({"schedule": (1, 100)}, "schedule must be a Schedule"),
        ({"n_chains": 0}, "n_chains must be an integer between 1"),
        ({"record_every": 0}, "record_every must be an integer between 1"),
        ({"polish": "yes"}, "polish must be True or False"),
        ({"sampler": "barker", "lr": 0.1}, "takes no options"),
        ({"schedule": Schedule("geometric", 1, 5e5, 2, 1)}, "largest local field"),
    ],
)
def test_bad_annealing_inputs_are_refused_with_a_sentence(kwargs, words):
    with pytest.raises(ValueError) as err:
        anneal(ising(shape=(3, 3)), **kwargs)
    assert words in str(err.value)


def test_a_non_target_is_refused():
    with pytest.raises(ValueError, match="target must be an lsbcore target"):
        anneal(np.zeros((3, 3)))
    result = anneal(ising(shape=(3, 3)), schedule=Schedule("geometric", 1, 10, 2, 2))
    with pytest.raises(ValueError, match="compare a run with the target it annealed"):
        compare_with_map(result, ising(shape=(3, 4)))


# ----------------------------------------------------------------------------- the MAP
# (shape, lambda, field scale, boundary, seed): weak and strong coupling, both boundaries, up
# to 16 x 16; cooled from above the critical temperature (beta_0 = 0.1) to beta = 100
LATTICES = [
    ((8, 8), 0.6, 0.5, "free", 0),
    ((12, 16), 0.5, 0.3, "free", 2),
    ((16, 16), 0.8, 0.5, "free", 0),
    ((16, 16), 0.8, 0.5, "free", 2),
    ((16, 16), 1.2, 1.0, "periodic", 3),
    ((16, 16), 1.5, 0.3, "free", 1),
]


@pytest.mark.parametrize("name", ["checkerboard", "sqrt", "barker"])
@pytest.mark.parametrize("shape, lam, scale, boundary, seed", LATTICES)
def test_annealing_reaches_the_minimum_cut_energy(name, shape, lam, scale, boundary, seed):
    target = ising(shape, lam, scale, seed, boundary)
    schedule = Schedule("geometric", 0.1, 100.0, 50, steps_for(name, 20, target))
    result = anneal(target, name, schedule, n_chains=8, seed=seed)
    gap = compare_with_map(result, target)
    x_map = exact_map(target)
    assert gap.exact_energy == pytest.approx(float(-target.log_prob(x_map)[0]), rel=1e-14)
    assert abs(gap.relative_gap) < 1e-12  # the very optimum, not close to it
    assert gap.agreement == 1.0  # a random field: the maximiser is unique
    assert gap.best_energy == pytest.approx(float(energy(target, result.best_state)[gap.chain]))
    assert (result.lowest_energy >= gap.exact_energy - 1e-9).all()  # nothing beats the cut


def test_annealing_reaches_the_optimum_of_a_general_submodular_network():
    generator = torch.Generator().manual_seed(4)
    n = 40
    h = torch.randn(n, generator=generator, dtype=torch.float64)
    w = torch.rand(n, n, generator=generator, dtype=torch.float64) * (
        torch.rand(n, n, generator=generator) < 0.15
    )
    upper = torch.triu(w, 1)
    target = PairwiseMRF(h, upper + upper.T)
    result = anneal(target, "gibbs", Schedule("geometric", 0.1, 100, 40, 400), n_chains=8)
    assert compare_with_map(result, target).relative_gap < 1e-12


def test_the_records_follow_the_schedule_and_the_best_is_the_lowest_seen():
    target = ising((10, 10), 0.9, 0.5, 3)
    schedule = Schedule("linear", 0.2, 30.0, 6, 7)
    result = anneal(target, "checkerboard", schedule, n_chains=5, seed=2, record_every=3)
    assert isinstance(result, AnnealingResult)
    # a record every 3 steps and at the end of each stage, after the start
    stage_ends = [7 * (k + 1) for k in range(6)]
    expected = sorted({0, *range(3, 43, 3), *stage_ends})
    assert list(result.steps) == expected
    assert np.array_equal(result.sweeps, result.steps.astype(float))  # a step is a sweep
    stage = np.maximum(result.steps - 1, 0) // 7  # the stage each record's last step was in
    assert np.allclose(result.beta, schedule.betas[stage])
    assert np.all(np.diff(result.seconds) >= 0) and result.wall_seconds >= result.seconds[-1]
    assert np.array_equal(result.best_energy, np.minimum.accumulate(result.energy, axis=0))
    assert np.allclose(result.final_energy, energy(target, result.state))
    assert np.allclose(result.lowest_energy, energy(target, result.best_state))
    assert result.energy.shape == (len(expected), 5) and result.state.shape == (5, 10, 10)
    # energies are under the untempered target: the start is a uniform random state
    start = torch.from_numpy(np.random.default_rng(0).choice([-1.0, 1.0], (5, 10, 10)))
    again = anneal(target, "checkerboard", schedule, n_chains=5, x0=start, record_every=3)
    assert np.allclose(again.energy[0], energy(target, start))


def test_a_single_site_sampler_counts_sweeps_by_sites():
    target = ising((4, 5), 0.5, 0.5, 1)
    result = anneal(target, "barker", Schedule("geometric", 1, 10, 2, 40), record_every=20)
    assert list(result.steps) == [0, 20, 40, 60, 80]
    assert np.allclose(result.sweeps, result.steps / 20)


def test_one_seed_gives_one_run():
    target = ising((8, 8))
    schedule = Schedule("geometric", 0.2, 50, 10, 64)
    runs = [anneal(target, "sqrt", schedule, n_chains=3, seed=7) for _ in range(2)]
    assert torch.equal(runs[0].state, runs[1].state)
    assert np.array_equal(runs[0].energy, runs[1].energy)


def test_time_to_gap_is_the_first_record_within_the_tolerance():
    target = ising((16, 16), 0.8, 0.5, 0)
    result = anneal(target, "checkerboard", Schedule("geometric", 0.1, 100, 50, 20), n_chains=8)
    gap = compare_with_map(result, target)
    seconds, steps, sweeps = time_to_gap(result, gap.exact_energy, 1e-3)
    r = list(result.steps).index(steps)
    assert relative_gap(result.best_energy[r], gap.exact_energy).min() <= 1e-3
    assert relative_gap(result.best_energy[r - 1], gap.exact_energy).min() > 1e-3
    assert seconds == result.seconds[r] and sweeps == steps
    assert time_to_gap(result, gap.exact_energy - 100.0, 1e-3) is None  # never below the cut


def test_relative_gap_of_a_zero_optimum():
    assert list(relative_gap([0.0, 1.0, -1.0], [0.0, 0.0, -2.0])) == [0.0, math.inf, 0.5]


# ----------------------------------------------------------------------------- the polish
def test_the_greedy_polish_climbs_to_a_local_maximum_and_never_down():
    target = ising((12, 12), 0.7, 0.6, 5)
    generator = torch.Generator().manual_seed(1)
    x = (2.0 * torch.randint(0, 2, (6, 12, 12), generator=generator) - 1).double()
    polished, sweeps = greedy_polish(target, x)
    assert sweeps >= 1 and polished.shape == x.shape
    assert (target.log_prob(polished) > target.log_prob(x)).all()
    assert (target.flip_log_ratios(polished) <= 0).all()  # no single flip helps any more
    again, more = greedy_polish(target, polished)
    assert more == 0 and torch.equal(again, polished)
    # a local maximum, not the global one: from random starts it stops short of the cut
    e_map = float(energy(target, exact_map(target))[0])
    assert (energy(target, polished) > e_map + 1.0).any()


def test_annealing_with_the_polish_records_the_polished_states():
    target = ising((12, 12), 0.7, 0.6, 5)
    schedule = Schedule("geometric", 0.1, 2.0, 5, 2)  # stopped hot: the polish has work
    result = anneal(target, "checkerboard", schedule, n_chains=4, polish=True)
    assert result.polish_sweeps >= 1
    assert result.steps[-1] == result.steps[-2] == 10  # a last record at the same step count
    assert (result.energy[-1] <= result.energy[-2]).all()
    assert (result.energy[-1] < result.energy[-2]).any()
    assert (target.flip_log_ratios(result.state) <= 0).all()


# ----------------------------------------------------------------------------- learned samplers
def test_learned_samplers_anneal_frozen_unless_asked_to_learn():
    target = ising((6, 6), 0.6, 0.5, 1)
    schedule = Schedule("geometric", 0.5, 20, 4, 200)
    frozen = anneal(target, "lsb1", schedule, n_chains=2)
    assert not frozen.learned
    balancing = make_balancing("lsb1", seed=0)
    before = [p.detach().clone() for p in balancing.parameters()]
    given = anneal(target, "lsb1", schedule, n_chains=2, balancing=balancing)
    assert all(torch.equal(a, b) for a, b in zip(before, balancing.parameters(), strict=True))
    assert given.sampler == "lsb1" and np.isfinite(given.energy).all()
    learning = anneal(target, "lsb1", schedule, n_chains=2, learn=True)
    assert learning.learned and np.isfinite(learning.energy).all()


# ----------------------------------------------------------------------------- no annealing
# the learned functions cost a few seconds each at 20,000 chains: in the slow set
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow) if REGISTRY[n].family == "learned" else n
        for n in REGISTRY
    ],
)
def test_without_annealing_every_sampler_samples_the_target(name, exact):
    """``beta = 1`` on every stage (the sampler is moved to ``tempered(1)`` between stages):
    20,000 independent chains (5,000 of a flow sampler) end as draws of the posterior of a
    2 x 3 lattice."""
    target = ising((2, 3), 0.5, 0.6, 4)
    options = {"balancing": make_balancing("lsb1", seed=3)} if name == "learned" else {}
    if name == "hamming-ball":
        options["block_size"] = 3  # a block within the 6 sites
    if REGISTRY[name].takes_flow:  # exact whatever the flow: a brief training (4 s, not 16)
        options["train_steps"] = 100
    sweeps = 12 if REGISTRY[name].move == "sweep" else 30
    steps = steps_for(name, sweeps, target, **options)
    if REGISTRY[name].batched_only:  # one MH proposal per step, however many sites it moves
        steps = 30 * target.n_sites
    if name == "neural-block":  # one 2 x 2 tile a step where one fits (half the offsets)
        steps = 60
    schedule = Schedule.constant(1.0, 3, steps // 3)
    # a flow sampler's chains are the costly ones (the test took 148 s with 20,000), and dHMC's
    # (20 s: its crossings are taken one at a time): 5,000 draws keep the noise floor (0.084
    # here) far below the 0.35 that a wrong temperature gives
    n = 5_000 if REGISTRY[name].family in ("flow", "hamiltonian") else 20_000
    result = anneal(target, name, schedule, n_chains=n, seed=5, record_every=10**6, **options)
    counts = np.bincount(exact_chain.state_codes(result.state).numpy(), minlength=64)
    pi = exact_chain.exact_distribution(target)
    assert exact.tv(pi, counts) < exact.tv_threshold(pi, n)
    # and the check can fail: these are not draws of a colder or hotter posterior
    for beta in (0.5, 2.0):
        assert exact.tv(exact_chain.exact_distribution(target.tempered(beta)), counts) > 0.2


# ----------------------------------------------------------------------------- the app's view
def test_the_view_anneals_the_chosen_samplers_on_a_bounded_window():
    from app.views import annealing as view

    assert view.anneal_names(["barker", "lsb1"], "run") == ["barker", "lsb1"]
    assert view.anneal_names(["barker", "checkerboard"], "both") == ["barker", "checkerboard"]
    assert view.anneal_names(["barker"], "both") == ["barker", "checkerboard"]
    assert view.anneal_names(["barker"], "block") == ["checkerboard"]
    # sites x sweeps x chains within the budget of the most expensive kind chosen
    assert view.window_shape((30, 30), ["barker"], 300) == (30, 30)
    rows, cols = view.window_shape((128, 128), ["barker", "checkerboard"], 300)
    assert rows == cols and rows * cols * 300 * view.CHAINS <= view.BUDGET["site"]
    assert (rows + 1) ** 2 * 300 * view.CHAINS > view.BUDGET["site"]  # the largest that fits
    assert view.window_shape((128, 128), ["checkerboard"], 300) == (128, 128)
    assert view.window_shape((64, 128), ["sqrt"], 10**5) == (8, 8)  # never below MIN_SIDE
    alpha = torch.arange(2 * 6 * 8, dtype=torch.float64).reshape(2, 6, 8) / 100
    target = IsingPosterior(alpha, 0.7, "periodic")
    window = view.chain_zero_window(target, 2, 4)
    assert torch.equal(window.alpha[0], alpha[0, 2:4, 2:6]) and window.boundary == "free"
    assert view.chain_zero_window(target, 6, 8).boundary == "periodic"


def test_the_view_compares_every_sampler_with_the_cut_and_draws_them():
    from app.views import annealing as view

    target = ising((10, 10), 0.6, 0.8, 1)
    schedule = Schedule("geometric", 0.2, 100, 20, 10)
    result = view.annealing_view(target, ["barker", "checkerboard"], schedule, seed=3)
    assert list(result.results) == ["barker", "checkerboard"]
    assert result.results["barker"].schedule.steps_per_stage == 10 * 100
    assert np.array_equal(result.map_state, exact_map(target)[0].numpy())
    rows = view.table(result)
    assert [r["sampler"] for r in rows] == ["t/(1+t)", "Checkerboard Gibbs"]
    assert all(abs(r["relative gap"]) < 1e-12 and r["sites agreeing"] == 1.0 for r in rows)
    images = view.map_images(result)
    assert [c for _, c in images] == [
        "Exact MAP (minimum cut)",
        "t/(1+t): equal to the exact MAP",
        "Checkerboard Gibbs: equal to the exact MAP",
    ]
    names = [trace.name for trace in result.figure.data]
    assert "t/(1+t)" in names and "Checkerboard Gibbs" in names
    assert result.figure.layout.yaxis2.type == "log"
    assert view.annealing_view(target, [], schedule).message.startswith("Choose at least one")


def test_the_energy_figure_draws_the_exact_map_line_and_the_gaps():
    from lsbcore.studies import figures

    curves = {
        "sqrt": {
            "sweeps": np.arange(4.0),
            "lowest": np.array([-5.0, -8.0, -9.0, -10.0]),
            "current": np.array([-5.0, -8.0, -7.0, -10.0]),
        }
    }
    fig = figures.annealing_energy_figure(curves, -10.0)
    gap = next(t for t in fig.data if t.name.endswith(" gap"))
    assert np.allclose(gap.y[:3], [0.5, 0.2, 0.1]) and np.isnan(gap.y[3])  # 0: off the log axis
    assert fig.layout.shapes[0].y0 == -10.0  # the exact MAP's energy as a line
    empty = figures.annealing_energy_figure({}, None)
    assert empty.layout.annotations[0].text == "no data yet"
