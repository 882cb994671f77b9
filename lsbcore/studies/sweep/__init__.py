"""Parameter sweeps: many experiment runs over a grid, on a Dask cluster, and the map of which
balancing function mixes best where.

    python -m lsbcore.studies.sweep --lam 0:2:5 --sigma 1:4:4 --seeds 3 --out sweeps/map.sqlite
    python -m lsbcore.studies.sweep --config sweep.toml --out sweeps/map.sqlite --resume

The package, one concept per module: ``grid`` (the cells a sweep asks for), ``cell`` (running
one), ``store`` (the SQLite results file that survives crashes), ``winner`` (who wins at one
point, ties and margin), ``which_g_where`` (the map document the report and dashboard draw),
``driver`` (running the cells on Dask), ``progress`` (the progress line), ``cli`` (the command),
``report`` (the map as text, JSON and HTML), ``benchmark`` (cells per hour).
"""

from lsbcore.studies.sweep.cell import RESULT_FIELDS, run_cell
from lsbcore.studies.sweep.driver import SchedulerError, SweepSummary, run_sweep
from lsbcore.studies.sweep.grid import Cell, Protocol, SweepGrid, parse_axis
from lsbcore.studies.sweep.store import ResultStore, StoreError, read_results
from lsbcore.studies.sweep.which_g_where import build_map, map_from_json, read_map, write_map
from lsbcore.studies.sweep.winner import Ranking, rank_point

__all__ = [
    "RESULT_FIELDS",
    "Cell",
    "Protocol",
    "Ranking",
    "SchedulerError",
    "ResultStore",
    "StoreError",
    "SweepGrid",
    "SweepSummary",
    "build_map",
    "map_from_json",
    "parse_axis",
    "rank_point",
    "read_map",
    "read_results",
    "run_cell",
    "run_sweep",
    "write_map",
]
