"""The LSB paper's RBM protocol as cells of the sweep: one sampler and one seed a cell, on Dask.

    python -m lsbcore.studies sweep-rbm --target rbm-digits --model digits-28x28 --seeds 3 \
        --cells cells.json --workers 2 --out results/ --docs docs/reproduction.md

The arguments are the RBM experiment's (``python -m lsbcore.experiment --target rbm-digits``)
and the sweep's (``--cells``, ``--workers``, ``--scheduler``, ``--resume``).

A cell is what one seed of ``experiment.run_seed`` does for one sampler. Every sampler of a
comparison draws its streams from the seed alone and starts from the seed's shared uniform
start, so a cell's chains are the ones the same sampler runs inside the whole comparison: the
cells of a grid together are the experiment, spread over workers. ``run_sweep`` (the sweep's
driver) sends them out, one worker thread each, and this module's ``CellFile`` keeps every
finished cell in one JSON file the moment it arrives, so a stopped run resumes where it was.

Each cell pays its one-off costs (first calls, compiling) before its clock starts, and reads
the ground truth from the shipped file when there is one (else each worker draws it once).
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from lsbcore import bounded_json, out_path

__all__ = [
    "CellFile", "RBMCell", "RBMGrid", "assemble", "build_parser", "grid_of", "main", "on_sweep",
    "read_cells", "run_rbm_cell",
]  # fmt: skip

MAX_CELL_FILE_BYTES = 200_000_000  # a results file read back: far above a full grid's
# The paper's samplers by their time a step on the 784 x 250 RBM with 16 chains (one thread,
# burn-in and sampling, ms): gibbs-10 8.6 / 9.2, flsb2 8.9 / 1.9, flsb1 6.4 / 1.6, hb-10-3
# 1.2 / 1.1, hb-10-2 0.4 / 0.5, gwg 0.4 / 0.4, gibbs-4 and hb-10-1 0.1, gibbs-2 0.04
LONGEST_FIRST = ("gibbs-10", "flsb2", "flsb1", "hb-10-3", "hb-10-2", "gwg", "gibbs-4", "hb-10-1",
                 "gibbs-2")  # fmt: skip


@dataclass(frozen=True)
class RBMCell:
    """One sampler (``label``) for one seed under one protocol, on the model ``model`` (a
    shipped name or a path every worker can read)."""

    model: str
    label: str
    seed: int
    burn_in: int
    steps: int
    chains: int
    checkpoints: int
    truth_samples: int
    truth_steps: int
    lr: float
    optimizer: str

    @property
    def key(self) -> str:
        return "rbm|" + "|".join(f"{k}={v}" for k, v in asdict(self).items())

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RBMGrid:
    """Every (sampler, seed) cell of one protocol: what ``run_sweep`` asks a grid for."""

    cells_list: tuple[RBMCell, ...]

    def cells(self) -> list[RBMCell]:
        return list(self.cells_list)

    @property
    def n_cells(self) -> int:
        return len(self.cells_list)

    def as_dict(self) -> dict:
        return {"cells": [c.as_dict() for c in self.cells_list]}


def run_rbm_cell(cell: RBMCell) -> dict:
    """The figures ``run_seed`` gives ``cell.label`` for ``cell.seed``, with the cell's own
    seconds and the worker that ran it."""
    import torch

    from lsbcore.rbm.ground_truth import ground_truth
    from lsbcore.rbm.live import RBMComparison
    from lsbcore.rbm.models import load_model
    from lsbcore.studies.rbm.seed import run_seed

    torch.set_num_threads(1)  # a worker thread a cell: more threads would fight each other
    started = time.perf_counter()
    rbm = load_model(cell.model)
    truth = ground_truth(rbm, cell.truth_samples, cell.truth_steps, 0)
    options = {"lr": cell.lr, "optimizer": cell.optimizer}
    warm = RBMComparison(rbm, [cell.label], cell.chains, seed=cell.seed, truth=truth, **options)
    warm.step(2, learn=True)
    warm.start_mixing()
    warm.step(2)
    t0 = time.perf_counter()
    result = run_seed(rbm, [cell.label], cell.seed, burn_in=cell.burn_in, steps=cell.steps,
                      chains=cell.chains, truth=truth, checkpoints=cell.checkpoints,
                      options=options)  # fmt: skip
    return {
        "thin": result["thin"],
        "figures": result["samplers"][cell.label],
        "seconds": time.perf_counter() - t0,
        "wall_s": time.perf_counter() - started,
        "worker": f"{socket.gethostname()}:{os.getpid()}",
    }


class CellFile:
    """Finished cells in one JSON file (``cells``: key -> cell and result; ``failures``;
    ``runs``: each invocation's scheduler, workers, start and end), rewritten whole after
    every cell, so a stop at any instant keeps every cell that finished."""

    def __init__(self, path: Path, resume: bool = False):
        self.path = Path(path)
        self.data = {"cells": {}, "failures": [], "runs": []}
        if self.path.exists():
            if not resume:
                raise ValueError(
                    f"{self.path} exists: pass --resume to continue it, or name a new file."
                )
            self.data = read_cells(self.path)
        self.run: int | None = None

    def done_keys(self) -> set[str]:
        return set(self.data["cells"])

    def start_run(self, grid: RBMGrid, scheduler: str, workers: int) -> int:
        run = {"scheduler": scheduler, "workers": workers, "cells": grid.n_cells,
               "started": time.time(), "ended": None, "status": None}  # fmt: skip
        self.data["runs"].append(run)
        self.run = len(self.data["runs"])
        self._save()
        return self.run

    def end_run(self, status: str) -> None:
        run = self.data["runs"][self.run - 1]
        run["ended"], run["status"] = time.time(), status
        run["wall_s"] = run["ended"] - run["started"]
        self._save()

    def write(self, cell: RBMCell, result: dict) -> bool:
        fresh = cell.key not in self.data["cells"]
        self.data["cells"][cell.key] = {"cell": cell.as_dict(), "run": self.run, **result}
        self._save()
        return fresh

    def write_failure(self, cell: RBMCell, error: str) -> None:
        self.data["failures"].append({"cell": cell.as_dict(), "error": error, "run": self.run})
        self._save()

    def close(self) -> None:
        pass

    def _save(self) -> None:
        out_path.write_text(self.path, json.dumps(self.data, indent=1, allow_nan=False))


def read_cells(path: Path) -> dict:
    """A ``CellFile``'s contents, checked for its shape (a sentence on anything else)."""
    data = bounded_json.read_file(path, MAX_CELL_FILE_BYTES, "a cells file")
    if not isinstance(data, dict) or not all(
        isinstance(data.get(k), t) for k, t in (("cells", dict), ("failures", list), ("runs", list))
    ):
        raise ValueError(
            f"{Path(path).name} is not a cells file (it needs cells, failures and runs)."
        )
    return data


def assemble(data: dict, grid: RBMGrid) -> list[dict]:
    """The cells of ``grid`` found in ``data`` as ``run``'s per-seed results (``seed``,
    ``seconds``: the seed's cells' own seconds summed, ``thin``, ``samplers``); a seed lacking
    any of its samplers is left out."""
    seeds: dict[int, dict] = {}
    for cell in grid.cells():
        stored = data["cells"].get(cell.key)
        seeds.setdefault(cell.seed, {"seed": cell.seed, "seconds": 0.0, "samplers": {}})
        if stored is None:
            seeds[cell.seed]["missing"] = True
            continue
        run = seeds[cell.seed]
        run["thin"] = stored["thin"]
        run["seconds"] += stored["seconds"]
        run["samplers"][cell.label] = stored["figures"]
    return [r for s, r in sorted(seeds.items()) if not r.get("missing")]


def wall_seconds(data: dict) -> float:
    """The runs' wall time together (each invocation from its start to its end)."""
    spans = (r.get("wall_s") or 0.0 for r in data["runs"])
    return float(sum(s for s in spans if math.isfinite(s)))


def grid_of(model: str, labels, seeds, *, burn_in, steps, chains, checkpoints, truth_samples,
            truth_steps, lr, optimizer) -> RBMGrid:  # fmt: skip
    """Every (sampler, seed) cell, the longest first (``LONGEST_FIRST``), so that no long cell
    starts last and leaves the other workers idle at the end."""
    rank = {label: i for i, label in enumerate(LONGEST_FIRST)}
    ordered = sorted(labels, key=lambda label: rank.get(label, len(rank)))
    return RBMGrid(tuple(
        RBMCell(model, label, int(s), burn_in, steps, chains, checkpoints, truth_samples,
                truth_steps, float(lr), str(optimizer))
        for label in ordered for s in seeds
    ))  # fmt: skip


def on_sweep(grid: RBMGrid, path: Path, *, resume=False, workers=2, scheduler=None,
             quiet=False, info=None):  # fmt: skip
    """A function for ``experiment.run(cells=)``: it runs ``grid``'s cells not yet in the
    cells file ``path`` on Dask (``run_sweep``) and returns the seeds' results. ``info`` (a
    dict) receives the sweep's figures: its wall time, the cells' own seconds, the workers."""
    from lsbcore.studies.sweep.driver import run_sweep
    from lsbcore.studies.sweep.progress import Progress

    info = {} if info is None else info

    def cells() -> list[dict]:
        store = CellFile(path, resume=resume)
        summary = run_sweep(grid, store, scheduler=scheduler, workers=workers,
                            progress=None if quiet else Progress(), run=run_rbm_cell)  # fmt: skip
        if summary.status != "finished" or summary.failed:
            failures = store.data["failures"][-1:] or [{"error": summary.status}]
            raise RuntimeError(
                f"the sweep ended {summary.status} with {summary.failed} failed cell(s) "
                f"({failures[0]['error']}); the finished cells are kept in {path}: rerun with "
                "--resume."
            )
        stored = [store.data["cells"][c.key] for c in grid.cells()]
        info.update(
            scheduler=scheduler or f"local:{workers}",
            workers=workers if scheduler is None else None,
            cells=grid.n_cells,
            wall_s=wall_seconds(store.data),
            cell_seconds=float(sum(c["wall_s"] for c in stored)),
            cells_file=str(path),
        )
        return assemble(store.data, grid)

    return cells


# ============================================================================ command line
def build_parser():
    """The RBM experiment's parser with the sweep's options."""
    from lsbcore.studies.rbm.experiment import build_parser as experiment_parser
    from lsbcore.studies.shared.arguments import int_in

    parser = experiment_parser()
    parser.prog = "python -m lsbcore.studies sweep-rbm"
    parser.description = (
        "The LSB paper's RBM experiment with each (sampler, seed) a cell on Dask workers, every "
        "finished cell kept in --cells."
    )
    sweep = parser.add_argument_group("the sweep")
    sweep.add_argument(
        "--cells", type=out_path.output_file, required=True,
        help="the JSON file that keeps every finished cell (--resume continues it)",
    )  # fmt: skip
    sweep.add_argument("--workers", type=int_in(1, 256), default=2,
                       help="local one-thread worker processes (2)")  # fmt: skip
    sweep.add_argument("--scheduler", help="an existing Dask cluster: tcp://HOST:PORT")
    sweep.add_argument("--resume", action="store_true", help="continue the cells file")
    return parser


def main(argv=None) -> int:
    import sys

    from lsbcore.studies.rbm.experiment import execute

    def cells_for(args, protocol):
        grid = grid_of(
            args.model, args.samplers, range(args.seed, args.seed + args.seeds),
            checkpoints=args.checkpoints, truth_samples=args.truth_samples,
            truth_steps=args.truth_steps, lr=args.lr, optimizer=args.optimizer, **protocol,
        )  # fmt: skip
        info: dict = {}
        cells = on_sweep(grid, args.cells, resume=args.resume, workers=args.workers,
                         scheduler=args.scheduler, quiet=args.quiet, info=info)  # fmt: skip
        return cells, info

    argv = list(sys.argv[1:] if argv is None else argv)
    return execute(argv, build_parser(), cells_for,
                   command=("python", "-m", "lsbcore.studies", "sweep-rbm"))  # fmt: skip


if __name__ == "__main__":
    from lsbcore import interrupt

    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies sweep-rbm"))
