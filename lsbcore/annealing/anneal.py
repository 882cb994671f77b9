"""Simulated annealing with any registered sampler: ``anneal(target, sampler, schedule)``.

At every stage of the schedule the sampler is moved to ``target.tempered(beta)`` (``p~^beta``,
same graph; ``set_target`` keeps the chains where they are) and takes ``steps_per_stage`` steps
there. As ``beta`` grows the tempered target concentrates on the maximiser of ``log p~``, so the
chains end near the MAP (Kirkpatrick, Gelatt and Vecchi 1983; Geman and Geman 1984).

What is recorded, at the start and after every ``record_every`` steps (and at the end of every
stage), for every chain: the energy ``E(x) = -log p~(x)`` under the *untempered* target (so
stages compare), and the lowest energy recorded so far with its state. The best state is the
best of the recorded ones (a state visited between two records and left again is not kept:
record every step, ``record_every=1``, to keep them all).

Learned samplers (``lsb1``, ``lsb2``) anneal with their balancing function frozen by default
(``learn=False``): Algorithm 1 learns the g that mixes best on *one* stationary target, while
annealing changes the target at every stage and ends where every log-ratio is ``beta_max`` times
larger than the function ever saw; what it learned at one temperature would be stale at the
next, and its restarts would throw chains away. Pass a function learned on the posterior
itself (``balancing=``, e.g. from a run) to anneal with it; ``learn=True`` lets it learn on
every stage anyway, for comparison.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from lsbcore.annealing.polish import greedy_polish
from lsbcore.annealing.schedule import Schedule
from lsbcore.balancing.functions import Balancing
from lsbcore.checks import integer
from lsbcore.samplers.registry import REGISTRY, make_sampler
from lsbcore.targets.pairwise_target import PairwiseTarget

RECORDS = 400  # default: about this many records over a run


@dataclass(frozen=True)
class AnnealingResult:
    """One annealing run of ``n_chains`` chains. Energies are ``-log p~`` of the untempered
    target; arrays of records are ``[R]`` or ``[R, B]`` (record 0 is the start)."""

    sampler: str
    schedule: Schedule
    steps: np.ndarray  # [R] steps taken (a checkerboard step is a sweep)
    sweeps: np.ndarray  # [R] site updates per site
    beta: np.ndarray  # [R] the stage's inverse temperature (beta_0 for the start)
    seconds: np.ndarray  # [R] wall seconds since the start
    energy: np.ndarray  # [R, B] current energy per chain
    best_energy: np.ndarray  # [R, B] lowest energy recorded so far per chain
    state: torch.Tensor  # [B, *shape] the final states (after the polish, when asked)
    best_state: torch.Tensor  # [B, *shape] the lowest-energy state recorded per chain
    wall_seconds: float  # the whole run, polish included
    learned: bool = False  # whether a learnable sampler learned during the run
    polish_sweeps: int | None = None  # sweeps the greedy polish took; None: no polish
    notes: list[str] = field(default_factory=list)

    @property
    def final_energy(self) -> np.ndarray:
        """``[B]`` energy of the final states."""
        return self.energy[-1]

    @property
    def lowest_energy(self) -> np.ndarray:
        """``[B]`` lowest energy recorded per chain."""
        return self.best_energy[-1]

    @property
    def best_chain(self) -> int:
        """The chain with the lowest energy recorded."""
        return int(np.argmin(self.lowest_energy))


def energy(target: PairwiseTarget, x: torch.Tensor) -> np.ndarray:
    """``E(x) = -log p~(x)`` per chain, ``[B]`` float64 on the CPU."""
    return (-target.log_prob(x)).detach().cpu().numpy()


def _check_sampler(name, balancing, learn):
    if name not in REGISTRY:
        raise ValueError(f"unknown sampler {name!r}; choose one of: {', '.join(REGISTRY)}.")
    spec = REGISTRY[name]
    if balancing is not None and not isinstance(balancing, Balancing):
        raise ValueError(
            f"balancing must be a balancing function (lsbcore.load_balancing), "
            f"got {type(balancing).__name__}."
        )
    if spec.needs_balancing and balancing is None:
        raise ValueError(f"the {name!r} sampler needs balancing=lsbcore.load_balancing(...).")
    if balancing is not None and not (spec.learnable or spec.needs_balancing):
        raise ValueError(
            f"balancing= is for the learned samplers (lsb1, lsb2, learned), not {name!r}."
        )
    if not isinstance(learn, bool):
        raise ValueError(f"learn must be True or False, got {learn!r}.")
    if learn and not spec.learnable:
        raise ValueError(f"the {name!r} sampler has no learnable function; use learn=False.")
    if learn and balancing is not None:
        raise ValueError("learn=True starts from the sampler's own function; omit balancing=.")


def _build(name, target, n_chains, seed, x0, backend, device, balancing, options):
    """The sampler; a given function (a copy, frozen) stands in for a learnable's fresh one."""
    if balancing is None:
        return make_sampler(name, target, n_chains, seed, device, x0, backend, **options)
    frozen = copy.deepcopy(balancing).frozen()
    return make_sampler(
        "learned", target, n_chains, seed, device, x0, backend, balancing=frozen, **options
    )


