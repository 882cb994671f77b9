"""Quantised logistic regression: the posterior over a softmax classifier whose weights and
biases take one of ``2^bits`` values each.

The flow paper's second experiment (Jaini, Nielsen and Welling 2021, "Quantized Logistic
Regression", Table 2). Data: features ``X [d, f]`` (standardised by the caller) and labels
``y [d]`` in ``0 .. C-1``. Parameters: a weight matrix ``W [f, C]`` and biases ``b [C]``, one
weight column per class, so ``(f + 1) C`` of them: the paper's counts, Iris ``(4 + 1) 3 = 15``,
Wine ``(13 + 1) 3 = 42``, Breast Cancer ``(30 + 1) 2 = 62``. Parameter ``p = a C + c`` is
``W[a, c]`` for ``a < f`` and ``b[c]`` for ``a = f``; its ``bits`` sites ``p bits ..
p bits + bits - 1`` (most significant first, ``x = +1`` a set bit) give its level ``k`` in
``0 .. L-1``, ``L = 2^bits``, and its value ``-w + 2 w k / (L - 1)``: a symmetric grid on
``[-w, w]`` (default ``w = 4``: on standardised features, slopes up to 4 separate classes well
enough that the likelihood, not the grid's edge, bounds them; an even ``L`` has no level 0).

The code is reflected Gray by default: consecutive levels differ in exactly one bit, so a single
flip always reaches both neighbouring levels and a site sampler walks a parameter level by level
(with plain binary, ``code="binary"``, the two levels nearest 0, 0111 and 1000, are four flips
apart, a barrier the single-flip samplers meet at every sign change).

    log p~(x) = sum_i log softmax(X_i W + b)[y_i] - n log 2,

the data log-likelihood plus the log of a uniform prior over the grid (every one of the ``2^n``
bit patterns, ``n = (f + 1) C bits``, equally likely a priori: no level is preferred), a
normalised log joint.

``flip_log_ratios``: flipping one bit changes one parameter by ``delta``, so one class's logits
by ``delta X_ia`` (``X_i,f = 1`` for a bias); the new log-normaliser of observation ``i`` is
``logaddexp(lse_-c,i, l_ic + delta X_ia)`` with ``lse_-c`` the log-sum-exp of the other classes,
all in log space. All ``n`` changes are computed at once, in chunks of parameters so a call
holds at most ``CHUNK_VALUES`` numbers: ``O(B d n)`` per call against ``O(B d n f C)`` for
``n`` re-evaluations (measured: ``python -m lsbcore.studies.quantised_logistic --timing``).
"""

from __future__ import annotations

import math

import torch

from lsbcore.checks import integer, real
from lsbcore.targets.base import MAX_VALUES, Target, as_real_tensor
from lsbcore.targets.design import design

MAX_BITS = 8
MAX_CLASSES = 100
MAX_WIDTH = 1e3
DEFAULT_BITS, DEFAULT_WIDTH = 4, 4.0
CODES = ("gray", "binary")
# numbers a flip-ratio chunk holds at once ([B, d, a, C, bits] float64: 32 MiB)
CHUNK_VALUES = 1 << 22


def level_of_pattern(bits: int, code: str) -> torch.Tensor:
    """``[2^bits]``: the level of each bit pattern (pattern = the integer the bits spell, most
    significant first). Gray: the level whose reflected Gray code is the pattern."""
    patterns = torch.arange(2**bits)
    if code == "binary":
        return patterns
    levels = patterns.clone()  # Gray decoding: k = g ^ (g >> 1) ^ (g >> 2) ^ ...
    shift = patterns >> 1
    while bool(shift.any()):
        levels ^= shift
        shift >>= 1
    return levels


