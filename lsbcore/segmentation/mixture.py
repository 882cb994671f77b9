"""Two classes in feature space: Otsu's threshold and a two-Gaussian mixture fitted by EM.

The photo data model says each pixel's features ``y_i`` (luma, or Lab colour) come from
one of two Gaussian classes, ``y_i | class k ~ N(m_k, S_k)``. :func:`fit_two_class_model`
fits ``m_k``, ``S_k`` and the mixture weights ``w_k`` by expectation-maximisation:

- E-step: responsibilities ``r_ik = w_k N(y_i; m_k, S_k) / sum_l w_l N(y_i; m_l, S_l)``,
  computed from log densities with log-sum-exp, so that pixels far from both classes
  (densities that underflow to 0) still get well-defined responsibilities;
- M-step: ``w_k = N_k / N``, ``m_k = sum_i r_ik y_i / N_k`` and the weighted scatter
  ``S_k``, with ``N_k = sum_i r_ik``; then every eigenvalue of ``S_k`` is raised to at
  least ``variance_floor``.

The floor keeps a flat class (a clean two-level image, a saturated sky) from collapsing
onto a point, where its density and the log-likelihood would be infinite. Clipping the
eigenvalues is the exact maximiser of the M-step's objective over covariances whose
eigenvalues are all >= the floor, so the iteration stays a (constrained) EM and the
log-likelihood never decreases.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lsbcore.segmentation.arguments import real_array, real_number, whole_number

__all__ = ["VARIANCE_FLOOR", "TwoClassModel", "fit_two_class_model", "otsu_threshold"]

#: Smallest variance in any direction of a fitted class, in feature units. Features are
#: scaled to about [0, 1] (luma; Lab / 100), so this is a standard deviation of 0.01:
#: one Lab unit (a just-noticeable colour difference), 2.5 grey levels of 255.
VARIANCE_FLOOR = 1e-4

_LOG_2PI = float(np.log(2.0 * np.pi))


@dataclass(frozen=True, eq=False)
class TwoClassModel:
    """A fitted two-Gaussian mixture; class 0 has the lower mean of feature 0 (darker).

    Attributes:
        means: ``[2, d]`` class means ``m_k``.
        covariances: ``[2, d, d]`` class covariances ``S_k`` (eigenvalues >= the floor).
        weights: ``[2]`` mixture weights ``w_k``, summing to 1.
        log_likelihood: mean log-likelihood per point, ``mean_i log sum_k w_k N(y_i; m_k, S_k)``.
        iterations: EM iterations run from the start that was kept.
        history: the mean log-likelihood at the start and after each iteration
            (``iterations + 1`` values, non-decreasing).
    """

    means: np.ndarray
    covariances: np.ndarray
    weights: np.ndarray
    log_likelihood: float
    iterations: int
    history: tuple[float, ...]

    @property
    def dimension(self) -> int:
        """The number of features ``d``."""
        return self.means.shape[1]

    def class_log_likelihoods(self, features, scale: float = 1.0) -> np.ndarray:
        """``[N, 2]`` log densities ``log N(y_i; m_k, scale^2 S_k)``, mixture weights left out.

        ``scale > 1`` widens both classes alike (the data are trusted less).
        """
        y = self._check_features(features)
        scale = real_number(scale, "scale", positive=True)
        return _class_log_densities(y, self.means, self.covariances, scale)

    def most_probable_class(self, features) -> np.ndarray:
        """``[N]`` int: each point's class of highest posterior ``w_k N(y; m_k, S_k)``."""
        y = self._check_features(features)
        log_joint = _class_log_densities(y, self.means, self.covariances) + np.log(self.weights)
        return np.argmax(log_joint, axis=1)

    def _check_features(self, features) -> np.ndarray:
        y = real_array(features, "features")
        if y.ndim != 2 or y.shape[1] != self.dimension:
            raise ValueError(
                f"features must have shape [N, {self.dimension}] for this model, got {y.shape}."
            )
        return y


