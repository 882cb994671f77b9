"""Every sampler/target pair the registry allows is exact; every pair it refuses is refused.

Three kinds of target: an RBM's visible marginal, a factor graph with a near-deterministic
factor over three variables, a random pairwise network. For every registered sampler that the
registry allows on each:

- the full transition matrix (``lsbcore.exact.transition_matrix``, built from the sampler's own
  one-step law) on an 8-site version: stochastic, the exact law stationary, and detailed balance
  for every reversible step (all but the checkerboard sweep);
- a run on the issue's sizes (12 visible units, 10 variables, 10 sites) started from exact
  draws: the law of the first four sites after 20 sweeps against enumeration in total variation.

A factor graph with hard zeros provides no gradient: the gradient samplers are refused there in
a sentence, and the rest never enter zero mass.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lsbcore import RBM, FactorGraph, PairwiseMRF, exact, make_sampler
from lsbcore.balancing.functions import make_balancing
from lsbcore.exact.states import all_states, state_codes
from lsbcore.samplers.registry import REGISTRY, refusal, samplers_for

pytestmark = pytest.mark.usefixtures("single_thread")  # tiny tensors: threads only cost

# the checkerboard sweep is a product of block updates: stationary, not reversible
NOT_REVERSIBLE = {"checkerboard"}
# options that keep a step's law small on 8 sites (paths of up to 3 flips, balls of 4 sites)
MATRIX_OPTIONS = {"pas": {"path_length": 2}, "hamming-ball": {"block_size": 4, "radius": 2}}
# ... and a small monotone network for LSB 2' on 8,000 chains (its exactness does not depend on
# the network's size; the default 20 x 20 one is tested in test_monotone.py)
RUN_OPTIONS = {
    "hamming-ball": {"block_size": 6, "radius": 1},
    "lsb2-monotone": {"groups": 5, "units": 5},
    "flow-exact": {"importance": 1},  # exact for any K (K = 1, 4, 8 in test_flow_exactness.py)
}


def rbm(n: int, seed: int) -> RBM:
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(3, n, generator=g, dtype=torch.float64) * 0.8
    return RBM(W, torch.randn(n, generator=g, dtype=torch.float64) * 0.5, torch.zeros(3))


def factor_graph(n: int, seed: int, hard: bool = False) -> FactorGraph:
    """Random pairwise factors on a chain plus one near-deterministic factor over three
    variables (an XOR-like table: 1e-3 on half its rows, or exactly 0 with ``hard``)."""
    g = torch.Generator().manual_seed(seed)
    scopes = [(i, i + 1) for i in range(n - 1)] + [(0, n // 2, n - 1)]
    tables = [torch.randn(4, generator=g, dtype=torch.float64) for _ in range(n - 1)]
    parity = torch.tensor([bin(k).count("1") % 2 for k in range(8)], dtype=torch.bool)
    small = -torch.inf if hard else float(np.log(1e-3))
    tables.append(torch.where(parity, 0.0, small).to(torch.float64))
    return FactorGraph(n, scopes, tables)


def pairwise(n: int, seed: int) -> PairwiseMRF:
    g = torch.Generator().manual_seed(seed)
    J = torch.triu(torch.randn(n, n, generator=g, dtype=torch.float64) * 0.4, 1)
    return PairwiseMRF(torch.randn(n, generator=g, dtype=torch.float64) * 0.5, J + J.T)


KINDS = {"rbm": rbm, "factor-graph": factor_graph, "pairwise": pairwise}
RUN_SIZES = {"rbm": 12, "factor-graph": 10, "pairwise": 10}
PAIRS = [(kind, name) for kind in KINDS for name in samplers_for(KINDS[kind](8, 0))]
# The flow samplers have no finite transition matrix to build: flow-latent's chain lives in the
# flow's latent space R^n, and flow-exact's step law in x is an expectation over the flow's
# continuous draws (its importance estimates) with no closed form. Their laws are checked
# against enumeration in tests/test_flow_exactness.py instead.
# dHMC's chain carries theta beside x (the next x depends on it): no matrix over x either; its
# runs are checked against enumeration in tests/test_baseline_samplers.py.
MATRIX_PAIRS = [(kind, name) for kind, name in PAIRS if REGISTRY[name].has_matrix]
# flow-latent is approximate by design (its registry entry says so): no TV check holds for it
EXACT_PAIRS = [(kind, name) for kind, name in PAIRS if not REGISTRY[name].approximate]
# a flow trained briefly: exactness does not depend on training (tested with 0 steps), and the
# default 1,000 steps would take a minute per test; 100 steps let an independence proposal move
# most chains within the run's 20 steps
FLOW_STEPS = 100


def extra(name: str) -> dict:
    """A frozen learned function for the sampler that samples with a loaded one; a briefly
    trained flow for the flow samplers."""
    if REGISTRY[name].needs_balancing:
        return {"balancing": make_balancing("lsb1").frozen()}
    if REGISTRY[name].takes_flow:
        return {"train_steps": FLOW_STEPS}
    return {}


def test_the_pairs_cover_every_sampler_and_target_kind():
    names = {name for _, name in PAIRS}
    # every sampler runs on at least one kind; neural-block's tiles need a 2-D grid, and its
    # exact law is tested on grids in tests/test_neural_block.py
    assert names == set(REGISTRY) - {"neural-block"}
    assert all(refusal("neural-block", KINDS[kind](8, 0)) for kind in KINDS)
    for kind in ("rbm", "factor-graph"):  # beyond pairwise, the kernels' samplers are refused
        assert (kind, "checkerboard") not in PAIRS
    assert ("rbm", "gwg") in PAIRS and ("factor-graph", "flsb2") in PAIRS
    # the flow samplers and dHMC run on every kind; only the matrix test leaves them out
    assert {name for _, name in PAIRS} - {name for _, name in MATRIX_PAIRS} == {
        "flow-exact",
        "flow-latent",
        "dhmc",
    }


@pytest.mark.parametrize(("kind", "name"), MATRIX_PAIRS)
def test_transition_matrix_is_exact(kind, name):
    target = KINDS[kind](8, 1)
    options = {**MATRIX_OPTIONS.get(name, {}), **extra(name)}
    p = exact.transition_matrix(target, name, **options)
    pi = exact.exact_distribution(target)
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-12)
    assert p.min() >= -1e-15
    np.testing.assert_allclose(pi @ p, pi, atol=1e-12)
    if name not in NOT_REVERSIBLE:
        flow = pi[:, None] * p
        np.testing.assert_allclose(flow, flow.T, atol=1e-13)
    assert (
        exact.spectral_gap(p, pi) > 1e-6
    )  # it mixes: a matrix of zeros off the diagonal would not


def exact_draws(target, count: int, seed: int) -> torch.Tensor:
    """``count`` independent draws from the enumerated law, ``[count, n]``."""
    pi = torch.as_tensor(exact.exact_distribution(target))
    codes = torch.multinomial(
        pi, count, replacement=True, generator=torch.Generator().manual_seed(seed)
    )
    return all_states(target.n_sites)[codes]


def projected_law(target, sites: int) -> np.ndarray:
    """The exact law of the first ``sites`` sites (state codes over them)."""
    pi = exact.exact_distribution(target)
    codes = np.arange(len(pi)) & ((1 << sites) - 1)
    return np.bincount(codes, weights=pi, minlength=2**sites)


@pytest.mark.parametrize(("kind", "name"), EXACT_PAIRS)
def test_a_run_from_the_target_stays_on_it(kind, name):
    """Chains started from exact draws of p stay distributed as p, whatever their mixing speed
    (the near-deterministic factor slows single-site samplers a lot): the law of the first four
    sites after 20 sweeps against enumeration. Each chain's last state is one draw: with 8,000
    draws E[TV] <= 0.4 sqrt(16 / 8000) = 0.018, and McDiarmid puts TV above 0.018 + 0.035 with
    probability below 1e-8; a step that breaks detailed balance moves it by 0.1 and more."""
    target = KINDS[kind](RUN_SIZES[kind], 2)
    chains, sweeps, sites = 8000, 20, 4
    start = exact_draws(target, chains, seed=11)
    sampler = make_sampler(
        name, target, chains, seed=7, backend="torch", **RUN_OPTIONS.get(name, {}), **extra(name)
    )
    if sampler.learnable:  # learn first (an adaptive chain is not stationary), then freeze
        before = [p.detach().clone() for p in sampler.balancing.parameters()]
        sampler.step(25, learn=True)  # 25 steps move its parameters by 0.12-0.26
        moved = max(
            float((p.detach() - q).abs().max())
            for p, q in zip(sampler.balancing.parameters(), before, strict=True)
        )
        assert moved > 0.05  # the frozen function is a learned one, not its start
    sampler.set_state(start)
    per_sweep = max(1, target.n_sites // sampler.sites_per_step)
    sampler.step(sweeps * per_sweep)
    x = sampler.x.reshape(chains, -1)
    codes = state_codes(x[:, :sites]).numpy()
    empirical = np.bincount(codes, minlength=2**sites) / chains
    tv = 0.5 * np.abs(empirical - projected_law(target, sites)).sum()
    assert tv < 0.053, f"{name} on {kind}: TV {tv:.4f}"
    assert float((x != start).any(1).double().mean()) > 0.3  # the chains moved
    assert torch.isfinite(sampler.log_p).all()
    assert sampler.invariant_error() < 1e-9


def test_hard_zeros_refuse_gradients_and_are_never_entered():
    target = factor_graph(10, 3, hard=True)
    assert "gradient" not in target.provides
    for name in ("gwg", "pas", "dmala", "flsb1", "flsb2"):
        reason = refusal(name, target)
        assert reason == (
            f"the {name!r} sampler needs a differentiable log p~ (a gradient), which "
            f"{target.describe()} does not provide."
        )
        with pytest.raises(ValueError, match="needs a differentiable log p~"):
            make_sampler(name, target, 2)
    for name in samplers_for(target):
        options = {**RUN_OPTIONS.get(name, {}), **extra(name)}
        sampler = make_sampler(name, target, 200, seed=1, backend="torch", **options)
        sampler.step(300)
        assert torch.isfinite(sampler.log_p).all(), name
        assert torch.isfinite(target.log_prob(sampler.x)).all(), name


def test_exact_chain_says_why_a_pair_is_refused():
    with pytest.raises(ValueError, match="'checkerboard' sampler needs a pairwise model"):
        exact.transition_matrix(rbm(6, 0), "checkerboard")
    states = all_states(6)
    assert torch.isfinite(rbm(6, 0).log_prob(states)).all()
