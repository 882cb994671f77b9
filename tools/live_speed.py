"""The live run's speed against the library's: ``python -m tools.live_speed``.

Two figures for one configuration (the default run: paper case 3, the default samplers, 4
chains, traces at every step), taken one after the other on the same machine:

1. the library: ``lsbcore.Comparison.step`` in chunks of ``TRACE_CHUNK`` steps and nothing else,
   burn-in (learning) and mixing separately, in steps per second (a step advances every chain of
   every sampler once);
2. the app: a ``streamlit run`` server (of this tree, or of ``--root``) and one headless Chromium
   page on the default view, Run pressed; the step counter of the page's status line is read
   every quarter second, from which come the seconds burn-in took and the mixing rate over the
   window (the link asks for 150,000 mixing steps, so a fast server does not run out of them),
   and how often the chain images changed meanwhile (redraws per second, counted in the page).

It prints both, the app's mixing rate as a share of the library's, and the status lines seen.
``--browser-cpu N`` puts Chromium on CPU ``N`` and the server and the library on the others, as
when the page is drawn on the user's own machine: on a 2-core machine the browser otherwise
takes most of a core the server's threads would use.
``--root /path/to/another/checkout`` measures that checkout's app (for before/after figures;
its compiled kernels are built first, outside the timing).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path

from tools import browser_kit

MIXING_STEPS = 150_000  # traces at every step still fit the session's bound (12 M values)
POLL_S = 0.25
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user and system) ``pid`` and its descendants have used so far."""
    total = 0.0
    for proc in [pid, *browser_kit.descendants(pid)]:
        try:
            fields = Path(f"/proc/{proc}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) * TICK_S  # utime, stime
    return total


@contextmanager
def on_cpus(cpus: set[int] | None):
    """Run the block, and the processes and threads it starts, on ``cpus`` (None: unchanged)."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def split_cpus(browser_cpu: int | None) -> tuple[set[int] | None, set[int] | None]:
    """(the server's and library's CPUs, the browser's) for ``--browser-cpu``."""
    if browser_cpu is None:
        return None, None
    cpus = os.sched_getaffinity(0)
    if browser_cpu not in cpus or len(cpus) < 2:
        raise SystemExit(f"--browser-cpu {browser_cpu}: this process may use CPUs {sorted(cpus)}")
    return cpus - {browser_cpu}, {browser_cpu}


def default_config(samplers: tuple[str, ...] | None):
    from app.config import Config

    cfg = Config()
    return cfg if samplers is None else replace(cfg, samplers=samplers)


def library_rate(samplers: tuple[str, ...] | None, seconds: float) -> dict:
    """Steps per second of ``Comparison.step`` on the app's own problem, per phase."""
    import torch

    from app import sources, state
    from lsbcore.comparison import TRACE_CHUNK
    from lsbcore.samplers import warmup

    torch.set_num_threads(1)  # as the app
    warmup.compile_kernels()
    cfg = default_config(samplers)
    out = {"samplers": list(cfg.samplers), "chains": cfg.chains, "thin": cfg.thin}
    for phase in ("burnin", "mixing"):
        run, _ = state.build_run(cfg, sources.build_problem(cfg))
        comparison, learn = run.comparison, phase == "burnin"
        if not learn:
            comparison.step(cfg.burn_in, learn=True)
            comparison.start_mixing()
        comparison.step(TRACE_CHUNK // 8, learn=learn)  # warm-up
        steps, start, cpu = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - start < seconds:
            comparison.step(TRACE_CHUNK, learn=learn)
            steps += TRACE_CHUNK
        out[f"{phase}_steps_per_second"] = steps / (time.perf_counter() - start)
        out[f"{phase}_steps_per_cpu_second"] = steps / (time.process_time() - cpu)
    out["default_run_s"] = (
        cfg.burn_in / out["burnin_steps_per_second"] + cfg.steps / out["mixing_steps_per_second"]
    )
    return out


def compile_kernels(root: Path) -> None:
    """Build (or load) ``root``'s compiled kernels in a process of their own, untimed."""
    code = "from lsbcore.samplers import warmup; warmup.compile_kernels()"
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True)


# The app's worker thread on the run, nothing drawn, in a process of ``root``'s own: every call
# of Comparison.step counted (argv: samplers, mixing steps, seconds; prints one JSON line)
WORKER = """
import json, sys, time
from dataclasses import replace
import torch
sys.path.insert(0, ".")
from app import sources, state
from app.config import Config
from lsbcore.samplers import warmup
try:
    from app.late_imports import import_all as import_later
except ImportError:  # an older tree (--root): its page thread imported them
    import_later = state.worker_imports
torch.set_num_threads(1)
warmup.compile_kernels()
samplers, steps, seconds = tuple(sys.argv[1].split(",")), int(sys.argv[2]), float(sys.argv[3])
cfg = replace(Config(), samplers=samplers, steps=steps)
run, _ = state.build_run(cfg, sources.build_problem(cfg))
state.advance(run, 100.0, cfg.burn_in + 200)
calls, step = [], run.comparison.step
def counted(n, learn=False, names=None):
    calls.append(n)
    step(n, learn=learn, names=names)
run.comparison.step = counted
import_later()  # once per server, before its first run: not the worker's rate
steps0, cpu0 = run.n_steps, time.process_time()
state.start(run)
start = time.perf_counter()
while time.perf_counter() - start < seconds and run.running:  # until the window or the run ends
    time.sleep(0.01)
    run.last_seen = time.perf_counter()
state.pause(run)
if run.error:
    raise SystemExit(run.error)
wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
print(json.dumps({"steps_per_second": (run.n_steps - steps0) / wall,
    "steps_per_cpu_second": (run.n_steps - steps0) / cpu, "calls_per_second": len(calls) / wall,
    "median_steps_per_call": sorted(calls)[len(calls) // 2] if calls else 0}))
"""


def worker_rate(root: Path, samplers: tuple[str, ...] | None, seconds: float) -> dict:
    """The mixing rate of ``root``'s worker alone (no server, no page) and its calls."""
    cfg = default_config(samplers)
    argv = [",".join(cfg.samplers), str(MIXING_STEPS), str(seconds)]
    done = subprocess.run(
        [sys.executable, "-c", WORKER, *argv], cwd=root, check=True, capture_output=True, text=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def app_rate(
    root: Path,
    samplers: tuple[str, ...] | None,
    seconds: float,
    settle_s: float = 8.0,
    server_cpus: set[int] | None = None,
    browser_cpus: set[int] | None = None,
) -> dict:
    """Press Run on one page of ``root``'s app and read its status line for ``seconds`` of
    mixing (or until the run ends); the server on ``server_cpus``, Chromium on
    ``browser_cpus`` (None: anywhere)."""
    from playwright.sync_api import sync_playwright

    cfg = replace(default_config(samplers), steps=MIXING_STEPS)
    # the samplers always in the link: another checkout's defaults may differ from this one's
    query = {"steps": str(cfg.steps), "samplers": ",".join(cfg.samplers)}
    compile_kernels(root)
    seen: list[tuple[float, int, str]] = []  # (time, step, status line)
    cpu: dict[int, float] = {}  # step -> the server's CPU seconds when the page showed it
    with ExitStack() as stack:
        with on_cpus(server_cpus):  # the server's threads inherit it
            server = stack.enter_context(browser_kit.StreamlitServer(root=root))
        with on_cpus(browser_cpus):  # Playwright's driver, and the Chromium it starts
            playwright = stack.enter_context(sync_playwright())
            browser = browser_kit.launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            browser_kit.open_app(page, browser_kit.app_url(server.url, query))
            page.wait_for_timeout(1000 * settle_s)  # the server loads its kernels meanwhile
            browser_kit.button(page, "run").click()
            pressed, pressed_epoch = time.perf_counter(), time.time()
            page.evaluate(browser_kit.REDRAW_COUNTER)  # the chain images' changes, timed there
            mixing_since = None
            while time.perf_counter() - pressed < seconds + 120:
                text = browser_kit.status_text(page)
                match = browser_kit.STATUS_LINE.search(text)
                step = int(match.group(1).replace(",", "")) if match else -1
                now = time.perf_counter() - pressed
                if step >= 0 and (not seen or step != seen[-1][1]):
                    seen.append((now, step, text))
                    cpu[step] = cpu_seconds(server.pid)
                if mixing_since is None and step >= cfg.burn_in:
                    mixing_since = now
                if step >= cfg.total_steps or (
                    mixing_since is not None and now - mixing_since >= seconds
                ):
                    break
                time.sleep(POLL_S)
            redraws = [t / 1000 - pressed_epoch for t in page.evaluate("window.__lsbRedraws.times")]
        finally:
            browser.close()
    mixing = [(t, s) for t, s, _ in seen if s >= cfg.burn_in]
    out = {"root": str(root), "samplers": list(cfg.samplers), "status_lines": seen[-8:]}
    if seen:
        out["burnin_s"] = next((t for t, s, _ in seen if s >= cfg.burn_in), None)
    if len(mixing) >= 2:
        (t0, s0), (t1, s1) = mixing[0], mixing[-1]
        out["mixing_window_s"] = t1 - t0
        out["mixing_steps_per_second"] = (s1 - s0) / (t1 - t0) if t1 > t0 else None
        out["redraws_per_second"] = sum(t0 <= t <= t1 for t in redraws) / (t1 - t0)
        # the whole server's CPU (sampling, pages, the event loop) per step: what a quiet
        # machine's speed would be bounded by, whatever else ran on this one meanwhile
        out["mixing_steps_per_cpu_second"] = (s1 - s0) / max(cpu[s1] - cpu[s0], TICK_S)
    return out


def _print_library(library: dict) -> None:
    print(
        f"library ({', '.join(library['samplers'])} x {library['chains']} chains, thin "
        f"{library['thin']}): burn-in {library['burnin_steps_per_second']:,.0f} steps/s, "
        f"mixing {library['mixing_steps_per_second']:,.0f} steps/s "
        f"({library['mixing_steps_per_cpu_second']:,.0f} per CPU second); the default run "
        f"{library['default_run_s']:.1f} s"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.live_speed", description=__doc__)
    parser.add_argument("--root", type=Path, default=browser_kit.ROOT, help="the app to serve")
    parser.add_argument("--samplers", default=None, help="comma-separated (default: the app's)")
    parser.add_argument("--seconds", type=float, default=20.0, help="of mixing, in the app")
    parser.add_argument("--library-seconds", type=float, default=4.0, help="per phase")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument(
        "--browser-cpu",
        type=int,
        default=None,
        help="Chromium on this CPU, the server and the library on the others",
    )
    parser.add_argument(
        "--worker-only",
        action="store_true",
        help="only the worker thread, no server or browser: its rate and Comparison.step calls",
    )
    args = parser.parse_args(argv)
    samplers = tuple(args.samplers.split(",")) if args.samplers else None
    if args.worker_only:
        worker = worker_rate(args.root.resolve(), samplers, args.seconds)
        print(
            f"worker of {args.root.resolve()}, mixing, nothing drawn: "
            f"{worker['steps_per_second']:,.0f} steps/s ({worker['steps_per_cpu_second']:,.0f} "
            f"per CPU second); {worker['calls_per_second']:.1f} calls of Comparison.step a "
            f"second, a median of {worker['median_steps_per_call']:,} steps each"
        )
        return 0
    server_cpus, browser_cpus = split_cpus(args.browser_cpu)
    if server_cpus is not None:
        print(f"server and library on CPUs {sorted(server_cpus)}, Chromium on {args.browser_cpu}")
    # the library before and after the app, so that a change of load shows as a spread
    with on_cpus(server_cpus):
        library = [library_rate(samplers, args.library_seconds)]
    _print_library(library[0])
    app = app_rate(
        args.root.resolve(),
        samplers,
        args.seconds,
        server_cpus=server_cpus,
        browser_cpus=browser_cpus,
    )
    with on_cpus(server_cpus):
        library.append(library_rate(samplers, args.library_seconds))
    _print_library(library[1])
    base = sum(lib["mixing_steps_per_second"] for lib in library) / len(library)
    rate = app.get("mixing_steps_per_second")
    share = rate / base if rate else float("nan")
    print(
        f"app ({app['root']}): burn-in took {app.get('burnin_s') or float('nan'):.1f} s after "
        f"Run; mixing {rate or float('nan'):,.0f} steps/s over "
        f"{app.get('mixing_window_s', float('nan')):.1f} s = {share:.1%} of the library's "
        f"(mean of both), {app.get('redraws_per_second', float('nan')):.1f} redraws/s"
    )
    cpu_rate = app.get("mixing_steps_per_cpu_second", float("nan"))
    cpu_base = sum(lib["mixing_steps_per_cpu_second"] for lib in library) / len(library)
    print(
        f"  per CPU second (the whole server: sampling, pages, event loop): {cpu_rate:,.0f} "
        f"mixing steps = {cpu_rate / cpu_base:.1%} of the library's"
    )
    for t, step, text in app["status_lines"]:
        print(f"  {t:6.2f} s  step {step:>7,}  {text}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        figures = {
            "library": library,
            "app": app,
            "share_of_library": share,
            "browser_cpu": args.browser_cpu,
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
