"""Nothing a user made is lost by navigating (issue 46, item 3): a photo's prompt, its run and
its chosen resolution and settings are kept per source and come back with it. AppTest."""

from __future__ import annotations

import time

from app_support import APP, open_app, stop_runs_fixture  # noqa: F401  (autouse)

from app import prompt as prompts
from app import state

PHOTO = (APP.parent.parent / "assets" / "coffee.png").read_bytes()


def texts(elements) -> str:
    return " | ".join(str(e.value) for e in elements)


def healthy(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def sample_steps(run: state.Run, n: int, timeout: float = 60.0) -> None:
    state.start(run)
    deadline = time.perf_counter() + timeout
    while run.n_steps < n and time.perf_counter() < deadline:
        time.sleep(0.05)
    state.pause(run)
    assert run.n_steps >= n


def test_a_photo_keeps_its_prompt_run_and_resolution_across_a_change_of_source():
    at = open_app(burn_in="5", chains="2", samplers="barker,lsb1")
    at.sidebar.radio(key="source").set_value("upload").run()
    at.sidebar.file_uploader(key="upload").upload("cup.png", PHOTO, "image/png")
    at.run()
    at.sidebar.slider(key="size").set_value(40).run()
    at.sidebar.number_input(key="lam").set_value(1.3).run()
    healthy(at)
    entry = at.session_state[prompts.STATE]
    box = (0.1, 0.05, 0.8, 0.95)
    entry.update(box=box, points=[(0.5, 0.5, 1)], version=entry["version"] + 1)
    at.run()
    run = at.session_state["_run"]
    assert run.problem.data.prompt.box == box and run.problem.target.shape[1] == 40
    sample_steps(run, 12)
    steps = run.n_steps
    for away in ("paper", "sample"):  # another source, then back to the photo
        at.sidebar.radio(key="source").set_value(away).run()
        healthy(at)
        assert at.session_state["_run"] is not run
        at.sidebar.radio(key="source").set_value("upload").run()
        healthy(at)
        assert at.sidebar.slider(key="size").value == 40
        assert at.sidebar.number_input(key="lam").value == 1.3
        entry = at.session_state[prompts.STATE]
        assert (entry["box"], entry["points"]) == (box, [(0.5, 0.5, 1)])
        assert at.session_state["_run"] is run and run.n_steps == steps  # its sampling kept
        assert (
            f"Back to the run kept for this source: {steps:,} steps, paused while you were "
            "away; press Run to go on." in texts(at.info)
        )
        assert "Your prompt: a box" in texts(at.caption)


def link_of(at) -> dict[str, str]:
    """The page's link as a reload sends it again."""
    return {k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()}


def test_a_reload_mid_run_takes_the_run_back_with_its_photo_and_prompt(monkeypatch):
    from app import reload

    at = open_app(burn_in="5", chains="2", samplers="barker,lsb1")
    at.sidebar.radio(key="source").set_value("upload").run()
    at.sidebar.file_uploader(key="upload").upload("cup.png", PHOTO, "image/png")
    at.run()
    at.sidebar.slider(key="size").set_value(40).run()
    entry = at.session_state[prompts.STATE]
    box = (0.1, 0.05, 0.8, 0.95)
    entry.update(box=box, points=[], version=entry["version"] + 1)
    at.run()
    run = at.session_state["_run"]
    sample_steps(run, 12)
    link = link_of(at)
    assert link["run"] == run.resume_token and len(link["run"]) >= 24  # unguessable
    # the reloaded page: a new session with the same link, in the same browser
    again = open_app(**link)
    healthy(again)
    assert again.session_state["_run"] is run and run.n_steps >= 12
    assert (
        f"The page was reloaded: its run is back as the server held it, at step "
        f"{run.n_steps:,}; press Run to go on." in texts(again.info)
    )
    assert again.session_state[prompts.STATE]["box"] == box
    assert "Your prompt: a box" in texts(again.caption)
    assert again.sidebar.slider(key="size").value == 40
    # the same link in another browser: not its run, and the page says so
    monkeypatch.setattr(reload, "browser", lambda: "another browser")
    other = open_app(**link)
    assert not other.exception
    assert "_run" not in other.session_state  # nor its photo: the page asks for one
    assert "Upload an image in the sidebar" in texts(other.info)
    assert "The run this link named is no longer held by the server" in texts(other.info)


def test_a_reload_keeps_what_a_target_left_had():
    """The settings kept for a target left (its samplers, chains) outlive a reload mid-run."""
    at = open_app(target="mn1", burn_in="5")
    at.sidebar.multiselect(key="samplers").set_value(["barker", "lsb1"]).run()
    at.sidebar.slider(key="chains").set_value(3).run()
    at.sidebar.selectbox(key="target").set_value("ising").run()
    healthy(at)
    sample_steps(at.session_state["_run"], 12)
    again = open_app(**link_of(at))  # the reloaded page, in the same browser
    healthy(again)
    again.sidebar.selectbox(key="target").set_value("mn1").run()
    healthy(again)
    assert list(again.sidebar.multiselect(key="samplers").value) == ["barker", "lsb1"]
    assert again.sidebar.slider(key="chains").value == 3


def test_a_finished_run_kept_for_its_source_does_not_ask_for_run_on_coming_back():
    """Back to a finished run, Run is disabled: the notice says the run is complete (the status
    says how to go on), not "press Run"."""
    at = open_app(size="16", chains="2", burn_in="5", steps="10", samplers="barker")
    assert at.sidebar.radio(key="source").value == "paper"
    run = at.session_state["_run"]
    state.advance(run, 60.0, 20)
    assert run.finished
    for _ in range(2):  # second return alike
        at.sidebar.radio(key="source").set_value("sample").run()
        healthy(at)
        left = f"The run of the source left ({run.n_steps:,} steps) is kept, complete, for when"
        assert left in texts(at.info)
        at.sidebar.radio(key="source").set_value("paper").run()
        healthy(at)
        assert at.session_state["_run"] is run
        back = texts(at.info)
        assert f"Back to the run kept for this source: {run.n_steps:,} steps, complete." in back
        assert "press Run" not in back
        assert at.button(key="run").disabled
        assert "Run complete" in texts(at.success)


def test_run_pressed_with_a_new_source_before_its_run_is_drawn_starts_that_run():
    # the browser sends the new source and the Run click in one page run when the click comes
    # before the page has drawn the source's run: the click is for that run, not the one left
    at = open_app(size="16", chains="2", samplers="barker", burn_in="0")
    at.button(key="step").click().run()
    left = at.session_state["_run"]
    assert left.n_steps == 1 and not left.running
    at.sidebar.radio(key="source").set_value("sample")
    at.button(key="run").click().run()
    healthy(at)
    chosen = at.session_state["_run"]
    assert chosen is not left and chosen.config.source == "sample"
    assert chosen.running  # the sample's run samples
    assert not left.running and left.n_steps == 1  # the paper run left was not started
    state.pause(chosen)
    at.run()
    # pressed again on the page as drawn: that run, at once
    at.button(key="run").click().run()
    assert chosen.running
    state.pause(chosen)


def test_a_run_pressed_for_a_source_with_nothing_to_run_is_not_taken_later():
    at = open_app(size="16", chains="2", samplers="barker", burn_in="0")
    at.button(key="step").click().run()
    at.sidebar.radio(key="source").set_value("upload")
    at.button(key="run").click().run()
    assert "Upload an image" in texts(at.sidebar.info)
    at.sidebar.file_uploader(key="upload").upload("cup.png", PHOTO, "image/png")
    at.run()
    healthy(at)
    run = at.session_state["_run"]
    assert run.config.source == "upload" and not run.running  # it waits for its own Run