def anneal(
    target: PairwiseTarget,
    sampler: str = "checkerboard",
    schedule: Schedule | None = None,
    n_chains: int = 4,
    seed: int = 0,
    x0=None,
    *,
    learn: bool = False,
    balancing: Balancing | None = None,
    polish: bool = False,
    record_every: int | None = None,
    backend: str = "auto",
    device=None,
    **options,
) -> AnnealingResult:
    """Anneal ``n_chains`` chains of ``sampler`` on ``target`` along ``schedule``.

    Args:
        target: any lsbcore target (one field, or one per chain).
        sampler: a registered sampler name (``lsbcore.SAMPLERS``).
        schedule: the temperatures (default ``Schedule()``: geometric, beta 1 to 100, 50
            stages of 10 steps). A single-site sampler needs many more steps than checkerboard
            Gibbs, whose step is a sweep (``samplers.registry.sweep_steps`` converts).
        x0: starts ``[B, *shape]`` or ``[*shape]``; default uniform random (seeded).
        learn: let a learnable sampler learn on every stage (see the module: off by default).
        balancing: a learned function to anneal with, frozen (for lsb1/lsb2 or ``learned``).
        polish: end with greedy zero-temperature sweeps (``greedy_polish``); recorded as a last
            record at the same step count.
        record_every: steps between records (default: about ``RECORDS`` records in all).
        options: the sampler's own options (``make_sampler``).
    """
    if not isinstance(target, PairwiseTarget):
        raise ValueError(
            f"target must be an lsbcore target (IsingPosterior, PairwiseMRF), "
            f"got {type(target).__name__}."
        )
    schedule = Schedule() if schedule is None else schedule
    if not isinstance(schedule, Schedule):
        raise ValueError(f"schedule must be a Schedule, got {type(schedule).__name__}.")
    _check_sampler(sampler, balancing, learn)
    if not isinstance(polish, bool):
        raise ValueError(f"polish must be True or False, got {polish!r}.")
    if record_every is None:
        record_every = max(1, math.ceil(schedule.total_steps / RECORDS))
    record_every = integer(record_every, "record_every", 1, 10**9)
    n_chains = integer(n_chains, "n_chains", 1, 100_000)
    betas = schedule.betas
    start = time.perf_counter()  # the sampler's construction counts too
    hottest = target.tempered(float(betas[0]))  # also refuses a beta_max too large up front
    target.tempered(float(betas[-1]))
    chain = _build(sampler, hottest, n_chains, seed, x0, backend, device, balancing, options)
    rows = {"steps": [], "sweeps": [], "beta": [], "seconds": [], "energy": [], "best": []}
    best_energy = np.full(n_chains, np.inf)
    best_state = chain.x.clone()

    def record(beta: float, x: torch.Tensor) -> None:
        e = energy(target, x)
        better = e < best_energy
        if better.any():
            best_energy[better] = e[better]
            best_state[torch.from_numpy(better).to(best_state.device)] = x[
                torch.from_numpy(better).to(x.device)
            ]
        rows["steps"].append(chain.n_steps)
        rows["sweeps"].append(chain.sweeps)  # the sampler's own count of site updates
        rows["beta"].append(beta)
        rows["seconds"].append(time.perf_counter() - start)
        rows["energy"].append(e)
        rows["best"].append(best_energy.copy())

    record(float(betas[0]), chain.x)
    for k, beta in enumerate(betas):
        if k > 0:
            chain.set_target(target.tempered(float(beta)))
        left = schedule.steps_per_stage
        while left > 0:
            m = min(left, record_every - chain.n_steps % record_every)
            chain.step(m, learn=learn)
            left -= m
            if left == 0 or chain.n_steps % record_every == 0:
                record(float(beta), chain.x)
    state = chain.x.clone()
    polish_sweeps = None
    if polish:
        state, polish_sweeps = greedy_polish(target, state)
        record(float(betas[-1]), state)
    wall = time.perf_counter() - start
    notes = []
    if getattr(chain, "learning_failed", False):
        notes.append(f"{sampler}: learning stopped during the run (diverged); frozen after.")
    return AnnealingResult(
        sampler=sampler,
        schedule=schedule,
        steps=np.asarray(rows["steps"], dtype=np.int64),
        sweeps=np.asarray(rows["sweeps"], dtype=np.float64),
        beta=np.asarray(rows["beta"]),
        seconds=np.asarray(rows["seconds"]),
        energy=np.stack(rows["energy"]),
        best_energy=np.stack(rows["best"]),
        state=state.cpu(),
        best_state=best_state.cpu(),
        wall_seconds=wall,
        learned=learn,
        polish_sweeps=polish_sweeps,
        notes=notes,
    )
