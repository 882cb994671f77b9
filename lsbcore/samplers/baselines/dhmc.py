"""Discontinuous Hamiltonian Monte Carlo (Nishimura, Dunson and Lu 2020, Biometrika,
"Discontinuous Hamiltonian Monte Carlo for discrete parameters and discontinuous likelihoods"):
the dHMC baseline of the flow paper (Jaini, Nielsen and Welling, AISTATS 2021), on the +-1
embedding.

The chain carries ``theta in [-1, 1]^n`` with ``x = sign(theta)`` (the visible state) and the
density ``p(theta) ∝ p~(sign(theta))`` on the box: uniform dequantisation, as the flow paper
describes, ``|theta_i|`` uniform on ``(0, 1]`` given ``x``. The marginal of ``sign(theta)`` is
then exactly ``p~`` (every orthant of the box has volume 1), and the potential
``U(theta) = -log p~(sign(theta))`` (``+inf`` outside the box) is piecewise constant.

A step draws Laplace momenta (``p_i = +-Exp(1)``, kinetic energy ``sum_i |p_i|``) and runs the
coordinate-wise integrator: each integrator step moves every coordinate, in a random order, by
``dt sign(p_i)``. A move that changes ``sign(theta_i)`` costs ``dU = -s_i(x)`` (``s_i`` the flip
log-ratio): it goes through, ``|p_i| -> |p_i| - dU``, when ``|p_i| > dU``; otherwise the
coordinate stays and reflects, ``p_i -> -p_i``. A move out of the box meets ``dU = +inf`` and
reflects. Each coordinate update keeps ``U + K`` exactly (it moves energy between the two or
nothing at all), so the whole trajectory does: no Metropolis test on the energy is needed (its
acceptance would be ``exp(-dH)`` with ``dH`` a rounding error, ``~1e-15``;
``tests/test_baseline_samplers.py`` checks ``|dH|`` on trajectories). Each coordinate map is
volume preserving and reversible under ``p -> -p``; uniform random orders, drawn afresh per
integrator step, are as likely reversed, so the trajectory is reversible and ``p(theta)`` is
left invariant.

Only moves that change a sign interact, so an integrator step moves the rest at once and then
takes the crossing ones one by one in the step's random order (moves within one sign commute
with everything: ``U`` does not change). Every crossing attempt scores one state, ``x`` with
that site flipped (``target.log_ratio``): one evaluation. A step's evaluations are its chains'
attempts, averaged (whole evaluations counted, the remainder carried to the next step).

Jitter: ``dt = step_size * U(0.8, 1.2)`` and ``L`` uniform on ``{ceil(integrator_steps / 2), ...,
integrator_steps}``, per chain and step. Without it ``|theta_i|`` would stay on the lattice
``|theta_i(0)| + dt Z`` for ever. Defaults: ``step_size = 0.5``, ``integrator_steps = 4``, a travel
``L dt`` of about 1.5: each coordinate reaches 0 about 0.75 times a step, roughly one single-site
proposal per site (a step counts as a sweep).
"""

from __future__ import annotations

import math

import torch

from lsbcore.checks import integer, real
from lsbcore.samplers.batched import BatchedSampler
from lsbcore.samplers.chain_base import StepInfo
from lsbcore.targets.base import Target

MIN_STEP_SIZE, MAX_STEP_SIZE = 0.01, 1.0
MAX_STEPS = 1000
#: dt is step_size times a uniform draw in [1 - JITTER, 1 + JITTER)
JITTER = 0.2


def signs(theta: torch.Tensor) -> torch.Tensor:
    """``x = sign(theta)`` as +-1 float64 (theta is never 0: magnitudes lie in (0, 1])."""
    return torch.where(theta > 0, 1.0, -1.0).to(torch.float64)


