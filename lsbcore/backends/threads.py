"""Running a compiled kernel on groups of chains in parallel threads.

Frozen chains are independent given their uniforms, and the kernels release the interpreter
lock (``nogil``), so a kernel called on disjoint groups of chains from several threads gives
exactly the chains one call would, faster on several cores. Plain threads, not numba's
threading layers: its default one (workqueue) aborts the process when several app sessions
call kernels at once. The learning kernels, whose chains meet at every step, take numba's
parallel loops only on a layer that is safe for that (``parallel_ready``: OpenMP or TBB).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import torch

from lsbcore.backends.structures import Chains

MIN_SITES_PER_GROUP = 1 << 15  # below this a thread hand-off costs more than it saves
#: A learning step's multiply-adds (about 0.14 ns each) per chain group: each step of a parallel
#: kernel starts and joins its threads. Alone on two cores two groups pay from a serial step of
#: about 9 us (1 << 15 here), but with the browser on the same cores the 8 x 8 digits page's 8
#: chains ran 25,487-36,251 steps in its first 6 s in groups against 51,000 in one
#: (BENCHMARKS.md): groups only from a serial step of about 35 us
MIN_LEARNING_WORK = 1 << 17
_pool: ThreadPoolExecutor | None = None
_parallel: bool | None = None
_parallel_lock = threading.Lock()
_forced = threading.local()  # groups a benchmark or test asks for in its thread
_held_until: threading.Event | None = None  # one group until set (hold_groups)


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


def parallel_ready() -> bool:
    """Whether numba's parallel kernels (``prange``) may run in this process: only on a
    threading layer that is safe when several threads launch kernels at once (OpenMP or TBB;
    numba's own workqueue layer aborts the process then, and the app's sessions are threads).
    Asked once; a parallel function is launched to load the layer."""
    global _parallel
    with _parallel_lock:
        if _parallel is None:
            import numba

            numba.config.THREADING_LAYER = "threadsafe"
            try:
                with torch_threads_kept():
                    _probe(2)
                _parallel = numba.threading_layer() in ("omp", "tbb")
            except (ValueError, ImportError, OSError):  # no safe layer here
                _parallel = False
    return _parallel


def learning_groups(chains: int, work_per_chain: int) -> int:
    """Contiguous groups of chains for a learning kernel's parallel twin (1: the serial
    kernel): one per core, where a step's work pays for starting the threads."""
    groups = getattr(_forced, "groups", None)
    if groups is None:
        if _held_until is not None and not _held_until.is_set():
            return 1
        groups = min(cores(), chains * work_per_chain // MIN_LEARNING_WORK)
    groups = min(groups, chains)
    return groups if groups > 1 and parallel_ready() else 1


def hold_groups(until: threading.Event | None) -> None:
    """``learning_groups`` gives one group (the serial kernels) until ``until`` is set, unless a
    thread forces groups; None lifts the hold. The app holds them while a child process compiles
    the twins (``samplers.twin_warmup``): a twin's first call would otherwise compile it, 10-11 s
    on a fresh install, in the middle of a run."""
    global _held_until
    _held_until = until


@contextmanager
def forced_groups(groups: int):
    """``learning_groups`` gives ``groups`` (at most one a chain) in this thread, whatever the
    work: ``studies.benchmarks.learning_groups`` times one group against two this way."""
    _forced.groups = groups
    try:
        yield
    finally:
        _forced.groups = None


@contextmanager
def torch_threads_kept():
    """Keep this thread's torch CPU threads across numba parallel launches: its OpenMP layer
    shares the process's OpenMP runtime with torch and leaves the calling thread's count at
    numba's (all cores), which torch's large operations in that thread would then take (the
    app runs torch with one thread: with more, small operations pay for hand-offs)."""
    before = torch.get_num_threads()
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def _probe(n: int) -> int:
    from numba import njit, prange

    @njit(parallel=True, cache=True)  # compiled: 0.6 s of the first grouped run; loaded: 0.3
    def count(m):
        total = 0
        for i in prange(m):
            total += i + 1
        return total

    return count(n)
