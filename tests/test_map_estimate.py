"""exact_map: the minimum-cut MAP is the global maximiser of log p~, checked by enumeration."""

import numpy as np
import pytest
import torch

from lsbcore import IsingPosterior, PairwiseMRF, exact_map
from lsbcore.segmentation import map_estimate


def all_states(n: int) -> torch.Tensor:
    """Every state of ``{-1, +1}^n``, ``[2^n, n]`` float64."""
    bits = (torch.arange(2**n).unsqueeze(1) >> torch.arange(n)) & 1
    return (2.0 * bits - 1.0).to(torch.float64)


def best_log_probs(target) -> torch.Tensor:
    """``max_x log p~(x)`` for each field row, by enumerating all ``2^n`` states."""
    states = all_states(target.n_sites)
    return torch.stack([target.chain(b).log_prob(states).max() for b in range(target.batch)])


def assert_is_map(target) -> None:
    x = exact_map(target)
    assert x.shape == (target.batch, *target.shape)
    assert x.dtype == torch.float64
    assert bool((x.abs() == 1).all())
    # log-probs, not states: with a strong coupling several states tie for the maximum
    found = torch.stack([target.chain(b).log_prob(x[b : b + 1])[0] for b in range(target.batch)])
    torch.testing.assert_close(found, best_log_probs(target), rtol=0, atol=1e-9)


@pytest.mark.parametrize("shape", [(3, 3), (3, 4), (4, 4), (2, 4), (2, 2)])
@pytest.mark.parametrize("boundary", ["free", "periodic"])
@pytest.mark.parametrize("lam", [0.0, 0.3, 1.0, 2.5])
def test_ising_map_matches_enumeration(shape, boundary, lam):
    # (2, 4) and (2, 2) periodic are multigraphs: the wrap-around edge doubles the direct one
    seed = 1000 * shape[0] + 100 * shape[1] + 10 * int(4 * lam) + (boundary == "periodic")
    g = torch.Generator().manual_seed(seed)
    for _ in range(3):
        alpha = 6.0 * torch.rand(2, *shape, generator=g, dtype=torch.float64) - 3.0
        assert_is_map(IsingPosterior(alpha, lam, boundary))


@pytest.mark.parametrize("n", [10, 11, 12])
def test_pairwise_map_matches_enumeration(n):
    rng = np.random.default_rng(n)
    for _ in range(4):
        upper = np.triu(rng.exponential(1.0, (n, n)) * (rng.random((n, n)) < 0.3), 1)
        J = upper + upper.T  # non-negative, sparse
        h = rng.uniform(-3.0, 3.0, (2, n))
        assert_is_map(PairwiseMRF(h, J))


def test_ising_map_on_a_grid_with_a_tied_field():
    # alpha = 0 on half the sites: the coupling alone decides them, and ties abound
    alpha = torch.zeros(2, 4, 4, dtype=torch.float64)
    alpha[0, :, :2] = 1.0
    alpha[1, 0, 0] = -0.5
    assert_is_map(IsingPosterior(alpha, 0.7, "periodic"))


def test_without_coupling_the_map_is_the_sign_of_the_field():
    alpha = torch.tensor([[1.5, -0.2, 0.1], [-3.0, 2.0, -0.01]], dtype=torch.float64)
    x = exact_map(IsingPosterior(alpha, 0.0))
    torch.testing.assert_close(x[0], torch.sign(alpha), rtol=0, atol=0)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_with_a_huge_coupling_the_map_is_constant_on_the_side_of_the_summed_field(sign):
    g = torch.Generator().manual_seed(3)
    alpha = torch.randn(8, 8, generator=g, dtype=torch.float64)
    alpha = alpha - alpha.mean() + 0.2 * sign  # sum alpha has the sign `sign`, sites both ways
    assert (alpha > 0).any() and (alpha < 0).any()
    x = exact_map(IsingPosterior(alpha, 1e4))
    assert bool((x == sign).all())


def test_map_of_a_larger_lattice_is_a_local_maximum():
    # no single flip raises log p~ (a necessary condition, checkable where enumeration is not)
    g = torch.Generator().manual_seed(4)
    target = IsingPosterior(torch.randn(2, 40, 50, generator=g, dtype=torch.float64), 0.8)
    x = exact_map(target)
    assert float(target.flip_log_ratios(x).max()) <= 1e-9
    # and it beats the sign of the field, which ignores the coupling
    assert bool((target.log_prob(x) >= target.log_prob(torch.sign(target.alpha))).all())


def test_negative_weights_are_refused():
    J = np.zeros((4, 4))
    J[0, 1] = J[1, 0] = 1.0
    J[2, 3] = J[3, 2] = -0.5
    with pytest.raises(ValueError, match="negative edge weights.*not submodular.*another method"):
        exact_map(PairwiseMRF(np.zeros(4), J))


def test_targets_over_the_size_cap_are_refused(monkeypatch):
    monkeypatch.setattr(map_estimate, "MAX_SITES", 8)
    with pytest.raises(ValueError, match="9 sites; exact_map solves at most 8"):
        exact_map(IsingPosterior(torch.ones(3, 3), 1.0))


def test_a_non_target_is_refused():
    with pytest.raises(ValueError, match="target must be an lsbcore Target"):
        exact_map(torch.ones(3, 3))


def test_result_layout_follows_the_target():
    x = exact_map(IsingPosterior(torch.ones(5, 7), 1.0))
    assert x.shape == (1, 5, 7) and x.device == torch.device("cpu")
    torch.testing.assert_close(x, torch.ones(1, 5, 7, dtype=torch.float64))
    x = exact_map(PairwiseMRF(-torch.ones(3, 6), torch.zeros(6, 6)))
    assert x.shape == (3, 6)
    torch.testing.assert_close(x, -torch.ones(3, 6, dtype=torch.float64))
