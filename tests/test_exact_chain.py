"""The exact chain (``lsbcore.exact``): every sampler's full transition matrix on a tiny target
leaves the enumerated target invariant, the single-site ones reversibly; its entries are those
of the definitions (spec 2, 3) and of a hand derivation; the gap and the TV curve say what the
eigenvalues and ``v P^t`` say.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import torch
from scipy import sparse

from lsbcore import FactorGraph, IsingPosterior, PairwiseMRF, make_sampler
from lsbcore import exact as exact_chain
from lsbcore.samplers.registry import REGISTRY
from lsbcore.studies import figures

# every pairwise-kernel sampler: "learned" is LSB 1/2's frozen g, tested as those; the samplers
# on any target have their matrices checked in test_every_pair.py
NAMES = [name for name, spec in REGISTRY.items() if not (spec.needs_balancing or spec.batched_only)]
SINGLE_SITE = [name for name in NAMES if REGISTRY[name].move == "site"]

pytestmark = pytest.mark.usefixtures("single_thread")


def random_mrf(n: int, seed: int) -> PairwiseMRF:
    """A pairwise network on a random graph (about half the pairs coupled)."""
    generator = torch.Generator().manual_seed(seed)
    h = torch.randn(n, generator=generator, dtype=torch.float64) * 0.4
    weights = torch.randn(n, n, generator=generator, dtype=torch.float64) * 0.5
    keep = torch.rand(n, n, generator=generator) < 0.5
    upper = torch.triu(weights * keep, diagonal=1)
    return PairwiseMRF(h, upper + upper.T)


def ising(boundary: str, shape=(3, 3), lam: float = 0.5, seed: int = 1) -> IsingPosterior:
    generator = torch.Generator().manual_seed(seed)
    alpha = torch.randn(*shape, generator=generator, dtype=torch.float64) * 0.5
    return IsingPosterior(alpha, lam, boundary)


TARGETS = {
    "mrf-10": lambda: random_mrf(10, seed=3),
    "ising-3x3-free": lambda: ising("free"),
    "ising-3x3-periodic": lambda: ising("periodic"),
}


def learned_balancing(name: str, target):
    """LSB 1/2's function after some learning on ``target`` (None for the others); the learning
    must have moved it, so the frozen matrix is not the starting function's."""
    if not REGISTRY[name].learnable:
        return None
    sampler = make_sampler(name, target, 16, seed=2, backend="torch")
    before = [q.detach().clone() for q in sampler.balancing.parameters()]
    sampler.step(40, learn=True)
    assert not sampler.learning_failed
    after = sampler.balancing.parameters()
    moved = [not torch.equal(q.detach(), b) for q, b in zip(after, before, strict=True)]
    assert any(moved), "learning did not change the balancing function"
    return sampler.balancing


# ------------------------------------------------------------------------------ invariance
@pytest.mark.parametrize("target_id", TARGETS)
@pytest.mark.parametrize("name", NAMES)
def test_every_sampler_has_the_enumerated_target_as_its_stationary_vector(name, target_id):
    target = TARGETS[target_id]()
    pi = exact_chain.exact_distribution(target)
    p = exact_chain.transition_matrix(target, name, learned_balancing(name, target))
    assert p.shape == (len(pi), len(pi))
    assert (p >= -1e-15).all()
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(exact_chain.stationary_vector(p), pi, rtol=1e-8, atol=1e-14)
    np.testing.assert_allclose(pi @ p, pi, rtol=1e-10, atol=1e-15)
    assert np.abs(p - np.eye(len(pi))).max() > 0.01, "the chain moves"


@pytest.mark.parametrize("target_id", TARGETS)
@pytest.mark.parametrize("name", SINGLE_SITE)
def test_single_site_samplers_satisfy_detailed_balance(name, target_id):
    target = TARGETS[target_id]()
    pi = exact_chain.exact_distribution(target)
    p = exact_chain.transition_matrix(target, name, learned_balancing(name, target))
    flow = pi[:, None] * p
    off = ~np.eye(len(pi), dtype=bool)
    assert (np.abs(flow - flow.T)[off] <= 1e-10 * np.maximum(flow, flow.T)[off]).all()
    assert exact_chain.is_reversible(p, pi)


@pytest.mark.parametrize("target_id", ["ising-3x3-periodic", "mrf-10"])
def test_checkerboard_sweep_leaves_the_target_invariant_but_is_not_reversible(target_id):
    """A systematic sweep keeps pi (each block update does) but is not reversible: the gap
    then comes from the general eigenvalues (``is_reversible`` decides which path)."""
    target = TARGETS[target_id]()
    pi = exact_chain.exact_distribution(target)
    p = exact_chain.sweep_matrix(target)
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pi @ p, pi, rtol=1e-10, atol=1e-15)
    assert not exact_chain.is_reversible(p, pi)
    colour = target.colouring()
    for c in range(int(colour.max()) + 1):  # each block update alone is reversible
        block = exact_chain.block_update_matrix(
            target, torch.nonzero(colour == c).view(-1).tolist()
        )
        assert exact_chain.is_reversible(block.toarray(), pi)


