"""The Tempering tab's refusal of a computation too large for a request: the cost it states
visibly exceeds the limit, and it suggests only cheaper choices that fit, never the one already
made."""

from __future__ import annotations

import re
from types import SimpleNamespace

from app.views.tempering import BIMODAL_SIZE, MAX_WORK, tempering_view, work

PRESET_SITES = BIMODAL_SIZE**2


def refusal(choice: str, sweeps: int, replicas: int, n_sites: int = PRESET_SITES) -> str:
    run_target = SimpleNamespace(batch=1, n_sites=n_sites)  # only its size is read here
    view = tempering_view(choice, run_target, "gibbs", replicas, 0.1, True, sweeps)
    assert view.result is None
    return view.message


def test_the_stated_cost_visibly_exceeds_the_limit():
    # 4,800 x 1.2 x 17 x 256 = 25,067,520 site updates: "25 million" would read as the limit
    message = refusal("preset", 4800, 16)
    stated = float(re.search(r"is ([\d.]+) million site updates", message).group(1))
    limit = float(re.search(r"more than the ([\d.]+) million", message).group(1))
    assert stated > limit == MAX_WORK / 1e6
    assert abs(stated * 1e6 - work(4800, 16, PRESET_SITES)) < 0.1e6


def test_the_suggested_choices_fit_and_the_selected_preset_is_not_suggested():
    message = refusal("preset", 5000, 16)
    assert "preset" not in message
    most_sweeps = int(re.search(r"at most ([\d,]+) sweeps", message).group(1).replace(",", ""))
    most_replicas = int(re.search(r"at most (\d+) replicas", message).group(1))
    assert work(most_sweeps, 16, PRESET_SITES) <= MAX_WORK < work(most_sweeps + 1, 16, PRESET_SITES)
    assert work(5000, most_replicas, PRESET_SITES) <= MAX_WORK
    assert work(5000, most_replicas + 1, PRESET_SITES) > MAX_WORK


def test_the_preset_is_suggested_for_a_large_posterior_only_when_it_fits():
    assert "the bimodal preset" in refusal("run", 1000, 8, n_sites=64 * 64)
    # 5,000 sweeps of 16 replicas do not fit on the preset either
    assert "the bimodal preset" not in refusal("run", 5000, 16, n_sites=64 * 64)
