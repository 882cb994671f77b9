"""The block samplers (``block-gibbs``, ``hamming-ball``) on any target: their exact transition
matrices (``lsbcore.exact.block_moves``) are stochastic, leave the enumerated target invariant
(reversibly, except a whole sweep), agree with a brute-force enumeration of the definitions and
with the step's own draws; runs reach the target in TV; evaluations are counted by the rule.

Targets: a random pairwise network and a ``Target`` whose ``log p~`` is an arbitrary table over
all ``2^n`` states (not pairwise, no capabilities), one with states of zero probability; the
matrices also on a small RBM.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from lsbcore import PairwiseMRF
from lsbcore.exact import all_states, exact_distribution, flip_matrix, state_codes
from lsbcore.exact import transition_matrix as single_site_matrix
from lsbcore.exact.block_moves import (
    block_sampler_at_every_state,
    block_step_matrix,
    block_sweep_matrix,
)
from lsbcore.samplers.block import block_gibbs
from lsbcore.samplers.block.block_gibbs import (
    BlockGibbsSampler,
    block_log_probs,
    draw_index,
    weights_of,
)
from lsbcore.samplers.block.hamming_ball import HammingBallSampler, ball_patterns
from lsbcore.targets.base import Target
from lsbcore.targets.rbm import RBM

pytestmark = pytest.mark.usefixtures("single_thread")


class TableTarget(Target):
    """``log p~(x) = table[code(x)]``: any distribution on ``n <= 12`` sites (``-inf``: zero
    probability). Not pairwise, nothing provided beyond ``log_prob``."""

    def __init__(self, log_table: torch.Tensor):
        self.log_table = log_table
        self.n_sites = int(math.log2(len(log_table)))
        self.shape = (self.n_sites,)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        flat = self._flat(x)
        return self.log_table.to(flat.device)[state_codes(flat).to(flat.device)]

    def start(self, n_chains: int, generator: torch.Generator) -> torch.Tensor:
        positive = torch.nonzero(torch.isfinite(self.log_table)).view(-1)
        pick = torch.randint(0, len(positive), (n_chains,), generator=generator)
        return all_states(self.n_sites)[positive[pick]]


def table_target(n: int, seed: int, zero_fraction: float = 0.0) -> TableTarget:
    """Random ``log p~`` with spread 1.5 (probabilities over a factor of ~e^9), and about
    ``zero_fraction`` of the states (never state 0) at zero probability."""
    generator = torch.Generator().manual_seed(seed)
    log_table = 1.5 * torch.randn(2**n, generator=generator, dtype=torch.float64)
    zero = torch.rand(2**n, generator=generator) < zero_fraction
    zero[0] = False
    return TableTarget(log_table.masked_fill(zero, -math.inf))


def random_mrf(n: int, seed: int) -> PairwiseMRF:
    generator = torch.Generator().manual_seed(seed)
    h = torch.randn(n, generator=generator, dtype=torch.float64) * 0.5
    weights = torch.randn(n, n, generator=generator, dtype=torch.float64) * 0.6
    upper = torch.triu(weights, diagonal=1)
    return PairwiseMRF(h, upper + upper.T)


TARGETS = {
    "pairwise": lambda: random_mrf(6, 3),
    "table": lambda: table_target(6, 4),
    "table with zeros": lambda: table_target(6, 5, zero_fraction=0.3),
}
# the matrices are also checked on a real target that is not pairwise
MATRIX_TARGETS = {**TARGETS, "rbm": lambda: RBM.random(6, 3, seed=2, scale=1.0)}
# (sampler, options): reversible step by step
REVERSIBLE = [
    ("block-gibbs", dict(block_size=1)),
    ("block-gibbs", dict(block_size=2)),
    ("block-gibbs", dict(block_size=4)),
    ("hamming-ball", dict(block_size=3, radius=1)),
    ("hamming-ball", dict(block_size=4, radius=2)),
    ("hamming-ball", dict(block_size=6, radius=1)),
]
# sweeps of 6 sites: blocks of 2 tile them; blocks of 4 wrap round ({0..3}, {4, 5, 0, 1})
SWEEPS = [
    ("block-gibbs", dict(block_size=2, blocks="sweep")),
    ("block-gibbs", dict(block_size=4, blocks="sweep")),
    ("hamming-ball", dict(block_size=4, radius=1, blocks="sweep")),
]
CLASSES = {"block-gibbs": BlockGibbsSampler, "hamming-ball": HammingBallSampler}


def balance_gap(pi: np.ndarray, p: np.ndarray) -> float:
    flow = pi[:, None] * p
    return float(np.abs(flow - flow.T).max())


def support(target) -> np.ndarray:
    return exact_distribution(target) > 0


def check_stochastic(p: np.ndarray, target) -> None:
    """Rows of states of positive probability sum to 1; no mass enters a zero state."""
    on = support(target)
    assert p.min() >= -1e-15
    np.testing.assert_allclose(p[on].sum(1), 1.0, atol=1e-12)
    assert np.abs(p[:, ~on]).max(initial=0.0) == 0.0


# ----------------------------------------------------------------- the exact matrices
@pytest.mark.parametrize("target_name", MATRIX_TARGETS)
@pytest.mark.parametrize(("name", "options"), REVERSIBLE)
def test_block_step_is_stochastic_and_reversible(target_name, name, options):
    target = MATRIX_TARGETS[target_name]()
    pi = exact_distribution(target)
    p = block_step_matrix(target, name, **options)
    check_stochastic(p, target)
    assert balance_gap(pi, p) < 1e-15
    np.testing.assert_allclose(pi @ p, pi, atol=1e-15)


@pytest.mark.parametrize("target_name", MATRIX_TARGETS)
@pytest.mark.parametrize(("name", "options"), SWEEPS)
def test_a_sweep_leaves_the_target_invariant_but_is_not_reversible(target_name, name, options):
    target = MATRIX_TARGETS[target_name]()
    pi = exact_distribution(target)
    sampler, _ = block_sampler_at_every_state(target, name, **options)
    for j in range(len(sampler.sweep_blocks)):  # each block's update is reversible
        p_j = block_step_matrix(target, name, block=j, **options)
        check_stochastic(p_j, target)
        assert balance_gap(pi, p_j) < 1e-15
    p = block_sweep_matrix(target, name, **options)
    check_stochastic(p, target)
    np.testing.assert_allclose(pi @ p, pi, atol=1e-14)
    assert balance_gap(pi, p) > 1e-3  # the product of the blocks' projections is not


def brute_force_matrix(target, name: str, block_size: int, radius: int | None = None):
    """The definitions, enumerated with integers: a uniform block ``S`` of ``k`` sites; block
    Gibbs draws ``y`` agreeing with ``x`` off ``S`` with probability ``p~(y) / sum``; the
    Hamming ball draws ``u`` uniformly within ``radius`` of ``x`` on ``S``, then ``y`` within
    ``radius`` of ``u`` with probability ``p~(y) / sum``."""
    n = target.n_sites
    weight = exact_distribution(target)  # p~ up to a constant
    size = 2**n
    p = np.zeros((size, size))
    blocks = list(itertools.combinations(range(n), block_size))
    r = block_size if radius is None else radius
    masks = [  # the flips of at most r sites of each block, as XOR masks
        [
            sum(1 << s for s in chosen)
            for j in range(r + 1)
            for chosen in itertools.combinations(b, j)
        ]
        for b in blocks
    ]
    for x in range(size):
        if weight[x] == 0:
            continue
        for ball in masks:
            centres = [x] if radius is None else [x ^ m for m in ball]
            for u in centres:
                ys = [u ^ m for m in ball]
                total = sum(weight[y] for y in ys)
                for y in ys:
                    p[x, y] += weight[y] / total / len(blocks) / len(centres)
    return p


@pytest.mark.parametrize("target_name", ["pairwise", "table with zeros"])
@pytest.mark.parametrize(
    ("name", "block_size", "radius"),
    [("block-gibbs", 1, None), ("block-gibbs", 3, None), ("hamming-ball", 3, 1),
     ("hamming-ball", 4, 2)],
)  # fmt: skip
def test_transition_probabilities_are_the_definitions_enumerated(
    target_name, name, block_size, radius
):
    target = TARGETS[target_name]()
    options = dict(block_size=block_size) | ({} if radius is None else dict(radius=radius))
    p = block_step_matrix(target, name, **options)
    np.testing.assert_allclose(p, brute_force_matrix(target, name, block_size, radius), atol=1e-14)


@pytest.mark.parametrize("target_name", ["pairwise", "table"])
def test_block_size_one_is_random_scan_gibbs(target_name):
    target = TARGETS[target_name]()
    p = block_step_matrix(target, "block-gibbs", block_size=1)
    if target_name == "pairwise":
        gibbs = single_site_matrix(target, "gibbs")
    else:  # random-scan Gibbs flips site i with probability sigmoid(s_i) / n
        s = target.flip_log_ratios(all_states(target.n_sites))
        gibbs = flip_matrix(torch.sigmoid(s) / target.n_sites)
    np.testing.assert_allclose(p, gibbs, atol=1e-15)


@pytest.mark.parametrize("k", [1, 3])
def test_a_ball_as_wide_as_its_block_is_block_gibbs(k):
    target = table_target(5, 6, zero_fraction=0.2)
    ball = block_step_matrix(target, "hamming-ball", block_size=k, radius=k)
    block = block_step_matrix(target, "block-gibbs", block_size=k)
    np.testing.assert_allclose(ball, block, atol=1e-15)


def test_the_ball_patterns_are_the_hamming_ball():
    ball = ball_patterns(5, 2)
    flips = (ball < 0).sum(1)
    assert len(ball) == 1 + 5 + 10
    assert flips[0] == 0 and bool((flips[:-1] <= flips[1:]).all())
    assert len({tuple(row.tolist()) for row in ball}) == len(ball)


# ----------------------------------------------------------------- the step against the law
def empirical(codes: torch.Tensor, size: int) -> np.ndarray:
    return np.bincount(codes.numpy(), minlength=size) / len(codes)


def tv(p: np.ndarray, q: np.ndarray) -> float:
    return 0.5 * float(np.abs(p - q).sum())


def tv_tolerance(n_states: int, n_samples: int) -> float:
    """``E TV <= sqrt(K / N) / 2`` for ``N`` draws on ``K`` states (Cauchy-Schwarz on
    ``E |p^_i - p_i| <= sqrt(p_i / N)``), plus 0.03: TV moves by at most ``1 / N`` per draw, so
    it exceeds its mean by ``e`` with probability at most ``exp(-2 N e^2)`` (McDiarmid):
    below 1e-7 for ``N >= 10,000``."""
    return 0.5 * math.sqrt(n_states / n_samples) + 0.03


@pytest.mark.parametrize(("name", "options"), [*REVERSIBLE, *SWEEPS])
def test_one_step_from_one_state_draws_its_transition_probabilities(name, options):
    target = TARGETS["table with zeros"]()
    n = target.n_sites
    chains = 20_000
    x0 = target.start(1, torch.Generator().manual_seed(1))
    law = CLASSES[name](target, 1, x0=x0, **options).transition_probabilities()[0].numpy()
    sampler = CLASSES[name](target, chains, seed=2, x0=x0.expand(chains, n), **options)
    sampler.step(1)
    assert tv(empirical(state_codes(sampler.x), 2**n), law) < tv_tolerance(
        np.count_nonzero(law), chains
    )


@pytest.mark.parametrize("target_name", TARGETS)
@pytest.mark.parametrize(
    ("name", "options"),
    [("block-gibbs", dict(block_size=2)), ("block-gibbs", dict(block_size=3, blocks="sweep")),
     ("hamming-ball", dict(block_size=4, radius=1))],
)  # fmt: skip
def test_a_run_reaches_the_exact_distribution(target_name, name, options):
    """10,000 chains from the target's start, 150 steps: the chains' states are independent
    draws from the exact law after 150 steps (``mu_0 P^150``, from the matrices), which is
    within 0.005 of the target; so they are within the sampling tolerance of that law, and of
    the target up to the law's own distance."""
    target = TARGETS[target_name]()
    n, chains, steps = target.n_sites, 10_000, 150
    pi = exact_distribution(target)
    sampler = CLASSES[name](target, chains, seed=7, **options)
    start = empirical(state_codes(sampler.x), 2**n)
    if options.get("blocks") == "sweep":  # 150 steps: 50 sweeps of 3 blocks
        law = start @ np.linalg.matrix_power(block_sweep_matrix(target, name, **options), 50)
    else:
        law = start @ np.linalg.matrix_power(block_step_matrix(target, name, **options), steps)
    assert tv(law, pi) < 0.005
    sampler.step(steps)
    tolerance = tv_tolerance(int(np.count_nonzero(pi)), chains)
    run = empirical(state_codes(sampler.x), 2**n)
    assert tv(run, law) < tolerance
    assert tv(run, pi) < tolerance + tv(law, pi)
    assert sampler.invariant_error() < 1e-12


