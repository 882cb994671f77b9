"""The paper's sampler: Metropolis-Hastings in the flow's latent space, ``flow-latent``.

The chain moves ``z`` by a Gaussian random walk, ``z' = z + s xi``, accepted with
``min(1, p~(z') / p~(z))`` for the latent target of the paper's eq. 5 (``FlowModel.
latent_target``), and reports ``x = sign(T(z))``. Started, as in the paper, from the flow's own
draws (``z ~ N(0, I)``) with no burn-in of its own.

Labelled approximate. Its law in ``x`` is the target's only in the limit of a long run: the
random walk moves between discrete states through the continuous space the flow learned, so a
flow that spreads an orthant thinly, or a chain that starts where the flow put too much mass,
leaves the reported states off for a long time, and nothing in the chain tells how far. How
far it is on a small target is measured against enumeration (``lsbcore.studies.flows.bias``);
``flow-exact`` is the exact use of the same flow.

The step ``s = step_scale * 2.38 / sqrt(n)`` (the random-walk scaling of Roberts, Gelman and
Gilks for a near-Gaussian target, which training aims at). Evaluations: one ``log p~`` per step.
"""

from __future__ import annotations

import math

import torch

from lsbcore.methods.flows.exact_sampler import flow_for
from lsbcore.methods.flows.model import FlowModel, embed
from lsbcore.samplers.batched import BatchedSampler
from lsbcore.samplers.chain_base import StepInfo


class FlowLatentSampler(BatchedSampler):
    """Random-walk Metropolis-Hastings on the latent target (module docstring).

    Caches per chain, beyond the base's ``x`` and ``log p~(x)``: ``z`` and ``log p~(z)``
    (invariant: ``x = sign(T(z))`` and both logs equal a recompute at ``z``).
    """

    name = "flow-latent"
    uses_ratios = False
    approximate = True

    def __init__(self, target, n_chains: int, train_steps: int = 1000, step_scale: float = 1.0,
                 flow: FlowModel | None = None, x0=None, **common):  # fmt: skip
        # the base needs some start; the chains' states come from z below
        super().__init__(target, n_chains, x0=x0, **common)
        self.flow = flow_for(target, flow, train_steps, self.seed, self.device)
        self.flow = self.flow.to(self.device)  # shared with its training: not frozen here
        self.step_size = float(step_scale) * 2.38 / math.sqrt(self.n_sites)
        self.sites_per_step = self.n_sites  # a move in z may change every site
        self._n_moves = torch.zeros(self.n_chains, dtype=torch.int64, device=self.device)
        if x0 is None:  # the flow's own draws; where one has zero mass, the target's start
            z = self.flow.normal(self.n_chains, self.generator)
            with torch.no_grad():
                _, _, log_p = self.flow.latent_target(z, self.target.log_prob)
            zero = ~torch.isfinite(log_p)
            if bool(zero.any()):
                z[zero] = self._latent_of(self._x[zero])
            self._z = z
        else:  # the state asked for, through a z the dequantiser picks
            self._z = self._latent_of(self._x)
        self._after_resync()

    def _latent_of(self, x: torch.Tensor) -> torch.Tensor:
        """A ``z`` whose state is ``x``: ``w ~ q(. | x)``, ``z = T^-1(x * exp w)``."""
        x = x.to(self.flow.dtype)
        with torch.no_grad():
            w, _ = self.flow.dequantise(x, self.generator)
            return self.flow.to_latent(embed(x, w))

    def set_state(self, x) -> None:
        """Put the chains at ``x`` (their ``z`` drawn from the dequantiser and mapped back)."""
        self._x = self._check_start(x).to(self.device).clone()
        self._z = self._latent_of(self._x)
        self.resync()

    def _after_resync(self) -> None:
        if getattr(self, "_z", None) is None:
            return
        with torch.no_grad():
            self._log_pz, x, self._log_p = self.flow.latent_target(self._z, self.target.log_prob)
        self._x = x

    @property
    def evals_per_step(self) -> int:
        return 1

    @property
    def z(self) -> torch.Tensor:
        """The chains' latent states ``[B, n]``."""
        return self._z

    @property
    def move_rate(self) -> float:
        """Moves of ``z`` accepted over moves proposed, over all chains and steps so far (the
        base's ``accept_rate`` counts sites of ``x`` that changed: a move inside an orthant
        changes none)."""
        if self.n_steps == 0:
            return float("nan")
        return int(self._n_moves.sum()) / (self.n_steps * self.n_chains)

    def invariant_error(self) -> float:
        """The base's gap, and those of ``x = sign(T(z))`` and the cached ``log p~(z)`` against a
        recompute at ``z`` (a state off its ``z`` counts as a gap of 1)."""
        with torch.no_grad():
            log_pz, x, _ = self.flow.latent_target(self._z, self.target.log_prob)
            off = float((x != self._x).any(1).double().max())
            gap = float(((log_pz - self._log_pz).abs() / log_pz.abs().clamp(min=1.0)).max())
        return max(super().invariant_error(), off, gap)

    @torch.no_grad()
    def _step(self) -> None:
        noise = self.flow.normal(self.n_chains, self.generator)
        z_new = self._z + self.step_size * noise
        log_pz_new, x_new, log_p_new = self.flow.latent_target(z_new, self.target.log_prob)
        log_alpha = log_pz_new - self._log_pz
        log_alpha = torch.where(torch.isnan(log_alpha), -torch.inf, log_alpha)
        accept = torch.log(self._uniforms(self.n_chains)) < log_alpha
        self._move(x_new, accept, log_p_new - self._log_p)
        self._z = torch.where(accept.unsqueeze(1), z_new, self._z)
        self._n_moves += accept
        self._log_pz = torch.where(accept, log_pz_new, self._log_pz)
        self._last = StepInfo(accept_prob=log_alpha.clamp(max=0.0).exp(), accepted=accept)
