"""How long chains from random starts take to enter the support of a network's skeleton.

The ICML version of the LSB paper (appendix G) remarks that on near-deterministic networks a
random start tends to fall outside the support, and that a balancing function with ``g(0) > 0``
then matters. This module measures it: on a near-deterministic network (``epsilon > 0``, so every
state has positive mass and a uniform start needs no repair) chains start from uniform random
states, and we count the target evaluations until each chain first reaches a state of positive
mass under the network's **deterministic skeleton** (the same tables with ``epsilon = 0``:
``preset(name, epsilon=0)``), i.e. a state that violates none of the near-deterministic rows.

The learned functions (LSB 1, LSB 2, LSB 2') are measured as they start, frozen (LSB 1 the
uniform mixture, g(0) = 1/4; LSB 2 and 2' near sqrt): the escape happens in the first steps of
burn-in, before learning has moved them far. ``g_at_zero`` gives each function's
``g(0) = lim_{t -> 0} g(t)``: LSB 2' by its exact ``g0()``, the others as ``g(e^-200)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from lsbcore.checks import integer
from lsbcore.samplers.base import uniform_start
from lsbcore.samplers.registry import make_sampler
from lsbcore.studies.networks import protocol
from lsbcore.targets.factor_graph import FactorGraph

#: The balancing samplers compared (the paper's Table 3, its appendix G variant, and max(1, t)
#: with g(0) pinned to 0, which needs ``make``).
ESCAPE_SAMPLERS = ("barker", "sqrt", "min", "max", "lsb1", "lsb2", "lsb2-monotone", "max-g0-zero")
#: ``log t`` at which ``g(0)`` is read when a function has no exact limit (e^-200 ~ 1e-87).
ZERO_LOG_T = -200.0


def g_at_zero(balancing) -> float:
    """``g(0)`` of a balancing function: its ``g0()`` where it has one, else ``g(e^-200)``."""
    if hasattr(balancing, "g0"):
        return float(balancing.g0())
    with torch.no_grad():
        s = torch.tensor([ZERO_LOG_T], dtype=torch.float64)
        param = next(balancing.parameters(), None)
        if param is not None:
            s = s.to(param.device)
        value = float(torch.exp(balancing.log_g(s))[0])
    return value if value > 1e-30 else 0.0


@dataclass(frozen=True)
class Escape:
    """Escape times of one sampler on one network, all seeds pooled.

    ``evaluations[c]``: target evaluations per chain (the sampler's counter, its first
    evaluation of the start included) when chain ``c`` first entered the skeleton's support;
    ``inf`` if it had not within ``max_steps`` steps. ``started_inside``: chains whose uniform
    start was already inside.
    """

    network: str
    sampler: str
    g0: float
    evaluations: np.ndarray
    started_inside: int
    max_steps: int
    evals_per_step: int

    @property
    def n_chains(self) -> int:
        return len(self.evaluations)

    @property
    def escaped(self) -> float:
        """Share of the chains inside the support within the budget."""
        return float(np.isfinite(self.evaluations).mean())

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of the escape evaluations (``inf`` where more than ``1 - q`` of
        the chains had not escaped): censored chains count as later than every escape."""
        return float(np.quantile(self.evaluations, q, method="inverted_cdf"))

    def summary(self) -> dict:
        return {
            "network": self.network,
            "sampler": self.sampler,
            "g0": self.g0,
            "chains": self.n_chains,
            "started_inside": self.started_inside,
            "escaped": self.escaped,
            "median": self.quantile(0.5),
            "q10": self.quantile(0.1),
            "q90": self.quantile(0.9),
            "max_steps": self.max_steps,
            "evals_per_step": self.evals_per_step,
        }


def escape_times(
    network: FactorGraph,
    skeleton: FactorGraph,
    sampler: str,
    n_chains: int,
    seeds,
    max_steps: int,
    name: str = "network",
    make=None,
) -> Escape:
    """Run ``sampler`` (frozen) on ``network`` from uniform starts, ``n_chains`` chains per seed,
    up to ``max_steps`` steps, and record when each chain first enters ``skeleton``'s support.

    ``skeleton`` must be ``network`` with its near-deterministic entries made exact zeros (same
    variables and scopes). ``make(sampler, network, x0, seed)`` builds the chains (default: the
    registry's sampler with its default options, on the study's backend)."""
    if sampler not in ESCAPE_SAMPLERS:
        raise ValueError(
            f"unknown sampler {sampler!r}; choose one of {', '.join(ESCAPE_SAMPLERS)}."
        )
    if not (isinstance(skeleton, FactorGraph) and skeleton.same_graph(network)):
        raise ValueError("skeleton must be the same network (same scopes) with its zeros exact.")
    n_chains = integer(n_chains, "n_chains", 1, 10_000)
    max_steps = integer(max_steps, "max_steps", 1, 10_000_000)
    seeds = [integer(s, "seed", 0) for s in seeds]
    if not seeds:
        raise ValueError("seeds must list at least one seed.")
    found, inside, g0, per_step = [], 0, math.nan, 0
    for seed in seeds:
        x0 = uniform_start(network.shape, n_chains, seed)
        if make is None:
            chains = make_sampler(
                sampler, network, n_chains, seed=seed, x0=x0, backend=protocol.BACKEND
            )
        else:
            chains = make(sampler, network, x0, seed)
        g0, per_step = g_at_zero(chains.balancing), chains.evals_per_step
        at = torch.full((n_chains,), math.inf, dtype=torch.float64)
        entered = torch.isfinite(skeleton.log_prob(chains.x))
        inside += int(entered.sum())
        at[entered] = float(chains.n_target_evals)
        for _ in range(max_steps):
            if bool(entered.all()):
                break
            chains.step(1)
            now = torch.isfinite(skeleton.log_prob(chains.x)) & ~entered
            at[now] = float(chains.n_target_evals)
            entered |= now
        found.append(at.numpy())
    return Escape(name, sampler, g0, np.concatenate(found), inside, max_steps, per_step)


__all__ = ["ESCAPE_SAMPLERS", "Escape", "escape_times", "g_at_zero"]
