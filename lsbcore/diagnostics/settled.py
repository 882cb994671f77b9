"""Has the posterior marginal settled? Each site's P known to within a stated Monte Carlo error,
and the chains, started apart, in agreement about every site's class.

What a run shows is ``P(x_i = +1)`` per site and the mask ``P >= 1/2``, so the verdict asks of
the estimate what the page needs from it:

1. **Precision.** Each site's estimate ``P_i`` is known to within ``TOLERANCE`` (0.1): the
   half-width of a 95% interval for it, Student's ``t`` quantile with ``M - 1`` degrees of
   freedom times its standard error (2.36 for 8 batches, 2.20 for 12). That is the
   precision the page reads: the mask ``P >= 1/2`` is then right wherever ``P`` is at least 0.1
   from 1/2, and a site nearer 1/2 is shown as uncertain either way (its entropy is above 0.97
   bits whether ``P`` is 0.4 or 0.6); the probability map is read in tenths. The error
   comes from batch means: the latter half of every chain's draws is cut into the closed blocks
   it spans (two or three per chain, each at least ``MIN_DRAWS`` draws), and the spread of the
   ``M`` batches' means around the pooled mean gives the standard error ``se_i``
   (``batch_means_error``; ``sd / sqrt(M)`` for equal batches). Batches from different
   chains that started apart (half at the data, half at random) are independent, so a region
   stuck where one chain started shows as a large spread, not as a small one.
2. **Agreement.** No chain's mean at a site lies more than ``STUCK_GAP`` (0.5) from another's:
   the chains agree about every site's class. This catches a frozen region however many
   chains there are (with many chains one stuck chain moves the standard error little).

Settled: at most ``UNSETTLED_LIMIT`` (1%) of the sites fail each test, with at least
``MIN_DRAWS`` draws per batch. A fraction rather than every site, because a lattice has tens of
thousands of sites: the error estimate's own noise (about ``M - 1`` degrees of freedom) puts a
few sites over any bound by chance, while a region stuck in one chain fails both tests at once.

Why not split R-hat at 1.01 (what this module did before, and still reports as ``rhat``)?
R-hat compares the chains' spread with the spin's own posterior variance ``P (1 - P)``, a
*relative* bound: ``R <= 1.01`` asks for about 50 effective draws per half-chain at every site,
however precisely ``P`` is already known. At a site where ``P = 0.99`` and the spin leaves +1
once in a hundred sweeps, that is thousands of sweeps to pin down a number already known to
within 0.01; on textured photos, where 3-7% of the lattice is genuinely uncertain
(0.05 < P < 0.95), more than 1% of the sites stayed above 1.01 for 5,000 sweeps (a cat photo,
coins at lambda 1.5; BENCHMARKS.md, issue 30). An absolute bound on the error of ``P`` is
what a reader of the probability map and the mask needs, and with Rao-Blackwellised draws
(``rao_blackwell``: each site's conditional probability, not its spin) that error is smaller
for the same sweeps.

The draws are given as per-chain block sums of values in [0, 1] (spins ``(x + 1) / 2`` or
conditional probabilities): ``BlockSums`` holds at most ``max_blocks`` blocks per chain and
doubles their length (merging neighbours) when they are full, so memory stays ``max_blocks x
chains x sites`` however long the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "MIN_DRAWS",
    "RHAT_LIMIT",
    "STUCK_GAP",
    "TOLERANCE",
    "UNSETTLED_LIMIT",
    "BlockSums",
    "Settledness",
    "batch_means_error",
    "binary_split_rhat",
]

TOLERANCE = 0.1  # half-width of a 95% interval for P, per site
STUCK_GAP = 0.5  # chains whose means at a site are further apart disagree about its class
UNSETTLED_LIMIT = 0.01
MIN_DRAWS = 20
RHAT_LIMIT = 1.01  # reported (``max_rhat``), not judged


@dataclass(frozen=True)
class Settledness:
    """How far a run's marginal has settled (see the module docstring)."""

    settled: bool
    error: np.ndarray  # [*site shape]: half-width of P's 95% interval per site
    unsettled_fraction: float  # fraction of sites whose error exceeds TOLERANCE
    disagreeing_fraction: float  # fraction of sites where two chains' means differ > STUCK_GAP
    rhat: np.ndarray  # [*site shape]: split R-hat of the spin over the batches (reported)
    max_rhat: float
    max_error: float
    max_change: float  # max over sites of |P(first batches) - P(last batches)|, chains pooled
    draws: int  # draws per batch (the shortest)
    batches: int  # chains x blocks in the window

    @property
    def reason(self) -> str:
        """One sentence for the page."""
        if self.draws < MIN_DRAWS:
            return f"Too few draws so far ({self.draws} per batch; {MIN_DRAWS} needed)."
        precise = (
            f"P is known to within ±{TOLERANCE} at {1 - self.unsettled_fraction:.1%} of the "
            f"sites ({1 - UNSETTLED_LIMIT:.0%} needed)"
        )
        if self.disagreeing_fraction > UNSETTLED_LIMIT:
            return (
                f"Not settled: the chains disagree about the class of "
                f"{self.disagreeing_fraction:.1%} of the sites (a region stuck where a chain "
                f"started); {precise}."
            )
        if self.settled:
            return f"Settled: {precise}, and the chains agree."
        return f"Not settled yet: {precise}."


