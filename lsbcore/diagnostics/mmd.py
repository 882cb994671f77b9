"""The maximum mean discrepancy of the RBM experiment, as the public Gibbs-with-Gradients code
computes it.

Kernel: the exponentiated average Hamming distance ``k(x, y) = exp(-mean_i [x_i != y_i])``
(its ``mmd.exp_avg_hamming``). Statistic: the biased V-statistic (its ``rbm_sample.py`` builds
``MMD(exp_avg_hamming, use_ustat=False)``),

    MMD^2(a, b) = mean_{i,j} k(a_i, a_j) + mean_{i,j} k(b_i, b_j) - 2 mean_{i,j} k(a_i, b_j),

which keeps the diagonal ``k(x, x) = 1``: it is never negative (the kernel is positive
definite), so its ``log10`` is defined, and two samples of one law still sit at a positive
floor of order ``1 / N`` (the noise floor of ``ground_truth.noise_floor``).

On +-1 states the mean mismatch is ``(n - x . y) / (2 n)``: one matrix product, exact in
float64 (integers below 2^53).
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["as_spins", "hamming_kernel", "log_mmd", "mmd"]

# Rows per block of the kernel matrix: bounds the [block, N] intermediate (32 MB of float64)
KERNEL_BLOCK = 1 << 22


def as_spins(x, name: str = "samples") -> torch.Tensor:
    """``x`` ``[N, n]`` of 0/1 or of +-1 (tensor or array) as float64 +-1 on the CPU."""
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(np.ascontiguousarray(x))
    if not isinstance(x, torch.Tensor):
        raise ValueError(
            f"{name} must be a tensor or array of shape [N, n], got {type(x).__name__}."
        )
    if x.dim() != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(
            f"{name} must have shape [N, n] with N, n >= 1 (one sample per row), got "
            f"{tuple(x.shape)}."
        )
    x = x.detach().to("cpu", torch.float64)
    zero, minus = bool((x == 0).any()), bool((x == -1).any())
    if not bool(((x == 1) | (x == 0) | (x == -1)).all()) or (zero and minus):
        raise ValueError(f"{name} must hold binary states, all 0/1 or all -1/+1.")
    return torch.where(x > 0, 1.0, -1.0).to(torch.float64)


def hamming_kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``[Na, Nb]``: ``exp(-mean_i [a_i != b_i])`` for +-1 rows ``a [Na, n]``, ``b [Nb, n]``."""
    n = a.shape[1]
    out = torch.empty(a.shape[0], b.shape[0], dtype=torch.float64)
    rows = max(1, KERNEL_BLOCK // max(1, b.shape[0]))
    for first in range(0, a.shape[0], rows):
        mismatch = (n - a[first : first + rows] @ b.T) / (2.0 * n)  # mean of [a_i != b_i]
        out[first : first + rows] = torch.exp(-mismatch)
    return out


def mmd(a, b, b_self: float | None = None) -> float:
    """Squared MMD (V-statistic) between the samples ``a [Na, n]`` and ``b [Nb, n]`` (0/1 or
    +-1) under the exponentiated average Hamming kernel; see the module docstring.

    ``b_self``: ``mean k(b, b')`` if already known (``hamming_kernel(b, b).mean()``), so that
    many samples compared with one truth do not recompute its ``Nb x Nb`` term."""
    a, b = as_spins(a, "a"), as_spins(b, "b")
    if a.shape[1] != b.shape[1]:
        raise ValueError(
            f"a and b must have the same number of sites per sample, got {a.shape[1]} and "
            f"{b.shape[1]}."
        )
    if b_self is None:
        b_self = float(hamming_kernel(b, b).mean())
    value = float(hamming_kernel(a, a).mean()) + b_self - 2.0 * float(hamming_kernel(a, b).mean())
    return max(0.0, value)  # >= 0 in exact arithmetic; rounding may dip below


def log_mmd(a, b, b_self: float | None = None) -> float:
    """``log10 mmd(a, b)`` (``-inf`` when the two samples hold the same states equally often)."""
    value = mmd(a, b, b_self)
    return math.log10(value) if value > 0.0 else -math.inf
