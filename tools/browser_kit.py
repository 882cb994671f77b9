"""Driving the app in a browser: the kit the end-to-end tests (``tests/browser_support.py``),
the load test (``tools.loadtest``) and the measuring tools (``tools.screenshots``,
``tools.photo_live``, ``tools.live_speed``) share.

- the server: ``StreamlitServer`` starts ``streamlit run app/streamlit_app.py`` on a free port
  and stops it; ``memory_kb`` and ``MemorySampler`` read its memory, children included;
- the browser: ``launch_chromium`` (Debian's headless Chromium through Playwright), ``open_app``,
  ``open_tab``, ``button``;
- reading the page: the chain images, error boxes, the sidebar's widgets, the status line, and
  ``REDRAW_COUNTER``, a script that counts the chain images' redraws in the page itself.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
APP_SCRIPT = "app/streamlit_app.py"
# Playwright's own browser download does not work on these machines: Debian's Chromium does.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
MISSING_CHROMIUM = (
    f"Chromium is not installed at {CHROMIUM}: the browser tests drive Debian's Chromium. "
    "Install Debian's 'chromium' package (apt-get install chromium; `make test` does it when "
    "run as root)."
)
TIMEOUT_MS = 60_000  # generous: two cores shared by the server, the sampler and the browser


# ----------------------------------------------------------------------------- the server
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerError(RuntimeError):
    """The server did not start, or died; the message carries its stderr."""


class StreamlitServer:
    """``streamlit run app/streamlit_app.py`` on a free port, as a subprocess of this one.

    Use as a context manager. stdout and stderr go to temporary files (a pipe nobody reads
    would fill and block the server); ``stderr()`` returns what it wrote.
    """

    def __init__(
        self, port: int | None = None, startup_s: float = 120.0, root: Path = ROOT
    ) -> None:
        self.root = Path(root)  # another checkout's app, for before/after measurements
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.startup_s = startup_s
        self.process: subprocess.Popen | None = None
        self._out = tempfile.TemporaryFile()
        self._err = tempfile.TemporaryFile()
        self._stderr_text: str | None = None  # kept once the files are closed

    def start(self) -> StreamlitServer:
        command = [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            APP_SCRIPT,
            "--server.port",
            str(self.port),
            "--server.headless",
            "true",
            "--server.fileWatcherType",
            "none",
            "--browser.gatherUsageStats",
            "false",
        ]
        self.process = subprocess.Popen(
            command, cwd=self.root, stdout=self._out, stderr=self._err, stdin=subprocess.DEVNULL
        )
        deadline = time.monotonic() + self.startup_s
        while time.monotonic() < deadline:
            if not self.alive():
                raise ServerError(self.describe("exited while starting"))
            if self.healthy():
                return self
            time.sleep(0.25)
        self.stop()
        raise ServerError(self.describe(f"did not answer within {self.startup_s:.0f} s"))

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}_stcore/health", timeout=2) as answer:
                return answer.read().decode().strip() == "ok"
        except OSError:
            return False

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def stderr(self) -> str:
        if self._stderr_text is not None:
            return self._stderr_text
        self._err.seek(0)
        return self._err.read().decode(errors="replace")

    def describe(self, what: str) -> str:
        code = None if self.process is None else self.process.poll()
        status = "" if code is None else f" (exit status {code})"
        return f"The Streamlit server {what}{status}. Its stderr:\n{self.stderr()[-6000:]}"

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def __enter__(self) -> StreamlitServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        self._stderr_text = self.stderr()
        self._out.close()
        self._err.close()


def descendants(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc/<pid>/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def memory_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in kB of ``pid`` plus its descendants; (0, 0) once it is gone."""
    rss = hwm = 0
    for proc in [pid, *descendants(pid)]:
        try:
            text = Path(f"/proc/{proc}/status").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm += int(line.split()[1])
    return rss, hwm


def cpu_seconds(pids) -> float:
    """User and system CPU seconds used so far by the processes ``pids`` (all their threads;
    a process already gone counts nothing)."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return ticks / os.sysconf("SC_CLK_TCK")


class MemorySampler(threading.Thread):
    """Samples ``memory_kb(pid)`` every ``interval_s`` seconds until stopped; keeps the peaks."""

    def __init__(self, pid: int, interval_s: float = 0.5):
        super().__init__(name="memory-sampler", daemon=True)
        self.pid, self.interval_s = pid, interval_s
        self.peak_rss_kb = self.peak_hwm_kb = self.samples = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            rss, hwm = memory_kb(self.pid)
            self.peak_rss_kb = max(self.peak_rss_kb, rss)
            self.peak_hwm_kb = max(self.peak_hwm_kb, hwm)
            self.samples += 1
            self._stop_event.wait(self.interval_s)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)


# ----------------------------------------------------------------------------- the browser
def launch_chromium(playwright):
    """Debian's headless Chromium through Playwright; ``FileNotFoundError`` when missing."""
    if not Path(CHROMIUM).exists():
        raise FileNotFoundError(MISSING_CHROMIUM)
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def app_url(base: str, query: dict[str, str] | None = None) -> str:
    return base if not query else f"{base}?{urlencode(query, safe=',')}"


def button(page, key: str):
    """The visible button of the keyed widget ``key`` (a button with help text also renders a
    hidden copy of itself)."""
    return page.locator(f".st-key-{key} button:visible").first


