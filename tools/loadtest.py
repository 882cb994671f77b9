"""Several people at once: one server, N browser sessions, each with its own configuration.

``python -m tools.loadtest [--sessions 4] [--seconds 60] [--port P] [--json out.json]`` starts one
``streamlit run app/streamlit_app.py`` server, opens N independent sessions in one headless
Chromium (a Playwright browser context each, so no cookies or storage are shared), gives each a
different configuration through the link's query parameters, presses Run in each and then, for
the duration, polls every page:

- how often its chain images changed (redraws seen per second, counted in the page itself by
  a 100 ms timer comparing the images' inline PNG sources);
- that it still shows its own configuration and not another session's: the sidebar's case,
  samplers, seed and size, and, from the session's run, the posterior's caption and the
  chain rows (checked every 2 s);
- that no traceback or error box appeared, and no JavaScript error.

Meanwhile the server's memory (VmRSS and VmHWM from ``/proc/<pid>/status``, children included)
is sampled every half second. A summary is printed; the exit status is non-zero when a session
stopped updating (fewer than one redraw per ``STALL_S`` seconds over the second half), showed
another's configuration, or errored.

The first half of this module is the small browser-driving kit the end-to-end tests
(``tests/browser_support.py``) and ``tools.screenshots`` share: start and stop a server, launch
Debian's Chromium, open the app, press its buttons, read its images.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field, replace
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
STALL_S = 5.0  # a running session must redraw its chains at least this often


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


def _children(pid: int) -> list[int]:
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
    for proc in [pid, *_children(pid)]:
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
    from app.view_links import group_of  # the app's groups of views (imports torch: only here)

    tab = page.get_by_role("tab", name=name, exact=True)
    if not tab.is_visible():
        group = page.locator(".st-key-view_group button", has_text=group_of(name)).first
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
    texts = page.locator('[data-testid="stCaptionContainer"]').all_inner_texts()
    return next((t.strip() for t in texts if STATUS_LINE.search(t)), "")


def steps_shown(page) -> int:
    """The step count the status line shows (-1 when there is no status line)."""
    match = STATUS_LINE.search(status_text(page))
    return int(match.group(1).replace(",", "")) if match else -1


# ----------------------------------------------------------------------------- the load test
# Small configurations, each different: its own paper case, two samplers of its own, its own
# seed and lattice size; the app's default speed ("auto": as fast as the machine allows), which
# the server must share fairly between sessions (``--speed N`` caps steps per refresh).
BASE_CONFIGS = (
    {"case": 1, "samplers": ("barker", "sqrt"), "size": 24},
    {"case": 2, "samplers": ("max", "lsb1"), "size": 28},
    {"case": 3, "samplers": ("min", "gibbs"), "size": 32},
    {"case": 4, "samplers": ("lsb2", "metropolis"), "size": 26},
)
CHAINS = 16  # enough work per step that no run finishes during the test
BURN_IN = 50_000  # long runs (the most a link allows), so none finishes during the test
SPEED = "auto"

# Counted in the page: every 100 ms, whether the chain images' sources changed since the last
# look (the page redraws them at most five times a second while running).
_COUNTER = (
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


@dataclass(frozen=True)
class SessionSpec:
    """One session's configuration, and how its page must look."""

    index: int
    case: int
    samplers: tuple[str, ...]
    size: int
    seed: int
    speed: str = SPEED

    def config(self):
        from app import config as cfgmod

        return replace(
            cfgmod.defaults_for("paper", case=self.case),
            samplers=self.samplers,
            size=self.size,
            seed=self.seed,
            chains=CHAINS,
            burn_in=BURN_IN,
            steps=200_000,
            speed=self.speed,
        )

    def query(self) -> dict[str, str]:
        from app import config as cfgmod

        return cfgmod.to_query_params(self.config())

    def identity(self) -> dict[str, str]:
        """What a page running this configuration shows: the sidebar's widgets, the posterior's
        caption and the chain rows (the last two come from the session's own run)."""
        from lsbcore.figures import sampler_label

        return {
            "case": f"Case {self.case}:",
            "samplers": " | ".join(sampler_tags(self.samplers)),
            "seed": str(self.seed),
            "size": str(self.size),
            "posterior": f"case {self.case}: · {self.size}×{self.size} sites",
            "rows": " | ".join(sampler_label(n) for n in self.samplers),
        }


