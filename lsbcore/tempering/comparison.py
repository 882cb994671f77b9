"""Parallel tempering against a single chain of the same sampler, over the same sweeps: the
experiment the dashboard's Tempering tab and the benchmark both run.

Both start from the same uniform random states; a learned sampler learns during the same
burn-in in both (at its own temperature in each replica); only the sampled sweeps count.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from lsbcore.checks import integer
from lsbcore.samplers.base import uniform_start
from lsbcore.samplers.interface import steps_per_sweep
from lsbcore.samplers.registry import REGISTRY, make_sampler
from lsbcore.tempering.modes import DEFAULT_THRESHOLD, ModeSummary, mode_summary
from lsbcore.tempering.parallel_tempering import ParallelTempering

MAX_SWEEPS = 100_000


@dataclass(frozen=True)
class TemperingComparison:
    """What one comparison measured.

    ``magnetisation [T, R, B]``: every replica's ``m / n`` after each sampled sweep;
    ``single [T, B]``: the single chain's; ``betas`` the ladder sampled with (after any
    adaptation), ``ladder_history`` its values during burn-in; ``swap_rates`` and
    ``swap_probability`` per neighbour pair; the mode summaries of the cold chain and of the
    single chain; wall seconds of each (burn-in included).
    """

    sampler: str
    sweeps: int
    burn_in: int
    betas: np.ndarray
    ladder_history: list
    swap_rates: np.ndarray
    swap_probability: np.ndarray
    magnetisation: np.ndarray
    single: np.ndarray
    tempered_modes: ModeSummary
    single_modes: ModeSummary
    tempering_seconds: float
    single_seconds: float
    threshold: float

    @property
    def cold(self) -> np.ndarray:
        """The cold chain's magnetisation ``[T, B]``."""
        return self.magnetisation[:, 0]


def compare_with_single_chain(
    target,
    sampler: str = "checkerboard",
    sweeps: int = 2000,
    burn_in: int = 200,
    n_chains: int = 1,
    n_replicas: int = 8,
    beta_min: float = 0.3,
    betas=None,
    adapt: bool = True,
    seed: int = 0,
    threshold: float = DEFAULT_THRESHOLD,
    backend: str = "auto",
    learn_sweeps: int | None = None,
    **options,
) -> TemperingComparison:
    """Run parallel tempering and a single chain of ``sampler`` on ``target`` for ``burn_in``
    then ``sweeps`` sweeps each, and count the mode switches of the cold chain and of the single
    chain (hysteresis ``threshold`` on ``m / n``). A learned sampler learns during the first
    ``learn_sweeps`` of the burn-in (default: all of it)."""
    sweeps = integer(sweeps, "sweeps", 1, MAX_SWEEPS)
    burn_in = integer(burn_in, "burn_in", 0, MAX_SWEEPS)
    learn_sweeps = burn_in if learn_sweeps is None else integer(learn_sweeps, "learn_sweeps", 0)
    learn_sweeps = min(learn_sweeps, burn_in)
    tempering = ParallelTempering(
        target, sampler, n_chains, betas=betas, n_replicas=n_replicas, beta_min=beta_min,
        adapt=adapt, seed=seed, backend=backend, **options,
    )  # fmt: skip
    rounds = max(1, round(1 / tempering.sweeps_per_round))  # rounds per sweep
    start = time.perf_counter()
    tempering.burn_in(learn_sweeps * rounds)
    tempering.burn_in((burn_in - learn_sweeps) * rounds, learn=False)
    tempering.sample(sweeps * rounds)
    tempering_seconds = time.perf_counter() - start
    magnetisation = tempering.magnetisation[rounds - 1 :: rounds]  # one row per sweep

    single, single_seconds = single_chain(
        target, sampler, sweeps, burn_in, n_chains, seed, backend, learn_sweeps, **options
    )
    return TemperingComparison(
        sampler=sampler,
        sweeps=sweeps,
        burn_in=burn_in,
        betas=tempering.betas.copy(),
        ladder_history=list(tempering.ladder_history),
        swap_rates=tempering.swaps.rates,
        swap_probability=tempering.swaps.mean_probability,
        magnetisation=magnetisation,
        single=single,
        tempered_modes=mode_summary(magnetisation[:, 0], threshold),
        single_modes=mode_summary(single, threshold),
        tempering_seconds=tempering_seconds,
        single_seconds=single_seconds,
        threshold=threshold,
    )


def single_chain(
    target, sampler, sweeps, burn_in, n_chains=1, seed=0, backend="auto", learn_sweeps=None,
    **options,
):  # fmt: skip
    """``m / n`` ``[sweeps, B]`` of one chain per system after each sweep (from the same start
    as ``ParallelTempering`` with this seed; learning in the first ``learn_sweeps`` of the
    burn-in, default all), and its wall seconds."""
    learn_sweeps = burn_in if learn_sweeps is None else min(learn_sweeps, burn_in)
    spec = REGISTRY[sampler]
    x0 = uniform_start(target.shape, n_chains, seed)
    chain = make_sampler(sampler, target, n_chains, seed=seed, x0=x0, backend=backend, **options)
    sweep = steps_per_sweep(chain)
    start = time.perf_counter()
    chain.step(learn_sweeps * sweep, learn=spec.learnable)
    chain.step((burn_in - learn_sweeps) * sweep)
    magnetisation = np.empty((sweeps, n_chains))
    for t in range(sweeps):
        chain.step(sweep)
        magnetisation[t] = chain.x.reshape(n_chains, -1).mean(1).cpu().numpy()
    return magnetisation, time.perf_counter() - start
