"""One cell of a sweep: the experiment's own run of one sampler, its figure of merit on the
paper ESS's scale (effective draws per window of L + 1), the same numbers on every run."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lsbcore.cases import square_problem
from lsbcore.diagnostics.mixing import ess_paper
from lsbcore.studies.experiment.run import build_problem, run_sampler
from lsbcore.studies.sweep.cell import problem_of, run_cell
from lsbcore.studies.sweep.grid import Cell, Protocol

PROTOCOL = Protocol(size=8, chains=4, burn_in=100, steps=600, max_lag=60)


def _task(cell: Cell) -> dict:
    p = cell.protocol
    return {
        "name": cell.sampler, "burn_in": p.burn_in, "steps": p.steps, "thin": 1,
        "problem": problem_of(cell), "seed": cell.seed, "device": "cpu", "backend": "auto",
        "learning": {}, "meta": {}, "max_lag": p.max_lag,
    }  # fmt: skip


@pytest.mark.parametrize("sampler", ["barker", "lsb1", "gibbs"])
def test_a_cells_ess_is_the_papers_over_its_mixing_series_and_per_window_evaluations(sampler):
    cell = Cell("square", 0.8, 1.0, 2.0, sampler, 3, PROTOCOL)
    result = run_cell(cell)
    run = run_sampler(_task(cell))
    series = run.trace.mixing_series("magnetisation")
    assert series.shape == (PROTOCOL.chains, PROTOCOL.steps)
    ess = float(np.mean(ess_paper(series, max_lag=PROTOCOL.max_lag)))
    assert result["ess"] == pytest.approx(ess, rel=1e-12)
    evals = run.n_target_evals - run.target_evals_burnin
    assert result["evals"] == evals
    # per evaluation over the L + 1 steps the paper ESS is counted in, not over the whole phase
    per_step = evals / PROTOCOL.steps
    expected = 1000 * ess / ((PROTOCOL.max_lag + 1) * per_step)
    assert result["ess_per_kevals"] == pytest.approx(expected, rel=1e-12)
    assert 0 < result["accept_rate"] <= 1 and result["seconds"] > 0


def test_the_same_cell_gives_the_same_numbers_and_another_seed_others():
    cell = Cell("square", 1.0, 1.0, 3.0, "min", 0, PROTOCOL)
    a, b = run_cell(cell), run_cell(cell)
    other = run_cell(Cell("square", 1.0, 1.0, 3.0, "min", 1, PROTOCOL))
    same = ("ess", "ess_bulk", "rhat", "evals", "ess_per_kevals", "accept_rate", "notes")
    assert all(a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in same)
    assert other["ess"] != a["ess"]


def test_the_square_target_is_the_papers_problem_at_the_cells_point():
    cell = Cell("square", 0.5, 2.0, 1.5, "barker", 7, PROTOCOL)
    built = build_problem(problem_of(cell))
    direct = square_problem(0.5, 2.0, 1.5, n=8, n_chains=4, seed=7, start="per_chain")
    assert built.target.lam == 0.5
    assert np.array_equal(built.target.alpha.numpy(), direct.target.alpha.numpy())
    assert np.array_equal(built.x0.numpy(), direct.x0.numpy())
    # every sampler of a seed sees the same posterior: the seed makes the noise
    other = build_problem(problem_of(Cell("square", 0.5, 2.0, 1.5, "max", 7, PROTOCOL)))
    assert np.array_equal(built.target.alpha.numpy(), other.target.alpha.numpy())


def test_a_sample_target_is_the_photos_posterior_at_the_protocols_size():
    cell = Cell("horse", 1.0, 1.0, 0.5, "barker", 0, PROTOCOL)
    problem = build_problem(problem_of(cell))
    assert max(problem.target.shape) == PROTOCOL.size
    alpha = problem.target.alpha.numpy()
    assert np.abs(alpha).max() <= 1.0 / 0.5**2 + 1e-12  # mu y / sigma^2 with |y| <= 1
    assert (alpha > 0).any() and (alpha < 0).any()
