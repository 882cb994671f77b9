"""The shipped "which g where" map is what its grid file's sweep gives: the same protocol, axes,
samplers and seeds, and the means of a point recomputed here from its cells."""

from __future__ import annotations

import numpy as np
import pytest

from lsbcore.studies.sweep.cell import run_cell
from lsbcore.studies.sweep.grid import ASSETS, Cell, SweepGrid
from lsbcore.studies.sweep.which_g_where import read_map

GRID = SweepGrid.from_toml(ASSETS / "which_g_where.toml")
SHIPPED = read_map(ASSETS / "which_g_where.json")


def test_the_shipped_map_covers_its_grid_files_protocol_axes_samplers_and_seeds():
    assert SHIPPED["protocol"] == {
        "size": GRID.protocol.size,
        "chains": GRID.protocol.chains,
        "burn_in": GRID.protocol.burn_in,
        "steps": GRID.protocol.steps,
        "max_lag": GRID.protocol.max_lag,
    }
    assert SHIPPED["samplers"] == list(GRID.samplers)
    assert SHIPPED["seeds"] == list(GRID.seeds)
    panels = {(p["target"], p["mu"]): p for p in SHIPPED["panels"]}
    # the grid file's square panels, and the photo its header resumes the sweep with (mu 1)
    assert set(panels) == {("square", mu) for mu in GRID.mu} | {("horse", 1.0)}
    for panel in panels.values():
        assert panel["lam"] == list(GRID.lam) and panel["sigma"] == list(GRID.sigma)
        assert len(panel["points"]) == len(GRID.lam) * len(GRID.sigma)
        for point in panel["points"]:
            assert sorted(point["order"]) == sorted(GRID.samplers)
            assert all(n == len(GRID.seeds) for n in point["n_seeds"].values())


@pytest.mark.parametrize("sampler", ["barker", "max"])
def test_a_shipped_points_means_are_its_cells_rerun_here(sampler):
    """Paper case 3's point (lambda 1, mu 1, sigma 3): every seed's cell rerun, mean compared."""
    panel = next(p for p in SHIPPED["panels"] if (p["target"], p["mu"]) == ("square", 1.0))
    point = next(p for p in panel["points"] if (p["lam"], p["sigma"]) == (1.0, 3.0))
    values = [
        run_cell(Cell("square", 1.0, 1.0, 3.0, sampler, seed, GRID.protocol))["ess_per_kevals"]
        for seed in GRID.seeds
    ]
    assert point["means"][sampler] == pytest.approx(float(np.mean(values)), rel=1e-9)
