"""Run a sampler comparison from the command line and write results, traces and a report.

    python -m lsbcore.experiment --case 3 --out runs/case3
    python -m lsbcore.experiment --image photo.png --lam 1 --mu 1 --sigma 0.5 --out runs/photo

Every sampler runs ``--burn-in`` iterations (the learnable ones learn, the others just run),
then ``--steps`` mixing iterations; one iteration advances every chain of a sampler by one step
(no sampler gets extra steps). DIR receives:

- ``results.json``: the schema of ``lsbcore.results`` (config with the command line, device,
  versions, per-sampler ESS, R-hat, acceptance, accuracy, target evaluations, seconds), plus
  ``"timings"`` (wall seconds per stage of this command);
- ``traces.csv``: the thinned traces of every chain, long format (what
  ``lsbcore.write_traces_csv`` writes): every burn-in record and every ``--csv-thin``-th
  (default 10) mixing record;
- ``learned_<name>.json`` per learned sampler (``lsbcore.balancing_to_json``);
- ``report.html``: one self-contained page (plotly.js embedded once, opens offline).

Samplers are independent (each has its own generator seeded with ``--seed``, all start from the
problem's shared ``x0``), so each runs as its own task (a one-sampler ``Comparison``): in this
process (``--workers 1``) or in spawned worker processes (``torch`` on one thread in each), with
identical results either way and identical to one ``Comparison`` of all of them. A task also
computes its mixing diagnostics and writes its rows of ``traces.csv``, so that work is spread
over the workers too; the longest tasks start first.

Recording. Every sampler keeps its own running statistics (``log p~``, magnetisation, agreement
with the truth) and writes them after every step into a buffer (``Sampler.step``'s
``trace``); ``Comparison.step`` turns every ``thin``-th row into a record. ``RecordingComparison``
stores the records in growable arrays (``ArrayTrace``) and skips the posterior marginals.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import hashlib
import html
import math
import multiprocessing as mp
import os
import queue as queue_module
import shlex
import shutil
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from lsbcore.backends import kernels
from lsbcore.cases import PAPER_CASES, image_problem, paper_case
from lsbcore.comparison import Comparison
from lsbcore.diagnostics.mixing import (
    PAPER_MAX_LAG,
    MixingSummary,
    autocorrelation,
    summarise_mixing,
)
from lsbcore.diagnostics.trace import CSV_COLUMNS, PHASES, Trace, accuracy, magnetisation
from lsbcore.image import ImageError, load_image
from lsbcore.learning.balancing import make_balancing
from lsbcore.learning.balancing_io import balancing_to_json, load_balancing
from lsbcore.results import comparison_results, effective_max_lag, results_to_json
from lsbcore.samplers.base import resolve_device
from lsbcore.samplers.registry import BASELINES, SAMPLERS

__all__ = [
    "DEFAULT_SAMPLERS",
    "PAPER_TABLE2",
    "ArrayTrace",
    "RecordingComparison",
    "build_parser",
    "build_report",
    "main",
    "run_experiment",
    "thin_for_csv",
]

#: The samplers of the paper's Table 2, run by default.
DEFAULT_SAMPLERS = ("barker", "sqrt", "min", "max", "lsb1", "lsb2")
#: Samplers selectable here ("learned" needs a file and is for the dashboard).
CHOICES = tuple(n for n in SAMPLERS if n != "learned")
#: Table 2 of the ICML paper: paper ESS mean and std over 30 chains, per case and sampler.
PAPER_TABLE2 = {
    1: {
        "barker": (2.55, 0.30),
        "sqrt": (2.29, 0.23),
        "min": (2.43, 0.22),
        "max": (1.71, 0.13),
        "lsb1": (2.32, 0.27),
        "lsb2": (2.34, 0.23),
    },
    2: {
        "barker": (3.30, 0.36),
        "sqrt": (2.89, 0.28),
        "min": (2.96, 0.30),
        "max": (1.68, 0.11),
        "lsb1": (2.85, 0.28),
        "lsb2": (2.30, 0.29),
    },
    3: {
        "barker": (2.39, 0.98),
        "sqrt": (1.83, 0.56),
        "min": (2.31, 0.92),
        "max": (1.20, 0.10),
        "lsb1": (2.01, 0.70),
        "lsb2": (2.44, 0.96),
    },
    4: {
        "barker": (2.10, 0.91),
        "sqrt": (7.08, 4.07),
        "min": (1.74, 0.26),
        "max": (1.74, 0.51),
        "lsb1": (2.52, 1.11),
        "lsb2": (20.11, 15.58),
    },
}

PAPER_CHAINS, PAPER_SIZE, PAPER_STEPS = 30, 30, 30_000
IMAGE_CHAINS, IMAGE_SIZE, IMAGE_BURN_IN, IMAGE_STEPS = 4, 64, 500, 5000
MAX_CHAINS, MAX_SIZE, MAX_STEPS = 1000, 256, 1_000_000
MAX_TRACE_VALUES = 100_000_000  # records x chains x samplers: 1.2 GB of float32 traces
RECORD_BLOCK = 256  # records gathered on the device before one copy to the trace


# ============================================================================ recording
_SCALARS = {
    "step": np.int64,
    "target_evals": np.int64,
    "accept_rate": np.float64,
    "wall_s": np.float64,
    "phase": np.int8,
}


class ArrayTrace(Trace):
    """A ``Trace`` stored as growable arrays and filled in blocks (``extend``).

    Same export API as ``Trace`` (``arrays``, ``mixing_series``, ``mixing_summary``,
    ``write_csv``, ``len``) and the same rules: steps increase, the phase only goes from burn-in
    to mixing. ``record`` works as in ``Trace`` (one state at a time).
    """

    def __init__(self, n_chains: int, thin: int = 1, truth=None, capacity: int = 1024):
        self._initial_capacity = max(1, int(capacity))
        super().__init__(n_chains, thin=thin, truth=truth)

    def reset(self) -> None:
        cap = self._initial_capacity
        self._values = np.zeros((cap, len(self._fields), self.n_chains), dtype=np.float32)
        self._scalars = {k: np.zeros(cap, dtype=d) for k, d in _SCALARS.items()}
        self._n = 0
        self._last_step = None
        self._last_phase = 0

    def __len__(self) -> int:
        return self._n

    @property
    def nbytes(self) -> int:
        return self._values.nbytes + sum(a.nbytes for a in self._scalars.values())

    def _reserve(self, extra: int) -> None:
        need = self._n + extra
        cap = self._values.shape[0]
        if need <= cap:
            return
        new_cap = max(need, 2 * cap)
        values = np.zeros((new_cap, *self._values.shape[1:]), dtype=np.float32)
        values[: self._n] = self._values[: self._n]
        self._values = values
        for key, old in self._scalars.items():
            new = np.zeros(new_cap, dtype=old.dtype)
            new[: self._n] = old[: self._n]
            self._scalars[key] = new

    def compact(self) -> None:
        """Drop unused capacity (before pickling or keeping the trace)."""
        self._values = self._values[: self._n].copy()
        self._scalars = {k: v[: self._n].copy() for k, v in self._scalars.items()}

    def extend(self, step, values, target_evals, accept_rate, wall_s, phase) -> None:
        """Append ``k`` records: ``values [k, len(fields), n_chains]`` and ``[k]`` scalars.

        ``phase`` holds indices into ``PHASES`` (0 burn-in, 1 mixing).
        """
        checked = self._check_records(step, values, phase)
        if checked is None:
            return
        step, values, phase = checked
        k = step.size
        self._reserve(k)
        sl = slice(self._n, self._n + k)
        self._values[sl] = values
        columns = {
            "step": step,
            "target_evals": target_evals,
            "accept_rate": accept_rate,
            "wall_s": wall_s,
            "phase": phase,
        }
        for key, column in columns.items():
            self._scalars[key][sl] = np.asarray(column).reshape(-1)
        self._n += k
        self._last_step = int(step[-1])
        self._last_phase = int(phase[-1])

    def record(self, step, x, log_p, target_evals, accept_rate, wall_s, phase, force=False) -> bool:
        step = int(step)
        if not force and step % self.thin != 0:
            return False
        if self._last_step is not None and step == self._last_step:
            return False
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}; got {phase!r}")
        per_chain = [magnetisation(x), log_p.detach().to(device=x.device, dtype=torch.float64)]
        if self.truth is not None:
            per_chain.append(accuracy(x, self.truth.to(x.device)))
        values = torch.stack(per_chain).to(device="cpu", dtype=torch.float32).numpy()
        self.extend(
            [step], values[None], [int(target_evals)], [float(accept_rate)], [float(wall_s)],
            [PHASES.index(phase)],
        )  # fmt: skip
        return True

    def arrays(self) -> dict[str, np.ndarray]:
        n = self._n
        out = {k: v[:n].copy() for k, v in self._scalars.items()}
        for i, name in enumerate(self._fields):
            out[name] = np.ascontiguousarray(self._values[:n, i, :])
        return out


class _Recorder:
    """Records one sampler's statistics into an ``ArrayTrace``, a block of records at a time.

    Per record, on the sampler's device: one matrix product ``x [1, truth] -> (m, x . truth)``
    and the sampler's ``log_p`` (two sums over its cached flip log-ratios). At the end of a
    block the trace gets ``accuracy = ((D + x . truth) / 2) / D`` (the number of agreeing sites
    is exact, divided as ``Trace`` does).
    """

    def __init__(self, sampler, trace: ArrayTrace, truth, block: int = RECORD_BLOCK):
        self.sampler, self.trace, self.block = sampler, trace, block
        b, d, device = sampler.n_chains, sampler.n_sites, sampler.device
        cols = [torch.ones(d, dtype=torch.float64)]
        if truth is not None:
            cols.append(torch.as_tensor(truth, dtype=torch.float64).reshape(d))
        self._weights = torch.stack(cols, 1).to(device)  # [D, F]: ones, (truth)
        self._truth = truth is not None
        self._prod = torch.zeros(block, b, len(cols), dtype=torch.float64, device=device)
        self._log_p = torch.zeros(block, b, dtype=torch.float64, device=device)
        self._rows: list[tuple] = []
        self._last_step = None

    @torch.no_grad()
    def record(self, step: int, phase: str) -> None:
        if step == self._last_step:
            return
        self._last_step = step
        sampler = self.sampler
        k = len(self._rows)
        x2 = sampler.x.reshape(sampler.n_chains, sampler.n_sites)
        torch.mm(x2, self._weights, out=self._prod[k])
        self._log_p[k] = sampler.log_p
        accept = sampler.accept_rate if sampler.n_steps else 0.0
        self._rows.append(
            (step, sampler.n_target_evals, accept, sampler.wall_seconds, PHASES.index(phase))
        )
        if len(self._rows) == self.block:
            self.flush()

    def flush(self) -> None:
        k = len(self._rows)
        if not k:
            return
        d = self.sampler.n_sites
        values = np.empty((k, len(self.trace.fields), self.sampler.n_chains), dtype=np.float32)
        prod = self._prod[:k]
        values[:, 0] = prod[:, :, 0].cpu().numpy()
        values[:, 1] = self._log_p[:k].cpu().numpy()
        if self._truth:
            values[:, 2] = (((d + prod[:, :, 1]) * 0.5) / float(d)).cpu().numpy()
        step, evals, accept, wall, phase = zip(*self._rows, strict=True)
        self.trace.extend(step, values, evals, accept, wall, phase)
        self._rows.clear()


class RecordingComparison(Comparison):
    """A ``Comparison`` whose traces are ``ArrayTrace`` (growable arrays, fast to export).

    Same constructor and methods as ``Comparison``; ``traces`` hold the same fields with the
    same values (``log p~`` to rounding). Posterior marginals are not accumulated. Call
    ``flush()`` before reading the traces (``finish()`` also drops spare capacity).
    """

    def __init__(
        self,
        names,
        target,
        n_chains: int,
        seed: int = 0,
        device=None,
        x0=None,
        thin: int = 1,
        truth=None,
        capacity: int = 1024,
        **options,
    ):
        if isinstance(thin, bool) or not isinstance(thin, int) or thin < 0:
            raise ValueError(f"thin must be a non-negative integer, got {thin!r}.")
        super().__init__(names, target, n_chains, seed, device, x0, thin=0, truth=truth, **options)
        self.thin = thin
        self.traces = (
            {n: ArrayTrace(n_chains, thin, truth, capacity) for n in self.samplers} if thin else {}
        )
        self._recorders = {
            n: _Recorder(s, self.traces[n], truth) for n, s in self.samplers.items() if thin
        }
        self._accumulate_marginals = False
        if thin:
            for sampler in self.samplers.values():
                sampler.track_statistics(truth)
            self.record(force=True)

    def _before_extend(self, name: str) -> None:
        self._recorders[name].flush()  # its buffered records come first

    def _after_extend(self, name: str, last_step: int) -> None:
        self._recorders[name]._last_step = last_step

    def record(self, force: bool = False) -> None:
        """Record every sampler's state now (a repeat of the last recorded step is skipped)."""
        for recorder in self._recorders.values():
            recorder.record(self.n_steps, self.phase)

    def flush(self) -> None:
        for recorder in self._recorders.values():
            recorder.flush()

    def finish(self) -> None:
        self.flush()
        for trace in self.traces.values():
            trace.compact()


