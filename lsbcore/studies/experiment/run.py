"""Running the experiment's samplers and recording them (see ``lsbcore.studies.experiment``).

Each sampler runs as its own task, in this process or in spawned worker processes, recorded by
a ``RecordingComparison`` into ``ArrayTrace`` arrays; ``run_experiment`` writes DIR's files
(the report through ``lsbcore.studies.experiment.report.build_report``).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import math
import multiprocessing as mp
import queue as queue_module
import shutil
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from lsbcore.backends import resolve_device
from lsbcore.balancing.json_io import balancing_to_json
from lsbcore.cases import image_problem, paper_case, square_problem
from lsbcore.comparison import Comparison
from lsbcore.diagnostics.mixing import (
    PAPER_MAX_LAG,
    MixingSummary,
    autocorrelation,
    ess_paper,
    summarise_mixing,
)
from lsbcore.diagnostics.trace import CSV_COLUMNS, PHASES, Trace, accuracy, magnetisation
from lsbcore.samplers.interface import ChainSampler
from lsbcore.samplers.registry import REGISTRY
from lsbcore.studies.experiment.paper_protocol import Protocol, ess_series
from lsbcore.studies.experiment.report import build_report
from lsbcore.studies.experiment.seeds import aggregate_seeds
from lsbcore.studies.results import comparison_results, effective_max_lag, results_to_json

__all__ = [
    "RECORD_BLOCK",
    "ArrayTrace",
    "RecordingComparison",
    "SamplerRun",
    "build_problem",
    "log_message",
    "run_experiment",
    "run_sampler",
    "thin_for_csv",
]

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

    def extend(
        self, step, values, target_evals, accept_rate, wall_s, phase, checked: bool = True
    ) -> None:
        """Append ``k`` records: ``values [k, len(fields), n_chains]`` and ``[k]`` scalars.

        ``phase`` holds indices into ``PHASES`` (0 burn-in, 1 mixing); ``checked`` as
        ``Trace.extend``.
        """
        records = self._records(step, values, phase, checked)
        if records is None:
            return
        step, values, phase = records
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

    def __init__(self, sampler: ChainSampler, trace: ArrayTrace, truth, block: int = RECORD_BLOCK):
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
        self.last_step = None  # the step recorded last (a repeat is skipped)

    @torch.no_grad()
    def record(self, step: int, phase: str) -> None:
        if step == self.last_step:
            return
        self.last_step = step
        sampler = self.sampler
        k = len(self._rows)
        x2 = sampler.x.reshape(sampler.n_chains, sampler.n_sites)
        torch.mm(x2, self._weights, out=self._prod[k])
        self._log_p[k] = sampler.log_p
        accept = sampler.accept_rate if sampler.n_steps else math.nan  # none before a step
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
        thin: int = 1,
        truth=None,
        capacity: int = 1024,
        **options,
    ):
        if isinstance(thin, bool) or not isinstance(thin, int) or thin < 0:
            raise ValueError(f"thin must be a non-negative integer, got {thin!r}.")
        # seed, device, x0, backend and the samplers' options go to Comparison as they are
        super().__init__(names, target, n_chains, thin=0, truth=truth, **options)
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
        self._recorders[name].last_step = last_step

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
    summary: MixingSummary | None = None  # paper ESS etc. of the ESS series (the protocol's)
    acf: np.ndarray | None = None  # its autocorrelation, mean over chains, lags 0..max_lag
    ess_per_chain: np.ndarray | None = None  # paper ESS of every chain [B] (seeds pool them)
    burnin_steps: int = 1  # steps per burn-in iteration


def build_problem(spec: dict):
    """The ``lsbcore.Problem`` of a spec made by ``_problem_spec`` (deterministic)."""
    if spec["kind"] == "square":  # the synthetic problem at any point (lsbcore.studies.sweep)
        return square_problem(
            spec["lam"],
            spec["mu"],
            spec["sigma"],
            n=spec["size"],
            n_chains=spec["chains"],
            seed=spec["seed"],
            start=spec.get("start", "shared"),
        )
    if spec["kind"] == "case":
        return paper_case(
            spec["case"],
            n=spec["size"],
            n_chains=spec["chains"],
            seed=spec["seed"],
            start=spec.get("start", "shared"),
            noise_model=spec.get("noise_model", "uniform"),
        )
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
    per_iteration = task.get("burnin_steps", 1)  # the authors' runner steps LSB 2 twice
    problem = build_problem(task["problem"])
    comparison = RecordingComparison(
        [name],
        problem.target,
        task["problem"]["chains"],
        seed=task["seed"],
        device=task["device"],
        backend=task["backend"],
        x0=problem.x0,
        thin=thin,
        truth=problem.truth,
        capacity=(burn_in * per_iteration + steps) // thin + 2,
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
            comparison.step(n * per_iteration, learn=True)
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
    # compute the same from the same series: same window, since every series is as long)
    ess_from = task.get("ess_from_step", burn_in)
    series = ess_series(comparison.traces[name], burn_in, ess_from, per_iteration)
    lag = effective_max_lag(series.shape[1], task["max_lag"])
    summary = acf = per_chain = None
    if lag is not None:
        summary = summarise_mixing(series, max_lag=lag)
        acf = autocorrelation(series, lag).mean(axis=0)
        if series.shape[1] > lag:
            per_chain = ess_paper(series, max_lag=lag)
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
        meta["burnin_steps_per_iteration"] = per_iteration
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
        ess_per_chain=per_chain,
        burnin_steps=per_iteration,
        csv_seconds=csv_seconds,
    )


def run_sampler(task: dict, progress=None) -> SamplerRun:
    """One sampler's task, run here: what a worker runs (``lsbcore.studies.sweep`` runs its
    cells so)."""
    return _run_sampler(task, progress)


_WORKER_QUEUE = None


def _init_worker(progress_queue) -> None:
    global _WORKER_QUEUE
    _WORKER_QUEUE = progress_queue
    torch.set_num_threads(1)


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

    def __init__(self, runs: dict, truth, device, one_posterior: bool):
        self.samplers = runs
        self.traces = {name: run.trace for name, run in runs.items()}
        self.truth = truth
        self.device = device
        self.one_posterior = one_posterior  # every chain samples the same posterior


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


def log_message(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


# ============================================================================ the experiment
def _cost(name: str, burn_in: int, steps: int, n_sites: int) -> float:
    """Rough relative cost, to start the longest tasks first: learning steps cost most, and a
    sweep costs about a fifth of a single-site step per site (a guess from the kind of move:
    only the order of the tasks depends on it)."""
    spec = REGISTRY[name]
    per_step = n_sites / 17500 if spec.move == "sweep" else 1 / 3500
    learn = 1 / 100 if spec.learnable else per_step
    mix = 1 / 1700 if spec.learnable else per_step
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
            # stop the running tasks too, not only the queued ones (waiting at most 5 s each)
            pool.shutdown(wait=False, cancel_futures=True)
            children = mp.active_children()
            for child in children:
                child.terminate()
            for child in children:
                child.join(timeout=5)
            raise
        pool.shutdown(wait=True)
        _drain(progress_queue, progress)
    progress.close()
    return time.perf_counter() - started


def _sample_seed(
    problem_spec: dict,
    names: list,
    burn_in: int,
    steps: int,
    seed: int,
    device,
    thin: int,
    workers: int,
    out: Path | None,
    learning: dict | None,
    backend: str,
    quiet: bool,
    source_label: str,
    csv_thin: int,
    protocol: Protocol,
) -> tuple[dict, float]:
    """Run every sampler on the problem of ``seed``; returns (runs by name, sampling wall s).

    With ``out``, each task writes its rows of traces.csv to ``out/.traces.<name>.part``.
    """
    spec = {**problem_spec, "seed": seed}
    meta = {"source": source_label, "protocol": protocol.name}
    tasks = [
        {
            "name": name,
            "problem": spec,
            "burn_in": burn_in,
            "burnin_steps": protocol.steps_per_burnin_iteration(name),
            "ess_from_step": protocol.ess_from_step,
            "max_lag": protocol.max_lag,
            "steps": steps,
            "thin": thin,
            "seed": seed,
            "device": str(device),
            "backend": backend,
            "learning": dict(learning or {}),
            "meta": meta,
            "csv_part": str(out / f".traces.{name}.part") if out is not None else None,
            "csv_thin": csv_thin,
        }
        for name in names
    ]
    n_sites = build_problem(spec).target.n_sites
    tasks.sort(key=lambda t: -_cost(t["name"], burn_in, steps, n_sites))  # longest first
    progress = _Progress(names, burn_in, steps, enabled=not quiet)
    runs: dict[str, SamplerRun] = {}
    try:
        sampling_wall = _run_all(tasks, workers, progress, runs)
    except BaseException:
        for task in tasks:
            if task["csv_part"]:
                Path(task["csv_part"]).unlink(missing_ok=True)
        raise
    for run in runs.values():
        for message in run.messages:
            log_message(f"warning: {message} (seed {seed})", quiet)
    return {name: runs[name] for name in names}, sampling_wall


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
    backend: str = "auto",
    quiet: bool = False,
    source_label: str = "",
    csv_thin: int = 1,
    protocol: Protocol | None = None,
    seeds: int = 1,
) -> dict:
    """Run every sampler, write DIR's files and return the results document (with timings).

    ``csv_thin`` keeps every ``csv_thin``-th mixing record in ``traces.csv`` (all burn-in
    records and the last one are always written); the ESS always uses every record.
    ``protocol`` (default: the spec protocol with this ``burn_in``) sets the ESS window and the
    steps per burn-in iteration. ``seeds`` runs seeds ``seed .. seed + seeds - 1`` (problem and
    samplers); traces.csv, the learned files and the report's traces come from the first seed,
    results.json aggregates every seed (``lsbcore.studies.experiment.seeds``).
    """
    if protocol is None:
        protocol = Protocol("spec", burn_in, burn_in, PAPER_MAX_LAG, {}, "--burn-in")
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"seeds must be a positive integer, got {seeds!r}.")
    t_total = time.perf_counter()
    cpu_main, cpu_children = time.process_time(), _children_cpu()
    out = Path(out)
    names = list(names)
    problem = build_problem(problem_spec)
    common = dict(
        problem_spec=problem_spec, names=names, burn_in=burn_in, steps=steps, device=device,
        thin=thin, workers=workers, learning=learning, backend=backend, quiet=quiet,
        source_label=source_label, csv_thin=csv_thin, protocol=protocol,
    )  # fmt: skip

    t_sampling = time.perf_counter()
    ordered, sampling_wall = _sample_seed(seed=seed, out=out, **common)
    parts = {name: out / f".traces.{name}.part" for name in names}
    cpu_workers = _children_cpu() - cpu_children

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
        run = ordered[name]
        if run.balancing_json is not None:
            (out / f"learned_{name}.json").write_text(run.balancing_json, encoding="utf-8")

    t_results = time.perf_counter()
    one_posterior = problem.target.batch == 1  # the paper cases give every chain its own alpha
    results = _seed_results(ordered, problem.truth, device, config, protocol, one_posterior)
    results_seconds = time.perf_counter() - t_results
    by_seed = [(seed, results, ordered)]
    for extra in range(seed + 1, seed + seeds):
        log_message(f"seed {extra} ({extra - seed + 1} of {seeds})", quiet)
        runs, wall = _sample_seed(seed=extra, out=None, **common)
        sampling_wall += wall
        truth = build_problem({**problem_spec, "seed": extra}).truth
        results_seed = _seed_results(runs, truth, device, config, protocol, one_posterior)
        by_seed.append((extra, results_seed, runs))
    cpu_workers = _children_cpu() - cpu_children
    if seeds > 1:
        results = aggregate_seeds(by_seed)

    per_sampler = {}
    for n, r in ordered.items():
        recording = (r.burnin_wall - r.burnin_seconds) + (r.mixing_wall - r.mixing_seconds)
        burnin_steps = burn_in * r.burnin_steps
        per_sampler[n] = {
            "burnin_seconds": r.burnin_seconds,
            "mixing_seconds": r.mixing_seconds,
            "recording_seconds": recording,
            "csv_seconds": r.csv_seconds,
            "burnin_wall_seconds": r.burnin_wall,
            "mixing_wall_seconds": r.mixing_wall,
            "burnin_cpu_seconds": r.burnin_cpu,
            "mixing_cpu_seconds": r.mixing_cpu,
            "burnin_steps_per_second": burnin_steps / r.burnin_seconds
            if r.burnin_seconds
            else None,
            "mixing_steps_per_second": steps / r.mixing_seconds if r.mixing_seconds else None,
        }
    timings = {
        "workers": workers,
        "setup_seconds": t_sampling - t_total,
        "sampling_wall_seconds": sampling_wall,
        "per_sampler_from_seed": seed,
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


def _seed_results(
    runs: dict, truth, device, config: dict, protocol: Protocol, one_posterior: bool
) -> dict:
    """The results document of one seed's runs, its ESS on the protocol's series."""
    view = _RunView(runs, truth, resolve_device(device), one_posterior)
    series = {
        n: ess_series(r.trace, protocol.burn_in, protocol.ess_from_step, r.burnin_steps)
        for n, r in runs.items()
    }
    results = comparison_results(
        view,
        config,
        {n: r.burnin_seconds for n, r in runs.items()},
        {n: r.mixing_seconds for n, r in runs.items()},
        protocol.max_lag,
        summaries={n: r.summary for n, r in runs.items() if r.summary is not None},
        series=series,
    )
    return results


def _drain(progress_queue, progress: _Progress) -> None:
    while True:
        try:
            name, phase, done, total = progress_queue.get_nowait()
        except queue_module.Empty:
            return
        if name not in progress.finished:
            progress.update(name, phase, done, total)
