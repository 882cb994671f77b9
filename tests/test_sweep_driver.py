"""The sweep on Dask: every cell once, the same numbers on 1 or 2 workers, a cell that raises
recorded and the rest finished, and a worker killed by SIGKILL mid-cell costing only that cell.

One 2-worker LocalCluster serves the module (a cluster costs seconds to start and warm); the
1-worker run starts its own, through ``run_sweep``'s default path. The kill test comes last: it
leaves the module's cluster with a restarted worker.
"""

from __future__ import annotations

import functools
import os
import signal
import sqlite3
import sys
import threading
import time
from pathlib import Path

import cloudpickle
import pytest
from distributed import Client, LocalCluster

from lsbcore.studies.sweep.cell import run_cell
from lsbcore.studies.sweep.driver import code_hash, run_sweep, task_key
from lsbcore.studies.sweep.grid import Protocol, SweepGrid
from lsbcore.studies.sweep.store import ResultStore, read_results

# the functions below travel to the workers by value (the workers cannot import tests/)
cloudpickle.register_pickle_by_value(sys.modules[__name__])

TINY = Protocol(size=8, chains=2, burn_in=50, steps=300, max_lag=50)
VARYING = ("seconds", "wall_s", "worker", "run", "finished")  # all else is the cell's result


def tiny_grid(**kw) -> SweepGrid:
    base = dict(
        targets=("square",),
        lam=(0.0, 0.8),
        sigma=(1.0, 2.0),
        samplers=("barker", "min"),
        seeds=(0, 1),
        protocol=TINY,
    )
    return SweepGrid(**{**base, **kw})


@pytest.fixture(scope="module")
def client():
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as c,
    ):
        c.run(code_hash)  # imports lsbcore on every worker before any timing matters
        yield c


class Recorder:
    """A progress display that keeps every state it is shown."""

    def __init__(self):
        self.states = []
        self.closed = None

    def update(self, state):
        self.states.append((state.done, state.failed, state.running, state.queued, state.in_flight))

    def close(self, state):
        self.closed = state


def failing_min(cell):
    if cell.sampler == "min":
        raise RuntimeError(f"no luck with {cell.sampler} at seed {cell.seed}")
    return run_cell(cell)


def marked_run(folder: str, cell):
    """``run_cell``, leaving ``<pid>-<task>.start`` before and ``.end`` after, and taking at
    least 0.3 s, so that a kill can be aimed at a worker in the middle of a cell."""
    stem = Path(folder) / f"{os.getpid()}-{task_key(cell)}"
    stem.with_suffix(".start").touch()
    time.sleep(0.3)
    result = run_cell(cell)
    stem.with_suffix(".end").touch()
    return result


def test_a_two_worker_sweep_stores_every_cell_exactly_once_within_its_window(client, tmp_path):
    grid = tiny_grid()
    recorder = Recorder()
    with ResultStore(tmp_path / "r.sqlite") as store:
        summary = run_sweep(grid, store, client=client, progress=recorder, window=3)
    rows = read_results(tmp_path / "r.sqlite")
    keys = [r["key"] for r in rows]
    assert summary.status == "finished"
    assert (summary.done, summary.failed, summary.skipped) == (grid.n_cells, 0, 0)
    assert sorted(keys) == sorted(c.key for c in grid.cells())
    assert len(set(keys)) == len(keys) == 16
    assert {r["run"] for r in rows} == {summary.run}
    assert len({r["worker"] for r in rows}) == 2  # both workers ran cells
    assert max(s[4] for s in recorder.states) == 3  # never more than the window in flight
    assert max(s[2] for s in recorder.states) == 2  # running: at most one per worker
    assert recorder.closed.done == grid.n_cells and recorder.closed.in_flight == 0