def otsu_threshold(values, bins: int = 256) -> float:
    """Otsu's threshold: the split of ``values`` that maximises the between-class variance.

    The values are binned into ``bins`` equal bins over their range, and every split at a
    bin edge is scored by ``n_0 n_1 (mean_0 - mean_1)^2 / N^2`` computed from the values
    themselves (not the bin centres), so the score is exact for the split it names. The
    first best split is returned as the midpoint between the largest value of the lower
    class and the smallest of the upper one: the lower class is ``values <= threshold``.

    Raises:
        ValueError: ``values`` is empty, not finite, or constant (nothing to separate), or
            ``bins`` is not an integer >= 2.
    """
    v = real_array(values, "values").ravel()
    bins = whole_number(bins, "bins", minimum=2)
    if v.size == 0:
        raise ValueError("values must not be empty.")
    lo, hi = float(v.min()), float(v.max())
    if lo == hi:
        raise ValueError("values are constant: there is nothing to separate.")

    edges = np.linspace(lo, hi, bins + 1)
    # bin b holds edges[b] <= v < edges[b + 1] (the maximum goes to the last bin), so the
    # split after bin k is exactly the set v < edges[k + 1]
    which = np.minimum(np.searchsorted(edges, v, side="right") - 1, bins - 1)
    counts = np.bincount(which, minlength=bins).astype(np.float64)
    sums = np.bincount(which, weights=v, minlength=bins)
    n0 = np.cumsum(counts)[:-1]  # [bins - 1], split after bin k
    s0 = np.cumsum(sums)[:-1]
    n1 = v.size - n0
    s1 = sums.sum() - s0
    with np.errstate(divide="ignore", invalid="ignore"):
        between = n0 * n1 * (s0 / n0 - s1 / n1) ** 2
    between[(n0 == 0) | (n1 == 0)] = -np.inf
    cut = edges[int(np.argmax(between)) + 1]
    below, above = v[v < cut].max(), v[v >= cut].min()
    threshold = below + (above - below) / 2
    # below and above one ulp apart: the midpoint may round up to above
    return float(threshold if threshold < above else below)


def fit_two_class_model(
    features,
    max_iter: int = 100,
    tol: float = 1e-6,
    variance_floor: float = VARIANCE_FLOOR,
) -> TwoClassModel:
    """Fit two Gaussian classes with full covariances to ``features`` ``[N, d]`` by EM.

    EM starts from Otsu's split of feature 0 (luma, or L: lightness separates most
    photos) and also, when there are several features, from Otsu's split along their
    leading principal component: two classes that differ only in hue (a red object on
    a green background of equal lightness) barely show in feature 0. The start whose
    fit has the higher log-likelihood is kept (the first on a tie). Each run stops when
    the mean log-likelihood changes by at most ``tol`` relative to its value, or after
    ``max_iter`` iterations. The result is deterministic.

    Raises:
        ValueError: ``features`` is not a finite ``[N, d]`` array with ``N >= 2``, or all
            its rows are equal (nothing to separate); or an option is out of range.
    """
    y = real_array(features, "features")
    if y.ndim != 2 or y.shape[0] < 2 or y.shape[1] < 1:
        raise ValueError(f"features must have shape [N, d] with N >= 2, d >= 1, got {y.shape}.")
    max_iter = whole_number(max_iter, "max_iter", minimum=0)
    tol = real_number(tol, "tol", minimum=0.0)
    variance_floor = real_number(variance_floor, "variance_floor", positive=True)
    spread = y.max(axis=0) - y.min(axis=0)
    if not spread.any():
        raise ValueError("features are constant: there is nothing to separate.")

    starts = []
    if spread[0] > 0:
        starts.append(y[:, 0] > otsu_threshold(y[:, 0]))
    if y.shape[1] > 1:
        centred = y - y.mean(axis=0)
        _, vectors = np.linalg.eigh(centred.T @ centred)
        component = centred @ vectors[:, -1]  # the direction of largest variance
        if np.ptp(component) > 0:
            split = component > otsu_threshold(component)
            if not any(np.array_equal(split, s) or np.array_equal(split, ~s) for s in starts):
                starts.append(split)

    best = None
    for upper in starts:
        fit = _run_em(y, upper, max_iter, tol, variance_floor)
        if best is None or fit.log_likelihood > best.log_likelihood:
            best = fit
    return _darker_first(best)


