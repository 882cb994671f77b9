"""The paper's four synthetic Ising problems (spec 1), as the authors' code builds them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lsbcore.checks import ArgumentTypeError, integer, real
from lsbcore.samplers.base import uniform_start
from lsbcore.targets.base import as_real_tensor
from lsbcore.targets.ising import IsingPosterior

# case: (name, lambda, mu, sigma, burn-in)
PAPER_CASES = {
    1: ("independent, noisy", 0.0, 1.0, 3.0, 2000),
    2: ("independent, clean", 0.0, 3.0, 3.0, 2000),
    3: ("dependent, noisy", 1.0, 1.0, 3.0, 2000),
    4: ("dependent, clean", 1.0, 3.0, 3.0, 2000),
}
MIXING_STEPS = 30_000
MAX_SEED = 2**63 - 8  # torch.Generator takes seeds below 2^63 here; starts use seed + 1 (+ 7)
#: How the chains of a paper case start: one shared random state, or one of their own each.
STARTS = ("shared", "per_chain")
#: How a paper case's noisy field is drawn, per chain and site (``u ~ U(-1, 1)``, ``e ~ N(0, 1)``):
#: ``"uniform"``, the authors' code (Table 2's numbers): ``alpha = mu * truth + sigma * u``;
#: ``"gaussian"``, the paper's text (section 5.1): pixels ``y = mu * truth + sigma * e`` and
#: ``alpha = mu * y / sigma^2``. Under the first, mu = sigma = 3 never flips alpha's sign (the
#: "clean" cases); under the second it does at a site with probability Phi(-mu / sigma).
NOISE_MODELS = ("uniform", "gaussian")


@dataclass
class Problem:
    """A posterior with what an experiment needs around it."""

    target: IsingPosterior
    truth: torch.Tensor | None  # [H, W] of +-1, or None
    x0: torch.Tensor  # [n_chains, H, W]: one shared start or one per chain
    lam: float
    mu: float
    sigma: float
    burn_in: int
    steps: int
    name: str = ""
    data: object | None = None  # photos: the fitted data model (a segmentation.DataTerm)
    polarity: str | None = None  # images: which class is the object, "dark" or "bright"


def square_truth(n: int) -> torch.Tensor:
    """+1 on the central square, -1 on a border band of width ``n // 4`` on all four sides."""
    truth = -torch.ones(n, n, dtype=torch.float64)
    band = n // 4
    truth[band : n - band, band : n - band] = 1.0
    return truth


def paper_case(
    case: int,
    n: int = 30,
    n_chains: int = 30,
    seed: int = 0,
    start: str = "shared",
    noise_model: str = "uniform",
) -> Problem:
    """Problem ``case`` (1-4): periodic ``n x n`` lattice, one noisy alpha per chain.

    ``alpha = mu * truth + U(-sigma, sigma)`` independently per chain (uniform noise, as in the
    authors' code; ``noise_model="gaussian"``: the paper's text, see ``NOISE_MODELS``).
    ``start="shared"``: every chain starts from the same uniform random state (side-by-side views);
    ``"per_chain"``: each chain from its own (the authors' runner). Both
    come from a generator seeded with ``seed + 1``, so chain 0 starts alike in both.
    """
    if start not in STARTS:
        raise ValueError(f"start must be one of {STARTS}, got {start!r}.")
    if isinstance(case, (bool, np.bool_)):  # True == 1, but surely not meant as case 1
        raise ArgumentTypeError(f"case must be one of {sorted(PAPER_CASES)}, got {case!r}.")
    if case not in PAPER_CASES:
        raise ValueError(f"case must be one of {sorted(PAPER_CASES)}, got {case!r}.")
    case = int(case)
    name, lam, mu, sigma, burn_in = PAPER_CASES[case]
    problem = square_problem(
        lam, mu, sigma, n=n, n_chains=n_chains, seed=seed, start=start, noise_model=noise_model
    )
    problem.burn_in, problem.name = burn_in, f"case {case}: {name}"
    return problem


