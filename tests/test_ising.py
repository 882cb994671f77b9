"""The Ising target (spec section 1) against a brute-force definition written with plain loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore import IsingPosterior, make_sampler

SHAPES = [(3, 4), (4, 3), (1, 5), (5, 1), (2, 2), (2, 3), (3, 2), (1, 2), (2, 1), (1, 1)]
BOUNDARIES = ("free", "periodic")
pytestmark = pytest.mark.usefixtures("single_thread")


# ------------------------------------------------------------------------------ reference
def brute_edges(height: int, width: int, boundary: str) -> list[tuple[int, int]]:
    """Every site links to its right and lower neighbour; under a periodic boundary the last
    column / row wraps around. A side of 2 thus gives two edges between the same sites (the
    torus is a multigraph); a side of 1 would give a self-loop, a constant term, dropped."""
    edges = []
    for r in range(height):
        for c in range(width):
            here = r * width + c
            if c + 1 < width:
                edges.append((here, r * width + c + 1))
            elif boundary == "periodic" and width > 1:
                edges.append((here, r * width))
            if r + 1 < height:
                edges.append((here, (r + 1) * width + c))
            elif boundary == "periodic" and height > 1:
                edges.append((here, c))
    return edges


def brute_log_prob(alpha: np.ndarray, lam: float, edges, x: np.ndarray) -> float:
    """``sum_i alpha_i x_i + lam sum_{(i, j) in E} x_i x_j`` for one state (flat arrays)."""
    total = 0.0
    for i in range(len(x)):
        total += alpha[i] * x[i]
    for i, j in edges:
        total += lam * x[i] * x[j]
    return total


def brute_flip_log_ratio(alpha: np.ndarray, lam: float, edges, x: np.ndarray, i: int) -> float:
    """Spec formula ``s_i = -2 x_i (alpha_i + lam sum_{j ~ i} x_j)``, each edge counted."""
    field = alpha[i]
    for a, b in edges:
        if a == i:
            field += lam * x[b]
        if b == i:
            field += lam * x[a]
    return -2.0 * x[i] * field


def random_states(n: int, height: int, width: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    bits = torch.randint(0, 2, (n, height, width), generator=generator)
    return (2 * bits - 1).to(torch.float64)


def make_alpha(kind: str, n: int, height: int, width: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    shape = (height, width) if kind == "shared" else (n, height, width)
    return torch.randn(*shape, generator=generator, dtype=torch.float64) * 1.5


def alpha_of(alpha: torch.Tensor, b: int) -> np.ndarray:
    return (alpha if alpha.dim() == 2 else alpha[b]).reshape(-1).numpy()


# ------------------------------------------------------------------------------ values
@pytest.mark.parametrize("alpha_kind", ["shared", "per_chain"])
@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("shape", SHAPES)
def test_log_prob_and_flip_log_ratios_equal_the_brute_force_definition(shape, boundary, alpha_kind):
    height, width = shape
    n, lam = 4, 0.7
    alpha = make_alpha(alpha_kind, n, height, width, seed=height * 10 + width)
    target = IsingPosterior(alpha, lam, boundary)
    x = random_states(n, height, width, seed=1)
    edges = brute_edges(height, width, boundary)

    log_p = target.log_prob(x)
    s = target.flip_log_ratios(x)
    assert log_p.dtype == torch.float64 and s.dtype == torch.float64
    assert log_p.shape == (n,) and s.shape == (n, height, width)
    for b in range(n):
        a, xb = alpha_of(alpha, b), x[b].reshape(-1).numpy()
        assert log_p[b].item() == pytest.approx(brute_log_prob(a, lam, edges, xb), abs=1e-12)
        for i in range(height * width):
            expected = brute_flip_log_ratio(a, lam, edges, xb, i)
            assert s[b].reshape(-1)[i].item() == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("alpha_kind", ["shared", "per_chain"])
@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("shape", SHAPES)
def test_flip_log_ratio_of_every_site_is_the_log_prob_difference(shape, boundary, alpha_kind):
    height, width = shape
    n = 3
    alpha = make_alpha(alpha_kind, n, height, width, seed=7)
    target = IsingPosterior(alpha, 1.3, boundary)
    x = random_states(n, height, width, seed=2)
    s = target.flip_log_ratios(x).reshape(n, -1)
    base = target.log_prob(x)
    for i in range(height * width):
        flipped = x.clone().reshape(n, -1)
        flipped[:, i] *= -1
        diff = target.log_prob(flipped.view(n, height, width)) - base
        torch.testing.assert_close(s[:, i], diff, rtol=0, atol=1e-12)


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("shape", SHAPES)
def test_flip_tables_give_the_exact_log_ratios_after_a_flip(shape, boundary):
    """The sampler seam: after site i flips, s_i -> -s_i and s_j -> s_j + coupling x_j x_i for
    the listed neighbours (coupling = 4 lam x edge multiplicity); no other site changes."""
    height, width = shape
    lam = 0.9
    target = IsingPosterior(make_alpha("shared", 1, height, width, 3), lam, boundary)
    edges = brute_edges(height, width, boundary)
    x = random_states(2, height, width, seed=4)
    s = target.flip_log_ratios(x).reshape(2, -1)
    flat = x.reshape(2, -1)
    for i in range(height * width):
        multiplicity = {}
        for a, b in edges:
            if a == i:
                multiplicity[b] = multiplicity.get(b, 0) + 1
            if b == i:
                multiplicity[a] = multiplicity.get(a, 0) + 1
        nb, coupling = target.neighbourhood[i], target.coupling[i]
        assert int(nb[0]) == i and coupling[0].item() == 0.0
        listed = {}
        for j, c in zip(nb[1:].tolist(), coupling[1:].tolist(), strict=True):
            if j == i:
                assert c == 0.0, "padding slots must carry no coupling"
            else:
                assert j not in listed, "each neighbour is listed once"
                listed[j] = c
        assert listed == {j: 4.0 * lam * m for j, m in multiplicity.items()}

        predicted = s.clone()
        predicted[:, i] = -s[:, i]
        for j, c in listed.items():
            predicted[:, j] = s[:, j] + c * flat[:, j] * flat[:, i]
        flipped = flat.clone()
        flipped[:, i] *= -1
        exact = target.flip_log_ratios(flipped.view(2, height, width)).reshape(2, -1)
        torch.testing.assert_close(predicted, exact, rtol=0, atol=1e-12)


# ------------------------------------------------------------------------------ tiny tori
def test_a_periodic_side_of_two_is_a_double_edge():
    alpha = torch.tensor([[0.1, -0.2], [0.3, 0.4]], dtype=torch.float64)
    ones = torch.ones(1, 2, 2, dtype=torch.float64)
    lam = 0.5
    # free 2x2: 4 edges; periodic 2x2: every edge doubled (direct and wrap-around) -> 8
    assert IsingPosterior(alpha, lam, "free").log_prob(ones).item() == pytest.approx(0.6 + 4 * lam)
    periodic = IsingPosterior(alpha, lam, "periodic")
    assert periodic.log_prob(ones).item() == pytest.approx(0.6 + 8 * lam)
    # flipping a site of the all-plus state breaks its two double edges: s = -2 (a_i + 4 lam)
    s = periodic.flip_log_ratios(ones)
    torch.testing.assert_close(s[0], -2.0 * (alpha + 4 * lam), rtol=0, atol=1e-12)


def test_a_periodic_side_of_one_has_no_self_loop():
    alpha = torch.tensor([[0.1, -0.2, 0.3]], dtype=torch.float64)
    lam = 0.5
    ones = torch.ones(1, 1, 3, dtype=torch.float64)
    ring = IsingPosterior(alpha, lam, "periodic")  # a ring of 3: 3 edges, no vertical loops
    assert ring.log_prob(ones).item() == pytest.approx(0.2 + 3 * lam)
    torch.testing.assert_close(
        ring.flip_log_ratios(ones)[0], -2.0 * (alpha + 2 * lam), rtol=0, atol=1e-12
    )
    single = IsingPosterior(torch.tensor([[0.7]], dtype=torch.float64), lam, "periodic")
    assert single.log_prob(torch.ones(1, 1, 1, dtype=torch.float64)).item() == pytest.approx(0.7)
    assert single.flip_log_ratios(torch.ones(1, 1, 1, dtype=torch.float64)).item() == (
        pytest.approx(-1.4)
    )


@pytest.mark.parametrize("name", ["sqrt", "max", "gibbs", "lsb2"])
@pytest.mark.parametrize("shape", [(1, 1), (1, 2), (1, 5), (2, 2), (2, 3)])
def test_sampling_is_exact_on_tiny_periodic_lattices(shape, name, exact):
    """TV between visited states and the enumerated posterior (threshold: see conftest).

    The multigraph handling is shared by all samplers (the target's flip tables); every sampler
    is checked exactly on 2x2 and 2x3 tori in test_exactness.py (full transition matrix)."""
    height, width = shape
    target = IsingPosterior(exact.random_alpha(shape, 0.5, seed=11), 0.3, "periodic")
    p = exact.exact_posterior(target)
    chains, burn_in, thin, draws = 500, 60, 5, 40
    sampler = make_sampler(name, target, chains, seed=5)
    if sampler.learnable:
        sampler.step(20, learn=True)  # learn a little, then test the frozen chain
    counts = exact.histogram(sampler, burn_in, thin, draws)
    distance, threshold = exact.tv(p, counts), exact.tv_threshold(p, chains * draws)
    print(f"{name} {shape}: TV {distance:.4f}, threshold {threshold:.4f}")
    assert distance < threshold


# ------------------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("alpha", "message"),
    [
        (torch.tensor([[0.0, float("nan")]]), "alpha must contain only finite"),
        (torch.tensor([[0.0, float("inf")]]), "alpha must contain only finite"),
        (torch.tensor([[0.0, -float("inf")]]), "alpha must contain only finite"),
        (torch.zeros(3), r"alpha must have shape \[H, W\] or \[B, H, W\]"),
        (torch.zeros(1, 2, 3, 4), r"alpha must have shape \[H, W\] or \[B, H, W\]"),
        (torch.zeros(0, 3), "alpha must not be empty"),
        (torch.zeros(2, 0, 3), "alpha must not be empty"),
        ("abc", "alpha must be a numeric array"),
        (None, "alpha must be a numeric array"),
        (torch.zeros(2, 2, dtype=torch.bool), "alpha must hold real numbers"),
        (torch.zeros(2, 2, dtype=torch.complex128), "alpha must hold real numbers"),
    ],
)
def test_invalid_alpha_is_refused_naming_alpha(alpha, message):
    with pytest.raises(ValueError, match=message):
        IsingPosterior(alpha, 0.5)


def test_complex_alpha_from_numpy_is_refused_not_silently_truncated():
    alpha = np.array([[1.0 + 2.0j, 0.5 - 1.0j]])
    with pytest.raises(ValueError, match="alpha"):
        IsingPosterior(alpha, 0.5)


@pytest.mark.parametrize(
    ("lam", "message"),
    [
        (-0.1, "lam must be a finite number >= 0"),
        (float("nan"), "lam must be a finite number >= 0"),
        (float("inf"), "lam must be a finite number >= 0"),
        (-float("inf"), "lam must be a finite number >= 0"),
        ("1", "lam must be a real number"),
        (True, "lam must be a real number"),
        (None, "lam must be a real number"),
        (torch.tensor([0.5, 1.0]), "lam must be a real number"),
    ],
)
def test_invalid_lam_is_refused_naming_lam(lam, message):
    with pytest.raises(ValueError, match=message):
        IsingPosterior(torch.zeros(2, 2), lam)


@pytest.mark.parametrize("boundary", ["torus", "Free", None, ""])
def test_unknown_boundary_is_refused_naming_boundary(boundary):
    with pytest.raises(ValueError, match="boundary must be one of"):
        IsingPosterior(torch.zeros(2, 2), 0.5, boundary)


@pytest.mark.parametrize(
    "x",
    [torch.ones(3, 3), torch.ones(2, 3, 4), torch.ones(2, 4, 3), torch.ones(1, 1, 3, 3)],
    ids=["2d", "wrong-width", "wrong-height", "4d"],
)
@pytest.mark.parametrize("method", ["log_prob", "flip_log_ratios", "local_field"])
def test_state_of_wrong_shape_is_refused_naming_x(x, method):
    target = IsingPosterior(torch.zeros(3, 3), 0.5)
    with pytest.raises(ValueError, match=r"x must have shape \[B, 3, 3\] or \[B, 9\]"):
        getattr(target, method)(x)


def test_state_that_is_not_a_tensor_is_refused():
    target = IsingPosterior(torch.zeros(3, 3), 0.5)
    with pytest.raises(ValueError, match="x must be a tensor"):
        target.log_prob(np.ones((1, 3, 3)))


def test_batch_of_states_must_match_the_alpha_images():
    target = IsingPosterior(torch.zeros(2, 3, 3), 0.5)
    with pytest.raises(ValueError, match="x has 3 chains but the target holds 2 fields"):
        target.log_prob(torch.ones(3, 3, 3))
    assert target.log_prob(torch.ones(2, 3, 3)).shape == (2,)
    shared = IsingPosterior(torch.zeros(3, 3), 0.5)  # one image serves any batch
    assert shared.log_prob(torch.ones(5, 3, 3)).shape == (5,)


def test_edge_count_matches_the_multigraph_definition():
    for height, width in SHAPES:
        for boundary in BOUNDARIES:
            target = IsingPosterior(torch.zeros(height, width), 1.0, boundary)
            ones = torch.ones(1, height, width, dtype=torch.float64)
            n_edges = len(brute_edges(height, width, boundary))
            # with alpha = 0, lam = 1 and all spins equal, log p~ counts the edges
            assert target.log_prob(ones).item() == pytest.approx(n_edges)
            if boundary == "free":
                assert n_edges == height * (width - 1) + width * (height - 1)
            else:
                loops = (height if width == 1 else 0) + (width if height == 1 else 0)
                assert n_edges == 2 * height * width - loops
    assert math.isfinite(IsingPosterior(torch.zeros(1, 1), 0.0).log_prob(torch.ones(1, 1, 1)))