# ------------------------------------------------------------------------------ the entries
def defined_matrix(name: str, target, balancing=None) -> np.ndarray:
    """``P`` straight from the definitions, every ``Z`` a full sum over the sites (spec 2, 3):
    ``P[x, x^i] = g(t_i) / Z(x) * min(1, Z(x) / Z(x^i))``, ``sigmoid(s_i) / n`` (Gibbs) or
    ``min(1, t_i) / n`` (Metropolis); the diagonal holds the rest."""
    n = target.n_sites
    states = exact_chain.all_states(n)
    codes = np.arange(2**n)
    s = target.flip_log_ratios(states)  # [N, n]
    p = np.zeros((2**n, 2**n))
    if balancing is None and name in ("gibbs", "metropolis"):
        rule = torch.sigmoid(s) if name == "gibbs" else torch.exp(s.clamp(max=0.0))
        for i in range(n):
            p[codes, codes ^ (1 << i)] = rule[:, i].numpy() / n
    else:
        log_g = lambda s_: balancing.log_g(s_).detach()  # noqa: E731
        log_z = torch.logsumexp(log_g(s), 1)
        for i in range(n):
            flipped = states.clone()
            flipped[:, i] *= -1
            log_z_new = torch.logsumexp(log_g(target.flip_log_ratios(flipped)), 1)
            log_accept = torch.clamp(log_z - log_z_new, max=0.0)
            p[codes, codes ^ (1 << i)] = torch.exp(log_g(s)[:, i] - log_z + log_accept).numpy()
    p[codes, codes] = 1.0 - p.sum(1)
    return p


@pytest.mark.parametrize("name", SINGLE_SITE)
def test_matrix_from_the_samplers_equals_the_definitions(name):
    target = ising("periodic", shape=(2, 3), lam=0.6, seed=4)
    balancing = learned_balancing(name, target)
    p = exact_chain.transition_matrix(target, name, balancing)
    if balancing is None and REGISTRY[name].balanced:
        balancing = make_sampler(name, target, 1).balancing
    np.testing.assert_allclose(p, defined_matrix(name, target, balancing), rtol=1e-10, atol=1e-15)


# two sites, log p~(x) = A x_1 + B x_2 + W x_1 x_2; state code 0 is (-1, -1), 1 is (+1, -1),
# 2 is (-1, +1), 3 is (+1, +1)
A, B, W = 0.3, -0.2, 0.5


def two_sites() -> PairwiseMRF:
    f64 = torch.float64  # float32 would round A, B and W at 1e-8
    return PairwiseMRF(
        torch.tensor([A, B], dtype=f64), torch.tensor([[0.0, W], [W, 0.0]], dtype=f64)
    )


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def test_two_site_sqrt_entries_match_a_hand_derivation():
    """At x = (-1, -1): s_1 = 2A - 2W, s_2 = 2B - 2W, so Z(x) = e^(A-W) + e^(B-W) for
    g = sqrt; after flipping site 1, x' = (+1, -1): s_1' = -(2A - 2W), s_2' = 2B + 2W and
    Z(x') = e^(W-A) + e^(B+W). P[0, 1] = e^(A-W) / Z(x) * min(1, Z(x) / Z(x'))."""
    z = math.exp(A - W) + math.exp(B - W)
    z_flip_1 = math.exp(W - A) + math.exp(B + W)
    z_flip_2 = math.exp(A + W) + math.exp(W - B)  # x'' = (-1, +1): s_1'' = 2A + 2W
    p01 = math.exp(A - W) / z * min(1.0, z / z_flip_1)
    p02 = math.exp(B - W) / z * min(1.0, z / z_flip_2)
    p = exact_chain.transition_matrix(two_sites(), "sqrt")
    assert p[0, 1] == pytest.approx(p01, rel=1e-12)
    assert p[0, 2] == pytest.approx(p02, rel=1e-12)
    assert p[0, 3] == 0.0  # one flip per step
    assert p[0, 0] == pytest.approx(1.0 - p01 - p02, rel=1e-12)