def session_specs(n: int) -> list[SessionSpec]:
    """``n`` different configurations (the base four, then again with other seeds and sizes)."""
    specs = []
    for i in range(n):
        base = BASE_CONFIGS[i % len(BASE_CONFIGS)]
        lap = i // len(BASE_CONFIGS)
        size = base["size"] + 2 * lap
        specs.append(SessionSpec(i, base["case"], base["samplers"], size, seed=101 + i))
    return specs


_SHOWN = r"""() => {
    const captions = [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
        .map(e => e.innerText);
    const posterior = captions.find(t => / sites · /.test(t)) || '';
    const m = posterior.match(/^(case \d+:)[^·]*· (\d+×\d+ sites)/);
    const rows = [...document.querySelectorAll('[role="tabpanel"] [class*="st-key-chainrow_"]')]
        .map(e => e.innerText.match(/^(.*): chains? 1(–\d+)? of \d+/)).filter(x => x)
        .map(x => x[1]);
    return {posterior: m ? `${m[1]} · ${m[2]}` : posterior.slice(0, 60), rows: rows.join(' | ')};
}"""


def shown_identity(page) -> dict[str, str]:
    """What the page shows now, in the form of ``SessionSpec.identity``."""
    return {
        "case": input_value(page, "case"),
        "samplers": " | ".join(multiselect_values(page, "samplers")),
        "seed": input_value(page, "seed"),
        "size": input_value(page, "size"),
        **page.evaluate(_SHOWN),
    }


def _matches(shown: dict[str, str], expected: dict[str, str]) -> bool:
    return shown["case"].startswith(expected["case"]) and all(
        shown[key] == expected[key] for key in expected if key != "case"
    )


@dataclass
class SessionResult:
    index: int
    config: str  # "case 1 · barker, sqrt · seed 101 · 24x24"
    redraws: int = 0
    redraws_per_s: float = 0.0
    second_half_redraws: int = 0
    longest_gap_s: float = 0.0
    steps: int = 0  # the step count the page showed last
    foreign: list[str] = field(default_factory=list)  # another session's configuration seen
    errors: list[str] = field(default_factory=list)  # tracebacks, error boxes, page errors
    stalled: bool = False


@dataclass
class LoadResult:
    sessions: int
    seconds: float
    peak_rss_mb: float
    peak_hwm_mb: float
    memory_samples: int
    server_alive: bool
    results: list[SessionResult]
    failures: list[str]

    @property
    def ok(self) -> bool:
        return not self.failures

    def as_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}

    def summary(self) -> str:
        lines = [
            f"{self.sessions} sessions for {self.seconds:.0f} s on one server: peak RSS "
            f"{self.peak_rss_mb:.0f} MB (VmHWM {self.peak_hwm_mb:.0f} MB, "
            f"{self.memory_samples} samples)",
            f"{'session':<48} {'redraws/s':>9} {'2nd half':>8} {'max gap':>8} {'steps':>7}",
        ]
        for r in self.results:
            lines.append(
                f"{r.index}: {r.config:<45} {r.redraws_per_s:>9.2f} {r.second_half_redraws:>8} "
                f"{r.longest_gap_s:>7.1f}s {r.steps:>7,}"
            )
        errors = sum(len(r.errors) for r in self.results)
        lines.append(
            f"errors: {errors}; configuration mix-ups: {sum(len(r.foreign) for r in self.results)}"
        )
        lines += [f"FAIL: {f}" for f in self.failures] or ["OK"]
        return "\n".join(lines)


def _check_page(page, spec: SessionSpec, specs: list[SessionSpec], result: SessionResult) -> None:
    """Record an error, or another session's configuration, shown on this page.

    A page in the middle of a redraw can briefly show an empty widget; a mismatch counts only
    when a second look half a second later still shows it.
    """
    for problem in page_problems(page):
        if problem not in result.errors:
            result.errors.append(problem)
    for attempt in range(2):
        shown = shown_identity(page)
        if _matches(shown, spec.identity()):
            return
        if attempt == 0:
            page.wait_for_timeout(500)
    others = [s.index for s in specs if s.index != spec.index and _matches(shown, s.identity())]
    note = (
        f"showed session {others[0]}'s configuration"
        if others
        else f"showed a configuration of nobody's: {shown}"
    )
    if note not in result.foreign:
        result.foreign.append(note)


