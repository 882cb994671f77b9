"""``python -m lsbcore.studies.sweep``: run a grid of cells on Dask and keep every result in one
file.

    python -m lsbcore.studies.sweep --lam 0:2:5 --sigma 1:4:4 --seeds 3 --out sweeps/map.sqlite
    python -m lsbcore.studies.sweep --config sweep.toml --out sweeps/map.sqlite --resume
    python -m lsbcore.studies.sweep --config sweep.toml --out map.sqlite --scheduler tcp://head:8786

Flags override the TOML file's keys. Exit status: 0 every cell stored, 1 some cells failed or
the cluster could not be used, 2 bad input, 130 interrupted by Ctrl-C, 143 by SIGTERM (finished
cells stay stored).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

from lsbcore import interrupt, out_path
from lsbcore.studies.sweep.grid import PROTOCOL_BOUNDS, SAMPLERS, Protocol, SweepGrid, seeds_from
from lsbcore.studies.sweep.store import ResultStore, StoreError, read_results

__all__ = ["main", "build_grid", "parser"]

PROG = "python -m lsbcore.studies.sweep"
MAX_WORKERS = 1024


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Run a grid of sampler runs on Dask and store every finished cell at once.",
    )
    p.add_argument("--config", type=Path, help="a TOML grid file; flags override its keys")
    p.add_argument("--targets", help="square and/or shipped samples, e.g. square,horse")
    p.add_argument("--lam", help="lambda axis: start:stop:count or a,b,c")
    p.add_argument("--mu", help="mu axis: start:stop:count or a,b,c")
    p.add_argument("--sigma", help="sigma axis: start:stop:count or a,b,c")
    p.add_argument("--samplers", help=f"comma-separated, from {','.join(SAMPLERS)}")
    seeds = p.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=int, help="N seeds: 0 .. N-1")
    seeds.add_argument("--seed-list", help="the seeds, e.g. 0,5,9")
    for name in PROTOCOL_BOUNDS:
        flag = "--" + name.replace("_", "-")
        p.add_argument(flag, type=int, dest=name, help=f"protocol: {name.replace('_', ' ')}")
    p.add_argument(
        "--out", type=out_path.output_file, required=True, help="the results file (SQLite)"
    )
    p.add_argument("--resume", action="store_true", help="run only cells the file lacks")
    p.add_argument("--workers", type=int, default=2, help="local worker processes (default 2)")
    p.add_argument("--scheduler", help="an existing Dask cluster: tcp://HOST:PORT")
    p.add_argument("--retries", type=int, default=2, help="retries of a cell that raises")
    p.add_argument("--dry-run", action="store_true", help="count the cells and estimate; run none")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    return p


def build_grid(args: argparse.Namespace) -> SweepGrid:
    """The TOML file's keys (if any) with the flags given on top; a ``ValueError`` sentence."""
    data: dict = {}
    if args.config is not None:
        data = SweepGrid.from_toml(args.config).as_dict()
    for name in ("targets", "lam", "mu", "sigma", "samplers"):
        value = getattr(args, name)
        if value is not None:
            data[name] = value
    if args.seeds is not None:
        data["seeds"] = args.seeds
    if args.seed_list is not None:
        try:
            data["seeds"] = [int(v) for v in args.seed_list.split(",") if v.strip()]
        except ValueError:
            raise ValueError(
                f"--seed-list must be integers separated by commas, got {args.seed_list!r}."
            ) from None
    if "seeds" in data:
        data["seeds"] = list(seeds_from(data["seeds"]))
    protocol = dict(data.get("protocol", {}))
    for name in PROTOCOL_BOUNDS:
        value = getattr(args, name)
        if value is not None:
            protocol[name] = value
    if protocol:
        data["protocol"] = protocol
    return SweepGrid.from_dict(data)


def _check_out(path: Path) -> None:
    # argparse checked the path (out_path.output_file); SQLite also reads the file it extends
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise ValueError(f"--out {path} cannot be read and written.")


def _resume_command(argv: list[str]) -> str:
    args = list(argv) if "--resume" in argv else [*argv, "--resume"]
    return f"{PROG} {shlex.join(args)}"


