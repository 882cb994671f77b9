"""The paper's four synthetic Ising problems (spec 1), as the authors' code builds them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lsbcore.ising import IsingPosterior
from lsbcore.sampler import uniform_start

# case: (name, lambda, mu, sigma, burn-in)
PAPER_CASES = {
    1: ("independent, noisy", 0.0, 1.0, 3.0, 2000),
    2: ("independent, clean", 0.0, 3.0, 3.0, 2000),
    3: ("dependent, noisy", 1.0, 1.0, 3.0, 2000),
    4: ("dependent, clean", 1.0, 3.0, 3.0, 2000),
}
MIXING_STEPS = 30_000


@dataclass
class Problem:
    """A posterior with what an experiment needs around it."""

    target: IsingPosterior
    truth: torch.Tensor | None  # [H, W] of +-1, or None
    x0: torch.Tensor  # [n_chains, H, W], one shared start
    lam: float
    mu: float
    sigma: float
    burn_in: int
    steps: int
    name: str = ""


def square_truth(n: int) -> torch.Tensor:
    """+1 on the central square, -1 on a border band of width ``n // 4`` on all four sides."""
    truth = -torch.ones(n, n, dtype=torch.float64)
    band = n // 4
    truth[band : n - band, band : n - band] = 1.0
    return truth


def paper_case(case: int, n: int = 30, n_chains: int = 30, seed: int = 0) -> Problem:
    """Problem ``case`` (1-4): periodic ``n x n`` lattice, one noisy alpha per chain.

    ``alpha = mu * truth + U(-sigma, sigma)`` independently per chain (uniform noise, as in the
    authors' code); every chain starts from the same uniform random state.
    """
    if case not in PAPER_CASES:
        raise ValueError(f"case must be one of {sorted(PAPER_CASES)}, got {case!r}.")
    if isinstance(n, bool) or not isinstance(n, int) or not 3 <= n <= 1024:
        raise ValueError(f"n must be an integer between 3 and 1024, got {n!r}.")
    if isinstance(n_chains, bool) or not isinstance(n_chains, int) or not 1 <= n_chains <= 10_000:
        raise ValueError(f"n_chains must be an integer between 1 and 10000, got {n_chains!r}.")
    name, lam, mu, sigma, burn_in = PAPER_CASES[case]
    truth = square_truth(n)
    generator = torch.Generator().manual_seed(int(seed))
    noise = (torch.rand(n_chains, n, n, generator=generator, dtype=torch.float64) * 2 - 1) * sigma
    alpha = mu * truth + noise
    x0 = uniform_start((n, n), 1, seed=seed + 1).expand(n_chains, n, n).clone()
    return Problem(
        target=IsingPosterior(alpha, lam, boundary="periodic"),
        truth=truth,
        x0=x0,
        lam=lam,
        mu=mu,
        sigma=sigma,
        burn_in=burn_in,
        steps=MIXING_STEPS,
        name=f"case {case}: {name}",
    )
