"""The RBM in the dashboard: the target picker, its links, the RBM page and its pins.

AppTest runs the real script on the shipped digits RBMs. The ground truth and noise floor of
a run are drawn by shorter Gibbs runs here (``short_truth``): what is tested is the page, not
the truth (tests/test_rbm_*.py test that against enumeration).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

import numpy as np
import pytest
from app_support import open_app, stop_runs_fixture  # noqa: F401  (autouse)

import lsbcore.rbm.live as rbm_live
from app import config as cfgmod
from app import pins, rbm_run, rbm_targets, rbm_training, sources, state
from app.text import plain, quote
from app.views import digits
from lsbcore.rbm.ground_truth import noise_floor
from lsbcore.targets.rbm import RBM

SIX = list(rbm_targets.DEFAULT_SAMPLERS)
SAMPLES = sources.sample_names()


@pytest.fixture(autouse=True)
def short_truth(monkeypatch):
    """Ground truth by 300 exact Gibbs steps of 200 chains, the floor alike (seconds, not
    minutes, on a busy machine)."""
    monkeypatch.setattr(rbm_live, "ground_truth", lambda rbm, steps: rbm.gibbs(200, 300, 0))
    monkeypatch.setattr(
        rbm_live,
        "noise_floor",
        lambda rbm, n, draws=1, steps=300, truth=None: noise_floor(
            rbm, n, 2, steps=300, truth=truth
        ),
    )


def healthy(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def wait_for_steps(run, n: int, timeout: float = 30.0) -> None:
    deadline = time.perf_counter() + timeout
    while run.n_steps < n and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert run.n_steps >= n, f"only {run.n_steps} steps after {timeout} s"


# ----------------------------------------------------------------------------- configuration
def test_target_link_round_trip_and_defaults():
    cfg = cfgmod.defaults_for(target="digits-16x16")
    assert (cfg.target, cfg.samplers, cfg.chains) == ("digits-16x16", tuple(SIX), 8)
    cfg = replace(cfg, samplers=("gwg", "hb-10-2", "barker"), chains=16, seed=7)
    back, warnings = cfgmod.from_query_params(cfgmod.to_query_params(cfg), SAMPLES)
    assert warnings == []
    assert back == replace(cfg, samplers=("barker", "gwg", "hb-10-2"))  # the variants' order
    assert cfgmod.validate({})[0].target == "ising"


def test_bad_target_and_samplers_in_a_link_say_so():
    cfg, warnings = cfgmod.validate({"target": "mnist"})
    assert cfg.target == "ising"
    assert warnings == [
        f"target: {quote('mnist')} is not one of ising, digits-8x8, digits-16x16, own, mn1, "
        "mn2, uai, vs; using the default."
    ]
    cfg, warnings = cfgmod.validate({"target": "digits-8x8", "samplers": "gwg,checkerboard"})
    assert cfg.samplers == ("gwg",)
    assert warnings == [
        f"samplers: {quote('checkerboard')} is not one of the RBM comparison's samplers; ignored."
    ]
    cfg, warnings = cfgmod.validate({"samplers": "gibbs-2"})  # an RBM variant on the Ising page
    assert cfg.samplers == cfgmod.PAPER_SAMPLERS and warnings


def test_digit_strip_draws_on_units_dark_tile_by_tile():
    states = np.array([[1, -1, -1, 1], [-1, -1, -1, 1]], dtype=np.float64)
    strip = digits.digit_strip(states, (2, 2), tile_px=4)  # 2 screen pixels per unit
    ink, paper = digits.INK, digits.PAPER
    first = np.array([[ink, paper], [paper, ink]]).repeat(2, 0).repeat(2, 1)
    second = np.array([[paper, paper], [paper, ink]]).repeat(2, 0).repeat(2, 1)
    gap = np.full((4, digits.GAP_PX), digits.GAP)
    assert np.array_equal(strip, np.concatenate([first, gap, second], axis=1))
    with pytest.raises(ValueError, match="states must be"):
        digits.digit_strip(states, (3, 3))


def test_checkpoints_are_spaced_geometrically():
    steps = [0]
    while steps[-1] < 100:
        steps.append(rbm_run.next_record(steps[-1]))
    # one step apart while 8% of the steps is at most one (n <= 12.5), then ceil(1.08 n)
    assert steps[:15] == [*range(14), 15]
    gaps = np.diff(steps)
    assert all(b >= a for a, b in zip(gaps, gaps[1:], strict=False))
    assert rbm_run.next_record(1000) == 1080


# ----------------------------------------------------------------------------- the page
def test_a_link_opens_the_rbm_page_and_runs_it():
    at = open_app(target="digits-8x8", chains="4", burn_in="30")
    healthy(at)
    run = at.session_state["_run"]
    assert rbm_run.is_rbm_run(run) and run.comparison.labels == SIX
    assert run.config.chains == 4 and run.problem.target.shape == (8, 8)
    assert len(at.image) == len(SIX)  # one row of digits per sampler
    before = {label: run.comparison.states(label).clone() for label in SIX}
    at.button(key="run").click().run()
    wait_for_steps(run, 60)
    at.button(key="pause").click().run()
    healthy(at)
    assert run.phase == "mixing"  # burn-in ended: the learned functions froze
    moved = [label for label in SIX if not run.comparison.states(label).equal(before[label])]
    assert moved == SIX
    curve = run.comparison.curve("lsb1")
    assert curve["step"][0] == 0 and curve["step"][-1] == run.n_steps  # a final checkpoint
    for tab in ("MMD", "Balancing functions", "Softmax weights", "Acceptance and hops"):
        at.session_state["rbm_view"] = tab
        at.run()
        healthy(at)
        if tab == "Acceptance and hops":
            assert at.dataframe[0].value.shape[0] == len(SIX)
        else:
            assert at.get("plotly_chart"), tab
    assert any("Ising posterior" in str(c.value) for c in at.caption)  # what is not offered
    assert at.query_params["target"] == "digits-8x8"
    at.button(key="reset").click().run()  # Reset: the same start again
    healthy(at)
    new = at.session_state["_run"]
    assert new is not run and new.n_steps == 0 and rbm_run.is_rbm_run(new)
    assert all(new.comparison.states(label).equal(before[label]) for label in SIX)


def test_walking_the_targets_never_fails():
    at = open_app()
    healthy(at)
    assert not rbm_run.is_rbm_run(at.session_state["_run"])
    visited = set()
    for target in ("digits-8x8", "ising", "digits-16x16", "ising", "own", "digits-8x8"):
        again, _ = target in visited, visited.add(target)
        at.sidebar.selectbox(key="target").set_value(target).run()
        healthy(at)
        run = at.session_state["_run"]
        if target == "own":  # no model in this session yet: the page says what to do
            assert any("train a model" in str(i.value) for i in at.info)
            assert not run.running
        elif target == "ising":
            assert run.config.samplers == cfgmod.PAPER_SAMPLERS and run.config.chains == 4
        else:
            assert run.comparison.labels == SIX and run.config.target == target
            at.button(key="step").click().run()  # Step: one plain step of every sampler
            healthy(at)
            # a target chosen again comes back with its run (paused), its step kept
            assert at.session_state["_run"].n_steps == (2 if again else 1)


def test_a_bad_target_link_gets_the_link_warning():
    at = open_app(target="mnist")
    healthy(at)
    assert any(
        str(w.value).startswith(f"Link: target: {quote('mnist')} is not one of") for w in at.warning
    )
    assert not rbm_run.is_rbm_run(at.session_state["_run"])


# ----------------------------------------------------------------------------- pins
def small_run(labels=("barker", "lsb1", "flsb1", "gibbs-2")) -> state.Run:
    rbm = RBM.random(16, 6, seed=3)
    cfg = replace(cfgmod.defaults_for(target="digits-8x8"), samplers=labels, chains=4, burn_in=5)
    run, _ = state.build_rbm_run(cfg, RBM(rbm.W, rbm.b_visible, rbm.b_hidden, (4, 4)), "tiny")
    state.advance(run, 10.0, max_steps=40)
    return run


def test_a_pin_of_an_rbm_run_keeps_its_mmd_curves_and_reads_back():
    run = small_run()
    pin = pins.capture(run, "tiny RBM", now=1.0e9)
    assert set(pin.mmd) == set(run.config.samplers) and pin.acf == {}
    curve = run.comparison.curve("gibbs-2")
    assert pin.mmd["gibbs-2"]["evals"] == curve["evals"]
    assert set(pin.learned) == {"lsb1", "flsb1"} and pin.weights is not None
    back = pins.from_json(pin.to_json())
    assert back == pin
    data = json.loads(pin.to_json())
    data["mmd"]["barker"]["log_mmd"].pop()  # curves of unequal length
    with pytest.raises(pins.PinError, match="equally long"):
        pins.from_dict(data)
    data = json.loads(pin.to_json())
    data["mmd"]["barker"]["evals"][1] = -5
    with pytest.raises(pins.PinError, match="evaluations must be a whole number"):
        pins.from_dict(data)
    data = json.loads(pin.to_json())
    data["config"]["target"] = "ising"  # MMD curves on an Ising pin, with RBM samplers
    with pytest.raises(pins.PinError):
        pins.from_dict(data)


def test_a_pin_from_before_the_target_picker_is_an_ising_pin():
    data = {
        "format": pins.FORMAT,
        "version": pins.VERSION,
        "name": "old",
        "created": 1.0e9,
        "problem": "case 3",
        "config": {k: v for k, v in cfgmod.Config().as_dict().items() if k != "target"},
        "steps": 10,
        "samplers": {},
    }
    assert pins.from_dict(data).config.target == "ising"


# ----------------------------------------------------------------------------- own model
def test_training_runs_in_the_background_and_stops_when_asked():
    rng = np.random.default_rng(0)
    rows = (rng.random((60, 9)) < 0.3).astype(np.uint8)
    job = rbm_training.start(rows, (3, 3), "abc", hidden=4, epochs=3)
    job.thread.join(60)
    assert job.error is None and job.stopped is None and job.fraction == pytest.approx(1.0)
    assert (job.model.n_visible, job.model.n_hidden, job.model.shape) == (9, 4, (3, 3))
    stopped = rbm_training.Job("abc", rows, (3, 3), 4, 500, stop=True)
    rbm_training._train(stopped)  # Stop pressed: the first update's progress call ends it
    assert stopped.stopped and stopped.model is not None
    bad = rbm_training.Job("abc", rows, (3, 3), 0, 3)  # no hidden units: A's sentence
    rbm_training._train(bad)
    assert bad.model is None and "n_hidden" in bad.error


def test_every_rbm_view_has_its_presentation_sentence():
    from app.view_catalogue import ISING, RBM

    assert all(view.seeing for view in RBM.views)
    shared = set(RBM.labels) & set(ISING.labels)  # a view on both pages says the same
    assert shared and all(RBM.view(n).seeing == ISING.view(n).seeing for n in shared)


def test_pinning_on_the_rbm_page_in_presentation_mode(tmp_path, monkeypatch):
    from app import pin_store

    monkeypatch.setattr(pin_store, "ROOT", tmp_path)
    at = open_app(target="digits-8x8", chains="2", burn_in="5", present="1")
    healthy(at)
    html = " ".join(str(h.proto.body) for h in at.get("html"))
    assert "What you are seeing." in html and "recognisable handwritten digits" in html
    state.advance(at.session_state["_run"], 30.0, 20)
    at.text_input(key="pin_name").input("eight by eight")
    at.button(key="pin_save").click().run()
    healthy(at)
    assert [str(s.value) for s in at.success] == [
        "Pinned “eight by eight”: see the Pinned runs tab."
    ]
    at.session_state["rbm_view"] = "Pinned runs"
    at.run()
    healthy(at)
    rows = at.dataframe[0].value
    assert list(rows["run"].unique()) == ["1. eight by eight"] and len(rows) == len(SIX)
    (pin_id,) = [e.pin_id for e in at.session_state[pin_store.STATE_KEY].entries()]
    assert at.button(key=f"pin_delete_{pin_id}")  # managed on its own page
    at.sidebar.selectbox(key="target").set_value("ising").run()  # its pin on the Ising page
    at.session_state["view"] = "Compare"
    at.run()
    healthy(at)
    captions = [str(c.value) for c in at.caption]
    assert "Pins of other targets, compared on their own page: eight by eight." in captions


def test_your_own_data_is_trained_on_and_then_sampled_like_a_shipped_model():
    import io

    at = open_app(target="own", chains="2", burn_in="5")
    healthy(at)
    at.sidebar.file_uploader(key="rbm_upload").upload("notes.npy", b"not an array", "x/y")
    at.run()
    assert not at.exception
    sentence = "The file is not a readable .npy array (its header is damaged)."  # A's words
    assert [str(e.value) for e in at.sidebar.error] == [
        f"This file cannot be trained on: {plain(sentence)}"
    ]
    assert at.button(key="rbm_train").disabled
    rows = (np.random.default_rng(1).random((80, 4, 4)) < 0.4).astype(np.uint8)
    buffer = io.BytesIO()
    np.save(buffer, rows)
    at.sidebar.file_uploader(key="rbm_upload").upload("mine.npy", buffer.getvalue(), "x/y")
    at.run()
    healthy(at)
    assert any("80 rows of 16 values, images 4 × 4" in str(c.value) for c in at.sidebar.caption)
    at.number_input(key="rbm_hidden").set_value(6)
    at.number_input(key="rbm_epochs").set_value(3)
    at.button(key="rbm_train").click().run()
    job = at.session_state[rbm_training.KEY]
    job.thread.join(60)
    at.run()
    healthy(at)
    run = at.session_state["_run"]
    assert run.problem.target is job.model and run.comparison.labels == SIX
    assert (job.model.n_hidden, job.model.shape) == (6, (4, 4))
    state.advance(run, 30.0, 10)
    assert run.n_steps == 10 and len(at.image) == len(SIX)


def test_a_link_opens_an_rbm_view_and_a_bad_one_says_so():
    at = open_app(target="digits-8x8", chains="2", rbm_view="MMD")
    healthy(at)
    assert at.get("plotly_chart") and not at.image  # the MMD chart, not the digit grid
    assert at.query_params["rbm_view"] == "MMD"
    at = open_app(target="digits-8x8", chains="2", rbm_view="Segmentation")
    healthy(at)
    assert any("RBM view" in str(w.value) for w in at.warning) and len(at.image) == len(SIX)


def test_your_own_model_keeps_its_data_settings_and_training_across_a_target_switch():
    """Issue 46, item 7: the upload, the boxes and the training outlive a visit to another
    target, and the bar goes once the training is done."""
    import io

    at = open_app(target="own", chains="2", burn_in="5")
    rows = (np.random.default_rng(2).random((400, 8, 8)) < 0.4).astype(np.uint8)
    buffer = io.BytesIO()
    np.save(buffer, rows)
    at.sidebar.file_uploader(key="rbm_upload").upload("mine.npy", buffer.getvalue(), "x/y")
    at.run()
    at.number_input(key="rbm_hidden").set_value(200)
    at.number_input(key="rbm_epochs").set_value(500)
    at.run()
    at.sidebar.selectbox(key="target").set_value("ising").run()
    at.sidebar.selectbox(key="target").set_value("own").run()
    healthy(at)
    # Streamlit cannot put a file back in its box: the data read stay in use, and say so
    captions = [str(c.value) for c in at.sidebar.caption]
    assert (
        f"Using {quote('mine.npy')}, read earlier in this session; upload another file "
        "to replace it." in captions
    )
    assert "400 rows of 64 values, images 8 × 8." in captions
    assert (at.number_input(key="rbm_hidden").value, at.number_input(key="rbm_epochs").value) == (
        200,
        500,
    )
    assert not at.button(key="rbm_train").disabled  # the kept data can be trained on
    at.button(key="rbm_train").click().run()
    job = at.session_state[rbm_training.KEY]
    assert (job.hidden, job.epochs, job.rows.shape) == (200, 500, (400, 64))
    at.sidebar.selectbox(key="target").set_value("ising").run()
    at.sidebar.selectbox(key="target").set_value("own").run()
    assert (at.number_input(key="rbm_hidden").value, at.number_input(key="rbm_epochs").value) == (
        200,
        500,
    )
    if job.running:  # mid-training: the bar and Stop are drawn, Train waits
        assert at.button(key="rbm_train").disabled and len(at.button(key="rbm_stop").proto.label)
        job.stop = True
    job.thread.join(60)
    at.run()
    healthy(at)
    assert not [b for b in at.button if b.key == "rbm_stop"]  # done: no bar, no Stop
    assert not at.sidebar.get("progress")
    trained = [str(c.value) for c in at.sidebar.caption if str(c.value).startswith("Trained")]
    assert trained and trained[0].startswith("Trained: 64 visible, 200 hidden units")
    assert at.session_state["_run"].problem.target is job.model


def test_the_mmd_tab_draws_its_curves_and_says_what_it_computes_before_the_floor(monkeypatch):
    # the floor stops half-way: what the page shows by then is what a visitor sees meanwhile
    def unfinished(*args, **kwargs):
        raise RuntimeError("the floor is still being computed")

    monkeypatch.setattr(rbm_live, "noise_floor", unfinished)
    at = open_app(target="digits-8x8", chains="2", rbm_view="MMD")
    assert at.get("plotly_chart"), "no chart while the floor is computed"
    notes = " ".join(str(i.value) for i in at.info)
    assert "Computing the noise floor: 8 draws of 2 exact samples" in notes, notes


def test_the_mmd_chart_is_built_again_only_when_a_checkpoint_was_added(monkeypatch):
    from app.views import rbm_mmd

    at = open_app(target="digits-8x8", chains="2", rbm_view="MMD", burn_in="0")
    healthy(at)
    run = at.session_state["_run"]
    built = []
    real = rbm_mmd.mmd_figure
    monkeypatch.setattr(rbm_mmd, "mmd_figure", lambda *a, **k: built.append(1) or real(*a, **k))
    with run.lock:
        run.comparison.step(1)  # the run moves on, but no checkpoint is due yet
    assert run.n_steps > 0 and len(run.comparison.curve(run.comparison.labels[0])["step"]) == 1
    at.run()
    healthy(at)
    assert built == [], "the same curves were drawn into a new figure"
    with run.lock:
        rbm_run.checkpoint(run, force=True)
    at.run()
    assert len(built) == 1 and at.get("plotly_chart")


def test_a_file_removed_from_the_box_is_no_longer_in_use_but_one_hidden_by_a_target_is():
    import io

    at = open_app(target="own", chains="2", burn_in="5")
    rows = (np.random.default_rng(4).random((50, 4, 4)) < 0.4).astype(np.uint8)
    buffer = io.BytesIO()
    np.save(buffer, rows)
    at.sidebar.file_uploader(key="rbm_upload").upload("mine.npy", buffer.getvalue(), "x/y")
    at.run()
    at.sidebar.selectbox(key="target").set_value("ising").run()
    at.sidebar.selectbox(key="target").set_value("own").run()
    assert not at.button(key="rbm_train").disabled  # hidden a while, not removed: still in use
    at.sidebar.file_uploader(key="rbm_upload").upload("mine.npy", buffer.getvalue(), "x/y")
    at.run()
    assert "50 rows of 16 values, images 4 × 4." in [str(c.value) for c in at.sidebar.caption]
    at.sidebar.file_uploader(key="rbm_upload").clear()
    at.run()
    healthy(at)
    assert at.button(key="rbm_train").disabled
    assert not any("rows of" in str(c.value) for c in at.sidebar.caption)
    at.sidebar.selectbox(key="target").set_value("ising").run()
    at.sidebar.selectbox(key="target").set_value("own").run()
    assert at.button(key="rbm_train").disabled  # removed stays removed


def test_a_run_waiting_for_the_rbms_kernels_says_so(monkeypatch):
    """A fresh install's first minute: the RBM's compiled steps are not ready and its run
    waits for them (no torch steps: they slowed the compile), and the status line says why
    instead of "starting"; once they are ready, or once it has steps, it says what it did."""
    from lsbcore.samplers import warmup

    monkeypatch.setattr(warmup, "_compiled", type(warmup._compiled)())
    monkeypatch.setattr(warmup, "_sections", {k: type(e)() for k, e in warmup._sections.items()})
    monkeypatch.setattr(warmup, "compile_kernels", lambda: None)  # the page's own warm-up
    at = open_app(target="digits-8x8", chains="4")
    run = at.session_state["_run"]
    assert state.waits_for_kernels(run)
    waiting = "compiling the RBM's steps (once after an install: about a minute)"
    run.running = True  # as the worker has it before its first step (no worker: none steps)
    try:
        at.run()
        healthy(at)
        assert any(waiting in str(c.value) for c in at.caption)
        warmup._sections["rbm"].set()
        assert not state.waits_for_kernels(run)
        at.run()
        assert not any(waiting in str(c.value) for c in at.caption)
        assert any("**starting**" in str(c.value) for c in at.caption)
    finally:
        run.running = False
    cfg = replace(cfgmod.Config(), chains=2)
    lattice, _ = state.build_run(cfg, sources.build_problem(cfg))
    warmup._sections["rbm"].clear()
    assert not state.waits_for_kernels(lattice)  # a lattice's run takes torch steps meanwhile


def test_the_worker_waits_for_the_rbms_kernels_without_holding_the_run(monkeypatch):
    """Started before the RBM's kernels are ready, the worker takes no step and leaves the
    run's lock free (the page reads it five times a second: a worker holding it while a
    compiled call waited on numba's compiler froze the page); the steps come once they are."""
    from lsbcore.samplers import warmup

    monkeypatch.setattr(warmup, "_compiled", type(warmup._compiled)())
    monkeypatch.setattr(warmup, "_sections", {k: type(e)() for k, e in warmup._sections.items()})
    config = replace(cfgmod.defaults_for(target="digits-8x8"), chains=2, burn_in=20, steps=50)
    run, _ = state.build_rbm_run(config, rbm_targets.load_shipped("digits-8x8"), "digits")
    state.start(run)
    try:
        for _ in range(10):
            time.sleep(0.1)
            run.last_seen = time.perf_counter()
            assert run.lock.acquire(timeout=0.5)
            run.lock.release()
        assert run.running and run.steps_done == 0
        warmup._sections["rbm"].set()
        deadline = time.perf_counter() + 30
        while not run.finished and time.perf_counter() < deadline:
            run.last_seen = time.perf_counter()
            time.sleep(0.05)
        assert run.finished and run.steps_done == 70
    finally:
        state.pause(run)


def test_a_one_row_upload_is_counted_in_the_singular():
    import io

    at = open_app(target="own", chains="2", burn_in="5")
    buffer = io.BytesIO()
    np.save(buffer, np.ones((1, 1), dtype=np.uint8))
    at.sidebar.file_uploader(key="rbm_upload").upload("one.npy", buffer.getvalue(), "x/y")
    at.run()
    healthy(at)
    assert "1 row of 1 value." in [str(c.value) for c in at.sidebar.caption]
