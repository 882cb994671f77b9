"""The compiled RBM steps (``lsbcore.backends.rbm_kernels``): ``gwg``, ``gibbs`` and
``metropolis``, and block Gibbs and the Hamming ball sampler on sweeps, give the torch steps'
chains from a seed; on random blocks, which they pick from other uniforms, the block samplers
give the torch steps' one-step law, checked against enumeration by quadrature over their
uniforms with a proven error bound."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from lsbcore.backends import rbm_kernels
from lsbcore.exact.states import all_states
from lsbcore.samplers import batched
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.rbm import RBM
from tests.batched_support import UniformMetropolis
from tests.block_steps_support import assert_past_a_tile_like_torch
from tests.test_target_protocol import TableTarget, random_table
from tests.warm_up_support import after_warm_up

pytestmark = pytest.mark.usefixtures("single_thread")

SINGLE_SITE = ("gwg", "gibbs", "metropolis")
BLOCKS = {
    "block-gibbs": {"block_size": 2},
    "hamming-ball": {"block_size": 10, "radius": 1},
}


def hot_rbm() -> RBM:
    """Weights of scale 20: pre-activations of hundreds, so both branches of the ratio
    ``(1 + t F) / (1 + t)`` and the folding of the running product into its logarithm run."""
    return RBM.random(20, 8, seed=3, scale=20.0)


def run_pair(name, target, steps, seed, **options):
    torch_run = make_sampler(name, target, 30, seed=seed, backend="torch", **options)
    compiled = make_sampler(name, target, 30, seed=seed, backend="compiled", **options)
    torch_run.step(steps)
    compiled.step(steps)
    return torch_run, compiled


@pytest.mark.parametrize("name", SINGLE_SITE)
@pytest.mark.parametrize("target", [RBM.random(100, 25, seed=0), hot_rbm()], ids=["random", "hot"])
def test_single_site_compiled_steps_give_the_torch_chains(name, target):
    for seed in (0, 1, 2):
        # resync_every=37: chunks end where the torch loop resyncs
        torch_run, compiled = run_pair(name, target, 150, seed, resync_every=37)
        assert compiled.backend == "compiled" and torch_run.backend == "torch"
        assert torch.equal(compiled.x, torch_run.x)
        assert torch.allclose(compiled.log_p, torch_run.log_p, rtol=0, atol=1e-9)
        assert compiled.n_accepted == torch_run.n_accepted > 0
        assert (compiled.n_steps, compiled.n_target_evals, compiled.n_site_updates) == (
            torch_run.n_steps,
            torch_run.n_target_evals,
            torch_run.n_site_updates,
        )
        last, expected = compiled.last_proposal, torch_run.last_proposal
        assert torch.equal(last["site"], expected["site"])
        assert torch.equal(last["accepted"], expected["accepted"])
        assert torch.allclose(last["accept_prob"], expected["accept_prob"], atol=1e-9)
        assert compiled.invariant_error() < 1e-10


@pytest.mark.parametrize("name", BLOCKS)
@pytest.mark.parametrize("blocks", ["sweep", "shuffled"])
def test_block_steps_on_sweeps_give_the_torch_chains(name, blocks):
    """Sweep blocks (and "shuffled": each chain's order the argsort of the torch step's
    uniforms) read the torch step's uniforms: the same chains, also when the backends take
    turns within a sweep."""
    target = RBM.random(30, 8, seed=2, scale=1.0)
    options = dict(BLOCKS[name], block_size=4, blocks=blocks, resync_every=23)
    torch_run = make_sampler(name, target, 12, seed=3, backend="torch", **options)
    compiled = make_sampler(name, target, 12, seed=3, backend="compiled", **options)
    torch_run.step(100)
    compiled.step(5)
    compiled.set_backend("torch")
    compiled.step(4)  # the torch step goes on from the compiled steps' position and order
    compiled.set_backend("compiled")
    compiled.step(91)
    assert torch.equal(compiled.x, torch_run.x)
    assert torch.allclose(compiled.log_p, torch_run.log_p, rtol=0, atol=1e-9)
    assert compiled.n_accepted == torch_run.n_accepted > 0
    assert compiled._position == torch_run._position == 100 % len(torch_run.sweep_blocks)
    if blocks == "shuffled":
        assert torch.equal(compiled._order, torch_run._order)
    assert torch.equal(compiled.last_proposal["sites"], torch_run.last_proposal["sites"])
    assert torch.equal(compiled.last_proposal["accepted"], torch_run.last_proposal["accepted"])
    assert compiled.invariant_error() < 1e-10


@pytest.mark.parametrize("name", BLOCKS)
def test_block_steps_in_tiles_and_chain_groups_give_the_torch_chains(monkeypatch, name):
    """A call longer than a tile (``rbm_kernels.STEP_TILE``), its chains in groups on parallel
    threads: each chain's order, hidden units and running sums carry from tile to tile, and
    the groups give the torch step's chains and trace."""
    from lsbcore.backends import threads

    monkeypatch.setattr(threads, "cores", lambda: 3)
    monkeypatch.setattr(threads, "MIN_SITES_PER_GROUP", 1)
    target = RBM.random(30, 8, seed=2, scale=1.0)
    options = dict(BLOCKS[name], block_size=3, blocks="shuffled", resync_every=10**6)
    assert rbm_kernels.STEP_TILE % (30 // 3)  # a tile ends mid-sweep: 10 blocks a sweep
    assert_past_a_tile_like_torch(
        lambda backend: make_sampler(name, target, 7, seed=5, backend=backend, **options), 7
    )


def test_chunks_of_uniforms_do_not_change_the_chains(monkeypatch):
    target = RBM.random(30, 6, seed=1, scale=1.0)
    whole = make_sampler("gwg", target, 10, seed=4, backend="compiled")
    whole.step(90)
    monkeypatch.setattr(batched, "COMPILED_UNIFORMS", 70)  # 3 steps of 10 chains per chunk
    pieces = make_sampler("gwg", target, 10, seed=4, backend="compiled")
    for _ in range(9):
        pieces.step(10)
    assert torch.equal(whole.x, pieces.x)
    assert torch.equal(whole.generator.get_state(), pieces.generator.get_state())


@pytest.mark.parametrize(("n", "k"), [(7, 3), (6, 4), (5, 5)])
def test_pick_block_gives_every_ordered_block_exactly_once(n, k):
    """Uniforms at the centres of the cells ``[r / (n - j), (r + 1) / (n - j))``: each cell
    has the same measure, so the picked ordered blocks are uniform exactly when each ordered
    k-tuple of distinct sites comes out once (``k = n``: a position swapped twice)."""
    sites, swaps = np.empty(k, np.int64), np.empty((2, k), np.int64)
    seen = []
    for cells in itertools.product(*(range(n - j) for j in range(k))):
        picks = set()
        # the centre and both ends of the cell pick the same block: the map is constant on it
        for offset in (0.5, 1e-9, 1.0 - 1e-9):
            u = np.array([(r + offset) / (n - j) for j, r in enumerate(cells)])
            rbm_kernels.pick_block(u, 0, n, k, sites, swaps)
            picks.add(tuple(sites))
        assert len(picks) == 1
        seen.append(picks.pop())
    assert sorted(seen) == sorted(itertools.permutations(range(n), k))


def quadrature_uniforms(sampler, grid: int) -> tuple[np.ndarray, np.ndarray]:
    """One step's uniforms for every ordered block (cell centres, as above), every auxiliary
    index and ``grid`` centres of the candidate draw's uniform, laid out as ``block_layout``
    lays them (blocks, auxiliary indices, draws): ``(u, layout)``, a chain per combination.
    Per block and auxiliary index a candidate's share of the centres is within ``1 / grid`` of
    its probability, so each state's is too."""
    n, k = sampler.n_sites, sampler.block_size
    candidates = sampler._candidates().numpy()
    aux = [(a + 0.5) / len(candidates) for a in range(len(candidates))] if sampler._aux else []
    rows = []
    for cells in itertools.product(*(range(n - j) for j in range(k))):
        block = [(r + 0.5) / (n - j) for j, r in enumerate(cells)]
        for extra in [[a] for a in aux] or [[]]:
            rows.append(block + extra)
    head = np.repeat(np.array(rows), grid, axis=0)  # [B, k + aux]
    draw = np.tile((np.arange(grid) + 0.5) / grid, len(rows))  # [B]
    chains = head.shape[0]
    layout, _, count, _ = rbm_kernels.block_layout(1, chains, n, k, 0, sampler._aux, 0, 1)
    u = np.concatenate([head[:, :k].reshape(-1), head[:, k:].T.reshape(-1), draw])
    assert u.shape == (count,) and list(layout[0, :3]) == (
        [0, chains * k, chains * (k + 1)] if sampler._aux else [0, -1, chains * k]
    )
    return u, layout


def kernel_law(sampler, x: torch.Tensor, grid: int) -> torch.Tensor:
    """The compiled step's law from ``x`` (``[2^n]`` over state codes) by quadrature
    (``quadrature_uniforms``)."""
    n, k = sampler.n_sites, sampler.block_size
    candidates = sampler._candidates().numpy()
    arrays = sampler.target.kernel_arrays()
    u, layout = quadrature_uniforms(sampler, grid)
    chains = len(u) // (k + sampler._aux + 1)
    states = np.repeat(x.numpy()[None], chains, axis=0)
    log_p = np.zeros(chains)
    rbm_kernels.block_steps(
        states, log_p, np.zeros(chains, np.int64), u, layout, 0, np.zeros((1, k), np.int64),
        np.zeros((1, chains, n), np.int64), candidates, sampler._aux, arrays["w_t"],
        arrays["b_vis"], arrays["c"], arrays["exp_w"], arrays["exp_neg_w"],
        np.empty((chains, k), np.int64), np.empty((2, chains)), np.zeros((0, chains, 5)),
        np.zeros(n),
    )  # fmt: skip
    codes = ((torch.from_numpy(states) > 0).long() << torch.arange(n)).sum(1)
    # log p~ moved with each chain: exact for the state it reached
    exact = sampler.target.log_prob(torch.from_numpy(states)) - sampler.target.log_prob(x[None])
    assert np.allclose(log_p, exact.numpy(), atol=1e-10)
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
def test_compiled_block_steps_have_the_exact_one_step_law(name, options, grid):
    """Against ``transition_probabilities`` (the torch step's law, random blocks, itself
    checked against enumeration in ``test_block_samplers``) on a 10-visible RBM."""
    target = RBM.random(10, 4, seed=5, scale=1.5)
    starts = all_states(10)[torch.tensor([0, 345, 1023])]
    exact = make_sampler(name, target, 3, x0=starts, backend="torch", **options)
    rows = exact.transition_probabilities()
    compiled = make_sampler(name, target, 1, backend="compiled", **options)
    for row, x in zip(rows, starts, strict=True):
        law = kernel_law(compiled, x, grid)
        assert float((law - row).abs().max()) <= 1.0 / grid + 1e-12
        assert float(law.sum()) == pytest.approx(1.0)


@pytest.mark.parametrize("name", BLOCKS)
@pytest.mark.parametrize("target", [RBM.random(100, 25, seed=0), hot_rbm()], ids=["random", "hot"])
def test_compiled_block_steps_keep_their_caches_and_counters(name, target):
    sampler = make_sampler(name, target, 20, seed=2, resync_every=5000, **BLOCKS[name])
    assert sampler.backend == "compiled"
    before = sampler.x.clone()
    sampler.step(1)
    changed = int((sampler.x != before).sum())
    assert sampler.n_accepted == changed
    last = sampler.last_proposal
    assert last["sites"].shape == (20, BLOCKS[name]["block_size"])
    assert torch.equal(last["accepted"], (sampler.x != before).any(1))
    assert bool(((last["accept_prob"] >= 0) & (last["accept_prob"] <= 1)).all())
    sampler.step(300)
    assert sampler.invariant_error() < 1e-10
    assert sampler.n_target_evals == 1 + 301 * sampler.evals_per_step
    assert 0 < sampler.accept_rate < 1


def test_backends_resolve_where_the_compiled_steps_serve():
    rbm = RBM.random(12, 3, seed=0)
    assert make_sampler("gwg", rbm, 2).backend == "compiled"
    assert make_sampler("gwg", rbm, 2, backend="torch").backend == "torch"
    assert make_sampler("pas", rbm, 2).backend == "torch"
    with pytest.raises(ValueError, match="serves the pairwise samplers only"):
        make_sampler("dmala", rbm, 2, backend="compiled")
    with pytest.raises(ValueError, match="serves the pairwise samplers only"):
        UniformMetropolis(TableTarget(random_table(4, 3)), 1, backend="compiled")
    sweep = make_sampler("block-gibbs", rbm, 2, block_size=2, blocks="sweep")
    assert sweep.backend == "compiled"
    steep = RBM(torch.full((2, 12), 250.0), torch.zeros(12), torch.zeros(2))
    assert make_sampler("gwg", steep, 2).backend == "compiled"  # 250 <= MAX_SHIFT
    assert make_sampler("block-gibbs", steep, 2, block_size=3).backend == "torch"
    with pytest.raises(ValueError, match="largest |W|"):
        make_sampler("block-gibbs", steep, 2, block_size=3, backend="compiled")
    sampler = make_sampler("gibbs", rbm, 2)
    sampler.set_backend("torch")
    assert sampler.backend == "torch"
    sampler.set_target(RBM.random(12, 3, seed=1))
    assert sampler.backend == "torch"
    sampler.set_backend("auto")
    assert sampler.backend == "compiled"
    assert math.isfinite(sampler.invariant_error())


def test_a_trace_runs_the_torch_steps_of_a_compiled_sampler():
    rbm = RBM.random(12, 3, seed=0)
    compiled = make_sampler("gwg", rbm, 4, seed=1)
    reference = make_sampler("gwg", rbm, 4, seed=1, backend="torch")
    for sampler in (compiled, reference):
        sampler.track_statistics()
        trace = torch.zeros(20, 4, 5, dtype=torch.float64)
        sampler.step(20, trace=trace)
    assert torch.equal(compiled.x, reference.x)
    assert int(trace[:, :, 3].sum()) == reference.n_accepted


def test_the_warm_up_compiles_every_rbm_step():
    """The app's warm-up thread compiles the RBM's steps too: a page's first RBM run does not
    wait for numba (about 2 s). In a fresh process, where nothing else has run them."""
    counts = eval(
        after_warm_up(
            "from lsbcore.backends import rbm_kernels as k; "
            "print([len(f.signatures) for f in (k.gwg_steps, k.uniform_site_steps, "
            "k.block_steps)])"
        )
    )
    assert all(count >= 1 for count in counts), counts
