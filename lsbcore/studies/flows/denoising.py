"""The denoising problems of the flow paper's Ising experiment (Jaini, Nielsen and Welling 2021,
section 5, Table 1), on the digits that ship with the project.

A binarised digit ``y`` (``lsbcore.rbm.data.digits``: 8 x 8, or 16 x 16 and 28 x 28 upsampled)
is the clean image, in ``{-1, +1}`` with +1 for ink. Each pixel is flipped independently with
probability ``flip`` (0.1) by a seeded generator, giving the observed image ``x``. The
posterior over clean images ``t`` is the Ising model of Bishop (2006, section 8.3) that the
paper uses,

    E(t, x) = -beta sum_<ij> t_i t_j - eta sum_i t_i x_i,      p~(t) = exp(-E(t, x)),

over the 4-neighbour grid with free boundary. That is ``IsingPosterior(alpha = eta * x,
lam = beta)``. The paper states neither ``beta`` nor ``eta``; we take Bishop's ``beta = 1.0``,
``eta = 2.1`` (his ``h = 0``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lsbcore.checks import integer, real
from lsbcore.rbm.data import DIGIT_SIZES, digits
from lsbcore.targets.ising import IsingPosterior

#: Bishop's (2006, section 8.3) coupling and data weight; the paper names neither.
BETA = 1.0
ETA = 2.1
#: The paper's noise: each pixel flipped with probability 0.1.
FLIP = 0.1
N_DIGITS = 1797


@dataclass(frozen=True)
class DenoisingProblem:
    """One noisy digit and its Ising posterior. ``clean`` and ``noisy`` are ``[size, size]``
    float64 in ``{-1, +1}``; ``target`` is the posterior over clean images."""

    size: int
    index: int
    seed: int
    flip: float
    beta: float
    eta: float
    label: int
    clean: torch.Tensor
    noisy: torch.Tensor
    target: IsingPosterior

    @property
    def n_sites(self) -> int:
        return self.size * self.size

    @property
    def flipped(self) -> int:
        """How many pixels the noise flipped."""
        return int((self.clean != self.noisy).sum())

    def describe(self) -> str:
        return (
            f"digit #{self.index} (a {self.label}), {self.size}x{self.size}, {self.flipped} of "
            f"{self.n_sites} pixels flipped (p = {self.flip:g}, seed {self.seed}); beta "
            f"{self.beta:g}, eta {self.eta:g}"
        )


def flip_noise(clean: torch.Tensor, flip: float, generator: torch.Generator) -> torch.Tensor:
    """``clean`` (+-1) with each entry's sign flipped independently with probability ``flip``."""
    u = torch.rand(clean.shape, generator=generator, dtype=torch.float64)
    return torch.where(u < flip, -clean, clean)


def denoising_problem(
    size: int = 16,
    index: int = 0,
    seed: int = 0,
    flip: float = FLIP,
    beta: float = BETA,
    eta: float = ETA,
) -> DenoisingProblem:
    """The shipped digit number ``index`` at ``size`` (8, 16 or 28) pixels a side, its noisy copy
    (seeded by ``seed``) and the posterior ``IsingPosterior(eta * noisy, beta)``."""
    if isinstance(size, bool) or size not in DIGIT_SIZES:
        raise ValueError(f"size must be one of {DIGIT_SIZES} (pixels per side), got {size!r}.")
    index = integer(index, "index", 0, N_DIGITS - 1)
    seed = integer(seed, "seed", 0, 2**63 - 1)
    flip = real(flip, "flip", 0.0, 0.5)
    beta = real(beta, "beta", 0.0, 100.0)
    eta = real(eta, "eta", 0.0, 100.0)
    images, labels = digits(size)
    bits = np.asarray(images[index], dtype=np.float64).reshape(size, size)
    clean = torch.from_numpy(2.0 * bits - 1.0)
    noisy = flip_noise(clean, flip, torch.Generator().manual_seed(seed))
    target = IsingPosterior(eta * noisy, beta)
    return DenoisingProblem(
        size, index, seed, flip, beta, eta, int(labels[index]), clean, noisy, target
    )
