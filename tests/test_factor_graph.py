"""Factor graphs and grid networks: scores against a direct reading of the tables at every state,
zeros handled exactly (no NaN; a flip into zero mass is -inf), the multilinear gradient, the
search for starting states of positive probability, and every refusal."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from lsbcore.exact.states import all_states
from lsbcore.targets.factor_graph import FactorGraph
from lsbcore.targets.grid_network import grid_network
from tests.batched_support import UniformMetropolis

pytestmark = pytest.mark.usefixtures("single_thread")


def random_graph(n: int = 8, seed: int = 0, zeros: float = 0.0, arities=(0, 1, 2, 3, 4, 2, 3)):
    """Factors of the given arities over random distinct variables; a share ``zeros`` of the
    entries is -inf (probability zero)."""
    g = torch.Generator().manual_seed(seed)
    scopes, tables = [], []
    for k in arities:
        scopes.append(torch.randperm(n, generator=g)[:k].tolist())
        table = torch.randn(2**k, generator=g, dtype=torch.float64)
        table[torch.rand(2**k, generator=g) < zeros] = -math.inf
        tables.append(table)
    return FactorGraph(n, scopes, tables)


def direct_log_prob(graph: FactorGraph, state: list[float]) -> float:
    """The sum of the tables read one by one: the index is the scope's bits written in order,
    the last variable as the lowest bit."""
    total = 0.0
    for scope, table in zip(graph.scopes, graph.log_tables, strict=True):
        bits = "".join("1" if state[v] > 0 else "0" for v in scope)
        total += table[int(bits, 2) if bits else 0].item()
    return total


def flipped(x: torch.Tensor, i: int) -> torch.Tensor:
    y = x.clone()
    y[:, i] *= -1
    return y


# ----------------------------------------------------------------- scores
def test_log_prob_reads_each_table_with_the_last_scope_variable_fastest():
    table = torch.log(torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64))
    graph = FactorGraph(2, [(0, 1)], [table])
    x = torch.tensor([[-1.0, -1.0], [-1.0, 1.0], [1.0, -1.0], [1.0, 1.0]])
    assert torch.allclose(graph.log_prob(x), table)  # (x0, x1) = 00, 01, 10, 11
    reversed_scope = FactorGraph(2, [(1, 0)], [table])
    assert torch.allclose(reversed_scope.log_prob(x), table[[0, 2, 1, 3]])


@pytest.mark.parametrize("zeros", [0.0, 0.25])
def test_log_prob_is_the_sum_of_the_tables_at_every_state(zeros):
    graph = random_graph(zeros=zeros, seed=1)
    x = all_states(8)
    expected = torch.tensor([direct_log_prob(graph, s) for s in x.tolist()], dtype=torch.float64)
    got = graph.log_prob(x)
    assert torch.equal(torch.isneginf(got), torch.isneginf(expected))
    finite = torch.isfinite(expected)
    assert torch.allclose(got[finite], expected[finite], rtol=0, atol=1e-12)
    assert not torch.isnan(got).any()
    if zeros:
        assert 0 < int(finite.sum()) < 256  # both kinds of state occur


def test_flip_log_ratios_are_log_prob_differences_and_minus_inf_into_zero_mass():
    graph = random_graph(zeros=0.25, seed=2)
    x = all_states(8)
    log_p = graph.log_prob(x)
    positive = torch.isfinite(log_p)
    s = graph.flip_log_ratios(x)
    assert not torch.isnan(s).any()
    into_zero = 0
    for i in range(8):
        log_p_flip = graph.log_prob(flipped(x, i))
        expected = log_p_flip[positive] - log_p[positive]  # -inf where the flip has zero mass
        got = s[positive, i]
        assert torch.equal(torch.isneginf(got), torch.isneginf(expected))
        assert torch.allclose(got[torch.isfinite(got)], expected[torch.isfinite(got)], atol=1e-12)
        into_zero += int(torch.isneginf(got).sum())
    assert into_zero > 0 and not torch.isposinf(s[positive]).any()


def test_from_a_state_of_zero_mass_a_flip_out_is_plus_inf_and_one_that_stays_is_zero():
    """The documented rule: 0/0 is read as 1, so no log-ratio is ever NaN."""
    graph = random_graph(zeros=0.25, seed=2)
    x = all_states(8)
    log_p = graph.log_prob(x)
    zero = torch.isneginf(log_p)
    s = graph.flip_log_ratios(x)
    out, stay = 0, 0
    for i in range(8):
        reaches = torch.isfinite(graph.log_prob(flipped(x, i)))
        assert torch.all(s[zero & reaches, i] == math.inf)
        assert torch.all(s[zero & ~reaches, i] == 0.0)
        out += int((zero & reaches).sum())
        stay += int((zero & ~reaches).sum())
        ratio = graph.log_ratio(x, flipped(x, i))
        finite = torch.isfinite(ratio)
        assert torch.equal(ratio[~finite], s[~finite, i])
        assert torch.allclose(ratio[finite], s[finite, i], rtol=0, atol=1e-12)
    assert out > 0 and stay > 0
    odds = graph.conditional_log_odds(x)
    assert not torch.isnan(odds).any()


def test_log_ratio_of_multi_site_moves_and_the_conditional_log_odds():
    graph = random_graph(zeros=0.2, seed=3)
    x = all_states(8)
    positive = torch.isfinite(graph.log_prob(x))
    g = torch.Generator().manual_seed(3)
    x_new = torch.where(torch.rand(256, 8, generator=g) < 0.4, -x, x)
    expected = graph.log_prob(x_new) - graph.log_prob(x)
    got = graph.log_ratio(x, x_new)
    assert torch.equal(torch.isneginf(got[positive]), torch.isneginf(expected[positive]))
    both = positive & torch.isfinite(expected)
    assert torch.allclose(got[both], expected[both], rtol=0, atol=1e-12)
    odds = graph.conditional_log_odds(x)
    for i in range(8):
        up, down = x.clone(), x.clone()
        up[:, i], down[:, i] = 1.0, -1.0
        want = graph.log_prob(up) - graph.log_prob(down)  # +-inf where one value has zero mass
        mask = positive & ~torch.isnan(want)
        assert torch.allclose(odds[mask, i], want[mask], rtol=0, atol=1e-12)


def test_a_constant_factor_adds_its_value_and_a_sampler_sees_no_change_from_it():
    table = torch.tensor([0.3, -1.0], dtype=torch.float64)
    graph = FactorGraph(2, [(), (1,)], [torch.tensor([2.5]), table])
    x = all_states(2)
    assert torch.allclose(graph.log_prob(x), 2.5 + table[[0, 0, 1, 1]])
    assert torch.allclose(graph.flip_log_ratios(x)[:, 0], torch.zeros(4, dtype=torch.float64))


def support_is_connected_by_single_flips(log_p: torch.Tensor, n: int) -> bool:
    positive = set(torch.isfinite(log_p).nonzero().flatten().tolist())
    seen, frontier = set(), [min(positive)]
    while frontier:
        code = frontier.pop()
        if code in seen:
            continue
        seen.add(code)
        frontier += [code ^ (1 << i) for i in range(n) if code ^ (1 << i) in positive]
    return seen == positive


def test_a_sampler_never_enters_zero_mass_and_matches_the_exact_distribution():
    """Metropolis with a uniform site on a graph with zeros whose support single flips connect
    (checked), so the chain is ergodic on it. 400 chains, 500 steps of burn-in, then a state
    every 25 steps, 40 times: N = 16,000 draws. conftest's bound E[TV] <= 0.40 sqrt(K_eff / N)
    times its TV_SAFETY of 3 allows an autocorrelation time of 9 between the thinned draws; the
    uniform law on the support is beyond that threshold, so the check has power."""
    graph = random_graph(n=6, zeros=0.2, seed=5, arities=(2, 3, 2, 1, 3))
    log_p = graph.log_prob(all_states(6))
    assert support_is_connected_by_single_flips(log_p, 6)
    p = torch.softmax(log_p, 0)
    assert 0 < int((p == 0).sum()) < 40  # zeros that matter
    sampler = UniformMetropolis(graph, n_chains=400, seed=0)
    sampler.step(500)
    counts = torch.zeros(64, dtype=torch.float64)
    for _ in range(40):
        sampler.step(25)
        assert torch.isfinite(sampler.log_p).all()
        codes = ((sampler.x > 0).long() << torch.arange(6)).sum(1)
        counts += torch.bincount(codes, minlength=64)
    assert sampler.invariant_error() < 1e-12
    n = counts.sum().item()
    threshold = 3 * 0.40 * math.sqrt(p.sqrt().sum().item() ** 2 / n)
    assert 0.5 * (counts / n - p).abs().sum().item() < threshold
    uniform_on_support = (p > 0).double() / (p > 0).sum()
    assert 0.5 * (uniform_on_support - p).abs().sum().item() > threshold


# ----------------------------------------------------------------- gradient
def multilinear(graph: FactorGraph, x: torch.Tensor) -> torch.Tensor:
    """The extension written out: each table entry times the product over its scope of
    ``u`` or ``1 - u`` (``u = (1 + x) / 2``) by the entry's bits."""
    u = 0.5 * (1.0 + x)
    total = torch.zeros(len(x), dtype=torch.float64)
    for scope, table in zip(graph.scopes, graph.log_tables, strict=True):
        for index, bits in enumerate(itertools.product((0, 1), repeat=len(scope))):
            weight = torch.ones(len(x), dtype=torch.float64)
            for v, bit in zip(scope, bits, strict=True):
                weight = weight * (u[:, v] if bit else 1.0 - u[:, v])
            total += table[index] * weight
    return total


