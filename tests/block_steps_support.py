"""Checks shared by the compiled block steps' tests (pairwise targets, factor graphs, RBMs):
a long call's steps in tiles and its chains in groups on threads give one call's run."""

from __future__ import annotations

import torch

from lsbcore.backends import block_kernels


def assert_groups_give_one_calls_run(monkeypatch, make):
    """Run ``make()``'s sampler (5 chains) over two tiles and a part of one (``STEP_TILE``) in one
    thread, then in three groups of chains on threads: the states, ``log p~``, counters, trace
    rows and last blocks are equal. Returns the grouped run."""
    from lsbcore.backends import threads

    steps = 2 * block_kernels.STEP_TILE + 37
    runs = []
    for cores, least in ((1, threads.MIN_SITES_PER_GROUP), (3, 1)):
        monkeypatch.setattr(threads, "cores", lambda cores=cores: cores)
        monkeypatch.setattr(threads, "MIN_SITES_PER_GROUP", least)
        assert len(threads.chain_groups(5, steps)) == cores
        run = make()
        assert run.backend == "compiled"
        run.track_statistics()
        trace = torch.zeros(steps, 5, 5, dtype=torch.float64)
        run.step(steps, trace=trace)
        runs.append((run, trace))
    (one, trace_one), (grouped, trace_grouped) = runs
    assert torch.equal(one.x, grouped.x) and torch.equal(one.log_p, grouped.log_p)
    assert one.n_accepted == grouped.n_accepted > 0
    assert torch.equal(trace_one, trace_grouped)
    for key in ("sites", "accepted", "accept_prob"):
        assert torch.equal(one.last_proposal[key], grouped.last_proposal[key])
    return grouped


def assert_past_a_tile_like_torch(make, chains=6):
    """``make(backend)``'s sampler on torch and compiled, each one call of a tile and 90 steps
    more (``STEP_TILE``): the same states, acceptances and trace."""
    steps = block_kernels.STEP_TILE + 90
    runs, traces = [make(backend) for backend in ("torch", "compiled")], []
    for run in runs:
        run.track_statistics()
        traces.append(torch.zeros(steps, chains, 5, dtype=torch.float64))
        run.step(steps, trace=traces[-1])
    assert torch.equal(runs[0].x, runs[1].x) and runs[0].n_accepted == runs[1].n_accepted
    torch.testing.assert_close(traces[0], traces[1], rtol=0, atol=1e-9)
