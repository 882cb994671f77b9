"""Several people at once, the short form of ``python -m tools.loadtest``: four browser sessions
with different configurations on one server for 20 seconds.

Each session must keep redrawing its chains (at least one redraw per ``STALL_S`` seconds over
the second half), show its own configuration and never another's, and show no error; the
server must stay up. Its memory is sampled and must stay within a generous bound.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import browser_kit, loadtest

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts" / "browser"
SESSIONS, SECONDS = 4, 20.0
MAX_RSS_MB = 2000  # measured about 450 MB; this catches a leak or a runaway, not noise


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