@pytest.mark.parametrize("target_name", TARGETS)
def test_shuffled_blocks_reach_the_exact_distribution(target_name):
    """As above; the law after 150 steps of shuffled sweeps is not a power of one matrix, so
    the run is given the other runs' allowance (0.005) for its distance to the target."""
    target = TARGETS[target_name]()
    pi = exact_distribution(target)
    sampler = BlockGibbsSampler(target, 10_000, seed=7, block_size=2, blocks="shuffled")
    sampler.step(150)
    run = empirical(state_codes(sampler.x), 2**target.n_sites)
    assert tv(run, pi) < tv_tolerance(int(np.count_nonzero(pi)), 10_000) + 0.005


def test_shuffled_blocks_start_as_random_blocks_and_then_draw_each_chains_own_block():
    """At a sweep's start the next block is a uniform k-subset (the random blocks' matrix);
    within a sweep each chain's next block is fixed, and one step from one state draws the
    average of the chains' own block laws."""
    target = TARGETS["table with zeros"]()
    n, chains = target.n_sites, 20_000
    shuffled = block_step_matrix(target, "block-gibbs", block_size=3, blocks="shuffled")
    np.testing.assert_allclose(shuffled, block_step_matrix(target, "block-gibbs", block_size=3))
    x0 = target.start(1, torch.Generator().manual_seed(1)).expand(chains, n)
    sampler = BlockGibbsSampler(target, chains, seed=3, x0=x0, block_size=3, blocks="shuffled")
    sampler.step(1)
    x1 = sampler.x.clone()
    code = int(state_codes(x1[:1])[0])
    x1[:] = x1[0]  # every chain at chain 0's state, each with its own next block
    sampler.set_state(x1)
    rows = sampler.transition_probabilities()
    assert torch.equal(rows.sum(1) > 0, torch.ones(chains, dtype=torch.bool))
    assert rows[:, code].min() > 0  # a block update may always stay
    sampler.step(1)
    law = rows.mean(0).numpy()
    run = empirical(state_codes(sampler.x), 2**n)
    assert tv(run, law) < tv_tolerance(np.count_nonzero(law), chains)