def test_a_second_sweep_of_the_same_grid_runs_only_the_missing_cells(client, tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        first = run_sweep(tiny_grid(seeds=(0,)), store, client=client)
    with ResultStore(path, resume=True) as store:
        second = run_sweep(tiny_grid(seeds=(0, 1)), store, client=client)
    rows = read_results(path)
    assert (first.done, second.skipped, second.done) == (8, 8, 8)
    by_run = {run: sorted(r["seed"] for r in rows if r["run"] == run) for run in (1, 2)}
    assert by_run == {1: [0] * 8, 2: [1] * 8}
    # all stored: nothing to run, so no scheduler is even asked (this one does not exist)
    with ResultStore(path, resume=True) as store:
        third = run_sweep(tiny_grid(seeds=(0, 1)), store, scheduler="tcp://127.0.0.1:9")
    assert (third.status, third.done, third.skipped) == ("finished", 0, 16)


def test_one_worker_and_two_workers_give_the_same_results(client, tmp_path):
    grid = tiny_grid()
    with ResultStore(tmp_path / "one.sqlite") as store:
        one = run_sweep(grid, store, workers=1)  # its own LocalCluster of one process
    with ResultStore(tmp_path / "two.sqlite") as store:
        two = run_sweep(grid, store, client=client)
    assert one.done == two.done == grid.n_cells

    def results(name):
        rows = read_results(tmp_path / name)
        return {r["key"]: {k: v for k, v in r.items() if k not in VARYING} for r in rows}

    a, b = results("one.sqlite"), results("two.sqlite")
    assert a == b
    assert len({r["worker"] for r in read_results(tmp_path / "one.sqlite")}) == 1
    # the comparison has teeth: the cells' figures differ between seeds and samplers
    assert len({round(r["ess_per_kevals"], 9) for r in a.values()}) > 4


def test_a_cell_that_raises_is_recorded_and_the_others_finish(client, tmp_path):
    grid = tiny_grid(seeds=(0,))
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        summary = run_sweep(grid, store, client=client, run=failing_min, retries=1)
    rows = read_results(path)
    with sqlite3.connect(path) as db:
        failures = db.execute("SELECT key, run, error FROM failures").fetchall()
        status = db.execute("SELECT status FROM runs").fetchall()
    min_keys = sorted(c.key for c in grid.cells() if c.sampler == "min")
    assert (summary.status, summary.done, summary.failed) == ("failed", 4, 4)
    assert sorted(r["key"] for r in rows) == sorted(
        c.key for c in grid.cells() if c.sampler == "barker"
    )
    assert sorted(k for k, _, _ in failures) == min_keys  # once each, after its retry
    assert all(run == summary.run and "no luck with min" in err for _, run, err in failures)
    assert status == [("failed",)]


class SwallowingProgress(Recorder):
    """A display that receives Ctrl-C after the second cell and swallows it, as code between
    the driver and the signal (Dask's own) can: the sweep must stop all the same."""

    def update(self, state):
        super().update(state)
        if state.done == 2 and not getattr(self, "sent", False):
            self.sent = True
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)  # the handler runs here, in the main thread
            except KeyboardInterrupt:
                pass  # swallowed


def test_a_ctrl_c_swallowed_on_its_way_still_stops_the_sweep(client, tmp_path):
    grid = tiny_grid()
    progress = SwallowingProgress()
    before = signal.getsignal(signal.SIGINT)  # ignored, when pytest runs in the background
    with ResultStore(tmp_path / "map.sqlite") as store:
        summary = run_sweep(grid, store, client=client, progress=progress, window=2)
    assert progress.sent
    assert summary.status == "interrupted"
    stored = read_results(tmp_path / "map.sqlite")
    assert 2 <= len(stored) < grid.n_cells
    assert signal.getsignal(signal.SIGINT) is before  # put back


def test_a_worker_killed_mid_cell_loses_only_that_cell(client, tmp_path):
    grid = tiny_grid(seeds=(0,))  # 8 cells of at least 0.3 s
    marks = tmp_path / "marks"
    marks.mkdir()
    victim = next(iter(client.run(os.getpid).values()))
    killed: list[str] = []

    def kill_mid_cell():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            for start in marks.glob(f"{victim}-*.start"):
                if not start.with_suffix(".end").exists():
                    os.kill(victim, signal.SIGKILL)  # a real kill, no goodbye
                    killed.append(start.stem.split("-", 1)[1])
                    return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_mid_cell)
    killer.start()
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        summary = run_sweep(
            grid, store, client=client, run=functools.partial(marked_run, str(marks))
        )
    killer.join()
    rows = read_results(path)
    keys = [r["key"] for r in rows]
    assert killed, "the victim never started a cell"
    lost = killed[0]
    assert not (marks / f"{victim}-{lost}.end").exists()  # it died inside the cell
    assert summary.status == "finished" and summary.failed == 0
    assert sorted(keys) == sorted(c.key for c in grid.cells())  # every cell, once
    assert len(set(keys)) == len(keys)
    again = [r for r in rows if task_key_of(r, grid) == lost]
    assert len(again) == 1 and not again[0]["worker"].endswith(f":{victim}")  # rerun elsewhere


def task_key_of(row: dict, grid: SweepGrid) -> str:
    return next(task_key(c) for c in grid.cells() if c.key == row["key"])


def test_the_code_hash_reads_the_sources_that_decide_a_cells_numbers(tmp_path, monkeypatch):
    """Every pattern names files that exist, and a change to any of them changes the hash (a
    worker running other code is refused)."""
    import shutil

    from lsbcore.studies.sweep import driver

    for pattern in driver.HASHED:
        assert list(driver.PACKAGE.glob(pattern)), pattern
    copy = tmp_path / "studies"
    for pattern in driver.HASHED:
        for path in driver.PACKAGE.glob(pattern):
            target = copy / path.relative_to(driver.PACKAGE)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    mine = code_hash()
    monkeypatch.setattr(driver, "PACKAGE", copy)
    assert code_hash() == mine
    for pattern in ("experiment/run.py", "rbm/seed.py", "sweep/cell.py"):
        path = copy / pattern
        path.write_bytes(path.read_bytes() + b"\n# changed\n")
        assert code_hash() != mine, pattern
        mine = code_hash()
