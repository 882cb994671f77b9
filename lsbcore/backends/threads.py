"""Running a compiled kernel on groups of chains in parallel threads.

Frozen chains are independent given their uniforms, and the kernels release the interpreter
lock (``nogil``), so a kernel called on disjoint groups of chains from several threads gives
exactly the chains one call would, faster on several cores. Plain threads, not numba's
threading layers: those are not safe when several app sessions call kernels at once.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from lsbcore.backends.structures import Chains

MIN_SITES_PER_GROUP = 1 << 15  # below this a thread hand-off costs more than it saves
_pool: ThreadPoolExecutor | None = None


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def chain_groups(n_chains: int, sites_per_chain: int) -> list[slice]:
    """Contiguous groups of chains, one per core, each with enough work to pay for a thread."""
    groups = min(cores(), n_chains, max(1, n_chains * sites_per_chain // MIN_SITES_PER_GROUP))
    bounds = [round(g * n_chains / groups) for g in range(groups + 1)]
    return [slice(lo, hi) for lo, hi in zip(bounds, bounds[1:], strict=False)]


def chains_of(chains: Chains, rows: slice) -> Chains:
    """The same structure restricted to ``rows`` of the chains (views, no copies)."""
    return Chains(
        chains.x[rows], chains.s[rows], chains.n_accepted[rows], chains.stats[rows],
        chains.truth, chains.track, chains.trace[:, rows],
    )  # fmt: skip


def run_grouped(kernel, groups: list[slice], *calls) -> None:
    """``kernel(*calls[g])`` for every group ``g``: in the pool when there are several."""
    global _pool
    if len(groups) == 1:
        kernel(*calls[0])
        return
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=cores(), thread_name_prefix="lsb-kernel")
    for future in [_pool.submit(kernel, *args) for args in calls]:
        future.result()