def test_shuffled_blocks_walk_a_fresh_permutation_per_chain_and_sweep():
    sampler = BlockGibbsSampler(random_mrf(7, 0), 50, block_size=3, blocks="shuffled")
    sweeps = []
    for _ in range(2):
        steps = []
        for _ in range(3):  # blocks of 3 over 7 sites: the third wraps round
            sampler.step(1)
            steps.append(sampler.last_proposal["sites"])
        sweeps.append(torch.cat(steps, 1))  # [B, 9]
    for sites in sweeps:
        assert all(sorted(row[:7].tolist()) == list(range(7)) for row in sites)
        assert torch.equal(sites[:, 7:], sites[:, :2])
        assert len({tuple(row.tolist()) for row in sites}) > 40  # chains shuffle apart
    assert not torch.equal(sweeps[0], sweeps[1])


def test_the_draw_never_picks_a_zero_weight_and_follows_the_weights():
    log_w = torch.tensor([[-math.inf, 0.0, -math.inf, math.log(3.0), -math.inf]] * 4)
    u = torch.tensor([0.0, 0.25, 0.2501, 1.0])
    assert draw_index(weights_of(log_w), u).tolist() == [1, 1, 3, 3]
    # a CDF rounded unevenly (as a parallel scan may) still never reaches a zero weight
    w = torch.tensor([[0.0, 0.5, 0.5, 0.0]] * 2)
    assert draw_index(w, torch.tensor([0.0, 1.0])).tolist() == [1, 2]


