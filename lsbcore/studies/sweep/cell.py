"""Running one cell of a sweep: one sampler, one posterior, one seed (``run_cell``).

A cell runs the experiment's own sampler task (``lsbcore.studies.experiment.run.run_sampler``):
burn-in
(the learned samplers learn), then the mixing phase, whose magnetisation series gives the paper
ESS (spec 6: mean over chains, lag window ``L = max_lag``). That ESS counts effective draws per
window of ``L + 1`` draws (``lsbcore.diagnostics.mixing``), whatever the series' length, so the
figure of merit divides it by what those ``L + 1`` steps cost: ESS per 1,000 target evaluations
of a chain, ``1000 ESS / ((L + 1) e)`` with ``e`` the evaluations per mixing step. That is what
the map ranks samplers by, since a step of one sampler can cost many evaluations of another's.

The result is plain numbers, equal on any worker for the same cell (every draw comes from
generators seeded by the cell's seed; torch runs on one thread), except the seconds and the
worker's name.
"""

from __future__ import annotations

import math
import os
import socket
import time

import torch

from lsbcore.image import load_image
from lsbcore.studies.experiment.run import run_sampler
from lsbcore.studies.sweep.grid import ASSETS, Cell

__all__ = ["RESULT_FIELDS", "problem_of", "run_cell"]

#: What ``run_cell`` returns, beside the cell's own fields.
RESULT_FIELDS = (
    "ess",  # paper ESS of the magnetisation, mean over chains
    "ess_bulk",  # rank-normalised bulk ESS over all chains (arviz-stats)
    "rhat",
    "evals",  # target evaluations per chain in the mixing phase
    "ess_per_kevals",  # ESS per 1,000 evaluations of a chain: the map's figure of merit
    "accept_rate",
    "seconds",  # the sampler's own stepping time, burn-in and mixing
    "wall_s",  # the whole cell on its worker, building the problem included
    "notes",  # warnings and diagnostics' notes, one string
    "worker",  # host:pid that ran it
)


def problem_of(cell: Cell) -> dict:
    """The experiment's problem spec for ``cell``
    (``lsbcore.studies.experiment.run.build_problem``)."""
    p = cell.protocol
    if cell.target == "square":
        return {
            "kind": "square",
            "lam": cell.lam,
            "mu": cell.mu,
            "sigma": cell.sigma,
            "size": p.size,
            "chains": p.chains,
            "seed": cell.seed,
            "start": "per_chain",
        }
    image = load_image(ASSETS / f"{cell.target}.png", max_side=p.size)
    return {
        "kind": "image",
        "image": image,
        "lam": cell.lam,
        "mu": cell.mu,
        "sigma": cell.sigma,
        "chains": p.chains,
        "invert": False,
        "noise": 0.0,
        "boundary": "free",
        "seed": cell.seed,
    }


def run_cell(cell: Cell) -> dict:
    """Run ``cell`` on one CPU thread and return its result (``RESULT_FIELDS``)."""
    started = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one cell per worker thread; the same arithmetic everywhere
    try:
        p = cell.protocol
        task = {
            "name": cell.sampler,
            "burn_in": p.burn_in,
            "steps": p.steps,
            "thin": 1,
            "problem": problem_of(cell),
            "seed": cell.seed,
            "device": "cpu",
            "backend": "auto",
            "learning": {},
            "meta": {},
            "max_lag": p.max_lag,
        }
        run = run_sampler(task)
    finally:
        torch.set_num_threads(threads)
    summary = run.summary
    evals = float(run.n_target_evals - run.target_evals_burnin)  # already per chain
    ess = summary.ess_paper_mean if summary is not None else math.nan
    # the paper ESS is per window of L + 1 draws: per evaluation, over what that window costs
    window_evals = (summary.max_lag + 1) * evals / p.steps if summary is not None else math.nan
    notes = list(run.messages) + (list(summary.notes) if summary is not None else [])
    if run.learning_failed:
        notes.append(f"{cell.sampler}: learning failed; it ran on with its last good parameters")
    return {
        "ess": float(ess),
        "ess_bulk": float(summary.ess_bulk) if summary is not None else math.nan,
        "rhat": float(summary.rhat) if summary is not None else math.nan,
        "evals": float(evals),
        "ess_per_kevals": 1000.0 * ess / window_evals if window_evals > 0 else math.nan,
        "accept_rate": float(run.accept_rate),
        "seconds": float(run.burnin_seconds + run.mixing_seconds),
        "wall_s": time.perf_counter() - started,
        "notes": "; ".join(notes),
        "worker": f"{socket.gethostname()}:{os.getpid()}",
    }