def test_two_site_uninformed_and_sweep_entries_match_a_hand_derivation():
    """Gibbs: site 1 picked with 1/2, flipped with sigmoid(s_1); Metropolis: min(1, e^s_1) / 2.
    The sweep updates site 1 (colour 0) from p(x_1 = +1 | x_2 = -1) = sigmoid(2(A - W)), then
    site 2 from p(x_2 = +1 | x_1 = +1) = sigmoid(2(B + W))."""
    target = two_sites()
    s_1 = 2 * A - 2 * W
    gibbs = exact_chain.transition_matrix(target, "gibbs")
    metropolis = exact_chain.transition_matrix(target, "metropolis")
    sweep = exact_chain.transition_matrix(target, "checkerboard")
    assert gibbs[0, 1] == pytest.approx(sigmoid(s_1) / 2, rel=1e-12)
    assert metropolis[0, 1] == pytest.approx(min(1.0, math.exp(s_1)) / 2, rel=1e-12)
    assert sweep[0, 3] == pytest.approx(sigmoid(2 * (A - W)) * sigmoid(2 * (B + W)), rel=1e-12)
    assert sweep[0, 1] == pytest.approx(sigmoid(2 * (A - W)) * sigmoid(-2 * (B + W)), rel=1e-12)


# ------------------------------------------------------------------------------ the spectrum
@pytest.mark.parametrize("name", NAMES)
def test_gap_is_one_minus_the_second_eigenvalue_modulus_of_the_raw_matrix(name):
    target = ising("periodic", lam=0.5, seed=1)
    pi = exact_chain.exact_distribution(target)
    p = exact_chain.transition_matrix(target, name, learned_balancing(name, target))
    moduli = np.sort(np.abs(np.linalg.eigvals(p)))
    assert moduli[-1] == pytest.approx(1.0, abs=1e-10)
    gap = exact_chain.spectral_gap(p, pi)
    assert gap == pytest.approx(1.0 - moduli[-2], abs=1e-9)
    assert 0.0 < gap < 1.0
    assert exact_chain.relaxation_time(gap) == pytest.approx(1.0 / gap)


@pytest.mark.parametrize("name", ["sqrt", "metropolis", "checkerboard"])
def test_the_few_eigenvalue_path_gives_the_dense_answer(name, monkeypatch):
    """Above ``DENSE_STATES`` states ARPACK finds only the extreme eigenvalues; on 1024 states
    that agrees with the full dense solve, reversible (eigvalsh) or not (eigvals)."""
    from lsbcore.exact import spectrum

    target = random_mrf(10, seed=3)
    pi = exact_chain.exact_distribution(target)
    p = exact_chain.transition_matrix(target, name)
    assert len(pi) > spectrum.DENSE_STATES
    few = exact_chain.spectral_gap(p, pi)
    monkeypatch.setattr(spectrum, "DENSE_STATES", 10**9)
    assert few == pytest.approx(exact_chain.spectral_gap(p, pi), abs=1e-10)


def test_an_arpack_failure_falls_back_to_the_dense_answer(monkeypatch):
    """ARPACK can stop with its error 3 ("no shifts could be applied") on a saturated window,
    whose P is near nilpotent: seen on the horse sample's 3 x 3 window after a 3 x 4 one, in
    the app's Exact chain tab. The gap then comes from the dense solve."""
    from scipy.sparse import linalg as sparse_linalg

    from lsbcore.exact import spectrum

    target = random_mrf(10, seed=3)
    pi = exact_chain.exact_distribution(target)
    p = exact_chain.transition_matrix(target, "sqrt")
    monkeypatch.setattr(spectrum, "DENSE_STATES", 10**9)
    dense = exact_chain.spectral_gap(p, pi)
    monkeypatch.setattr(spectrum, "DENSE_STATES", 256)

    def fails(p, pi, reversible):
        raise sparse_linalg.ArpackError(3)

    monkeypatch.setattr(spectrum, "_extreme_modulus", fails)
    assert exact_chain.spectral_gap(p, pi) == pytest.approx(dense, abs=1e-12)


@pytest.mark.parametrize("name", ["sqrt", "max", "barker"])
def test_a_saturated_window_gets_its_gap_from_arpack_and_it_is_the_dense_one(name, monkeypatch):
    """A field of 25 on every site packs all but a few eigenvalues of the symmetrised ``P``
    within 1e-11 of 0; ARPACK asked for the smallest of them did not converge (40 s on 3 x 4
    before the dense fallback). With ``sqrt(pi)`` projected out one Lanczos run finds
    ``|lambda_2|``, and no fallback is needed: the dense solve's answer, to 1e-12."""
    from lsbcore.exact import spectrum

    target = IsingPosterior(torch.full((2, 5), 25.0, dtype=torch.float64), 0.5, "free")
    pi = exact_chain.exact_distribution(target)
    p = exact_chain.transition_matrix(target, name)
    assert len(pi) > spectrum.DENSE_STATES and exact_chain.is_reversible(p, pi)
    few = spectrum._extreme_modulus(sparse.csr_matrix(p), pi, reversible=True)
    monkeypatch.setattr(spectrum, "DENSE_STATES", 10**9)
    assert few == pytest.approx(exact_chain.second_eigenvalue_modulus(p, pi), abs=1e-12)


