"""The object prompt in the app, and the Segmentation tab's state: AppTest (no browser).

Streamlit's AppTest cannot drag on a Plotly chart, so the selection events are turned into a
prompt by ``app.prompt.from_selection`` (tested on its own) and the flow is driven by storing
the prompt as the chart's callback does.
"""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from app_support import open_app, stop_runs_fixture  # noqa: F401  (autouse)
from streamlit.testing.v1 import AppTest

from app import colour_refits, state
from app import prompt as prompts
from app.views.segmentation import UNSAMPLED, recorded_marginal, settled_text, snapshot
from lsbcore.segmentation.segment import REFIT_STABLE, REFIT_SWEEPS


def texts(elements) -> str:
    return " | ".join(str(e.value) for e in elements)


def healthy(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def run_until(run: state.Run, done, timeout: float = 60.0) -> None:
    state.start(run)
    deadline = time.perf_counter() + timeout
    while not done() and time.perf_counter() < deadline:
        time.sleep(0.05)
    state.pause(run)
    assert done(), f"not done after {timeout} s ({run.n_steps} steps)"


# ----------------------------------------------------------------------------- selections
def test_a_dragged_box_and_clicks_become_fractions_of_the_image():
    shape = (40, 80)  # H, W; figure pixel centres at 0 .. W - 1
    drag = {"box": [{"x": [79.5, 19.5], "y": [-0.5, 19.5]}], "points": [{"x": 30, "y": 5}]}
    box, points = prompts.from_selection(drag, shape, None, [(0.1, 0.1, -1)])
    assert box == (0.25, 0.0, 1.0, 0.5) and points == [(0.1, 0.1, -1)]  # points are kept
    click = {"box": [], "points": [{"x": 39.5, "y": 9.5}]}
    kept, points = prompts.from_selection(click, shape, box, [], mode="background")
    assert kept == box and points == [(0.5, 0.25, -1)]
    assert prompts.from_selection({"box": [], "points": []}, shape, box, []) is None


# ----------------------------------------------------------------------------- the flow
def test_a_box_rebuilds_the_run_and_the_mask_lies_inside_it():
    at = open_app(source="sample", sample="coffee", size="48", burn_in="5")
    healthy(at)
    image_id = "sample:coffee"
    assert "No prompt" in texts(at.caption)
    run = at.session_state["_run"]
    run_until(run, lambda: run.n_steps >= 3)
    entry = at.session_state[prompts.STATE]
    assert entry["image"] == image_id and entry["shape"] == run.problem.target.shape
    box = (0.1, 0.05, 0.8, 0.95)  # the cup and saucer
    entry.update(box=box, points=[], version=entry["version"] + 1)
    at.run()
    healthy(at)
    the_run = at.session_state["_run"]
    assert the_run is not run  # the posterior changed: a new run, and the page says why
    assert "The posterior changed (object prompt): the run was reset." in texts(at.info)
    assert the_run.problem.data.prompt.box == box
    assert "Your prompt: a box (10%–80% across, 5%–95% down)" in texts(at.caption)
    run_until(the_run, lambda: recorded_marginal(the_run) is not None)
    marginal = recorded_marginal(the_run)
    outside = ~the_run.problem.data.regions.inside_box
    assert outside.any() and marginal[outside].max() < 1e-6  # outside the box: background
    assert marginal[~outside].mean() > 0.3  # and the object is found inside it
    # a bad prompt is refused with a sentence and the previous one stays
    at.session_state[prompts.STATE]["shape"] = the_run.problem.target.shape
    prompts._keep(at.session_state[prompts.STATE], (0.0, 0.0, 1.0, 1.0), [])
    at.run()
    assert "That prompt was not used: The box covers the whole photo" in texts(at.error)
    assert at.session_state["_run"].problem.data.prompt.box == box
    # another image drops the prompt
    at.selectbox(key="sample").set_value("horse").run()
    assert at.session_state["_run"].problem.data.__class__.__name__ == "DataTerm"
    assert at.session_state[prompts.STATE]["box"] is None


def prompted_run(size: str = "32") -> tuple[AppTest, state.Run]:
    """The app's run of the coffee photo with a box around the cup, not yet started."""
    at = open_app(source="sample", sample="coffee", size=size, burn_in="5")
    entry = at.session_state[prompts.STATE]
    entry.update(box=(0.1, 0.05, 0.8, 0.95), version=entry["version"] + 1)
    at.run()
    healthy(at)
    run = at.session_state["_run"]
    assert run.problem.data.refits == 0 and not run.running
    return at, run


def test_a_prompted_run_refits_its_colours_while_it_goes_on_then_settles_on_the_last():
    at, run = prompted_run()
    data0, comparison = run.problem.data, run.comparison
    steps, refits, moved = [], [], []
    while colour_refits.pending(run) and run.n_steps < 2000:
        before = run.n_steps
        state.advance(run, 0.05, max_steps=7)
        steps.append(run.n_steps)
        if run.problem.data.refits > len(refits):  # a refit (in that call): how far it moved
            refits.append(before)
            moved.append(run.refit_moved)
            # the run did not settle first: refits come on the library's schedule
            assert run.settled_at is None and not state.refresh_settledness(run)
            if colour_refits.pending(run):  # and the page says when settling is judged
                assert settled_text(run) == (
                    "Settling is judged once the colour refits are over: only the last "
                    "field's draws make the result.",
                    None,
                )
    assert refits, "no colour refit while the run went on"
    # every REFIT_SWEEPS sweeps of draws (a checkerboard step is a sweep; 5 of burn-in)
    assert refits[0] <= 5 + REFIT_SWEEPS + 7
    assert all(b - a <= REFIT_SWEEPS + 7 for a, b in zip(refits, refits[1:], strict=False))
    # the same run goes on: its chains, its step counter (never backwards), a new field
    assert at.session_state["_run"] is run and run.comparison is comparison
    assert steps == sorted(steps)
    data = run.problem.data
    assert data.refits == len(refits) and data is not data0
    for sampler in comparison.samplers.values():
        np.testing.assert_array_equal(sampler.target.alpha[0].numpy(), data.alpha)
    # the library's stopping rule: every refit but the last moved the mask by at least
    # REFIT_STABLE; the last moved it less, or was the REFITS-th
    assert all(m >= REFIT_STABLE for m in moved[:-1])
    assert moved[-1] < REFIT_STABLE or data.refits == colour_refits.REFITS
    assert moved == [run.refit_moved] if len(moved) == 1 else moved[-1] == run.refit_moved
    # the page says what happened, with the same counts
    at.run()
    healthy(at)
    assert f"Refit {data.refits} of at most {colour_refits.REFITS}: the colour models moved" in (
        texts(at.info)
    )
    assert "the run now settles on this field" in texts(at.info)
    # no more refits: the last field is sampled until settled, from its own draws only
    while not state.refresh_settledness(run) and run.n_steps < 3000:
        state.advance(run, 0.05, max_steps=25)
    assert state.refresh_settledness(run) and run.problem.data is data
    assert comparison.marginals[comparison.names[0]].count <= run.n_steps - refits[-1]
    marginal = recorded_marginal(run)
    outside = ~data.regions.inside_box
    assert outside.any() and marginal[outside].max() < 1e-6  # outside the box: background
    assert marginal[~outside].mean() > 0.3


def test_the_worker_refits_a_prompted_run_and_its_step_counter_goes_on():
    at, run = prompted_run()
    run_until(run, lambda: run.problem.data.refits >= 1, timeout=60)
    at.run()
    healthy(at)
    assert at.session_state["_run"] is run  # refitted in place: no new run, no reset
    shown = [
        int(m.replace(",", "")) for m in re.findall(r"Step \*\*([\d,]+)\*\*", texts(at.caption))
    ]
    assert shown and shown[0] >= 5 + REFIT_SWEEPS
    assert "Refit 1 of at most" in texts(at.info) or run.problem.data.refits > 1


def test_a_run_without_a_prompt_never_refits():
    at = open_app(source="sample", sample="coffee", size="32", burn_in="5")
    run = at.session_state["_run"]
    state.advance(run, 0.5, max_steps=5 + 3 * REFIT_SWEEPS)
    assert not colour_refits.pending(run) and run.refit_moved is None
    assert recorded_marginal(run) is not None
    assert run.comparison.marginals[run.comparison.names[0]].count == 3 * REFIT_SWEEPS


# ----------------------------------------------------------------------------- the two bugs
def test_flipping_the_object_keeps_a_sampled_mask_never_the_step_zero_one():
    at = open_app(source="sample", sample="cell", size="32", burn_in="5")
    run = at.session_state["_run"]
    run_until(run, lambda: recorded_marginal(run) is not None and run.n_steps > 40)
    before = recorded_marginal(run)
    at.radio(key="polarity").set_value("bright").run()  # what auto picked: nothing changes
    assert at.session_state["_run"] is run
    assert "That object class is the one already in use" in texts(at.info)
    at.radio(key="polarity").set_value("dark").run()  # the other class: alpha negated
    healthy(at)
    flipped = at.session_state["_run"]
    assert flipped.n_steps == 0
    marginal, source, sampled = snapshot(flipped)
    assert sampled and "classes swapped" in source
    np.testing.assert_allclose(marginal, 1.0 - before)  # exact: alpha negated
    at.session_state["view"] = "Segmentation"
    at.run()
    healthy(at)
    assert "Nothing to download yet" not in texts(at.info)
    assert "classes swapped" in texts(at.caption)
    # a fresh run with nothing to carry shows the states as not a result, and no downloads
    at.button(key="reset").click().run()
    assert snapshot(at.session_state["_run"])[1] == UNSAMPLED
    assert "Nothing to download yet" in texts(at.info)
    assert not at.get("download_button")


def test_the_threshold_is_handed_to_the_slider_and_survives_a_hidden_tab():
    at = open_app(source="sample", sample="cell", size="32")
    at.session_state["view"] = "Segmentation"
    at.run()
    slider = at.slider(key="seg_threshold")
    assert slider.value == 0.5
    slider.set_value(0.7).run()
    at.session_state["view"] = "Chains"  # the tab's widget is not drawn: Streamlit drops it
    at.run()
    at.session_state["view"] = "Segmentation"
    at.run()
    assert at.slider(key="seg_threshold").value == 0.7
    # the slider is created with its value, so a browser that mounts it afresh shows 0.70,
    # not the slider's minimum
    proto = at.slider(key="seg_threshold").proto
    assert list(proto.default) == [pytest.approx(0.7)]
