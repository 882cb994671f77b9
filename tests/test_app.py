"""The dashboard end to end with Streamlit's AppTest (no browser), plus its configuration logic.

AppTest runs the real script: widgets are set, buttons clicked, the script rerun (which also
runs the live fragment once). Sampling runs on the run's worker thread, so tests that press
Run wait for steps with ``wait_for_steps``; every run is paused when its test ends.
"""

from __future__ import annotations

import io
import re
import time
from dataclasses import replace
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
import torch
from app_support import APP, open_app, stop_runs_fixture  # noqa: F401  (autouse)
from PIL import Image
from streamlit.testing.v1 import AppTest

import lsbcore
from app import config as cfgmod
from app import live, pin_store, sidebar, sources, state
from app.text import counted
from app.view_catalogue import ISING
from app.views import annealing, export, why
from lsbcore.samplers import warmup
from lsbcore.segmentation.segment import overlay_at_size

TABS = (
    "Chains",
    "Proposal",
    "Balancing functions",
    "Softmax weights",
    "Convergence",
    "Mixing",
    "Segmentation",
    "Exact chain",
    "Tempering",
    "MAP (annealing)",
    "Importance sampling",
    "Block proposals",
    "Flow",
    "Export",
    "Compare",
    "Which g where",
)
SAMPLES = sources.sample_names()


def the_run(at: AppTest) -> state.Run:
    return at.session_state["_run"]


def assert_healthy(at: AppTest) -> None:
    """No traceback and no error box on the page."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def texts(elements) -> str:
    return " | ".join(str(e.value) for e in elements)


def wait_for_steps(run: state.Run, n: int, timeout: float = 30.0) -> None:
    deadline = time.perf_counter() + timeout
    while run.n_steps < n and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert run.n_steps >= n, f"only {run.n_steps} steps after {timeout} s"


def png_bytes(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return buffer.getvalue()


def dark_disc(height: int = 60, width: int = 80) -> np.ndarray:
    yy, xx = np.mgrid[0:height, 0:width]
    disc = (yy - height / 2) ** 2 + (xx - width / 2) ** 2 < (height / 3) ** 2
    return np.where(disc, 60, 200).astype(np.uint8)


# ----------------------------------------------------------------------------- first load
PAPER_SIX = ["barker", "sqrt", "min", "max", "lsb1", "lsb2"]  # the paper's comparison


def test_first_load_is_paper_case_3_with_the_papers_six_samplers_ready_to_run():
    at = open_app()
    assert_healthy(at)
    assert at.radio(key="source").value == "paper"
    assert at.selectbox(key="case").value == 3
    assert at.multiselect(key="samplers").value == PAPER_SIX
    assert {"run", "pause", "step", "reset"} <= {b.key for b in at.button}
    assert not at.button(key="run").disabled and at.button(key="pause").disabled
    run = the_run(at)
    assert run.n_steps == 0 and not run.running
    assert run.problem.target.shape == (30, 30) and run.problem.truth is not None
    assert run.comparison.names == PAPER_SIX
    # posterior (alpha, truth) and one chain panel per sampler
    assert len(at.image) >= 2 + 6
    assert not at.file_uploader  # the upload box belongs to "Your image"
    assert at.query_params["case"] == "3"  # the URL carries the configuration


# ----------------------------------------------------------------------------- buttons
def test_run_samples_in_the_background_until_paused():
    at = open_app(burn_in="30")
    at.button(key="run").click().run()
    run = the_run(at)
    assert run.running
    wait_for_steps(run, 40)  # past burn-in: the learned functions froze
    at.run()
    assert_healthy(at)
    assert run.phase == "mixing"
    assert "steps/s" in texts(at.caption) or "starting" in texts(at.caption)
    at.button(key="pause").click().run()
    assert not run.running
    steps = run.n_steps
    time.sleep(0.2)
    assert run.n_steps == steps
    assert not at.button(key="run").disabled


def test_the_sidebar_offers_the_dashboards_samplers_only():
    """The samplers on any target (block Gibbs, Hamming ball, the gradient samplers, FLSB) run
    from the library; the sidebar neither lists them nor names them among its learners."""
    at = open_app()
    assert_healthy(at)
    offered = set(at.multiselect(key="samplers").options)
    labels = {name: sidebar.SAMPLER_LABELS[name] for name in lsbcore.REGISTRY}
    assert offered == {labels[name] for name in lsbcore.REGISTRY if lsbcore.REGISTRY[name].app}
    assert not offered & {labels[n] for n in lsbcore.REGISTRY if not lsbcore.REGISTRY[n].app}
    learning = [e.label for e in at.expander if e.label.startswith("Learning")]
    assert learning == ["Learning (LSB 1, LSB 2)"]


def test_step_takes_one_step_in_slow_motion_on_the_proposal_tab():
    at = open_app()
    at.button(key="step").click().run()
    assert_healthy(at)
    run = the_run(at)
    assert run.n_steps == 1 and not run.running
    assert at.session_state["view"] == "Proposal"
    report = run.last_step
    assert (
        report is not None and report.step == 1 and set(report.sites) == set(run.comparison.names)
    )
    site = report.sites["barker"]
    assert site.q.shape == (30, 30) and site.q.sum() == pytest.approx(1.0)
    assert (site.t <= site.q + 1e-15).all()  # T = Q A with A <= 1
    assert len(at.dataframe) == 1  # the per-sampler step table
    # the report names the proposed site and the decision, and they match what happened
    for name, step in report.sites.items():
        after = run.comparison[name].x[report.chain].cpu().numpy()
        changed = {tuple(int(v) for v in rc) for rc in np.argwhere(after != step.state)}
        assert changed == ({step.site} if step.accepted else set()), name
        assert 0.0 <= step.accept_prob <= 1.0


def test_reset_starts_again_from_step_zero():
    at = open_app()
    at.button(key="step").click().run()
    at.button(key="reset").click().run()
    assert_healthy(at)
    assert the_run(at).n_steps == 0


# ----------------------------------------------------------------------------- changes
def test_changing_the_posterior_resets_the_run_and_says_so():
    at = open_app()
    at.button(key="step").click().run()
    at.number_input(key="lam").set_value(0.5).run()
    assert_healthy(at)
    assert "The posterior changed (λ): the run was reset." in texts(at.info)
    run = the_run(at)
    assert run.n_steps == 0 and run.problem.target.lam == 0.5


@pytest.mark.parametrize(
    "widget, key, value, says",
    [
        ("number_input", "lam", 0.5, "The posterior changed (λ)"),
        ("slider", "chains", 2, "The sampler settings changed (chains)"),
        ("multiselect", "samplers", ["sqrt", "max"], "The sampler settings changed (samplers)"),
    ],
)
@pytest.mark.parametrize("running", [True, False], ids=["running", "paused"])
def test_one_rule_for_resets_keeps_running_or_paused(widget, key, value, says, running):
    """Any change that invalidates the run resets it, says what changed and keeps the state
    the user had: a running run runs on, a paused one stays paused."""
    at = open_app(burn_in="50000", steps="200000", speed="10")
    at.button(key="step").click().run()
    if running:
        at.button(key="run").click().run()
    old = the_run(at)
    assert old.running == running
    getattr(at, widget)(key=key).set_value(value).run()
    assert_healthy(at)
    new = the_run(at)
    assert new is not old and not old.running
    assert new.running == running
    assert f"{says}: the run was reset." in texts(at.info)
    if running:
        at.button(key="pause").click().run()
        assert not new.running


def test_changing_the_samplers_rebuilds_the_comparison():
    at = open_app()
    at.multiselect(key="samplers").set_value(["sqrt", "gibbs"]).run()
    assert_healthy(at)
    assert the_run(at).comparison.names == ["sqrt", "gibbs"]
    at.session_state["view"] = "Softmax weights"
    at.run()
    assert "Add **LSB 1**" in texts(at.info)
    at.multiselect(key="samplers").set_value([]).run()
    assert "Select at least one sampler" in texts(at.info)
    assert not at.exception


def test_choosing_a_paper_case_applies_its_parameters():
    at = open_app()
    at.selectbox(key="case").set_value(4).run()
    assert_healthy(at)
    assert at.number_input(key="mu").value == 3.0
    assert the_run(at).problem.name.startswith("case 4")


def test_live_settings_do_not_reset_the_run():
    at = open_app()
    at.button(key="step").click().run()
    at.number_input(key="steps").set_value(20_000).run()
    at.select_slider(key="speed").set_value("5").run()
    assert_healthy(at)
    run = the_run(at)
    assert run.n_steps == 1 and run.config.steps == 20_000 and run.config.speed == "5"


# ----------------------------------------------------------------------------- images
def fast_machine(monkeypatch):
    """The automatic resolution follows the machine's measured speed; a busy test machine
    would pick a smaller one than these tests' photos, so the speed is set, not measured."""
    monkeypatch.setattr(warmup, "site_update_rate", lambda: 1e9)


