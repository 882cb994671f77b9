"""Several samplers on one target from one shared start, advanced together.

The app and the experiment command drive a ``Comparison`` rather than individual samplers:
``step(n, learn)`` advances every sampler (learning only where learnable) and, when traces are
on, records each sampler's statistics every ``thin`` steps; after ``start_mixing()`` it also
accumulates posterior marginals.

Each sampler counts its own steps (``sampler_steps``) and has its own phase
(``sampler_phases``): a sampler brought in late (``add``) starts at its step 0, and
``step(n, names=...)`` advances only the samplers named, so that it can take the steps it
missed. ``n_steps`` is the furthest any sampler has gone; side by side they are equal.

Each sampler takes up to ``TRACE_CHUNK`` steps per call (on the CPU a compiled loop) and writes
its running statistics and its proposals after every step into a buffer; the records and the
marginals come from that buffer, so recording costs no per-step Python. Within a chunk the
wall time of a record is interpolated by step (the chunk's own time is measured).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lsbcore.backends import resolve_device
from lsbcore.checks import integer
from lsbcore.diagnostics.rao_blackwell import site_probabilities
from lsbcore.diagnostics.trace import PHASES, MarginalEstimate, Trace
from lsbcore.samplers.base import uniform_start
from lsbcore.samplers.config import SamplerConfig, config_of
from lsbcore.samplers.interface import ChainSampler
from lsbcore.samplers.registry import REGISTRY

TRACE_CHUNK = 1024  # steps each sampler takes per call while recording


class Comparison:
    """``names`` samplers on ``target`` with ``n_chains`` chains each, all from ``x0``.

    Args:
        names: sampler names from ``lsbcore.SAMPLERS`` or configured samplers
            (``lsbcore.SamplerConfig``), each key at most once: a sampler is keyed (in
            ``samplers``, ``traces``, ``marginals``, ``names``) by its name, a configured one by
            its ``key``, so two configurations of one sampler run side by side.
        x0: shared start ``[n_chains, *target.shape]`` or ``target.shape``; default a uniform
            random state per chain from ``seed`` (the same for every sampler but the flow
            samplers, which start from their flow's draws).
        backend: ``"auto"``, ``"compiled"``, ``"torch"`` or ``"device"`` for every sampler.
        thin: record traces every ``thin`` steps (0: no traces).
        truth: ground truth ``[H, W]`` of +-1 for the accuracy trace, if known.
        options: each goes to the samplers whose registry entry lists it (``lr``,
            ``optimizer``, ``hidden``, ``restart_prob`` for the learned ones), ``balancing`` to
            ``"learned"``, ``flow`` (a trained ``FlowModel``) to the flow samplers, ``resync_every``
            to all; a configured sampler's own options win over them.
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
        backend: str = "auto",
        **options,
    ):
        entries = list(names)
        if not entries:
            raise ValueError("names must list at least one sampler.")
        unknown = [n for n in entries if not isinstance(n, SamplerConfig) and n not in REGISTRY]
        if unknown:
            raise ValueError(f"unknown sampler(s) {unknown}; choose from: {', '.join(REGISTRY)}.")
        configs = [config_of(n) for n in entries]
        names = [config.key for config in configs]
        if len(set(names)) != len(names):
            raise ValueError(f"each sampler may appear once, got {names}.")
        thin = integer(thin, "thin", 0)
        self.device = resolve_device(device)
        if x0 is None:
            x0 = uniform_start(target.shape, n_chains, seed)
        # chains at zero mass are moved inside the support first, where the target can do it
        x0, self.start_moves = _into_support(target, x0, n_chains, seed)
        #: one sentence for the page when chains were moved before sampling, else None
        self.start_note = None if self.start_moves is None else self.start_moves.sentence()
        self.target, self.n_chains, self.thin, self.truth = target, n_chains, thin, truth
        self.samplers: dict[str, ChainSampler] = {}
        #: each key's configured sampler (a name alone: its registry name without options)
        self.configs: dict[str, SamplerConfig] = dict(zip(names, configs, strict=True))
        for name, config in self.configs.items():
            spec = REGISTRY[config.name]
            own = {o.name for o in spec.options} | {"resync_every"}
            opts = {k: v for k, v in options.items() if k in own}
            if spec.needs_balancing:
                opts["balancing"] = options.get("balancing")
            if spec.takes_flow and options.get("flow") is not None:
                opts["flow"] = options["flow"]
            # the flow samplers start from their flow's draws: an independence proposal almost
            # never leaves a random state the flow gives no mass
            # (lsbcore.methods.flows.exact_sampler)
            start = None if spec.takes_flow else x0
            self.samplers[name] = config.build(
                target, n_chains, seed=seed, device=self.device, x0=start, backend=backend, **opts
            )
        #: the comparison's phase: "mixing" once ``start_mixing`` has been called for any sampler
        self.phase = "burnin"
        #: each sampler's own phase and steps (a late one burns in and counts from its start)
        self.sampler_phases: dict[str, str] = dict.fromkeys(names, "burnin")
        self.sampler_steps: dict[str, int] = dict.fromkeys(names, 0)
        self.traces = (
            {name: Trace(n_chains, thin=thin, truth=truth) for name in names} if thin else {}
        )
        self.marginals = {name: MarginalEstimate() for name in names}
        self._accumulate_marginals = True
        self.n_steps = 0
        if thin:
            for sampler in self.samplers.values():
                sampler.track_statistics(truth)
            self.record(force=True)

    def add(self, name: str, sampler: ChainSampler, phase: str | None = None) -> None:
        """Bring in ``sampler`` as ``name`` now (a flow sampler whose flow became ready): it
        must run on this comparison's target with its number of chains. It counts its own
        steps from 0; its marginal starts empty and its trace, when traced, at its own step 0,
        in ``phase`` (default the comparison's: "burnin" gives it a burn-in of its own)."""
        phase = self.phase if phase is None else phase
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, got {phase!r}.")
        if name in self.samplers:
            raise ValueError(f"{name!r} is in the comparison already.")
        if name not in REGISTRY:
            raise ValueError(f"unknown sampler {name!r}; choose from: {', '.join(REGISTRY)}.")
        if sampler.n_chains != self.n_chains or sampler.n_sites != self.target.n_sites:
            raise ValueError(
                f"{name!r} runs {sampler.n_chains} chains on {sampler.n_sites} sites; the "
                f"comparison runs {self.n_chains} on {self.target.n_sites}."
            )
        self.samplers[name] = sampler
        self.configs[name] = SamplerConfig(name)
        self.marginals[name] = MarginalEstimate()
        self.sampler_phases[name], self.sampler_steps[name] = phase, 0
        if self.thin:
            sampler.track_statistics(self.truth)
            trace = Trace(self.n_chains, thin=self.thin, truth=self.truth)
            trace.record(0, sampler.x, sampler.log_p, sampler.n_target_evals, math.nan,
                         sampler.wall_seconds, phase, force=True)  # fmt: skip
            self.traces[name] = trace

    def remove(self, name: str) -> None:
        """Drop ``name``'s sampler, trace and marginal (at least one sampler stays)."""
        if name not in self.samplers:
            raise ValueError(f"{name!r} is not in the comparison.")
        if len(self.samplers) == 1:
            raise ValueError("a comparison keeps at least one sampler.")
        del self.samplers[name]
        self.configs.pop(name, None)
        self.traces.pop(name, None)
        self.marginals.pop(name, None)
        self.sampler_phases.pop(name, None)
        self.sampler_steps.pop(name, None)

    def set_backend(self, backend: str) -> None:
        """Every sampler's next steps on ``backend`` (see ``Sampler.set_backend``)."""
        for sampler in self.samplers.values():
            sampler.set_backend(backend)

    @property
    def names(self) -> list[str]:
        return list(self.samplers)

    def __getitem__(self, name: str):
        return self.samplers[name]

    def start_mixing(self, names=None) -> None:
        """End burn-in for ``names`` (default every sampler): their later records are "mixing"
        and feed the posterior marginals, and their balancing functions are frozen."""
        for name in self._known(names):
            self.sampler_phases[name] = "mixing"
            sampler = self.samplers[name]
            if sampler.learnable:
                sampler.balancing.frozen()
        self.phase = "mixing"

    def step(self, n: int = 1, learn: bool = False, names=None) -> None:
        """Advance the samplers ``names`` (default every one) ``n`` steps each; ``learn`` adapts
        the learnable ones only."""
        n = integer(n, "n", 0)
        names = self._known(names)
        if learn and any(self.sampler_phases[name] == "mixing" for name in names):
            raise ValueError("learning is for burn-in; the balancing functions are frozen now.")
        for name in names:
            sampler = self.samplers[name]
            if self.thin:
                self._advance_recording(name, sampler, n, learn and sampler.learnable)
            else:
                sampler.step(n, learn=learn and sampler.learnable)
            self.sampler_steps[name] += n
            self.n_steps = max(self.n_steps, self.sampler_steps[name])

    def _known(self, names) -> list[str]:
        """``names`` (None: every sampler), each in the comparison."""
        if names is None:
            return list(self.samplers)
        names = list(names)
        unknown = [name for name in names if name not in self.samplers]
        if unknown:
            raise ValueError(f"{unknown} not in the comparison; it has: {list(self.samplers)}.")
        return names

    def _advance_recording(self, name: str, sampler: ChainSampler, n: int, learn: bool) -> None:
        """``n`` steps of one sampler in chunks; every ``thin``-th step becomes a record.

        The bookkeeping around the steps is numpy on the step buffer (a few microseconds per
        operation where small torch operations cost several times that): a short call, as the
        live page makes, should cost about its steps."""
        trace = self.traces.get(name)
        chains, sites = sampler.n_chains, sampler.n_sites
        phase = PHASES.index(self.sampler_phases[name])
        marginals = self.sampler_phases[name] == "mixing" and self._accumulate_marginals
        # the marginal from the flips needs the one site each step moved: a sampler whose
        # step counts one update but may move several (bit-flip-mh) says so
        from_flips = (
            marginals and sampler.sites_per_step == 1 and getattr(sampler, "moves_one_site", True)
        )
        done = 0
        while done < n:
            # chunks end where a resync may happen, so target evaluations grow evenly inside
            m = min(n - done, TRACE_CHUNK, sampler.steps_to_resync)
            buffer = torch.empty(m, chains, 5, dtype=torch.float64)
            n0, evals0, wall0 = sampler.n_steps, sampler.n_target_evals, sampler.wall_seconds
            if trace is not None:
                accepted0 = sampler.n_accepted
            if from_flips:  # copies: the step moves the chains in place
                before = sampler.statistics[:, 1].cpu().numpy().copy()
                x0 = sampler.x.detach().cpu().numpy().reshape(chains, -1).copy()
            if marginals and not from_flips:
                self._step_adding_states(name, sampler, m, learn, buffer)
            else:
                sampler.step(m, learn=learn, trace=buffer)
            done += m
            counts = np.arange(1, m + 1)  # steps taken so far in the chunk
            steps = n0 + counts
            keep = counts - 1 if self.thin == 1 else np.flatnonzero(steps % self.thin == 0)
            if keep.size == 0:
                continue
            values = buffer.numpy()
            if from_flips:
                self._add_marginals(name, values, keep, before, x0)
            if trace is None:
                continue
            resynced = sites if sampler.steps_to_resync == sampler.resync_every else 0
            per_step = (sampler.n_target_evals - evals0 - resynced) // m
            evals = evals0 + per_step * counts[keep]
            if keep[-1] == m - 1:
                evals[-1] = sampler.n_target_evals
            updates = steps[keep] * sampler.sites_per_step * chains
            rate = (accepted0 + np.cumsum(values[:, :, 3].sum(1))[keep]) / updates
            wall = wall0 + (sampler.wall_seconds - wall0) * counts[keep] / m
            fields = [values[keep, :, 1], values[keep, :, 0]]
            if self.truth is not None:
                fields.append(((sites + values[keep, :, 2]) * 0.5) / float(sites))
            self._before_extend(name)
            trace.extend(  # records built by the trace's rules: steps rise, one phase
                steps[keep],
                np.stack(fields, 1),
                evals,
                rate,
                wall,
                np.full(keep.size, phase),
                checked=False,
            )
            self._after_extend(name, int(steps[keep[-1]]))

    def _step_adding_states(
        self, name: str, sampler: ChainSampler, m: int, learn: bool, buffer
    ) -> None:
        """``m`` steps of a sampler that moves many sites per step, adding the state after
        every kept step to the marginals (a step costs O(D) already: one call per kept step,
        and each kept state on its own, so the settled indicator's blocks stay fine-grained)."""
        t = 0
        while t < m:
            k = min(self.thin - sampler.n_steps % self.thin, m - t)  # up to the next kept step
            sampler.step(k, learn=learn, trace=buffer[t : t + k])
            t += k
            if sampler.n_steps % self.thin == 0:
                # Rao-Blackwellised: each site's P(x_i = +1 | x_-i), from the cached log-ratios
                self.marginals[name].add(site_probabilities(sampler), 1)

    def _add_marginals(self, name, values, keep, magnetisation_before, x0) -> None:
        """Add the states after the kept steps to the marginals, from the flips alone.

        ``sum_t x_t = |kept| x_0 + sum over accepted flips (site i, step t) of
        (x_i after - x_i before) * |kept steps >= t|``; a flip's change is the change of the
        chain's magnetisation at that step (+-2). ``values`` is the step buffer ``[m, B, 5]``,
        ``keep`` the kept steps' rows (ascending). Every term is an integer, so the sums are
        exact whatever their order.
        """
        m, chains = values.shape[0], values.shape[1]
        kept_from = keep.size - np.searchsorted(keep, np.arange(m))  # [m]: kept steps >= t
        change = np.diff(values[:, :, 1], axis=0, prepend=magnetisation_before[None])  # [m, B]
        weight = change * kept_from[:, None].astype(np.float64)
        flat = np.arange(chains) * x0.shape[1] + values[:, :, 4].astype(np.int64)  # [m, B]
        flips = np.bincount(flat.reshape(-1), weight.reshape(-1), minlength=x0.size)
        total = x0 * float(keep.size) + flips.reshape(x0.shape)
        states = (total + float(keep.size)) * 0.5  # sum of (x + 1) / 2
        self.marginals[name].add(
            torch.from_numpy(states).view(chains, *self.target.shape), keep.size
        )

    def _before_extend(self, name: str) -> None:
        """Subclasses flush what they buffer before records are appended."""

    def _after_extend(self, name: str, last_step: int) -> None:
        """Subclasses note the last step recorded."""

    @torch.no_grad()
    def record(self, force: bool = False) -> None:
        """Record every sampler's trace now, at its own step (and its marginal, during its
        mixing)."""
        for name, sampler in self.samplers.items():
            x = sampler.x
            phase = self.sampler_phases[name]
            if name in self.traces:
                self.traces[name].record(
                    self.sampler_steps[name],
                    x,
                    sampler.log_p,
                    sampler.n_target_evals,
                    sampler.accept_rate if sampler.n_steps else math.nan,  # none before a step
                    sampler.wall_seconds,
                    phase,
                    force=force,
                )
            if phase == "mixing":
                self.marginals[name].update(x)


def _into_support(target, x0, n_chains: int, seed: int):
    """The shared start with its chains at zero mass moved to positive mass by the target's
    ``into_support`` (and what moved), or ``x0`` unchanged with None where nothing is at zero
    mass, the target cannot move chains, or ``x0`` is malformed (the samplers refuse it)."""
    if not callable(getattr(target, "into_support", None)) or not isinstance(n_chains, int):
        return x0, None
    x = torch.as_tensor(x0, dtype=torch.float64)
    shape = tuple(target.shape)
    if tuple(x.shape) == shape:
        x = x.unsqueeze(0).expand(n_chains, *shape)
    if tuple(x.shape) not in ((n_chains, *shape), (n_chains, target.n_sites)):
        return x0, None
    if not bool(((x == 1) | (x == -1)).all()) or bool(torch.isfinite(target.log_prob(x)).all()):
        return x0, None
    # its own stream, so the repair does not replay the uniform start's draws
    generator = torch.Generator().manual_seed((int(seed) * 2_654_435_761 + 1) % 2**63)
    moved, moves = target.into_support(x.clone(), generator)
    return moved, moves