# ============================================================================ one sampler
@dataclass
class SamplerRun:
    """What one sampler's task returns (plain data, picklable)."""

    name: str
    trace: ArrayTrace
    x: torch.Tensor  # final states [B, H, W], on the CPU
    accept_rate: float
    n_target_evals: int
    n_steps: int
    burnin_seconds: float  # the sampler's own wall time (steps only) at the end of burn-in
    mixing_seconds: float
    burnin_wall: float  # the burn-in loop, recording and progress included
    mixing_wall: float
    burnin_cpu: float  # CPU seconds of the burn-in loop (this thread), recording included
    mixing_cpu: float
    target_evals_burnin: int
    history: dict | None = None
    balancing_json: str | None = None
    learning_failed: bool = False
    messages: list = field(default_factory=list)
    csv_seconds: float = 0.0  # writing this sampler's rows of traces.csv
    summary: MixingSummary | None = None  # paper ESS etc. of the mixing magnetisation
    acf: np.ndarray | None = None  # its autocorrelation, mean over chains, lags 0..max_lag


def build_problem(spec: dict):
    """The ``lsbcore.Problem`` of a spec made by ``_problem_spec`` (deterministic)."""
    if spec["kind"] == "case":
        return paper_case(spec["case"], n=spec["size"], n_chains=spec["chains"], seed=spec["seed"])
    return image_problem(
        spec["image"],
        lam=spec["lam"],
        mu=spec["mu"],
        sigma=spec["sigma"],
        n_chains=spec["chains"],
        invert=spec["invert"],
        noise=spec["noise"],
        boundary=spec["boundary"],
        seed=spec["seed"],
    )