@pytest.mark.parametrize("name", ["min", "gibbs", "checkerboard"])
def test_a_sparse_matrix_gives_the_dense_gap_balance_and_tv(name):
    """``compare_samplers`` hands a single-site sampler's ``P`` (at most n + 1 entries a row) on
    as CSR; the gap, the balance check and the TV curve are the dense matrix's."""
    target = random_mrf(10, seed=3)
    pi = exact_chain.exact_distribution(target)
    p = exact_chain.transition_matrix(target, name)
    csr = sparse.csr_matrix(p)
    assert exact_chain.is_reversible(csr, pi) == exact_chain.is_reversible(p, pi)
    assert exact_chain.is_reversible(csr, pi) == (name != "checkerboard")
    assert exact_chain.spectral_gap(csr, pi) == pytest.approx(
        exact_chain.spectral_gap(p, pi), abs=1e-10
    )
    np.testing.assert_allclose(
        exact_chain.tv_curve(csr, pi, "least likely", 30),
        exact_chain.tv_curve(p, pi, "least likely", 30),
        rtol=1e-12,
        atol=1e-15,
    )


def test_a_sparse_matrix_out_of_balance_in_one_entry_is_not_reversible():
    target = ising("free", shape=(2, 3), lam=0.6, seed=2)
    pi = exact_chain.exact_distribution(target)
    p = exact_chain.transition_matrix(target, "barker")
    x, y = np.argwhere((p > 0) & ~np.eye(len(p), dtype=bool))[0]
    p[x, y] *= 1 + 1e-6
    p[x, x] -= p[x, y] * 1e-6 / (1 + 1e-6)  # the row still sums to 1
    assert not exact_chain.is_reversible(sparse.csr_matrix(p), pi)
    assert not exact_chain.is_reversible(p, pi)


