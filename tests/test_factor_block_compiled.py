"""Compiled block moves on factor graphs (``lsbcore.backends.factor_block_kernels``, issue 45
item 2): block Gibbs and the Hamming ball sampler give the torch step's chains on sweep and
shuffled blocks, the exact one-step law on random blocks (hard zeros included), and keep
``log p~`` and the counters exact."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore.backends.factor_block_kernels import factor_block_steps
from lsbcore.exact.states import all_states
from lsbcore.samplers.factor_graph_kernel import factor_tables
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.factor_graph import FactorGraph
from lsbcore.targets.grid_network import grid_network
from tests.block_steps_support import (
    assert_groups_give_one_calls_run,
    assert_past_a_tile_like_torch,
)
from tests.test_factor_moves import random_graph
from tests.test_rbm_kernels import quadrature_uniforms

pytestmark = pytest.mark.usefixtures("single_thread")


def chain_graph(n: int, seed: int) -> FactorGraph:
    """Pairwise and unary factors along a chain of ``n`` variables, one pair's table with a
    zero entry: most blocks of a few sites have no two sites in one factor."""
    g = torch.Generator().manual_seed(seed)
    scopes = [[v] for v in range(n)] + [[v, v + 1] for v in range(n - 1)]
    tables = [torch.randn(2 ** len(s), generator=g, dtype=torch.float64) for s in scopes]
    tables[n + 2][3] = -math.inf
    return FactorGraph(n, scopes, tables)


TARGETS = {
    "grid network": lambda: grid_network(6, 0.5, seed=2, epsilon=1e-3),
    "grid network, hard zeros": lambda: grid_network(6, 0.5, seed=2, epsilon=0.0),
    "random arities 1-3, zeros": lambda: random_graph(9, 1, 0.05),
}
SAMPLERS = {
    "block-gibbs 2": ("block-gibbs", {"block_size": 2}),
    "block-gibbs 4": ("block-gibbs", {"block_size": 4}),
    "hamming-ball 4 1": ("hamming-ball", {"block_size": 4, "radius": 1}),
    "hamming-ball 5 2": ("hamming-ball", {"block_size": 5, "radius": 2}),
}


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("blocks", ["sweep", "shuffled"])
def test_sweep_blocks_give_the_torch_chains(sampler, target, blocks):
    """The same uniforms read the same way, the candidates scored from the block's factors
    where torch scores whole states: the same chains, a switch of backend midway included."""
    name, options = SAMPLERS[sampler]
    model = TARGETS[target]()
    options = dict(options, blocks=blocks)
    torch_run = make_sampler(name, model, 6, seed=3, backend="torch", **options)
    compiled = make_sampler(name, model, 6, seed=3, backend="compiled", **options)
    assert compiled.backend == "compiled"
    torch_run.step(60)
    compiled.step(7)
    compiled.set_backend("torch")
    compiled.step(3)
    compiled.set_backend("compiled")
    compiled.step(50)
    assert torch.equal(compiled.x, torch_run.x)
    assert torch.allclose(compiled.log_p, torch_run.log_p, rtol=0, atol=1e-9)
    assert compiled.n_accepted == torch_run.n_accepted > 0
    for key in ("sites", "accepted"):
        assert torch.equal(compiled.last_proposal[key], torch_run.last_proposal[key])
    assert torch.allclose(
        compiled.last_proposal["accept_prob"], torch_run.last_proposal["accept_prob"], atol=1e-9
    )
    assert compiled.invariant_error() < 1e-9


def kernel_law(sampler, x: torch.Tensor, grid: int) -> torch.Tensor:
    """The compiled step's law from ``x`` over state codes by quadrature
    (``tests/test_rbm_kernels.quadrature_uniforms``), ``log p~`` and the counts checked
    against the states reached."""
    n, k = sampler.n_sites, sampler.block_size
    u, layout = quadrature_uniforms(sampler, grid)
    chains = len(u) // (k + sampler._aux + 1)
    states = np.repeat(x.numpy()[None], chains, axis=0)
    log_p = np.zeros(chains)
    accepted = np.zeros(chains, np.int64)
    factor_block_steps(
        states, log_p, accepted, u, layout, 0, np.zeros((1, k), np.int64),
        np.zeros((1, chains, n), np.int64), sampler._candidates().numpy(), sampler._aux,
        factor_tables(sampler), np.empty((chains, k), np.int64), np.empty((2, chains)),
        np.zeros((0, chains, 5)), np.zeros(n),
    )  # fmt: skip
    after = torch.from_numpy(states)
    exact = sampler.target.log_prob(after) - sampler.target.log_prob(x[None])
    assert bool(torch.isfinite(exact).all())  # never into zero mass
    assert np.allclose(log_p, exact.numpy(), atol=1e-10)
    assert np.array_equal(accepted, (after != x[None]).sum(1).numpy())
    codes = ((after > 0).long() << torch.arange(n)).sum(1)
    return torch.bincount(codes, minlength=2**n).double() / chains


LAW_TARGETS = {
    "random arities 1-3, zeros": lambda: random_graph(8, 5, 0.15),
    "a chain, a zero": lambda: chain_graph(10, 1),
}


@pytest.mark.parametrize(
    ("name", "options", "grid"),
    [
        ("block-gibbs", {"block_size": 3}, 1000),
        ("hamming-ball", {"block_size": 3, "radius": 1}, 250),
        ("hamming-ball", {"block_size": 3, "radius": 2}, 250),
    ],
)
@pytest.mark.parametrize("target", LAW_TARGETS)
def test_random_blocks_have_the_exact_one_step_law(name, options, grid, target):
    """Against ``transition_probabilities`` (the torch step's law, itself checked against
    enumeration in ``test_block_samplers``), from states of positive mass. Block Gibbs draws
    a block's parts one by one: on the chain most blocks fall apart, on the random graph most
    hold together."""
    model = LAW_TARGETS[target]()
    n = model.n_sites
    every = all_states(n)
    alive = torch.isfinite(model.log_prob(every)).nonzero().flatten()
    starts = every[alive[torch.tensor([0, len(alive) // 2, len(alive) - 1])]]
    rows = make_sampler(name, model, 3, x0=starts, backend="torch", **options)
    compiled = make_sampler(name, model, 1, backend="compiled", **options)
    for row, x in zip(rows.transition_probabilities(), starts, strict=True):
        law = kernel_law(compiled, x, grid)
        assert float((law - row).abs().max()) <= 1.0 / grid + 1e-12


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_random_blocks_keep_log_p_and_the_counters(sampler):
    name, options = SAMPLERS[sampler]
    model = grid_network(10, 0.5, seed=4, epsilon=0.0)
    run = make_sampler(name, model, 6, seed=2, **options)
    assert run.backend == "compiled"
    before = run.x.clone()
    run.step(1)
    assert run.n_accepted == int((run.x != before).sum())
    assert torch.equal(run.last_proposal["accepted"], (run.x != before).flatten(1).any(1))
    run.step(400)
    assert run.invariant_error() < 1e-9
    assert bool(torch.isfinite(model.log_prob(run.x)).all())
    assert run.n_target_evals == 1 + 401 * run.evals_per_step
    assert 0 < run.accept_rate < 1


def test_the_compiled_block_steps_serve_factor_graphs_on_the_cpu_only():
    model = grid_network(4, 0.5, seed=0)
    assert make_sampler("block-gibbs", model, 2).backend == "compiled"
    assert make_sampler("hamming-ball", model, 2, block_size=4).backend == "compiled"
    assert make_sampler("block-gibbs", model, 2, backend="torch").backend == "torch"


def test_the_default_blocks_fit_a_network_smaller_than_them():
    """An uploaded network of 6 variables gets a Hamming ball on all 6 (the paper's 10 cannot
    be drawn), one of 1 variable block Gibbs on its one site; a size asked for is kept, and
    refused with its reason where it does not fit."""
    ring = chain_graph(6, 2)
    ball = make_sampler("hamming-ball", ring, 3, seed=0)
    assert ball.block_size == 6 and ball.backend == "compiled"
    ball.step(50)
    assert ball.invariant_error() < 1e-9
    assert make_sampler("hamming-ball", grid_network(4, 0.5, seed=0), 2).block_size == 10
    assert make_sampler("hamming-ball", ring, 2, block_size=4).block_size == 4
    with pytest.raises(ValueError, match=r"at most the number of sites \(6\), got 10"):
        make_sampler("hamming-ball", ring, 2, block_size=10)
    lone = FactorGraph(1, [[0]], [torch.tensor([0.0, 1.0], dtype=torch.float64)])
    single = make_sampler("block-gibbs", lone, 2, seed=0)
    assert single.block_size == 1
    single.step(20)
    assert make_sampler("block-gibbs", ring, 2).block_size == 2


@pytest.mark.parametrize("name", ["block-gibbs", "hamming-ball"])
def test_a_one_site_block_records_its_marginals_in_a_comparison(name):
    """A one-variable network (an upload) gets one-site blocks: the recording comparison adds
    their states to the marginals (their trace names no site), near p(x = +1) = 0.7."""
    from lsbcore import Comparison

    table = torch.log(torch.tensor([0.3, 0.7], dtype=torch.float64))
    lone = FactorGraph(1, [[0]], [table], (1, 1))  # as an upload is drawn
    comparison = Comparison([name], lone, 8, seed=0, thin=1)
    comparison.step(20)
    comparison.start_mixing()
    comparison.step(2000)
    marginal = comparison.marginals[name].mean()
    assert abs(float(marginal.mean()) - 0.7) < 0.03


@pytest.mark.parametrize("sampler", ["block-gibbs 4", "hamming-ball 4 1"])
@pytest.mark.parametrize("blocks", ["random", "shuffled"])
def test_chains_in_groups_on_threads_are_the_chains_of_one_call(monkeypatch, sampler, blocks):
    """A long call runs groups of chains in parallel threads, each through tiles of steps
    (``block_kernels.STEP_TILE``): the states, ``log p~``, counters, last blocks and trace rows
    equal one thread's."""
    name, options = SAMPLERS[sampler]
    model = TARGETS["grid network, hard zeros"]()
    assert_groups_give_one_calls_run(
        monkeypatch, lambda: make_sampler(name, model, 5, seed=4, blocks=blocks, **options)
    )


def test_calls_longer_than_a_tile_give_the_torch_chains():
    """Each chain's order and running sums carry from one tile of steps to the next."""
    model = TARGETS["grid network"]()
    options = dict(block_size=3, blocks="shuffled")
    assert_past_a_tile_like_torch(
        lambda backend: make_sampler("block-gibbs", model, 6, seed=8, backend=backend, **options)
    )