# ----------------------------------------------------------------- mechanics
@pytest.mark.parametrize(
    ("name", "options"),
    [
        REVERSIBLE[2],
        REVERSIBLE[4],
        SWEEPS[1],
        ("block-gibbs", dict(block_size=3, blocks="shuffled")),
    ],
)
def test_one_seed_gives_the_same_chains(name, options):
    target = random_mrf(8, 1)
    runs = []
    for seed in (11, 11, 12):
        sampler = CLASSES[name](target, 16, seed=seed, **options)
        sampler.step(25)
        runs.append(sampler.x.clone())
    assert torch.equal(runs[0], runs[1])
    assert not torch.equal(runs[0], runs[2])


def test_chunked_scoring_and_per_chain_targets_agree_with_direct_evaluation(monkeypatch):
    generator = torch.Generator().manual_seed(0)
    b, n, k = 5, 7, 4
    h = torch.randn(b, n, generator=generator, dtype=torch.float64)  # one field per chain
    target = random_mrf(n, 2)
    per_chain = PairwiseMRF(h, target.J)
    x = 2.0 * torch.randint(0, 2, (b, n), generator=generator).double() - 1.0
    sites = torch.rand(b, n, generator=generator).argsort(1)[:, :k]
    flips = block_gibbs.flip_patterns(k)
    for model in (target, per_chain):
        direct = torch.stack(
            [model.log_prob(block_gibbs.with_block(x, sites, f.expand(b, k))) for f in flips], 1
        )
        torch.testing.assert_close(block_log_probs(model, x, sites, flips), direct)
        monkeypatch.setattr(block_gibbs, "MAX_CANDIDATE_VALUES", 3 * b * n)  # chunks of 3
        torch.testing.assert_close(block_log_probs(model, x, sites, flips), direct)
        monkeypatch.undo()


