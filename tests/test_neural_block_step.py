"""neural-block's step does each piece of work once: the network's context is read once a step
for the draw and both log q, exact tiles enumerate a conditional once a step, and the fast draw
(growing prefixes of hidden units, tanh as a sigmoid) is the law ``log_prob`` scores."""

from __future__ import annotations

import pytest
import torch

from lsbcore import make_sampler
from lsbcore.methods.block_proposals.motif import GridMotif
from lsbcore.methods.block_proposals.proposal import BlockProposal
from lsbcore.methods.block_proposals.sampler import shipped_proposal
from lsbcore.studies.block_proposals import benchmark
from lsbcore.targets.grid_network import grid_network
from lsbcore.targets.ising import IsingPosterior

pytestmark = pytest.mark.usefixtures("single_thread")


def posterior(side=8):
    alpha = torch.randn(side, side, generator=torch.Generator().manual_seed(0)) * 0.8
    return IsingPosterior(alpha.to(torch.float64), 0.6)


def counted(monkeypatch, owner, name):
    """Count the calls of ``owner.name`` (still calling it)."""
    calls = []
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls


@pytest.mark.parametrize(
    "target", [posterior(), grid_network(8, 0.9, seed=2)], ids=["ising", "network"]
)
def test_a_step_reads_the_network_context_once(target, monkeypatch):
    sampler = make_sampler("neural-block", target, 3, seed=1, block_size=2, weights="trained")
    calls = counted(monkeypatch, BlockProposal, "context_terms")
    sampler.step(5)
    assert len(calls) == 5  # once a step, not once for the draw and once for each log q


def test_exact_tiles_enumerate_a_conditional_once_a_step(monkeypatch):
    sampler = make_sampler("neural-block", posterior(), 3, seed=1, block_size=3, weights="exact")
    calls = counted(monkeypatch, GridMotif, "exact_log_probs")
    sampler.step(4)
    assert len(calls) == 4


def deep_network(k: int) -> BlockProposal:
    """Three hidden layers and a large, arbitrary correction: every part of the draw counts."""
    q = BlockProposal(k, hidden=20, depth=3, seed=k)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for layer in (q.out, q.out_context):
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=g) * 2.0)
            layer.bias.copy_(torch.randn(layer.bias.shape, generator=g))
    return q.to(torch.float64).eval().requires_grad_(False)


@pytest.mark.parametrize(
    ("k", "network"),
    [(2, "trained"), (3, "trained"), (4, "trained"), (2, "deep"), (3, "deep")],
)
def test_the_draw_is_the_site_by_site_law_that_log_prob_scores(k, network):
    q = deep_network(k) if network == "deep" else shipped_proposal(k).to(torch.float64)
    c = torch.randn(300, q.motif.n_terms, generator=torch.Generator().manual_seed(3)) * 2.0
    c = c.to(torch.float64)
    x, log_q = q.sample(c, torch.Generator().manual_seed(4))
    # the same uniforms, each site drawn from the logits log_prob reads (x_<i set, the rest 0)
    u = torch.rand(len(c), q.motif.n, generator=torch.Generator().manual_seed(4),
                   dtype=torch.float64)  # fmt: skip
    slow = torch.zeros_like(x)
    for i in range(q.motif.n):
        p_up = torch.sigmoid(q.logits(slow, c)[:, i])
        slow[:, i] = torch.where(u[:, i] < p_up, 1.0, -1.0)
    assert torch.equal(x, slow)
    torch.testing.assert_close(log_q, q.log_prob(x, c), rtol=0, atol=1e-12)


def test_propose_scores_the_draw_and_the_current_state_as_log_prob_does():
    q = deep_network(3)
    g = torch.Generator().manual_seed(5)
    c = torch.randn(50, q.motif.n_terms, generator=g, dtype=torch.float64)
    now = torch.where(torch.rand(50, q.motif.n, generator=g) < 0.5, 1.0, -1.0).to(torch.float64)
    y, log_q_y, log_q_now = q.propose(c, now, torch.Generator().manual_seed(6))
    assert torch.equal(y, q.sample(c, torch.Generator().manual_seed(6))[0])
    torch.testing.assert_close(log_q_y, q.log_prob(y, c), rtol=0, atol=1e-12)
    torch.testing.assert_close(log_q_now, q.log_prob(now, c), rtol=0, atol=1e-12)


def test_the_speed_part_times_steps_and_tiles_of_both_proposals():
    rows = benchmark.speed_figures((2,), seconds=0.0, quick=True)
    assert [(r["k"], r["weights"]) for r in rows] == [(2, "trained"), (2, "exact")] * 2
    for row in rows:
        assert row["steps"] >= 3 and row["s_per_step"] > 0 and row["us_per_tile"] > 0
        assert 0 < row["accept"] <= 1
    assert all(r["accept"] == 1.0 for r in rows if r["weights"] == "exact")