def test_choosing_your_image_shows_the_upload_box_and_an_upload_is_segmented(monkeypatch):
    fast_machine(monkeypatch)
    at = open_app()
    at.radio(key="source").set_value("upload").run()
    assert_healthy(at)
    assert "Upload an image above" in texts(at.sidebar.info)
    at.file_uploader(key="upload").upload("disc.png", png_bytes(dark_disc()), "image/png")
    at.run()
    assert_healthy(at)
    run = the_run(at)
    # a photo smaller than the speed-based pick is sampled at its own size, and the page says
    # what it picked
    assert run.problem.target.shape == (60, 80) and at.session_state["size"] == 80
    assert "Picked 80 px" in texts(at.sidebar.caption)
    assert "under a second at this size" in texts(at.sidebar.caption)
    assert run.image is not None and run.problem.target.boundary == "free"
    # the dark disc is the object: positive alpha in the middle, negative at the corner
    alpha = run.problem.target.alpha[0]
    assert alpha[30, 40] > 0 > alpha[0, 0]
    assert run.comparison.names == ["checkerboard"]  # block Gibbs is the default for photos
    assert run.config.chains == cfgmod.IMAGE_CHAINS  # settling is judged across chains
    assert run.problem.polarity == "dark"  # picked automatically: the disc avoids the border


class SpeedLater:
    """The machine's speed, unknown (the kernels compiling) until ``arrive`` measures it."""

    def __init__(self, monkeypatch, rate: float = 20e6):
        self.rate, self.measured = rate, False
        monkeypatch.setattr(warmup, "site_update_rate", self)

    def __call__(self) -> float | None:
        return self.rate if self.measured else None

    def arrive(self) -> None:
        self.measured = True


CAMERA = (512, 512)  # the camera sample's own size


def test_a_size_picked_before_the_speed_is_picked_again_once_it_is_measured(monkeypatch):
    speed = SpeedLater(monkeypatch)
    at = open_app(source="sample", sample="horse")
    at.selectbox(key="sample").set_value("camera").run()
    assert_healthy(at)
    assert at.session_state["size"] == cfgmod.DEFAULT_IMAGE_SIZE
    assert "not measured yet" in texts(at.sidebar.caption)
    at.run()  # still compiling: nothing moves
    assert at.session_state["size"] == cfgmod.DEFAULT_IMAGE_SIZE
    speed.arrive()
    at.run()  # the sidebar's poll finds the speed and reruns the page, which picks again
    assert_healthy(at)
    picked = cfgmod.pick_size(20e6, CAMERA)
    assert picked != cfgmod.DEFAULT_IMAGE_SIZE
    assert at.session_state["size"] == picked
    assert the_run(at).config.size == picked
    assert f"Picked {picked} px" in texts(at.sidebar.caption)
    assert "not measured yet" not in texts(at.sidebar.caption)
    at.slider(key="size").set_value(96).run()  # afterwards the size is the user's
    at.run()
    assert at.session_state["size"] == 96


def test_a_size_set_by_hand_or_a_run_begun_before_the_speed_keeps_its_size(monkeypatch):
    speed = SpeedLater(monkeypatch)
    by_hand = open_app(source="sample", sample="horse")
    by_hand.selectbox(key="sample").set_value("camera").run()
    by_hand.slider(key="size").set_value(64).run()
    begun = open_app(source="sample", sample="horse")
    begun.selectbox(key="sample").set_value("camera").run()
    begun.button(key="step").click().run()
    speed.arrive()
    for at, size in ((by_hand, 64), (begun, cfgmod.DEFAULT_IMAGE_SIZE)):
        at.run()
        at.run()
        assert_healthy(at)
        assert at.session_state["size"] == size
        assert the_run(at).config.size == size
    assert the_run(begun).n_steps == 1  # the step taken is not thrown away
    # ... and the note says what the measured speed would pick, no longer "not measured yet"
    notes = texts(begun.sidebar.caption)
    better = cfgmod.pick_size(20e6, CAMERA)
    assert "and kept: its run has begun" in notes and f"{better} px would settle" in notes
    assert "not measured yet" not in notes


def test_a_fallback_size_left_for_another_source_is_picked_again_on_return(monkeypatch):
    speed = SpeedLater(monkeypatch)
    at = open_app(source="sample", sample="horse")
    at.selectbox(key="sample").set_value("camera").run()
    at.radio(key="source").set_value("paper").run()
    speed.arrive()
    at.run()
    assert the_run(at).problem.name.startswith("case 3")  # a paper case has no pick
    at.radio(key="source").set_value("sample").run()
    at.run()
    assert_healthy(at)
    assert at.session_state["size"] == cfgmod.pick_size(20e6, CAMERA)


def test_a_junk_upload_shows_why_and_the_app_keeps_running():
    at = open_app()
    at.radio(key="source").set_value("upload").run()
    at.file_uploader(key="upload").upload("notes.png", b"this is not an image", "image/png")
    at.run()
    assert not at.exception
    assert len(at.error) == 1 and "image" in at.error[0].value.lower()
    assert "Upload an image" in texts(at.info)  # nothing to sample yet, and the page says so
    at.radio(key="source").set_value("paper").run()
    assert_healthy(at)
    assert the_run(at).problem.name.startswith("case 3")
    # the decoding function itself: a sentence, not an exception
    image, error = sources.read_upload(b"\x89PNG\r\n\x1a\nbroken", 48)
    assert image is None and error


# ----------------------------------------------------------------------------- the sidebar's state
# Streamlit drops the key of a widget it did not draw and runs callbacks before the script: the
# second change of source used to read a dropped key ("st.session_state has no key 'case'").
# This walk takes every ordered pair of sources, with an upload, a case and a sample in between.
SOURCE_WALK = ("upload", "sample", "paper", "sample", "upload", "paper", "upload", "sample")


def test_every_change_of_source_case_sample_and_upload_keeps_the_page(monkeypatch):
    fast_machine(monkeypatch)
    at = open_app(size="24")
    for source in SOURCE_WALK:  # one change right after another: a key hidden in the last run
        at.radio(key="source").set_value(source).run()
        assert_healthy(at)
        assert at.radio(key="source").value == source
    seen = [("upload", "none yet")]
    for k, source in enumerate(SOURCE_WALK[::-1]):
        at.radio(key="source").set_value(source).run()
        assert_healthy(at)
        if source == "paper":
            case = 1 + k % 4
            at.selectbox(key="case").set_value(case).run()
            assert the_run(at).problem.name.startswith(f"case {case}")
            assert at.number_input(key="mu").value == lsbcore.PAPER_CASES[case][2]
        elif source == "sample":
            at.selectbox(key="sample").set_value(("horse", "cell")[k % 2]).run()
        else:
            height = 40 + 8 * k  # a new photo each time: a new working resolution
            at.file_uploader(key="upload").upload(
                f"disc{k}.png", png_bytes(dark_disc(height, 50)), "image/png"
            )
            at.run()
            assert the_run(at).problem.target.shape == (height, 50)
        assert_healthy(at)
        seen.append((source, the_run(at).problem.name))
        assert at.radio(key="source").value == source, seen
        assert at.slider(key="chains").value >= (2 if source != "paper" else 1), seen