def test_the_gradient_is_that_of_the_multilinear_extension_exact_at_the_corners():
    graph = random_graph(seed=6)
    assert graph.provides == frozenset({"incremental", "gradient"})
    corners = all_states(8)
    assert torch.allclose(multilinear(graph, corners), graph.log_prob(corners), atol=1e-12)
    g = torch.Generator().manual_seed(6)
    points = torch.cat([corners[::37], 2 * torch.rand(5, 8, generator=g, dtype=torch.float64) - 1])
    grad = graph.grad_log_prob(points)
    h = 1e-6
    for i in range(8):
        e = torch.zeros(8, dtype=torch.float64)
        e[i] = h
        central = (multilinear(graph, points + e) - multilinear(graph, points - e)) / (2 * h)
        assert torch.allclose(grad[:, i], central, rtol=1e-8, atol=1e-8)  # exact: linear in x_i


def test_a_graph_with_zeros_offers_no_gradient_and_says_why():
    graph = random_graph(zeros=0.2, seed=7)
    assert graph.provides == frozenset({"incremental"})
    with pytest.raises(ValueError, match="zero entries"):
        graph.grad_log_prob(all_states(8)[:2])


# ----------------------------------------------------------------- starting states
def relabelled(graph: FactorGraph, seed: int) -> FactorGraph:
    """The same graph with its variables renumbered at random: index order is then no longer
    an ancestral order, and the repair has to do the work."""
    order = torch.randperm(graph.n_variables, generator=torch.Generator().manual_seed(seed))
    scopes = [[int(order[v]) for v in scope] for scope in graph.scopes]
    return FactorGraph(graph.n_variables, scopes, graph.log_tables)


