"""Importance weights in log space: their sums kept batch by batch, and what they estimate.

With ``N`` draws ``x_k ~ q`` and log weights ``l_k = log p~(x_k) - log q(x_k)``:

- ``Z^ = (1/N) sum_k w_k``, so ``log Z^ = logsumexp(l) - log N``;
- its error bar by the delta method: ``se(log Z^) ~ sd(w) / (sqrt(N) mean(w))``. In normalised
  weights ``wbar_k = w_k / sum w``, ``var(w) / mean(w)^2 = N (N sum wbar^2 - 1) / (N - 1)``
  (sample variance), so ``se(log Z^)^2 = (N / ESS - 1) / (N - 1)``: no large number is formed;
- the Kish effective sample size ``ESS = (sum w)^2 / sum w^2`` (between 1 and N);
- self-normalised marginals ``P^(x_i = +1) = sum_k w_k [x_ki = +1] / sum_k w_k`` with the
  delta-method variance ``sum_k wbar_k^2 ([x_ki = +1] - P^)^2``, written as
  ``(A+ (1 - P^)^2 + A- P^2) / S^2`` with ``A+-`` the sums of ``w^2`` over the draws where
  ``x_i = +-1``: a sum of non-negative terms, so no cancellation near ``P = 0`` or ``1``.

The spread of the log weights themselves (their standard deviation, kept by merging each
batch's mean and sum of squared deviations) says why the ESS collapses: under a log-normal
model ``N / ESS ~ exp(var(log w))``, and ``var(log w)`` grows with the number of sites.

The ``keep`` largest log weights are kept as they are, for the Pareto fit to the weights' tail
(``pareto.pareto_khat``: ``tail_size(N) + 1`` of them, about ``3 sqrt(N)``).

Every sum is kept relative to the largest log weight seen so far (``shift``), rescaled when a
later batch holds a larger one, so nothing overflows however peaked the weights are.
"""

from __future__ import annotations

import math

import torch


def kish_ess(log_weights) -> float:
    """``(sum w)^2 / sum w^2`` from log weights, ``exp(2 logsumexp(l) - logsumexp(2 l))``."""
    l = torch.as_tensor(log_weights, dtype=torch.float64).reshape(-1)  # noqa: E741
    if l.numel() == 0:
        raise ValueError("kish_ess needs at least one weight.")
    if not bool(torch.isfinite(l).all()):
        raise ValueError("log weights must be finite (a zero weight is a state q never draws).")
    return math.exp(float(2.0 * torch.logsumexp(l, 0) - torch.logsumexp(2.0 * l, 0)))


class WeightSums:
    """Running sums of a stream of weighted draws: ``S = sum w``, ``S2 = sum w^2``, and per
    site ``W+-`` (sum of ``w`` where ``x_i = +-1``) and ``A+-`` (sum of ``w^2`` there), all
    ``[n]`` float64 and all scaled by ``exp(-shift)`` (``exp(-2 shift)`` for squares), with
    ``shift`` the largest log weight so far. Invariant: ``S = W+ + W-`` and ``S2 = A+ + A-``
    site by site (up to rounding). ``top``: the ``keep`` largest log weights so far."""

    def __init__(self, n_sites: int, keep: int = 0):
        self.keep = keep
        self.top = torch.empty(0, dtype=torch.float64)
        self.count = 0
        self.log_w_mean = 0.0
        self.log_w_m2 = 0.0  # sum of squared deviations from the mean
        self.shift = -math.inf
        self.s = 0.0
        self.s2 = 0.0
        zeros = torch.zeros(n_sites, dtype=torch.float64)
        self.w_plus, self.w_minus = zeros.clone(), zeros.clone()
        self.a_plus, self.a_minus = zeros.clone(), zeros.clone()

    def add(self, x: torch.Tensor, log_w: torch.Tensor) -> None:
        """Fold in draws ``x`` ``[B, n]`` (+-1) with log weights ``log_w`` ``[B]``."""
        if self.keep:
            held = torch.cat([self.top, log_w.to(torch.float64)])
            self.top = torch.topk(held, min(self.keep, held.numel())).values
        top = float(log_w.max())
        if top > self.shift:  # rescale what is held to the new largest weight
            scale = math.exp(self.shift - top) if math.isfinite(self.shift) else 0.0
            self.s, self.s2 = self.s * scale, self.s2 * scale**2
            self.w_plus.mul_(scale), self.w_minus.mul_(scale)
            self.a_plus.mul_(scale**2), self.a_minus.mul_(scale**2)
            self.shift = top
        w = torch.exp(log_w - self.shift)  # [B], at most 1
        plus = (x > 0).to(torch.float64)  # [B, n]
        self.s += float(w.sum())
        self.s2 += float((w * w).sum())
        self.w_plus += w @ plus
        self.w_minus += w @ (1.0 - plus)
        self.a_plus += (w * w) @ plus
        self.a_minus += (w * w) @ (1.0 - plus)
        # Chan et al.'s merge of two (count, mean, M2) summaries: no large sums of squares
        b, mean_b = len(log_w), float(log_w.mean())
        m2_b = float(((log_w - mean_b) ** 2).sum())
        delta, total = mean_b - self.log_w_mean, self.count + b
        self.log_w_m2 += m2_b + delta**2 * self.count * b / total
        self.log_w_mean += delta * b / total
        self.count = total

    # ----------------------------------------------------------------- the estimates
    @property
    def ess(self) -> float:
        """Kish effective sample size ``S^2 / S2`` (the shifts cancel)."""
        return self.s**2 / self.s2

    @property
    def log_z(self) -> float:
        """``log Z^ = log(S / N)``."""
        return math.log(self.s) + self.shift - math.log(self.count)

    @property
    def log_z_se(self) -> float:
        """Delta-method ``se(log Z^) = sqrt((N / ESS - 1) / (N - 1))``; NaN for one draw."""
        n = self.count
        if n < 2:
            return math.nan
        return math.sqrt(max(n / self.ess - 1.0, 0.0) / (n - 1))

    @property
    def log_w_sd(self) -> float:
        """Sample standard deviation of the log weights (NaN for one draw)."""
        return math.sqrt(self.log_w_m2 / (self.count - 1)) if self.count > 1 else math.nan

    @property
    def p_plus(self) -> torch.Tensor:
        """Self-normalised ``P^(x_i = +1)`` ``[n]``."""
        return self.w_plus / (self.w_plus + self.w_minus)

    @property
    def p_plus_se(self) -> torch.Tensor:
        """Delta-method standard error of ``P^(x_i = +1)`` ``[n]`` (see the module docstring)."""
        total = self.w_plus + self.w_minus
        p, one_minus_p = self.w_plus / total, self.w_minus / total
        return torch.sqrt(self.a_plus * one_minus_p**2 + self.a_minus * p**2) / total
