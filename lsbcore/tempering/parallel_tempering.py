"""Parallel tempering (replica exchange) on any target with any registered sampler inside.

One sampler per inverse temperature ``beta_r`` of the ladder ``1 = beta_0 > ... > beta_{R-1}``,
each on ``target.tempered(beta_r)`` (``p~^beta_r``) with ``B`` chains; chain ``b`` of every
replica forms one tempering system. A round is ``swap_every`` steps of every replica (by default
one sweep of the sampler's own steps, ``interface.steps_per_sweep``: ``n_sites`` steps of a
single-site sampler, ``n_sites / k`` of one moving ``k`` sites, one of a checkerboard), then one
exchange: the neighbour pairs ``(r, r + 1)`` with ``r`` even on even rounds and odd on odd rounds
propose to swap their states, accepted with

    A = min(1, exp((beta_r - beta_{r+1}) (log p~(x_{r+1}) - log p~(x_r))))

(``log p~`` of the untempered target, so ``beta = 0`` is allowed). The product of the
``p^beta_r`` is invariant under both moves, so the cold replica samples ``p`` exactly while the
hot ones carry it between modes.

Learned samplers (``lsb1``, ``lsb2``) learn during ``burn_in`` at their own temperature; the
ladder adapts there too when asked (``ladder.LadderAdaptation``). Both are frozen afterwards:
``sample`` is a valid MCMC.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from lsbcore.checks import integer
from lsbcore.samplers.base import uniform_start
from lsbcore.samplers.interface import steps_per_sweep, sweeps_in
from lsbcore.samplers.registry import REGISTRY, make_sampler
from lsbcore.targets.pairwise_target import PairwiseTarget
from lsbcore.tempering.ladder import LadderAdaptation, check_ladder, geometric_ladder

ADAPT_EVERY = 10  # rounds per ladder update: both parities, several swaps per pair averaged


def swap_log_acceptance(beta_r, beta_next, log_p_r, log_p_next):
    """``log`` of the exchange's Metropolis-Hastings ratio for replicas ``r`` and ``r + 1`` at
    states with untempered ``log p~`` values ``log_p_r`` and ``log_p_next``:
    ``p^b_r(x_{r+1}) p^b_{r+1}(x_r) / (p^b_r(x_r) p^b_{r+1}(x_{r+1}))``, the normalisers cancel."""
    return (beta_r - beta_next) * (log_p_next - log_p_r)


class SwapStatistics:
    """Per neighbour pair ``(r, r + 1)`` ``[R - 1]``, summed over chains: exchanges proposed,
    accepted, and the summed acceptance probabilities (a lower-variance rate)."""

    def __init__(self, n_pairs: int):
        self.attempts = np.zeros(n_pairs, dtype=np.int64)
        self.accepts = np.zeros(n_pairs, dtype=np.int64)
        self.probability = np.zeros(n_pairs)

    def add(self, pairs: np.ndarray, accepted: np.ndarray, probability: np.ndarray) -> None:
        self.attempts[pairs] += accepted.shape[1]
        self.accepts[pairs] += accepted.sum(1)
        self.probability[pairs] += probability.sum(1)

    @property
    def rates(self) -> np.ndarray:
        """Accepted over proposed exchanges per pair (NaN before any)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.accepts / self.attempts

    @property
    def mean_probability(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.probability / self.attempts


class ParallelTempering:
    """Replica exchange over a ladder of inverse temperatures (module docstring).

    Args:
        target: any ``lsbcore`` target (one field, or one per chain).
        sampler: a registered sampler's name, used in every replica.
        n_chains: ``B``, independent tempering systems.
        betas: the ladder; by default ``geometric_ladder(n_replicas, beta_min)``.
        adapt: adapt the ladder toward equal swap rates during ``burn_in``.
        swap_every: steps of every replica between exchanges (default: one sweep).
        seed: seeds the replicas' samplers and the exchanges' uniforms.
        x0: start of every replica (default: one uniform random start per chain, the same in
            every replica).
        options: the sampler's own options (``lr``, ``balancing=`` for ``learned``...).

    Attributes:
        betas ``[R]``, samplers (one per replica), swaps (``SwapStatistics``, sampling only),
        n_rounds, ladder_history (the ladder after each adaptation), burn_in_seconds and
        sample_seconds (wall time).
    """

    def __init__(
        self,
        target: PairwiseTarget,
        sampler: str = "checkerboard",
        n_chains: int = 1,
        betas=None,
        n_replicas: int = 8,
        beta_min: float = 0.3,
        adapt: bool = False,
        swap_every: int | None = None,
        seed: int = 0,
        backend: str = "auto",
        device=None,
        x0=None,
        **options,
    ):
        if not isinstance(target, PairwiseTarget):
            raise ValueError(
                "target must be an lsbcore target (IsingPosterior, PairwiseMRF), "
                f"got {type(target).__name__}."
            )
        if sampler not in REGISTRY:
            raise ValueError(f"unknown sampler {sampler!r}; choose one of: {', '.join(REGISTRY)}.")
        if not isinstance(adapt, (bool, np.bool_)):
            raise ValueError(f"adapt must be True or False, got {adapt!r}.")
        self.target = target
        self.spec = REGISTRY[sampler]
        self.n_chains = integer(n_chains, "n_chains", 1, 100_000)
        self.seed = integer(seed, "seed", 0, 2**63 - 1)
        if betas is None:
            self.betas = geometric_ladder(n_replicas, beta_min)
        else:
            self.betas = check_ladder(betas)
        self.n_replicas = len(self.betas)
        self.adaptation = LadderAdaptation(self.betas) if adapt else None
        if swap_every is not None:
            swap_every = integer(swap_every, "swap_every", 1, 10**9)
        # one generator: the replicas' seeds first, then every exchange's uniforms
        self.generator = torch.Generator().manual_seed(self.seed)
        seeds = torch.randint(0, 2**62, (self.n_replicas,), generator=self.generator).tolist()
        if x0 is None:
            x0 = uniform_start(target.shape, self.n_chains, self.seed)
        self.samplers = [
            make_sampler(
                sampler, target.tempered(float(beta)), self.n_chains, seed=s, device=device,
                x0=x0, backend=backend, **options,
            )
            for beta, s in zip(self.betas, seeds, strict=True)
        ]  # fmt: skip
        # default: a sweep of the samplers' own steps (every replica has the same options)
        self.swap_every = steps_per_sweep(self.samplers[0]) if swap_every is None else swap_every
        self.swaps = SwapStatistics(self.n_replicas - 1)
        self.n_rounds = 0
        self.sampling = False  # sample() has begun: burn-in (adaptation, learning) is over
        self.ladder_history = [self.betas.copy()]
        self.burn_in_seconds = 0.0
        self.sample_seconds = 0.0
        self._magnetisation: list[np.ndarray] = []  # chunks [rounds, R, B] of m / n
        self._cold_log_p: list[np.ndarray] = []  # chunks [rounds, B]

    # ----------------------------------------------------------------- running
    @property
    def sweeps_per_round(self) -> float:
        """Sweeps (updates per site) every replica makes in one round."""
        return sweeps_in(self.samplers[0], self.swap_every)

    @property
    def learnable(self) -> bool:
        return self.spec.learnable

    def burn_in(self, rounds: int, learn: bool | None = None) -> None:
        """``rounds`` rounds in which learned samplers learn at their own temperature (unless
        ``learn=False``) and the ladder adapts (when asked); nothing is recorded. Both stop
        once ``sample`` starts: adapting there would not leave a valid MCMC."""
        rounds = integer(rounds, "rounds", 0)
        if self.sampling:
            raise ValueError(
                "burn_in comes before sample: once sampling has begun the ladder and the "
                "learned functions stay fixed, so that the chain is a valid MCMC."
            )
        learn = self.learnable if learn is None else bool(learn) and self.learnable
        start = time.perf_counter()
        window = SwapStatistics(self.n_replicas - 1)
        for _ in range(rounds):
            self._round(learn=learn, swaps=window)
            # every ADAPT_EVERY rounds, from swap rates of every pair (both parities seen)
            due = self.n_rounds % ADAPT_EVERY == 0 and window.attempts.min() > 0
            if self.adaptation is not None and due:
                self._set_ladder(self.adaptation.update(window.mean_probability))
                window = SwapStatistics(self.n_replicas - 1)
        self.burn_in_seconds += time.perf_counter() - start

    def sample(self, rounds: int) -> None:
        """``rounds`` rounds of the fixed chain, recording every replica's magnetisation, the
        cold chain's ``log p~`` and the swap statistics. The ladder and any learned function
        are frozen from here on."""
        rounds = integer(rounds, "rounds", 0)
        self.sampling = True
        start = time.perf_counter()
        magnetisation = np.empty((rounds, self.n_replicas, self.n_chains), dtype=np.float32)
        cold = np.empty((rounds, self.n_chains))
        for t in range(rounds):
            log_p = self._round(learn=False, swaps=self.swaps)
            magnetisation[t] = self.magnetisations()
            cold[t] = log_p[0]
        self._magnetisation.append(magnetisation)
        self._cold_log_p.append(cold)
        self.sample_seconds += time.perf_counter() - start

    def _round(self, learn: bool, swaps: SwapStatistics) -> np.ndarray:
        for sampler in self.samplers:
            sampler.step(self.swap_every, learn=learn)
        log_p = self.exchange(swaps)
        self.n_rounds += 1
        return log_p

    def exchange(self, swaps: SwapStatistics | None = None) -> np.ndarray:
        """One exchange between the pairs of this round's parity (counted in ``swaps``, by
        default ``self.swaps``); returns the untempered ``log p~`` ``[R, B]`` of the states
        after it. ``sample`` and ``burn_in`` call it after every round's steps."""
        swaps = self.swaps if swaps is None else swaps
        states = torch.stack([s.x.reshape(self.n_chains, -1) for s in self.samplers])  # [R, B, n]
        if self.target.batch == 1:  # one field: every replica's chains in one evaluation
            log_p = self.target.log_prob(states.flatten(0, 1)).view(self.n_replicas, -1).cpu()
        else:  # a field per chain: replica by replica
            log_p = torch.stack([self.target.log_prob(x) for x in states]).cpu()  # [R, B]
        lower = torch.arange(self.n_rounds % 2, self.n_replicas - 1, 2)  # [P]
        if len(lower) == 0:
            return log_p.numpy()
        betas = torch.as_tensor(self.betas)
        log_a = swap_log_acceptance(
            betas[lower, None], betas[lower + 1, None], log_p[lower], log_p[lower + 1]
        )  # [P, B]
        u = torch.rand(log_a.shape, generator=self.generator, dtype=torch.float64)
        accept = torch.log(u) < log_a
        swaps.add(lower.numpy(), accept.numpy(), torch.exp(log_a.clamp(max=0.0)).numpy())
        for k, r in enumerate(lower.tolist()):
            chains = accept[k]
            if not bool(chains.any()):
                continue
            where = chains.to(states.device).view(-1, 1)
            low, high = states[r], states[r + 1]
            layout = (self.n_chains, *self.target.shape)
            self.samplers[r].set_state(torch.where(where, high, low).view(layout))
            self.samplers[r + 1].set_state(torch.where(where, low, high).view(layout))
            log_p[[r, r + 1]] = torch.where(chains, log_p[[r + 1, r]], log_p[[r, r + 1]])
        return log_p.numpy()

    def _set_ladder(self, betas: np.ndarray) -> None:
        self.betas = check_ladder(betas)
        for sampler, beta in zip(self.samplers[1:], self.betas[1:], strict=True):
            sampler.set_target(self.target.tempered(float(beta)))
        self.ladder_history.append(self.betas.copy())

    # ----------------------------------------------------------------- what it saw
    def magnetisations(self) -> np.ndarray:
        """``m / n`` of every replica's chains now, ``[R, B]``."""
        means = [s.x.reshape(self.n_chains, -1).mean(1).cpu().numpy() for s in self.samplers]
        return np.stack(means)

    @property
    def magnetisation(self) -> np.ndarray:
        """Every replica's ``m / n`` after each sampled round, ``[rounds, R, B]``."""
        if not self._magnetisation:
            return np.zeros((0, self.n_replicas, self.n_chains), dtype=np.float32)
        return np.concatenate(self._magnetisation)

    @property
    def cold_log_p(self) -> np.ndarray:
        """The cold chain's ``log p~`` after each sampled round, ``[rounds, B]``."""
        if not self._cold_log_p:
            return np.zeros((0, self.n_chains))
        return np.concatenate(self._cold_log_p)

    @property
    def cold(self):
        """The cold replica's sampler (its chains sample the target)."""
        return self.samplers[0]