def test_the_photo_is_kept_while_another_source_is_shown_and_dropped_when_removed():
    at = open_app()
    at.radio(key="source").set_value("upload").run()
    at.file_uploader(key="upload").upload("disc.png", png_bytes(dark_disc()), "image/png")
    at.run()
    first = the_run(at).photo
    at.radio(key="source").set_value("sample").run()
    at.radio(key="source").set_value("upload").run()
    assert_healthy(at)
    kept = the_run(at).photo  # the same photo, not an empty box
    assert kept.original_shape == first.original_shape == (60, 80)
    np.testing.assert_array_equal(kept.luma, first.luma)
    assert "Using “disc\\.png”" in texts(at.sidebar.caption)
    at.radio(key="source").set_value("paper").run()
    at.radio(key="source").set_value("upload").run()
    at.file_uploader(key="upload").upload("disc.png", png_bytes(dark_disc()), "image/png")
    at.run()
    at.file_uploader(key="upload").clear().run()  # the user removes it
    assert_healthy(at)
    assert "Upload an image above" in texts(at.sidebar.info)


def test_a_photo_keeps_its_chains_through_a_new_upload_and_never_runs_one_chain():
    at = open_app()
    at.radio(key="source").set_value("upload").run()
    at.file_uploader(key="upload").upload("a.png", png_bytes(dark_disc(60, 80)), "image/png")
    at.run()
    assert at.slider(key="chains").value == cfgmod.IMAGE_CHAINS
    at.slider(key="chains").set_value(3).run()
    # a photo of another size: a new working resolution and new slider bounds, same chains
    at.file_uploader(key="upload").upload("b.png", png_bytes(dark_disc(90, 40)), "image/png")
    at.run()
    assert_healthy(at)
    assert at.session_state["size"] == 90 and the_run(at).config.chains == 3
    assert at.slider(key="chains").value == 3
    # stopping when settled needs two chains: the slider starts at 2
    assert at.slider(key="chains").min == 2
    at.checkbox(key="until_settled").set_value(False).run()
    assert at.slider(key="chains").min == 1
    # a link asking for one chain with "stop when settled" gets two, and says why
    at = open_app(source="sample", sample="horse", chains="1", size="32")
    assert_healthy(at)
    assert the_run(at).config.chains == 2
    assert "2 chains per sampler at least" in texts(at.sidebar.caption)
    # many samplers on a large photo: the resolution gives way so that two chains still fit
    at.multiselect(key="samplers").set_value(["barker", "sqrt", "min", "max", "gibbs"]).run()
    at.slider(key="size").set_value(512).run()
    assert_healthy(at)
    run = the_run(at)
    assert run.config.chains == 2 and run.config.size == cfgmod.max_size(2, 5) == 387
    assert "Working resolution reduced from 512" in texts(at.sidebar.caption)


def test_a_failing_change_is_a_sentence_and_the_page_carries_on(monkeypatch):
    at = open_app()

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(cfgmod, "source_defaults", boom)
    at.selectbox(key="case").set_value(2).run()
    assert not at.exception
    assert "Applying the new paper case failed" in texts(at.sidebar.error)
    assert "boom" not in texts(at.sidebar.error)  # details go to the log, not the page


def test_a_sample_image_with_known_truth_tracks_accuracy():
    at = open_app(source="sample", sample="synthetic_disc_letter", size="24")
    assert_healthy(at)
    run = the_run(at)
    assert run.problem.truth is not None and max(run.problem.target.shape) == 24
    assert at.radio(key="polarity").value == "auto" and run.problem.polarity == "dark"
    assert at.radio(key="model").value == "threshold"  # its generative model


def test_the_bright_cell_is_picked_as_the_object_and_the_choice_is_reversible():
    at = open_app(source="sample")
    at.selectbox(key="sample").set_value("cell").run()
    assert_healthy(at)
    run = the_run(at)
    assert at.radio(key="model").value == "mixture" and run.problem.polarity == "bright"
    assert "picked automatically" in texts(at.caption) and "border" in texts(at.caption)
    alpha = run.problem.target.alpha[0]
    at.radio(key="polarity").set_value("dark").run()
    assert_healthy(at)
    flipped = the_run(at)
    assert flipped.problem.polarity == "dark"
    torch.testing.assert_close(flipped.problem.target.alpha[0], -alpha)
    assert "your choice" in texts(at.caption)


def test_a_colour_photo_is_modelled_in_colour_and_downloads_at_its_size():
    at = open_app(source="sample", sample="coffee", size="48")
    assert_healthy(at)
    run = the_run(at)
    assert run.photo.is_colour and run.problem.data.colour
    assert run.photo.original_shape == (400, 600) and run.problem.target.shape == (32, 48)
    state.advance(run, 60.0, 400)  # 50 burn-in sweeps, then mixing
    at.session_state["view"] = "Segmentation"
    at.run()
    assert_healthy(at)
    assert "600 × 400" in texts(at.caption)  # the downloads' size, said on the page
    assert "agrees with the exact MAP" in texts(at.caption)
    verdict = run.settledness["checkerboard"]
    assert verdict.settled, verdict.reason
    assert "Settled" in texts(at.success)
    # the overlay download redraws the photo itself at its size, not the 48 px lattice
    marginal = run.comparison.marginals["checkerboard"].mean()
    overlay = overlay_at_size(run.source, marginal, run.photo)
    assert Image.open(io.BytesIO(overlay)).size == (600, 400)


def test_stop_when_settled_pauses_a_photo_run_once_it_has_settled():
    at = open_app(source="sample", sample="horse", size="32")
    run = the_run(at)
    assert run.config.until_settled and run.config.samplers == ("checkerboard",)
    at.button(key="run").click().run()
    deadline = time.perf_counter() + 60
    while run.running and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert not run.running and run.settled_at is not None and not run.finished
    assert all(v.settled for v in run.settledness.values())
    at.run()
    assert "Settled at step" in texts(at.success)


def test_a_run_that_ends_before_settling_says_so_and_why():
    # 40 mixing steps: the latter half's batches hold under 10 draws, 20 are needed
    at = open_app(source="sample", sample="horse", size="32", burn_in="10", steps="40")
    run = the_run(at)
    assert run.config.until_settled
    at.button(key="run").click().run()
    deadline = time.perf_counter() + 60
    while run.running and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert run.finished and run.settled_at is None
    at.run()
    assert_healthy(at)
    warning = texts(at.warning)
    assert "Run complete: every sampler took its 50 steps, and the marginal has not settled" in (
        warning
    )
    assert re.search(
        r"Checkerboard Gibbs: Too few draws so far \(\d per batch; 20 needed\)\.", warning
    )
    assert "Run complete" not in texts(at.success)


def test_a_failure_to_judge_settling_is_said_and_the_run_goes_on_to_its_end(monkeypatch):
    at = open_app(source="sample", sample="horse", size="32", burn_in="10", steps="300")
    run = the_run(at)

    def broken(run):
        raise ValueError("no batches")

    monkeypatch.setattr(state, "refresh_settledness", broken)
    monkeypatch.setattr(state, "SETTLE_CHECK_S", 0.0)  # judged after every chunk
    at.button(key="run").click().run()
    deadline = time.perf_counter() + 60
    while run.running and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert not run.running and run.finished and run.settled_at is None and not run.error
    assert run.notices == [  # said once, not once per chunk
        "Whether the marginal has settled could not be judged (no batches); the run goes on "
        'without "Stop when settled".'
    ]


