"""Statistics of spin states and a bounded per-run trace recorder.

States are torch tensors ``x`` of shape ``[B, H, W]`` (B chains) with values in ``{-1, +1}``
(any dtype). Computation stays in torch (on the state's device); stored history is numpy.

* ``magnetisation(x)`` -> ``[B]``: ``m(x) = sum_i x_i``, the scalar summary used for ESS.
* ``accuracy(x, truth)`` -> ``[B]``: fraction of sites where ``x`` equals the ground truth.
* ``MarginalEstimate``: running mean of ``(x + 1) / 2`` (or, given the flip log-ratios, of
  ``P(x_i = +1 | x_-i)``) per chain and site, i.e. the Monte Carlo estimate of the posterior
  marginal ``P(x_i = +1)``; feed it only post-burn-in states.
* ``Trace``: thinned history of per-chain magnetisation, ``log p~(x)`` and accuracy plus
  per-record scalars (step, target evaluations, running acceptance rate, sampling wall time,
  phase), exported as numpy arrays or as a long-format CSV.

Memory of ``Trace`` (see ``Trace.estimate_nbytes``)
--------------------------------------------------
Per stored record: three float32 values per chain (magnetisation, log p~, accuracy;
``3 * 4 * B`` bytes) plus the scalars step (int64), target_evals (int64), accept_rate
(float64), wall_s (float64) and phase (int8): 33 bytes. For the largest configuration,
30 000 records (thin = 1) x 30 chains: ``30 000 * (360 + 33) = 11.8 MB`` per sampler, or
``70.7 MB`` for 6 samplers. Storage is a list of fixed-size chunks (``chunk_size`` records
each, default 1024), so the allocation exceeds the stored data by less than one chunk
(about 0.4 MB at 30 chains) and nothing is copied while recording. float32 is exact for the
magnetisation (integers up to 2**24) and keeps ~7 significant digits of ``log p~``
(an absolute error of ~0.004 at ``|log p~| = 1e5``): enough for trace plots and ESS.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from typing import TextIO

import numpy as np
import torch

from lsbcore.diagnostics.rao_blackwell import conditional_probability
from lsbcore.diagnostics.settled import BlockSums, Settledness

__all__ = [
    "CSV_COLUMNS",
    "PHASES",
    "MarginalEstimate",
    "Trace",
    "accuracy",
    "magnetisation",
    "write_traces_csv",
]

#: Phase labels; ``Trace.arrays()["phase"]`` stores their index (0 = burn-in, 1 = mixing).
PHASES = ("burnin", "mixing")
#: Column order of the long-format CSV written by ``Trace.write_csv``.
CSV_COLUMNS = (
    "sampler",
    "step",
    "target_evals",
    "phase",
    "chain",
    "magnetisation",
    "log_p",
    "accuracy",
    "accept_rate",
    "wall_s",
)


def _check_states(x: torch.Tensor, name: str = "x") -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(x).__name__}")
    if x.ndim != 3:
        raise ValueError(f"{name} must have shape [B, H, W]; got shape {tuple(x.shape)}")


def _check_spins(t: torch.Tensor, name: str) -> None:
    if not bool(((t == 1) | (t == -1)).all()):
        raise ValueError(f"{name} must contain only -1 and +1")


def magnetisation(x: torch.Tensor) -> torch.Tensor:
    """``m(x) = sum_i x_i`` per chain: ``[B, H, W]`` -> float64 ``[B]`` (same device)."""
    _check_states(x)
    return x.sum(dim=(-2, -1), dtype=torch.float64)


def accuracy(x: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """Fraction of sites where ``x`` equals ``truth``, per chain: float64 ``[B]``.

    ``truth`` is ``[H, W]`` (shared) or ``[B, H, W]``, values in ``{-1, +1}`` (checked).
    Values of ``x`` are not checked (this runs every recorded step).
    """
    _check_states(x)
    if not isinstance(truth, torch.Tensor):
        raise TypeError(f"truth must be a torch.Tensor; got {type(truth).__name__}")
    if truth.ndim == 2:
        truth = truth.unsqueeze(0)
    if truth.ndim != 3 or truth.shape[-2:] != x.shape[-2:] or truth.shape[0] not in (1, x.shape[0]):
        raise ValueError(
            f"truth must have shape [H, W] or [B, H, W] matching x {tuple(x.shape)}; "
            f"got {tuple(truth.shape)}"
        )
    _check_spins(truth, "truth")
    return _accuracy(x, truth)


def _accuracy(x: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    equal = x == truth.to(device=x.device)
    return equal.sum(dim=(-2, -1), dtype=torch.float64) / float(x.shape[-2] * x.shape[-1])


class MarginalEstimate:
    """Running estimate of the posterior marginal ``P(x_i = +1)`` per chain and site.

    ``update(x)`` adds ``(x + 1) / 2`` to a float64 accumulator ``[B, H, W]`` (kept on the
    device of the first ``x``; on CPU for MPS, which lacks float64) and increments ``count``.
    Call it only for post-burn-in states: the estimate is the plain mean of what it is given.
    Results are numpy float64; asking before any update raises ``RuntimeError``.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything (the next ``update`` may use a new shape or device)."""
        self._sum: torch.Tensor | None = None
        self.count = 0
        self.blocks = BlockSums()  # the same draws in blocks, for the settled indicator

    @property
    def shape(self) -> tuple[int, int, int] | None:
        """``(B, H, W)`` once updated, else ``None``."""
        return None if self._sum is None else tuple(self._sum.shape)

    def update(self, x: torch.Tensor, log_ratios: torch.Tensor | None = None) -> None:
        """Accumulate one batch of states ``x`` ``[B, H, W]`` with values in ``{-1, +1}``.

        With ``log_ratios`` (the flip log-ratios ``s`` of ``x``) each site adds its conditional
        probability ``P(x_i = +1 | x_-i)`` instead of its spin: the Rao-Blackwellised estimate
        (``diagnostics.rao_blackwell``), the same marginal with a smaller Monte Carlo error."""
        _check_states(x)
        if self._sum is None:
            device = torch.device("cpu") if x.device.type == "mps" else x.device
            self._sum = torch.zeros(x.shape, dtype=torch.float64, device=device)
        elif tuple(x.shape) != tuple(self._sum.shape):
            raise ValueError(
                f"x has shape {tuple(x.shape)} but the estimate was started with "
                f"{tuple(self._sum.shape)}; call reset() to change it"
            )
        if log_ratios is None:
            states = (x.to(device=self._sum.device, dtype=torch.float64) + 1.0) * 0.5
        else:
            states = conditional_probability(x, log_ratios).to(self._sum.device)
        self._sum += states
        self.count += 1
        self.blocks.add(states, 1)

    def add(self, total: torch.Tensor, count: int) -> None:
        """Accumulate ``count`` draws given by their sum ``total`` ``[B, H, W]`` (of
        ``(x + 1) / 2``, or of conditional probabilities): the same as ``count`` calls of
        ``update``."""
        if self._sum is None:
            device = torch.device("cpu") if total.device.type == "mps" else total.device
            self._sum = torch.zeros(total.shape, dtype=torch.float64, device=device)
        elif tuple(total.shape) != tuple(self._sum.shape):
            raise ValueError(
                f"total has shape {tuple(total.shape)} but the estimate was started with "
                f"{tuple(self._sum.shape)}; call reset() to change it"
            )
        self._sum += total.to(device=self._sum.device, dtype=torch.float64)
        self.count += int(count)
        self.blocks.add(total, int(count))

    def _require(self) -> torch.Tensor:
        if self._sum is None or self.count == 0:
            raise RuntimeError("MarginalEstimate has no states yet; call update(x) first")
        return self._sum

    def per_chain(self) -> np.ndarray:
        """Per-chain estimate ``[B, H, W]`` (each chain's own running mean)."""
        return (self._require() / self.count).cpu().numpy()

    def mean(self) -> np.ndarray:
        """Estimate pooled over all chains ``[H, W]``."""
        acc = self._require()
        return (acc.sum(dim=0) / (self.count * acc.shape[0])).cpu().numpy()

    def settledness(self) -> Settledness | None:
        """Whether the marginal over the latter half of the draws has settled
        (``diagnostics.settled``); None until enough blocks of draws exist."""
        return self.blocks.settledness()

    def std(self) -> np.ndarray:
        """Per-site Bernoulli standard deviation ``sqrt(p (1 - p))`` of the pooled mean ``[H, W]``.

        This is the spread of the spin at a site under the (estimated) posterior, not the
        Monte Carlo error of ``p``.
        """
        p = self.mean()
        return np.sqrt(np.clip(p * (1.0 - p), 0.0, None))

    def entropy(self) -> np.ndarray:
        """Per-site binary entropy of the pooled mean, in bits (0 = certain, 1 = p = 1/2)."""
        p = self.mean()
        q = 1.0 - p
        # 0 * log 0 = 0; the where() arguments avoid log(0) warnings.
        h = -(p * np.log2(np.where(p > 0, p, 1.0)) + q * np.log2(np.where(q > 0, q, 1.0)))
        return np.clip(h, 0.0, 1.0)


class _Chunk:
    """``size`` preallocated records of every stored field."""

    __slots__ = ("accept_rate", "chains", "phase", "step", "target_evals", "wall_s")

    def __init__(self, size: int, n_chains: int, n_fields: int) -> None:
        for name, dtype in _SCALAR_DTYPES.items():
            setattr(self, name, np.zeros(size, dtype=dtype))
        self.chains = np.zeros((size, n_fields, n_chains), dtype=np.float32)

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, name).nbytes for name in self.__slots__)


