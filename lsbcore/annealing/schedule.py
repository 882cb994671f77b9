"""Temperature schedules for annealing: inverse temperatures ``beta`` from ``beta_0`` to
``beta_max``, held for ``steps_per_stage`` steps each.

Annealing samples ``p~^beta`` (``target.tempered(beta)``) while ``beta`` grows: at ``beta = 1`` the
posterior itself, as ``beta -> inf`` the point mass on its maximiser. With ``K`` stages,
``k = 0 .. K - 1``:

- geometric: ``beta_k = beta_0 (beta_max / beta_0)^(k / (K - 1))``, equal ratios between stages
  (equal steps in log temperature, the usual choice: a hot chain needs fewer stages);
- linear: ``beta_k = beta_0 + (beta_max - beta_0) k / (K - 1)``, equal steps in ``beta``;
- constant: ``beta_k = beta_0`` (no annealing; ``beta_0 = 1`` samples the posterior itself).

``beta_max`` "near zero temperature" is a matter of scale: flips that lower ``log p~`` by ``d``
are accepted about ``e^(-beta d)`` as often, so ``beta_max = 100`` freezes every flip that costs
more than a few hundredths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lsbcore.checks import integer, real
from lsbcore.targets.base import MAX_BETA

KINDS = ("geometric", "linear", "constant")
MAX_STAGES = 100_000
MAX_STEPS = 10**9


@dataclass(frozen=True)
class Schedule:
    """``n_stages`` stages of ``steps_per_stage`` steps each at the inverse temperatures
    ``betas`` (see the module for the formulas). Validated at construction."""

    kind: str = "geometric"
    beta_0: float = 1.0
    beta_max: float = 100.0
    n_stages: int = 50
    steps_per_stage: int = 10

    def __post_init__(self):
        if not isinstance(self.kind, str) or self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}.")
        low = 0.0 if self.kind == "linear" else 1e-6  # a geometric ladder needs beta_0 > 0
        beta_0 = real(self.beta_0, "beta_0", low, MAX_BETA)
        beta_max = real(self.beta_max, "beta_max", low, MAX_BETA)
        n_stages = integer(self.n_stages, "n_stages", 1, MAX_STAGES)
        steps = integer(self.steps_per_stage, "steps_per_stage", 1, MAX_STEPS)
        if self.kind == "constant":
            if beta_max != beta_0:
                raise ValueError(
                    f"a constant schedule holds one temperature: beta_max ({beta_max:g}) must "
                    f"equal beta_0 ({beta_0:g}); use Schedule.constant(beta, ...)."
                )
        elif beta_max < beta_0:
            raise ValueError(
                f"annealing cools: beta_max ({beta_max:g}) must be at least beta_0 ({beta_0:g})."
            )
        elif n_stages < 2 and beta_max != beta_0:
            raise ValueError(
                f"a schedule from beta_0 = {beta_0:g} to beta_max = {beta_max:g} needs at least "
                f"2 stages, got {n_stages}."
            )
        if n_stages * steps > MAX_STEPS:
            raise ValueError(
                f"the schedule would take {n_stages * steps:,} steps; at most {MAX_STEPS:,} "
                "are supported."
            )
        for name, value in (("beta_0", beta_0), ("beta_max", beta_max)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "n_stages", n_stages)
        object.__setattr__(self, "steps_per_stage", steps)

    @classmethod
    def constant(cls, beta: float = 1.0, n_stages: int = 1, steps_per_stage: int = 1000):
        """``n_stages`` stages all at ``beta``: no annealing (``beta = 1``: the target)."""
        return cls("constant", beta, beta, n_stages, steps_per_stage)

    @property
    def betas(self) -> np.ndarray:
        """``[n_stages]`` inverse temperatures, from ``beta_0`` to ``beta_max`` (both exact)."""
        k = np.arange(self.n_stages, dtype=np.float64)
        last = max(self.n_stages - 1, 1)
        if self.kind == "constant" or self.beta_max == self.beta_0:
            betas = np.full(self.n_stages, self.beta_0)
        elif self.kind == "geometric":
            ratio = math.log(self.beta_max / self.beta_0)
            betas = self.beta_0 * np.exp(ratio * k / last)
        else:
            betas = self.beta_0 + (self.beta_max - self.beta_0) * k / last
        betas[-1] = self.beta_max  # the end exactly, whatever the rounding
        return betas

    @property
    def total_steps(self) -> int:
        return self.n_stages * self.steps_per_stage

    def describe(self, unit: str = "steps") -> str:
        """One line for captions and reports (``unit``: what a step is, e.g. "sweeps")."""
        if self.kind == "constant":
            shape = f"beta = {self.beta_0:g} throughout"
        else:
            shape = f"{self.kind} in beta from {self.beta_0:g} to {self.beta_max:g}"
        return (
            f"{shape}, {self.n_stages:,} stages of {self.steps_per_stage:,} {unit} "
            f"({self.total_steps:,} {unit})"
        )
