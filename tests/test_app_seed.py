"""The RBM and network pages' Seed: the sidebar's Run section offers it (the Ising page's sits
with its posterior), a new seed builds a new run from another shared start, and the same seed
gives the same start again, changed two and three times."""

from __future__ import annotations

import pytest
import torch
from app_support import open_app, stop_runs_fixture  # noqa: F401  (autouse)


def start(run) -> torch.Tensor:
    """The shared start of ``run``'s chains: the first sampler's states before any step."""
    comparison = run.comparison
    return comparison.samplers[comparison.names[0]].x.detach().clone()


@pytest.mark.parametrize("target", ["digits-8x8", "mn1", "vs"])
def test_the_seed_is_offered_and_changes_the_run(target):
    at = open_app(target=target, chains="2", burn_in="5")
    assert not at.exception and not at.error
    first = at.session_state["_run"]
    assert at.number_input(key="seed").value == first.config.seed == 0
    starts = {0: start(first)}
    for seed in (7, 2, 0):
        at.number_input(key="seed").set_value(seed).run()
        assert not at.exception and not at.error
        run = at.session_state["_run"]
        assert run.config.seed == seed and at.query_params["seed"] == str(seed)
        if seed in starts:
            assert torch.equal(start(run), starts[seed])  # the same seed, the same start
        else:
            assert not any(torch.equal(start(run), s) for s in starts.values())
            starts[seed] = start(run)
