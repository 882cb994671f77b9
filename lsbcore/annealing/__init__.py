"""Annealing to a MAP: any registered sampler run on ``p~^beta`` while ``beta`` grows
(``schedule``, ``anneal``), an optional greedy zero-temperature polish (``polish``), and the
distance of the result from the exact MAP of a minimum cut (``map_gap``).

    from lsbcore.annealing import Schedule, anneal, compare_with_map
    result = anneal(target, "checkerboard", Schedule("geometric", 1, 100, 50, 10), n_chains=4)
    gap = compare_with_map(result, target)   # gap.relative_gap, gap.agreement
"""

from lsbcore.annealing.anneal import RECORDS, AnnealingResult, anneal, energy
from lsbcore.annealing.map_gap import (
    MapGap,
    compare_with_map,
    map_states,
    relative_gap,
    time_to_gap,
)
from lsbcore.annealing.polish import greedy_polish
from lsbcore.annealing.schedule import KINDS, Schedule

__all__ = [
    "KINDS",
    "RECORDS",
    "AnnealingResult",
    "MapGap",
    "Schedule",
    "anneal",
    "compare_with_map",
    "energy",
    "greedy_polish",
    "map_states",
    "relative_gap",
    "time_to_gap",
]
