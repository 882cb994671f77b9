"""Parallel tempering: replicas of any sampler on tempered copies ``p~^beta`` of a target,
exchanging states between neighbouring temperatures, so that the cold replica crosses between
modes that a single local chain cannot leave (issue 15, item 1)."""

from lsbcore.tempering.bimodal import BIMODAL_LAMBDA, BIMODAL_SIZE, bimodal_ising
from lsbcore.tempering.ladder import LadderAdaptation, check_ladder, geometric_ladder
from lsbcore.tempering.modes import DEFAULT_THRESHOLD, ModeSummary, mode_path, mode_summary
from lsbcore.tempering.parallel_tempering import (
    ParallelTempering,
    SwapStatistics,
    swap_log_acceptance,
)

__all__ = [
    "BIMODAL_LAMBDA",
    "BIMODAL_SIZE",
    "DEFAULT_THRESHOLD",
    "LadderAdaptation",
    "ModeSummary",
    "ParallelTempering",
    "SwapStatistics",
    "bimodal_ising",
    "check_ladder",
    "geometric_ladder",
    "mode_path",
    "mode_summary",
    "swap_log_acceptance",
]
