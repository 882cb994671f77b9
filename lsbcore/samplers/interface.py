"""What a sampler offers the code that drives it: the app, ``Comparison``, ``lsbcore.exact``,
the figures and the experiment command.

Declared as ``typing.Protocol`` classes, so that a sampler satisfies them by having the members,
whatever its base class: the pairwise samplers (``samplers.base.Sampler``, with the compiled and
device paths) and the samplers on any target (``samplers.batched.BatchedSampler``) both do.

- ``ChainSampler``: every sampler: ``B`` chains on a target, stepped together, with their state,
  counters, running statistics and the means to replace state, target or backend from outside.
- ``SingleSiteSampler``: a sampler whose step proposes one site per chain also gives its exact
  proposal ``Q(i | x)`` and transition probabilities ``T(x -> x with i flipped)``, the numbers
  its step uses (the teaching views; the exact transition matrix).
- ``MultiSiteSampler``: a sampler whose step may move many sites gives the law of its next
  state over all ``2^n`` states of a tiny target (the exact transition matrix).

The protocols are runtime-checkable, from ``typing_extensions`` (a dependency of torch): its
``isinstance`` looks members up statically on every Python, so a property that raises until it
is ready (``statistics`` before ``track_statistics()``) does not make the check raise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from typing_extensions import Protocol, runtime_checkable

if TYPE_CHECKING:
    from lsbcore.targets.base import Target

__all__ = [
    "ChainSampler",
    "MultiSiteSampler",
    "SingleSiteSampler",
    "steps_per_sweep",
    "sweeps_in",
]


def steps_per_sweep(sampler: ChainSampler) -> int:
    """Steps in which ``sampler`` updates every site once on average: ``n_sites /
    sites_per_step`` rounded up (a sweep at least); 1 for a sampler whose step is a sweep,
    ``n_sites`` for a single-site one."""
    return -(-sampler.n_sites // sampler.sites_per_step)


def sweeps_in(sampler: ChainSampler, steps: int) -> float:
    """The sweeps (site updates per site) that ``steps`` steps of ``sampler`` make."""
    return steps * sampler.sites_per_step / sampler.n_sites


@runtime_checkable
class ChainSampler(Protocol):
    """``B`` chains advanced together on a target (``B = n_chains``, ``n = n_sites``).

    Counters are per chain and count from construction: ``n_steps`` steps, ``n_site_updates``
    site updates (``sites_per_step`` per step, proposed moves included), ``n_target_evals``
    target evaluations (the rule of ``docs/method.md``; ``evals_per_step`` per step).
    """

    name: str
    target: Target
    n_chains: int
    n_sites: int
    seed: int
    device: torch.device
    backend: str  # the resolved backend: "torch", "compiled" or "device"
    generator: torch.Generator  # the sampler's seeded randomness (nothing else is used)
    learnable: bool
    sites_per_step: int
    resync_every: int
    n_steps: int
    n_site_updates: int
    n_target_evals: int
    wall_seconds: float

    @property
    def x(self) -> torch.Tensor:
        """Current states ``[B, *target.shape]`` of +-1 (a view: copy it before keeping it)."""
        ...

    @property
    def log_p(self) -> torch.Tensor:
        """``log p~(x)`` of the current states, ``[B]``."""
        ...

    @property
    def log_ratios(self) -> torch.Tensor:
        """The flip log-ratios ``s_i(x)`` of the current states, ``[B, *target.shape]``."""
        ...

    @property
    def evals_per_step(self) -> int:
        """Target evaluations per chain per step."""
        ...

    @property
    def sweeps(self) -> float:
        """Site updates per site so far."""
        ...

    @property
    def accept_rate(self) -> float:
        """Sites that changed over site updates, all chains and steps so far (NaN before any)."""
        ...

    @property
    def n_accepted(self) -> int:
        """Sites that changed so far, summed over chains."""
        ...

    @property
    def steps_to_resync(self) -> int:
        """Steps until the next exact recompute of the cached quantities."""
        ...

    @property
    def statistics(self) -> torch.Tensor:
        """``[B, 3]``: ``log p~(x)``, magnetisation and ``x . truth``, kept after
        ``track_statistics()`` (a ``ValueError`` before)."""
        ...

    @property
    def last_proposal(self) -> dict[str, torch.Tensor] | None:
        """What the last step proposed per chain, each ``[B]``: ``site`` (single-site samplers),
        ``accept_prob``, ``accepted``; None before any step and for a sweep, which proposes
        nothing."""
        ...

    def step(self, n: int = 1, learn: bool = False, trace: torch.Tensor | None = None) -> None:
        """Advance every chain ``n`` steps (learning where ``learn`` and learnable); ``trace``
        ``[n, B, 5]`` receives the statistics, the sites changed and the proposed site."""
        ...

    def track_statistics(self, truth=None) -> None:
        """Keep ``statistics`` up to date from now on (``truth``: ``[*shape]`` of +-1)."""
        ...

    def set_state(self, x) -> None:
        """Put the chains at ``x`` and recompute every cache exactly."""
        ...

    def set_target(self, target: Target) -> None:
        """Sample ``target`` (same sites and graph) from the current states on."""
        ...

    def set_backend(self, backend: str) -> None:
        """Run the next steps on ``backend``; the chains are the same on every backend."""
        ...

    def resync(self) -> None:
        """Recompute the cached quantities exactly from ``x``."""
        ...

    def invariant_error(self) -> float:
        """Largest relative gap between the cached quantities and a full recompute."""
        ...


@runtime_checkable
class SingleSiteSampler(ChainSampler, Protocol):
    """A sampler that proposes one site per chain and step, and says with what probabilities."""

    def proposal_log_probs(self) -> torch.Tensor:
        """``log Q(i | x)`` for every chain and site, ``[B, *target.shape]``."""
        ...

    def flip_probabilities(self) -> torch.Tensor:
        """``T(x -> x with i flipped) = Q(i | x) A`` for every chain and site,
        ``[B, *target.shape]``: exactly what ``step`` does."""
        ...


@runtime_checkable
class MultiSiteSampler(ChainSampler, Protocol):
    """A sampler whose step may move many sites, and that gives the law of its next state."""

    def transition_probabilities(self) -> torch.Tensor:
        """``P(x -> y)`` for every chain ``x`` and every state ``y`` of the target, ``[B, 2^n]``
        (tiny targets only)."""
        ...