def hard_zero_network(n: int = 8) -> FactorGraph:
    """Pairwise factors on a chain and one parity factor with exact zeros: half the states have
    zero mass, so their rows of P must stay the identity."""
    generator = torch.Generator().manual_seed(4)
    scopes = [(i, i + 1) for i in range(n - 1)] + [(0, n // 2, n - 1)]
    tables = [torch.randn(4, generator=generator, dtype=torch.float64) for _ in range(n - 1)]
    parity = torch.tensor([bin(k).count("1") % 2 for k in range(8)], dtype=torch.bool)
    tables.append(torch.where(parity, 0.0, -torch.inf).to(torch.float64))
    return FactorGraph(n, scopes, tables)


@pytest.mark.parametrize("target_id", ["mrf-10", "hard-zeros"])
@pytest.mark.parametrize("name", ["barker", "max", "gibbs", "metropolis", "lsb1"])
def test_the_sparse_step_law_is_the_dense_one_without_the_dense_square(name, target_id):
    """``step_law(sparse_form=True)`` builds a single-site sampler's P as CSR (n + 1 entries a
    row, columns sorted); it equals the dense P entry for entry, the zero-mass states' rows
    the identity."""
    target = hard_zero_network() if target_id == "hard-zeros" else TARGETS[target_id]()
    balancing = learned_balancing(name, target)
    dense, sites = exact_chain.step_law(target, name, balancing)
    law, sparse_sites = exact_chain.step_law(target, name, balancing, sparse_form=True)
    assert sparse.issparse(law) and sites == sparse_sites
    n = target.n_sites
    assert law.nnz == len(dense) * (n + 1) and law.has_sorted_indices
    np.testing.assert_array_equal(law.toarray(), dense)
    dead = ~np.isfinite(target.log_prob(exact_chain.all_states(n)).numpy())
    assert dead.any() == (target_id == "hard-zeros")
    np.testing.assert_array_equal(dense[dead], np.eye(len(dense))[dead])


def test_the_sweep_matrix_built_by_rows_is_the_product_of_its_block_updates(monkeypatch):
    """The checkerboard's P is built a few rows at a time (the sparse product of all rows
    would hold every entry twice over); any chunk gives the product of the colour blocks."""
    from lsbcore.exact import transition

    target = ising("periodic", shape=(3, 4), lam=0.4, seed=3)
    colour = target.colouring()
    blocks = [
        exact_chain.block_update_matrix(target, torch.nonzero(colour == c).view(-1).tolist())
        for c in range(int(colour.max()) + 1)
    ]
    product = blocks[0]
    for block in blocks[1:]:
        product = product @ block
    monkeypatch.setattr(transition, "ROW_CHUNK", 333)  # not a divisor of 4,096
    np.testing.assert_allclose(exact_chain.sweep_matrix(target), product.toarray(), rtol=1e-13,
                               atol=1e-300)  # fmt: skip


@pytest.mark.parametrize("rows", [1, 7, 10**6])
def test_the_balance_check_by_rows_decides_as_the_whole_matrix(rows, monkeypatch):
    """``is_reversible`` reads a dense P a few rows at a time; whatever the chunk, reversible
    samplers pass, the sweep fails, and one entry out of balance (in the last rows) fails."""
    from lsbcore.exact import spectrum

    monkeypatch.setattr(spectrum, "BALANCE_ROWS", rows)
    target = random_mrf(8, seed=5)
    pi = exact_chain.exact_distribution(target)
    for name in ("sqrt", "gibbs", "block-gibbs"):
        assert exact_chain.is_reversible(exact_chain.transition_matrix(target, name), pi), name
    assert not exact_chain.is_reversible(exact_chain.sweep_matrix(target), pi)
    p = exact_chain.transition_matrix(target, "barker")
    x, y = np.argwhere((p > 0) & ~np.eye(len(p), dtype=bool))[-1]
    p[x, y] *= 1 + 1e-6
    assert not exact_chain.is_reversible(p, pi)


@pytest.mark.parametrize("name", ["barker", "sqrt", "gibbs"])
def test_a_window_whose_target_underflows_is_still_reversible(name, monkeypatch):
    """A field of -27 to -69 on 2 x 5 makes log p span over 745: some pi round to 0 while the
    reverse flow is a denormal (the text photo's 3 x 4 centre in the app: 298 zeros,
    imbalances of 5e-324). The chain is reversible, so its gap comes from the symmetric path
    (the general eigenvalues of this non-normal P were off by 1e-7, and once took 19 s of
    dense solve); it is the dense symmetric answer."""
    from lsbcore.exact import spectrum

    alpha = torch.tensor([[-60.6, -26.6, -51.4, 3.0, -53.5], [-55.3, -60.9, -64.7, -33.7, -68.6]],
                         dtype=torch.float64)  # fmt: skip
    target = IsingPosterior(alpha, 1.0, "free")
    pi = exact_chain.exact_distribution(target)
    assert (pi == 0).any()
    p = exact_chain.transition_matrix(target, name)
    for form in (p, sparse.csr_matrix(p)):
        assert exact_chain.is_reversible(form, pi)
    few = spectrum._extreme_modulus(sparse.csr_matrix(p), pi, reversible=True)
    monkeypatch.setattr(spectrum, "DENSE_STATES", 10**9)
    assert few == pytest.approx(exact_chain.second_eigenvalue_modulus(p, pi), abs=1e-12)


def test_a_reducible_chain_has_gap_zero_and_infinite_relaxation_time():
    p = np.eye(4)
    pi = np.full(4, 0.25)
    assert exact_chain.spectral_gap(p, pi) == pytest.approx(0.0, abs=1e-12)
    assert exact_chain.relaxation_time(0.0) == math.inf


# ------------------------------------------------------------------------------ TV curves
@pytest.mark.parametrize("name", NAMES)
def test_tv_from_a_point_mass_never_increases_and_reaches_zero(name):
    target = ising("free", shape=(2, 3), lam=0.6, seed=2)
    pi = exact_chain.exact_distribution(target)
    p = exact_chain.transition_matrix(target, name, learned_balancing(name, target))
    gap = exact_chain.spectral_gap(p, pi)
    steps = math.ceil(exact_chain.relaxation_time(gap) * math.log(1e9))  # (1 - gap)^t < 1e-9
    for start in ("least likely", int(np.argmax(pi)), 0b101010):
        tv = exact_chain.tv_curve(p, pi, start, steps)
        assert tv.shape == (steps + 1,)
        assert tv[0] == pytest.approx(1.0 - pi[exact_start(start, pi)], abs=1e-15)
        assert (np.diff(tv) <= 1e-15).all(), "TV increased"
        assert tv[-1] < 1e-6


def exact_start(start, pi) -> int:
    return int(np.argmin(pi)) if start == "least likely" else start


def test_tv_decays_at_the_rate_of_the_second_eigenvalue():
    """For large t, TV(pi, v P^t) shrinks by the factor |lambda_2| per step. Random-scan Gibbs
    averages projections (each site's heat bath), so its eigenvalues are >= 0: no sign flips."""
    target = ising("free", shape=(2, 3), lam=0.6, seed=2)
    pi = exact_chain.exact_distribution(target)
    p = exact_chain.transition_matrix(target, "gibbs")
    slem = exact_chain.second_eigenvalue_modulus(p, pi)
    tv = exact_chain.tv_curve(p, pi, "least likely", 400)
    rate = (tv[400] / tv[300]) ** (1 / 100)
    assert rate == pytest.approx(slem, rel=1e-4)


def test_tv_from_the_target_itself_is_zero_and_from_uniform_is_its_distance():
    target = ising("periodic", shape=(2, 2), lam=0.4, seed=5)
    pi = exact_chain.exact_distribution(target)
    p = exact_chain.transition_matrix(target, "barker")
    np.testing.assert_allclose(exact_chain.tv_curve(p, pi, pi, 10), 0.0, atol=1e-15)
    uniform = exact_chain.tv_curve(p, pi, "uniform", 0)
    assert uniform[0] == pytest.approx(0.5 * np.abs(pi - 1 / len(pi)).sum())


@pytest.mark.parametrize(
    ("start", "message"),
    [("worst", "start must be one of"), (16, r"in \[0, 16\)"), (np.ones(16), "distribution")],
)
def test_bad_start_laws_are_refused(start, message):
    pi = np.full(16, 1 / 16)
    with pytest.raises(ValueError, match=message):
        exact_chain.tv_curve(np.eye(16), pi, start, 3)


# ------------------------------------------------------------------------------ refusals
def test_more_than_twelve_sites_is_refused_with_a_sentence():
    target = IsingPosterior(torch.zeros(1, 13), 0.5, "free")
    for call in (
        lambda: exact_chain.exact_distribution(target),
        lambda: exact_chain.transition_matrix(target, "sqrt"),
        lambda: exact_chain.sweep_matrix(target),
        lambda: exact_chain.compare_samplers(target, ["sqrt"]),
    ):
        with pytest.raises(ValueError, match="at most 12 sites, got 13"):
            call()
    assert exact_chain.exact_distribution(IsingPosterior(torch.zeros(3, 4), 0.5)).shape == (4096,)


def test_a_target_with_one_field_per_chain_asks_for_one_chain():
    target = IsingPosterior(torch.zeros(2, 2, 2), 0.5, "free")
    with pytest.raises(ValueError, match=r"target.chain\(b\)"):
        exact_chain.transition_matrix(target, "sqrt")
    assert exact_chain.exact_distribution(target.chain(1)).shape == (16,)


def test_unknown_samplers_and_misplaced_functions_are_refused():
    target = ising("free", shape=(2, 2))
    with pytest.raises(ValueError, match="unknown sampler"):
        exact_chain.transition_matrix(target, "hmc")
    with pytest.raises(ValueError, match="balancing= is only for"):
        exact_chain.transition_matrix(target, "sqrt", make_sampler("lsb1", target, 1).balancing)
    with pytest.raises(ValueError, match="needs balancing="):
        exact_chain.transition_matrix(target, "learned")


def test_freezing_a_learned_function_for_the_matrix_leaves_the_learner_learning():
    target = ising("free", shape=(2, 2))
    sampler = make_sampler("lsb2", target, 4, seed=1)
    exact_chain.transition_matrix(target, "lsb2", sampler.balancing)
    assert all(q.requires_grad for q in sampler.balancing.parameters())


# ------------------------------------------------------------------------------ comparison
def test_comparison_rows_agree_with_the_pieces():
    target = ising("periodic", lam=0.5, seed=1)
    pi = exact_chain.exact_distribution(target)
    learned = {"lsb1": learned_balancing("lsb1", target)}
    names = ["barker", "max", "lsb1", "checkerboard"]
    rows = exact_chain.compare_samplers(target, names, steps=30, start=0, balancings=learned)
    assert [row["name"] for row in rows] == names
    for row in rows:
        p = exact_chain.transition_matrix(target, row["name"], learned.get(row["name"]))
        assert row["gap"] == pytest.approx(exact_chain.spectral_gap(p, pi), rel=1e-12)
        assert row["relaxation_time"] == pytest.approx(1.0 / row["gap"])
        np.testing.assert_allclose(row["tv"], exact_chain.tv_curve(p, pi, 0, 30), rtol=1e-12)
        assert row["tv_final"] == row["tv"][-1]
        assert row["invariance_error"] < 1e-12
        m = row["mixing_steps"]  # the first step at which TV is at most 1/4
        assert m is not None and row["tv"][m] <= 0.25 and (m == 0 or row["tv"][m - 1] > 0.25)
    sweep = rows[-1]
    assert sweep["relaxation_site_updates"] == pytest.approx(9 * sweep["relaxation_time"])
    assert rows[0]["relaxation_site_updates"] == rows[0]["relaxation_time"]


def test_the_mixing_time_is_the_first_step_at_or_below_the_threshold():
    assert exact_chain.mixing_time(np.array([1.0, 0.5, 0.25, 0.1])) == 2
    assert exact_chain.mixing_time(np.array([0.2, 0.1])) == 0
    assert exact_chain.mixing_time(np.array([1.0, 0.3])) is None
    assert exact_chain.mixing_time(np.array([1.0, 0.3, 0.05]), threshold=0.01) is None


def test_a_strong_field_mixes_in_one_step_per_flip_whatever_the_gap():
    """alpha = 25 everywhere on 3 x 3: the posterior is almost all on the all-(+1) state, nine
    flips from the least likely start. t/(1+t)'s and min(1,t)'s gap is 1 to rounding
    (relaxation time 1 step), yet no single-site sampler gets TV below 1/4 in fewer than 9
    steps (before step 9 it cannot be at the mode, which holds nearly all the mass), and these
    two take exactly 9: each step flips one of the sites still wrong. The view says why."""
    from app.views import exact_chain as view

    target = IsingPosterior(torch.full((3, 3), 25.0), 0.5, "free")
    names = ["barker", "min", "sqrt", "gibbs"]
    shown = view.exact_view(target, names, steps=60)
    rows = {row["name"]: row for row in shown.rows}
    for name in ("barker", "min"):
        assert rows[name]["gap"] == pytest.approx(1.0, abs=1e-9)
        assert rows[name]["mixing_steps"] == 9
    assert all(row["mixing_steps"] >= 9 for row in rows.values())
    assert "9 flips away" in shown.note and "holds all but 1e-" in shown.note
    assert "t/(1+t): 9 steps" in shown.note and "min(1,t): 9 steps" in shown.note
    assert "Gibbs" not in shown.note  # 30 steps, but its relaxation time is 9
    assert view.exact_view(ising("free"), names, steps=60).note == ""  # a mild field


def test_tv_figure_draws_one_log_scale_line_per_sampler():
    curves = {"sqrt": np.array([1.0, 0.5, 0.0]), "gibbs": np.array([1.0, 0.9, 0.8])}
    fig = figures.exact_tv_figure(curves)
    assert [trace.name for trace in fig.data] == ["sqrt(t)", "Gibbs"]
    assert fig.layout.yaxis.type == "log"
    assert np.isnan(fig.data[0].y[2])  # an exact 0 has no place on a log axis
    assert len(figures.exact_tv_figure({}).data) == 0


# ------------------------------------------------------------------------------ the app view
def test_view_explains_instead_of_computing_for_more_than_twelve_sites():
    from app.views import exact_chain as view

    shown = view.exact_view(IsingPosterior(torch.zeros(4, 4), 0.5), ["sqrt"])
    assert shown.rows == [] and shown.figure is None
    assert "at most 12 sites" in shown.message and "16" in shown.message


def test_view_tabulates_the_comparison_for_one_chain_of_a_per_chain_target():
    from app.views import exact_chain as view

    alpha = torch.stack([torch.full((2, 3), 0.3), torch.full((2, 3), -0.4)]).double()
    target = IsingPosterior(alpha, 0.5, "free")
    shown = view.exact_view(target, ["sqrt", "learned", "gibbs"], steps=20)
    assert shown.message == ""
    assert [row["name"] for row in shown.rows] == ["sqrt", "gibbs"]  # no function to import
    p = exact_chain.transition_matrix(target.chain(0), "sqrt")
    pi = exact_chain.exact_distribution(target.chain(0))
    assert shown.rows[0]["gap"] == pytest.approx(exact_chain.spectral_gap(p, pi))
    table = view.table(shown.rows)
    assert table[0]["sampler"] == "sqrt(t)" and "tv" not in table[0]
    assert len(shown.figure.data) == 2


def test_view_renders_without_exceptions_for_small_and_large_problems():
    from streamlit.testing.v1 import AppTest

    def page(big: bool):
        import torch

        from app.views import exact_chain as view
        from lsbcore import IsingPosterior

        shape = (4, 4) if big else (2, 2)
        view.render(IsingPosterior(torch.full(shape, 0.2), 0.5, "periodic"), ["barker", "max"])

    main = sys.modules["__main__"]
    try:
        small = AppTest.from_function(page, kwargs={"big": False}).run(timeout=60)
        large = AppTest.from_function(page, kwargs={"big": True}).run(timeout=60)
    finally:  # the test script stays __main__ otherwise, and spawned processes would run it
        sys.modules["__main__"] = main
    assert not small.exception
    assert len(small.dataframe) == 1 and small.caption[0].value.startswith("The spectral gap")
    assert not large.exception and "at most 12 sites" in large.info[0].value


def test_the_app_window_is_the_centre_of_chain_ones_field():
    from app.views.exact_chain import window_target

    alpha = torch.arange(2 * 6 * 7, dtype=torch.float64).view(2, 6, 7)
    big = IsingPosterior(alpha, 0.7, "periodic")
    small = window_target(big, 3, 4)
    assert small.shape == (3, 4) and small.lam == 0.7 and small.boundary == "free"
    torch.testing.assert_close(small.alpha.view(3, 4), alpha[0, 1:4, 1:5])
    assert window_target(big, 7, 7) is None  # larger than the lattice


def test_relaxation_along_a_coupling_matches_the_comparison_and_grows():
    alpha = ising("free").alpha[0]
    lams = [0.0, 0.5, 1.0, 1.5]
    family = [IsingPosterior(alpha, lam, "free") for lam in lams]
    names = ["barker", "max", "checkerboard"]
    curves = exact_chain.relaxation_along(family, names)
    for k, target in enumerate(family):
        rows = exact_chain.compare_samplers(target, names, steps=1)
        for row in rows:
            assert curves[row["name"]][k] == pytest.approx(row["relaxation_site_updates"])
    for name in names:  # the bimodal posterior: every local sampler slows down together
        assert curves[name][-1] > 100 * curves[name][1]
    figure = figures.exact_relaxation_figure(lams, curves, current=0.5)
    assert [t.name for t in figure.data] == ["t/(1+t)", "max(1,t)", "Checkerboard Gibbs"]
    assert figure.layout.yaxis.type == "log"
    assert figure.layout.shapes[0].x0 == 0.5
    assert figures.exact_relaxation_figure(lams, {}).layout.annotations  # "no data yet"


def test_the_exact_table_prints_no_float_noise():
    from app.views import exact_chain as view

    rows = [
        {
            "name": "barker",
            "gap": 0.0661234,
            "relaxation_time": 15.123,
            "relaxation_site_updates": 32123.4,
            "tv_final": 6e-16,
            "tv": np.zeros(201),
            "mixing_steps": None,
        }
    ]
    shown = view.table(rows)[0]
    assert shown["steps to TV ≤ 1/4"] == "> 200"  # not within the curve
    assert shown["TV after the last step"] == "< 1e-12"  # once 0.0000000000000006
    assert shown["spectral gap"] == "0.0661"
    assert shown["relaxation time (site updates)"] == "32,100"


def test_the_relaxation_text_says_what_the_curves_show():
    from app.views.exact_chain import relaxation_text

    lams = [0.0, 1.0, 2.0]
    one_mode = {"barker": [2.2, 2.9, 3.4], "max": [3.0, 19.1, 1034.6]}
    text = relaxation_text(lams, one_mode)
    assert "t/(1+t) 2.2 → 3.4;" in text and "max(1,t) 3 → 1,030 (×340)" in text
    assert "max(1,t) slows down tenfold" in text and "t/(1+t) stays within threefold" in text
    assert "Every sampler" not in text  # the old caption's claim, false here
    two_modes = {"barker": [32.6, 155.0, 48452.0], "checkerboard": [9.0, 239.0, 87040.0]}
    assert "Every sampler slows down" in relaxation_text(lams, two_modes)
    between = {"barker": [2.2, 2.9, 14.2], "max": [3.0, 19.1, 1034.6]}  # neither fast nor slow
    assert relaxation_text(lams, between).endswith(
        "max(1,t) slows down tenfold or more; the window and λ are the same for all, so the "
        "difference lies in the samplers."
    )
    flat = {"barker": [2.0, 2.5, 3.0]}
    assert relaxation_text(lams, flat).endswith("No sampler slows down tenfold here.")
    assert relaxation_text(lams, {"barker": [np.nan] * 3}) == ""


def test_on_paper_case_3_the_informed_samplers_stay_fast_and_max_slows_down():
    """The exact chart's numbers on the default run's centre 3 x 3 window: the text must not
    say that every sampler slows down (it said so while t/(1+t) stayed at 3-5)."""
    from app.views.exact_chain import coupling_sweep, relaxation_text, window_target
    from lsbcore import paper_case

    target = window_target(paper_case(3, n_chains=1).target, 3, 3)
    lams, curves, _ = coupling_sweep(target, ["barker", "max"], points=5)
    assert curves["barker"].max() < 20 and curves["max"][-1] > 100 * curves["max"].min()
    text = relaxation_text(lams, curves)
    assert "max(1,t) slows down" in text and "Every sampler" not in text
