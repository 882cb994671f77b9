"""The live run's pace: the status line's steady rate and time left (``app.pace``), and the
worker's chunks, which decide how much of the engine's speed a live run gets (issue 30)."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import replace

import pytest
import torch

from app import scheduler, sources, state
from app.config import Config
from app.pace import Pace, duration, seconds_left, speed_text, steady


def test_rates_show_two_significant_figures():
    assert steady(52_347.0) == "52,000"
    assert steady(387.2) == "390"
    assert steady(12.0) == "12"
    assert steady(9.87) == "9.9"
    assert steady(1_234_567.0) == "1,200,000"
    assert steady(math.nan) == steady(0.0) == "0"


def test_durations_read_as_a_person_says_them():
    assert duration(0.4) == "under a second"
    assert duration(12.4) == "about 12 s"
    assert duration(59.4) == "about 59 s"
    assert duration(185.0) == "about 3 min"
    assert duration(2 * 3600.0) == "about 2.0 h"


def test_the_rate_is_the_slope_over_the_last_seconds_and_holds_still_under_jitter():
    pace = Pace(window_s=3.0)
    pace.add(0.0, 0, "mixing")
    assert math.isnan(pace.rate())  # one sample: no slope yet
    steps = 0
    for i in range(1, 101):  # 10 s of turns every 0.1 s; each turn's steps jitter by +-40%
        steps += 1000 + (400 if i % 2 else -400)
        pace.add(i / 10, steps, "mixing")
        if i >= 40:  # a window of 3 s holds 15 jittered pairs: within 2% of 10,000 steps/s
            assert pace.rate() == pytest.approx(10_000, rel=0.02)
    for i in range(101, 141):  # the machine halves its speed: the window follows in 3 s
        steps += 500
        pace.add(i / 10, steps, "mixing")
    assert pace.rate() == pytest.approx(5_000)


def test_a_phase_change_or_a_pause_starts_a_new_window_and_the_rate_goes_on():
    pace = Pace(window_s=3.0)
    for i in range(11):
        pace.add(i / 10, 100 * i, "burnin")  # 1,000 steps/s learning
    assert pace.rate() == pytest.approx(1_000)
    pace.add(1.1, 1_200, "mixing")  # the turn that crossed into mixing starts its window,
    assert pace.rate() == pytest.approx(1_000)  # which is too narrow yet: learning's rate goes on
    assert pace.last_rate("mixing") != pace.last_rate("mixing")  # (none for mixing yet: NaN)
    pace.add(1.7, 7_200, "mixing")
    assert pace.rate() == pytest.approx(6_200 / 0.7)  # from the crossing turn's start on
    pace.restart()  # paused: the time paused is not sampling time
    pace.add(100.0, 7_200, "mixing")
    assert pace.rate() == pytest.approx(6_200 / 0.7)  # resumed: the last rate until a new one
    pace.add(100.5, 12_200, "mixing")
    assert pace.rate() == pytest.approx(10_000)
    assert pace.last_rate("mixing") == pytest.approx(10_000)
    assert pace.last_rate("burnin") == pytest.approx(1_000)


def test_the_status_line_shows_the_measured_rate_from_the_first_second_and_never_starting_again():
    """A real capped run (20 steps per refresh: 100 steps/s) crossing from burn-in to mixing at
    0.3 s: "starting" only before the first step, then a rate, within a tenth of the true one
    from the first second on (the old status line said "starting" for half a second, and again
    at the phase change; a later one showed the first turn's uncapped speed, 11,000 steps/s,
    and after a late start a window of two samples 2 ms apart, 15,000). The seconds count from
    the first step: the worker's first start imports its modules (a second or two after an
    edit), which is not what this measures."""
    torch.set_num_threads(1)
    cfg = replace(Config(), size=12, samplers=("barker",), chains=2, burn_in=30, speed="20")
    cfg = replace(cfg, steps=10**6)
    run, _ = state.build_run(cfg, sources.build_problem(cfg))
    assert speed_text(run.pace, 0, cfg.burn_in, 10**6) == "starting"  # before the first step
    shown = []  # (seconds since Run, steps done, the status line's speed)
    start = time.perf_counter()
    first_step = math.inf  # seconds since Run
    state.start(run)
    try:
        while (now := time.perf_counter() - start) < min(first_step + 2.2, 30.0):
            with run.lock:  # as the status line reads it
                progress = run.steps_done
            shown.append((now, progress, speed_text(run.pace, progress, cfg.burn_in, 10**6)))
            if progress > 0:
                first_step = min(first_step, now)
            run.last_seen = time.perf_counter()
            time.sleep(0.02)
    finally:
        state.pause(run)
    assert shown[-1][1] > 2 * cfg.burn_in  # it crossed into mixing
    assert [s for s in shown if s[1] > 0 and s[2] == "starting"] == []
    steady_part = [s for s in shown if s[0] >= first_step + 1.0]
    rates = [float(s[2].split(" steps/s")[0].replace(",", "")) for s in steady_part]
    assert len(rates) > 20 and all(90 <= r <= 110 for r in rates), rates  # as two figures show it


def test_a_window_narrower_than_its_minimum_span_shows_the_last_rate_not_timing_noise():
    """A capped run (100 steps/s) whose turns start late: the window after the phase change
    holds two samples 2 ms apart, 20 steps between them. Their slope, 10,000 steps/s, is not
    shown; the last rate is, until the window spans half a second. The first rate of all is
    shown however narrow its window: there is nothing else to show."""
    pace = Pace(window_s=3.0, min_span_s=0.5)
    pace.add(0.0, 0, "burnin")
    pace.add(0.002, 20, "burnin")
    assert pace.rate() == pytest.approx(10_000)  # the first measurement: shown at once
    for i in range(1, 6):
        pace.add(0.2 * i, 20 * i, "burnin")
    assert pace.rate() == pytest.approx(100)
    pace.add(1.2, 120, "mixing")  # the late turn that crossed into mixing
    pace.add(1.202, 140, "mixing")  # and the next, catching up, 2 ms later
    assert pace.rate() == pytest.approx(100)
    pace.add(1.4, 160, "mixing")
    assert pace.rate() == pytest.approx(100)  # 0.4 s from the crossing turn's start: too narrow
    pace.add(1.7, 190, "mixing")
    assert pace.rate() == pytest.approx(90 / 0.7)  # wide enough: the mixing window's slope


def test_time_left_for_the_phase_and_the_run():
    # burn-in: 1,000 of 2,000 steps at 500/s, then 30,000 mixing steps at 10,000/s
    assert seconds_left(1_000, 2_000, 32_000, 500.0, 10_000.0) == (2.0, 5.0)
    phase, run = seconds_left(1_000, 2_000, 32_000, 500.0)  # mixing's speed unknown
    assert phase == 2.0 and math.isnan(run)
    assert seconds_left(12_000, 2_000, 32_000, 10_000.0) == (2.0, 2.0)
    assert all(math.isnan(v) for v in seconds_left(12_000, 2_000, 32_000, math.nan))


def _pace(rate: float, phase: str, mixing_rate: float | None = None) -> Pace:
    pace = Pace()
    if mixing_rate is not None:
        pace.add(0.0, 0, "mixing")
        pace.add(1.0, int(mixing_rate), "mixing")
    pace.add(10.0, 0, phase)
    pace.add(11.0, int(rate), phase)
    return pace


def test_the_status_line_says_the_rate_and_the_time_left():
    mixing = _pace(12_345, "mixing")
    assert speed_text(mixing, 8_000, 2_000, 32_000) == "12,000 steps/s · about 2 s left"
    assert speed_text(mixing, 31_000, 2_000, 32_000) == "12,000 steps/s · under a second left"
    assert (
        speed_text(mixing, 8_000, 2_000, 32_000, stops_when_settled=True)
        == "12,000 steps/s · about 2 s left at most (it stops earlier once settled)"
    )
    burnin = _pace(500, "burnin")
    assert speed_text(burnin, 1_000, 2_000, 32_000) == "500 steps/s · burn-in: about 2 s left"
    resumed = _pace(500, "burnin", mixing_rate=10_000)  # mixing's speed known from before
    assert (
        speed_text(resumed, 1_000, 2_000, 32_000)
        == "500 steps/s · burn-in: about 2 s left, the run about 5 s"
    )
    assert speed_text(Pace(), 0, 2_000, 32_000) == "starting"
    assert speed_text(mixing, 8_000, 2_000, 32_000, running=False) == "paused"
    assert speed_text(mixing, 32_000, 2_000, 32_000, finished=True) == "finished"


# ----------------------------------------------------------------------------- the worker
class _Clock:
    """A fake clock that only the fake comparison moves."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _TimedComparison:
    """A comparison whose ``step(n)`` takes ``per_call + n * per_step`` seconds of the clock."""

    def __init__(self, clock: _Clock, per_call: float, per_step: float):
        self.clock, self.per_call, self.per_step = clock, per_call, per_step
        self.n_steps, self.phase, self.samplers, self.calls = 0, "mixing", {}, []
        self.target = None  # no lattice: the torch steps until the whole warm-up ends
        self.sampler_steps, self.sampler_phases = {"one": 0}, {"one": "mixing"}

    def set_backend(self, backend: str) -> None:
        pass

    def step(self, n: int, learn: bool = False, names=None) -> None:
        self.calls.append(n)
        self.clock.now += self.per_call + n * self.per_step
        self.n_steps += n
        self.sampler_steps["one"] += n


