"""Parameter sweeps: many experiment runs over a grid, on a Dask cluster, and the map of which
balancing function mixes best where.

    python -m lsbcore.sweep --lam 0:2:5 --sigma 1:4:4 --seeds 3 --out sweeps/map.sqlite
    python -m lsbcore.sweep --config sweep.toml --out sweeps/map.sqlite --resume

The package, one concept per module: ``grid`` (the cells a sweep asks for), ``cell`` (running
one), ``store`` (the SQLite results file that survives crashes).
"""

from lsbcore.sweep.cell import RESULT_FIELDS, run_cell
from lsbcore.sweep.grid import Cell, Protocol, SweepGrid, parse_axis
from lsbcore.sweep.store import ResultStore, StoreError, read_results

__all__ = [
    "RESULT_FIELDS",
    "Cell",
    "Protocol",
    "ResultStore",
    "StoreError",
    "SweepGrid",
    "parse_axis",
    "read_results",
    "run_cell",
]
