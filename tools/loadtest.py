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
is sampled every half second, and the CPU seconds the server and the browser used over the
measured window are read from ``/proc`` (the browser's pages share the machine's cores with the
server: both count, per redraw seen). A summary is printed; the exit status is non-zero when a
session stopped updating (fewer than one redraw per ``STALL_S`` seconds over the second half),
showed another's configuration, or errored.

The server and the browser are driven with ``tools.browser_kit``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from tools.browser_kit import (
    REDRAW_COUNTER,
    TIMEOUT_MS,
    MemorySampler,
    ServerError,
    StreamlitServer,
    app_url,
    button,
    cpu_seconds,
    descendants,
    input_value,
    launch_chromium,
    multiselect_values,
    open_app,
    page_problems,
    sampler_tags,
    steps_shown,
)

STALL_S = 5.0  # a running session must redraw its chains at least this often

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
        from lsbcore.studies.figures import sampler_label

        return {
            "case": f"Case {self.case}:",
            "samplers": " | ".join(sampler_tags(self.samplers)),
            "seed": str(self.seed),
            "size": str(self.size),
            "posterior": f"case {self.case}: · {self.size} × {self.size} sites",
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
    const posterior = captions.find(t => / sites[^·]* · /.test(t)) || '';
    const m = posterior.match(/^(case \d+:)[^·]*· (\d+ × \d+ sites)/);
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
    server_cpu_s: float = 0.0  # CPU seconds over the measured window, all threads
    browser_cpu_s: float = 0.0  # the same for Chromium's processes (every page's renderer)

    @property
    def redraws(self) -> int:
        return sum(r.redraws for r in self.results)

    def cpu_per_redraw_ms(self, cpu_s: float) -> float:
        return 1000 * cpu_s / max(1, self.redraws)

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
        rates = [r.redraws_per_s for r in self.results]
        lines.append(
            f"redraws/s per session {min(rates):.2f}-{max(rates):.2f}, longest gap "
            f"{max(r.longest_gap_s for r in self.results):.1f} s, steps in all "
            f"{sum(r.steps for r in self.results):,}"
        )
        lines.append(
            f"CPU over the window: server {self.server_cpu_s:.1f} s "
            f"({self.cpu_per_redraw_ms(self.server_cpu_s):.0f} ms per redraw seen), browser "
            f"{self.browser_cpu_s:.1f} s ({self.cpu_per_redraw_ms(self.browser_cpu_s):.0f} ms "
            f"per redraw), {self.redraws} redraws"
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
    root: Path | None = None,
) -> LoadResult:
    """Drive ``sessions`` browser sessions against one server for ``seconds``; see the module
    docstring. ``shots``: a folder for one screenshot per session at the end; ``root``: another
    checkout's app to serve (a before/after measurement)."""
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
    cpu = {"server": 0.0, "browser": 0.0}
    server_kw = {} if root is None else {"root": root}
    with StreamlitServer(port, **server_kw) as server, sync_playwright() as playwright:
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
                page.evaluate(REDRAW_COUNTER)
                log(f"session {spec.index} running: {result.config}")
            cpu_before = _cpu_now(server.pid)
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
            cpu = {k: v - cpu_before[k] for k, v in _cpu_now(server.pid).items()}
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
        server_cpu_s=round(cpu["server"], 2),
        browser_cpu_s=round(cpu["browser"], 2),
    )


def _cpu_now(server_pid: int) -> dict[str, float]:
    """CPU seconds used so far by the server (with its children) and by Chromium (the
    processes of this one's tree whose name starts with "chrom")."""
    browser = [p for p in descendants(os.getpid()) if _name(p).startswith("chrom")]
    return {
        "server": cpu_seconds([server_pid, *descendants(server_pid)]),
        "browser": cpu_seconds(browser),
    }


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


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
    parser.add_argument(
        "--root", type=Path, default=None, help="serve another checkout's app (before/after)"
    )
    args = parser.parse_args(argv)
    if args.sessions < 1 or args.seconds <= 0:
        parser.error("--sessions must be at least 1 and --seconds positive")
    try:
        result = run_load(
            args.sessions, args.seconds, args.port, args.shots, speed=args.speed, root=args.root
        )
    except (FileNotFoundError, ServerError) as err:
        print(err, file=sys.stderr)
        return 2
    print(result.summary())
    if args.json is not None:
        args.json.write_text(json.dumps(result.as_dict(), indent=2) + "\n")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