def _run_sampler(task: dict, progress=None) -> SamplerRun:
    """Burn-in then mixing for one sampler; ``progress(name, phase, done, total)``."""
    name, burn_in, steps, thin = task["name"], task["burn_in"], task["steps"], task["thin"]
    problem = build_problem(task["problem"])
    comparison = RecordingComparison(
        [name],
        problem.target,
        task["problem"]["chains"],
        seed=task["seed"],
        device=task["device"],
        x0=problem.x0,
        thin=thin,
        truth=problem.truth,
        capacity=(burn_in + steps) // thin + 2,
        **task["learning"],
    )
    sampler = comparison[name]
    report = progress or (lambda *args: None)
    burn_chunk = 25 if sampler.learnable else 250
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start, start_cpu = time.perf_counter(), time.thread_time()
        done = 0
        while done < burn_in:
            n = min(burn_chunk, burn_in - done)
            comparison.step(n, learn=True)
            done += n
            report(name, "burn-in", done, burn_in)
        burnin_wall = time.perf_counter() - start
        burnin_cpu = time.thread_time() - start_cpu
        burnin_seconds = sampler.wall_seconds
        evals_burnin = sampler.n_target_evals
        comparison.start_mixing()
        start, start_cpu = time.perf_counter(), time.thread_time()
        done = 0
        while done < steps:
            n = min(1000, steps - done)
            comparison.step(n)
            done += n
            report(name, "mixing", done, steps)
        comparison.record(force=True)  # the final state, if the thinning skipped it
        comparison.finish()
        mixing_wall = time.perf_counter() - start
        mixing_cpu = time.thread_time() - start_cpu
    messages = [f"{name}: {w.message}" for w in caught if issubclass(w.category, RuntimeWarning)]
    # the mixing diagnostics here, in parallel with the other samplers (results.py would
    # compute the same from the trace: same window, since every sampler mixes as long)
    series = comparison.traces[name].mixing_series()
    lag = effective_max_lag(series.shape[1], PAPER_MAX_LAG)
    summary = acf = None
    if lag is not None:
        summary = summarise_mixing(series, max_lag=lag)
        acf = autocorrelation(series, lag).mean(axis=0)
    csv_seconds = 0.0
    if task.get("csv_part"):
        started = time.perf_counter()
        with open(task["csv_part"], "w", encoding="utf-8", newline="") as f:
            thin_for_csv(comparison.traces[name], task["csv_thin"]).write_csv(f, name, header=False)
        csv_seconds = time.perf_counter() - started
    history = balancing_json = None
    if sampler.learnable:
        history = sampler.history.arrays()
        meta = {"sampler": name, "burn_in": burn_in, "seed": task["seed"], **task["meta"]}
        meta["learning_failed"] = bool(sampler.learning_failed)
        balancing_json = balancing_to_json(sampler.balancing, meta)
    return SamplerRun(
        name=name,
        trace=comparison.traces[name],
        x=sampler.x.detach().to("cpu").clone(),
        accept_rate=sampler.accept_rate,
        n_target_evals=int(sampler.n_target_evals),
        n_steps=int(sampler.n_steps),
        burnin_seconds=burnin_seconds,
        mixing_seconds=sampler.wall_seconds - burnin_seconds,
        burnin_wall=burnin_wall,
        mixing_wall=mixing_wall,
        burnin_cpu=burnin_cpu,
        mixing_cpu=mixing_cpu,
        target_evals_burnin=int(evals_burnin),
        history=history,
        balancing_json=balancing_json,
        learning_failed=bool(getattr(sampler, "learning_failed", False)),
        messages=messages,
        summary=summary,
        acf=acf,
        csv_seconds=csv_seconds,
    )


_WORKER_QUEUE = None


def _init_worker(progress_queue) -> None:
    global _WORKER_QUEUE
    _WORKER_QUEUE = progress_queue
    torch.set_num_threads(1)
    _deterministic_steps()


def _deterministic_steps() -> None:
    """Compiled steps from the first step on (compiling first), whatever else this process
    imported: a run that started on torch steps until the kernels were ready would give other
    chains (as exact), and results must not depend on timing or on the worker count."""
    kernels.WAIT_FOR_COMPILE = True


def _worker_progress(name, phase, done, total) -> None:
    if _WORKER_QUEUE is not None:
        _WORKER_QUEUE.put((name, phase, done, total))


def _run_sampler_in_worker(task: dict) -> SamplerRun:
    return _run_sampler(task, _worker_progress)