def test_the_closing_line_names_the_unsettled_sampler_and_its_test():
    run = SimpleNamespace(
        config=SimpleNamespace(
            total_steps=5050, until_settled=True, chains=4, source="upload", lam=1.0
        ),
        settledness={
            "checkerboard": SimpleNamespace(
                settled=False,
                disagreeing_fraction=0.0,
                reason="Not settled yet: P is known to within ±0.1 at 97.2% of the sites "
                "(99% needed).",
            )
        },
    )
    with mock.patch.object(state, "judges_settling", return_value=True):
        text, good = live.finished_text(run)
        assert not good and text == (
            "Run complete: every sampler took its 5,050 steps, and the marginal has not settled. "
            "Checkerboard Gibbs: P is known to within ±0.1 at 97.2% of the sites (99% needed). "
            "Raise the mixing steps to go on."
        )
        run.settledness["checkerboard"] = SimpleNamespace(settled=True, reason="Settled: ...")
        assert live.finished_text(run) == (
            "Run complete: every sampler took its 5,050 steps. Raise the mixing steps to go on.",
            True,
        )
    run.config.until_settled = False  # not asked: no verdict in the closing line
    run.settledness["checkerboard"] = SimpleNamespace(settled=False, reason="Not settled yet: x.")
    assert live.finished_text(run)[1]


def test_where_a_photos_chains_disagree_above_the_critical_coupling_the_line_says_lower_lambda():
    disagree = SimpleNamespace(
        settled=False,
        disagreeing_fraction=0.025,
        reason="Not settled: the chains disagree about the class of 2.5% of the sites (a region "
        "stuck where a chain started); P is known to within ±0.1 at 94.3% of the sites (99% "
        "needed).",
    )
    imprecise = SimpleNamespace(
        settled=False, disagreeing_fraction=0.004, reason="Not settled yet: P is known ..."
    )

    def line(verdict, source="upload", lam=1.0) -> str:
        config = SimpleNamespace(
            total_steps=5050, until_settled=True, chains=4, source=source, lam=lam
        )
        run = SimpleNamespace(config=config, settledness={"checkerboard": verdict})
        with mock.patch.object(state, "judges_settling", return_value=True):
            return live.finished_text(run)[0]

    text = line(disagree)
    assert text.startswith("Run complete: every sampler took its 5,050 steps, and the marginal")
    assert "the chains disagree about the class of 2.5% of the sites" in text
    assert (
        "Raise the mixing steps to go on, or lower λ: at λ = 1, above the Ising prior's "
        "critical coupling (≈ 0.44)" in text
    )
    assert "lower λ" in line(disagree, source="sample", lam=0.8)
    assert "lower λ" not in line(disagree, lam=0.4)  # below the critical coupling
    assert "lower λ" not in line(disagree, source="paper")  # no photo
    assert "lower λ" not in line(imprecise)  # P not yet precise: more steps are the remedy


# ----------------------------------------------------------------------------- links
def test_query_parameters_restore_a_configuration():
    at = open_app(
        source="sample",
        sample="horse",
        size="40",
        lam="0.7",
        boundary="periodic",
        samplers="sqrt,gibbs",
        chains="3",
        burn_in="100",
        seed="5",
        optimizer="sgd",
    )
    assert_healthy(at)
    assert at.radio(key="source").value == "sample"
    assert at.selectbox(key="sample").value == "horse"
    assert at.slider(key="size").value == 40
    assert at.number_input(key="lam").value == 0.7
    assert at.multiselect(key="samplers").value == ["sqrt", "gibbs"]
    assert at.slider(key="chains").value == 3
    assert at.radio(key="optimizer").value == "sgd"
    run = the_run(at)
    assert max(run.problem.target.shape) == 40 and run.config.seed == 5
    assert run.comparison.names == ["sqrt", "gibbs"] and run.problem.target.boundary == "periodic"


def test_bad_query_parameters_fall_back_with_a_warning():
    at = open_app(lam="nan", sigma="-inf", chains="1e9", samplers="sqrt,bogus", case="7", zzz="1")
    assert not at.exception
    warnings = texts(at.warning)
    for fragment in ("λ: NaN", "σ: -∞", "chains", "bogus", "paper case", "“zzz”"):
        assert fragment in warnings, fragment
    assert at.number_input(key="lam").value == 1.0  # the default
    assert at.number_input(key="sigma").value == 0.01  # clamped to the smallest allowed
    assert at.multiselect(key="samplers").value == ["sqrt"]
    assert at.selectbox(key="case").value == 4  # clamped to the last case
    assert the_run(at).config.chains == 64


def test_oversized_requests_are_capped_and_the_widgets_show_what_is_used():
    at = open_app(size="128", chains="64", samplers="barker,sqrt,min,max,gibbs")
    assert_healthy(at)
    assert "Chains reduced from 64 to 18" in texts(at.sidebar.caption)
    run = the_run(at)
    assert run.config.chains * 128 * 128 * 5 <= cfgmod.MAX_WORKLOAD
    assert at.slider(key="chains").value == run.config.chains == 18  # no widget says 64
    assert at.slider(key="chains").max == 18
    # the traces' bound: the thinning widget shows the thinning in use
    at = open_app(chains="64", burn_in="50000", steps="200000")
    assert_healthy(at)
    run = the_run(at)
    assert run.config.thin > 1 and at.number_input(key="thin").value == run.config.thin
    assert f"Recording every {run.config.thin} steps instead of every 1" in texts(
        at.sidebar.caption
    )
    # fewer samplers raise the bound again; the chosen value stays until the user moves it
    at.multiselect(key="samplers").set_value(["barker"]).run()
    assert_healthy(at)
    assert at.slider(key="chains").max == 64


# ----------------------------------------------------------------------------- the views
def test_every_tab_renders_during_burn_in_and_after_it():
    at = open_app(
        source="sample",
        sample="synthetic_disc_letter",
        size="16",
        chains="2",
        burn_in="30",
        steps="700",
        samplers="barker,lsb1,lsb2,gibbs",
    )
    run = the_run(at)
    state.advance(run, 30.0, 10)
    for tab in TABS:
        at.session_state["view"] = tab
        at.run()
        assert_healthy(at)
    state.advance(run, 120.0, 800)
    assert run.finished and run.phase == "mixing"
    for tab in TABS:
        at.session_state["view"] = tab
        at.run()
        assert_healthy(at)
        if tab == "Mixing":
            assert at.dataframe and at.dataframe[0].value.shape[0] == 4
        if tab == "Segmentation":
            assert "Accuracy against the ground truth" in texts(at.caption)
        if tab == "Export":
            assert "?source=sample" in texts(at.code)
    assert "Run complete" in texts(at.success)
    assert at.button(key="run").disabled


