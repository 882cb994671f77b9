"""``python -m lsbcore.studies.sweep.benchmark``: cells per hour on 1 and 2 workers, and what Dask
and
the results file cost per cell.

    python -m lsbcore.studies.sweep.benchmark [--cells 72] [--noop 2000] [--json]

The grid (``bench_grid``): the paper's square problem at lambda 0, 0.5, 1 and sigma 1, 2, the
six samplers of the map, as many seeds as ``--cells`` needs, under ``BENCH_PROTOCOL`` (16 x 16,
8 chains, 500 burn-in, 2000 steps, lag window 200). Each worker count gets its own LocalCluster,
warmed (imports, compiled kernels) before the clock starts; the clock then runs over
``run_sweep`` itself, store writes included. Startup is reported apart.

Overheads, through the same client path (``run_sweep`` with a no-op cell): tasks per second with
the sweep's own window (3 in flight per worker thread) and with a wide one (the scheduler's own
rate); SQLite commits per second of ``ResultStore.write``; bytes per stored row. The share of
the sweep the workers spent inside cells says what Dask itself leaves idle, whatever else runs
on the machine; the speed-up also carries the machine's load (printed).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import tempfile
import time
from pathlib import Path

from lsbcore import interrupt
from lsbcore.studies.sweep.driver import code_hash, run_sweep
from lsbcore.studies.sweep.grid import DEFAULT_SAMPLERS, Cell, Protocol, SweepGrid
from lsbcore.studies.sweep.store import ResultStore, read_results

__all__ = ["BENCH_PROTOCOL", "bench_grid", "main", "noop_cell"]

BENCH_PROTOCOL = Protocol(size=16, chains=8, burn_in=500, steps=2000, max_lag=200)
WARM_PROTOCOL = Protocol(size=8, chains=2, burn_in=20, steps=100, max_lag=20)
POINTS = {"lam": (0.0, 0.5, 1.0), "sigma": (1.0, 2.0)}


def bench_grid(cells: int, protocol: Protocol = BENCH_PROTOCOL) -> SweepGrid:
    """The benchmark's grid with enough seeds for ``cells`` cells (a whole seed at a time)."""
    per_seed = len(POINTS["lam"]) * len(POINTS["sigma"]) * len(DEFAULT_SAMPLERS)
    seeds = tuple(range(max(1, math.ceil(cells / per_seed))))
    return SweepGrid(targets=("square",), **POINTS, seeds=seeds, protocol=protocol)


def noop_cell(cell: Cell) -> dict:
    """A cell that does nothing: what the scheduler, the transfers and the store cost alone."""
    return {
        "ess": 1.0,
        "ess_bulk": 1.0,
        "rhat": 1.0,
        "evals": 1.0,
        "ess_per_kevals": 1000.0,
        "accept_rate": 1.0,
        "seconds": 0.0,
        "wall_s": 0.0,
        "notes": "",
        "worker": f"noop:{os.getpid()}",
    }


def _warm() -> str:
    """Run one tiny cell of every sampler in this process (compiled kernels, lazy imports)."""
    from lsbcore.studies.sweep.cell import run_cell

    for sampler in DEFAULT_SAMPLERS:
        run_cell(Cell("square", 0.5, 1.0, 1.0, sampler, 0, WARM_PROTOCOL))
    return code_hash()


def _cluster(workers: int):
    from distributed import Client, LocalCluster

    started = time.perf_counter()
    cluster = LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = Client(cluster)
    up = time.perf_counter() - started
    client.run(_warm)
    return cluster, client, up, time.perf_counter() - started - up


def _sweep(grid, client, folder: Path, name: str, **kw) -> tuple[float, Path]:
    path = folder / f"{name}.sqlite"
    with ResultStore(path) as store:
        summary = run_sweep(grid, store, client=client, **kw)
    if summary.status != "finished":
        raise RuntimeError(f"the {name} sweep ended {summary.status}")
    return summary.seconds, path


def _commits_per_second(folder: Path, n: int) -> float:
    grid = bench_grid(n, WARM_PROTOCOL)
    cells = grid.cells()[:n]
    result = noop_cell(cells[0])
    with ResultStore(folder / "commits.sqlite") as store:
        store.start_run(grid, "bench", 1)
        started = time.perf_counter()
        for cell in cells:
            store.write(cell, result)
        return n / (time.perf_counter() - started)


def _bytes_per_row(path: Path) -> float:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("VACUUM")
    return path.stat().st_size / len(read_results(path))


