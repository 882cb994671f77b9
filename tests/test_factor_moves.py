"""A factor graph rescores a move from the factors it touches only (issue 45, item 1): the
incremental log-ratios and move scores equal a full recomputation, hard zeros included, and the
samplers' chains are those of the full recomputation."""

from __future__ import annotations

import math

import pytest
import torch

from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.factor_graph import FactorGraph, _log_ratio
from lsbcore.targets.grid_network import grid_network


def random_graph(n: int, seed: int, zeros: float) -> FactorGraph:
    """Factors of arity 1 to 3 (and a constant) over random variables; a share ``zeros`` of the
    entries is -inf."""
    g = torch.Generator().manual_seed(seed)
    scopes, tables = [[]], [torch.randn(1, generator=g, dtype=torch.float64)]
    for _ in range(3 * n):
        k = int(torch.randint(1, 4, (1,), generator=g))
        scopes.append(torch.randperm(n, generator=g)[:k].tolist())
        table = torch.randn(2**k, generator=g, dtype=torch.float64)
        table[torch.rand(2**k, generator=g) < zeros] = -math.inf
        tables.append(table)
    return FactorGraph(n, scopes, tables)


def forbid_full_passes(graph: FactorGraph) -> None:
    """Make any rescoring of the whole network fail: what follows reads touched factors only."""

    def refuse(*_):
        raise AssertionError("the whole network was rescored for a move of a few sites")

    graph._scores = graph._flip_scores = refuse


