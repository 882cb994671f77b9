"""The benchmarks' one timing rule: steps per second, the best of several timed runs after a
warm-up of a tenth as many steps (``lsbcore.studies.benchmarks.samplers``,
``lsbcore.studies.benchmarks.targets``)."""

from __future__ import annotations

import time


def per_second(advance, steps: int, repeats: int) -> float:
    """``steps / seconds`` of ``advance(steps)``, best of ``repeats`` after a warm-up."""
    advance(max(1, steps // 10))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        advance(steps)
        best = min(best, time.perf_counter() - start)
    return steps / best