def measure(cells: int, noop: int) -> dict:
    grid = bench_grid(cells)
    n = grid.n_cells
    out: dict = {
        "grid": (
            f"square, lambda {POINTS['lam']}, sigma {POINTS['sigma']}, "
            f"samplers {','.join(DEFAULT_SAMPLERS)}, seeds {len(grid.seeds)}: {n} cells"
        ),
        "protocol": BENCH_PROTOCOL.__dict__,
        "cpus": os.cpu_count(),
        "load_before": round(os.getloadavg()[0], 2),
        "workers": {},
    }
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        folder = Path(tmp)
        for workers in (1, 2):
            cluster, client, up, warm = _cluster(workers)
            try:
                seconds, path = _sweep(grid, client, folder, f"w{workers}")
                entry = {
                    "startup_s": round(up, 2),
                    "warm_up_s": round(warm, 2),
                    "sweep_s": round(seconds, 2),
                    "cells_per_hour": round(3600 * n / seconds),
                }
                rows = read_results(path)
                # the share of the sweep its workers spent inside cells: what Dask leaves idle
                busy = sum(r["wall_s"] for r in rows) / (workers * seconds)
                entry["workers_busy"] = round(busy, 3)
                if workers == 2:
                    per = {}
                    for s in DEFAULT_SAMPLERS:
                        walls = [r["wall_s"] for r in rows if r["sampler"] == s]
                        per[s] = round(sum(walls) / len(walls), 4)
                    out["cell_wall_s_by_sampler"] = per
                    out["bytes_per_row"] = round(_bytes_per_row(path))
                    noop_grid = bench_grid(noop, WARM_PROTOCOL)
                    t_window, _ = _sweep(noop_grid, client, folder, "noop", run=noop_cell)
                    t_wide, _ = _sweep(
                        noop_grid, client, folder, "noop-wide", run=noop_cell, window=500
                    )
                    out["noop_tasks"] = noop_grid.n_cells
                    out["noop_tasks_per_s_sweep_window"] = round(noop_grid.n_cells / t_window)
                    out["noop_tasks_per_s_window_500"] = round(noop_grid.n_cells / t_wide)
                out["workers"][workers] = entry
            finally:
                client.close()
                cluster.close()
        out["sqlite_commits_per_s"] = round(_commits_per_second(folder, 2000))
    one, two = out["workers"][1], out["workers"][2]
    out["speed_up"] = round(two["cells_per_hour"] / one["cells_per_hour"], 2)
    out["load_after"] = round(os.getloadavg()[0], 2)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m lsbcore.studies.sweep.benchmark", description=__doc__
    )
    p.add_argument("--cells", type=int, default=72, help="cells of the timed sweep (36 a seed)")
    p.add_argument("--noop", type=int, default=2000, help="no-op tasks for the overhead")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    args = p.parse_args(argv)
    if not 1 <= args.cells <= 3600:
        p.error(f"--cells must be from 1 to 3,600, got {args.cells}.")
    if not 36 <= args.noop <= 100_000:
        p.error(f"--noop must be from 36 to 100,000, got {args.noop}.")
    figures = measure(args.cells, args.noop)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"grid: {figures['grid']}; protocol {figures['protocol']}")
    print(f"machine: {figures['cpus']} CPUs, load average {figures['load_before']} before")
    for workers, e in figures["workers"].items():
        print(
            f"{workers} worker(s): {e['cells_per_hour']:,} cells/hour ({e['sweep_s']} s; "
            f"cluster start {e['startup_s']} s, warm-up {e['warm_up_s']} s; workers inside "
            f"cells {100 * e['workers_busy']:.0f}% of the sweep)"
        )
    print(
        f"speed-up 1 -> 2 workers: {figures['speed_up']}x (load average "
        f"{figures['load_before']} before, {figures['load_after']} after: other processes "
        "on the same cores slow the cells too)"
    )
    print(
        "mean cell wall time by sampler (s): "
        + ", ".join(f"{s} {v}" for s, v in figures["cell_wall_s_by_sampler"].items())
    )
    print(
        f"no-op tasks through run_sweep ({figures['noop_tasks']}): "
        f"{figures['noop_tasks_per_s_sweep_window']:,}/s with the sweep's window, "
        f"{figures['noop_tasks_per_s_window_500']:,}/s with 500 in flight"
    )
    print(f"SQLite commits (ResultStore.write): {figures['sqlite_commits_per_s']:,}/s")
    print(f"stored row: {figures['bytes_per_row']} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.sweep.benchmark"))