def _batches(means, lengths) -> tuple[np.ndarray, np.ndarray]:
    """``means`` ``[M >= 2, D]`` and ``lengths`` ``[M]`` as float64 arrays, or a ValueError."""
    means = np.asarray(means, dtype=np.float64)
    lengths = np.asarray(lengths, dtype=np.float64)
    if means.ndim != 2 or means.shape[0] < 2 or lengths.shape != (means.shape[0],):
        raise ValueError(
            f"means must be [M >= 2, D] with lengths [M]; got {means.shape} and {lengths.shape}."
        )
    return means, lengths


def binary_split_rhat(means: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Split R-hat per site from the half-chains' (or batches') means of a 0/1 variable.

    ``means`` ``[M, D]``: each half-chain's mean of ``(x + 1) / 2`` (or of its conditional
    probability, which has the same expectation) per site; ``lengths`` ``[M]``: its number of
    draws (the formula uses their mean, as for equal halves). ``W`` is the mean within-half
    variance of the spin ``n/(n-1) p (1 - p)``, ``B/n`` the variance of the half means;
    ``R = sqrt(((n - 1)/n W + B/n) / W)``, 1 where both vanish, inf where only ``W`` does.
    """
    means, lengths = _batches(means, lengths)
    if lengths.min() < 2:
        raise ValueError("every half-chain needs at least 2 draws.")
    n = float(lengths.mean())
    within = (lengths / (lengths - 1))[:, None] * means * (1.0 - means)
    w = within.mean(0)
    between = means.var(0, ddof=1)
    total = (n - 1.0) / n * w + between
    with np.errstate(divide="ignore", invalid="ignore"):
        rhat = np.sqrt(total / w)
    still = w <= 1e-15
    rhat[still] = np.where(between[still] <= 1e-15, 1.0, math.inf)
    return rhat


def batch_means_error(means: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Standard error per site of the pooled mean of ``M`` batches.

    ``means`` ``[M, D]``: each batch's mean per site; ``lengths`` ``[M]``: its draws. The pooled
    mean is ``P = sum_b w_b m_b`` with ``w_b = n_b / N``, and ``se^2 = sum_b w_b^2 (m_b - P)^2 /
    (1 - sum_b w_b^2)``: unbiased for ``Var(P)`` when the batch means are independent with
    variances proportional to ``1 / n_b``; for equal batches the familiar ``var(m_b) / M``.
    """
    means, lengths = _batches(means, lengths)
    if lengths.min() < 1:
        raise ValueError("every batch needs at least one draw.")
    weights = (lengths / lengths.sum())[:, None]
    pooled = (weights * means).sum(0)
    spread = (weights**2 * (means - pooled) ** 2).sum(0)
    return np.sqrt(spread / (1.0 - float((weights**2).sum())))