@contextlib.contextmanager
def _single_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class _RunView:
    """The finished runs seen as a comparison (what ``comparison_results`` reads)."""

    def __init__(self, runs: dict, truth, device):
        self.samplers = runs
        self.traces = {name: run.trace for name, run in runs.items()}
        self.truth = truth
        self.device = device


# ============================================================================ progress
class _Progress:
    """One carriage-return status line on ``stream``: bar, phase, iteration and steps/s."""

    def __init__(self, names, burn_in: int, steps: int, stream=None, enabled: bool = True):
        self.burn_in, self.steps = burn_in, steps
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.state = {name: None for name in names}  # None: waiting; (phase, done, total)
        self.finished: set[str] = set()
        self.total = max(1, len(self.state) * (burn_in + steps))
        self.start = time.perf_counter()
        self._last = 0.0
        self._width = 0

    def update(self, name, phase, done, total) -> None:
        self.state[name] = (phase, done, total)
        self.render()

    def finish(self, name) -> None:
        self.state[name] = ("mixing", self.steps, self.steps)
        self.finished.add(name)
        self.render()

    def iterations(self) -> int:
        out = 0
        for state in self.state.values():
            if state is not None:
                phase, done, _ = state
                out += done if phase == "burn-in" else self.burn_in + done
        return out

    def render(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not self.enabled or (not force and now - self._last < 0.2):
            return
        self._last = now
        done = self.iterations()
        elapsed = max(now - self.start, 1e-9)
        frac = min(1.0, done / self.total)
        bar = "#" * int(round(24 * frac))
        active = [
            f"{name} {state[0]} {state[1]}/{state[2]}"
            for name, state in self.state.items()
            if state is not None and name not in self.finished
        ]
        phase = ", ".join(active) if active else ("done" if frac >= 1 else "starting")
        line = (
            f"[{bar:<24}] {100 * frac:3.0f}% | {phase} | "
            f"{done / elapsed:,.0f} steps/s | {elapsed:.0f} s"
        )
        columns = shutil.get_terminal_size((120, 20)).columns - 1
        line = line[:columns]
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.render(force=True)
            self.stream.write("\n")
            self.stream.flush()


def _log(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


# ============================================================================ the experiment
def _cost(name: str, burn_in: int, steps: int) -> float:
    """Rough relative cost, to start the longest tasks first."""
    learn = {"lsb1": 1 / 150, "lsb2": 1 / 60}.get(name, 1 / 3500)
    mix = {"lsb1": 1 / 2000, "lsb2": 1 / 1500}.get(name, 1 / 3500)
    return burn_in * learn + steps * mix


def _children_cpu() -> float:
    """CPU seconds of finished child processes (the workers, once the pool has shut down)."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def thin_for_csv(trace: ArrayTrace, every: int) -> ArrayTrace:
    """``trace`` with every ``every``-th mixing record (burn-in and the last record kept)."""
    if every == 1:
        return trace
    arrs = trace.arrays()
    mixing = np.flatnonzero(arrs["phase"] == PHASES.index("mixing"))
    keep = np.ones(len(trace), dtype=bool)
    keep[mixing] = False
    keep[mixing[every - 1 :: every]] = True
    if len(trace):
        keep[-1] = True
    out = ArrayTrace(trace.n_chains, trace.thin, trace.truth, capacity=int(keep.sum()))
    values = np.stack([arrs[name][keep] for name in trace.fields], 1)
    columns = ("target_evals", "accept_rate", "wall_s", "phase")
    out.extend(arrs["step"][keep], values, *(arrs[c][keep] for c in columns))
    return out


def _run_all(tasks, workers: int, progress, runs: dict) -> float:
    """Run the tasks in this process or in ``workers`` spawned processes; returns wall seconds."""
    started = time.perf_counter()
    if workers <= 1:
        with _single_thread():
            for task in tasks:
                run = _run_sampler(task, progress.update)
                runs[run.name] = run
                progress.finish(run.name)
    else:
        ctx = mp.get_context("spawn")
        progress_queue = ctx.Queue()
        pool = cf.ProcessPoolExecutor(
            max_workers=workers,
            mp_context=ctx,
            initializer=_init_worker,
            initargs=(progress_queue,),
        )
        try:
            pending = {pool.submit(_run_sampler_in_worker, task) for task in tasks}
            while pending:
                done, pending = cf.wait(pending, timeout=0.1)
                _drain(progress_queue, progress)
                for future in done:
                    run = future.result()
                    runs[run.name] = run
                    progress.finish(run.name)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        _drain(progress_queue, progress)
    progress.close()
    return time.perf_counter() - started


def run_experiment(
    problem_spec: dict,
    names,
    burn_in: int,
    steps: int,
    seed: int,
    device,
    thin: int,
    workers: int,
    out: Path,
    config: dict,
    learning: dict | None = None,
    quiet: bool = False,
    source_label: str = "",
    csv_thin: int = 1,
) -> dict:
    """Run every sampler, write DIR's files and return the results document (with timings).

    ``csv_thin`` keeps every ``csv_thin``-th mixing record in ``traces.csv`` (all burn-in
    records and the last one are always written); the ESS always uses every record.
    """
    t_total = time.perf_counter()
    cpu_main, cpu_children = time.process_time(), _children_cpu()
    _deterministic_steps()
    out = Path(out)
    names = list(names)
    problem = build_problem(problem_spec)
    meta = {"source": source_label}
    tasks = [
        {
            "name": name,
            "problem": problem_spec,
            "burn_in": burn_in,
            "steps": steps,
            "thin": thin,
            "seed": seed,
            "device": str(device),
            "learning": dict(learning or {}),
            "meta": meta,
            "csv_part": str(out / f".traces.{name}.part"),
            "csv_thin": csv_thin,
        }
        for name in names
    ]
    tasks.sort(key=lambda t: -_cost(t["name"], burn_in, steps))  # longest first
    progress = _Progress(names, burn_in, steps, enabled=not quiet)
    runs: dict[str, SamplerRun] = {}
    parts = {task["name"]: Path(task["csv_part"]) for task in tasks}

    t_sampling = time.perf_counter()
    try:
        sampling_wall = _run_all(tasks, workers, progress, runs)
    except BaseException:
        for path in parts.values():
            path.unlink(missing_ok=True)
        raise
    cpu_workers = _children_cpu() - cpu_children
    for run in runs.values():
        for message in run.messages:
            _log(f"warning: {message}", quiet)

    # traces.csv: the header, then each sampler's rows (written by its task) in the order
    # asked for: byte for byte what lsbcore.write_traces_csv writes
    t_csv = time.perf_counter()
    with open(out / "traces.csv", "w", encoding="utf-8", newline="") as f:
        f.write(",".join(CSV_COLUMNS) + "\n")
        for name in names:
            with open(parts[name], encoding="utf-8", newline="") as part:
                shutil.copyfileobj(part, f, 1 << 20)
            parts[name].unlink()
    csv_concat = time.perf_counter() - t_csv

    for name in names:
        run = runs[name]
        if run.balancing_json is not None:
            (out / f"learned_{name}.json").write_text(run.balancing_json, encoding="utf-8")

    t_results = time.perf_counter()
    ordered = {name: runs[name] for name in names}
    view = _RunView(ordered, problem.truth, resolve_device(device))
    burnin_seconds = {n: r.burnin_seconds for n, r in ordered.items()}
    mixing_seconds = {n: r.mixing_seconds for n, r in ordered.items()}
    summaries = {n: r.summary for n, r in ordered.items() if r.summary is not None}
    results = comparison_results(
        view, config, burnin_seconds, mixing_seconds, PAPER_MAX_LAG, summaries=summaries
    )
    results_seconds = time.perf_counter() - t_results

    per_sampler = {}
    for n, r in ordered.items():
        recording = (r.burnin_wall - r.burnin_seconds) + (r.mixing_wall - r.mixing_seconds)
        per_sampler[n] = {
            "burnin_seconds": r.burnin_seconds,
            "mixing_seconds": r.mixing_seconds,
            "recording_seconds": recording,
            "csv_seconds": r.csv_seconds,
            "burnin_wall_seconds": r.burnin_wall,
            "mixing_wall_seconds": r.mixing_wall,
            "burnin_cpu_seconds": r.burnin_cpu,
            "mixing_cpu_seconds": r.mixing_cpu,
            "burnin_steps_per_second": burn_in / r.burnin_seconds if r.burnin_seconds else None,
            "mixing_steps_per_second": steps / r.mixing_seconds if r.mixing_seconds else None,
        }
    timings = {
        "workers": workers,
        "setup_seconds": t_sampling - t_total,
        "sampling_wall_seconds": sampling_wall,
        "burnin_seconds_sum": sum(r.burnin_seconds for r in ordered.values()),
        "mixing_seconds_sum": sum(r.mixing_seconds for r in ordered.values()),
        "recording_seconds_sum": sum(p["recording_seconds"] for p in per_sampler.values()),
        "csv_seconds_sum": sum(r.csv_seconds for r in ordered.values()),
        "csv_concat_seconds": csv_concat,
        "results_seconds": results_seconds,
        "per_sampler": per_sampler,
    }

    t_report = time.perf_counter()
    report = build_report(results, ordered, problem, burn_in, source_label, timings)
    (out / "report.html").write_text(report, encoding="utf-8")
    timings["report_seconds"] = time.perf_counter() - t_report
    timings["total_seconds"] = time.perf_counter() - t_total
    timings["cpu_seconds_main_process"] = time.process_time() - cpu_main
    timings["cpu_seconds_worker_processes"] = cpu_workers
    results["timings"] = timings
    (out / "results.json").write_text(results_to_json(results) + "\n", encoding="utf-8")
    return results


def _drain(progress_queue, progress: _Progress) -> None:
    while True:
        try:
            name, phase, done, total = progress_queue.get_nowait()
        except queue_module.Empty:
            return
        if name not in progress.finished:
            progress.update(name, phase, done, total)


# ============================================================================ the report
_CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       margin: 0 auto; max-width: 1100px; padding: 1.5rem 2rem 4rem; color: #222; }
h1 { font-size: 1.7rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.25rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
p.note { color: #555; font-size: 0.92rem; max-width: 60rem; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.9rem; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 0.3rem 0.7rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f6f6f6; font-weight: 600; }
table.text td { text-align: left; }
code { background: #f3f3f3; padding: 0.05rem 0.3rem; border-radius: 3px; font-size: 0.88em; }
.swatch { display: inline-block; width: 0.8em; height: 0.8em; border-radius: 2px;
          margin-right: 0.4em; vertical-align: -0.05em; }
.figure { margin: 0.8rem 0 1.4rem; }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
@media (max-width: 900px) { .grid { grid-template-columns: 1fr; } }
"""


def _fmt(value, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a"
        return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:,.0f}"
    return str(value)


def _table(header: list[str], rows: list[list[str]], css: str = "") -> str:
    """An HTML table; every cell is escaped here."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    cls = f' class="{css}"' if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _burnin_series(arrays: dict, field_name: str, x_key: str, burn_in: int) -> dict:
    out = {}
    for name, arrs in arrays.items():
        if field_name not in arrs:
            continue
        mask = arrs["step"] <= burn_in
        out[name] = (arrs[x_key][mask], arrs[field_name][mask])
    return out


def build_report(results: dict, runs: dict, problem, burn_in: int, source: str, timings) -> str:
    """The self-contained HTML report (plotly.js embedded once in the head)."""
    from lsbcore import figures  # plotly is imported only there (and only when reporting)

    config = results["config"]
    samplers = results["samplers"]
    lag = config.get("max_lag")
    has_truth = problem.truth is not None

    arrays = {name: run.trace.arrays() for name, run in runs.items()}
    figs: list[tuple[str, str, object]] = []  # (heading, note, figure)
    figs.append(
        (
            "Burn-in: magnetisation against iterations",
            "m(x) = sum of the spins, per chain; the line is the mean over chains, the band the "
            "central 95%. One iteration is one step of every chain of a sampler.",
            figures.band_figure(
                _burnin_series(arrays, "magnetisation", "step", burn_in),
                "Magnetisation during burn-in",
                "magnetisation m(x)",
            ),
        )
    )
    figs.append(
        (
            "Burn-in: magnetisation against target evaluations",
            "Target evaluations per chain: single-site log-ratio evaluations (a step evaluates the "
            "flipped site's neighbourhood; a learning step also a uniformly flipped one; an exact "
            "resync all sites). This is the paper's cost axis, counted honestly for every sampler.",
            figures.band_figure(
                _burnin_series(arrays, "magnetisation", "target_evals", burn_in),
                "Magnetisation during burn-in",
                "magnetisation m(x)",
                x_label="target evaluations per chain",
            ),
        )
    )
    figs.append(
        (
            "Burn-in: log posterior",
            "Unnormalised log posterior log p~(x) per chain.",
            figures.band_figure(
                _burnin_series(arrays, "log_p", "step", burn_in),
                "log p~(x) during burn-in",
                "log p~(x)",
            ),  # fmt: skip
        )
    )
    if has_truth:
        figs.append(
            (
                "Burn-in: accuracy",
                "Fraction of sites equal to the ground truth.",
                figures.band_figure(
                    _burnin_series(arrays, "accuracy", "step", burn_in),
                    "Accuracy during burn-in",
                    "accuracy",
                ),  # fmt: skip
            )
        )
    whole = {name: (arrs["step"], arrs["magnetisation"]) for name, arrs in arrays.items()}
    figs.append(
        (
            "Whole run: magnetisation",
            f"Burn-in and mixing (burn-in ends at iteration {burn_in:,}); long series are "
            "decimated for display only.",
            figures.band_figure(whole, "Magnetisation, whole run", "magnetisation m(x)"),
        )
    )
    acf = {}
    if lag:
        for name, run in runs.items():
            if run.acf is not None and len(run.acf) == lag + 1:
                acf[name] = run.acf
            else:
                series = run.trace.mixing_series()
                if series.shape[1] > lag:
                    acf[name] = autocorrelation(series, lag)
    figs.append(
        (
            "Mixing: autocorrelation",
            f"Autocorrelation of the magnetisation over the mixing phase, lags 0..{lag}, mean over "
            "chains. Lags above 0.05 count towards the paper ESS.",
            figures.acf_figure(acf, lag),
        )
    )
    figs.append(
        (
            "Mixing: effective sample size",
            "Left: the paper's ESS (Zanella's convention) per window of L+1 draws, mean over "
            "chains with the standard deviation as error bar. Right: rank-normalised bulk ESS "
            "over all chains (arviz-stats).",
            figures.ess_figure(samplers),
        )
    )
    balancings = {}
    notes = []
    for name, run in runs.items():
        if name in BASELINES:
            continue
        if run.balancing_json is not None:
            try:
                balancings[name] = load_balancing(run.balancing_json)
            except ValueError as err:
                notes.append(f"{name}: the learned function cannot be drawn ({err})")
        else:
            balancings[name] = make_balancing(name)
    t, g, reflected = figures.balancing_curves(balancings)
    figs.append(
        (
            "Balancing functions",
            "g(t) of every locally balanced sampler, the learned ones as learned at the end of "
            "burn-in. The dashed curves are t g(1/t): they lie on g exactly when g is balanced.",
            figures.balancing_figure(t, g, reflected),
        )
    )
    if "lsb1" in runs and runs["lsb1"].history is not None:
        h = runs["lsb1"].history
        weights = h["weights"]
        figs.append(
            (
                "LSB 1: mixture weights",
                "Softmax weights of (t/(1+t), sqrt(t), min(1,t), max(1,t)) over burn-in.",
                figures.weights_area_figure(h["step"], weights),
            )
        )
        final = weights[-1] if len(weights) else np.zeros(0)
        figs.append(("", "", figures.weights_bar_figure(final)))
    histories = {n: r.history for n, r in runs.items() if r.history is not None}
    if histories:
        figs.append(
            (
                "Learning",
                "The learning objective (spec section 5) and eta over burn-in, per learned "
                "sampler.",
                figures.loss_figure(histories),
            )
        )

    # ---------------------------------------------------------------- tables
    case = config.get("case")
    paper = PAPER_TABLE2.get(case, {}) if isinstance(case, int) else {}
    header = ["sampler", "paper ESS", "bulk ESS", "R-hat", "accept rate"]
    header += ["final accuracy"] if has_truth else []
    header += ["target evals / chain", "burn-in s", "mixing s"]
    header += ["paper Table 2"] if paper else []
    rows = []
    for name, s in samplers.items():
        ess = s["ess_paper_mean"]
        ess_text = "n/a" if ess is None else f"{ess:.2f} ± {_fmt(s['ess_paper_std'], 2)}"
        row = [figures.sampler_label(name), ess_text, _fmt(s["ess_bulk"], 4), _fmt(s["rhat"], 4)]
        row.append(_fmt(s["accept_rate"]))
        row += [_fmt(s["final_accuracy"])] if has_truth else []
        row += [_fmt(s["target_evals"]), _fmt(s["burnin_seconds"]), _fmt(s["mixing_seconds"])]
        if paper:
            p = paper.get(name)
            row.append("" if p is None else f"{p[0]:.2f} ± {p[1]:.2f}")
        rows.append(row)
    summary_table = _table(header, rows)

    config_rows = []
    for key, value in config.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={_fmt(v)}" for k, v in value.items())
        elif isinstance(value, list):
            value = " x ".join(map(str, value)) if key == "shape" else ", ".join(map(str, value))
        config_rows.append([key, _fmt(value)])
    config_table = _table(["setting", "value"], config_rows, "text")

    timing_rows = [
        [
            n,
            _fmt(p["burnin_seconds"]),
            _fmt(p["mixing_seconds"]),
            _fmt(p["recording_seconds"]),
            _fmt(p["csv_seconds"]),
            _fmt(p["burnin_steps_per_second"]),
            _fmt(p["mixing_steps_per_second"]),
        ]
        for n, p in timings["per_sampler"].items()
    ]
    timing_table = _table(
        ["sampler", "burn-in s", "mixing s", "recording s", "traces.csv s", "burn-in steps/s",
         "mixing steps/s"],
        timing_rows,
    )  # fmt: skip
    env_rows = [["device", results["device"]]] + [[k, v] for k, v in results["versions"].items()]
    env_table = _table(["", ""], env_rows, "text")

    # ---------------------------------------------------------------- page
    parts = []
    for i, (heading, note, fig) in enumerate(figs):
        if heading:
            parts.append(f"<h2>{html.escape(heading)}</h2>")
        if note:
            parts.append(f'<p class="note">{html.escape(note)}</p>')
        div = figures.figure_div(fig, f"figure-{i}")
        parts.append(f'<div class="figure">{div}</div>')
    swatches = " ".join(
        f'<span><span class="swatch" style="background:{figures.sampler_colour(n)}"></span>'
        f"{html.escape(figures.sampler_label(n))}</span>"
        for n in samplers
    )
    lag_note = (
        f"Paper ESS window L = {lag} lags"
        + (
            f" (clipped from {config.get('max_lag_requested')} because the mixing phase is short)"
            if lag is not None and lag != config.get("max_lag_requested")
            else ""
        )
        + (f"; traces thinned by {config.get('thin')}" if config.get("thin", 1) != 1 else "")
        + ". The paper's Table 2 used 30 chains, 30x30, 2000 burn-in and 30 000 mixing steps."
    )
    if problem.target.batch > 1:
        notes.append(
            "Every chain has its own noisy image here (as in the paper), so the chains sample "
            "different posteriors: the bulk ESS and R-hat pooled over chains compare different "
            "targets and are not convergence diagnostics for this problem; the paper ESS is "
            "computed per chain."
        )
    extra = "".join(f'<p class="note">{html.escape(n)}</p>' for n in notes)
    title = f"LSB Explorer experiment: {source}"
    command = config.get("command", "")
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{_CSS}</style>
<script>{figures.plotly_js()}</script>
</head>
<body>
<h1>{html.escape(title)}</h1>
<p class="note">Command: <code>{html.escape(command)}</code></p>
<p>{swatches}</p>
<h2>Summary</h2>
{summary_table}
<p class="note">{html.escape(lag_note)} Acceptance rate and target evaluations cover the whole
run (burn-in included); seconds are the samplers' own stepping time, recording excluded.</p>
{extra}
{"".join(parts)}
<h2>Configuration</h2>
{config_table}
<h2>Timings</h2>
{timing_table}
<p class="note">Sampling wall time {html.escape(_fmt(timings["sampling_wall_seconds"]))} s with
{html.escape(str(timings["workers"]))} worker(s).</p>
<h2>Environment</h2>
{env_table}
</body>
</html>
"""
    return page


# ============================================================================ command line
def _int_in(low: int, high: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low:,} and {high:,}, got {value:,}")
        return value

    return parse


def _float_in(low: float, high: float, low_open: bool = False):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be finite, got {text!r}")
        if value < low or value > high or (low_open and value == low):
            bracket = "(" if low_open else "["
            raise argparse.ArgumentTypeError(
                f"must be in {bracket}{low:g}, {high:g}], got {value:g}"
            )
        return value

    return parse


def _sampler_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give at least one sampler name")
    unknown = [n for n in names if n not in CHOICES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown sampler(s) {', '.join(map(repr, unknown))}; choose from: {', '.join(CHOICES)}"
        )
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise argparse.ArgumentTypeError(f"sampler(s) listed twice: {', '.join(duplicates)}")
    return names


def _default_workers() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, min(2, cpus))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.experiment",
        description="Compare locally balanced samplers on one of the paper's Ising problems or "
        "on an image, and write results.json, traces.csv, learned_<name>.json and report.html.",
        epilog="Defaults for --case are the paper's settings (30 chains, 30x30, burn-in 2000, "
        f"30000 mixing steps); for --image: {IMAGE_CHAINS} chains, longest side {IMAGE_SIZE}, "
        f"burn-in {IMAGE_BURN_IN}, {IMAGE_STEPS} mixing steps.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--case", type=int, choices=sorted(PAPER_CASES), help="the paper's synthetic case"
    )
    source.add_argument("--image", type=Path, help="segment this image (PNG, JPEG, ...)")
    parser.add_argument(
        "--samplers",
        type=_sampler_list,
        default=list(DEFAULT_SAMPLERS),
        help=f"comma-separated, from: {', '.join(CHOICES)} (default: {','.join(DEFAULT_SAMPLERS)})",
    )
    parser.add_argument("--chains", type=_int_in(1, MAX_CHAINS), help="chains per sampler")
    parser.add_argument(
        "--size", type=_int_in(3, MAX_SIZE), help="lattice side (case) or longest side (image)"
    )
    parser.add_argument(
        "--burn-in", type=_int_in(0, MAX_STEPS), help="burn-in iterations (learning)"
    )
    parser.add_argument("--steps", type=_int_in(1, MAX_STEPS), help="mixing iterations")
    parser.add_argument("--seed", type=_int_in(0, 2**31 - 1), default=0)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument(
        "--thin", type=_int_in(1, MAX_STEPS), default=1, help="record every THIN steps (default 1)"
    )
    parser.add_argument(
        "--csv-thin",
        type=_int_in(1, MAX_STEPS),
        default=10,
        help="write every N-th recorded mixing step to traces.csv (default 10: the paper run "
        "gives 69 MB instead of 446 MB; 1 writes all; burn-in is always complete; the ESS "
        "always uses every recorded step)",
    )
    parser.add_argument(
        "--workers",
        type=_int_in(1, 64),
        help="processes running samplers (default: min(2, CPUs); 1 with --device cuda)",
    )
    learning = parser.add_argument_group("learning (LSB 1, LSB 2)")
    learning.add_argument("--lr", type=_float_in(0.0, 10.0, low_open=True), default=1e-2)
    learning.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    learning.add_argument("--hidden", type=_int_in(1, 256), default=10, help="LSB 2 width")
    learning.add_argument("--restart-prob", type=_float_in(0.0, 1.0), default=1e-8)
    image = parser.add_argument_group("image problems (with --image)")
    image.add_argument("--lam", type=_float_in(0.0, 1e3), help="smoothness lambda >= 0")
    image.add_argument("--mu", type=_float_in(-1e3, 1e3), help="data strength mu")
    image.add_argument(
        "--sigma", type=_float_in(0.0, 1e3, low_open=True), help="noise scale sigma > 0"
    )
    image.add_argument("--invert", action="store_true", help="the object is dark")
    image.add_argument("--noise", type=_float_in(0.0, 1e3), default=None, help="added noise std")
    image.add_argument("--boundary", choices=("free", "periodic"), default=None)
    parser.add_argument("--out", type=Path, required=True, help="output directory (created)")
    parser.add_argument("--quiet", action="store_true", help="no progress or summary on stderr")
    return parser