def open_app(page, url: str, timeout_ms: int = TIMEOUT_MS) -> None:
    """Load the app and wait until the page is drawn: the title and the Run button."""
    page.goto(url, timeout=timeout_ms)
    page.get_by_role("heading", name="LSB Explorer").first.wait_for(timeout=timeout_ms)
    button(page, "run").wait_for(timeout=timeout_ms)


def open_tab(page, name: str, timeout_ms: int = TIMEOUT_MS) -> None:
    """Select the tab ``name`` (choosing its group of views first when another group is open)
    and wait until the page says it is selected."""
    from app.view_catalogue import ISING  # the app's groups of views (imports torch: only here)

    tab = page.get_by_role("tab", name=name, exact=True)
    if not tab.is_visible():
        group = page.locator(".st-key-view_group button", has_text=ISING.group_of(name)).first
        group.click(timeout=timeout_ms)
    tab.click(timeout=timeout_ms)
    page.wait_for_function(
        """name => [...document.querySelectorAll('[role="tab"]')].some(
               t => t.innerText.trim() === name && t.getAttribute('aria-selected') === 'true')""",
        arg=name,
        timeout=timeout_ms,
    )


# the chain panels: one row per sampler in the open tab (a container keyed "chainrow_<name>"),
# its tiles' image sources joined into one string
_CHAIN_SRCS = r"""() => [...document.querySelectorAll(
        '[role="tabpanel"] [class*="st-key-chainrow_"]')]
    .filter(e => e.offsetParent !== null)
    .map(e => [...e.querySelectorAll('img')].map(img => img.src).join('|'))"""


def chain_srcs(page) -> list[str]:
    """Per sampler row of the open Chains tab: its tiles' ``src`` (inline PNG data URLs),
    joined by ``|``."""
    return page.evaluate(_CHAIN_SRCS)


def wait_for_chain_change(page, before: list[str], timeout_ms: int = TIMEOUT_MS) -> list[str]:
    """Wait until the chain images differ from ``before``; return the new ``src`` list."""
    page.wait_for_function(
        f"""before => {{ const now = ({_CHAIN_SRCS})();
               return now.length > 0 && JSON.stringify(now) !== JSON.stringify(before); }}""",
        arg=before,
        timeout=timeout_ms,
        polling=200,
    )
    return chain_srcs(page)


def page_problems(page) -> list[str]:
    """Texts of tracebacks and error boxes on the page (empty when healthy)."""
    return page.evaluate(
        """() => [...document.querySelectorAll(
                '[data-testid="stException"], [data-testid="stAlertContentError"]')]
            .filter(e => e.offsetParent !== null)
            .map(e => e.innerText.trim().slice(0, 300))"""
    )


def sidebar_text(page, key: str) -> str:
    """The visible text of the sidebar widget ``key`` (label and current value)."""
    return page.locator(f'[data-testid="stSidebar"] .st-key-{key}').first.inner_text()


def radio_value(page, key: str) -> str:
    """The label of the selected option of the radio ``key``."""
    option = page.locator(f'.st-key-{key} [data-testid="stRadioOption"][data-selected="true"]')
    return option.first.inner_text().strip()


def multiselect_values(page, key: str) -> list[str]:
    """The labels of the chosen options of the multiselect ``key``."""
    tags = page.locator(f".st-key-{key} [data-tag]")
    return [
        " ".join((tags.nth(i).get_attribute("aria-label") or "").split())
        for i in range(tags.count())
    ]


def input_value(page, key: str) -> str:
    """The value of the first input of the widget ``key``: a number input's number, a
    selectbox's shown option, a slider's value."""
    return page.locator(f".st-key-{key} input").first.input_value()


STATUS_LINE = re.compile(r"Step ([\d,]+) · .*target evaluations")  # sweeps come between


def status_text(page) -> str:
    """The run's status line ("Step N · sweeps · target evaluations per chain … · speed")."""
    # visible ones only: a tab left keeps its last drawing (its status line too) until shown
    captions = page.locator('[data-testid="stCaptionContainer"]').filter(visible=True)
    texts = captions.all_inner_texts()
    return next((t.strip() for t in texts if STATUS_LINE.search(t)), "")


def steps_shown(page) -> int:
    """The step count the status line shows (-1 when there is no status line)."""
    match = STATUS_LINE.search(status_text(page))
    return int(match.group(1).replace(",", "")) if match else -1


# Counted in the page: every 100 ms, whether the chain images' sources changed since the last
# look (the page redraws them at most five times a second while running).
REDRAW_COUNTER = (
    """() => { if (window.__lsbRedraws) return;
    const srcs = """
    + _CHAIN_SRCS
    + """;
    const state = window.__lsbRedraws = {last: JSON.stringify(srcs()), times: []};
    setInterval(() => { const now = JSON.stringify(srcs());
        if (now !== state.last && now !== '[]') { state.last = now; state.times.push(Date.now()); }
    }, 100); }"""
)


def sampler_tags(names) -> list[str]:
    """The sampler multiselect's tag texts for sampler ``names`` (whitespace collapsed)."""
    logging.disable(logging.WARNING)  # app.sidebar's caches warn that there is no runtime here
    try:
        from app.sidebar import SAMPLER_LABELS
    finally:
        logging.disable(logging.NOTSET)
    return [" ".join(SAMPLER_LABELS.get(n, n).split()) for n in names]
