"""Several samplers on one target from one shared start, advanced together.

The app and the experiment command drive a ``Comparison`` rather than individual samplers:
``step(n, learn)`` advances every sampler (learning only where learnable) and, when traces are
on, records each sampler's statistics every ``thin`` steps; after ``start_mixing()`` it also
accumulates posterior marginals.
"""

from __future__ import annotations

import torch

from lsbcore.factory import BASELINES, SAMPLERS, make_sampler
from lsbcore.sampler import resolve_device, uniform_start
from lsbcore.trace import MarginalEstimate, Trace

LEARN_OPTIONS = ("lr", "optimizer", "hidden", "restart_prob")


class Comparison:
    """``names`` samplers on ``target`` with ``n_chains`` chains each, all from ``x0``.

    Args:
        names: sampler names from ``lsbcore.SAMPLERS``, each at most once.
        x0: shared start ``[n_chains, H, W]`` or ``[H, W]``; default a uniform random state
            per chain from ``seed`` (the same for every sampler).
        thin: record traces every ``thin`` steps (0: no traces).
        truth: ground truth ``[H, W]`` of +-1 for the accuracy trace, if known.
        options: ``lr``, ``optimizer``, ``hidden``, ``restart_prob`` (learned samplers),
            ``balancing`` (for ``"learned"``), ``resync_every`` (all).
    """

    def __init__(
        self,
        names,
        target,
        n_chains: int,
        seed: int = 0,
        device=None,
        x0=None,
        thin: int = 0,
        truth=None,
        **options,
    ):
        names = list(names)
        if not names:
            raise ValueError("names must list at least one sampler.")
        unknown = [n for n in names if n not in SAMPLERS]
        if unknown:
            raise ValueError(f"unknown sampler(s) {unknown}; choose from: {', '.join(SAMPLERS)}.")
        if len(set(names)) != len(names):
            raise ValueError(f"each sampler may appear once, got {names}.")
        if isinstance(thin, bool) or not isinstance(thin, int) or thin < 0:
            raise ValueError(f"thin must be a non-negative integer, got {thin!r}.")
        self.device = resolve_device(device)
        if x0 is None:
            x0 = uniform_start(target.shape, n_chains, seed)
        self.target, self.n_chains, self.thin, self.truth = target, n_chains, thin, truth
        self.samplers = {}
        for name in names:
            opts = {k: v for k, v in options.items() if k == "resync_every"}
            if name not in BASELINES:
                opts.update({k: v for k, v in options.items() if k in LEARN_OPTIONS})
                if name == "learned":
                    opts["balancing"] = options.get("balancing")
            self.samplers[name] = make_sampler(
                name, target, n_chains, seed=seed, device=self.device, x0=x0, **opts
            )
        self.phase = "burnin"
        self.traces = (
            {name: Trace(n_chains, thin=thin, truth=truth) for name in names} if thin else {}
        )
        self.marginals = {name: MarginalEstimate() for name in names}
        self.n_steps = 0
        if thin:
            self.record(force=True)

    @property
    def names(self) -> list[str]:
        return list(self.samplers)

    def __getitem__(self, name: str):
        return self.samplers[name]

    def start_mixing(self) -> None:
        """End burn-in: later records are "mixing" and feed the posterior marginals."""
        self.phase = "mixing"
        for sampler in self.samplers.values():
            if sampler.learnable:
                sampler.balancing.frozen()

    def step(self, n: int = 1, learn: bool = False) -> None:
        """Advance every sampler ``n`` steps; ``learn`` adapts the learnable ones only."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be a non-negative integer, got {n!r}.")
        if learn and self.phase == "mixing":
            raise ValueError("learning is for burn-in; the balancing functions are frozen now.")
        done = 0
        while done < n:
            chunk = n - done
            if self.thin:
                chunk = min(chunk, self.thin - self.n_steps % self.thin)
            for sampler in self.samplers.values():
                sampler.step(chunk, learn=learn and sampler.learnable)
            done += chunk
            self.n_steps += chunk
            if self.thin and self.n_steps % self.thin == 0:
                self.record()

    @torch.no_grad()
    def record(self, force: bool = False) -> None:
        """Record every sampler's trace now (and its marginal, during mixing)."""
        for name, sampler in self.samplers.items():
            x = sampler.x
            if name in self.traces:
                self.traces[name].record(
                    self.n_steps,
                    x,
                    sampler.log_p,
                    sampler.n_target_evals,
                    sampler.accept_rate if sampler.n_steps else 0.0,
                    sampler.wall_seconds,
                    self.phase,
                    force=force,
                )
            if self.phase == "mixing":
                self.marginals[name].update(x)