def _validate(parser, args, argv) -> tuple[dict, dict, str]:
    """Check what argparse cannot; returns (problem spec, config, source label)."""
    image_only = {"lam": args.lam, "mu": args.mu, "sigma": args.sigma}
    if args.case is not None:
        given = [f"--{k}" for k, v in image_only.items() if v is not None]
        given += ["--invert"] if args.invert else []
        given += [f"--{k}" for k in ("noise", "boundary") if getattr(args, k) is not None]
        if given:
            parser.error(f"{', '.join(given)} only apply to --image problems")
        args.chains = args.chains or PAPER_CHAINS
        args.size = args.size or PAPER_SIZE
        args.burn_in = PAPER_CASES[args.case][4] if args.burn_in is None else args.burn_in
        args.steps = args.steps or PAPER_STEPS
    else:
        missing = [f"--{k}" for k, v in image_only.items() if v is None]
        if missing:
            parser.error(f"--image needs {', '.join(missing)}")
        args.chains = args.chains or IMAGE_CHAINS
        args.size = args.size or IMAGE_SIZE
        args.burn_in = IMAGE_BURN_IN if args.burn_in is None else args.burn_in
        args.steps = args.steps or IMAGE_STEPS
        args.noise = 0.0 if args.noise is None else args.noise
        args.boundary = args.boundary or "free"
    if args.thin > args.steps:
        parser.error(f"--thin ({args.thin}) must not exceed --steps ({args.steps})")
    records = (args.burn_in + args.steps) // args.thin + 2
    if records * args.chains * len(args.samplers) > MAX_TRACE_VALUES:
        parser.error(
            f"{len(args.samplers)} samplers x {args.chains} chains x {records:,} records is too "
            f"much to keep (limit {MAX_TRACE_VALUES:,} values); use --thin, fewer steps or chains"
        )
    try:
        device = resolve_device(args.device)
    except ValueError as err:
        parser.error(str(err))
    if args.workers is None:
        args.workers = 1 if device.type == "cuda" else _default_workers()
    args.workers = min(args.workers, len(args.samplers))

    config = {
        "command": shlex.join(["python", "-m", "lsbcore.experiment", *argv]),
        "argv": list(argv),
    }
    if args.case is not None:
        name, lam, mu, sigma, _ = PAPER_CASES[args.case]
        spec = {
            "kind": "case",
            "case": args.case,
            "size": args.size,
            "chains": args.chains,
            "seed": args.seed,
        }
        label = f"case {args.case} ({name})"
        config.update(case=args.case, case_name=name, lam=lam, mu=mu, sigma=sigma)
        config.update(boundary="periodic", shape=[args.size, args.size])
    else:
        path = args.image
        if not path.is_file():
            parser.error(f"--image: no file at {str(path)!r}")
        try:
            raw = path.read_bytes()
            image = load_image(raw, max_side=args.size)
        except ImageError as err:
            parser.error(f"--image {str(path)!r}: {err}")
        except OSError as err:
            parser.error(f"--image {str(path)!r}: cannot read it ({err.strerror or err})")
        spec = {
            "kind": "image",
            "image": image,
            "lam": args.lam,
            "mu": args.mu,
            "sigma": args.sigma,
            "chains": args.chains,
            "invert": bool(args.invert),
            "noise": args.noise,
            "boundary": args.boundary,
            "seed": args.seed,
        }
        try:
            build_problem(spec)
        except ValueError as err:
            parser.error(f"--image: {err}")
        label = f"image {path.name}"
        config.update(
            image=str(path),
            image_sha256=hashlib.sha256(raw).hexdigest(),
            lam=args.lam,
            mu=args.mu,
            sigma=args.sigma,
            invert=bool(args.invert),
            noise=args.noise,
            boundary=args.boundary,
            shape=list(image.shape),
        )
    config.update(
        samplers=list(args.samplers),
        chains=args.chains,
        size=args.size,
        burn_in=args.burn_in,
        steps=args.steps,
        seed=args.seed,
        device=str(device),
        thin=args.thin,
        csv_thin=args.csv_thin,
        workers=args.workers,
        learning={
            "lr": args.lr,
            "optimizer": args.optimizer,
            "hidden": args.hidden,
            "restart_prob": args.restart_prob,
        },
        step_counting="one step per chain per sampler per iteration, for every sampler",
    )
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        parser.error(f"--out {str(args.out)!r}: cannot create it ({err.strerror or err})")
    if not os.access(args.out, os.W_OK):
        parser.error(f"--out {str(args.out)!r} is not writable")
    return spec, config, label