_SCALAR_DTYPES = {
    "step": np.int64,
    "target_evals": np.int64,
    "accept_rate": np.float64,
    "wall_s": np.float64,
    "phase": np.int8,
}
_SCALAR_BYTES = 8 + 8 + 8 + 8 + 1


_CSV_BATCH = 65536  # rows formatted per write() call


class Trace:
    """Thinned, bounded history of one sampler run with ``n_chains`` chains.

    Usage::

        trace = Trace(n_chains=30, thin=1, truth=truth)        # truth: [H, W] or None
        for step in range(n_steps):
            ...                                                # one sampler step
            trace.record(step, x, log_p, target_evals, accept_rate, wall_s,
                         "burnin" if step < n_burnin else "mixing")
        trace.record(last_step, ..., force=True)              # keep the final state

    ``record`` stores a record when ``step % thin == 0`` or ``force=True``; steps must not
    decrease, a repeat of the last stored step is ignored, and the phase can only go from
    ``"burnin"`` to ``"mixing"`` (so the mixing records form one contiguous block, as the ESS
    code needs). Per chain it stores ``magnetisation(x)``, ``log_p`` and, when ``truth`` is
    given, ``accuracy(x, truth)`` as float32; the scalars are the step index, cumulative
    target evaluations, running acceptance rate, cumulative sampling wall time in seconds
    (measured by the caller, excluding recording) and the phase. See the module docstring for
    the memory arithmetic.

    Thinning also thins the ESS input: the paper ESS of ``mixing_series()`` counts lags in
    *recorded* draws, so use ``thin=1`` to reproduce the paper's numbers.
    """

    def __init__(
        self,
        n_chains: int,
        thin: int = 1,
        truth: torch.Tensor | None = None,
        chunk_size: int = 1024,
    ) -> None:
        for name, value in (("n_chains", n_chains), ("thin", thin), ("chunk_size", chunk_size)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ValueError(f"{name} must be a positive int; got {value!r}")
        self.n_chains = int(n_chains)
        self.thin = int(thin)
        self.chunk_size = int(chunk_size)
        if truth is not None:
            if not isinstance(truth, torch.Tensor):
                raise TypeError(f"truth must be a torch.Tensor; got {type(truth).__name__}")
            if truth.ndim == 3 and truth.shape[0] == 1:
                truth = truth[0]
            if truth.ndim != 2:
                raise ValueError(f"truth must have shape [H, W]; got {tuple(truth.shape)}")
            _check_spins(truth, "truth")
            truth = truth.detach().clone()
        self.truth = truth
        self._fields = ("magnetisation", "log_p") + (("accuracy",) if truth is not None else ())
        self.reset()

    # ------------------------------------------------------------------ recording
    def reset(self) -> None:
        """Drop all records (keeps ``n_chains``, ``thin`` and ``truth``)."""
        self._chunks: list[_Chunk] = []
        self._n = 0
        self._last_step: int | None = None
        self._last_phase = 0

    def __len__(self) -> int:
        return self._n

    @property
    def fields(self) -> tuple[str, ...]:
        """Per-chain fields stored: magnetisation, log_p and (with truth) accuracy."""
        return self._fields

    def record(
        self,
        step: int,
        x: torch.Tensor,
        log_p: torch.Tensor,
        target_evals: int,
        accept_rate: float,
        wall_s: float,
        phase: str,
        force: bool = False,
    ) -> bool:
        """Store one record if ``step % thin == 0`` or ``force``; return whether it stored.

        ``x`` ``[B, H, W]`` and ``log_p`` ``[B]`` are tensors on any device; ``accept_rate``
        may be a float or a 0-d tensor. Arguments are validated only when a record is stored.
        """
        step = int(step)
        if not force and step % self.thin != 0:
            return False
        if self._last_step is not None:
            if step < self._last_step:
                raise ValueError(
                    f"step {step} is before the last recorded step {self._last_step}; "
                    "steps must not decrease (call reset() to start over)"
                )
            if step == self._last_step:
                return False
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}; got {phase!r}")
        phase_id = PHASES.index(phase)
        if phase_id < self._last_phase:
            raise ValueError("phase cannot go back from 'mixing' to 'burnin'")
        _check_states(x)
        if x.shape[0] != self.n_chains:
            raise ValueError(f"x has {x.shape[0]} chains; the trace was made for {self.n_chains}")
        if not isinstance(log_p, torch.Tensor) or tuple(log_p.shape) != (self.n_chains,):
            shape = tuple(log_p.shape) if isinstance(log_p, torch.Tensor) else type(log_p)
            raise ValueError(f"log_p must be a tensor of shape [{self.n_chains}]; got {shape}")

        if self.truth is not None and tuple(self.truth.shape) != tuple(x.shape[-2:]):
            raise ValueError(
                f"x has image shape {tuple(x.shape[-2:])} but truth has {tuple(self.truth.shape)}"
            )
        per_chain = [magnetisation(x), log_p.detach().to(device=x.device, dtype=torch.float64)]
        if self.truth is not None:
            if self.truth.device != x.device:
                self.truth = self.truth.to(x.device)  # move once, not every record
            per_chain.append(_accuracy(x, self.truth))
        values = torch.stack(per_chain).to(device="cpu", dtype=torch.float32).numpy()

        chunk_idx, row = divmod(self._n, self.chunk_size)
        if chunk_idx == len(self._chunks):
            self._chunks.append(_Chunk(self.chunk_size, self.n_chains, len(self._fields)))
        chunk = self._chunks[chunk_idx]
        chunk.chains[row] = values
        chunk.step[row] = step
        chunk.target_evals[row] = int(target_evals)
        chunk.accept_rate[row] = float(accept_rate)
        chunk.wall_s[row] = float(wall_s)
        chunk.phase[row] = phase_id
        self._n += 1
        self._last_step = step
        self._last_phase = phase_id
        return True

    def _records(self, step, values, phase, checked: bool = True):
        """``extend``'s arguments as arrays, checked (``_check_records``) or only converted;
        None when empty."""
        if checked:
            return self._check_records(step, values, phase)
        step = np.asarray(step, dtype=np.int64).reshape(-1)
        if step.size == 0:
            return None
        values = np.asarray(values, dtype=np.float32)
        return step, values, np.asarray(phase, dtype=np.int8).reshape(-1)

    def _check_records(self, step, values, phase):
        """``extend``'s arguments as arrays, after the rules of ``record``; None when empty."""
        step = np.asarray(step, dtype=np.int64).reshape(-1)
        k = step.size
        if k == 0:
            return None
        values = np.asarray(values, dtype=np.float32)
        if values.shape != (k, len(self._fields), self.n_chains):
            raise ValueError(
                f"values must have shape {(k, len(self._fields), self.n_chains)}, "
                f"got {values.shape}."
            )
        phase = np.asarray(phase, dtype=np.int8).reshape(-1)
        if np.any(np.diff(step) <= 0) or (
            self._last_step is not None and step[0] <= self._last_step
        ):
            raise ValueError("recorded steps must increase.")
        if np.any((phase < 0) | (phase >= len(PHASES))):
            raise ValueError(f"phase must index {PHASES}.")
        if np.any(np.diff(phase) < 0) or phase[0] < self._last_phase:
            raise ValueError("phase cannot go back from 'mixing' to 'burnin'")
        return step, values, phase

    def extend(
        self, step, values, target_evals, accept_rate, wall_s, phase, checked: bool = True
    ) -> None:
        """Append ``k`` records at once: ``values [k, len(fields), n_chains]`` (the stored
        fields, in order) and ``[k]`` scalars; ``phase`` holds indices into ``PHASES``. The
        rules of ``record`` apply (steps increase, the phase never goes back); ``checked=False``
        skips checking them, for a caller that builds its records by those rules
        (``Comparison``: a short call costs its checks' small numpy operations otherwise)."""
        records = self._records(step, values, phase, checked)
        if records is None:
            return
        step, values, phase = records
        k = step.size
        columns = {
            "step": step,
            "target_evals": np.asarray(target_evals).reshape(-1),
            "accept_rate": np.asarray(accept_rate).reshape(-1),
            "wall_s": np.asarray(wall_s).reshape(-1),
            "phase": phase,
        }
        done = 0
        while done < k:
            chunk_idx, row = divmod(self._n, self.chunk_size)
            if chunk_idx == len(self._chunks):
                self._chunks.append(_Chunk(self.chunk_size, self.n_chains, len(self._fields)))
            chunk = self._chunks[chunk_idx]
            take = min(k - done, self.chunk_size - row)
            chunk.chains[row : row + take] = values[done : done + take]
            for name, column in columns.items():
                getattr(chunk, name)[row : row + take] = column[done : done + take]
            done += take
            self._n += take
        self._last_step = int(step[-1])
        self._last_phase = int(phase[-1])

    # ------------------------------------------------------------------ memory
    @property
    def nbytes(self) -> int:
        """Bytes currently allocated for records (including the unused end of the last chunk)."""
        return sum(chunk.nbytes for chunk in self._chunks)

    @staticmethod
    def estimate_nbytes(
        n_records: int, n_chains: int, with_truth: bool = True, chunk_size: int = 1024
    ) -> int:
        """Bytes ``Trace`` allocates for ``n_records`` records (whole chunks)."""
        n_fields = 3 if with_truth else 2
        n_alloc = math.ceil(n_records / chunk_size) * chunk_size
        return n_alloc * (_SCALAR_BYTES + 4 * n_fields * n_chains)

    # ------------------------------------------------------------------ export
    def arrays(self) -> dict[str, np.ndarray]:
        """Copies of the stored records.

        Keys: ``"step"``, ``"target_evals"`` (int64 ``[T]``), ``"accept_rate"``, ``"wall_s"``
        (float64 ``[T]``), ``"phase"`` (int8 ``[T]``, index into ``PHASES``: 0 burn-in,
        1 mixing), ``"magnetisation"``, ``"log_p"`` and, with truth, ``"accuracy"`` (float32
        ``[T, B]``). ``T = len(self)``.
        """
        n_full, tail = divmod(self._n, self.chunk_size)
        parts = [(c, self.chunk_size) for c in self._chunks[:n_full]]
        if tail:
            parts.append((self._chunks[n_full], tail))
        out: dict[str, np.ndarray] = {}
        for name, dtype in _SCALAR_DTYPES.items():
            out[name] = (
                np.concatenate([getattr(c, name)[:k] for c, k in parts])
                if parts
                else np.zeros(0, dtype=dtype)
            )
        chains = (
            np.concatenate([c.chains[:k] for c, k in parts])
            if parts
            else np.zeros((0, len(self._fields), self.n_chains), dtype=np.float32)
        )
        for i, name in enumerate(self._fields):
            out[name] = np.ascontiguousarray(chains[:, i, :])
        return out

    def mixing_series(self, field: str = "magnetisation") -> np.ndarray:
        """Mixing-phase history of a per-chain field as float64 ``[B, T_mix]`` (ESS input)."""
        if field not in self._fields:
            raise ValueError(f"field must be one of {self._fields}; got {field!r}")
        arrs = self.arrays()
        mask = arrs["phase"] == PHASES.index("mixing")
        return arrs[field][mask].T.astype(np.float64)

    def mixing_summary(self, max_lag: int = 500, threshold: float = 0.05):
        """``lsbcore.diagnostics.mixing.summarise_mixing`` of the mixing-phase magnetisation."""
        from lsbcore.diagnostics.mixing import summarise_mixing

        return summarise_mixing(self.mixing_series(), max_lag=max_lag, threshold=threshold)

    def write_csv(self, f: TextIO, sampler: str, header: bool = True) -> int:
        """Write the records in long format (one row per record and chain) to text file ``f``.

        Columns ``CSV_COLUMNS``; rows ordered by step, then chain; ``phase`` as
        ``"burnin"``/``"mixing"``; ``accuracy`` empty without truth. Returns the number of
        data rows (``len(self) * n_chains``). Long format lets several samplers share a file
        (see ``write_traces_csv``).
        """
        if header:
            csv.writer(f, lineterminator="\n").writerow(CSV_COLUMNS)
        arrs = self.arrays()
        n_rec, n_chains = len(self), self.n_chains
        if n_rec == 0:
            return 0
        # The sampler name is a literal of the %-format string: CSV-quote it, escape '%'.
        buf = io.StringIO()
        csv.writer(buf, lineterminator="").writerow([str(sampler)])
        name = buf.getvalue().replace("%", "%%")
        acc_fmt = "%.9g" if "accuracy" in arrs else ""  # empty field without truth
        fmts = [f"{name},%d,%d,{label},%d,%.9g,%.9g,{acc_fmt},%.9g,%.9g\n" for label in PHASES]
        chain_ids = np.arange(n_chains, dtype=np.float64)
        per_batch = max(1, _CSV_BATCH // n_chains)  # records per write(): bounded temporaries
        for r0 in range(0, n_rec, per_batch):
            sl = slice(r0, min(r0 + per_batch, n_rec))
            k = sl.stop - sl.start
            cols = [
                np.repeat(arrs["step"][sl], n_chains),
                np.repeat(arrs["target_evals"][sl], n_chains),
                np.tile(chain_ids, k),
                arrs["magnetisation"][sl].reshape(-1),
                arrs["log_p"][sl].reshape(-1),
            ]
            if acc_fmt:
                cols.append(arrs["accuracy"][sl].reshape(-1))
            cols += [
                np.repeat(arrs["accept_rate"][sl], n_chains),
                np.repeat(arrs["wall_s"][sl], n_chains),
            ]
            rows = np.column_stack([c.astype(np.float64) for c in cols]).tolist()
            phases = np.repeat(arrs["phase"][sl], n_chains).tolist()
            f.write("".join(fmts[ph] % tuple(row) for ph, row in zip(phases, rows, strict=True)))
        return n_rec * n_chains


def write_traces_csv(f: TextIO, traces: Mapping[str, Trace]) -> int:
    """Write several samplers' traces (``{sampler_name: trace}``) to one long-format CSV.

    One header line, then each trace's rows (``Trace.write_csv``). Returns the row count.
    """
    rows = 0
    csv.writer(f, lineterminator="\n").writerow(CSV_COLUMNS)
    for name, trace in traces.items():
        rows += trace.write_csv(f, name, header=False)
    return rows