def test_checkerboard_gibbs_runs_in_every_view_and_in_slow_motion():
    """A block sampler (one sweep per step, no balancing function, no proposal) beside
    single-site ones: every tab draws, in burn-in and mixing, and Step shows its sweep."""
    at = open_app(
        size="16", chains="2", burn_in="20", steps="200", samplers="barker,lsb1,checkerboard"
    )
    assert_healthy(at)
    assert at.multiselect(key="samplers").value == ["barker", "lsb1", "checkerboard"]
    at.button(key="step").click().run()
    assert_healthy(at)
    run = the_run(at)
    block = run.last_step.sites["checkerboard"]
    assert block.site is None and block.q is None and block.accept_prob is None
    after = run.comparison["checkerboard"].x[run.last_step.chain].cpu().numpy()
    assert block.flipped == int((after != block.state).sum())
    assert "Not shown: Checkerboard Gibbs" in texts(at.caption)
    assert len(at.dataframe) == 1 and at.dataframe[0].value.shape[0] == 2  # barker and LSB 1
    for tab in TABS:
        at.session_state["view"] = tab
        at.run()
        assert_healthy(at)
    state.advance(run, 120.0, 300)
    assert run.finished and run.phase == "mixing"
    sweeps = run.comparison["checkerboard"].sweeps
    assert sweeps == run.n_steps  # one sweep per step
    for tab in TABS:
        at.session_state["view"] = tab
        at.run()
        assert_healthy(at)
        if tab == "Balancing functions":
            assert "Checkerboard Gibbs: not locally balanced" in texts(at.caption)
        if tab == "Mixing":
            assert at.dataframe and at.dataframe[0].value.shape[0] == 3
        if tab == "Export":
            assert "samplers=barker,lsb1,checkerboard" in texts(at.code)
    assert f"**{sweeps:,.0f}** (Checkerboard Gibbs)" in texts(at.caption)  # the status line
    at.session_state["x_axis"] = "sweeps"
    at.session_state["view"] = "Convergence"
    at.run()
    assert_healthy(at)


def test_learning_divergence_is_reported_as_a_warning():
    at = open_app()
    run = the_run(at)
    run.comparison["lsb2"].learning_failed = True  # as after a non-finite loss
    state.advance(run, 1.0, 1)
    at.run()
    assert not at.exception
    assert "lsb2: learning diverged" in texts(at.warning)


def test_an_imported_learned_function_runs_as_its_own_sampler():
    problem = lsbcore.paper_case(3, n=8, n_chains=2)
    lsb1 = lsbcore.make_sampler("lsb1", problem.target, 2, x0=problem.x0)
    lsb1.step(20, learn=True)
    text = lsbcore.balancing_to_json(lsb1.balancing).encode()
    at = open_app(samplers="sqrt,learned")
    assert "needs a learned-function JSON" in texts(at.warning)
    assert the_run(at).comparison.names == ["sqrt"]
    at.file_uploader(key="learned_file").upload("lsb1.json", text, "application/json").run()
    assert_healthy(at)
    assert the_run(at).comparison.names == ["sqrt", "learned"]
    at.file_uploader(key="learned_file").clear().upload("bad.json", b"{}", "application/json")
    at.run()
    assert not at.exception and "cannot be used" in texts(at.error)


