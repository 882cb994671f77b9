"""Fixtures and helpers for the end-to-end tests in headless Chromium.

- ``server`` (module scope): ``streamlit run app/streamlit_app.py`` on a free port, started from
  the project root; it yields the base URL once ``/_stcore/health`` answers "ok". One server
  serves every module of the session (each test has sessions of its own, and a page left
  stops its run within seconds): a module that finds it dead or not answering starts another,
  and the last is terminated as pytest ends. A test that finds it dead fails with the
  server's stderr.
- ``browser`` (module scope): Debian's Chromium (``/usr/bin/chromium``) through Playwright. When
  it is missing the tests fail (never skip) and say to install Debian's ``chromium`` package.
- ``page``: a fresh browser context (its own Streamlit session) and page per test, 1400x900.
- ``shot(page, name)``: a full-page screenshot under ``artifacts/browser/`` (gitignored).

Test modules import the fixture functions (``server_fixture``, ``browser_fixture``,
``page_fixture``); pytest knows them by their names ``server``, ``browser`` and ``page``.
The browser-driving helpers themselves live in ``tools.browser_kit`` (shared with the load test
and ``tools.screenshots``) and are re-exported here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools.browser_kit import (  # noqa: F401  (re-exported for the test modules)
    CHROMIUM,
    MISSING_CHROMIUM,
    TIMEOUT_MS,
    ServerError,
    StreamlitServer,
    app_url,
    button,
    chain_srcs,
    input_value,
    launch_chromium,
    multiselect_values,
    open_app,
    open_tab,
    page_problems,
    radio_value,
    sidebar_text,
    wait_for_chain_change,
)

try:  # every module's expect() waits as long as its other waits, whichever module ran first
    from playwright.sync_api import expect  # (the setting is global to the process)

    expect.set_options(timeout=TIMEOUT_MS)
except ImportError:  # the browser fixture says what to install
    pass

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts" / "browser"
VIEWPORT = {"width": 1400, "height": 900}


class Server:
    """What the ``server`` fixture yields: the running server and its base URL."""

    def __init__(self, process: StreamlitServer):
        self.process = process
        self.url = process.url

    def check(self) -> None:
        """Fail the test, with the server's stderr, when the server died or stopped answering."""
        if not self.process.alive():
            pytest.fail(self.process.describe("died"))
        if not self.process.healthy():
            pytest.fail(self.process.describe("stopped answering its health check"))


# pytest's config holds the session's server: test modules import this file both as
# ``browser_support`` and as ``tests.browser_support``, two modules with globals of their own
_SERVER_ATTR = "_lsb_streamlit_server"


def shared_server(config) -> StreamlitServer:
    """The session's server: the one running, or a new one (stopped as pytest ends) when there
    is none or it died or stopped answering. Starting and stopping a server, and its first
    pages (imports, caches such as an RBM's noise floor), cost seconds a module."""
    process = getattr(config, _SERVER_ATTR, None)
    if process is not None and process.alive() and process.healthy():
        return process
    if process is not None:
        process.stop()
    process = StreamlitServer()
    try:
        process.start()
    except ServerError as err:
        pytest.fail(str(err))
    setattr(config, _SERVER_ATTR, process)
    config.add_cleanup(process.stop)
    return process


@pytest.fixture(scope="module", name="server")
def server_fixture(request):
    process = shared_server(request.config)
    yield Server(process)
    if not process.alive():
        pytest.fail(process.describe("died during the tests"))


@pytest.fixture(scope="module", name="browser")
def browser_fixture():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright is not installed: `make test` installs requirements-dev.txt.")
    if not Path(CHROMIUM).exists():
        pytest.fail(MISSING_CHROMIUM)
    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        yield chromium
        chromium.close()


@pytest.fixture(name="page")
def page_fixture(browser, server):
    """A fresh context (cookies, storage and so a Streamlit session of its own) and page."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_MS)
    tab = context.new_page()
    yield tab
    context.close()  # the session's run pauses itself once nobody looks (state.STALE_S)
    server.check()


def shot(page, name: str) -> Path:
    """Save a full-page screenshot as ``artifacts/browser/<name>.png``; return its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def assert_healthy(page) -> None:
    """No traceback and no error box on the page."""
    problems = page_problems(page)
    assert not problems, problems


def stop_if_running(page) -> None:
    """Pause the run, or find it ended: the compiled steps finish a short default run (an RBM's,
    MN 1's 10,500 steps, a lecture's selection run) in seconds, which on a fast or a loaded
    machine can be before the test gets to its pause button."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    pause = button(page, "pause")
    try:
        if pause.is_enabled():
            pause.click(timeout=5_000)
    except PlaywrightTimeout:
        assert not pause.is_enabled()  # the run ended between the look and the click
    page.wait_for_function(
        "() => [...document.querySelectorAll('.st-key-pause button')].every(b => b.disabled)",
        timeout=TIMEOUT_MS,
    )
