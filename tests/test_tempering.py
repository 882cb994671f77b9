"""Parallel tempering (``lsbcore.tempering``): the exchange's acceptance against a hand
computation, every replica against enumeration of ``p^beta_r`` for block Gibbs, sqrt and a
learned sampler, the ladder and its adaptation, mode statistics, refusals in sentences, and the
bimodal preset where a single chain is stuck and the cold chain of tempering is not.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore import IsingPosterior
from lsbcore import exact as exact_chain
from lsbcore.tempering import (
    LadderAdaptation,
    ParallelTempering,
    bimodal_ising,
    check_ladder,
    geometric_ladder,
    mode_path,
    mode_summary,
    parallel_tempering,
    swap_log_acceptance,
)
from lsbcore.tempering.comparison import compare_with_single_chain

pytestmark = pytest.mark.usefixtures("single_thread")

ALPHA_2X2 = [[0.3, -0.2], [0.1, 0.4]]
ALL_UP = [[1.0, 1.0], [1.0, 1.0]]
CHECKER = [[1.0, -1.0], [-1.0, 1.0]]


def weak_data(shape=(3, 3), lam=0.9, seed=3):
    """Strong coupling, weak data: two modes of unequal weight on a lattice small enough to
    enumerate."""
    generator = torch.Generator().manual_seed(seed)
    alpha = 0.15 * torch.randn(*shape, generator=generator, dtype=torch.float64)
    return IsingPosterior(alpha, lam, "free")


def replica_histograms(pt, burn_in, draws, thin=2):
    """Counts of visited state codes per replica ``[R, 2^n]`` over ``draws`` sampled states
    ``thin`` rounds apart, after ``burn_in`` rounds."""
    k = 2**pt.target.n_sites
    counts = np.zeros((pt.n_replicas, k))
    pt.burn_in(burn_in)
    for _ in range(draws):
        pt.sample(thin)
        for r, sampler in enumerate(pt.samplers):
            counts[r] += np.bincount(exact_chain.state_codes(sampler.x).numpy(), minlength=k)
    return counts


# ----------------------------------------------------------------------------- the exchange
def test_swap_acceptance_matches_a_hand_computation():
    """2 x 2, lambda = 0.5: log p~(all +1) = 0.6 + 4 x 0.5 = 2.6 and log p~(checkerboard)
    = 0.8 - 2 = -1.2. With betas (1, 0.4), the checkerboard cold and all +1 hot, the exchange
    is always accepted; the other way round with probability exp(-0.6 x 3.8) = 0.1023."""
    target = IsingPosterior(torch.tensor(ALPHA_2X2), 0.5, "free")
    up, checker = torch.tensor(ALL_UP), torch.tensor(CHECKER)
    assert float(target.log_prob(up[None])) == pytest.approx(2.6)
    assert float(target.log_prob(checker[None])) == pytest.approx(-1.2)
    assert swap_log_acceptance(1.0, 0.4, -1.2, 2.6) == pytest.approx(2.28)
    assert swap_log_acceptance(1.0, 0.4, 2.6, -1.2) == pytest.approx(-2.28)

    chains = 20_000
    pt = ParallelTempering(target, "sqrt", chains, betas=[1.0, 0.4], seed=4)
    pt.samplers[0].set_state(checker)
    pt.samplers[1].set_state(up)
    log_p = pt.exchange()
    assert pt.swaps.accepts[0] == chains  # all accepted: the states changed places
    assert torch.equal(pt.samplers[0].x, up.expand(chains, 2, 2))
    assert torch.equal(pt.samplers[1].x, checker.expand(chains, 2, 2))
    assert np.allclose(log_p, [[2.6], [-1.2]])
    assert pt.samplers[0].invariant_error() < 1e-12 and pt.samplers[1].invariant_error() < 1e-12

    pt.swaps.__init__(1)
    log_p = pt.exchange()  # now all +1 is cold: accepted with exp(-2.28)
    expected = math.exp(-2.28)
    rate = pt.swaps.rates[0]
    assert abs(rate - expected) < 4 * math.sqrt(expected * (1 - expected) / chains)
    assert pt.swaps.mean_probability[0] == pytest.approx(expected)
    # the swapped chains hold the checkerboard in the cold replica, and log p~ says so
    cold_codes = exact_chain.state_codes(pt.samplers[0].x)
    swapped = cold_codes == exact_chain.state_codes(checker[None])
    assert int(swapped.sum()) == pt.swaps.accepts[0]
    assert np.allclose(log_p[0], np.where(swapped.numpy(), -1.2, 2.6))


def test_a_hot_replica_at_beta_zero_exchanges_by_the_untempered_target():
    """beta = 0 is the uniform distribution; the exchange still uses log p~ itself."""
    target = IsingPosterior(torch.tensor(ALPHA_2X2), 0.5, "free")
    pt = ParallelTempering(target, "checkerboard", 5000, betas=[1.0, 0.0], seed=1)
    pt.samplers[0].set_state(torch.tensor(ALL_UP))
    pt.samplers[1].set_state(torch.tensor(CHECKER))
    pt.exchange()
    expected = math.exp(-3.8)  # (1 - 0) (-1.2 - 2.6)
    assert pt.swaps.mean_probability[0] == pytest.approx(expected)
    assert abs(pt.swaps.rates[0] - expected) < 4 * math.sqrt(expected / 5000)


# ----------------------------------------------------------------------------- exactness
@pytest.mark.parametrize("sampler", ["checkerboard", "sqrt", "lsb1"])
def test_every_replica_samples_its_tempered_posterior(sampler, exact):
    """3 x 3, lambda = 0.9, weak data: replica r's states follow p^beta_r (enumerated), the
    cold one p itself; lsb1 learns at its own temperature during burn-in, then is frozen."""
    target = weak_data()
    pt = ParallelTempering(target, sampler, 48, betas=[1.0, 0.6, 0.3], seed=7)
    before = [s.balancing.weights().copy() for s in pt.samplers] if sampler == "lsb1" else []
    counts = replica_histograms(pt, burn_in=150, draws=350)
    for r, beta in enumerate(pt.betas):
        pi = exact_chain.exact_distribution(target.tempered(float(beta)))
        assert exact.tv(pi, counts[r]) < exact.tv_threshold(pi, counts[r].sum()), r
    assert exact.tv(exact_chain.exact_distribution(target), counts[2]) > 0.2  # beta matters
    for old, sampler_r in zip(before, pt.samplers[: len(before)], strict=True):
        assert not np.allclose(old, sampler_r.balancing.weights())  # it learned


def test_the_check_catches_an_exchange_without_its_acceptance(monkeypatch, exact):
    """Always swapping (no Metropolis-Hastings ratio) leaves the cold replica far from p."""

    def always(beta, beta_next, log_p, log_p_next):
        return torch.zeros_like(log_p)

    monkeypatch.setattr(parallel_tempering, "swap_log_acceptance", always)
    target = weak_data()
    pt = ParallelTempering(target, "checkerboard", 48, betas=[1.0, 0.6, 0.3], seed=7)
    counts = replica_histograms(pt, burn_in=50, draws=150)
    pi = exact_chain.exact_distribution(target)
    assert exact.tv(pi, counts[0]) > 3 * exact.tv_threshold(pi, counts[0].sum())


def test_replicas_sample_their_own_temperature_of_the_target():
    target = weak_data()
    pt = ParallelTempering(target, "barker", 2, n_replicas=4, beta_min=0.125)
    assert np.allclose(pt.betas, [1.0, 0.5, 0.25, 0.125])
    states = exact_chain.all_states(9).view(-1, 3, 3)[:50]
    for beta, sampler in zip(pt.betas, pt.samplers, strict=True):
        assert torch.allclose(sampler.target.log_prob(states), beta * target.log_prob(states))
    assert pt.swap_every == 9 and pt.sweeps_per_round == 1.0
    assert ParallelTempering(target, "checkerboard").swap_every == 1


def test_one_seed_gives_the_same_tempering_run():
    runs = []
    for _ in range(2):
        pt = ParallelTempering(weak_data(), "sqrt", 3, n_replicas=3, beta_min=0.3, seed=11)
        pt.sample(40)
        runs.append((pt.magnetisation.copy(), pt.swaps.accepts.copy()))
    assert np.array_equal(runs[0][0], runs[1][0]) and np.array_equal(runs[0][1], runs[1][1])


# ----------------------------------------------------------------------------- the ladder
def test_geometric_ladder_has_equal_ratios():
    ladder = geometric_ladder(5, 0.0625)
    assert np.allclose(ladder, [1.0, 0.5, 0.25, 0.125, 0.0625])
    assert ladder[0] == 1.0 and ladder[-1] == 0.0625


def test_adaptation_widens_a_pair_that_swaps_often_and_keeps_the_ends():
    adaptation = LadderAdaptation(geometric_ladder(4, 0.125))
    ladder = adaptation.update([0.9, 0.5, 0.1])
    ratios = ladder[:-1] / ladder[1:]
    assert ratios[0] > 2.0 > ratios[2]  # a busy pair wider apart, a rare one closer
    assert ladder[0] == 1.0 and ladder[-1] == pytest.approx(0.125)
    assert np.all(np.diff(ladder) < 0)


def test_adapted_ladder_evens_out_the_swap_rates_then_stays_fixed():
    """A badly spaced ladder (three replicas near 1, then a jump to 0.2) on a 6 x 6 bimodal
    lattice: burn-in moves it toward equal rates; sampling leaves it as it is."""
    target = bimodal_ising(size=6, lam=0.8)
    bad = [1.0, 0.97, 0.94, 0.91, 0.2]
    fixed = ParallelTempering(target, "checkerboard", 8, betas=bad, seed=2)
    fixed.sample(300)
    pt = ParallelTempering(target, "checkerboard", 8, betas=bad, adapt=True, seed=2)
    pt.burn_in(600)
    adapted = pt.betas.copy()
    pt.sample(300)
    assert np.array_equal(pt.betas, adapted) and len(pt.ladder_history) == 61
    assert adapted[0] == 1.0 and adapted[-1] == pytest.approx(0.2)
    spread = np.ptp(pt.swaps.mean_probability)
    assert spread < 0.5 * np.ptp(fixed.swaps.mean_probability)
    assert pt.swaps.mean_probability.min() > 2 * fixed.swaps.mean_probability.min()


# ----------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    ("betas", "words"),
    [
        ([1.0, 0.5, 0.7], "strictly decreasing"),
        ([1.0, 0.5, 0.5], "strictly decreasing"),
        ([1.0, -0.1], r"\[0, 1\]"),
        ([1.0, 1.5, 0.2], r"\[0, 1\]"),
        ([0.9, 0.5], "first beta must be 1"),
        ([1.0], "between 2 and"),
        ([1.0, float("nan")], r"\[0, 1\]"),
        ([1.0, True], "real number"),
        ("1, 0.5", "sequence"),
    ],
)
def test_a_bad_ladder_is_refused_with_a_sentence(betas, words):
    with pytest.raises(ValueError, match=words):
        check_ladder(betas)
    with pytest.raises(ValueError, match=words):
        ParallelTempering(weak_data(), "sqrt", betas=betas)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"sampler": "hmc"}, "unknown sampler 'hmc'"),
        ({"beta_min": 0.0}, "strictly between 0 and 1"),
        ({"beta_min": 1.2}, "beta_min"),
        ({"n_replicas": 1}, "n_replicas"),
        ({"swap_every": 0}, "swap_every"),
        ({"n_chains": 0}, "n_chains"),
        ({"adapt": "yes"}, "adapt must be True or False"),
        ({"betas": [1.0, 0.5, 0.0], "adapt": True}, "above 0"),
        ({"sampler": "learned"}, "needs balancing"),
    ],
)
def test_bad_arguments_are_refused_with_a_sentence(kwargs, words):
    with pytest.raises(ValueError, match=words):
        ParallelTempering(weak_data(), **kwargs)


def test_a_target_is_required():
    with pytest.raises(ValueError, match="lsbcore target"):
        ParallelTempering(np.zeros((3, 3)), "sqrt")


# ----------------------------------------------------------------------------- modes
def test_modes_switch_only_across_the_threshold():
    m = np.array([0.1, 0.6, 0.2, -0.3, -0.7, -0.4, 0.55, 0.9])
    assert mode_path(m).ravel().tolist() == [0, 1, 1, 1, -1, -1, 1, 1]
    summary = mode_summary(m)
    assert summary.switches.tolist() == [2]
    assert summary.fraction_plus[0] == pytest.approx(5 / 8)
    assert summary.fraction_minus[0] == pytest.approx(2 / 8)
    # two chains at once; a chain that never crosses has no mode and no switch
    both = np.stack([m, np.full(8, 0.3)], 1)
    assert mode_summary(both).switches.tolist() == [2, 0]
    assert mode_summary(both, threshold=0.25).fraction_plus[1] == 1.0
    with pytest.raises(ValueError, match="threshold"):
        mode_path(m, threshold=1.5)


# ----------------------------------------------------------------------------- the preset
def test_bimodal_preset_is_a_symmetric_strongly_coupled_lattice():
    target = bimodal_ising()
    assert target.shape == (16, 16) and target.boundary == "free"
    assert target.lam > 0.44 and float(target.alpha.abs().max()) == 0.0
    up = torch.ones(1, 16, 16)
    assert float(target.log_prob(up)) == float(target.log_prob(-up))
    weak = bimodal_ising(data=0.05, seed=1)
    assert 0 < float(weak.alpha.abs().max()) < 0.3


def test_tempering_crosses_modes_where_a_single_chain_is_stuck():
    """8 x 8 at lambda = 0.8, 1,500 sweeps of block Gibbs: the single chain never leaves its
    mode, the cold chain of tempering switches many times and spends time in both."""
    result = compare_with_single_chain(
        bimodal_ising(size=8), "checkerboard", sweeps=1500, burn_in=200, n_chains=2,
        n_replicas=6, beta_min=0.3, seed=0,
    )  # fmt: skip
    assert result.magnetisation.shape == (1500, 6, 2) and result.single.shape == (1500, 2)
    assert result.single_modes.switches.max() <= 1
    assert result.tempered_modes.switches.min() >= 20
    assert np.all(result.tempered_modes.fraction_plus > 0.2)
    assert np.all(result.tempered_modes.fraction_minus > 0.2)
    assert np.all((result.swap_rates > 0.05) & (result.swap_rates < 1))


@pytest.mark.parametrize("batch", [None, 3])
def test_the_exchange_reads_each_chains_own_untempered_posterior(batch):
    """One field for all chains, or one per chain (the paper's cases): the log p~ the exchange
    used is the untempered target's at every replica's states after it."""
    generator = torch.Generator().manual_seed(5)
    alpha = 0.4 * torch.randn(*((batch,) if batch else ()), 3, 3, generator=generator)
    target = IsingPosterior(alpha, 0.7, "periodic")
    pt = ParallelTempering(target, "gibbs", 3, n_replicas=4, beta_min=0.2, seed=3)
    pt.sample(5)
    log_p = pt.exchange()
    for r, sampler in enumerate(pt.samplers):
        assert np.allclose(log_p[r], target.log_prob(sampler.x).numpy(), atol=1e-12)


def test_a_ladder_adapts_only_from_pairs_it_has_seen_swap():
    """A burn-in resumed one round before an update has seen only one parity of pairs: the
    ladder waits for the next window instead of reading rates that do not exist."""
    pt = ParallelTempering(weak_data(), "checkerboard", 2, n_replicas=4, beta_min=0.2, adapt=True)
    pt.burn_in(9)
    pt.burn_in(5)
    assert np.all(np.isfinite(pt.betas)) and len(pt.ladder_history) == 1
    pt.burn_in(20)
    assert len(pt.ladder_history) == 3 and np.all(np.diff(pt.betas) < 0)


def test_learning_stops_where_asked_and_burn_in_cannot_follow_sampling():
    pt = ParallelTempering(weak_data(), "lsb1", 2, n_replicas=3, beta_min=0.3, adapt=True, seed=1)
    pt.burn_in(10)
    learned = [s.balancing.weights().copy() for s in pt.samplers]
    pt.burn_in(10, learn=False)
    pt.sample(20)
    for before, sampler in zip(learned, pt.samplers, strict=True):
        assert np.array_equal(before, sampler.balancing.weights())
    with pytest.raises(ValueError, match="burn_in comes before sample"):
        pt.burn_in(20)  # the ladder and the functions stay as they are


# ----------------------------------------------------------------------------- figures
def test_tempering_figures_draw_every_replica_and_say_when_there_is_nothing():
    from lsbcore.studies import figures

    result = compare_with_single_chain(
        bimodal_ising(size=4), "checkerboard", sweeps=50, burn_in=20, n_replicas=4
    )
    ladder = figures.tempering_ladder_figure(result.betas, result.swap_rates, result.ladder_history)
    assert list(ladder.data[-1].x) == ["0↔1", "1↔2", "2↔3"]  # one bar per pair
    assert np.allclose(ladder.data[-2].y, result.betas)
    replicas = figures.replica_magnetisation_figure(result.magnetisation[:, :, 0], result.betas)
    assert len(replicas.data) == 4 and replicas.data[0].name == "β = 1.00"  # cold on top
    cold = figures.cold_versus_single_figure(result.cold[:, 0], result.single[:, 0], "sqrt")
    assert [t.name for t in cold.data] == ["parallel tempering, cold chain", "single chain"]
    for empty in (
        figures.tempering_ladder_figure([], []),
        figures.replica_magnetisation_figure([], []),
        figures.cold_versus_single_figure([], [], "sqrt"),
    ):
        assert empty.layout.annotations[0].text == "no data yet"


def test_the_tempering_tables_print_short_numbers():
    from types import SimpleNamespace

    import numpy as np

    from app.views import tempering as view

    modes = SimpleNamespace(
        fraction_plus=np.array([0.123456789]), fraction_minus=np.array([1e-17]),
        switches=np.array([12345]),
    )  # fmt: skip
    result = SimpleNamespace(
        betas=np.array([1.0, 0.3333333333]), swap_rates=np.array([0.2345678]),
        tempered_modes=modes, single_modes=modes, tempering_seconds=1.23456,
        single_seconds=0.5,
    )  # fmt: skip
    assert view.swap_table(result)[0]["β_r+1"] == "0.333"
    row = view.mode_table(result)[0]
    assert row["time in mode +1"] == "0.123" and row["time in mode −1"] == "1e-17"
    assert row["mode switches"] == "12,345" and row["wall time (s)"] == "1.23"