def test_the_sweep_visits_every_site_in_consecutive_wrapped_blocks():
    sampler = BlockGibbsSampler(random_mrf(7, 0), 3, block_size=3, blocks="sweep")
    assert [b.tolist() for b in sampler.sweep_blocks] == [[0, 1, 2], [3, 4, 5], [6, 0, 1]]
    seen = []
    for _ in range(4):
        sampler.step(1)
        seen.append(sampler.last_proposal["sites"][0].tolist())
    assert seen == [[0, 1, 2], [3, 4, 5], [6, 0, 1], [0, 1, 2]]
    assert sampler.sites_per_step == 3


def test_random_blocks_are_distinct_sites():
    sampler = BlockGibbsSampler(random_mrf(9, 0), 200, block_size=4)
    sampler.step(1)
    sites = sampler.last_proposal["sites"]
    assert all(len(set(row.tolist())) == 4 for row in sites)
    assert set(sites.view(-1).tolist()) == set(range(9))


# ----------------------------------------------------------------- evaluations
@pytest.mark.parametrize("k", [1, 2, 4, 10])
def test_block_gibbs_scores_two_to_the_k_states_per_step(k):
    sampler = BlockGibbsSampler(random_mrf(10, 0), 3, block_size=k)
    before = sampler.n_target_evals
    sampler.step(5)
    assert sampler.evals_per_step == 2**k
    assert sampler.n_target_evals - before == 5 * 2**k


