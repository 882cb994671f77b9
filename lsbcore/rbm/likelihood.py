"""How well an RBM explains binary data: exact, pseudo- and AIS-estimated log-likelihoods.

With ``v`` in {0,1}^n, ``h`` in {0,1}^m and ``p~(v) = exp(b.v) prod_j (1 + e^{(c + W v)_j})``,
``log p(v) = log p~(v) - log Z``. ``Z`` sums over both layers; summing one layer out in closed
form leaves a sum over the other, so the smaller layer is enumerated:

    log Z = logsumexp_h [c.h + sum_i softplus(b_i + (W^T h)_i)]        (over 2^m hidden states)
          = logsumexp_v [b.v + sum_j softplus(c_j + (W v)_j)]          (over 2^n visible states).

Larger models get the pseudo-log-likelihood (exact and cheap, a training monitor) or an
annealed importance sampling (AIS) estimate of ``log Z`` (Salakhutdinov and Murray, 2008).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lsbcore.checks import integer
from lsbcore.targets.rbm import RBM, softplus

# Largest layer enumerated for log Z (2^20 states, in blocks)
MAX_EXACT_UNITS = 20
ENUMERATION_BLOCK = 1 << 14
# Probabilities of the factorised baseline are kept off 0 and 1 (a pixel never on in the data)
BASELINE_CLIP = 1e-3


def as_visible(data, n: int | None = None) -> torch.Tensor:
    """``data`` as a float64 ``[N, n]`` tensor of 0/1 (``+-1`` states are mapped to 0/1)."""
    # a copy: the caller's array may be read-only (the cached digits), and is never changed
    rows = (
        data.detach().clone() if isinstance(data, torch.Tensor) else torch.tensor(np.asarray(data))
    )
    if rows.dim() == 1:
        rows = rows.unsqueeze(0)
    if rows.dim() != 2 or rows.shape[0] < 1:
        raise ValueError(f"data must be a 2-D array of rows, got shape {tuple(rows.shape)}.")
    if rows.is_complex() or rows.dtype == torch.bool:
        rows = rows.to(torch.float64) if rows.dtype == torch.bool else rows
    if rows.is_complex():
        raise ValueError("data must hold real 0/1 values, not complex numbers.")
    rows = rows.to(torch.float64)
    if n is not None and rows.shape[1] != n:
        raise ValueError(
            f"data rows must have {n} values (the visible units), got {rows.shape[1]}."
        )
    if bool(((rows == -1) | (rows == 1)).all()) and bool((rows == -1).any()):
        rows = 0.5 * (rows + 1.0)  # +-1 states
    if not bool(((rows == 0) | (rows == 1)).all()):
        raise ValueError("data must hold only 0 and 1 (or -1 and +1) values.")
    return rows


def _enumerate(n_units: int):
    """All ``2^n_units`` binary states, ``[G, n_units]`` float64 blocks."""
    bits = 2 ** torch.arange(n_units, dtype=torch.int64)
    total = 1 << n_units
    for first in range(0, total, ENUMERATION_BLOCK):
        codes = torch.arange(first, min(total, first + ENUMERATION_BLOCK), dtype=torch.int64)
        yield ((codes.unsqueeze(1) & bits) != 0).to(torch.float64)


def exact_log_partition(rbm: RBM) -> float:
    """``log Z`` by enumerating the smaller layer (at most ``MAX_EXACT_UNITS`` units)."""
    if not isinstance(rbm, RBM):
        raise ValueError(f"exact_log_partition needs an RBM, got {type(rbm).__name__}.")
    m, n = rbm.n_hidden, rbm.n_visible
    if min(m, n) > MAX_EXACT_UNITS:
        raise ValueError(
            f"the exact log-likelihood enumerates the smaller layer, which must have at most "
            f"{MAX_EXACT_UNITS} units; this RBM has {n} visible and {m} hidden units "
            "(use ais_log_partition instead)."
        )
    W, b, c = rbm.W, rbm.b_visible, rbm.b_hidden
    if m <= n:  # sum over h: c.h + sum_i softplus(b_i + (W^T h)_i)
        terms = [h @ c + softplus(torch.addmm(b, h, W)).sum(1) for h in _enumerate(m)]
    else:  # sum over v: b.v + sum_j softplus(c_j + (W v)_j)
        terms = [v @ b + softplus(torch.addmm(c, v, W.T)).sum(1) for v in _enumerate(n)]
    return float(torch.logsumexp(torch.cat(terms), 0))


def unnormalised_log_prob(rbm: RBM, visible: torch.Tensor) -> torch.Tensor:
    """``log p~(v) = b.v + sum_j softplus(c_j + (W v)_j)`` per row of 0/1 ``visible``."""
    return visible @ rbm.b_visible + softplus(torch.addmm(rbm.b_hidden, visible, rbm.W.T)).sum(1)


def exact_log_likelihood(rbm: RBM, data) -> float:
    """Mean ``log p(v)`` over the rows of ``data`` (0/1 or +-1, ``[N, n_visible]``), exact:
    ``log Z`` by enumerating the smaller layer (at most ``MAX_EXACT_UNITS`` units)."""
    log_z = exact_log_partition(rbm)
    visible = as_visible(data, rbm.n_visible)
    return float(unnormalised_log_prob(rbm, visible).mean()) - log_z


def pseudo_log_likelihood(rbm: RBM, data) -> float:
    """Mean over rows of ``sum_i log p(v_i | v_-i)``: exact for any size, a training monitor
    (each conditional is ``sigmoid(-s_i)``, ``s_i`` the log-ratio of flipping site i)."""
    if not isinstance(rbm, RBM):
        raise ValueError(f"pseudo_log_likelihood needs an RBM, got {type(rbm).__name__}.")
    visible = as_visible(data, rbm.n_visible)
    s = rbm.flip_log_ratios(2.0 * visible - 1.0)  # [N, n]
    return float(torch.nn.functional.logsigmoid(-s).sum(1).mean())


def baseline_log_likelihood(train_data, data=None) -> float:
    """Mean log-likelihood of ``data`` (default: ``train_data``) under the factorised Bernoulli
    model fitted to ``train_data`` (pixel frequencies clipped to [1e-3, 1 - 1e-3]): the bar an
    RBM must beat."""
    fitted = as_visible(train_data)
    rows = fitted if data is None else as_visible(data, fitted.shape[1])
    p = fitted.mean(0).clamp(BASELINE_CLIP, 1 - BASELINE_CLIP)
    return float((rows * p.log() + (1 - rows) * (1 - p).log()).sum(1).mean())


def ais_log_partition(
    rbm: RBM, n_runs: int = 100, n_temperatures: int = 10_000, seed: int = 0, base=None
) -> tuple[float, float]:
    """An AIS estimate of ``log Z`` and its standard error (delta method over the runs).

    Anneals from a factorised base, visible biases ``base`` (default: ``b_visible``) and no
    weights, ``log Z_0 = sum_i softplus(base_i) + m log 2``, to the RBM through
    ``p_beta(v) ~ exp((1 - beta) base.v + beta b.v) prod_j (1 + e^{beta (c + W v)_j})`` on a
    linear ladder of ``n_temperatures`` inverse temperatures, one exact block Gibbs step per rung.
    """
    if not isinstance(rbm, RBM):
        raise ValueError(f"ais_log_partition needs an RBM, got {type(rbm).__name__}.")
    n_runs = integer(n_runs, "n_runs", 2, 100_000)
    n_temperatures = integer(n_temperatures, "n_temperatures", 2, 10**7)
    seed = integer(seed, "seed", 0, 2**63 - 1)
    W, b, c = rbm.W, rbm.b_visible, rbm.b_hidden
    base = b if base is None else torch.as_tensor(base, dtype=torch.float64).reshape(-1)
    if base.numel() != rbm.n_visible or not bool(torch.isfinite(base).all()):
        raise ValueError(f"base must hold {rbm.n_visible} finite visible biases.")
    generator = torch.Generator().manual_seed(seed)

    def log_p(v, beta):  # log p~_beta(v), hidden units summed out
        return (1 - beta) * (v @ base) + beta * (v @ b) + softplus(beta * (v @ W.T + c)).sum(1)

    v = torch.bernoulli(torch.sigmoid(base).expand(n_runs, -1), generator=generator)
    log_w = torch.zeros(n_runs, dtype=torch.float64)
    betas = torch.linspace(0.0, 1.0, n_temperatures, dtype=torch.float64).tolist()
    for previous, beta in zip(betas[:-1], betas[1:], strict=True):
        log_w += log_p(v, beta) - log_p(v, previous)
        h = torch.bernoulli(torch.sigmoid(beta * (v @ W.T + c)), generator=generator)
        v = torch.bernoulli(
            torch.sigmoid((1 - beta) * base + beta * (b + h @ W)), generator=generator
        )
    log_z0 = float(softplus(base).sum()) + rbm.n_hidden * math.log(2.0)
    log_mean = float(torch.logsumexp(log_w, 0)) - math.log(n_runs)
    # standard error of log(mean w) ~ sd(w) / (sqrt(R) mean(w))
    weights = torch.exp(log_w - log_w.max())
    error = float(weights.std() / (weights.mean() * math.sqrt(n_runs)))
    return log_z0 + log_mean, error


__all__ = [
    "MAX_EXACT_UNITS",
    "exact_log_partition",
    "exact_log_likelihood",
    "unnormalised_log_prob",
    "pseudo_log_likelihood",
    "baseline_log_likelihood",
    "ais_log_partition",
    "as_visible",
]
