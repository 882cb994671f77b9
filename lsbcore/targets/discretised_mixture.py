"""A 2-D Gaussian mixture discretised on a grid of ``2^bits x 2^bits`` cells: the flow paper's toy.

The flow paper's first experiment (Jaini, Nielsen and Welling 2021, "Discretized Gaussian Mixture
Model", Figure 1): mixtures of 5 Gaussians in the plane, each coordinate discretised at 6 bits,
so a state is 12 bits and all 4,096 states can be enumerated.

A state ``x in {-1, +1}^(2 bits)`` holds the bits of the first coordinate's cell (sites
``0 .. bits - 1``, least significant first) and then of the second's. Each coordinate's bits are
a **Gray code** of its level ``l in 0 .. 2^bits - 1``: neighbouring levels differ in exactly one
bit, so every pair of neighbouring cells is one flip apart and a single-site sampler can walk
across a mode cell by cell. (A plain binary code puts neighbouring cells up to ``bits`` flips
apart, 31 | 32 at 6 bits: a single-site chain would cross such a "Hamming cliff" only through
far cells of low mass, and the samplers' comparison would measure the code.) ``code="binary"``
is offered for that comparison. Decoding, with ``B`` the binary bits as +-1 and ``G`` the Gray
ones: ``B_top = G_top`` and ``B_j = -B_(j+1) G_j`` (the XOR of two bits is minus the product of
their +-1 values), then ``l = sum_j 2^j (1 + B_j) / 2``.

Level ``l`` is the cell of centre ``c(l) = -L + (l + 1/2) h``, ``h = 2 L / 2^bits``, of the box
``[-L, L]^2``, and

    log p~(x) = log sum_k w_k N(c(x); mu_k, Sigma_k),

the mixture's **density at the cell's centre**, not the cell's mass: with full covariances the
mass is a bivariate normal CDF with no closed form, and for components several cells wide (the
generator's are 2.5 to 6.4 cells) the two differ by a factor ``1 + O(h^2 / sigma^2)`` that varies
slowly over a mode. The samplers are checked against this law, whichever it is.

No ``"gradient"``: a flip of a high bit moves a coordinate by up to half the box, so no
first-order extension predicts the flips' ratios (measured: Gibbs-with-Gradients on a multilinear
extension of the decoding stayed at TV 0.2 to the law after 2,000 steps where Gibbs reached the
noise floor in 600); the gradient samplers refuse this target in a sentence.
``random_mixture(seed)`` draws mixtures like the paper's pictures: five well separated
modes in the box, random covariances and weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from lsbcore.checks import integer, real
from lsbcore.targets.base import Target, as_real_tensor

#: Bits per coordinate: 2 x 10 = 20 sites is far beyond enumeration already; the flow paper's is 6.
MAX_BITS = 10
MAX_COMPONENTS = 64
MAX_HALF_WIDTH = 1e6
CODES = ("gray", "binary")
#: The generator's box half-width and the paper's components and bits.
BOX = 4.0
COMPONENTS = 5
BITS = 6


@dataclass(frozen=True)
class Mixture:
    """A Gaussian mixture in the plane: ``weights [K]`` summing to 1, ``means [K, 2]`` and
    ``covariances [K, 2, 2]`` (symmetric positive definite)."""

    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray


def random_mixture(seed: int = 0, components: int = COMPONENTS, half_width: float = BOX) -> Mixture:
    """A seeded mixture of well separated modes in ``[-half_width, half_width]^2``: means drawn
    in the inner 70% of the box at least ``0.45 half_width`` apart (redrawn until they are),
    standard deviations of ``0.08`` to ``0.2 half_width`` along a random rotation, and weights
    from a Dirichlet(5) (no mode negligible)."""
    integer(seed, "seed", 0, 2**32 - 1)
    components = integer(components, "components", 1, 8)
    half_width = real(half_width, "half_width", 1e-6, MAX_HALF_WIDTH)
    rng = np.random.default_rng(seed)
    inner, gap = 0.7 * half_width, 0.45 * half_width
    means = np.empty((0, 2))
    while len(means) < components:  # at most 8 points at this spacing: a few hundred tries
        m = rng.uniform(-inner, inner, size=2)
        if all(np.hypot(*(m - other)) >= gap for other in means):
            means = np.vstack([means, m])
    angles = rng.uniform(0.0, math.pi, size=components)
    scales = rng.uniform(0.08, 0.2, size=(components, 2)) * half_width
    covariances = np.empty((components, 2, 2))
    for k, (a, s) in enumerate(zip(angles, scales, strict=True)):
        rotation = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
        covariances[k] = rotation @ np.diag(s**2) @ rotation.T
    weights = rng.dirichlet(np.full(components, 5.0))
    return Mixture(weights, means, covariances)


class DiscretisedMixture(Target):
    """A 2-D Gaussian mixture at the centres of a ``2^bits x 2^bits`` grid on
    ``[-half_width, half_width]^2`` (module docstring); ``2 bits`` sites, laid out ``(2, bits)``
    (one row per coordinate)."""

    provides = frozenset()

    def __init__(self, mixture: Mixture, bits: int = BITS, half_width: float = BOX,
                 code: str = "gray"):  # fmt: skip
        if not isinstance(mixture, Mixture):
            raise ValueError(f"mixture must be a Mixture, got {type(mixture).__name__}.")
        self.bits = integer(bits, "bits", 1, MAX_BITS)
        self.half_width = real(half_width, "half_width", 0.0, MAX_HALF_WIDTH)
        if self.half_width == 0.0:
            raise ValueError("half_width must be a positive number, got 0.")
        if code not in CODES:
            raise ValueError(f"code must be one of {CODES}, got {code!r}.")
        self.code = code
        w = as_real_tensor(mixture.weights, "the mixture's weights", MAX_COMPONENTS)
        mu = as_real_tensor(mixture.means, "the mixture's means", 2 * MAX_COMPONENTS)
        cov = as_real_tensor(mixture.covariances, "the mixture's covariances", 4 * MAX_COMPONENTS)
        k = w.shape[0] if w.dim() == 1 else 0
        if k < 1:
            raise ValueError(
                f"the mixture's weights must be a 1-D array of 1 to {MAX_COMPONENTS} numbers, "
                f"got shape {tuple(w.shape)}."
            )
        if tuple(mu.shape) != (k, 2) or tuple(cov.shape) != (k, 2, 2):
            raise ValueError(
                f"the mixture's means must have shape ({k}, 2) and its covariances ({k}, 2, 2) "
                f"for its {k} weights, got {tuple(mu.shape)} and {tuple(cov.shape)}."
            )
        for name, value in (("weights", w), ("means", mu), ("covariances", cov)):
            if not bool(torch.isfinite(value).all()):
                raise ValueError(f"the mixture's {name} must be finite numbers (no NaN or inf).")
        if bool((w <= 0).any()) or abs(float(w.sum()) - 1.0) > 1e-9:
            raise ValueError("the mixture's weights must be positive and sum to 1.")
        if not bool(torch.allclose(cov, cov.transpose(1, 2))):
            raise ValueError("the mixture's covariances must be symmetric 2 x 2 matrices.")
        chol, info = torch.linalg.cholesky_ex(cov)
        if bool((info != 0).any()):
            raise ValueError("the mixture's covariances must be positive definite.")
        self.mixture = mixture
        self.n_sites, self.shape = 2 * self.bits, (2, self.bits)
        self.levels = 2**self.bits
        self.cell = 2.0 * self.half_width / self.levels
        self._log_w, self._mu, self._chol = torch.log(w), mu, chol
        # log N's constant per component: -log(2 pi) - log det Sigma / 2
        self._log_norm = -math.log(2 * math.pi) - torch.log(torch.diagonal(chol, 0, 1, 2)).sum(1)

    def describe(self) -> str:
        return (
            f"a {len(self._log_w)}-component Gaussian mixture on a {self.levels} x {self.levels} "
            f"grid ({self.n_sites} sites, {self.code} code)"
        )

    # ----------------------------------------------------------------- the code
    def levels_of(self, x: torch.Tensor) -> torch.Tensor:
        """Each coordinate's level ``[B, 2]`` (float64; real ``x`` gives the extension)."""
        bits = self._flat(x).view(-1, 2, self.bits)
        if self.code == "gray":
            decoded = [bits[:, :, -1]]  # B_top = G_top, then B_j = -B_(j+1) G_j
            for j in range(self.bits - 2, -1, -1):
                decoded.append(-decoded[-1] * bits[:, :, j])
            bits = torch.stack(decoded[::-1], dim=2)
        weights = 2.0 ** torch.arange(self.bits, dtype=torch.float64, device=bits.device)
        return ((1.0 + bits) / 2 * weights).sum(2)

    def states_of(self, levels) -> torch.Tensor:
        """The states ``[B, 2 bits]`` of cells given by their levels ``[B, 2]`` (integers in
        ``0 .. 2^bits - 1``): the inverse of ``levels_of``."""
        levels = torch.as_tensor(levels, dtype=torch.int64)
        if levels.dim() != 2 or levels.shape[1] != 2:
            raise ValueError(f"levels must have shape [B, 2], got {tuple(levels.shape)}.")
        if bool(((levels < 0) | (levels >= self.levels)).any()):
            raise ValueError(f"levels must be integers from 0 to {self.levels - 1}.")
        codes = levels ^ (levels >> 1) if self.code == "gray" else levels
        bits = (codes.unsqueeze(2) >> torch.arange(self.bits)) & 1
        return (2 * bits - 1).to(torch.float64).view(-1, self.n_sites)

    def centres(self, x: torch.Tensor) -> torch.Tensor:
        """The centres ``[B, 2]`` of the cells of ``x``."""
        return -self.half_width + (self.levels_of(x) + 0.5) * self.cell

    # ----------------------------------------------------------------- the density
    def log_density(self, points: torch.Tensor) -> torch.Tensor:
        """``log sum_k w_k N(points; mu_k, Sigma_k)`` at ``points [B, 2]``, ``[B]``."""
        diff = points.unsqueeze(1) - self._mu.to(points.device)  # [B, K, 2]
        chol = self._chol.to(points.device).expand(len(points), -1, -1, -1)
        z = torch.linalg.solve_triangular(chol, diff.unsqueeze(3), upper=False).squeeze(3)
        log_n = self._log_norm.to(points.device) - 0.5 * (z * z).sum(2)
        return torch.logsumexp(self._log_w.to(points.device) + log_n, dim=1)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        return self.log_density(self.centres(x))


__all__ = ["BITS", "BOX", "CODES", "DiscretisedMixture", "Mixture", "random_mixture"]
