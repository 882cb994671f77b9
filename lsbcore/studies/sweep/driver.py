"""Driving a sweep on Dask (``run_sweep``): cells out to workers, results into the store.

The client is the only writer: each worker returns a cell's result, and the client stores it the
moment it arrives (one committed transaction), so a sweep stopped at any instant keeps every
cell that finished. Cells already in the store are skipped (``--resume``). A cell that raises is
retried by Dask (``retries``) and then recorded in the store's ``failures`` table; a worker
killed mid-cell loses only that cell, which the scheduler runs again elsewhere (the nanny
restarts the worker; after ``distributed.scheduler.allowed-failures`` deaths with one cell the
scheduler gives up on it with ``KilledWorker``, recorded as a failure like any other).

At most ``window`` cells are in flight at once (a few per worker thread), topped up as cells
finish, so a million-cell grid never becomes a million futures in the client or the scheduler.

Before anything runs, every worker must import ``lsbcore`` with the same source of the sweep and
the experiment's sampler task as the client (``code_hash``): a remote worker running other code
would store other numbers under the same keys.
"""

from __future__ import annotations

import hashlib
import re
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lsbcore import interrupt
from lsbcore.studies.sweep.cell import run_cell
from lsbcore.studies.sweep.grid import Cell, SweepGrid
from lsbcore.studies.sweep.store import ResultStore

__all__ = [
    "SchedulerError",
    "SweepState",
    "SweepSummary",
    "check_scheduler_address",
    "code_hash",
    "run_sweep",
    "task_key",
]

PACKAGE = Path(__file__).resolve().parents[1]  # lsbcore/studies/
#: The sources that decide a cell's numbers, beside the samplers the task imports: the sweep's,
#: the experiment's sampler task and the RBM protocol's seed (``rbm_cells``)
HASHED = ("sweep/*.py", "experiment/run.py", "rbm/seed.py")
IN_FLIGHT_PER_THREAD = 3  # cells in flight per worker thread: enough that no worker idles
CONNECT_TIMEOUT_S = 10.0
_ADDRESS = re.compile(r"^tcp://(?P<host>[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})$")


class SchedulerError(RuntimeError):
    """A scheduler that cannot be used (unreachable, no workers, other code), in a sentence."""


@dataclass
class SweepState:
    """Where a sweep stands: what a progress display draws."""

    total: int  # cells of the grid
    skipped: int  # already in the store when the sweep started
    done: int = 0  # finished and stored by this run
    failed: int = 0  # raised after their retries (or lost with too many workers)
    running: int = 0  # in flight, at most one per worker thread
    queued: int = 0  # pending: in flight beyond the threads, or not yet submitted
    in_flight: int = 0  # submitted to the scheduler and not yet back (at most the window)
    started: float = field(default_factory=time.monotonic)

    @property
    def pending(self) -> int:
        return self.total - self.skipped - self.done - self.failed


@dataclass(frozen=True)
class SweepSummary:
    """How a sweep ended: ``status`` is ``finished``, ``failed`` (cells failed; ``--resume``
    runs them again) or ``interrupted``."""

    status: str
    total: int
    done: int
    failed: int
    skipped: int
    seconds: float
    run: int | None

    @property
    def cells_per_hour(self) -> float:
        return 3600.0 * self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def stored(self) -> int:
        """Cells of the grid in the store now: earlier runs' and this one's."""
        return self.skipped + self.done

    @property
    def missing(self) -> int:
        return self.total - self.stored


def task_key(cell: Cell) -> str:
    """Dask's key for a cell: stable (the same cell is the same task on any client) and short."""
    return "cell-" + hashlib.sha1(cell.key.encode()).hexdigest()


def code_hash() -> str:
    """SHA-1 of the sources that decide a cell's numbers (``HASHED``, under
    ``lsbcore/studies/``)."""
    digest = hashlib.sha1()
    for pattern in HASHED:
        for path in sorted(PACKAGE.glob(pattern)):
            digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def check_scheduler_address(address: str) -> str:
    """``tcp://HOST:PORT`` with a port from 1 to 65535, or a ``ValueError`` sentence."""
    match = _ADDRESS.match(address.strip()) if isinstance(address, str) else None
    if match is None or not 1 <= int(match["port"]) <= 65535:
        raise ValueError(
            f"--scheduler must be a Dask scheduler's address tcp://HOST:PORT, got {address!r}."
        )
    return address.strip()