class QuantisedLogistic(Target):
    """The posterior over a softmax classifier's quantised parameters (see the module
    docstring): ``X [d, f]``, integer labels ``y [d]`` in ``0 .. n_classes - 1``, ``bits`` per
    parameter, the grid's half-width ``width`` and its ``code`` (``"gray"`` or ``"binary"``)."""

    def __init__(self, X, y, n_classes=None, bits=DEFAULT_BITS, width=DEFAULT_WIDTH, code="gray"):
        X, y = design(X, y, "label")
        d, f = X.shape
        if not bool(((y == y.round()) & (y >= 0)).all()):
            raise ValueError("y must hold class labels 0, 1, 2, ... (non-negative integers).")
        seen = int(y.max()) + 1
        c = max(seen, 2) if n_classes is None else integer(n_classes, "n_classes", 2, MAX_CLASSES)
        if seen > c or c > MAX_CLASSES:
            raise ValueError(
                f"y holds labels up to {seen - 1}, beyond the {min(c, MAX_CLASSES)} classes "
                f"supported (labels 0 to {min(c, MAX_CLASSES) - 1})."
            )
        if code not in CODES:
            raise ValueError(f"code must be one of {CODES}, got {code!r}.")
        self.bits = integer(bits, "bits", 1, MAX_BITS)
        self.width = real(width, "width", 0.0, MAX_WIDTH)
        if self.width == 0.0:
            raise ValueError("width must be a positive number, got 0.")
        self.code = code
        self.n_classes, self.n_features, self.n_observations = c, f, d
        self.n_params = (f + 1) * c
        if self.n_params * self.bits * d > MAX_VALUES:
            raise ValueError(
                f"{self.n_params:,} parameters of {self.bits} bits on {d:,} observations is "
                f"too large; at most {MAX_VALUES:,} parameter-observation pairs are supported."
            )
        self.n_sites, self.shape = self.n_params * self.bits, (self.n_params, self.bits)
        self.X1 = torch.cat([X, torch.ones(d, 1, dtype=torch.float64)], 1)  # [d, f + 1]
        self.labels = y.long()
        self.onehot = torch.nn.functional.one_hot(self.labels, c).to(torch.float64)  # [d, C]
        self.label_sums = self.X1.T @ self.onehot  # [f + 1, C]: sum_i X_ia [y_i = c]
        levels = level_of_pattern(self.bits, code).to(torch.float64)
        self.values = -self.width + 2 * self.width * levels / (2**self.bits - 1)
        self.weights = 2 ** torch.arange(self.bits - 1, -1, -1)  # most significant first
        self.log_prior = -self.n_sites * math.log(2.0)

    def describe(self) -> str:
        return (
            f"quantised logistic regression: {self.n_params:,} parameters of {self.bits} bits "
            f"({self.n_features} features, {self.n_classes} classes, {self.n_observations:,} "
            "observations)"
        )

    # ----------------------------------------------------------------- parameters
    def _patterns(self, flat: torch.Tensor) -> torch.Tensor:
        bits = (flat.view(len(flat), self.n_params, self.bits) > 0).long()
        return (bits * self.weights.to(flat.device)).sum(2)  # [B, P]

    def parameters(self, x: torch.Tensor) -> torch.Tensor:
        """The parameters ``[B, f + 1, C]``: rows ``0 .. f-1`` the weights, row ``f`` the
        biases."""
        flat = self._flat(x)
        theta = self.values.to(flat.device)[self._patterns(flat)]
        return theta.view(len(flat), self.n_features + 1, self.n_classes)

    def logits(self, x: torch.Tensor, X=None) -> torch.Tensor:
        """``X W + b`` ``[B, m, C]`` for the features ``X [m, f]`` (the training data by
        default)."""
        X1 = self.X1 if X is None else _with_ones(as_real_tensor(X, "X"), self.n_features)
        return X1.to(x.device) @ self.parameters(x)

    def class_probabilities(self, x: torch.Tensor, X) -> torch.Tensor:
        """``softmax(X W + b)`` ``[B, m, C]``: each state's predictive probabilities on ``X``."""
        return torch.softmax(self.logits(x, X), 2)

    # ----------------------------------------------------------------- log p~
    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        flat = self._flat(x)
        logits = self.logits(flat)
        fit = (logits * self.onehot.to(flat.device)).sum(2) - torch.logsumexp(logits, 2)
        return fit.sum(1) + self.log_prior

    def flip_log_ratios(self, x: torch.Tensor) -> torch.Tensor:
        flat = self._flat(x)
        b, dev = len(flat), flat.device
        c, k = self.n_classes, self.bits
        X1, values = self.X1.to(dev), self.values.to(dev)
        patterns = self._patterns(flat)  # [B, P]
        masks = self.weights.to(dev)  # flipping bit j xors its weight into the pattern
        delta = values[patterns.unsqueeze(2) ^ masks] - values[patterns].unsqueeze(2)  # [B, P, K]
        delta = delta.view(b, self.n_features + 1, c, k)
        logits = X1 @ values[patterns].view(b, self.n_features + 1, c)  # [B, d, C]
        lse = torch.logsumexp(logits, 2)  # [B, d]
        others = logits.unsqueeze(2).expand(b, len(X1), c, c).clone()
        others[:, :, torch.arange(c), torch.arange(c)] = -math.inf
        lse_others = torch.logsumexp(others, 3)  # [B, d, C]: classes other than c
        # the label term is linear in the change: delta * sum_i X_ia [y_i = c]
        ratios = delta * self.label_sums.to(dev).unsqueeze(2)  # [B, f + 1, C, K]
        per_row = max(1, b * len(X1) * c * k)
        chunk = max(1, CHUNK_VALUES // per_row)
        for first in range(0, self.n_features + 1, chunk):
            rows = slice(first, min(self.n_features + 1, first + chunk))
            # [B, d, a, C, K]: class c's logit of observation i after the change
            moved = logits[:, :, None, :, None] + (
                X1[None, :, rows, None, None] * delta[:, None, rows]
            )
            new_lse = torch.logaddexp(lse_others[:, :, None, :, None], moved)
            ratios[:, rows] -= (new_lse - lse[:, :, None, None, None]).sum(1)
        return ratios.reshape(b, self.n_sites).view_as(x)


def _with_ones(X: torch.Tensor, n_features: int) -> torch.Tensor:
    if X.dim() != 2 or X.shape[1] != n_features:
        raise ValueError(
            f"X must be a 2-D array with {n_features} features per row, got shape {tuple(X.shape)}."
        )
    if not bool(torch.isfinite(X).all()):
        raise ValueError("X must hold finite numbers only (no NaN or infinity).")
    return torch.cat([X, torch.ones(len(X), 1, dtype=torch.float64)], 1)


__all__ = ["CODES", "QuantisedLogistic", "level_of_pattern"]
