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
