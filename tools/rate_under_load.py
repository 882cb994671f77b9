"""The machine's measured speed, idle and busy: ``python -m tools.rate_under_load``.

The app picks a photo's working resolution from ``warmup.measure_rate`` (checkerboard Gibbs
site updates per second), measured once per server. This prints that rate as the wall clock
reads it and as the measuring thread's CPU time reads it (what ``measure_rate`` returns), and
the pick each gives for a square photo and for an 80 x 60 one, under each load:

- ``idle``: nothing else running;
- ``page``: a paper page's default run (six samplers, 4 chains, compiled) stepping in another
  thread of this process, as when the server's first visitor presses Run;
- ``python``: a thread of this process running Python, as the server's own threads do while
  they build and send a page: the measuring thread waits for the interpreter lock after each
  kernel call;
- ``cpus``: one busy process per core besides.

``--repeats N`` measurements of 0.3 s each per load; the smallest and the largest are shown.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import threading
import time
from contextlib import contextmanager

import torch

from app import config as cfgmod
from app import sources, state
from app.config import Config
from lsbcore.backends import threads
from lsbcore.samplers import warmup


def wall_rate() -> float:
    """``measure_rate``'s run timed on the wall clock (how it was timed before)."""
    return warmup.measure_rate(clock=time.perf_counter)


@contextmanager
def page_run():
    cfg = Config()
    run, _ = state.build_run(cfg, sources.build_problem(cfg))
    run.comparison.set_backend("auto")
    stop = threading.Event()

    def step() -> None:
        while not stop.is_set():
            run.comparison.step(50, learn=True)

    thread = threading.Thread(target=step, daemon=True)
    thread.start()
    time.sleep(1.0)
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _spin(stop) -> None:
    while not stop.is_set():
        sum(range(10_000))


@contextmanager
def python_thread():
    stop = multiprocessing.Event()
    thread = threading.Thread(target=_spin, args=(stop,), daemon=True)
    thread.start()
    time.sleep(0.3)
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextmanager
def busy_cpus():
    stop = multiprocessing.Event()
    procs = [multiprocessing.Process(target=_spin, args=(stop,)) for _ in range(threads.cores())]
    for proc in procs:
        proc.start()
    time.sleep(0.5)
    try:
        yield
    finally:
        stop.set()
        for proc in procs:
            proc.join()


@contextmanager
def idle():
    yield


def picks(rate: float) -> str:
    return f"{cfgmod.pick_size(rate, None):>3} / {cfgmod.pick_size(rate, (60, 80)):>2} px"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    warmup.compile_kernels()
    print(f"{os.cpu_count()} CPUs; rates in M site updates/s (min-max), picks square / 80 x 60")
    loads = {"idle": idle, "page": page_run, "python": python_thread, "cpus": busy_cpus}
    for name, load in loads.items():
        with load():
            wall = [wall_rate() for _ in range(args.repeats)]
            cpu = [warmup.measure_rate() for _ in range(args.repeats)]
        print(
            f"{name:6} wall {min(wall) / 1e6:6.1f}-{max(wall) / 1e6:6.1f} "
            f"(picks {picks(min(wall))}) | thread CPU {min(cpu) / 1e6:6.1f}-{max(cpu) / 1e6:6.1f} "
            f"(picks {picks(min(cpu))})",
            flush=True,
        )


if __name__ == "__main__":
    main()