def test_chunks_grow_from_one_step_until_one_call_fills_the_budget():
    # the default run's mixing: 3 ms a call of Comparison.step, 15 us a step
    clock = _Clock()
    comparison = _TimedComparison(clock, per_call=3e-3, per_step=15e-6)
    cfg = replace(Config(), burn_in=0, steps=10**7)
    run = state.Run(config=cfg, problem=None, comparison=comparison, device_label="CPU")
    for _ in range(5):
        state.advance(run, state.CHUNK_S, clock=clock)
    first, *later = comparison.calls
    assert first == 1 and later[0] > 10  # from one step, by the rate that step showed
    # once the rate is known, every call takes one chunk that fills its budget: no tail chunks
    steady_chunk = round((state.CHUNK_S - 3e-3) / 15e-6)  # 3,133 steps
    assert comparison.calls[-3:] == [pytest.approx(steady_chunk, rel=0.02)] * 3
    overhead = 3e-3 * len(comparison.calls) / clock.now
    assert overhead < 0.12  # against 99% with one-step chunks


def test_a_live_run_takes_few_long_chunks(monkeypatch):
    """The worker of a real (small) run: about one Comparison.step call per ``CHUNK_S``.

    With 5 ms budgets, below one call's cost for the default run, every chunk was one step:
    hundreds of calls a second and 1% of the engine's speed (issue 30).
    """
    torch.set_num_threads(1)
    cfg = replace(Config(), size=12, samplers=("barker", "lsb1"), chains=2, burn_in=50)
    cfg = replace(cfg, steps=10**6)
    run, _ = state.build_run(cfg, sources.build_problem(cfg))
    state.advance(run, 10.0, cfg.burn_in + 10)  # past burn-in
    calls, lock = [], threading.Lock()
    step = run.comparison.step

    def counted(n, learn=False, names=None):
        with lock:
            calls.append(n)
        step(n, learn=learn, names=names)

    monkeypatch.setattr(run.comparison, "step", counted)
    start = time.perf_counter()
    state.start(run)
    try:
        while time.perf_counter() - start < 1.5:
            time.sleep(0.1)
            run.last_seen = time.perf_counter()
    finally:
        state.pause(run)
    elapsed = time.perf_counter() - start
    # the rate is learned within the first calls; after that, one call per turn of about
    # 50 ms, well above a call's cost (3 ms for the default run's six samplers). With 5 ms
    # turns this run made 205 calls in 1.5 s, the default one a call per step
    assert len(calls) <= elapsed / 0.04 + 12, (len(calls), elapsed)
    assert sorted(calls)[len(calls) // 2] >= 100, calls  # the median chunk is long
    assert not math.isnan(run.pace.last_rate("mixing"))


def test_a_run_alone_counts_its_turns_in_cpu_time_and_shared_runs_in_wall_time():
    cfg = replace(Config(), size=8, samplers=("barker",), chains=2)
    run, _ = state.build_run(cfg, sources.build_problem(cfg))
    assert state.turn_clock(run, 1) is time.thread_time
    assert state.turn_clock(run, scheduler.SLOTS + 1) is time.perf_counter