def test_start_finds_states_of_positive_mass_on_grids_with_hard_zeros():
    grid = grid_network(8, determinism=0.9, seed=1, epsilon=0.0)
    g = torch.Generator().manual_seed(0)
    draws = 2 * torch.randint(0, 2, (200, 64), generator=g).double() - 1
    assert torch.isneginf(grid.log_prob(draws)).float().mean() > 0.99  # uniform draws fail
    for graph in (grid, relabelled(grid, 3)):
        x = graph.start(50, torch.Generator().manual_seed(1))
        assert x.shape == (50, 64) and set(x.unique().tolist()) <= {-1.0, 1.0}
        assert torch.isfinite(graph.log_prob(x)).all()
        assert len({tuple(row) for row in x.tolist()}) > 10  # not one state copied
    again = grid.start(50, torch.Generator().manual_seed(1))
    assert torch.equal(again, grid.start(50, torch.Generator().manual_seed(1)))


def test_start_says_so_when_a_factor_forbids_every_value():
    graph = FactorGraph(3, [(0, 1), (2,)], [torch.full((4,), -math.inf), torch.zeros(2)])
    with pytest.raises(ValueError, match=r"factor 0 \(over variables \[0, 1\]\) gives every"):
        graph.start(4, torch.Generator().manual_seed(0))


