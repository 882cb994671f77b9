"""A run whose page has gone stops and lets its memory go; one whose page is there goes on."""

from __future__ import annotations

import time
from dataclasses import replace

from app import config as cfgmod
from app import sources, state


def small_run():
    cfg = replace(cfgmod.Config(), samplers=("barker", "lsb1"), size=16, chains=2, steps=10**9)
    run, _ = state.build_run(cfg, sources.build_problem(cfg))
    return run


def test_a_run_whose_session_is_gone_stops_and_is_released(monkeypatch):
    monkeypatch.setattr(state, "ORPHAN_S", 0.3)
    monkeypatch.setattr(state, "session_connected", lambda sid: sid != "gone")
    kept, orphan = small_run(), small_run()
    kept.session_id, orphan.session_id = "here", "gone"
    state.start(kept)
    state.start(orphan)
    orphan.worker.join(timeout=10.0)
    assert not orphan.worker.is_alive() and not orphan.running
    assert orphan.released and orphan.comparison is None and not orphan.cache
    time.sleep(0.5)
    assert kept.running and not kept.released and kept.comparison.n_steps > 0
    state.pause(kept)


def test_a_brief_disconnection_is_ridden_out(monkeypatch):
    monkeypatch.setattr(state, "ORPHAN_S", 1.0)
    started = time.perf_counter()
    monkeypatch.setattr(state, "session_connected", lambda sid: time.perf_counter() - started > 0.4)
    run = small_run()
    run.session_id = "flaky"
    state.start(run)
    time.sleep(1.5)
    assert run.running and not run.released  # away for 0.4 s, less than ORPHAN_S
    state.pause(run)


def test_a_run_held_for_a_reload_waits_for_its_page_then_goes_on(monkeypatch):
    monkeypatch.setattr(state, "ORPHAN_S", 0.2)
    monkeypatch.setattr(state, "RESUME_S", 1.5)
    monkeypatch.setattr(state, "session_connected", lambda sid: sid not in ("gone", "gone too"))
    back, lost = small_run(), small_run()
    back.session_id, lost.session_id = "gone", "gone too"
    token = state.hold(back, "browser A", {"_kept_upload": "photo"})
    state.hold(lost, "browser A", {})
    state.start(back)
    state.start(lost)
    time.sleep(0.8)  # past ORPHAN_S: both wait, paused, for their pages
    assert back.running and not back.released and lost.running and not lost.released
    assert state.reclaim(token, "browser B", "new page") is None  # another browser: not its run
    steps = back.n_steps
    assert state.reclaim(token, "browser A", "new page") is back  # the reloaded page
    assert back.session_id == "new page" and back.resume_keep == {"_kept_upload": "photo"}
    time.sleep(0.5)
    assert back.n_steps > steps  # its page is back: it samples on
    lost.worker.join(timeout=10.0)  # nobody came back within RESUME_S: released
    assert lost.released and lost.comparison is None
    assert state.reclaim(lost.resume_token, "browser A", "late page") is None
    state.pause(back)
