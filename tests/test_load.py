"""Several people at once.

What one redraw costs (no browser): a live page's fragment, rerun five times a second on every
page, holds only what changes (the status line and the open view: no tabs, group chooser or
slider, whose redraws cost the browser more than the images beside them), and the chain images
go out at one pixel per site (the browser blows them up), so a redraw encodes and sends little.

The short form of ``python -m tools.loadtest``: four browser sessions with different
configurations on one server for 20 seconds. Each session must keep redrawing its chains (at
least one redraw per ``STALL_S`` seconds over the second half), show its own configuration and
never another's, and show no error; the server must stay up. Its memory is sampled and must
stay within a generous bound.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import streamlit
from streamlit.testing.v1 import AppTest

from app import state
from app.views import chains
from tools import browser_kit, loadtest

APP = Path(__file__).resolve().parent.parent / "app" / "streamlit_app.py"
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts" / "browser"
SESSIONS, SECONDS = 4, 20.0
MAX_RSS_MB = 2000  # measured about 450 MB; this catches a leak or a runaway, not noise


def test_the_live_fragment_redraws_the_view_but_not_its_tabs_or_controls(monkeypatch):
    inside = [0]  # depth of fragment bodies running now
    drawn: list[tuple[str, bool]] = []  # (what, drawn inside the fragment)
    real_fragment = streamlit.fragment

    def fragment(func=None, **options):
        if func is None:  # used as @st.fragment(...)
            return lambda f: fragment(f, **options)

        def body(*args, **kwargs):
            inside[0] += 1
            try:
                return func(*args, **kwargs)
            finally:
                inside[0] -= 1

        return real_fragment(body, **options)

    def spy(name):
        real = getattr(streamlit, name)

        def drawing(*args, **kwargs):
            drawn.append((name, inside[0] > 0))
            return real(*args, **kwargs)

        return drawing

    monkeypatch.setattr(streamlit, "fragment", fragment)
    for name in ("tabs", "segmented_control", "slider", "progress", "image"):
        monkeypatch.setattr(streamlit, name, spy(name))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(size="12", chains="4", samplers="barker,sqrt", view="Chains")
    try:
        at.run()
        assert not at.exception, at.exception
    finally:
        state._pause_all_runs()
    where = {name: {fragment for what, fragment in drawn if what == name} for name, _ in drawn}
    assert where["image"] == {True} and where["progress"] == {True}, drawn  # the live part
    for widget in ("tabs", "segmented_control", "slider"):
        assert where.get(widget) == {False}, (widget, drawn)


def test_a_redraw_sends_the_chains_at_one_pixel_per_site():
    """Four chains and the marginal of a 24 x 24 lattice, shown 160 pixels wide: five 24 x 24
    tiles of a few hundred bytes (they were 160-pixel PNGs, about 1 kB each)."""
    rng = np.random.default_rng(0)
    states = {"barker": np.where(rng.random((4, 24, 24)) < 0.5, -1.0, 1.0)}
    (panel,) = chains.chain_panels(states, {"barker": rng.random((24, 24))}, n_show=4, side=144)
    assert [tile.shape for tile in panel.tiles] == [(24, 24)] * 5
    assert panel.width == 144  # the browser's size for them
    sent = sum(len(chains.pixels.data_uri(tile)) for tile in panel.tiles)
    assert sent < 5 * 600, sent
    # reports still get the row at screen size
    assert panel.image.shape == (144, 5 * 144 + 4 * panel.gap)
    assert np.array_equal(panel.image[:6, :6], np.full((6, 6), panel.tiles[0][0, 0]))


def test_a_photo_larger_than_its_place_is_reduced_before_it_is_sent():
    states = {"barker": np.ones((1, 400, 300))}
    (panel,) = chains.chain_panels(states, n_show=1, side=160)
    assert panel.tiles[0].shape == (160, 120) and panel.width == 120


@pytest.mark.browser
def test_four_sessions_keep_updating_with_their_own_configurations():
    if not Path(browser_kit.CHROMIUM).exists():
        pytest.fail(browser_kit.MISSING_CHROMIUM)
    result = loadtest.run_load(SESSIONS, SECONDS, shots=ARTIFACTS, log=lambda *_: None)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "load-summary.txt").write_text(result.summary() + "\n")
    print(result.summary())
    assert result.server_alive, result.failures
    assert len(result.results) == SESSIONS
    for session in result.results:
        assert not session.errors, (session.index, session.errors)
        assert not session.foreign, (session.index, session.foreign)
        assert not session.stalled, result.summary()
        assert session.redraws >= SECONDS / loadtest.STALL_S, result.summary()
        assert session.steps > 0, result.summary()
    assert result.memory_samples >= SECONDS  # sampled every half second
    assert 0 < result.peak_rss_mb < MAX_RSS_MB, result.summary()
    assert result.ok, result.summary()