def _print_summary(results: dict, quiet: bool) -> None:
    if quiet:
        return
    from lsbcore.figures import sampler_label

    case = results["config"].get("case")
    paper = PAPER_TABLE2.get(case, {}) if isinstance(case, int) else {}
    lines = [f"{'sampler':16s} {'paper ESS':>14s} {'bulk ESS':>9s} {'R-hat':>6s} {'accept':>7s}"]
    lines[0] += "  paper Table 2" if paper else ""
    for name, s in results["samplers"].items():
        ess = s["ess_paper_mean"]
        ess = "n/a" if ess is None else f"{ess:.2f} ± {s['ess_paper_std']:.2f}"
        line = f"{sampler_label(name):16s} {ess:>14s} {_fmt(s['ess_bulk'], 4):>9s} "
        line += f"{_fmt(s['rhat'], 3):>6s} {_fmt(s['accept_rate'], 3):>7s}"
        if name in paper:
            line += f"  {paper[name][0]:.2f} ± {paper[name][1]:.2f}"
        lines.append(line)
    t = results["timings"]
    lines.append(
        f"wall time {t['total_seconds']:.1f} s: sampling {t['sampling_wall_seconds']:.1f} s "
        f"({t['workers']} worker(s); summed over samplers: "
        f"burn-in {t['burnin_seconds_sum']:.1f} s, "
        f"mixing {t['mixing_seconds_sum']:.1f} s, recording {t['recording_seconds_sum']:.1f} s), "
        f"traces.csv {t['csv_seconds_sum']:.1f} s in the tasks + {t['csv_concat_seconds']:.1f} s, "
        f"results {t['results_seconds']:.1f} s, report {t['report_seconds']:.1f} s"
    )
    print("\n".join(lines), file=sys.stderr, flush=True)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    spec, config, label = _validate(parser, args, argv)
    learning = {
        "lr": args.lr,
        "optimizer": args.optimizer,
        "hidden": args.hidden,
        "restart_prob": args.restart_prob,
    }
    _log(
        f"{label}: {', '.join(args.samplers)}; {args.chains} chains, burn-in {args.burn_in:,}, "
        f"{args.steps:,} mixing steps, {args.workers} worker(s), device {config['device']}",
        args.quiet,
    )
    results = run_experiment(
        spec,
        args.samplers,
        burn_in=args.burn_in,
        steps=args.steps,
        seed=args.seed,
        device=config["device"],
        thin=args.thin,
        workers=args.workers,
        out=args.out,
        config=config,
        learning=learning,
        quiet=args.quiet,
        source_label=label,
        csv_thin=args.csv_thin,
    )
    _print_summary(results, args.quiet)
    _log(f"wrote {args.out}/results.json, traces.csv, report.html", args.quiet)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
