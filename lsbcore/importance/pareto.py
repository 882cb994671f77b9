"""The Pareto k-hat diagnostic: how heavy the importance weights' right tail is.

A weighted estimate is only as good as its weights' tail. Fitting a generalised Pareto
distribution to the ``M`` largest weights (above the ``M + 1``-th, the cutoff) gives its shape
``k``: the weights have ``1 / k`` finite moments, so above ``k = 1/2`` their variance is
infinite and the delta-method error bar means nothing, and the estimate itself converges
ever more slowly as ``k`` grows towards 1 (Vehtari, Simpson, Gelman, Yao and Gabry, "Pareto
smoothed importance sampling", JMLR 2024). The Kish ESS cannot say this: it is computed from
the same few large weights it should warn about.

The fit assumes a continuous tail. On a small lattice the largest weights are often a few
states drawn again and again, and the field proposal's weights take values on a lattice
(``log w = lambda sum_ij x_i x_j`` plus a constant: the data term cancels), so its tail is a
staircase: where fewer than ``MIN_DISTINCT`` of the tail's values differ, no fit is made
(NaN); a staircase's fit read ``k`` = 15-25 on 4 x 4 to 8 x 8 windows.

The fit is Zhang and Stephens' (2009) empirical Bayes estimate with the weakly informative
prior of Vehtari et al. (``k`` pulled towards 1/2 as if by 10 more exceedances). The tail's
size for ``N`` independent draws is ``M = floor(3 sqrt(N))`` (``N / 5`` for ``N`` up to 225),
and the paper's reliability threshold is ``min(1 - 1 / log10(N), 0.7)``: below it the estimate's
error falls as expected with ``N``; above it no practical ``N`` makes it trustworthy. The
arviz-stats implementation is the tests' reference (``tests/test_pareto_khat.py``); this one
needs only the ``M + 1`` largest log weights, which ``weights.WeightSums`` keeps while the rest
are folded into sums and dropped.
"""

from __future__ import annotations

import math

import torch

MIN_TAIL = 5  # fewer tail draws than this: no fit (Vehtari et al.)
PRIOR_DRAWS, PRIOR_K = 10, 0.5  # the prior on k: worth 10 exceedances, centred at 1/2
MAX_THRESHOLD = 0.7
MIN_DISTINCT = 0.9  # share of the tail's values (with the cutoff) that must differ for a fit


def tail_size(n: int) -> int:
    """``M``, the draws fitted among ``n`` independent ones."""
    return math.floor(3 * math.sqrt(n)) if n > 225 else n // 5


def threshold(n: int) -> float:
    """The largest ``k`` at which ``n`` draws give a reliable estimate."""
    return min(1.0 - 1.0 / math.log10(n), MAX_THRESHOLD) if n > 1 else -math.inf


def generalised_pareto_shape(exceedances: torch.Tensor) -> float:
    """Zhang and Stephens' estimate of the shape ``k`` from positive ``exceedances`` sorted
    ascending, with Vehtari et al.'s prior. The scale is profiled out: ``k(theta)`` is the mean
    of ``log(1 - theta x)`` and each candidate ``theta`` weighs by its profile likelihood."""
    x = exceedances.to(torch.float64)
    n = x.numel()
    m = 30 + math.isqrt(n)
    j = torch.arange(1, m + 1, dtype=torch.float64)
    quartile = x[int(n / 4 + 0.5) - 1]
    if not quartile > 0:
        raise ValueError("a quarter of the exceedances are 0: no scale to fit.")
    theta = 1.0 / x[-1] + (1.0 - torch.sqrt(m / (j - 0.5))) / (3.0 * quartile)  # [m]
    k = torch.log1p(-theta[:, None] * x).mean(dim=1)  # [m]
    profile = n * (torch.log(-theta / k) - k - 1.0)
    theta_hat = float((torch.softmax(profile, 0) * theta).sum())
    k_hat = float(torch.log1p(-theta_hat * x).mean())
    return (n * k_hat + PRIOR_DRAWS * PRIOR_K) / (n + PRIOR_DRAWS)


def pareto_khat(top_log_weights, n: int) -> float:
    """``k`` of the right tail of ``n`` importance weights, from (at least) their
    ``tail_size(n) + 1`` largest log weights. NaN below ``MIN_TAIL`` tail draws or where the
    tail repeats values (``MIN_DISTINCT``); ``-inf`` when the whole tail is flat (equal
    weights: nothing heavy); ``inf`` when a quarter of the tail is below ``exp(-745)`` of the
    largest weight (a float's smallest): heavier than any fit can read."""
    m = tail_size(n)
    if m < MIN_TAIL:
        return math.nan
    l = torch.as_tensor(top_log_weights, dtype=torch.float64).reshape(-1)  # noqa: E741
    if l.numel() < m + 1:
        raise ValueError(f"pareto_khat needs the {m + 1} largest of {n} log weights.")
    top = torch.topk(l, m + 1).values.flip(0)  # ascending: the cutoff, then the tail
    if not bool(torch.isfinite(top).all()):
        raise ValueError("log weights must be finite.")
    if float(top[-1] - top[0]) < 1e-12 * max(1.0, abs(float(top[-1]))):
        return -math.inf
    if torch.unique(top).numel() < MIN_DISTINCT * (m + 1):
        return math.nan
    w = torch.exp(top - top[-1])  # the largest is 1
    exceedances = w[1:] - w[0]
    if not exceedances[int(m / 4 + 0.5) - 1] > 0:  # distinct, but 0 once exponentiated
        return math.inf
    return generalised_pareto_shape(exceedances)