def _run_em(
    y: np.ndarray, upper: np.ndarray, max_iter: int, tol: float, floor: float
) -> TwoClassModel:
    """EM from the hard split ``upper`` (True: class 1), as the module docstring says."""
    resp = np.stack([~upper, upper], axis=1).astype(np.float64)  # [N, 2]
    means, covariances, weights = _m_step(y, resp, floor)
    log_joint = _class_log_densities(y, means, covariances) + np.log(weights)  # [N, 2]
    log_norm = np.logaddexp(log_joint[:, 0], log_joint[:, 1])  # [N]
    history = [float(log_norm.mean())]
    for _ in range(max_iter):
        resp = np.exp(log_joint - log_norm[:, None])
        if resp.sum(axis=0).min() <= 1e-12 * len(y):
            break  # a class has emptied: its mean would be 0 / 0
        means, covariances, weights = _m_step(y, resp, floor)
        log_joint = _class_log_densities(y, means, covariances) + np.log(weights)
        log_norm = np.logaddexp(log_joint[:, 0], log_joint[:, 1])
        previous = history[-1]
        history.append(float(log_norm.mean()))
        if abs(history[-1] - previous) <= tol * abs(previous):
            break
    return TwoClassModel(
        means=means,
        covariances=covariances,
        weights=weights,
        log_likelihood=history[-1],
        iterations=len(history) - 1,
        history=tuple(history),
    )


def _m_step(y: np.ndarray, resp: np.ndarray, floor: float):
    """Weights, means and floored covariances from responsibilities ``resp`` ``[N, 2]``."""
    n_k = resp.sum(axis=0)  # [2]
    weights = n_k / n_k.sum()
    means = (resp.T @ y) / n_k[:, None]  # [2, d]
    covariances = np.empty((2, y.shape[1], y.shape[1]))
    for k in range(2):
        diff = y - means[k]
        scatter = (diff * resp[:, k : k + 1]).T @ diff / n_k[k]
        values, vectors = np.linalg.eigh(scatter)
        # the constrained M-step: eigenvalues below the floor are raised to it
        covariances[k] = (vectors * np.maximum(values, floor)) @ vectors.T
    return means, covariances, weights


def _class_log_densities(y, means, covariances, scale: float = 1.0) -> np.ndarray:
    """``[N, 2]`` ``log N(y_i; m_k, scale^2 S_k)``, through each ``S_k``'s eigenvalues."""
    d = y.shape[1]
    out = np.empty((len(y), 2))
    for k in range(2):
        values, vectors = np.linalg.eigh(covariances[k])
        values = values * scale**2
        # whitened coordinates: along each eigenvector, in units of its standard deviation
        z = (y - means[k]) @ (vectors / np.sqrt(values))  # [N, d]
        mahalanobis = np.einsum("nd,nd->n", z, z)
        out[:, k] = -0.5 * (mahalanobis + np.log(values).sum() + d * _LOG_2PI)
    return out


def _darker_first(model: TwoClassModel) -> TwoClassModel:
    """The same model with class 0 the one of lower feature-0 mean (then feature 1, ...)."""
    order = np.lexsort(model.means.T[::-1])
    return TwoClassModel(
        means=model.means[order],
        covariances=model.covariances[order],
        weights=model.weights[order],
        log_likelihood=model.log_likelihood,
        iterations=model.iterations,
        history=model.history,
    )