def square_problem(
    lam: float,
    mu: float,
    sigma: float,
    n: int = 30,
    n_chains: int = 30,
    seed: int = 0,
    start: str = "shared",
    noise_model: str = "uniform",
) -> Problem:
    """The paper's synthetic problem for any ``(lambda, mu, sigma)``: ``paper_case`` without the
    case's numbers (a parameter sweep's target; the paper's four cases are four of its points).
    Periodic ``n x n`` lattice, ``alpha = mu * truth + U(-sigma, sigma)`` per chain
    (``noise_model`` picks the form, see ``NOISE_MODELS``); ``start`` and ``seed`` as in
    ``paper_case``."""
    if start not in STARTS:
        raise ValueError(f"start must be one of {STARTS}, got {start!r}.")
    if noise_model not in NOISE_MODELS:
        raise ValueError(f"noise_model must be one of {NOISE_MODELS}, got {noise_model!r}.")
    lam, mu, sigma = real(lam, "lambda", 0.0), real(mu, "mu"), real(sigma, "sigma", 0.0)
    n = integer(n, "n", 3, 1024)
    n_chains = integer(n_chains, "n_chains", 1, 10_000)
    seed = integer(seed, "seed", 0, MAX_SEED)
    truth = square_truth(n)
    generator = torch.Generator().manual_seed(int(seed))
    if noise_model == "uniform":
        u = torch.rand(n_chains, n, n, generator=generator, dtype=torch.float64) * 2 - 1
        alpha = mu * truth + sigma * u
    else:
        if sigma == 0:
            raise ValueError("sigma must be > 0 under the gaussian noise model (it divides alpha).")
        e = torch.randn(n_chains, n, n, generator=generator, dtype=torch.float64)
        alpha = mu * (mu * truth + sigma * e) / sigma**2
    if start == "shared":
        x0 = uniform_start((n, n), 1, seed=seed + 1).expand(n_chains, n, n).clone()
    else:
        x0 = uniform_start((n, n), n_chains, seed=seed + 1)
    return Problem(
        target=IsingPosterior(alpha, lam, boundary="periodic"),
        truth=truth,
        x0=x0,
        lam=lam,
        mu=mu,
        sigma=sigma,
        burn_in=0,
        steps=MIXING_STEPS,
        name=f"square: lambda {lam:g}, mu {mu:g}, sigma {sigma:g}",
    )


def image_problem(
    image,
    lam: float,
    mu: float,
    sigma: float,
    n_chains: int = 4,
    invert: bool = False,
    noise: float = 0.0,
    boundary: str = "free",
    seed: int = 0,
    burn_in: int = 500,
    steps: int = 5000,
) -> Problem:
    """The segmentation posterior of a grayscale image ``I`` in [0, 1] (spec 8).

    ``y = 2 I - 1`` (``1 - 2 I`` with ``invert``: the object is dark), plus optional Gaussian
    noise of standard deviation ``noise`` (for demos; the clean ``y`` thresholded at 0 is then the
    ground truth), and ``alpha = mu * y / sigma^2``. One ``alpha`` is shared by all chains;
    every chain starts from its own uniform random state.
    """
    n_chains = integer(n_chains, "n_chains", 1, 10_000)
    seed = integer(seed, "seed", 0, MAX_SEED)
    burn_in, steps = integer(burn_in, "burn_in", 0), integer(steps, "steps", 0)
    image = as_real_tensor(image, "image")
    if image.dim() != 2 or image.numel() == 0:
        raise ValueError(f"image must be a non-empty 2-D array, got shape {tuple(image.shape)}.")
    if not bool(torch.isfinite(image).all()) or image.min() < 0 or image.max() > 1:
        raise ValueError("image values must be finite and within [0, 1].")
    mu, sigma, noise = real(mu, "mu"), real(sigma, "sigma", 0.0), real(noise, "noise", 0.0)
    if sigma == 0:
        raise ValueError("sigma must be > 0 (it divides the data term).")
    clean = 2.0 * image - 1.0
    if invert:
        clean = -clean
    y = clean
    truth = None
    if noise > 0:
        generator = torch.Generator().manual_seed(int(seed) + 7)
        y = clean + noise * torch.randn(clean.shape, generator=generator, dtype=torch.float64)
        truth = torch.where(clean >= 0, 1.0, -1.0).to(torch.float64)
    alpha = mu * y / sigma**2
    target = IsingPosterior(alpha, lam, boundary=boundary)
    x0 = uniform_start(target.shape, n_chains, seed=seed + 1)
    return Problem(
        target=target,
        truth=truth,
        x0=x0,
        lam=float(lam),
        mu=float(mu),
        sigma=float(sigma),
        burn_in=burn_in,
        steps=steps,
        name="image",
    )
