"""Chains that start at zero mass are moved inside the support, exactly and said; no sampler
ever moves a chain into zero mass.

``FactorGraph.into_support`` keeps chains where ``p~ > 0`` and repairs the others (greedy
min-conflict flips from their own state, then ``start``'s restarts and donors); ``Comparison``
does it to its shared start before any sampler is built and keeps one sentence,
``start_note``, for the page.
"""

from __future__ import annotations

import re

import pytest
import torch

import lsbcore.targets.factor_graph as factor_graph
from lsbcore import Comparison, make_sampler
from lsbcore.balancing.functions import make_balancing
from lsbcore.samplers.base import uniform_start
from lsbcore.samplers.registry import REGISTRY, samplers_for
from lsbcore.targets.factor_graph import FactorGraph, SupportMoves
from lsbcore.targets.grid_network import grid_network

pytestmark = pytest.mark.usefixtures("single_thread")


def hard_network(side: int = 6, seed: int = 3) -> FactorGraph:
    """A grid network with hard zeros: half its tables deterministic, epsilon = 0."""
    return grid_network(side, 0.5, seed=seed, epsilon=0.0)


def mixed_start(graph: FactorGraph, n_chains: int, positive: tuple[int, ...], seed: int = 0):
    """Uniform states, except chains ``positive`` which hold states of positive mass."""
    x = uniform_start(graph.shape, n_chains, seed)
    inside = graph.start(n_chains, torch.Generator().manual_seed(seed + 1)).view_as(x)
    for c in positive:
        x[c] = inside[c]
    return x


def test_into_support_keeps_positive_chains_and_moves_the_others_by_counted_flips():
    graph = hard_network()
    x = mixed_start(graph, 12, positive=(0, 4, 7))
    at_zero = torch.isneginf(graph.log_prob(x))
    assert int(at_zero.sum()) >= 6  # most uniform starts are outside the support
    moved_x, moves = graph.into_support(x.clone(), torch.Generator().manual_seed(9))
    assert moved_x.shape == x.shape
    assert torch.isfinite(graph.log_prob(moved_x)).all()
    assert moves.moved == tuple(int(c) for c in at_zero.nonzero().flatten())
    assert moves.n_chains == 12 and len(moves.flips) == len(moves.moved)
    for c in range(12):
        if c not in moves.moved:
            assert torch.equal(moved_x[c], x[c])  # kept exactly
    for c, flips in zip(moves.moved, moves.flips, strict=True):
        if c in moves.restarted or c in moves.donated:
            continue
        # each counted flip changes one variable: the distance is at most the count, of its parity
        distance = int((moved_x[c] != x[c]).sum())
        assert 1 <= distance <= flips and (flips - distance) % 2 == 0


def test_into_support_is_deterministic_given_the_generator():
    graph = hard_network()
    x = mixed_start(graph, 8, positive=(2,))
    first = graph.into_support(x.clone(), torch.Generator().manual_seed(5))
    again = graph.into_support(x.clone(), torch.Generator().manual_seed(5))
    assert torch.equal(first[0], again[0]) and first[1] == again[1]


def test_into_support_leaves_a_start_inside_the_support_alone():
    graph = hard_network()
    x = graph.start(6, torch.Generator().manual_seed(0))
    moved_x, moves = graph.into_support(x.clone(), torch.Generator().manual_seed(1))
    assert torch.equal(moved_x, x) and moves.moved == () and moves.sentence() is None


def test_chains_the_repair_cannot_fix_restart_or_take_a_state_another_found(monkeypatch):
    """With a budget of 10 flips (too few for most chains on a 6 x 6 grid) and no restarts,
    the chains still at zero mass take the states of chains that found positive mass."""
    graph = hard_network()
    x = mixed_start(graph, 10, positive=(0, 1))
    monkeypatch.setattr(factor_graph, "START_FLIPS_PER_VARIABLE", 0)
    monkeypatch.setattr(factor_graph, "START_RESTARTS", 0)
    moved_x, moves = graph.into_support(x.clone(), torch.Generator().manual_seed(2))
    assert torch.isfinite(graph.log_prob(moved_x)).all()
    assert moves.donated and moves.restarted == ()
    assert all(flips <= 10 for flips in moves.flips)
    assert f"{len(moves.donated)} by taking a state another chain found" in moves.sentence()
    monkeypatch.setattr(factor_graph, "START_RESTARTS", 20)
    moved_x, moves = graph.into_support(x.clone(), torch.Generator().manual_seed(2))
    assert moves.restarted and torch.isfinite(graph.log_prob(moved_x)).all()
    assert f"{len(moves.restarted)} of them after a restart from fresh draws" in moves.sentence()


def ring(n: int) -> FactorGraph:
    """A ring whose pairs forbid (x_i, x_i+1) = (-1, +1): only the two constant states have
    positive mass, and min-conflict flips from a random state only shift the forbidden pairs."""
    table = torch.log(torch.tensor([1.0, 0.0, 0.5, 2.0], dtype=torch.float64))
    return FactorGraph(n, [(i, (i + 1) % n) for i in range(n)], [table] * n)


def test_a_repair_that_makes_no_progress_gives_up_and_restarts():
    """From its own state a chain stops after REPAIR_PATIENCE flips without a new low in its
    zero-mass factors (here far fewer than the 4 n + 10 budget), and the restart finds the
    support."""
    graph = ring(300)
    x = uniform_start((300,), 5, seed=0)
    moved_x, moves = graph.into_support(x, torch.Generator().manual_seed(1))
    assert torch.isfinite(graph.log_prob(moved_x)).all()
    assert moves.restarted == (0, 1, 2, 3, 4)
    assert all(flips < 4 * 300 + 10 for flips in moves.flips)  # the budget was not spent
    assert (moved_x.abs().sum(1) == 300).all() and (moved_x.sum(1).abs() == 300).all()