@contextmanager
def _workers_ignore_ctrl_c():
    """Start local workers with SIGINT ignored (children inherit it, restarted ones too): Ctrl-C
    in a terminal reaches the whole process group, and only the client should act on it,
    stopping the sweep in order, instead of every worker dying with a traceback."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _connect(scheduler: str | None, workers: int, timeout: float):
    """A client and, for a local sweep, the cluster it owns (closed by the caller)."""
    from distributed import Client, LocalCluster

    if scheduler is None:
        with _workers_ignore_ctrl_c():
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
            )
        return Client(cluster), cluster
    address = check_scheduler_address(scheduler)
    try:
        client = Client(address, timeout=timeout)
    except (OSError, TimeoutError) as err:
        raise SchedulerError(
            f"cannot reach the Dask scheduler at {address} within {timeout:g} s ({err})."
        ) from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (OSError, TimeoutError):
        client.close()
        raise SchedulerError(
            f"the Dask scheduler at {address} has no workers after {timeout:g} s."
        ) from None
    return client, None


def _check_workers(client) -> int:
    """Every worker runs this code (``code_hash``); returns the worker threads there are."""
    mine = code_hash()
    try:
        theirs = client.run(code_hash)
    except Exception as err:  # a worker without lsbcore cannot unpickle the function
        raise SchedulerError(
            f"the workers cannot run the sweep's code ({type(err).__name__}: {err}); install "
            "this lsbcore on every worker."
        ) from None
    other = sorted(addr for addr, digest in theirs.items() if digest != mine)
    if other:
        raise SchedulerError(
            f"{len(other)} of {len(theirs)} workers run other sweep code than this client "
            f"(first: {other[0]}); install this lsbcore on every worker."
        )
    info = client.scheduler_info(n_workers=-1)["workers"]
    return max(1, sum(int(w.get("nthreads", 1)) for w in info.values()))


def _error_text(future) -> str:
    try:
        err = future.exception()
    except Exception as outer:  # cancelled, or the scheduler lost it
        err = outer
    return f"{type(err).__name__}: {err}"


def run_sweep(
    grid: SweepGrid,
    store: ResultStore,
    scheduler: str | None = None,
    workers: int = 2,
    progress=None,
    *,
    retries: int = 2,
    client=None,
    run: Callable[[Cell], dict] = run_cell,
    window: int | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
) -> SweepSummary:
    """Run every cell of ``grid`` not yet in ``store`` on Dask and store each as it finishes.

    ``scheduler=None`` starts a ``LocalCluster`` of ``workers`` one-thread processes (closed at
    the end); ``"tcp://HOST:PORT"`` uses that cluster's workers. ``client`` (tests, notebooks)
    uses a client already connected, left open. ``progress`` gets ``update(state)`` after every
    cell and ``close(state)`` at the end (``lsbcore.studies.sweep.progress.Progress``). ``run`` is
    what
    a worker calls on a cell (``run_cell``; tests inject others). Ctrl-C stops the sweep: the
    cells in flight are cancelled, the finished ones stay stored, and the summary says
    ``interrupted``.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 1024:
        raise ValueError(f"workers must be an integer from 1 to 1,024, got {workers!r}.")
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 100:
        raise ValueError(f"retries must be an integer from 0 to 100, got {retries!r}.")
    from distributed import as_completed

    done_keys = store.done_keys()
    cells = grid.cells()
    todo = deque(c for c in cells if c.key not in done_keys)
    state = SweepState(total=len(cells), skipped=len(cells) - len(todo))
    label = scheduler or f"local:{workers}"
    cluster = None
    owned = client is None
    status = "failed"
    in_flight: dict = {}
    store.start_run(grid, label, workers if scheduler is None else 0)  # 0: the cluster's
    started = time.monotonic()
    # Ctrl-C or SIGTERM raises KeyboardInterrupt and sets ``stop``, which the loop checks after
    # every cell: it keeps an interrupt that code between the signal and the loop swallows
    # (Dask's; tested), and works where SIGINT was inherited ignored (a script's background job)
    stop = interrupt.StopRequest()
    previous_handlers = interrupt.install(stop)
    try:
        if not todo:  # every cell stored already: no cluster to start
            status = "finished"
            return _summary(status, state, started, store)
        if owned:
            client, cluster = _connect(scheduler, workers, connect_timeout)
        threads = _check_workers(client)
        limit = window or max(4, IN_FLIGHT_PER_THREAD * threads)

        def submit_more(pool) -> None:
            while todo and len(in_flight) < limit:
                cell = todo.popleft()
                future = client.submit(run, cell, key=task_key(cell), pure=False, retries=retries)
                in_flight[future] = cell
                if pool is not None:
                    pool.add(future)

        def show() -> None:
            state.in_flight = len(in_flight)
            state.running = min(len(in_flight), threads)
            state.queued = state.pending - state.running
            if progress is not None:
                progress.update(state)

        state.started = time.monotonic()  # the rate (and ETA) counts from the first cell out
        submit_more(None)
        # futures alone, results fetched here: as_completed(with_results=True) can wait for
        # ever on a result already in memory (dask/distributed#7331; seen here too)
        pool = as_completed(list(in_flight), loop=client.loop)
        show()
        for future in pool:
            cell = in_flight.pop(future)
            if future.status == "finished":
                store.write(cell, future.result())
                state.done += 1
            else:  # the exception after its retries, KilledWorker, or a cancellation
                store.write_failure(cell, _error_text(future))
                state.failed += 1
            future.release()
            if stop.is_set():  # a Ctrl-C that Dask's code swallowed
                raise KeyboardInterrupt
            submit_more(pool)
            show()
        status = "finished" if state.failed == 0 else "failed"
    except KeyboardInterrupt:
        status = "interrupted"
    finally:
        if in_flight and client is not None:
            try:
                client.cancel(list(in_flight), force=True)
            except Exception:  # the client may already be gone; nothing of it is kept
                pass
        in_flight.clear()
        store.end_run(status)
        if owned and client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
        state.running = state.in_flight = 0
        state.queued = state.pending
        if progress is not None:
            progress.close(state)
        interrupt.restore(previous_handlers)
    return _summary(status, state, started, store)


def _summary(status: str, state: SweepState, started: float, store: ResultStore) -> SweepSummary:
    return SweepSummary(
        status=status,
        total=state.total,
        done=state.done,
        failed=state.failed,
        skipped=state.skipped,
        seconds=time.monotonic() - started,
        run=store.run,
    )
