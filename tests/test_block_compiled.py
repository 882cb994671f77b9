"""Compiled block moves on pairwise targets (``lsbcore.backends.block_kernels``, issue 45): block
Gibbs and the Hamming ball sampler give the torch step's chains on sweep and shuffled blocks,
the exact one-step law on random blocks, and keep ``log p~`` and the counters exact."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from lsbcore.backends import block_kernels
from lsbcore.exact.states import all_states
from lsbcore.samplers.registry import make_sampler
from tests.block_steps_support import (
    assert_groups_give_one_calls_run,
    assert_past_a_tile_like_torch,
)
from tests.test_block_local_scores import ising, random_mrf
from tests.test_rbm_kernels import quadrature_uniforms

pytestmark = pytest.mark.usefixtures("single_thread")

TARGETS = {
    "mrf": lambda: random_mrf(9, 0),
    "mrf, a field per chain": lambda: random_mrf(9, 1, chains=12),
    "ising free": lambda: ising(4, 5, "free", False, 2),
    "ising periodic, edge scale": lambda: ising(4, 4, "periodic", True, 3),
    "ising 2-wide torus (a multigraph)": lambda: ising(2, 5, "periodic", True, 4),
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
    """The same uniforms, read the same way: the same states, also when the backends take
    turns within a sweep."""
    name, options = SAMPLERS[sampler]
    model = TARGETS[target]()
    options = dict(options, blocks=blocks, resync_every=37)
    torch_run = make_sampler(name, model, 12, seed=3, backend="torch", **options)
    compiled = make_sampler(name, model, 12, seed=3, backend="compiled", **options)
    torch_run.step(80)
    compiled.step(7)
    compiled.set_backend("torch")
    compiled.step(3)
    compiled.set_backend("compiled")
    compiled.step(70)
    assert torch.equal(compiled.x, torch_run.x)
    assert torch.allclose(compiled.log_p, torch_run.log_p, rtol=0, atol=1e-9)
    assert compiled.n_accepted == torch_run.n_accepted > 0
    assert torch.equal(compiled.last_proposal["sites"], torch_run.last_proposal["sites"])
    assert torch.equal(compiled.last_proposal["accepted"], torch_run.last_proposal["accepted"])
    assert torch.allclose(
        compiled.last_proposal["accept_prob"], torch_run.last_proposal["accept_prob"], atol=1e-9
    )
    assert compiled.invariant_error() < 1e-10


def kernel_law(sampler, x: torch.Tensor, grid: int) -> torch.Tensor:
    """The compiled step's law from ``x`` over state codes by quadrature
    (``tests/test_rbm_kernels.quadrature_uniforms``)."""
    n, k = sampler.n_sites, sampler.block_size
    candidates = sampler._candidates().numpy()
    u, layout = quadrature_uniforms(sampler, grid)
    chains = len(u) // (k + sampler._aux + 1)
    states = np.repeat(x.numpy()[None], chains, axis=0)
    s = sampler.target.flip_log_ratios(torch.from_numpy(states)).numpy().copy()
    log_p = np.zeros(chains)
    accepted = np.zeros(chains, np.int64)
    block_kernels.pairwise_block_steps(
        states, s, log_p, accepted, u, layout, 0, np.zeros((1, k), np.int64),
        np.zeros((1, chains, n), np.int64), candidates, sampler._aux, *sampler._pairwise_tables(),
        np.empty((chains, k), np.int64), np.empty((2, chains)), np.zeros((0, chains, 5)),
        np.zeros(n),
    )  # fmt: skip
    after = torch.from_numpy(states)
    # log p~, the log-ratios and the counts moved with each chain: exact for the state reached
    exact = sampler.target.log_prob(after) - sampler.target.log_prob(x[None])
    assert np.allclose(log_p, exact.numpy(), atol=1e-10)
    assert np.allclose(s, sampler.target.flip_log_ratios(after).numpy(), atol=1e-10)
    assert np.array_equal(accepted, (after != x[None]).sum(1).numpy())
    codes = ((after > 0).long() << torch.arange(n)).sum(1)
    return torch.bincount(codes, minlength=2**n).double() / chains


@pytest.mark.parametrize(
    ("name", "options", "grid"),
    [
        ("block-gibbs", {"block_size": 2}, 2000),
        ("block-gibbs", {"block_size": 3}, 200),
        ("hamming-ball", {"block_size": 3, "radius": 1}, 200),
        ("hamming-ball", {"block_size": 3, "radius": 2}, 100),
    ],
)
@pytest.mark.parametrize("target", ["mrf", "ising 2-wide torus (a multigraph)"])
def test_random_blocks_have_the_exact_one_step_law(name, options, grid, target):
    """Against ``transition_probabilities`` (the torch step's law, itself checked against
    enumeration in ``test_block_samplers``)."""
    model = TARGETS[target]()
    n = model.n_sites
    starts = all_states(n)[torch.tensor([0, 101, 2**n - 1])]
    exact = make_sampler(name, model, 3, x0=starts, backend="torch", **options)
    rows = exact.transition_probabilities()
    compiled = make_sampler(name, model, 1, backend="compiled", **options)
    for row, x in zip(rows, starts, strict=True):
        law = kernel_law(compiled, x, grid)
        assert float((law - row).abs().max()) <= 1.0 / grid + 1e-12
        assert float(law.sum()) == pytest.approx(1.0)


def test_random_blocks_drawn_part_by_part_have_the_exact_one_step_law():
    """Four sites of a 3 x 3 lattice fall into one to four connected parts: each part is drawn
    on its own from the one uniform, and the block's law is still the product's."""
    model = ising(3, 3, "free", True, 5)
    starts = all_states(9)[torch.tensor([0, 77, 300])]
    rows = make_sampler("block-gibbs", model, 3, x0=starts, backend="torch", block_size=4)
    compiled = make_sampler("block-gibbs", model, 1, backend="compiled", block_size=4)
    for row, x in zip(rows.transition_probabilities(), starts, strict=True):
        law = kernel_law(compiled, x, 100)
        assert float((law - row).abs().max()) <= 1.0 / 100 + 1e-12


APART = {  # lattices where some blocks' sites lie farther apart than any two neighbours
    "chain of 10, free": lambda: ising(1, 10, "free", True, 6),
    "torus 3 x 4": lambda: ising(3, 4, "periodic", True, 8),
}


@pytest.mark.parametrize(
    ("name", "options", "grid"),
    [
        ("block-gibbs", {"block_size": 3}, 1000),
        ("hamming-ball", {"block_size": 3, "radius": 1}, 250),
    ],
)
@pytest.mark.parametrize("target", APART)
def test_blocks_whose_sites_lie_apart_keep_the_exact_one_step_law(name, options, grid, target):
    """A block with no two sites within the target's reach skips its coupling terms (and
    block Gibbs draws its sites one by one): on these lattices most blocks are such and the
    rest are not, so both ways are in the law."""
    model = APART[target]()
    n = model.n_sites
    compiled = make_sampler(name, model, 1, backend="compiled", **options)
    reach = compiled._pairwise_tables()[2]
    assert 0 < reach < n // 2 - 1
    starts = all_states(n)[torch.tensor([0, 345, 2**n - 1])]
    rows = make_sampler(name, model, 3, x0=starts, backend="torch", **options)
    for row, x in zip(rows.transition_probabilities(), starts, strict=True):
        law = kernel_law(compiled, x, grid)
        assert float((law - row).abs().max()) <= 1.0 / grid + 1e-12


@pytest.mark.parametrize(
    ("height", "width", "boundary", "reach"),
    [(4, 5, "free", 5), (3, 4, "periodic", 4), (1, 10, "free", 1), (2, 5, "periodic", 5)],
)
def test_the_reach_is_the_lattice_width_on_the_ring_of_sites(height, width, boundary, reach):
    """Row by row, a site's farthest neighbour is the one below it; a periodic lattice's
    wrapped neighbours are near on the ring (the last row's below is the first row's)."""
    model = ising(height, width, boundary, False, 0)
    assert block_kernels.neighbour_reach(model.neighbourhood.numpy()) == reach


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_random_blocks_keep_log_p_and_the_counters(sampler):
    name, options = SAMPLERS[sampler]
    model = ising(12, 12, "free", True, 7, chains=6)
    run = make_sampler(name, model, 6, seed=2, resync_every=10**6, **options)
    assert run.backend == "compiled"
    before = run.x.clone()
    run.step(1)
    assert run.n_accepted == int((run.x != before).sum())
    assert torch.equal(run.last_proposal["accepted"], (run.x != before).flatten(1).any(1))
    run.step(400)
    assert run.invariant_error() < 1e-10
    assert run.n_target_evals == 1 + 401 * run.evals_per_step
    assert 0 < run.accept_rate < 1


def test_the_compiled_block_steps_serve_pairwise_targets_on_the_cpu_only():
    model = random_mrf(6, 0)
    assert make_sampler("block-gibbs", model, 2).backend == "compiled"
    assert make_sampler("hamming-ball", model, 2, block_size=4).backend == "compiled"
    assert make_sampler("block-gibbs", model, 2, backend="torch").backend == "torch"


@pytest.mark.parametrize("sampler", ["block-gibbs 2", "hamming-ball 4 1"])
def test_the_flip_ratios_kept_between_calls_give_the_torch_chains(sampler):
    """Each call starts from the flip log-ratios the last one left (not recomputed, O(n) a
    call): many short calls, a torch step and a new state set between two of them
    give the torch step's chains, and what is kept is the target's ratios at the chains'
    states."""
    from lsbcore.samplers.factor_graph_kernel import still_kept

    name, options = SAMPLERS[sampler]
    model = ising(4, 5, "periodic", True, 5)
    options = dict(options, blocks="sweep", resync_every=10**6)
    torch_run = make_sampler(name, model, 7, seed=1, backend="torch", **options)
    compiled = make_sampler(name, model, 7, seed=1, backend="compiled", **options)
    y = torch.where(
        torch.rand(7, 4, 5, generator=torch.Generator().manual_seed(9)) < 0.5, -1.0, 1.0
    )
    states = []
    for run, calls in ((torch_run, (31,)), (compiled, (1, 2, 5, 1, 13, 9))):
        for n in calls:
            run.step(n)
        states.append(run.x.clone())
        run.set_state(y)
        for at, n in enumerate(calls[::-1]):
            run.set_backend("torch" if run is torch_run or at == 2 else "compiled")
            run.step(n)  # the compiled run's third call after y a torch step: it moves x
        assert run.n_steps == 62
    assert torch.equal(states[0], states[1])
    assert torch.equal(compiled.x, torch_run.x)
    assert torch.allclose(compiled.log_p, torch_run.log_p, rtol=0, atol=1e-9)
    kept = still_kept(compiled, "_flip_ratios_of")
    assert kept is not None
    exact = model.flip_log_ratios(compiled._x)
    assert torch.allclose(kept[0], exact, rtol=0, atol=1e-10)


@pytest.mark.parametrize(("n", "k"), [(7, 3), (6, 4), (5, 5), (9, 2)])
def test_floyd_picks_give_every_block_once_per_order(n, k):
    """Uniform ``j`` at the centres of ``n - j`` cells, as ``pick_block`` reads them: each
    ``k``-subset comes out ``k!`` times (the block moves' law depends on the set alone), and
    the picks say "apart" exactly where no two of the first picks lie within the reach at a
    difference of coupled sites (a free chain's ends do, on the ring), so never where two are
    coupled or one repeats."""
    model = ising(1, n, "free", False, 0)  # a chain: sites i and i + 1 coupled
    neighbours = model.neighbourhood.numpy()
    reach = block_kernels.neighbour_reach(neighbours)
    offsets = block_kernels.neighbour_offsets(neighbours)
    sites = np.empty(k, np.int64)
    counts: dict[tuple, int] = {}
    for cells in itertools.product(*(range(n - j) for j in range(k))):
        u = np.array([(r + 0.5) / (n - j) for j, r in enumerate(cells)])
        apart = block_kernels.pick_apart(u, 0, n, k, reach, offsets, sites)
        assert len(set(sites.tolist())) == k
        coupled = any(abs(int(a) - int(c)) == 1 for a, c in itertools.combinations(sites, 2))
        first = [int(u[k - 1 - t] * (n - k + t + 1)) for t in range(k)]  # Floyd's, raw
        maybe = any(
            min(abs(a - c), n - abs(a - c)) <= reach and offsets[(c - a) % n]
            for a, c in itertools.combinations(first, 2)
        )  # a repeat included: offset 0
        assert apart == (not maybe)
        if coupled or len(set(first)) < k:
            assert not apart
        key = tuple(sorted(sites.tolist()))
        counts[key] = counts.get(key, 0) + 1
    assert sorted(counts) == list(itertools.combinations(range(n), k))
    assert set(counts.values()) == {math.factorial(k)}


@pytest.mark.parametrize(
    ("height", "width", "boundary"), [(3, 4, "periodic"), (4, 5, "free"), (2, 5, "periodic")]
)
def test_the_offsets_are_the_differences_of_coupled_sites(height, width, boundary):
    """True at ``(j - i) mod n`` for every coupled pair and at 0, nowhere else: two sites whose
    difference is not one are not neighbours."""
    model = ising(height, width, boundary, False, 0)
    neighbours = model.neighbourhood.numpy()
    n = model.n_sites
    offsets = block_kernels.neighbour_offsets(neighbours)
    coupled = {(int(i), int(j)) for i, j in model.edges.tolist()}
    expected = {0} | {(j - i) % n for i, j in coupled} | {(i - j) % n for i, j in coupled}
    assert set(np.flatnonzero(offsets).tolist()) == expected


@pytest.mark.parametrize("sampler", ["block-gibbs 4", "hamming-ball 4 1"])
@pytest.mark.parametrize("blocks", ["random", "shuffled"])
def test_chains_in_groups_on_threads_are_the_chains_of_one_call(monkeypatch, sampler, blocks):
    """A long call runs groups of chains in parallel threads (``threads.run_grouped``), each
    group stepping through tiles of ``STEP_TILE`` steps: the states, ``log p~``, counters,
    last blocks and trace rows equal one thread's."""
    name, options = SAMPLERS[sampler]
    model = ising(6, 7, "periodic", True, 3)
    options = dict(options, blocks=blocks, resync_every=10**6)
    grouped = assert_groups_give_one_calls_run(
        monkeypatch, lambda: make_sampler(name, model, 5, seed=4, **options)
    )
    assert grouped.invariant_error() < 1e-10


@pytest.mark.parametrize("blocks", ["sweep", "shuffled"])
def test_calls_longer_than_a_tile_give_the_torch_chains(blocks):
    """Steps in tiles: each chain's sweep position, order and running sums carry from one tile
    to the next (a torch run of as many steps, one call each)."""
    model = ising(4, 5, "periodic", True, 5)
    options = dict(block_size=3, blocks=blocks, resync_every=10**6)
    assert_past_a_tile_like_torch(
        lambda backend: make_sampler("block-gibbs", model, 6, seed=8, backend=backend, **options)
    )


@pytest.mark.parametrize("target", ["mrf, a field per chain", "ising periodic, edge scale"])
def test_a_resync_computes_log_p_and_the_flip_ratios_in_one_pass_to_the_bit(target):
    """``log_prob_and_flip_log_ratios`` gives ``log_prob`` and ``flip_log_ratios`` exactly, and
    a block sampler's resync starts its next call from those ratios."""
    model = TARGETS[target]()
    x = torch.where(torch.rand(12, model.n_sites, generator=torch.Generator().manual_seed(1))
                    < 0.5, -1.0, 1.0)  # fmt: skip
    log_p, s = model.log_prob_and_flip_log_ratios(x)
    assert torch.equal(log_p, model.log_prob(x))
    assert torch.equal(s, model.flip_log_ratios(x))
    from lsbcore.samplers.factor_graph_kernel import still_kept

    run = make_sampler("block-gibbs", model, 12, x0=x, block_size=2, resync_every=25)
    run.step(50)  # a resync after 25 steps and after 50
    kept = still_kept(run, "_flip_ratios_of")
    assert kept is not None and run.steps_to_resync == 25
    flat = run.x.reshape(12, -1)
    assert torch.equal(kept[0], model.flip_log_ratios(flat))
    assert torch.equal(run.log_p, model.log_prob(run.x))
    run.step(10)  # from the kept ratios, moved with the chains
    flat = run.x.reshape(12, -1)
    assert torch.allclose(still_kept(run, "_flip_ratios_of")[0], model.flip_log_ratios(flat))