def assert_same_ratios(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal infinities, finite values equal to float64 rounding."""
    assert torch.equal(torch.isposinf(got), torch.isposinf(want))
    assert torch.equal(torch.isneginf(got), torch.isneginf(want))
    finite = torch.isfinite(want)
    assert torch.allclose(got[finite], want[finite], rtol=0.0, atol=1e-9)


@pytest.mark.parametrize("zeros", [0.0, 0.15])
def test_incremental_ratios_equal_a_full_recomputation_after_many_multi_site_moves(zeros):
    n, chains = 40, 6
    graph = random_graph(n, seed=3, zeros=zeros)
    reference = random_graph(n, seed=3, zeros=zeros)  # the same network, rescored in full
    g = torch.Generator().manual_seed(4)
    x = (2 * torch.randint(0, 2, (chains, n), generator=g) - 1).to(torch.float64)
    cache = graph.ratio_cache(x)
    s = reference.flip_log_ratios(x)
    forbid_full_passes(graph)
    seen_zero_mass = False
    for _ in range(300):
        # 0 to 4 sites per chain, different per chain (a chain may stay)
        flips = (
            torch.rand(chains, n, generator=g) < torch.randint(0, 5, (chains, 1), generator=g) / n
        )
        x_new = torch.where(flips, -x, x)
        assert_same_ratios(graph.log_ratio(x, x_new), reference.log_ratio(x, x_new))
        s, cache = graph.flip_log_ratios_after(x, x_new, s, cache)
        assert_same_ratios(s, reference.flip_log_ratios(x_new))
        seen_zero_mass |= bool(torch.isneginf(reference.log_prob(x_new)).any())
        x = x_new
    assert seen_zero_mass == (zeros > 0)  # the zero-mass rules were exercised where there are zeros


def test_a_move_of_many_sites_is_rescored_in_full_and_stays_exact():
    graph = random_graph(30, seed=5, zeros=0.1)
    g = torch.Generator().manual_seed(5)
    x = (2 * torch.randint(0, 2, (4, 30), generator=g) - 1).to(torch.float64)
    x_new = -x  # every site changed
    s, _ = graph.flip_log_ratios_after(x, x_new, graph.flip_log_ratios(x), graph.ratio_cache(x))
    assert_same_ratios(s, graph.flip_log_ratios(x_new))
    want = graph.log_prob(x_new) - graph.log_prob(x)
    finite = torch.isfinite(want)
    assert torch.allclose(graph.log_ratio(x, x_new)[finite], want[finite], atol=1e-9)


class FullRescoring(FactorGraph):
    """The same network scored as before issue 45: every move rescores the whole network."""

    def ratio_cache(self, x):
        return None

    def flip_log_ratios_after(self, x_old, x_new, s_old, cache):
        return self.flip_log_ratios(x_new), cache

    def log_ratio(self, x, x_new):
        return _full_log_ratio(self, x, x_new)


def _full_log_ratio(graph: FactorGraph, x, x_new):
    finite, zeros = graph._scores(graph._flat(x))
    finite_new, zeros_new = graph._scores(graph._flat(x_new))
    return _log_ratio(finite_new - finite, zeros, zeros_new)


@pytest.mark.parametrize("sampler", ["gibbs", "metropolis", "barker", "sqrt"])
@pytest.mark.parametrize("epsilon", [1e-3, 0.0])
def test_the_single_site_samplers_chains_are_those_of_a_full_rescoring(sampler, epsilon):
    graph = grid_network(6, 0.5, seed=2, epsilon=epsilon)
    full = FullRescoring(graph.n_variables, graph.scopes, graph.log_tables, graph.shape)
    runs = []
    for target in (graph, full):
        s = make_sampler(sampler, target, 5, seed=11, backend="torch")
        s.step(400)
        runs.append((s.x.clone(), s.log_p.clone(), s._n_accepted.clone()))
    (x, log_p, accepted), (x_full, log_p_full, accepted_full) = runs
    assert torch.equal(x, x_full)
    assert torch.equal(accepted, accepted_full)
    assert int(accepted.sum()) > 0
    assert torch.allclose(log_p, log_p_full, rtol=0.0, atol=1e-9)


@pytest.mark.parametrize("sampler", ["gibbs", "metropolis"])
@pytest.mark.parametrize("epsilon", [1e-3, 0.0])
def test_compiled_single_site_steps_give_the_torch_steps_chains(sampler, epsilon):
    graph = grid_network(6, 0.5, seed=2, epsilon=epsilon)
    runs = []
    for backend in ("compiled", "torch"):
        s = make_sampler(sampler, graph, 5, seed=11, backend=backend, resync_every=150)
        assert s.backend == backend
        s.step(400)
        info = s.step_info
        runs.append((s.x.clone(), s.log_p.clone(), s._n_accepted.clone(), info))
        assert s.invariant_error() < 1e-9
    (x, log_p, accepted, info), (x_t, log_p_t, accepted_t, info_t) = runs
    assert torch.equal(x, x_t)
    assert torch.equal(accepted, accepted_t)
    assert int(accepted.sum()) > 0
    assert torch.allclose(log_p, log_p_t, rtol=0.0, atol=1e-9)
    assert torch.equal(info.site, info_t.site)
    assert torch.equal(info.accepted, info_t.accepted)
    assert torch.allclose(info.accept_prob, info_t.accept_prob, rtol=1e-12, atol=0.0)


def test_auto_picks_the_compiled_steps_for_gibbs_on_a_factor_graph_on_the_cpu():
    graph = grid_network(4, 0.5, seed=0)
    assert make_sampler("gibbs", graph, 2, backend="auto").backend == "compiled"
    # and Gibbs with Gradients (test_factor_learning_compiled.py)
    assert make_sampler("gwg", graph, 2, backend="auto").backend == "compiled"


@pytest.mark.parametrize("zeros", [0.0, 0.15])
def test_the_compiled_flip_parts_are_the_targets_ratio_cache(zeros):
    """``factor_kernels.flip_scores``, which the compiled single-site steps keep between calls,
    equals the target's own ratio cache (hard zeros included)."""
    import numpy as np

    from lsbcore.backends.factor_kernels import flip_scores
    from lsbcore.samplers.factor_graph_kernel import factor_tables

    graph = random_graph(8, 5, zeros) if zeros else grid_network(6, 0.5, seed=3)
    sampler = make_sampler("gibbs", graph, 7, seed=5)
    x = torch.where(torch.rand(7, graph.n_sites, generator=torch.Generator().manual_seed(2)) < 0.5,
                    -1.0, 1.0).double()  # fmt: skip
    d_finite, d_zeros = np.empty(x.shape), np.empty(x.shape)
    flip_scores(x.numpy(), factor_tables(sampler), d_finite, d_zeros)
    want_finite, want_zeros, _ = graph.ratio_cache(x)
    assert torch.allclose(torch.from_numpy(d_finite), want_finite, rtol=0.0, atol=1e-12)
    assert torch.equal(torch.from_numpy(d_zeros), want_zeros.double())
    assert float(torch.from_numpy(d_zeros).abs().sum()) > 0 or not zeros


@pytest.mark.parametrize("sampler", ["gibbs", "metropolis"])
def test_compiled_single_site_steps_keep_their_flip_parts_between_calls(sampler):
    """Calls of a few steps, a resync and a torch step between them: the kept flip parts are
    reused only while they describe the chains, and the chains stay the torch steps'."""
    graph = grid_network(6, 0.5, seed=2, epsilon=0.0)
    torch_run = make_sampler(sampler, graph, 5, seed=11, backend="torch", resync_every=120)
    compiled = make_sampler(sampler, graph, 5, seed=11, backend="compiled", resync_every=120)
    torch_run.step(300)
    for n in (1, 7, 42, 90):
        compiled.step(n)
    compiled.set_backend("torch")
    compiled.step(10)
    compiled.set_backend("compiled")
    compiled.step(150)
    assert torch.equal(compiled.x, torch_run.x)
    assert torch.allclose(compiled.log_p, torch_run.log_p, rtol=0.0, atol=1e-9)
    assert compiled.n_accepted == torch_run.n_accepted > 0
    kept = compiled._flip_parts()
    want_finite, want_zeros, _ = graph.ratio_cache(compiled._x)
    assert torch.allclose(torch.from_numpy(kept[0]), want_finite, rtol=0.0, atol=1e-9)
    assert torch.equal(torch.from_numpy(kept[1]), want_zeros.double())
