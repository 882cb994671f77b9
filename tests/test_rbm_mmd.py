"""The RBM experiment's MMD: the public GWG code's kernel and its V-statistic, by hand."""

import math
import re

import numpy as np
import pytest
import torch

from lsbcore.diagnostics.mmd import hamming_kernel, log_mmd, mmd


def test_mmd_matches_a_hand_computation_on_two_tiny_sets():
    # a = {10, 00}, b = {11}: mismatch fractions a-a: 0, 1/2; a-b: 1/2, 1
    a = torch.tensor([[1, 0], [0, 0]])
    b = torch.tensor([[1, 1]])
    kaa = (1 + math.exp(-0.5) + math.exp(-0.5) + 1) / 4
    kbb = 1.0
    kab = (math.exp(-0.5) + math.exp(-1.0)) / 2
    assert mmd(a, b) == pytest.approx(kaa + kbb - 2 * kab, abs=1e-15)
    assert log_mmd(a, b) == pytest.approx(math.log10(kaa + kbb - 2 * kab), abs=1e-14)


def test_mmd_is_the_v_statistic_keeping_the_diagonal():
    # identical samples: the V-statistic is exactly 0; the U-statistic (diagonal dropped from
    # the within-sample terms only) would not be
    a = torch.tensor([[1, 0, 0], [0, 1, 1]])
    assert mmd(a, a) == 0.0
    assert log_mmd(a, a) == -math.inf
    # one point each, d sites apart of n: 1 + 1 - 2 e^(-d/n) (a U-statistic is undefined here)
    x, y = torch.tensor([[1, 1, 0, 0]]), torch.tensor([[0, 1, 1, 0]])
    assert mmd(x, y) == pytest.approx(2 - 2 * math.exp(-0.5), abs=1e-15)


def test_mmd_equals_the_definition_summed_pair_by_pair():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 2, (7, 9)), rng.integers(0, 2, (5, 9))

    def k(x, y):
        return math.exp(-np.mean(x != y))

    def mean_k(p, q):
        return np.mean([[k(x, y) for y in q] for x in p])

    expected = mean_k(a, a) + mean_k(b, b) - 2 * mean_k(a, b)
    assert mmd(a, b) == pytest.approx(expected, abs=1e-14)
    assert mmd(b, a) == pytest.approx(expected, abs=1e-14)
    assert hamming_kernel(
        torch.tensor(2.0 * a - 1), torch.tensor(2.0 * b - 1)
    ).numpy() == pytest.approx(np.array([[k(x, y) for y in b] for x in a]), abs=1e-15)


def test_zero_one_and_plus_minus_one_states_give_the_same_mmd():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 2, (6, 5)), rng.integers(0, 2, (4, 5))
    spins_a, spins_b = torch.tensor(2 * a - 1), torch.tensor(2 * b - 1)
    assert mmd(spins_a, spins_b) == mmd(a, b) == mmd(a, spins_b)


@pytest.mark.parametrize(
    "a, b, words",
    [
        (torch.zeros(3), torch.zeros(2, 3), "shape [N, n]"),
        (torch.zeros(2, 3), torch.zeros(2, 4), "same number of sites"),
        (torch.full((2, 3), 0.5), torch.zeros(2, 3), "binary states"),
        (torch.tensor([[0.0, -1.0]]), torch.zeros(1, 2), "binary states"),
        ([[0, 1]], torch.zeros(1, 2), "tensor or array"),
    ],
)
def test_bad_samples_are_refused_in_a_sentence(a, b, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        mmd(a, b)


def test_a_precomputed_truth_term_gives_the_same_mmd():
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 2, (6, 8)), rng.integers(0, 2, (9, 8))
    spins = torch.tensor(2.0 * b - 1)
    b_self = float(hamming_kernel(spins, spins).mean())
    assert mmd(a, b, b_self) == pytest.approx(mmd(a, b), abs=1e-15)
    assert log_mmd(a, b, b_self) == pytest.approx(log_mmd(a, b), abs=1e-13)
    assert mmd(a, b, b_self + 0.1) == pytest.approx(mmd(a, b) + 0.1, abs=1e-15)