def test_asking_for_cuda_without_a_gpu_runs_on_the_cpu_and_says_so(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    at = open_app(device="cuda")
    assert not at.exception
    assert "No CUDA GPU is available here; running on the CPU instead." in texts(at.warning)
    assert the_run(at).device_label == "CPU"


def test_a_gpu_that_fails_while_building_falls_back_to_the_cpu(monkeypatch):
    real = lsbcore.Comparison

    def flaky(*args, device=None, **kwargs):
        if device != "cpu":
            raise RuntimeError("CUDA error: out of memory")
        return real(*args, device=device, **kwargs)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(lsbcore, "Comparison", flaky)
    cfg = replace(cfgmod.Config(), samplers=("barker",), size=16, chains=2, device="cuda")
    run, messages = state.build_run(cfg, sources.build_problem(cfg))
    assert run.comparison.device.type == "cpu" and run.device_label == "CPU"
    assert messages and "The GPU failed (CUDA error: out of memory)" in messages[0]


def test_an_rbm_run_falls_back_to_the_cpu_as_the_ising_run_does(monkeypatch):
    import lsbcore.rbm.live as rbm_live
    from lsbcore.rbm import load_model

    real = rbm_live.RBMComparison

    def flaky(*args, device=None, **kwargs):
        if device != "cpu":
            raise RuntimeError("CUDA error: out of memory")
        return real(*args, device=device, **kwargs)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(rbm_live, "RBMComparison", flaky)
    cfg = replace(cfgmod.Config(), target="digits-8x8", samplers=("gwg",), chains=2, device="cuda")
    run, messages = state.build_rbm_run(cfg, load_model("digits-8x8"), "digits 8 x 8")
    assert run.comparison.device.type == "cpu" and run.device_label == "CPU"
    assert messages and "The GPU failed (CUDA error: out of memory)" in messages[0]


def test_an_unexpected_failure_shows_a_sentence_not_a_traceback(monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(sources, "build_problem", boom)
    at = open_app()
    assert not at.exception
    assert "Something went wrong: boom" in texts(at.error)


def test_an_error_no_code_caught_shows_no_traceback_and_no_server_path():
    """Streamlit's own notice for an uncaught error, without message, type or trace (the
    server logs them): the served configuration says so, with a value Streamlit knows."""
    import tomllib

    from streamlit.config import ShowErrorDetailsConfigOptions

    served = tomllib.loads((APP.parent.parent / ".streamlit" / "config.toml").read_text())
    value = served["client"]["showErrorDetails"]
    assert value == ShowErrorDetailsConfigOptions.NONE == "none"


def test_one_chain_is_one_chain_on_the_page():
    at = open_app(chains="1")
    assert_healthy(at)
    shown = texts(at.caption)
    assert "1 chain per sampler" in shown and "1 chains" not in shown
    assert counted(4, "chain") == "4 chains" and counted(1, "sampler") == "1 sampler"


# ----------------------------------------------------------------------------- pure logic
def test_a_configuration_survives_the_round_trip_through_its_link():
    cfg = replace(cfgmod.defaults_for("sample", sample="cell"), noise=0.3, thin=4, lr=0.003)
    params = cfgmod.to_query_params(cfg)
    restored, warnings = cfgmod.validate(params, SAMPLES)
    assert restored == cfg and not warnings


def test_workload_cap_reduces_chains_then_thins_the_traces():
    cfg = replace(cfgmod.Config(), size=256, chains=64)
    capped, notes = cfgmod.cap_workload(cfg)
    assert capped.chains * 256 * 256 * len(cfg.samplers) <= cfgmod.MAX_WORKLOAD
    assert capped.chains >= 1 and len(notes) == 1
    long = replace(cfgmod.Config(), chains=64, steps=200_000, burn_in=50_000)
    capped, notes = cfgmod.cap_workload(long)
    assert capped.thin > 1 and any("Recording every" in n for n in notes)
    assert cfgmod.cap_workload(cfgmod.Config()) == (cfgmod.Config(), [])


def test_the_worker_honours_the_speed_cap():
    cfg = replace(cfgmod.Config(), samplers=("barker",), speed="2", size=16, chains=2)
    run, _ = state.build_run(cfg, sources.build_problem(cfg))
    state.start(run)
    time.sleep(1.0)
    state.pause(run)
    # at most 2 steps per 0.2 s refresh interval, give or take one interval
    assert 2 <= run.n_steps <= 2 * (1.0 / state.REFRESH_S + 1)


def test_a_run_nobody_looks_at_pauses_itself(monkeypatch):
    monkeypatch.setattr(state, "STALE_S", 0.2)
    # long enough that it cannot finish first, even compiled
    cfg = replace(
        cfgmod.Config(), samplers=("barker",), size=64, chains=16, burn_in=50_000, steps=200_000
    )
    run, _ = state.build_run(cfg, sources.build_problem(cfg))
    state.start(run)
    run.worker.join(timeout=5.0)
    assert not run.running and "Paused" in run.notices[-1]


def test_the_working_resolution_is_picked_from_the_measured_speed():
    # 4 chains x 200 sweeps in 5 s at 40% of the rate: sites = rate * 0.4 * 5 / (200 * 4)
    assert cfgmod.pick_size(80e6, (512, 512)) == 432  # sqrt(200,000) = 447, down to 27 x 16
    assert cfgmod.pick_size(1e9, (512, 512)) == cfgmod.MAX_SIZE
    assert cfgmod.pick_size(1e9, (90, 120)) == 120  # never beyond the photo's own size
    assert cfgmod.pick_size(1e3, (512, 512)) == 16  # the slider's floor
    wide = cfgmod.pick_size(20e6, (250, 500))  # half as many rows: a longer side
    assert wide > cfgmod.pick_size(20e6, (500, 500))
    assert cfgmod.pick_size(float("nan"), (512, 512)) == cfgmod.DEFAULT_IMAGE_SIZE


def test_the_expected_settling_time_is_the_picks_budget_or_less_when_the_photo_is_small():
    # at 80 M/s a 432 x 432 lattice: 200 sweeps x 4 chains x 186,624 sites / (0.4 x 80e6)
    assert cfgmod.settle_seconds(80e6, 432, (512, 512)) == pytest.approx(4.6656)
    assert cfgmod.settle_seconds(80e6, 432, (512, 512)) <= cfgmod.SETTLE_BUDGET_S
    # a 400 x 600 photo at 384 px is 384 x 256 (rounded as the photo is scaled)
    assert cfgmod.settle_seconds(40e6, 384, (400, 600)) == pytest.approx(800 * 384 * 256 / 16e6)
    # a photo smaller than the pick: its own size, far under the budget
    assert cfgmod.settle_seconds(80e6, 120, (90, 120)) < 0.5
    # the lattice the photo is shrunk to, not one side times a rounded other: a 10 x 5 photo at
    # 5 px is 5 x 3 (half rounds up, as the photo is scaled; round() gave 2), a 50 x 40 photo
    # under a 64 px pick stays 50 x 40
    per_site = 800 / 16e6
    assert cfgmod.settle_seconds(40e6, 5, (5, 10)) == pytest.approx(15 * per_site)
    assert cfgmod.settle_seconds(40e6, 64, (40, 50)) == pytest.approx(2000 * per_site)


def test_old_links_with_invert_still_choose_the_object():
    cfg, warnings = cfgmod.validate({"source": "upload", "invert": "0"})
    assert cfg.polarity == "bright" and not warnings
    cfg, _ = cfgmod.validate({"source": "upload", "invert": "1", "polarity": "auto"})
    assert cfg.polarity == "auto"  # the new parameter wins
    cfg, warnings = cfgmod.validate({"source": "upload", "polarity": "sideways"})
    assert cfg.polarity == "auto" and "object" in warnings[0]


def test_paper_chains_each_sample_their_own_alpha_unless_one_is_shared():
    at = open_app(case="3", size="16", chains="3", burn_in="20", steps="300", samplers="barker")
    run = the_run(at)
    assert run.problem.target.batch == 3  # the paper: one noisy alpha per chain
    state.advance(run, 60.0, 320)
    at.session_state["view"] = "Mixing"
    at.run()
    assert_healthy(at)
    assert "its own posterior" in texts(at.info)
    assert "R-hat" not in at.dataframe[0].value.columns
    shared = open_app(
        case="3", size="16", chains="3", burn_in="20", steps="300", samplers="barker",
        shared_alpha="1",
    )  # fmt: skip
    run = the_run(shared)
    assert run.problem.target.batch == 1 and "one α for all chains" in run.problem.name
    alpha = run.problem.target.alpha[0]
    torch.testing.assert_close(alpha, lsbcore.paper_case(3, n=16, n_chains=3).target.alpha[0])
    state.advance(run, 60.0, 320)
    shared.session_state["view"] = "Mixing"
    shared.run()
    assert_healthy(shared)
    assert "R-hat" in shared.dataframe[0].value.columns


def test_export_prepares_the_traces_and_names_files_after_the_run():
    at = open_app(size="16", chains="2", burn_in="10", steps="20", samplers="barker,lsb1")
    run = the_run(at)
    state.advance(run, 30.0, 30)
    at.session_state["view"] = "Export"
    at.run()
    assert_healthy(at)
    downloads = at.get("download_button")
    labels = [d.proto.label for d in downloads]
    assert "Report (HTML)" in labels and "Results (JSON)" in labels
    at.button(key="prepare_traces").click().run()
    assert_healthy(at)
    labels = [d.proto.label for d in at.get("download_button")]
    traces = [text for text in labels if text.startswith("Traces at step 30 (gzip CSV")]
    assert traces and traces[0].endswith("MB)")
    stem = export.export_stem(run)
    assert stem.startswith("lsb-case-3") and "-seed0-" in stem
    assert at.radio(key="figure_format").value == "png"


def test_exact_chain_tab_enumerates_a_window_of_the_run_with_its_learned_functions():
    at = open_app(size="16", chains="2", burn_in="10", steps="20", samplers="barker,max,lsb1")
    run = the_run(at)
    state.advance(run, 30.0, 15)
    at.session_state["view"] = "Exact chain"
    at.run()
    assert_healthy(at)
    assert "Press Compute" in texts(at.caption)
    at.session_state["exact_window"] = "2 x 3"
    at.button(key="exact_compute").click().run()
    assert_healthy(at)
    table = at.dataframe[0].value
    assert list(table["sampler"]) == ["t/(1+t)", "max(1,t)", "LSB 1"]
    view = run.cache["exact_chain"][2]
    gaps = {row["name"]: row["gap"] for row in view.rows}
    assert 0 < gaps["max"] < gaps["barker"] <= 1  # max(1,t) mixes worst here too
    assert list(table["spectral gap"])[1] == f"{gaps['max']:.3g}"  # shown with 3 digits
    assert "computed at step 15 with LSB 1 as learned then" in texts(at.caption)
    assert view.rows[0]["invariance_error"] < 1e-12
    # the coupling sweep: the run's lambda among the points, every sampler slower at the top
    lams, curves, used = run.cache["exact_chain"][3]
    assert used.shape == (3, 2) and used.lam in lams and lams[0] == 0.0  # 2 wide, 3 tall
    for name in ("barker", "max", "lsb1"):
        assert curves[name][-1] > 20 * curves[name][np.searchsorted(lams, 0.5)]
    assert "Relaxation time against the coupling λ" in [s.value for s in at.subheader]
    assert any(m.value.startswith("From λ = 0 to ") for m in at.markdown)  # said in numbers
    assert at.query_params["exact_window"] == "2 x 3"  # the window is in the link


def test_a_link_opens_the_exact_chain_window_it_names_and_repairs_a_bad_one():
    at = open_app(size="16", chains="2", samplers="barker", exact_window="2 x 2")
    assert_healthy(at)
    at.session_state["view"] = "Exact chain"
    at.run()
    assert at.radio(key="exact_window").value == "2 x 2"
    at = open_app(size="16", chains="2", samplers="barker", exact_window="<b>9 x 9</b>")
    assert_healthy(at)
    warnings = [w.value for w in at.warning]
    assert any(w.startswith("Link: exact chain window:") for w in warnings), warnings
    assert not any("<b>" in w for w in warnings)
    at.session_state["view"] = "Exact chain"
    at.run()
    assert at.radio(key="exact_window").value == "3 x 3"


# ----------------------------------------------------------------------------- lecture
def test_presentation_mode_from_a_link_adds_a_sentence_per_view_and_keeps_the_run():
    at = open_app(present="1", burn_in="200")
    assert_healthy(at)
    assert at.toggle(key="present").value is True
    run = the_run(at)
    state.advance(run, 30.0, 300)  # past burn-in, learned functions frozen
    for view in ("Chains", "Mixing", "Exact chain"):
        at.session_state["view"] = view
        at.run()
        assert_healthy(at)
        html = " ".join(str(h.proto.body) for h in at.get("html"))
        assert "What you are seeing." in html and ISING.view(view).seeing[:30] in html
    assert the_run(at) is run  # the mode changes the page, not the run
    at.toggle(key="present").set_value(False).run()
    assert_healthy(at)
    assert "What you are seeing." not in " ".join(str(h.proto.body) for h in at.get("html"))
    assert "present" not in at.query_params and the_run(at) is run


def test_run_pause_and_step_have_keyboard_keys():
    at = open_app()
    keys = {b.key: b.proto.shortcut for b in at.button}
    assert keys["run"] == keys["pause"] == "space" and keys["step"] == "s"  # normalised


def test_the_why_panel_explains_max_with_the_runs_own_numbers():
    at = open_app(burn_in="0", steps="3000", samplers="barker,sqrt,max")
    run = the_run(at)
    state.advance(run, 60.0, 3000)
    at.session_state["view"] = "Proposal"
    at.run()
    assert_healthy(at)
    rows = {r["name"]: r for r in why.live_numbers(run)}
    # max(1,t)'s proposal is near uniform and most of its proposals are rejected
    assert rows["max"]["spread"] > 2 * max(rows["barker"]["spread"], rows["sqrt"]["spread"])
    assert rows["max"]["move"] < min(rows["barker"]["move"], rows["sqrt"]["move"]) - 0.2
    assert rows["max"]["acceptance"] == pytest.approx(run.comparison["max"].accept_rate)
    shown = texts(at.caption)
    sentence = why.comparison_sentence(rows["max"], list(rows.values()))
    assert sentence in shown and f"P(move) now {rows['max']['move']:.2f}" in sentence
    assert "max(1,t)** never drops below 1" in texts(at.markdown)
    # the proposal text mentions uninformed baselines only when the run has one
    assert "uninformed" not in texts(at.markdown)


def test_importance_tab_estimates_a_window_and_shows_the_collapse_from_its_link():
    at = open_app(size="16", chains="2", is_proposal="mean field", is_samples="2000", is_side="3",
                  is_max_side="12")  # fmt: skip
    at.session_state["view"] = "Importance sampling"
    at.run()
    assert_healthy(at)
    assert at.radio(key="is_proposal").value == "mean field"
    assert (at.number_input(key="is_samples").value, at.number_input(key="is_side").value) == (
        2000,
        3,
    )
    assert "Press Compute" in texts(at.caption)
    at.button(key="is_compute").click().run()
    assert_healthy(at)
    view = the_run(at).cache["importance"][1]
    assert view.estimate.n_samples == 2000 and view.estimate.proposal == "mean field"
    metrics = {m.label: m.value for m in at.metric}
    assert set(metrics) >= {"log Ẑ ± se", "exact log Z", "Kish ESS", "sd of log w"}
    assert abs(view.estimate.log_z - view.exact_log_z) < 4 * view.estimate.log_z_se
    assert "centre 3 × 3 window" in texts(at.caption) and "Why the ESS collapses" in texts(
        at.caption
    )
    table = at.dataframe[0].value
    assert list(table["window"]) == [f"{s} × {s}" for s in (2, 3, 4, 6, 8, 12) for _ in "ab"]
    # the table prints numbers as text (three significant digits): compare their values
    field = table[table["proposal"] == "field"]["ESS / N"].map(_shown_number).to_numpy()
    assert field[0] > field[-1]
    # a change of control makes the result stale until computed again, and reaches the link
    at.number_input(key="is_samples").set_value(500).run()
    assert "Press Compute" in texts(at.caption)
    assert at.query_params["is_samples"] in ("500", ["500"])


def test_importance_tab_has_its_sentence_in_presentation_mode():
    at = open_app(present="1", size="16", chains="2")
    at.session_state["view"] = "Importance sampling"
    at.run()
    assert_healthy(at)
    html = " ".join(str(h.proto.body) for h in at.get("html"))
    assert ISING.view("Importance sampling").seeing[:30] in html


def test_importance_link_values_out_of_range_are_clamped_with_a_warning():
    at = open_app(size="16", chains="2", is_samples="9999999", is_proposal="exact")
    assert_healthy(at)
    warnings = texts(at.warning)
    assert "Importance samples" in warnings and "20000" in warnings
    assert "Importance proposal" in warnings
    at.session_state["view"] = "Importance sampling"
    at.run()
    assert at.number_input(key="is_samples").value == 20_000
    assert at.radio(key="is_proposal").value == "field"


# ----------------------------------------------------------------------------- pinned runs
@pytest.fixture
def pin_root(tmp_path, monkeypatch):
    """Pins go to a temporary directory, not the server's store."""
    monkeypatch.setattr(pin_store, "ROOT", tmp_path)
    return tmp_path


def pin_run(at: AppTest, name: str = "") -> None:
    at.text_input(key="pin_name").input(name)
    at.button(key="pin_save").click().run()
    assert_healthy(at)


def test_two_pinned_runs_survive_a_reload_and_the_compare_tab_names_their_differences(pin_root):
    at = open_app(case="1", burn_in="20", steps="200", chains="2")
    state.advance(the_run(at), 30.0, 60)
    pin_run(at, "case 1 <b>bold</b> [link](https://e.org)")
    assert "Pinned" in texts(at.success) and "<b>" not in texts(at.success)
    token = at.query_params["pins"]
    assert pin_store.valid_token(token) and (pin_root / token).is_dir()
    # the same link in another session (case 4, lambda 0.5) adds to the same set
    at = open_app(case="4", lam="0.5", burn_in="20", steps="200", chains="2", pins=token)
    assert_healthy(at)
    assert "Unknown link parameter" not in texts(at.warning) and not at.info
    state.advance(the_run(at), 30.0, 60)
    pin_run(at)  # the suggested name
    assert at.query_params["pins"] == token
    # a reload: a fresh session with the link finds both
    at = open_app(pins=token)
    at.session_state["view"] = "Compare"
    at.run()
    assert_healthy(at)
    names = texts(at.text)
    assert "1. case 1 <b>bold</b> [link](https://e.org)" in names  # plain text, as typed
    assert "2. case 4 · λ 0.5 · seed 0 · step 60" in names
    assert at.multiselect(key="compare_runs").value == [
        *[e.pin_id for e in at.session_state[pin_store.STATE_KEY].entries()]
    ]
    differ = at.dataframe[0].value
    assert {"paper case", "λ"} <= set(differ["setting"])
    assert "chains" not in set(differ["setting"])  # both had 2
    row = differ[differ["setting"] == "λ"].iloc[0].tolist()
    assert row[1:] == ["0", "0.5"]
    summary = at.dataframe[1].value
    assert len(summary) == 2 * len(cfgmod.Config().samplers)
    assert "None" not in summary.to_string()  # a dash where a number was not measured
    assert len(at.get("plotly_chart")) >= 2 + 2 * 2 + 1  # overlays, ACF and g(t) per run, weights


def test_a_bad_or_expired_pins_link_says_so_and_starts_an_empty_set(pin_root):
    at = open_app(pins="../../etc/passwd")
    assert_healthy(at)
    assert "not a pin-set token" in texts(at.info)
    assert "pins" not in at.query_params
    assert not any(pin_root.iterdir())
    at = open_app(pins="0" * 32)
    assert_healthy(at)
    assert "No pinned runs are stored under this link" in texts(at.info)
    at.session_state["view"] = "Compare"
    at.run()
    assert "No pinned runs yet" in texts(at.info)
    pin_run(at, "first")
    assert at.query_params["pins"] != "0" * 32  # a new set, under a token of ours
    assert "No pinned runs are stored" not in texts(at.info)
    # one pin: the current run joins it, so there is something to compare
    (pin_id,) = [e.pin_id for e in at.session_state[pin_store.STATE_KEY].entries()]
    assert at.multiselect(key="compare_runs").value == [pin_id, "current"]
    assert set(at.dataframe[-1].value["run"]) == {"1. first", "Current run (step 0)"}


def test_a_pin_is_renamed_uploaded_again_refused_when_hostile_and_deleted(pin_root):
    at = open_app(case="2", burn_in="10", steps="40", chains="2")
    pin_run(at, "in burn-in")  # no mixing draws yet: the pin has no ESS and no ACF
    at.session_state["view"] = "Compare"
    at.run()
    store = at.session_state[pin_store.STATE_KEY]
    (pin_id,) = [e.pin_id for e in store.entries()]
    at.text_input(key=f"pin_rename_{pin_id}").input("renamed")
    at.button(key=f"pin_rename_go_{pin_id}").click().run()
    assert_healthy(at)
    assert "1. renamed" in texts(at.text)
    data = store.get(pin_id).to_json().encode("utf-8")
    at.file_uploader(key="pin_upload").upload("pin.json", data, "application/json")
    at.run()
    assert_healthy(at)
    assert [e.pin.name for e in store.entries()] == ["renamed", "renamed"]
    # two runs now: the compare view draws them although neither has mixing data
    assert "No autocorrelation yet" in texts(at.caption)
    hostile = data.replace(b'"name":"renamed"', b'"name":"' + b"<img src=x>" * 20 + b'"')
    at.file_uploader(key="pin_upload").upload("evil.json", hostile, "application/json")
    at.run()
    assert not at.exception
    assert len(at.error) == 1 and at.error[0].value.startswith("This file cannot be pinned:")
    assert "<img" not in at.error[0].value
    assert len(store.entries()) == 2
    at.button(key=f"pin_delete_{pin_id}").click().run()
    assert not at.exception  # the refused file's sentence stays while it is in the uploader
    assert len(store.entries()) == 1 and pin_id not in at.multiselect(key="compare_runs").value


def test_annealing_tab_anneals_the_run_posterior_to_its_exact_map_from_a_link():
    """Controls from a link; Compute anneals chain 1's posterior with the run's samplers and
    block Gibbs; the gap table, the energy figure and the MAP images follow."""
    at = open_app(
        size="16", chains="2", burn_in="10", steps="20", samplers="barker,lsb1",
        anneal_stages="20", anneal_sweeps="8", anneal_beta_0="0.2", anneal_kind="linear",
    )  # fmt: skip
    run = the_run(at)
    state.advance(run, 30.0, 12)
    at.session_state["view"] = "MAP (annealing)"
    at.run()
    assert_healthy(at)
    assert at.number_input(key="anneal_stages").value == 20
    assert at.number_input(key="anneal_beta_0").value == 0.2
    assert at.radio(key="anneal_kind").value == "linear"
    assert "Press Compute: 3 sampler(s) × 4 chains on the whole lattice" in texts(at.caption)
    at.number_input(key="anneal_beta_max").set_value(200.0).run()
    assert at.query_params["anneal_beta_max"] == "200.0"
    at.button(key="anneal_compute").click().run()
    assert_healthy(at)
    table = at.dataframe[0].value
    assert list(table["sampler"]) == ["t/(1+t)", "LSB 1", "Checkerboard Gibbs"]
    gaps = dict(zip(table["sampler"], table["relative gap"], strict=True))
    assert min(gaps.values()) >= -1e-12  # nothing beats the minimum cut
    assert gaps["Checkerboard Gibbs"] < 0.02 and gaps["t/(1+t)"] < 0.02
    view = run.cache["annealing"][2]
    target = run.problem.target.chain(0)
    x_map = lsbcore.exact_map(target)[0].numpy()
    assert np.array_equal(view.map_state, x_map)
    assert view.results["checkerboard"].schedule.beta_max == 200.0
    assert view.results["barker"].schedule.steps_per_stage == 8 * 256  # sweeps in site steps
    caption = texts(at.caption)
    assert "the whole 16 × 16 lattice" in caption
    assert "LSB 1 anneals with the function learned by step 12, frozen" in caption
    images = annealing.map_images(view)
    assert [c for _, c in images][0] == "Exact MAP (minimum cut)" and len(images) == 4
    assert "Checkerboard Gibbs: " in images[3][1]
    before = len(at.image)
    at.radio(key="anneal_samplers").set_value("block").run()  # other samplers: compute again
    assert_healthy(at)
    assert len(at.image) == before - 4  # the four MAP images are gone until Compute
    assert "Press Compute: 1 sampler(s)" in texts(at.caption)
    at.number_input(key="anneal_beta_0").set_value(5.0).run()
    at.number_input(key="anneal_beta_max").set_value(2.0).run()
    assert_healthy(at)
    assert "This schedule cannot run: annealing cools" in texts(at.info)


def _shown_number(text) -> float:
    """A table cell printed by ``lsbcore.number_text`` back as a number ("32,100" -> 32100.0)."""
    return float(str(text).replace(",", "").lstrip("< "))


def test_tempering_tab_crosses_the_modes_a_single_chain_cannot_and_keeps_its_link():
    at = open_app(size="16", chains="2", pt_sweeps="300", pt_replicas="6", pt_sampler="sqrt")
    at.session_state["view"] = "Tempering"
    at.run()
    assert_healthy(at)
    assert "Press Compute" in texts(at.caption)
    assert at.selectbox(key="pt_sampler").value == "sqrt"
    assert at.number_input(key="pt_sweeps").value == 300
    assert at.radio(key="pt_posterior").value == "preset"
    at.selectbox(key="pt_sampler").set_value("checkerboard").run()
    assert "pt_sampler" not in at.query_params  # back at the default: it leaves the link
    assert at.query_params["pt_sweeps"] == "300" and at.query_params["pt_replicas"] == "6"
    at.button(key="pt_compute").click().run()
    assert_healthy(at)
    swaps, modes = at.dataframe[0].value, at.dataframe[1].value
    assert len(swaps) == 5 and _shown_number(swaps["β_r"].iloc[0]) == 1.0
    assert _shown_number(swaps["β_r+1"].iloc[-1]) == pytest.approx(0.3)
    shown_switches = modes["mode switches"].map(_shown_number)
    switches = dict(zip(modes["chain"], shown_switches, strict=True))
    assert switches["single chain"] <= 1 < 5 < switches["parallel tempering, cold chain"]
    shown = texts(at.caption)
    assert "Bimodal preset: 16 × 16" in shown and "300 sweeps recorded" in shown
    assert the_run(at).cache["tempering"][1].result.magnetisation.shape == (300, 6, 1)


def test_tempering_tab_refuses_a_computation_too_large_for_a_request():
    at = open_app(size="64", chains="2", pt_posterior="run", pt_sweeps="5000", pt_replicas="16")
    at.session_state["view"] = "Tempering"
    at.run()
    assert_healthy(at)
    assert "too many, choose fewer sweeps" in texts(at.caption)
    at.button(key="pt_compute").click().run()
    assert_healthy(at)
    assert "more than the 25 million" in texts(at.info)


def test_tempering_tab_tempers_chain_one_of_the_runs_own_posterior():
    at = open_app(size="16", chains="2", pt_posterior="run", pt_sweeps="100", pt_replicas="3")
    at.session_state["view"] = "Tempering"
    at.run()
    at.button(key="pt_compute").click().run()
    assert_healthy(at)
    assert "This run's posterior, chain 1's field (16 × 16 sites)" in texts(at.caption)
    result = the_run(at).cache["tempering"][1].result
    assert result.magnetisation.shape == (100, 3, 1) and len(at.dataframe) == 2


def test_every_tab_has_its_presentation_sentence():
    assert all(view.seeing for view in ISING.views)
    assert ISING.labels == TABS
