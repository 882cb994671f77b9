"""One class's colours as a mixture of several Gaussians, fitted to weighted pixels by EM.

A prompted segmentation (``prompted``) models the object and the background each by its own
mixture, as GrabCut does: a real object is seldom one colour (a cat's fur and eyes, a rocket's
body and flame), so one Gaussian per class would blur its colours into a wide cloud that
swallows the background's. The class density is

    p(y | class) = sum_k pi_k N(y; m_k, S_k),

and the within-class weights ``pi_k`` belong to it (unlike the two-class model's weights,
which the Ising prior replaces). Each pixel enters the fit with a weight ``w_i >= 0``: 1 for a
pixel the prompt puts in the class, or its posterior probability of being in the class when
the mixture is refitted from a sampled marginal. EM with weights is EM on the weighted
log-likelihood ``sum_i w_i log p(y_i)``: the responsibilities are multiplied by ``w_i`` in the
M-step. Covariances keep every eigenvalue at least ``VARIANCE_FLOOR`` (as in ``mixture``), so
no component collapses onto one colour.

The start is weighted k-means++ from a fixed seed followed by a few Lloyd iterations, so a fit
is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lsbcore.segmentation.arguments import real_array, real_number, whole_number
from lsbcore.segmentation.mixture import VARIANCE_FLOOR

__all__ = ["COMPONENTS", "ClassMixture", "fit_class_mixture"]

#: Components per class, as GrabCut uses: enough for the few colours of an object or a
#: background, few enough to be pinned down by a small box's pixels.
COMPONENTS = 5

#: A component is given at most one per this many weighted pixels (with full covariances in
#: Lab a component has 9 parameters): a few marked pixels fit one Gaussian, not five.
PIXELS_PER_COMPONENT = 20

_LOG_2PI = float(np.log(2.0 * np.pi))
_LLOYD_STEPS = 5


@dataclass(frozen=True, eq=False)
class ClassMixture:
    """A fitted Gaussian mixture for one class.

    Attributes:
        means: ``[K, d]`` component means.
        covariances: ``[K, d, d]`` component covariances (eigenvalues >= the floor).
        weights: ``[K]`` within-class weights ``pi_k``, summing to 1.
        log_likelihood: weighted mean log-density of the fitted pixels.
        iterations: EM iterations run.
    """

    means: np.ndarray
    covariances: np.ndarray
    weights: np.ndarray
    log_likelihood: float
    iterations: int

    @property
    def components(self) -> int:
        return len(self.weights)

    def log_density(self, features, scale: float = 1.0) -> np.ndarray:
        """``[N]`` ``log sum_k pi_k N(y_i; m_k, scale^2 S_k)`` for ``features`` ``[N, d]``."""
        y = real_array(features, "features")
        if y.ndim != 2 or y.shape[1] != self.means.shape[1]:
            raise ValueError(f"features must have shape [N, {self.means.shape[1]}], got {y.shape}.")
        scale = real_number(scale, "scale", positive=True)
        log_joint = _component_log_densities(y, self.means, self.covariances, scale)
        return _logsumexp(log_joint + np.log(self.weights), axis=1)


def fit_class_mixture(
    features,
    weights=None,
    components: int = COMPONENTS,
    max_iter: int = 50,
    tol: float = 1e-6,
    variance_floor: float = VARIANCE_FLOOR,
    seed: int = 0,
) -> ClassMixture:
    """Fit a mixture of at most ``components`` Gaussians to ``features`` ``[N, d]`` weighted
    by ``weights`` ``[N]`` (all 1 when None), by EM from a weighted k-means++ start.

    Fewer components are used when the weighted pixels are few (one per
    ``PIXELS_PER_COMPONENT``) or have fewer distinct colours.

    Raises:
        ValueError: features or weights are malformed, a weight is negative, or the weights
            sum to zero (no pixel belongs to the class).
    """
    y = real_array(features, "features")
    if y.ndim != 2 or y.shape[0] < 1 or y.shape[1] < 1:
        raise ValueError(f"features must have shape [N, d] with N, d >= 1, got {y.shape}.")
    w = np.ones(len(y)) if weights is None else real_array(weights, "weights")
    if w.shape != (len(y),):
        raise ValueError(f"weights must have shape [{len(y)}], got {w.shape}.")
    if w.min() < 0:
        raise ValueError("weights must be >= 0.")
    components = whole_number(components, "components", minimum=1)
    max_iter = whole_number(max_iter, "max_iter", minimum=0)
    tol = real_number(tol, "tol", minimum=0.0)
    variance_floor = real_number(variance_floor, "variance_floor", positive=True)
    keep = w > 0
    y, w = y[keep], w[keep]
    if not len(y) or w.sum() <= 0:
        raise ValueError("the class has no pixels (all weights are zero): nothing to fit.")
    distinct = len(np.unique(y, axis=0)) if len(y) <= 4096 else components
    k = max(1, min(components, distinct, int(w.sum() // PIXELS_PER_COMPONENT)))

    resp = _kmeans_start(y, w, k, np.random.default_rng(seed))  # [N, K] hard 0/1
    means, covariances, pis = _m_step(y, w, resp, variance_floor)
    iterations, previous = 0, None
    while True:
        log_joint = _component_log_densities(y, means, covariances) + np.log(pis)  # [N, K]
        log_norm = _logsumexp(log_joint, axis=1)
        current = float(np.sum(w * log_norm) / w.sum())
        converged = previous is not None and abs(current - previous) <= tol * abs(previous)
        if converged or iterations == max_iter:
            break
        resp = np.exp(log_joint - log_norm[:, None])
        means, covariances, pis = _m_step(y, w, resp, variance_floor)
        iterations, previous = iterations + 1, current
    return ClassMixture(
        means=means,
        covariances=covariances,
        weights=pis,
        log_likelihood=current,
        iterations=iterations,
    )


def _kmeans_start(y: np.ndarray, w: np.ndarray, k: int, rng) -> np.ndarray:
    """Hard responsibilities ``[N, K]`` from weighted k-means++ seeding and a few Lloyd steps."""
    centres = [y[rng.choice(len(y), p=w / w.sum())]]
    nearest = np.sum((y - centres[0]) ** 2, axis=1)
    for _ in range(1, k):
        spread = w * nearest
        if spread.sum() <= 0:
            break  # every weighted point sits on a centre already
        centres.append(y[rng.choice(len(y), p=spread / spread.sum())])
        nearest = np.minimum(nearest, np.sum((y - centres[-1]) ** 2, axis=1))
    centres = np.array(centres)
    for _ in range(_LLOYD_STEPS):
        label = np.argmin(((y[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)
        mass = np.bincount(label, weights=w, minlength=len(centres))
        used = mass > 0
        sums = np.stack(
            [
                np.bincount(label, weights=w * y[:, j], minlength=len(centres))
                for j in range(y.shape[1])
            ],
            axis=1,
        )
        centres = sums[used] / mass[used, None]  # empty clusters are dropped
    label = np.argmin(((y[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)
    resp = np.zeros((len(y), len(centres)))
    resp[np.arange(len(y)), label] = 1.0
    return resp[:, resp.sum(axis=0) > 0]


def _m_step(y: np.ndarray, w: np.ndarray, resp: np.ndarray, floor: float):
    """Weights, means and floored covariances from responsibilities ``[N, K]`` and pixel
    weights ``[N]``; components that hold (almost) no weight are dropped."""
    weighted = resp * w[:, None]  # [N, K]
    mass = weighted.sum(axis=0)
    alive = mass > 1e-9 * w.sum()
    weighted, mass = weighted[:, alive], mass[alive]
    # einsum rather than matmul: these thin products are slower through a threaded BLAS
    means = np.einsum("nk,nd->kd", weighted, y) / mass[:, None]  # [K, d]
    d = y.shape[1]
    covariances = np.empty((len(mass), d, d))
    for c in range(len(mass)):
        diff = y - means[c]
        scatter = np.einsum("n,ni,nj->ij", weighted[:, c], diff, diff) / mass[c]
        values, vectors = np.linalg.eigh(scatter)
        covariances[c] = (vectors * np.maximum(values, floor)) @ vectors.T  # constrained M-step
    return means, covariances, mass / mass.sum()


def _component_log_densities(y, means, covariances, scale: float = 1.0) -> np.ndarray:
    """``[N, K]`` ``log N(y_i; m_k, scale^2 S_k)``, through each ``S_k``'s eigenvalues."""
    d = y.shape[1]
    out = np.empty((len(y), len(means)))
    for k in range(len(means)):
        values, vectors = np.linalg.eigh(covariances[k])
        values = values * scale**2
        z = (y - means[k]) @ (vectors / np.sqrt(values))  # whitened: [N, d]
        out[:, k] = -0.5 * (np.einsum("nd,nd->n", z, z) + np.log(values).sum() + d * _LOG_2PI)
    return out


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    top = a.max(axis=axis, keepdims=True)
    return np.squeeze(top, axis) + np.log(np.exp(a - top).sum(axis=axis))
