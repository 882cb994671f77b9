"""Small statements on the page that must be true (issue 46, finding 8): a lattice's size in one
order everywhere, an agreement that never reads 100% while pixels differ, and no evaluation
count that passes for sampling work before the first step."""

from __future__ import annotations

import numpy as np
from app_support import open_app, stop_runs_fixture  # noqa: F401  (pytest fixture)

from app import state
from app.views.segmentation import recorded_marginal


def texts(elements) -> str:
    return " | ".join(str(e.value) for e in elements)


def photo_page():
    """The coffee photo (600 x 400 px, wider than tall) at 96 px: a 96-wide, 64-tall lattice,
    with draws, on the Segmentation tab."""
    at = open_app(source="sample", sample="coffee", size="96")
    run = at.session_state["_run"]
    state.advance(run, 60.0, 200)
    at.session_state["view"] = "Segmentation"
    return at.run(), run


def test_the_header_and_the_downloads_give_a_lattice_s_size_in_one_order():
    at, run = photo_page()
    assert run.problem.target.shape == (64, 96)
    captions = texts(at.caption)
    assert "96 × 64 sites (width × height)" in captions  # the header above the tabs
    assert "from the 96 × 64 lattice (width × height)" in captions  # the downloads' caption
    assert "64 × 96" not in captions and "64×96" not in captions
    assert "the PNGs are 600 × 400 px" in captions  # the photo's size in the same order


def test_the_map_agreement_never_reads_100_percent_while_pixels_differ():
    at, run = photo_page()
    mask = recorded_marginal(run) >= 0.5
    map_mask = mask.copy()
    map_mask[0, 0] = ~map_mask[0, 0]  # one pixel of 6,144 differs: 99.98% agree
    run.cache["map"] = map_mask
    captions = texts(at.run().caption)
    assert "agrees with the exact MAP on 99.98% of the pixels (1 differs)" in captions
    assert "100.0%" not in captions
    run.cache["map"] = mask
    assert "agrees with the exact MAP on every pixel" in texts(at.run().caption)
    assert not np.array_equal(mask, map_mask)


def test_before_the_first_step_the_status_line_counts_no_evaluations_as_sampling():
    at = open_app(size="16", chains="2", samplers="barker,lsb1")
    run = at.session_state["_run"]
    assert run.n_steps == 0
    status = next(c.value for c in at.caption if str(c.value).startswith("Step **0**"))
    # setting up the start evaluates all 256 sites once: said as the start's cost
    assert "no steps yet (the start took **256** target evaluations per chain)" in status
    assert "target evaluations per chain **" not in status
    state.advance(run, 30.0, 1)
    at.run()
    status = next(c.value for c in at.caption if str(c.value).startswith("Step **1**"))
    evals = [s.n_target_evals for s in run.comparison.samplers.values()]
    shown = f"{min(evals):,}–{max(evals):,}" if min(evals) != max(evals) else f"{evals[0]:,}"
    assert f"target evaluations per chain **{shown}**" in status and min(evals) > 256