@pytest.mark.parametrize(("r", "ball", "paper"), [(1, 11, 20), (2, 56, 180), (3, 176, 960)])
def test_hamming_ball_counts_the_ball_and_knows_the_papers_count(r, ball, paper):
    """HB-10-r scores the ``sum_{j <= r} C(10, j)`` states of the ball around ``u``; the paper's
    Table 4 counts ``C(10, r) 2^r``."""
    sampler = HammingBallSampler(random_mrf(12, 0), 3, block_size=10, radius=r)
    before = sampler.n_target_evals
    sampler.step(2)
    assert (sampler.evals_per_step, sampler.paper_evals_per_step) == (ball, paper)
    assert sampler.ball_size == sum(math.comb(10, j) for j in range(r + 1))
    assert sampler.n_target_evals - before == 2 * ball


# ----------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(block_size=0), "block_size must be an integer between 1 and 12, got 0"),
        (dict(block_size=13), "block_size must be an integer between 1 and 12, got 13"),
        (dict(block_size=True), "block_size must be an integer between 1 and 12, got True"),
        (dict(block_size="2"), "block_size must be an integer between 1 and 12, got '2'"),
        (dict(block_size=7), r"block_size must be at most the number of sites \(6\), got 7"),
        (
            dict(blocks="shuffle"),
            r"blocks must be one of \('random', 'sweep', 'shuffled'\), got 'shuffle'",
        ),
    ],
)
def test_block_gibbs_refuses_bad_options_in_a_sentence(options, message):
    with pytest.raises(ValueError, match=message):
        BlockGibbsSampler(random_mrf(6, 0), 2, **options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(block_size=3, radius=0), "radius must be an integer >= 1, got 0"),
        (dict(block_size=3, radius=4), r"radius must be between 1 and block_size \(3\), got 4"),
        (dict(block_size=3, radius=1.0), "radius must be an integer >= 1, got 1.0"),
        (dict(block_size=20), "block_size must be an integer between 1 and 12, got 20"),
    ],
)
def test_hamming_ball_refuses_bad_options_in_a_sentence(options, message):
    with pytest.raises(ValueError, match=message):
        HammingBallSampler(random_mrf(6, 0), 2, **options)


def test_exact_helpers_refuse_what_they_cannot_enumerate():
    big = BlockGibbsSampler(random_mrf(13, 0), 2, block_size=2)
    with pytest.raises(ValueError, match="at most 12 sites, got 13"):
        big.transition_probabilities()
    with pytest.raises(ValueError, match='block= picks a block of blocks="sweep", not of'):
        BlockGibbsSampler(random_mrf(4, 0), 2).transition_probabilities(block=0)
    with pytest.raises(ValueError, match=r"block must be an integer between 0 and 1, got 2"):
        BlockGibbsSampler(random_mrf(4, 0), 2, blocks="sweep").transition_probabilities(2)
    with pytest.raises(ValueError, match='block_sweep_matrix is for blocks="sweep"'):
        block_sweep_matrix(random_mrf(4, 0), "block-gibbs", block_size=2)
    with pytest.raises(ValueError, match="name must be one of"):
        block_step_matrix(random_mrf(4, 0), "gibbs")