def run_load(
    sessions: int = 4,
    seconds: float = 60.0,
    port: int | None = None,
    shots: Path | None = None,
    log=print,
    speed: str = SPEED,
) -> LoadResult:
    """Drive ``sessions`` browser sessions against one server for ``seconds``; see the module
    docstring. ``shots``: a folder for one screenshot per session at the end."""
    from playwright.sync_api import sync_playwright

    specs = [replace(s, speed=speed) for s in session_specs(sessions)]
    results = [
        SessionResult(
            s.index,
            f"case {s.case} · {', '.join(s.samplers)} · seed {s.seed} · {s.size}x{s.size}",
        )
        for s in specs
    ]
    failures: list[str] = []
    elapsed, alive = 0.0, False
    with StreamlitServer(port) as server, sync_playwright() as playwright:
        memory = MemorySampler(server.pid)
        memory.start()
        browser = launch_chromium(playwright)
        pages = []
        try:
            for spec, result in zip(specs, results, strict=True):  # open all, then run all
                context = browser.new_context(viewport={"width": 1400, "height": 900})
                context.set_default_timeout(TIMEOUT_MS)
                page = context.new_page()
                page.on("pageerror", lambda err, r=result: r.errors.append(f"page error: {err}"))
                open_app(page, app_url(server.url, spec.query()))
                _check_page(page, spec, specs, result)
                pages.append(page)
            for page, spec, result in zip(pages, specs, results, strict=True):
                button(page, "run").click()
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.st-key-pause button')]"
                    ".some(b => !b.disabled)"
                )
                page.evaluate(_COUNTER)
                log(f"session {spec.index} running: {result.config}")
            start = time.time()
            end = start + seconds
            next_check = start
            while time.time() < end:
                if time.time() >= next_check:  # every 2 s: identity and errors on every page
                    for page, spec, result in zip(pages, specs, results, strict=True):
                        _check_page(page, spec, specs, result)
                    next_check = time.time() + 2.0
                if not server.alive():
                    break
                time.sleep(0.25)
            elapsed = time.time() - start
            half = start + elapsed / 2
            for page, spec, result in zip(pages, specs, results, strict=True):
                _check_page(page, spec, specs, result)
                times = [t / 1000 for t in page.evaluate("() => window.__lsbRedraws.times")]
                times = [t for t in times if start <= t <= start + elapsed]
                result.redraws = len(times)
                result.redraws_per_s = len(times) / elapsed
                result.second_half_redraws = sum(t >= half for t in times)
                edges = [start, *times, start + elapsed]
                result.longest_gap_s = max(b - a for a, b in zip(edges, edges[1:], strict=False))
                result.steps = steps_shown(page)
                result.stalled = result.second_half_redraws < (elapsed / 2) / STALL_S
                if shots is not None:
                    shots.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(shots / f"load-session-{spec.index}.png"))
        finally:
            memory.stop()
            alive = server.alive()
            browser.close()
        if not alive:
            failures.append(server.describe("died during the load test"))
    for r in results:
        if r.stalled:
            failures.append(
                f"session {r.index} stopped updating: {r.second_half_redraws} redraws in the "
                f"second half (longest gap {r.longest_gap_s:.1f} s)"
            )
        failures += [f"session {r.index} {note}" for note in r.foreign]
        failures += [f"session {r.index} error: {e}" for e in r.errors]
    return LoadResult(
        sessions=sessions,
        seconds=round(elapsed, 1),
        peak_rss_mb=memory.peak_rss_kb / 1024,
        peak_hwm_mb=memory.peak_hwm_kb / 1024,
        memory_samples=memory.samples,
        server_alive=alive,
        results=results,
        failures=failures,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.loadtest",
        description="N browser sessions with different configurations against one server.",
    )
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--port", type=int, default=None, help="default: a free port")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--shots", type=Path, default=None, help="a screenshot per session")
    parser.add_argument("--speed", default=SPEED, help="steps per refresh, or auto (default)")
    args = parser.parse_args(argv)
    if args.sessions < 1 or args.seconds <= 0:
        parser.error("--sessions must be at least 1 and --seconds positive")
    try:
        result = run_load(args.sessions, args.seconds, args.port, args.shots, speed=args.speed)
    except (FileNotFoundError, ServerError) as err:
        print(err, file=sys.stderr)
        return 2
    print(result.summary())
    if args.json is not None:
        args.json.write_text(json.dumps(result.as_dict(), indent=2) + "\n")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
