"""What both sampler bases share: ``B`` chains on a target, their counters, checks and last step.

``ChainBase`` is the common base of ``samplers.base.Sampler`` (the pairwise fast path: cached
flip log-ratios, compiled and device kernels) and ``samplers.batched.BatchedSampler`` (any
target, batched torch). It holds what the two did alike: the checks of ``n_chains``, ``seed``,
``resync_every``, the target's batch, a start state, a ``step`` call and a statistics truth; the
counters (``n_steps``, ``n_site_updates``, ``n_target_evals``, ``wall_seconds``) and what is read
from them (``sweeps``, ``steps_to_resync``, ``n_accepted``, ``accept_rate``), advanced by one
``_count_step``; the uniforms a step draws; and ``StepInfo``, what the last step proposed.

The bases keep what differs: how states and caches are stored (the fast path pads its per-site
arrays with spare columns and keeps its statistics incrementally), ``resync``, the step loops,
and ``_n_accepted`` (``[B, 1]`` on the fast path, whose kernels add to it in place; ``[B]``
batched).
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import torch

from lsbcore.checks import integer
from lsbcore.numerics import BELOW_ONE

__all__ = ["ChainBase", "StepInfo", "default_resync_every"]

#: ``resync_every``'s default: at least this many steps between exact recomputes of the cached
#: flip log-ratios ...
RESYNC_STEPS = 2000
#: ... and about this many updates of every site between them on a large target: an
#: incremental update's rounding drift grows with the updates a site's ratio took, not with the
#: steps, while a resync costs the whole target (on a 256 x 256 photo, resyncing every 2,000
#: single-site steps took seven times the steps themselves: BENCHMARKS.md)
RESYNC_SWEEPS = 2


def default_resync_every(n_sites: int, sites_per_step: float) -> int:
    """Steps between resyncs when none is asked: ``RESYNC_SWEEPS`` sweeps' worth of site
    updates, at least ``RESYNC_STEPS`` (2,000 on the paper's 30 x 30 lattices, the RBMs and
    any sampler whose step is a sweep)."""
    return max(RESYNC_STEPS, math.ceil(RESYNC_SWEEPS * n_sites / max(sites_per_step, 1)))


class StepInfo(NamedTuple):
    """What the last step proposed, per chain (each tensor's leading axis is the chain, ``B``).

    A ``NamedTuple``, built by keyword: immutable and typed, and cheap to build (a few hundred
    nanoseconds, beside a batched step's tens of microseconds of torch work; the pairwise fast
    path builds it only when read, from the references its step kept).

    Attributes:
        accepted: whether the chain's proposal was taken (bool ``[B]``).
        accept_prob: its acceptance probability ``[B]`` (None where a sampler does not say).
        site: the proposed site (flat index ``row * W + col``) of a single-site step ``[B]``.
        sites: the sites of a block step ``[B, k]``.
        extra: what a sampler says beyond these (DMALA's ``flips``, PAS's path, the learned
            block proposals' ``tiles``), by name; None for nothing more.
    """

    accepted: torch.Tensor
    accept_prob: torch.Tensor | None = None
    site: torch.Tensor | None = None
    sites: torch.Tensor | None = None
    extra: dict[str, torch.Tensor] | None = None

    def as_dict(self) -> dict[str, torch.Tensor]:
        """The record as ``last_proposal`` gives it: the fields that are set, by name."""
        named = {"site": self.site, "sites": self.sites, "accept_prob": self.accept_prob}
        out = {key: value for key, value in named.items() if value is not None}
        out["accepted"] = self.accepted
        if self.extra:
            out.update(self.extra)
        return out


class ChainBase:
    """``B`` chains advanced together on a target: checks, counters and the last step.

    A subclass's ``__init__`` calls ``_init_chains`` first, then builds its state and caches,
    sets ``_n_accepted`` and resyncs; its step loops count steps with ``_count_step`` and end
    with ``_finish_step``.

    Attributes:
        n_steps: steps taken (each advances all chains once).
        n_site_updates: sites updated per chain so far, proposed moves included
            (``sites_per_step`` per step); ``sweeps`` is this over the number of sites.
        n_target_evals: target evaluations per chain (``evals_per_step`` per step, plus what a
            resync or a learning step evaluates; the rule of ``docs/method.md``).
        wall_seconds: time spent in ``step``.
    """

    name = "sampler"
    learnable = False
    sites_per_step = 1  # sites a step updates per chain (a proposed single flip counts 1)
    #: how refusals name the target's parameter sets, plural and singular
    batch_names = ("parameter sets", "set")
    #: whether a start state may come flat, ``[B, n]``, whatever the target's shape
    flat_starts = True

    def _init_chains(self, target, n_chains: int, seed: int, resync_every: int | None) -> None:
        """Check and keep the chain count, seed and resync period (None: the target's size sets
        it, ``default_resync_every``); zero the counters."""
        self.n_chains = integer(n_chains, "n_chains", 1, 100_000)
        if target.batch not in (1, self.n_chains):
            plural, single = self.batch_names
            raise ValueError(
                f"the target holds {target.batch} {plural} but n_chains is {n_chains}; "
                f"give one {single} or one per chain."
            )
        self.seed = integer(seed, "seed", 0, 2**63 - 1)  # torch.Generator's range
        self._resync_asked = (
            None if resync_every is None else integer(resync_every, "resync_every", 1, 10**9)
        )
        self.target = target
        self.n_sites = target.n_sites
        self.n_steps = 0
        self.n_site_updates = 0
        self.n_target_evals = 0
        self.wall_seconds = 0.0
        self._since_resync = 0
        self._last: StepInfo | None = None  # what the last step proposed (see step_info)
        self._tracking = False

    # ----------------------------------------------------------------- checks
    def _check_start(self, x0) -> torch.Tensor:
        """``x0`` (``[B, *shape]``, ``[*shape]``, or ``[B, n]`` where ``flat_starts``) of +-1,
        as ``[B, n]`` float64."""
        x0 = torch.as_tensor(x0, dtype=torch.float64)
        shape = self.target.shape
        if tuple(x0.shape) == shape:
            x0 = x0.unsqueeze(0).expand(self.n_chains, *shape)
        flat = self.flat_starts and tuple(x0.shape) == (self.n_chains, self.n_sites)
        if not (flat or tuple(x0.shape) == (self.n_chains, *shape)):
            layout = ", ".join(str(v) for v in shape)
            raise ValueError(
                f"x0 must have shape [{self.n_chains}, {layout}] or [{layout}], "
                f"got {tuple(x0.shape)}."
            )
        if not bool(((x0 == 1) | (x0 == -1)).all()):
            raise ValueError("x0 must contain only +1 and -1.")
        return x0.reshape(self.n_chains, self.n_sites)

    def _learning_refusal(self) -> str:
        """The sentence that refuses ``step(learn=True)`` of a sampler that does not learn."""
        return f"the {self.name!r} sampler does not learn; call step(n) without learn=True."

    def _check_step(self, n, learn: bool, trace: torch.Tensor | None) -> int:
        """``step``'s arguments checked; returns ``n`` as an ``int``."""
        n = integer(n, "n", 0)
        if learn and not self.learnable:
            raise ValueError(self._learning_refusal())
        if trace is not None:
            if not self._tracking:
                raise ValueError("trace= needs track_statistics() first.")
            if tuple(trace.shape) != (n, self.n_chains, 5) or trace.dtype != torch.float64:
                raise ValueError(f"trace must be a float64 tensor of shape [{n}, B, 5].")
        return n

    @property
    def resync_every(self) -> int:
        """Steps between exact recomputes of the cached ratios: as asked, or
        ``default_resync_every`` of the target and the sampler's moves."""
        if self._resync_asked is not None:
            return self._resync_asked
        return default_resync_every(self.n_sites, self.sites_per_step)

    # ----------------------------------------------------------------- the step loop
    def _uniforms(self, *shape: int) -> torch.Tensor:
        """Uniforms in ``[0, 1)`` (below ``BELOW_ONE``) from the sampler's generator, on its
        device."""
        u = torch.rand(*shape, generator=self.generator, dtype=torch.float64, device=self.device)
        return u.mul_(BELOW_ONE)

    def _count_step(self, m: int = 1) -> None:
        """Count ``m`` steps taken; resync where one is due."""
        self.n_steps += m
        self.n_site_updates += m * self.sites_per_step
        self.n_target_evals += m * self.evals_per_step
        self._since_resync += m
        if self._since_resync >= self.resync_every:
            self.resync()

    def _finish_step(self, start: float) -> None:
        """End of ``step`` (begun at ``time.perf_counter()`` ``start``): wait for the device,
        count the time."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.wall_seconds += time.perf_counter() - start

    # ----------------------------------------------------------------- counters
    @property
    def n_accepted(self) -> int:
        """Sites that changed so far, summed over chains (accepted flips for one-site moves)."""
        return int(self._n_accepted.sum())

    @property
    def accept_rate(self) -> float:
        """Sites that changed over site updates, over all chains and steps so far (for a
        single-flip sampler: accepted over proposed flips)."""
        if self.n_site_updates == 0:
            return float("nan")
        return self.n_accepted / (self.n_site_updates * self.n_chains)

    @property
    def sweeps(self) -> float:
        """Site updates per site so far: one sweep updates every site once on average."""
        return self.n_site_updates / self.n_sites

    @property
    def steps_to_resync(self) -> int:
        """Steps until the next exact resync of the cached quantities."""
        return self.resync_every - self._since_resync

    # ----------------------------------------------------------------- statistics
    def _truth_width(self) -> int:
        """Entries of the truth vector: the sites (subclasses may pad)."""
        return self.n_sites

    def track_statistics(self, truth=None) -> None:
        """Keep ``statistics`` from now on.

        ``truth`` (``[*shape]`` of +-1, optional) gives the third column; without it it stays 0.
        """
        truth_values = torch.zeros(self._truth_width(), dtype=torch.float64, device=self.device)
        if truth is not None:
            truth = torch.as_tensor(truth, dtype=torch.float64).reshape(-1)
            if truth.numel() != self.n_sites:
                raise ValueError(f"truth must have {self.n_sites} sites, got {truth.numel()}.")
            truth_values[: self.n_sites] = truth.to(self.device)
        self._truth_values = truth_values
        self._tracking = True
        self._stats_resync()

    def _stats_resync(self) -> None:
        """Samplers that keep ``statistics`` incrementally recompute them here."""

    # ----------------------------------------------------------------- what subclasses define
    @property
    def evals_per_step(self) -> int:
        """Target evaluations per chain per step."""
        raise NotImplementedError

    def resync(self) -> None:
        """Recompute the cached quantities exactly from the states."""
        raise NotImplementedError

    # ----------------------------------------------------------------- the last step
    @property
    def step_info(self) -> StepInfo | None:
        """What the last step proposed per chain; None before any step and for a step that
        proposes nothing (a sweep, an empty block step)."""
        return self._last

    @property
    def last_proposal(self) -> dict[str, torch.Tensor] | None:
        """``step_info`` by name: ``site`` (single-site samplers) or ``sites`` (block
        samplers), ``accept_prob``, ``accepted`` and a sampler's extras; None when it is."""
        info = self.step_info
        return None if info is None else info.as_dict()