def test_start_says_so_when_no_state_has_positive_mass():
    """Each factor allows some values, but together they forbid every state."""
    no = torch.tensor([0.0, -math.inf], dtype=torch.float64)  # x0 must be -1
    yes = torch.tensor([-math.inf, -math.inf, 0.0, 0.0], dtype=torch.float64)  # x0 must be +1
    graph = FactorGraph(3, [(0,), (0, 1), (2,)], [no, yes, torch.zeros(2)])
    with pytest.raises(ValueError, match="found no state of positive probability"):
        graph.start(4, torch.Generator().manual_seed(0))


# ----------------------------------------------------------------- grid networks
def test_a_grid_network_conditions_each_variable_on_its_upper_and_left_neighbours():
    grid = grid_network(4, determinism=0.5, seed=2)
    assert grid.n_sites == 16 and grid.shape == (4, 4) and grid.n_factors == 16
    assert grid.scopes[0] == (0,) and grid.scopes[1] == (0, 1) and grid.scopes[4] == (0, 4)
    assert grid.scopes[5] == (1, 4, 5)  # up, left, the variable itself (the child) last
    for table in grid.log_tables:  # conditional tables: each row of the child sums to one
        rows = table.exp().view(-1, 2).sum(1)
        assert torch.allclose(rows, torch.ones_like(rows), atol=1e-12)


def test_a_grid_network_is_normalised_and_has_the_asked_share_of_deterministic_tables():
    grid = grid_network(3, determinism=2 / 3, seed=4, epsilon=1e-3)
    assert torch.logsumexp(grid.log_prob(all_states(9)), 0).abs() < 1e-12  # a Bayesian network
    near = [
        bool(((t.exp() - 1e-3).abs() < 1e-15).view(-1, 2).any(1).all()) for t in grid.log_tables
    ]
    assert sum(near) == 6
    assert grid.provides == frozenset({"incremental", "gradient"})
    hard = grid_network(3, determinism=2 / 3, seed=4, epsilon=0.0)
    assert sum(bool(torch.isneginf(t).any()) for t in hard.log_tables) == 6
    assert torch.logsumexp(hard.log_prob(all_states(9)), 0).abs() < 1e-12


def test_grid_networks_are_reproducible_from_their_seed():
    a, b, c = grid_network(5, 0.5, seed=9), grid_network(5, 0.5, seed=9), grid_network(5, 0.5, 8)
    assert all(torch.equal(s, t) for s, t in zip(a.log_tables, b.log_tables, strict=True))
    assert not all(torch.equal(s, t) for s, t in zip(a.log_tables, c.log_tables, strict=True))
    assert a.same_graph(c) and not a.same_graph(grid_network(4, 0.5))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"side": 0}, "side must be an integer between 1 and 1024"),
        ({"side": 2.0}, "side must be an integer"),
        ({"determinism": 1.5}, "determinism must be a real number between 0.0 and 1.0"),
        ({"determinism": math.nan}, "determinism must be a real number"),
        ({"seed": -1}, "seed must be an integer"),
        ({"epsilon": 0.7}, "epsilon must be a real number between 0.0 and 0.5"),
    ],
)
def test_grid_network_refuses_bad_arguments_in_a_sentence(kwargs, message):
    with pytest.raises(ValueError, match=message):
        grid_network(**kwargs)


