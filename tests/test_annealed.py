"""Annealed importance sampling of an Ising posterior's log Z (``lsbcore.importance.annealed``),
against exact answers: enumeration on a 3 x 3 lattice, the transfer matrix on an 8 x 8 digit,
and the closed form where the coupling is off."""

from __future__ import annotations

import math

import pytest
import torch

from lsbcore.exact.states import all_states
from lsbcore.importance.annealed import annealed_log_partition
from lsbcore.importance.transfer import transfer_log_partition
from lsbcore.studies.flows.denoising import denoising_problem
from lsbcore.targets.ising import IsingPosterior
from lsbcore.targets.pairwise import PairwiseMRF

pytestmark = pytest.mark.usefixtures("single_thread")


def _enumerated_log_z(target) -> float:
    states = all_states(target.height * target.width).double()
    return float(torch.logsumexp(target.log_prob(states), 0))


@pytest.mark.parametrize("boundary", ["free", "periodic"])
def test_the_estimate_is_the_enumerated_log_z_within_its_error(boundary):
    alpha = torch.tensor([[0.3, -1.2, 0.5], [2.0, 0.1, -0.4], [-0.8, 0.9, 0.2]])
    target = IsingPosterior(alpha, 0.9, boundary)
    exact = _enumerated_log_z(target)
    got = annealed_log_partition(target, runs=2048, temperatures=200, seed=1)
    assert 0 < got.log_z_se < 0.05
    assert abs(got.log_z - exact) < 4 * got.log_z_se + 0.005
    assert 0 < got.ess <= 2048


def test_too_few_temperatures_are_biased_low_and_say_so_in_their_error():
    # one temperature: plain importance sampling from the field alone, on a strong coupling
    target = IsingPosterior(0.1 * torch.ones(3, 3), 1.5)
    exact = _enumerated_log_z(target)
    one = annealed_log_partition(target, runs=256, temperatures=1, seed=0)
    many = annealed_log_partition(target, runs=256, temperatures=300, seed=0)
    assert one.log_z_se > 5 * many.log_z_se and one.ess < many.ess
    assert abs(many.log_z - exact) < abs(one.log_z - exact)


def test_without_coupling_every_weight_is_one_and_the_estimate_is_the_closed_form():
    alpha = torch.tensor([[0.5, -2.0], [1.0, 3.0]], dtype=torch.float64)
    got = annealed_log_partition(IsingPosterior(alpha, 0.0), runs=64, temperatures=5)
    closed = float(sum(math.log(2 * math.cosh(a)) for a in alpha.reshape(-1).tolist()))
    assert got.log_z == pytest.approx(closed, abs=1e-12) and got.log_z_se == 0.0
    assert got.ess == pytest.approx(64)


def test_the_8x8_digit_matches_the_transfer_matrix():
    target = denoising_problem(8).target
    got = annealed_log_partition(target, runs=256, temperatures=500, seed=0)
    assert abs(got.log_z - transfer_log_partition(target)) < 4 * got.log_z_se + 0.01


def test_other_targets_and_bad_settings_are_refused_in_a_sentence():
    mrf = PairwiseMRF(torch.zeros(4, dtype=torch.float64), torch.zeros(4, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="needs an IsingPosterior"):
        annealed_log_partition(mrf)
    several = IsingPosterior(torch.zeros(2, 3, 3), 0.5)
    with pytest.raises(ValueError, match="target.chain"):
        annealed_log_partition(several)
    target = IsingPosterior(torch.zeros(3, 3), 0.5)
    for bad in (dict(runs=1), dict(temperatures=0), dict(seed=-1)):
        with pytest.raises(ValueError):
            annealed_log_partition(target, **bad)
