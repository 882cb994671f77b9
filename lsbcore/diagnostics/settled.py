"""Has the posterior marginal settled? Split R-hat per site, from block sums of the states.

A run's estimate of ``P(x_i = +1)`` has settled when chains started apart agree about it, and
each chain agrees with itself over time. That is split R-hat (Gelman et al., BDA3 11.4) applied
to every site's spin: the latter part of every chain is cut in two halves, and the variance of
the half-chains' means is compared with the variance within them. A site whose half-chains
all sit at one value has ``R = 1``; one stuck at different values in different chains has
``R = inf`` (a frozen cluster: the chains disagree and nothing within them shows it).

For a binary spin a half-chain's variance follows from its mean (``n/(n-1) p (1 - p)``), so the
per-site counts of ``x = +1`` over blocks of consecutive draws are all R-hat needs: no draw is
kept. ``BlockSums`` holds at most ``max_blocks`` such blocks per chain and doubles their
length (merging neighbours) when they are full, so memory stays ``max_blocks x chains x
sites`` however long the run.

The verdict, ``Settledness.settled``: at most ``UNSETTLED_LIMIT`` (1%) of the sites have split
R-hat above ``RHAT_LIMIT`` (1.01, Vehtari et al. 2021), with at least ``MIN_DRAWS`` draws per
half-chain. A fraction rather than the maximum, because a lattice has tens of thousands of
sites: R-hat's own sampling noise puts a few uncertain boundary sites over 1.01 by chance in
any finite run, while a whole region stuck in one chain lifts the fraction past the limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "MIN_DRAWS",
    "RHAT_LIMIT",
    "UNSETTLED_LIMIT",
    "BlockSums",
    "Settledness",
    "binary_split_rhat",
]

RHAT_LIMIT = 1.01
UNSETTLED_LIMIT = 0.01
MIN_DRAWS = 20


@dataclass(frozen=True)
class Settledness:
    """How far a run's marginal has settled (see the module docstring)."""

    settled: bool
    rhat: np.ndarray  # [*site shape]: split R-hat per site (inf: chains stuck apart)
    unsettled_fraction: float  # fraction of sites with R-hat > RHAT_LIMIT
    max_rhat: float
    max_change: float  # max over sites of |P(first half) - P(second half)|, chains pooled
    draws: int  # draws per half-chain (the shortest)
    half_chains: int

    @property
    def reason(self) -> str:
        """One sentence for the page."""
        share = f"{self.unsettled_fraction:.1%} of the sites have split R-hat above {RHAT_LIMIT}"
        if self.draws < MIN_DRAWS:
            return f"Too few draws so far ({self.draws} per half-chain; {MIN_DRAWS} needed)."
        if self.settled:
            return f"Settled: {share} (at most {UNSETTLED_LIMIT:.0%} allowed)."
        return f"Not settled yet: {share} (at most {UNSETTLED_LIMIT:.0%} allowed)."


def binary_split_rhat(means: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Split R-hat per site from the half-chains' means of a 0/1 variable.

    ``means`` ``[M, D]``: each half-chain's mean of ``(x + 1) / 2`` per site; ``lengths``
    ``[M]``: its number of draws (the formula uses their mean, as for equal halves).
    ``W`` is the mean within-half variance ``n/(n-1) p (1 - p)``, ``B/n`` the variance of the
    half means; ``R = sqrt(((n - 1)/n W + B/n) / W)``, 1 where both vanish, inf where only
    ``W`` does.
    """
    means = np.asarray(means, dtype=np.float64)
    lengths = np.asarray(lengths, dtype=np.float64)
    if means.ndim != 2 or means.shape[0] < 2 or lengths.shape != (means.shape[0],):
        raise ValueError(
            f"means must be [M >= 2, D] with lengths [M]; got {means.shape} and {lengths.shape}."
        )
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


class BlockSums:
    """Per-chain sums of ``(x + 1) / 2`` over consecutive blocks of draws (bounded memory).

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

    def window(self) -> tuple[list[int], list[int]] | None:
        """The closed blocks of the two halves: the latest ``2h`` closed blocks, ``h = k // 4``
        of ``k`` closed (so between a quarter and a half of the draws: the earlier part of
        the run is its warm-up). None before four blocks are closed."""
        k = len(self._sums)
        h = k // 4
        if h == 0:
            return None
        return list(range(k - 2 * h, k - h)), list(range(k - h, k))

    def window_mean(self) -> np.ndarray | None:
        """``P(x = +1)`` per site from the window's draws, chains pooled ``[*shape]``."""
        window = self.window()
        if window is None:
            return None
        blocks = window[0] + window[1]
        total = sum(self._sums[i] for i in blocks)
        return (total.sum(0) / (sum(self._counts[i] for i in blocks) * total.shape[0])).numpy()

    def settledness(self) -> Settledness | None:
        """Split R-hat per site over the window; None before the window exists."""
        window = self.window()
        if window is None:
            return None
        halves = []
        for blocks in window:
            total = sum(self._sums[i] for i in blocks)
            halves.append((total, sum(self._counts[i] for i in blocks)))
        chains, shape = halves[0][0].shape[0], halves[0][0].shape[1:]
        means = torch.cat([total.reshape(chains, -1) / n for total, n in halves]).double()
        lengths = np.array([n for _, n in halves for _ in range(chains)], dtype=np.float64)
        draws = int(lengths.min())
        if draws < 2:
            rhat = np.full(means.shape[1], math.inf)
        else:
            rhat = binary_split_rhat(means.numpy(), lengths)
        unsettled = float(np.mean(rhat > RHAT_LIMIT))
        first, second = (means[:chains].mean(0), means[chains:].mean(0))
        return Settledness(
            settled=draws >= MIN_DRAWS and unsettled <= UNSETTLED_LIMIT,
            rhat=rhat.reshape(tuple(shape)),
            unsettled_fraction=unsettled,
            max_rhat=float(rhat.max()),
            max_change=float((first - second).abs().max()),
            draws=draws,
            half_chains=2 * chains,
        )
