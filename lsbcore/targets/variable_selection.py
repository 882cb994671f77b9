"""Bayesian variable selection: the marginal posterior of which features a linear regression uses.

The flow paper's third experiment (Jaini, Nielsen and Welling 2021, "Bayesian Variable
Selection", Table 3, after Schaefer and Chopin 2013). Data: features ``X [d, k]`` (``d``
observations of ``k`` features) and responses ``y [d]``. A state ``x in {-1, +1}^k`` is the
inclusion vector, ``gamma_i = (1 + x_i) / 2``: ``x_i = +1`` puts feature ``i`` in the model.
With ``X_g`` the ``q`` included columns, the model is the standard conjugate one (George and
McCulloch 1997, section 2 of Schaefer and Chopin 2013):

    y | beta, sigma^2, gamma ~ N(X_g beta, sigma^2 I_d)
    beta | sigma^2, gamma    ~ N(0, nu2 sigma^2 I_q)
    sigma^2                  ~ InvGamma(w / 2, w lam / 2)
    gamma                    ~ Uniform({0, 1}^k)

Integrating ``beta`` and ``sigma^2`` out in closed form, with ``A = X_g' X_g + I_q / nu2`` and
``b = X_g' y``,

    log p~(x) = log p(y, gamma)
              = lgamma((d + w) / 2) - lgamma(w / 2) - (d / 2) log(pi) + (w / 2) log(w lam)
                - (q / 2) log(nu2) - (1 / 2) log det A
                - ((d + w) / 2) log(w lam + y'y - b' A^-1 b) - k log 2,

a normalised log joint (so ``log p~`` is comparable with the paper's ``log pi(theta)`` column up to
the choice of data). Defaults: ``nu2 = 10``, ``w = 4``, ``lam = 1``. The paper sets them "as in
George and McCulloch (1997)" without numbers (its extracted text is garbled: "IGamma(2/2, alpha
w / 2)"): George and McCulloch's conjugate setting is this one, ``sigma^2 ~ IG(nu/2, nu lambda/2)``
with small ``nu`` and ``lambda`` near the noise variance, and ``beta``'s prior variance a multiple
of ``sigma^2``; our numbers are a standard choice (a weak prior on ``sigma^2`` of mean
``lam w / (w - 2) = 2`` for noise of variance 1, slopes of prior standard deviation
``sqrt(10) sigma``), not the paper's, which it does not state.

Computation, batched over chains: the included indices of every chain are gathered first and
padded to the largest ``q`` of the batch with identity rows (the padding adds nothing to
``log det A`` or ``b' A^-1 b``), one batched Cholesky per call. ``flip_log_ratios`` adds or
removes each feature by rank-one algebra on that chain's ``A^-1`` (a Schur complement for an
addition, a diagonal entry of ``A^-1`` for a removal), all ``k`` at once in ``O(k q^2)``: no
``k`` re-factorisations (measured: ``python -m lsbcore.studies.variable_selection --timing``).
The Schur complement is at least ``1 / nu2``, so an addition never divides by a vanishing number.

``"gradient"``: the extension of ``log p~`` to ``gamma in [0, 1]^k`` that puts ``X diag(gamma) X'``
in place of ``X_g X_g'`` in ``y``'s marginal covariance ``sigma^2 (I + nu2 X_g X_g')`` is smooth and
exact at the states; its gradient there is closed-form (from the same ``A^-1``), so GWG and the
other gradient samplers run. It is given at the states ``+-1`` only, where the samplers ask.

``synthetic_regression`` draws the Table 3 data (see it for the generator).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from lsbcore.checks import integer, real
from lsbcore.targets.base import MAX_VALUES, Target
from lsbcore.targets.design import MAX_FEATURES, design

# The largest k: A's padded copies are [B, q, q] and the ratio blocks [B, q, k] per call
# Hyperparameters beyond this are numerically meaningless for a float64 log marginal
MAX_HYPER = 1e12
DEFAULT_NU2, DEFAULT_W, DEFAULT_LAM = 10.0, 4.0, 1.0
# synthetic_regression's defaults: neighbouring features correlate (AR(1)), so the posterior
# must choose among close substitutes; slopes of either sign, some near the detection limit
DEFAULT_CORRELATION = 0.5
SLOPE_RANGE = (0.3, 1.0)


@dataclass(frozen=True)
class RegressionData:
    """A regression data set: ``X [d, k]``, ``y [d]``, and where drawn, the true slopes
    ``beta [k]`` and the informative features (sorted indices)."""

    X: np.ndarray
    y: np.ndarray
    beta: np.ndarray
    informative: tuple[int, ...]


def synthetic_regression(
    n_features: int,
    n_informative: int,
    n_observations: int | None = None,
    correlation: float = DEFAULT_CORRELATION,
    noise: float = 1.0,
    seed: int = 0,
) -> RegressionData:
    """Synthetic data like Table 3's, drawn from ``numpy.random.default_rng(seed)``.

    Rows of ``X`` are ``N(0, S)`` with ``S_ij = correlation^|i - j|`` (neighbouring features are
    substitutes); ``n_informative`` features chosen uniformly have slopes of random sign and
    magnitude uniform in ``SLOPE_RANGE``, the rest 0; ``y = X beta + noise * N(0, I)``.
    ``n_observations`` defaults to ``n_features`` (``d = k``: the paper does not give ``d``).
    """
    k = integer(n_features, "n_features", 1, MAX_FEATURES)
    m = integer(n_informative, "n_informative", 0, k)
    d = k if n_observations is None else integer(n_observations, "n_observations", 1, MAX_VALUES)
    if d * k > MAX_VALUES:
        raise ValueError(f"X of {d:,} x {k:,} is too large; at most {MAX_VALUES:,} numbers.")
    rho = real(correlation, "correlation", 0.0, 0.99)
    noise = real(noise, "noise", 0.0, MAX_HYPER)
    rng = np.random.default_rng(integer(seed, "seed", 0, 2**63 - 1))
    # AR(1) columns: x_j = rho x_{j-1} + sqrt(1 - rho^2) e_j keeps unit variance
    e = rng.standard_normal((d, k))
    X = np.empty((d, k))
    X[:, 0] = e[:, 0]
    for j in range(1, k):
        X[:, j] = rho * X[:, j - 1] + math.sqrt(1.0 - rho**2) * e[:, j]
    informative = np.sort(rng.choice(k, size=m, replace=False))
    beta = np.zeros(k)
    beta[informative] = rng.choice([-1.0, 1.0], size=m) * rng.uniform(*SLOPE_RANGE, size=m)
    y = X @ beta + noise * rng.standard_normal(d)
    return RegressionData(X, y, beta, tuple(int(i) for i in informative))


class VariableSelection(Target):
    """The marginal posterior over inclusion vectors of a conjugate linear regression (see the
    module docstring): ``X [d, k]``, ``y [d]``, hyperparameters ``nu2``, ``w``, ``lam > 0``."""

    provides = frozenset({"gradient"})

    def __init__(self, X, y, nu2=DEFAULT_NU2, w=DEFAULT_W, lam=DEFAULT_LAM):
        X, y = design(X, y, "response")
        d, k = X.shape
        self.nu2, self.w, self.lam = (
            _positive(nu2, "nu2"), _positive(w, "w"), _positive(lam, "lam")
        )  # fmt: skip
        self.n_sites, self.shape = k, (k,)
        self.n_observations = d
        self.X, self.y = X.clone(), y.clone()
        self.xtx = X.T @ X
        self.xty = X.T @ y
        self.yty = float(y @ y)
        self.constant = (
            math.lgamma((d + self.w) / 2) - math.lgamma(self.w / 2) - d / 2 * math.log(math.pi)
            + self.w / 2 * math.log(self.w * self.lam) - k * math.log(2.0)
        )  # fmt: skip

    @classmethod
    def from_data(cls, data: RegressionData, **hyper) -> VariableSelection:
        return cls(data.X, data.y, **hyper)

    def describe(self) -> str:
        return (
            f"variable selection over {self.n_sites:,} features ({self.n_observations:,} "
            "observations)"
        )

    # ----------------------------------------------------------------- the closed form
    def _factor(self, flat: torch.Tensor):
        """Per chain: the included indices padded ``idx [B, Q]``, which are real ``valid``,
        ``q [B]``, the Cholesky factor ``L`` of the padded ``A`` and ``b [B, Q]``."""
        xtx, xty = self.xtx.to(flat.device), self.xty.to(flat.device)
        included = flat > 0
        q = included.sum(1)  # long: index arithmetic; _value reads it as float64
        width = max(int(q.max()), 1) if len(flat) else 1
        # included sites first, in index order (a stable sort of 0 = in, 1 = out)
        idx = torch.sort((~included).to(torch.int8), dim=1, stable=True).indices[:, :width]
        valid = torch.arange(width, device=flat.device) < q.unsqueeze(1)
        pair = valid.unsqueeze(2) & valid.unsqueeze(1)
        a = torch.where(pair, xtx[idx.unsqueeze(2), idx.unsqueeze(1)], 0.0)
        # the ridge 1/nu2 on real positions, 1 on padded ones (float64: where() of two
        # Python numbers would round 1/nu2 to float32)
        ridge = torch.full(valid.shape, 1.0 / self.nu2, dtype=torch.float64, device=flat.device)
        a = a + torch.diag_embed(torch.where(valid, ridge, 1.0))
        b = torch.where(valid, xty[idx], 0.0)
        return idx, valid, q, torch.linalg.cholesky(a), b

    def _value(self, q, chol, b):
        """``log p~`` and ``S = w lam + y'y - b'A^-1 b`` ``[B]`` from ``_factor``'s parts."""
        log_det = 2.0 * torch.log(torch.diagonal(chol, dim1=1, dim2=2)).sum(1)
        z = torch.linalg.solve_triangular(chol, b.unsqueeze(2), upper=False).squeeze(2)
        # y'y - b'A^-1 b = y' (I + nu2 X_g X_g')^-1 y >= 0: the clamp only meets rounding
        s = self.w * self.lam + (self.yty - (z * z).sum(1)).clamp(min=0.0)
        d_w = (self.n_observations + self.w) / 2
        log_p = (
            self.constant - q.double() * (math.log(self.nu2) / 2) - log_det / 2 - d_w * torch.log(s)
        )
        return log_p, s

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        flat = self._flat(x)
        _, _, q, chol, b = self._factor(flat)
        return self._value(q, chol, b)[0]

    def _updates(self, flat: torch.Tensor):
        """``log p~`` ``[B]``, ``S`` ``[B]`` and, for every feature ``j`` ``[B, k]``:
        ``c_j = x_j' M^-1 x_j + 1/nu2`` and ``r_j = x_j' M^-1 y``, ``M = I + nu2 X_g X_g'``
        (Woodbury: ``c_j = xtx_jj + 1/nu2 - G_j' A^-1 G_j``, ``r_j = xty_j - G_j' A^-1 b`` with
        ``G_j = X_g' x_j``), with the padded positions' ``A^-1`` diagonal and ``A^-1 b`` and the
        indices they belong to."""
        idx, valid, q, chol, b = self._factor(flat)
        log_p, s = self._value(q, chol, b)
        xtx, xty = self.xtx.to(flat.device), self.xty.to(flat.device)
        a_inv = torch.cholesky_inverse(chol)  # [B, Q, Q]
        g = torch.where(valid.unsqueeze(2), xtx[idx], 0.0)  # [B, Q, k]
        h = (a_inv @ b.unsqueeze(2)).squeeze(2)  # [B, Q]: the posterior mean of beta
        c = torch.diagonal(xtx) + 1.0 / self.nu2 - (g * (a_inv @ g)).sum(1)
        r = xty - (g * h.unsqueeze(2)).sum(1)
        return log_p, s, c, r, idx, valid, torch.diagonal(a_inv, dim1=1, dim2=2), h

    def flip_log_ratios(self, x: torch.Tensor) -> torch.Tensor:
        flat = self._flat(x)
        _, s, c, r, idx, valid, a_diag, h = self._updates(flat)
        # adding j: det A grows by c_j, S falls by r_j^2 / c_j, q by one
        d_log_det = torch.log(c)
        d_s = -(r * r) / c
        d_q = torch.ones_like(c)
        # removing the feature at padded position p: det A shrinks by (A^-1)_pp, S rises by
        # (A^-1 b)_p^2 / (A^-1)_pp; padded positions scatter onto a spare column k, then dropped
        spare = torch.where(valid, idx, self.n_sites)
        pad = flat.new_zeros(len(flat), 1)

        def put(values, into):
            out = torch.cat([into, pad], 1)
            return out.scatter(1, spare, torch.where(valid, values, 0.0))[:, : self.n_sites]

        d_log_det = put(torch.log(a_diag), torch.where(flat > 0, 0.0, d_log_det))
        d_s = put(h * h / a_diag, torch.where(flat > 0, 0.0, d_s))
        d_q = torch.where(flat > 0, -1.0, d_q)
        d_w = (self.n_observations + self.w) / 2
        # log(S + dS) - log S, with S + dS >= w lam > 0 in exact arithmetic
        d_log_s = torch.log1p((d_s / s.unsqueeze(1)).clamp(min=-1.0 + 1e-16))
        ratios = -d_q * (math.log(self.nu2) / 2) - d_log_det / 2 - d_w * d_log_s
        return ratios.view_as(x)

    # ----------------------------------------------------------------- the gradient
    def log_prob_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``log p~`` ``[B]`` and the extension's gradient in ``x`` ``[B, k]`` at states ``+-1``:
        ``d/dgamma_j = -(nu2/2) x_j'M^-1 x_j + ((d + w)/2) nu2 (x_j'M^-1 y)^2 / S``, halved for
        ``x_j = 2 gamma_j - 1``."""
        flat = self._flat(x)
        if not bool((flat.abs() == 1.0).all()):
            raise ValueError(
                "the variable-selection gradient is given at states of +-1 only (where the "
                "samplers ask for it)."
            )
        log_p, s, c, r, *_ = self._updates(flat)
        d_w = (self.n_observations + self.w) / 2
        d_gamma = -self.nu2 / 2 * (c - 1.0 / self.nu2) + d_w * self.nu2 * r * r / s.unsqueeze(1)
        return log_p, d_gamma / 2

    def grad_log_prob(self, x: torch.Tensor) -> torch.Tensor:
        return self.log_prob_and_grad(x)[1].view_as(x)


def _positive(value, name: str) -> float:
    value = real(value, name, 0.0, MAX_HYPER)
    if value == 0.0:
        raise ValueError(f"{name} must be a positive number, got 0.")
    return value


__all__ = ["RegressionData", "VariableSelection", "synthetic_regression"]
