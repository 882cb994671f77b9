"""Block moves that cost their block on pairwise targets (issue 45): ``block_log_ratios`` from
the block's local fields and inner couplings equals the whole-target difference, and block
Gibbs and the Hamming ball sampler run the same chains as when every candidate is scored whole,
without scoring a whole state per step.

The reference is the old path: candidate states built and scored by ``log_prob`` (a subclass
that keeps ``Target``'s defaults scores that way).
"""

from __future__ import annotations

import pytest
import torch

from lsbcore import PairwiseMRF
from lsbcore.samplers.block.block_gibbs import block_log_probs, block_states, flip_patterns
from lsbcore.samplers.block.hamming_ball import ball_patterns
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets import pairwise_target
from lsbcore.targets.base import Target
from lsbcore.targets.ising import IsingPosterior, lattice_edges

pytestmark = pytest.mark.usefixtures("single_thread")


def random_mrf(n: int, seed: int, chains: int = 0) -> PairwiseMRF:
    """Dense random couplings; ``chains > 0``: one field per chain."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(*((chains,) if chains else ()), n, generator=g, dtype=torch.float64)
    upper = torch.triu(torch.randn(n, n, generator=g, dtype=torch.float64) * 0.6, 1)
    return PairwiseMRF(h, upper + upper.T)


def ising(height: int, width: int, boundary: str, scaled: bool, seed: int, chains: int = 0):
    g = torch.Generator().manual_seed(seed)
    alpha = torch.randn(*((chains,) if chains else ()), height, width, generator=g).double()
    n_edges = len(lattice_edges(height, width, boundary))
    scale = torch.rand(n_edges, generator=g, dtype=torch.float64) * 2 if scaled else None
    return IsingPosterior(alpha, 0.7, boundary=boundary, edge_scale=scale)


TARGETS = {
    "mrf": lambda: random_mrf(9, 0),
    "mrf, a field per chain": lambda: random_mrf(9, 1, chains=6),
    "ising free": lambda: ising(4, 5, "free", False, 2),
    "ising periodic, edge scale": lambda: ising(4, 4, "periodic", True, 3),
    "ising 2-wide torus (a multigraph)": lambda: ising(2, 5, "periodic", True, 4),
    "ising periodic, a field per chain": lambda: ising(3, 4, "periodic", False, 5, chains=6),
}


class WholeScoring(IsingPosterior):
    """An Ising posterior scored the old way: whole candidate states through ``log_prob``."""

    block_log_ratios = Target.block_log_ratios
    block_log_probs = Target.block_log_probs


class WholeScoringMRF(PairwiseMRF):
    block_log_ratios = Target.block_log_ratios
    block_log_probs = Target.block_log_probs


def whole_scores(target, x, sites, flips) -> torch.Tensor:
    """``log p~`` of every candidate, each built and scored whole: ``[B, M]``."""
    states = block_states(x, sites, flips)  # [B, M, n]
    return torch.stack([target.log_prob(states[:, m]) for m in range(flips.shape[0])], 1)


def blocks_with_neighbours(target, b: int, k: int, g: torch.Generator) -> torch.Tensor:
    """``[B, k]`` distinct sites per chain: a site, then neighbours of the block where there
    are any (so inner couplings count), else random sites."""
    rows = []
    for _ in range(b):
        block = [int(torch.randint(target.n_sites, (1,), generator=g))]
        while len(block) < k:
            near = {int(j) for i in block for j in target.neighbourhood[i]} - set(block)
            pool = sorted(near) if near and torch.rand(1, generator=g) < 0.8 else None
            pool = pool or [i for i in range(target.n_sites) if i not in block]
            block.append(pool[int(torch.randint(len(pool), (1,), generator=g))])
        rows.append(block)
    return torch.tensor(rows)


@pytest.mark.parametrize("name", TARGETS)
@pytest.mark.parametrize("k", [1, 2, 4, 7])
def test_local_block_scores_equal_the_whole_target_difference(name, k):
    target = TARGETS[name]()
    g = torch.Generator().manual_seed(k)
    b = 6
    x = 2.0 * torch.randint(0, 2, (b, target.n_sites), generator=g).double() - 1.0
    sites = blocks_with_neighbours(target, b, k, g)
    for flips in (flip_patterns(k), ball_patterns(k, min(k, 2))):
        whole = whole_scores(target, x, sites, flips)
        ratios = target.block_log_ratios(x, sites, flips)
        torch.testing.assert_close(ratios, whole - whole[:, :1], rtol=0, atol=1e-9)
        assert torch.equal(ratios[:, 0], torch.zeros(b, dtype=torch.float64))  # x itself
        torch.testing.assert_close(
            target.block_log_probs(x, sites, flips), whole, rtol=0, atol=1e-9
        )
        # the samplers' scoring, told a candidate's log p~ (here the last one's)
        last = torch.full((b,), flips.shape[0] - 1)
        known = (last, whole[:, -1])
        torch.testing.assert_close(
            block_log_probs(target, x, sites, flips, known), whole, rtol=0, atol=1e-9
        )


def test_local_block_scores_in_chunks_equal_one_pass(monkeypatch):
    target = TARGETS["ising periodic, edge scale"]()
    g = torch.Generator().manual_seed(0)
    x = 2.0 * torch.randint(0, 2, (3, target.n_sites), generator=g).double() - 1.0
    sites = blocks_with_neighbours(target, 3, 5, g)
    flips = flip_patterns(5)
    one_pass = target.block_log_ratios(x, sites, flips)
    monkeypatch.setattr(pairwise_target, "BLOCK_VALUES", 3 * 5 * 7)  # 7 candidates at once
    torch.testing.assert_close(target.block_log_ratios(x, sites, flips), one_pass, rtol=0, atol=0)


SAMPLERS = [
    ("block-gibbs", {"block_size": 4, "blocks": "random"}),
    ("block-gibbs", {"block_size": 3, "blocks": "sweep"}),
    ("block-gibbs", {"block_size": 5, "blocks": "shuffled"}),
    ("hamming-ball", {"block_size": 6, "radius": 1}),
    ("hamming-ball", {"block_size": 5, "radius": 3, "blocks": "shuffled"}),
]


@pytest.mark.parametrize(("name", "options"), SAMPLERS)
def test_the_chains_are_those_of_whole_state_scoring(name, options):
    g = torch.Generator().manual_seed(7)
    alpha = torch.randn(6, 7, generator=g, dtype=torch.float64)
    scale = torch.rand(len(lattice_edges(6, 7, "free")), generator=g, dtype=torch.float64)
    runs = []
    for kind in (IsingPosterior, WholeScoring):
        target = kind(alpha, 0.8, edge_scale=scale)
        sampler = make_sampler(name, target, 5, seed=3, backend="torch", **options)
        sampler.step(300)
        runs.append((sampler.x.clone(), sampler.log_p.clone(), sampler.n_accepted))
    (x, log_p, accepted), (x_whole, log_p_whole, accepted_whole) = runs
    assert torch.equal(x, x_whole)
    assert accepted == accepted_whole > 100  # the same moves, and the chains moved
    torch.testing.assert_close(log_p, log_p_whole, rtol=0, atol=1e-9)
    torch.testing.assert_close(log_p, IsingPosterior(alpha, 0.8, edge_scale=scale).log_prob(x))


def test_the_chains_are_those_of_whole_state_scoring_with_a_field_per_chain():
    plain = random_mrf(10, 4, chains=4)
    whole = WholeScoringMRF(plain.h, plain.J)
    runs = []
    for target in (plain, whole):
        sampler = make_sampler("hamming-ball", target, 4, seed=1, block_size=4, radius=2)
        sampler.step(200)
        runs.append(sampler.x.clone())
    assert torch.equal(runs[0], runs[1])


@pytest.mark.parametrize(("name", "options"), SAMPLERS[:1] + SAMPLERS[3:4])
def test_a_block_step_scores_no_whole_state(name, options, monkeypatch):
    target = ising(8, 8, "free", True, 0)
    sampler = make_sampler(name, target, 3, seed=0, backend="torch", **options)
    scored = []
    whole = IsingPosterior.log_prob

    def counted(self, x):
        scored.append(x.shape[0])
        return whole(self, x)

    monkeypatch.setattr(IsingPosterior, "log_prob", counted)
    sampler.step(20)
    assert scored == []
    assert sampler.n_accepted > 0