# ----------------------------------------------------------------- refusals
Z2 = torch.zeros(2)


@pytest.mark.parametrize(
    "args, message",
    [
        ((0, [], []), "n_variables must be an integer"),
        ((3, [(0,)], []), "same factors, got 1 scopes and 0 tables"),
        ((3, [(3,)], [Z2]), r"factor 0 names variable 3; variables are numbered 0 to 2"),
        ((3, [(-1,)], [Z2]), "names variable -1"),
        ((3, [(1, 1)], [torch.zeros(4)]), "names a variable more than once"),
        ((3, [(0.5,)], [Z2]), "must be a list of variable indices"),
        ((3, [[(0, 1)]], [torch.zeros(4)]), "must be a list of variable indices"),
        ((20, [tuple(range(17))], [torch.zeros(2)]), "17 variables in its scope; at most 16"),
        ((3, [(0, 1)], [Z2]), r"has 2 entries; a scope of 2 variables needs 2\^2 = 4"),
        ((3, [(0,)], [torch.tensor([0.0, math.nan])]), "holds NaN"),
        ((3, [(0,)], [torch.tensor([0.0, math.inf])]), r"holds \+inf"),
        ((3, [(0,)], [torch.tensor([0.0, -2e6])]), "finite entry beyond"),
        ((3, [(0,)], [["a", "b"]]), "must hold real numbers"),
        ((3, [(0,)], [torch.tensor([1j, 0j])]), "must hold real numbers"),
        ((3, "ab", [Z2]), "scopes must be a sequence"),
    ],
)
def test_factor_graph_refuses_bad_factors_in_a_sentence(args, message):
    with pytest.raises(ValueError, match=message):
        FactorGraph(*args)


def test_factor_graph_refuses_a_bad_layout_and_bad_states():
    with pytest.raises(ValueError, match="product is the 4 variables"):
        FactorGraph(4, [(0,)], [Z2], shape=(3, 1))
    graph = FactorGraph(4, [(0,)], [Z2], shape=(2, 2))
    assert graph.log_prob(torch.ones(3, 2, 2)).shape == (3,)
    assert graph.flip_log_ratios(torch.ones(3, 2, 2)).shape == (3, 2, 2)
    with pytest.raises(ValueError, match="x must have shape"):
        graph.log_prob(torch.ones(3, 5))
    with pytest.raises(ValueError, match="n_chains must be an integer"):
        graph.start(0, torch.Generator())


def test_the_start_searchs_budget_of_seconds_changes_no_state_it_finds():
    """A search that ends within its budget finds the same states with a far larger one: the
    budget only decides when to give up."""
    grid = relabelled(grid_network(8, determinism=0.9, seed=1, epsilon=0.0), 3)
    x = grid.start(50, torch.Generator().manual_seed(1))
    assert torch.equal(x, grid.start(50, torch.Generator().manual_seed(1), seconds=1e6))
    zero = torch.ones(20, 64, dtype=torch.float64)
    assert torch.isneginf(grid.log_prob(zero)).all()
    moved, moves = grid.into_support(zero, torch.Generator().manual_seed(2))
    again, moves_again = grid.into_support(zero, torch.Generator().manual_seed(2), seconds=1e6)
    assert torch.equal(moved, again) and moves == moves_again
    assert torch.isfinite(grid.log_prob(moved)).all()
