"""Contrast-sensitive smoothing: a lattice whose edges weigh ``lambda * c_ij``
(``IsingPosterior(edge_scale=...)``, ``segmentation.contrast``), against plain-loop definitions
and exact enumeration."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore import IsingPosterior, make_sampler
from lsbcore.exact import exact_distribution, state_codes
from lsbcore.segmentation.contrast import contrast_scale
from lsbcore.segmentation.map_estimate import exact_map
from lsbcore.targets.ising import lattice_edges
from tests.test_ising import brute_edges, random_states

pytestmark = pytest.mark.usefixtures("single_thread")


def brute_log_prob(alpha, lam, edges, scale, x) -> float:
    return sum(alpha[i] * x[i] for i in range(len(x))) + sum(
        lam * c * x[i] * x[j] for (i, j), c in zip(edges, scale, strict=True)
    )


def random_scale(n_edges: int, seed: int) -> torch.Tensor:
    return torch.rand(n_edges, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("boundary", ["free", "periodic"])
@pytest.mark.parametrize("shape", [(3, 4), (2, 2), (1, 5), (2, 3)])
def test_log_prob_and_flip_log_ratios_weigh_each_edge_by_its_factor(shape, boundary):
    height, width = shape
    edges = brute_edges(height, width, boundary)
    order = [tuple(e) for e in lattice_edges(height, width, boundary).tolist()]
    assert sorted(order) == sorted(edges)  # the same multigraph; the factors follow ``order``
    scale = random_scale(len(edges), seed=height * 10 + width)
    alpha = torch.randn(height, width, generator=torch.Generator().manual_seed(1)) * 1.5
    target = IsingPosterior(alpha, 0.8, boundary, edge_scale=scale)
    x = random_states(5, height, width, seed=3)
    log_p = target.log_prob(x)
    s = target.flip_log_ratios(x).reshape(5, -1)
    a = alpha.reshape(-1).double().numpy()
    for b in range(5):
        xb = x[b].reshape(-1).numpy()
        assert log_p[b].item() == pytest.approx(
            brute_log_prob(a, 0.8, order, scale.tolist(), xb), abs=1e-12
        )
        for i in range(height * width):
            flipped = xb.copy()
            flipped[i] *= -1
            expected = brute_log_prob(a, 0.8, order, scale.tolist(), flipped) - brute_log_prob(
                a, 0.8, order, scale.tolist(), xb
            )
            assert s[b, i].item() == pytest.approx(expected, abs=1e-12)


def test_factors_of_one_are_the_plain_lattice_and_chain_and_tempered_keep_them():
    alpha = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    n_edges = len(lattice_edges(3, 4, "free"))
    plain = IsingPosterior(alpha, 1.1)
    ones = IsingPosterior(alpha, 1.1, edge_scale=torch.ones(n_edges))
    x = random_states(2, 3, 4, seed=4)
    torch.testing.assert_close(ones.log_prob(x), plain.log_prob(x), rtol=0, atol=1e-12)
    scale = random_scale(n_edges, seed=5)
    target = IsingPosterior(alpha, 1.1, edge_scale=scale)
    torch.testing.assert_close(target.chain(1).edge_weights, 1.1 * scale, rtol=0, atol=1e-15)
    torch.testing.assert_close(target.tempered(0.5).edge_weights, 0.55 * scale, rtol=0, atol=1e-15)


@pytest.mark.parametrize(
    ("scale", "message"),
    [
        (torch.ones(3), "one factor per edge"),
        (-torch.ones(17), "finite factors >= 0"),
        (torch.full((17,), float("nan")), "finite factors >= 0"),
        ("many", "edge_scale must be a numeric array"),
    ],
)
def test_bad_factors_are_refused_in_a_sentence(scale, message):
    with pytest.raises(ValueError, match=message):
        IsingPosterior(torch.zeros(3, 4), 1.0, edge_scale=scale)


def test_the_factors_follow_grabcuts_formula():
    """``exp(-beta |y_i - y_j|^2)`` with ``beta = 1 / (2 <|y_i - y_j|^2>)``, written out."""
    colours = np.random.default_rng(0).random((3, 4, 3))
    scale = contrast_scale(colours)
    pairs = [tuple(e) for e in lattice_edges(3, 4, "free").tolist()]
    flat = colours.reshape(12, 3)
    squared = [float(((flat[i] - flat[j]) ** 2).sum()) for i, j in pairs]
    beta = 1.0 / (2.0 * (sum(squared) / len(squared)))
    expected = [math.exp(-beta * d) for d in squared]
    np.testing.assert_allclose(scale.numpy(), expected, rtol=1e-12)


def test_an_edge_across_a_colour_step_couples_less_and_a_flat_image_keeps_lambda():
    grey = np.zeros((4, 6))
    grey[:, 3:] = 1.0  # a vertical step between columns 2 and 3
    scale = contrast_scale(grey)
    pairs = lattice_edges(4, 6, "free")
    across = (pairs[:, 0] % 6 == 2) & (pairs[:, 1] % 6 == 3)
    assert torch.all(scale[~across] == 1.0)
    assert torch.all(scale[across] < 0.01)  # mean |d|^2 is 4/38 here: exp(-38/8)
    assert torch.equal(contrast_scale(np.full((3, 3, 3), 0.4)), torch.ones(12, dtype=torch.float64))


def test_the_minimum_cut_is_the_enumerated_maximum_with_factors():
    alpha = torch.randn(3, 3, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    scale = 3.0 * random_scale(len(lattice_edges(3, 3, "free")), seed=10)
    target = IsingPosterior(alpha, 1.0, edge_scale=scale)
    best = int(np.argmax(exact_distribution(target)))
    assert int(state_codes(exact_map(target).reshape(1, 3, 3))[0]) == best


def test_checkerboard_gibbs_samples_the_weighted_lattice_exactly(exact):
    """20,000 independent chains of a 2x3 lattice whose couplings range over 0-1.5, 60 sweeps:
    their last states against the enumerated posterior (threshold: see conftest)."""
    alpha = exact.random_alpha((2, 3), 0.5, seed=12)
    scale = 3.0 * random_scale(len(lattice_edges(2, 3, "free")), seed=13)
    target = IsingPosterior(alpha, 0.5, edge_scale=scale)
    p = exact.exact_posterior(target)
    chains = 20_000
    counts = exact.histogram(make_sampler("checkerboard", target, chains, seed=5), 59, 1, 1)
    assert exact.tv(p, counts) < exact.tv_threshold(p, chains)