class DiscontinuousHMC(BatchedSampler):
    """dHMC on the uniformly dequantised +-1 embedding (see the module docstring). Registry
    name ``dhmc``; ``theta`` (``[B, n]``) is the chain's auxiliary state."""

    name = "dhmc"
    uses_ratios = False  # a crossing scores its flipped state through target.log_ratio

    def __init__(
        self,
        target: Target,
        n_chains: int,
        step_size: float = 0.5,
        integrator_steps: int = 4,
        **common,
    ):
        self.step_size = real(step_size, "step_size", MIN_STEP_SIZE, MAX_STEP_SIZE)
        self.integrator_steps = integer(integrator_steps, "integrator_steps", 1, MAX_STEPS)
        self._theta = None
        self._step_evals = 0
        self._attempts = 0  # crossing attempts of every chain, not yet counted as evaluations
        super().__init__(target, n_chains, **common)
        self.sites_per_step = self.n_sites

    @property
    def theta(self) -> torch.Tensor:
        """The auxiliary state ``[B, n]``: ``sign(theta) = x``, ``|theta|`` in ``(0, 1]``."""
        return self._theta

    @property
    def evals_per_step(self) -> int:
        """The last step's crossing attempts per chain (each scores one state)."""
        return self._step_evals

    def _after_resync(self) -> None:
        """Chains whose ``x`` is not ``sign(theta)`` (the start, ``set_state``) draw
        ``|theta|`` afresh from its exact conditional, uniform on ``(0, 1]``."""
        x = self._x
        if self._theta is None or self._theta.shape != x.shape:
            redraw = torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
        else:
            redraw = (signs(self._theta) != x).any(1)
        if bool(redraw.any()):
            magnitude = 1.0 - self._uniforms(*x.shape)  # (0, 1]
            fresh = x * magnitude
            self._theta = fresh if self._theta is None else torch.where(
                redraw.unsqueeze(1), fresh, self._theta
            )  # fmt: skip

    # ----------------------------------------------------------------- the step
    def _step(self) -> None:
        b, n = self._x.shape
        u = self._uniforms(b, n, 2)
        p = torch.where(u[..., 0] < 0.5, 1.0, -1.0) * -torch.log1p(-u[..., 1])  # Laplace(1)
        jitter = self._uniforms(b, 2)
        dt = self.step_size * (1.0 - JITTER + 2.0 * JITTER * jitter[:, 0])
        shortest = math.ceil(self.integrator_steps / 2)
        steps = shortest + (jitter[:, 1] * (self.integrator_steps - shortest + 1)).long()
        x_start = self._x
        theta, _, log_p, attempts = self.integrate(self._theta, p, dt, steps)
        self._theta, x = theta, signs(theta)
        moved = x != x_start
        self._n_accepted += moved.sum(1)
        self._x, self._log_p = x, log_p
        self._attempts += int(attempts.sum())
        counted = self._attempts // b
        self._step_evals, self._attempts = counted, self._attempts - counted * b
        # the trajectory keeps H exactly: its end is always taken (accept_prob 1)
        self._last = StepInfo(
            accepted=moved.any(1),
            accept_prob=torch.ones(b, dtype=torch.float64),
            extra={"flips": moved},
        )

    def integrate(self, theta, p, dt, steps):
        """The coordinate-wise integrator from ``(theta, p)`` (``[B, n]`` each, ``sign(theta)``
        the chains' current ``x``): ``steps[b]`` integrator steps of size ``dt[b]``.

        Returns ``(theta, p, log p~(sign(theta)), attempts)`` after it, ``attempts [B]`` the
        crossings tried (each scored one state). The chains' ``x`` and ``log p~`` are the
        sampler's current ones; nothing of the sampler changes but its generator.
        """
        b, n = theta.shape
        theta, p = theta.clone(), p.clone()
        x, log_p = signs(theta), self._log_p.clone()
        attempts = torch.zeros(b, dtype=torch.int64, device=theta.device)
        chains = self._chains
        for step in range(int(steps.max())):
            active = (step < steps).unsqueeze(1)
            new = theta + torch.where(active, dt.unsqueeze(1) * torch.sign(p), 0.0)
            out = new.abs() > 1.0  # the box's wall: dU = +inf, reflect
            cross = (new > 0) != (theta > 0)
            cross &= ~out
            theta = torch.where(~out & ~cross, new, theta)
            p = torch.where(out, -p, p)
            # the crossing coordinates, each chain's in a uniformly random order
            keys = torch.where(cross, self._uniforms(b, n), math.inf)
            order = keys.argsort(1)
            counts = cross.sum(1)
            for r in range(int(counts.max())):
                has = r < counts
                i = order[:, r]
                x_new = x.clone()
                x_new[chains, i] = torch.where(has, -x[chains, i], x[chains, i])
                s = self.target.log_ratio(x, x_new)  # [B]: -dU
                p_i = p[chains, i]
                passes = has & (p_i.abs() > -s)  # NaN or -inf (zero mass): reflect
                theta[chains, i] = torch.where(passes, new[chains, i], theta[chains, i])
                kept = torch.sign(p_i) * (p_i.abs() + s)
                p[chains, i] = torch.where(passes, kept, torch.where(has, -p_i, p_i))
                x = torch.where(passes.unsqueeze(1), x_new, x)
                log_p = log_p + torch.where(passes, s, 0.0)
                attempts += has
        return theta, p, log_p, attempts

    def invariant_error(self) -> float:
        """As the base's, and ``inf`` where ``sign(theta)`` is not ``x`` or ``theta`` left the
        box."""
        if not bool((signs(self._theta) == self._x).all()) or self._theta.abs().max() > 1.0:
            return math.inf
        return super().invariant_error()