def _estimate(grid: SweepGrid, out: Path, workers: int) -> str:
    """Seconds per cell per sampler: from the file's own rows at this protocol if it has
    them, else from one cell of each sampler timed here (after a tiny warm-up cell each)."""
    from lsbcore.studies.sweep.cell import run_cell
    from lsbcore.studies.sweep.progress import format_duration

    rows = []
    if out.is_file() and out.stat().st_size > 0:
        rows = read_results(out)
    keys = {r["key"] for r in rows}
    pending = [c for c in grid.cells() if c.key not in keys]
    proto = grid.protocol
    per: dict[str, list[float]] = {}
    for r in rows:
        if all(r[k] == getattr(proto, k) for k in ("size", "chains", "burn_in", "steps")):
            per.setdefault(r["sampler"], []).append(float(r["wall_s"]))
    source = "this file's finished cells"
    missing = [s for s in grid.samplers if s not in per]
    if missing:
        source = "one cell of each sampler timed here" if not per else source + " and timings"
        first = {c.sampler: c for c in reversed(grid.cells()) if c.sampler in missing}
        tiny = Protocol(size=8, chains=2, burn_in=20, steps=100, max_lag=20)
        for sampler in missing:  # warm-up: imports and each sampler's compiled kernels
            run_cell(replace(first[sampler], protocol=tiny))
        for sampler in missing:
            t = time.perf_counter()
            run_cell(first[sampler])
            per[sampler] = [time.perf_counter() - t]
    mean = {s: sum(v) / len(v) for s, v in per.items()}
    cpu_s = sum(mean[c.sampler] for c in pending)
    return (
        f"about {format_duration(cpu_s)} of CPU time ({cpu_s / 3600:.3g} CPU-hours), "
        f"{format_duration(cpu_s / workers)} on {workers} worker(s) at full speed-up, "
        f"start-up apart (seconds a cell from {source}: "
        + ", ".join(f"{s} {mean[s]:.3g}" for s in grid.samplers)
        + ")"
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    args = p.parse_args(argv)
    try:
        grid = build_grid(args)
        if not 1 <= args.workers <= MAX_WORKERS:
            raise ValueError(f"--workers must be from 1 to {MAX_WORKERS:,}, got {args.workers}.")
        if not 0 <= args.retries <= 100:
            raise ValueError(f"--retries must be from 0 to 100, got {args.retries}.")
        if args.scheduler is not None:
            from lsbcore.studies.sweep.driver import check_scheduler_address

            check_scheduler_address(args.scheduler)
        _check_out(args.out)
        if args.dry_run:
            done = 0
            if args.out.is_file() and args.out.stat().st_size > 0:
                stored = {r["key"] for r in read_results(args.out)}
                done = sum(c.key in stored for c in grid.cells())
    except (ValueError, StoreError) as err:
        p.error(str(err))
    if args.dry_run:
        pending = grid.n_cells - done
        print(f"{grid.n_cells:,} cells; {done:,} already in {args.out}; {pending:,} to run.")
        if pending:
            try:
                print(_estimate(grid, args.out, args.workers) + ".")
            except (ValueError, StoreError) as err:
                p.error(str(err))
        return 0
    return _run(grid, args, argv, p)


def _run(grid: SweepGrid, args, argv: list[str], p: argparse.ArgumentParser) -> int:
    from lsbcore.studies.sweep import driver
    from lsbcore.studies.sweep.progress import Progress

    try:
        store = ResultStore(args.out, resume=args.resume)
    except StoreError as err:
        p.error(str(err))
    progress = None if args.quiet else Progress()
    if not args.quiet:
        done = len(store.done_keys() & {c.key for c in grid.cells()})
        where = args.scheduler or f"{args.workers} local worker(s)"
        print(
            f"{grid.n_cells:,} cells"
            + (f", {done:,} already stored (skipped)" if done else "")
            + f": running {grid.n_cells - done:,} on {where}.",
            file=sys.stderr,
        )
    try:
        summary = driver.run_sweep(
            grid,
            store,
            scheduler=args.scheduler,
            workers=args.workers,
            progress=progress,
            retries=args.retries,
            connect_timeout=driver.CONNECT_TIMEOUT_S,
        )
    except driver.SchedulerError as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C while the cluster closes
        done = len(store.done_keys() & {c.key for c in grid.cells()})
        print(
            f"{PROG}: {done:,} of {grid.n_cells:,} cells finished and stored; run the same "
            f"command with --resume to run the other {grid.n_cells - done:,}: "
            f"{_resume_command(argv)}",
            file=sys.stderr,
        )
        return interrupt.exit_status()
    finally:
        store.close()
    if summary.status == "interrupted":
        print(
            f"{PROG}: {summary.stored:,} of {summary.total:,} cells finished and stored; run "
            f"the same command with --resume to run the other {summary.missing:,}: "
            f"{_resume_command(argv)}",
            file=sys.stderr,
        )
        return interrupt.exit_status()
    print(
        f"{summary.done:,} cells run and stored in {args.out}"
        + (f" ({summary.skipped:,} were already there)" if summary.skipped else "")
        + f", {summary.failed:,} failed, in {summary.seconds:.1f} s "
        f"({summary.cells_per_hour:,.0f} cells/hour)."
    )
    if summary.failed:
        print(
            f"{PROG}: {summary.failed:,} cells failed (their errors are in the file's failures "
            f"table); {_resume_command(argv)} runs them again.",
            file=sys.stderr,
        )
    print(
        f"Draw the map: python -m lsbcore.studies.sweep.report {args.out} --html map.html "
        "--json map.json"
    )
    return 1 if summary.failed else 0