class BlockSums:
    """Per-chain sums of draws in [0, 1] (spins ``(x + 1) / 2`` or conditional probabilities)
    over consecutive blocks (bounded memory).

    ``add(total, count)`` adds ``count`` draws given by their per-chain sum ``total``
    ``[B, *shape]``; a block closes once it holds at least its target length, and when
    ``max_blocks`` are closed neighbours merge pairwise and the target length doubles.
    """

    def __init__(self, max_blocks: int = 8) -> None:
        if isinstance(max_blocks, bool) or not isinstance(max_blocks, int) or max_blocks < 4:
            raise ValueError(f"max_blocks must be an integer >= 4, got {max_blocks!r}.")
        if max_blocks % 2:
            raise ValueError(f"max_blocks must be even, got {max_blocks}.")
        self.max_blocks = max_blocks
        self.reset()

    def reset(self) -> None:
        self._sums: list[torch.Tensor] = []
        self._counts: list[int] = []
        self._open: torch.Tensor | None = None
        self._open_count = 0
        self.block_length = 1

    @property
    def n_closed(self) -> int:
        return len(self._sums)

    @property
    def block_counts(self) -> list[int]:
        """Draws in each closed block, oldest first."""
        return list(self._counts)

    @property
    def count(self) -> int:
        return sum(self._counts) + self._open_count

    def add(self, total: torch.Tensor, count: int) -> None:
        if count <= 0:
            return
        total = total.detach().to(device="cpu", dtype=torch.float32)
        if self._open is None:
            self._open = torch.zeros_like(total)
        elif self._open.shape != total.shape:
            raise ValueError(
                f"total has shape {tuple(total.shape)}, the blocks {tuple(self._open.shape)}."
            )
        self._open += total
        self._open_count += int(count)
        if self._open_count >= self.block_length:
            self._sums.append(self._open)
            self._counts.append(self._open_count)
            self._open, self._open_count = None, 0
            if len(self._sums) == self.max_blocks:
                self._merge()

    def _merge(self) -> None:
        pairs = range(0, self.max_blocks, 2)
        self._sums = [self._sums[i] + self._sums[i + 1] for i in pairs]
        self._counts = [self._counts[i] + self._counts[i + 1] for i in pairs]
        self.block_length *= 2

    def window(self) -> list[int] | None:
        """The closed blocks the verdict and the estimate use: the latest half of them
        (``k // 2`` of ``k`` closed, so 40-50% of the draws: the earlier part of the run is its
        warm-up). None before four blocks are closed."""
        k = len(self._sums)
        if k < 4:
            return None
        return list(range(k - k // 2, k))

    def window_mean(self) -> np.ndarray | None:
        """``P(x = +1)`` per site from the window's draws, chains pooled ``[*shape]``."""
        window = self.window()
        if window is None:
            return None
        total = sum(self._sums[i] for i in window)
        return (total.sum(0) / (sum(self._counts[i] for i in window) * total.shape[0])).numpy()

    def settledness(self) -> Settledness | None:
        """The verdict of the module docstring over the window; None before it exists."""
        window = self.window()
        if window is None:
            return None
        chains, shape = self._sums[0].shape[0], tuple(self._sums[0].shape[1:])
        counts = np.array([self._counts[i] for i in window], dtype=np.float64)
        sums = torch.stack([self._sums[i].reshape(chains, -1) for i in window]).double()
        means = (sums / torch.from_numpy(counts).view(-1, 1, 1)).reshape(-1, sums.shape[-1])
        means = means.numpy()  # [blocks x chains, D], block-major
        lengths = np.repeat(counts, chains)
        draws = int(counts.min())
        # a 95% interval from M batches: Student's t with M - 1 degrees of freedom
        from scipy.stats import t as student_t  # a second to import: not on the page's first run

        error = float(student_t.ppf(0.975, len(means) - 1)) * batch_means_error(means, lengths)
        rhat = binary_split_rhat(means, lengths) if draws >= 2 else np.full(means.shape[1], np.inf)
        per_chain = (sums.sum(0) / counts.sum()).numpy()  # [chains, D]
        gap = per_chain.max(0) - per_chain.min(0)
        unsettled = float(np.mean(error > TOLERANCE))
        disagreeing = float(np.mean(gap > STUCK_GAP))
        half = len(window) // 2
        first = sums[:half].sum((0, 1)) / (counts[:half].sum() * chains)
        second = sums[half:].sum((0, 1)) / (counts[half:].sum() * chains)
        return Settledness(
            settled=draws >= MIN_DRAWS
            and unsettled <= UNSETTLED_LIMIT
            and disagreeing <= UNSETTLED_LIMIT,
            error=error.reshape(shape),
            unsettled_fraction=unsettled,
            disagreeing_fraction=disagreeing,
            rhat=rhat.reshape(shape),
            max_rhat=float(rhat.max()),
            max_error=float(error.max()),
            max_change=float((first - second).abs().max()),
            draws=draws,
            batches=len(means),
        )