def test_comparison_moves_its_shared_start_inside_and_says_how_in_a_sentence():
    graph = hard_network()
    x = mixed_start(graph, 5, positive=(1, 3))
    c = Comparison(["barker", "metropolis"], graph, 5, seed=4, x0=x)
    moves = c.start_moves
    assert moves.moved == (0, 2, 4)
    mean = sum(moves.flips) / 3
    expected = (
        f"3 of 5 chains started where p~ = 0 (a hard zero of the network); each was moved to a "
        f"state of positive probability by greedy repair, {mean:.3g} flips on average"
    )
    assert c.start_note.startswith(expected)
    assert c.start_note.endswith("not counted as steps or evaluations.")
    for name, sampler in c.samplers.items():
        # the moves cost no steps or evaluations: as if the sampler had started there
        fresh = make_sampler(name, graph, 5, seed=4, x0=sampler.x.clone())
        assert torch.isfinite(sampler.log_p).all() and sampler.n_steps == 0
        assert sampler.n_target_evals == fresh.n_target_evals
        for keep in (1, 3):
            assert torch.equal(sampler.x[keep], x[keep])  # kept as given
    # the same seed gives the same moves; the default uniform start is moved too
    assert Comparison(["barker"], graph, 5, seed=4, x0=x).start_moves == moves
    default = Comparison(["barker"], graph, 5, seed=4)
    assert default.start_moves.moved and default.start_note.split(" of 5")[0].isdigit()
    assert torch.isfinite(default["barker"].log_p).all()


def test_comparison_says_nothing_when_no_chain_moved():
    graph = grid_network(4, 0.5, seed=1, epsilon=1e-3)  # no zeros: every state is positive
    assert Comparison(["barker"], graph, 3, seed=0).start_note is None
    inside = hard_network().start(3, torch.Generator().manual_seed(0))
    assert Comparison(["barker"], hard_network(), 3, x0=inside).start_note is None


def test_a_target_that_cannot_move_chains_keeps_the_refusal():
    class Fixed(FactorGraph):
        into_support = None  # a target without the repair

    graph = hard_network()
    fixed = Fixed(graph.n_sites, graph.scopes, graph.log_tables, shape=graph.shape)
    with pytest.raises(ValueError, match=re.escape("start the chains where p~(x) > 0")):
        Comparison(["barker"], fixed, 4, seed=0)


def extra(name: str) -> dict:
    if REGISTRY[name].needs_balancing:
        return {"balancing": make_balancing("lsb1").frozen()}
    if REGISTRY[name].takes_flow:  # a briefly trained flow: zero mass is refused either way
        return {"train_steps": 20}
    return {}


NAMES = [n for n in samplers_for(hard_network()) if n != "learned"]


@pytest.mark.parametrize("name", NAMES)
def test_no_sampler_ever_moves_a_chain_into_zero_mass(name):
    """200 steps of 16 chains on a 6 x 6 network with hard zeros. For single-flip samplers, every
    proposal is checked against the flip log-ratios of the state it left: proposals into zero
    mass happen (counted, so the check has power) and none is accepted."""
    graph = hard_network()
    sampler = make_sampler(name, graph, 16, seed=1, **extra(name))
    if sampler.learnable:
        sampler.step(20, learn=True)
    into_zero = accepted_into_zero = 0
    # the samplers that name one site (block, flow, bit-flip and dHMC steps move many)
    single = REGISTRY[name].move == "site"
    for _ in range(200):
        before = sampler.x.clone()
        s = graph.flip_log_ratios(before).view(16, -1)
        sampler.step(1)
        assert torch.isfinite(graph.log_prob(sampler.x)).all()
        if single:
            site = sampler.last_proposal["site"].view(-1).long()
            forbidden = torch.isneginf(s[torch.arange(16), site])
            changed = (sampler.x != before).view(16, -1).any(1)
            into_zero += int(forbidden.sum())
            accepted_into_zero += int((forbidden & changed).sum())
        elif REGISTRY[name].takes_flow:  # a whole state proposed: zero mass has probability 0
            into_zero += int((sampler.last_proposal["accept_prob"] == 0).sum())
    assert torch.isfinite(sampler.log_p).all() and sampler.invariant_error() < 1e-9
    assert accepted_into_zero == 0
    if REGISTRY[name].takes_flow:
        assert into_zero > 0  # the flow proposes states of zero mass; the test above refused them
    if name in ("barker", "sqrt", "min"):
        assert into_zero == 0  # g(0) = 0: a move into zero mass is never even proposed
    if name in ("max", "lsb1", "lsb2", "gibbs", "metropolis"):
        assert into_zero > 0  # g(0) > 0 or a uniform site: proposed (~1,000 times), refused


def test_the_start_sentence_counts_in_good_english():
    """One chain of five moved by one flip reads "1 of 5 chains ... 1 flip"; a lone chain
    "1 of 1 chain"."""

    def moves(flips, n_chains):
        return SupportMoves((0,), (flips,), (), (), n_chains)

    assert moves(1, 5).sentence().startswith("1 of 5 chains started where p~ = 0")
    assert "it was moved to a state of positive probability by greedy repair, 1 flip, " in (
        moves(1, 5).sentence()
    )
    assert "greedy repair, 3 flips, " in moves(3, 5).sentence()
    assert moves(2, 1).sentence().startswith("1 of 1 chain started")
