"""Mixing diagnostics for scalar summary series (one row per chain).

All functions take a 2-D array ``series`` of shape ``[chains, draws]`` (numpy or anything
``np.asarray`` accepts, e.g. a CPU torch tensor), typically the magnetisation
``m(x) = sum_i x_i`` of each chain over the mixing phase (see ``lsbcore.diagnostics.trace``).

Paper ESS (Zanella 2020 convention, Table 2 of the LSB paper)
-------------------------------------------------------------
Per chain, with ``rho_j`` the sample autocorrelation at lag ``j`` and ``L = max_lag``::

    ESS = (L + 1) / (1 + 2 * sum_{j=1..L, rho_j > threshold} rho_j * (1 - j / (L + 1)))

Every lag whose autocorrelation exceeds ``threshold`` (0.05) contributes, including lags that
come after an earlier lag fell below the threshold: the sum is *not* truncated at the first
drop. Because only lags with ``rho_j > threshold >= 0`` are summed the denominator is >= 1,
so ``1 <= ESS <= L + 1``: the value is an effective sample size per window of ``L + 1``
draws (for i.i.d. draws it is ``L + 1 = 501``), independent of the series length ``T``.
It is therefore only defined for ``T > L`` draws; shorter series raise ``ValueError``
(no silent fallback to a smaller ``L``, which would change the scale of the number).

Sample autocorrelation: mean-centred, biased (1/T) autocovariance normalised by the lag-0
autocovariance, ``rho_j = sum_{t<T-j} (x_t - xbar)(x_{t+j} - xbar) / sum_t (x_t - xbar)^2``,
computed with a zero-padded FFT (O(T log T) per chain, float64).

Constant chains: a chain whose values are all identical (``max == min``, e.g. a sampler stuck
in one state) has no defined autocorrelation. By convention it is treated as perfectly
correlated, ``rho_j = 1`` for every lag, which gives exactly ``ESS = 1`` (one effective draw
per window; the minimum possible value). Nothing is NaN; ``MixingSummary.n_constant_chains``
counts such chains so a dashboard can flag them.

Standard diagnostics
--------------------
``ess_bulk`` and ``rhat`` wrap arviz-stats 0.8.0 (``arviz_stats.base.array_stats``):
rank-normalised split bulk ESS and the rank-normalised split R-hat of Vehtari et al. (2021)
(``method="rank"``: the maximum of the bulk and folded split R-hats). They are not
re-implemented here. Degenerate inputs are handled before calling arviz-stats:

* all values of all chains identical -> ``ess_bulk = nan`` and ``rhat = nan`` (undefined;
  arviz-stats would return ``chains * draws`` for the ESS, which is misleading);
* ``rhat`` needs at least 2 chains (``ValueError`` otherwise; ``summarise_mixing`` reports NaN);
* every split half-chain constant but values differing between them -> ``rhat = inf``
  (chains stuck in different states: clearly not converged).

Both need at least 4 draws per chain.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

__all__ = [
    "MixingSummary",
    "autocorrelation",
    "ess_bulk",
    "ess_bulk_per_chain",
    "ess_from_autocorrelation",
    "ess_paper",
    "rhat",
    "summarise_mixing",
]

#: Default lag window L of the paper ESS.
PAPER_MAX_LAG = 500
#: Default autocorrelation threshold of the paper ESS.
PAPER_THRESHOLD = 0.05
#: Minimum number of draws per chain for the arviz-stats diagnostics.
MIN_DRAWS_ARVIZ = 4


def _as_series(series, name: str = "series") -> np.ndarray:
    """Validate and convert to a float64 array of shape [chains, draws]."""
    if hasattr(series, "detach"):  # torch tensor: avoid importing torch here
        series = series.detach().cpu().numpy()
    arr = np.asarray(series, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D with shape [chains, draws]; got {arr.ndim}-D shape {arr.shape}"
        )
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name} must have at least one chain and one draw; got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (NaN or inf)")
    return arr


def _validate_max_lag(max_lag) -> int:
    if isinstance(max_lag, bool) or not isinstance(max_lag, int | np.integer):
        raise TypeError(f"max_lag must be an int; got {type(max_lag).__name__}")
    if max_lag < 1:
        raise ValueError(f"max_lag must be >= 1; got {max_lag}")
    return int(max_lag)


def _check_max_lag(max_lag, n_draws: int) -> int:
    max_lag = _validate_max_lag(max_lag)
    if n_draws <= max_lag:
        raise ValueError(
            f"series has {n_draws} draws per chain but max_lag={max_lag} needs more than "
            f"max_lag draws (T > max_lag); record a longer mixing phase or lower max_lag"
        )
    return max_lag


def _validate_threshold(threshold) -> float:
    threshold = float(threshold)
    if not (0.0 <= threshold < 1.0):  # also rejects NaN
        raise ValueError(f"threshold must be in [0, 1); got {threshold}")
    return threshold


def _constant_rows(arr: np.ndarray) -> np.ndarray:
    """Boolean [chains]: rows whose values are all identical."""
    return np.max(arr, axis=1) == np.min(arr, axis=1)


def autocorrelation(series, max_lag: int) -> np.ndarray:
    """Sample autocorrelation of each chain for lags ``0..max_lag``.

    Parameters
    ----------
    series : array-like, shape [B, T]
        One row per chain; finite values.
    max_lag : int
        Largest lag, ``1 <= max_lag < T``.

    Returns
    -------
    numpy.ndarray, float64, shape [B, max_lag + 1]
        ``rho[:, 0] == 1``. Mean-centred, biased (1/T) estimator normalised by the lag-0
        autocovariance, computed by FFT. Constant rows get ``rho = 1`` at every lag (see the
        module docstring).
    """
    arr = _as_series(series)
    n_draws = arr.shape[1]
    max_lag = _check_max_lag(max_lag, n_draws)

    # scipy.fft, imported on first use: with scipy.special under it, a few tenths of a second
    # that the dashboard's first page (no draws yet) need not wait for
    from scipy import fft as sp_fft

    centred = arr - arr.mean(axis=1, keepdims=True)
    # Zero-pad to >= 2T - 1 so the circular correlation equals the linear one.
    n_fft = sp_fft.next_fast_len(2 * n_draws - 1, real=True)
    spec = sp_fft.rfft(centred, n=n_fft, axis=1)
    acov = sp_fft.irfft(spec.real**2 + spec.imag**2, n=n_fft, axis=1)[:, : max_lag + 1]

    constant = _constant_rows(arr)
    rho = np.ones((arr.shape[0], max_lag + 1), dtype=np.float64)
    ok = ~constant
    if np.any(ok):
        rho[ok] = acov[ok] / acov[ok, :1]
    return rho


def ess_from_autocorrelation(rho, threshold: float = PAPER_THRESHOLD) -> np.ndarray:
    """Paper ESS from given autocorrelations ``rho`` of shape [B, L + 1] (``rho[:, 0]`` = lag 0).

    ``ESS = (L + 1) / (1 + 2 * sum_{j=1..L, rho_j > threshold} rho_j * (1 - j / (L + 1)))``;
    lags with ``rho_j <= threshold`` are excluded, every later lag above it is included.
    ``threshold`` must lie in ``[0, 1)``. Returns float64 [B].
    """
    rho = np.asarray(rho, dtype=np.float64)
    if rho.ndim != 2 or rho.shape[1] < 2:
        raise ValueError(
            f"rho must have shape [chains, max_lag + 1] with max_lag >= 1; got {rho.shape}"
        )
    if not np.all(np.isfinite(rho)):
        raise ValueError("rho contains non-finite values (NaN or inf)")
    threshold = _validate_threshold(threshold)
    window = rho.shape[1]  # L + 1
    lags = np.arange(1, window, dtype=np.float64)
    weights = 1.0 - lags / window
    tail = rho[:, 1:]
    contrib = np.where(tail > threshold, tail * weights, 0.0)
    return window / (1.0 + 2.0 * contrib.sum(axis=1))


def ess_paper(
    series, max_lag: int = PAPER_MAX_LAG, threshold: float = PAPER_THRESHOLD
) -> np.ndarray:
    """Per-chain paper ESS (Zanella's convention) of ``series`` [B, T]; float64 [B].

    Requires ``T > max_lag`` (``ValueError`` otherwise). Values lie in ``[1, max_lag + 1]``;
    a constant chain gives exactly 1 (see the module docstring).
    """
    return ess_from_autocorrelation(autocorrelation(series, max_lag), threshold)


def _array_stats():
    """arviz-stats' array functions, imported on first use: the import pulls in scipy.signal and
    scipy.stats (seconds), which the dashboard's first page does not need."""
    from arviz_stats.base import array_stats

    return array_stats


def _check_arviz_draws(arr: np.ndarray) -> None:
    if arr.shape[1] < MIN_DRAWS_ARVIZ:
        raise ValueError(
            f"series has {arr.shape[1]} draws per chain; bulk ESS / R-hat need at least "
            f"{MIN_DRAWS_ARVIZ}"
        )


def ess_bulk(series) -> float:
    """Rank-normalised split bulk ESS over all chains (arviz-stats), as a float.

    ``series`` [chains, draws], >= 4 draws. NaN when every value is identical (undefined).
    """
    arr = _as_series(series)
    _check_arviz_draws(arr)
    if np.max(arr) == np.min(arr):
        return math.nan
    return float(_array_stats().ess(arr, chain_axis=0, draw_axis=1, method="bulk"))


def ess_bulk_per_chain(series) -> np.ndarray:
    """Rank-normalised split bulk ESS of every chain on its own (arviz-stats), ``[chains]``.

    For chains that sample different posteriors (the paper cases give every chain its own
    noisy alpha) a pooled ESS compares unlike things; each chain alone is still meaningful.
    NaN for a constant chain.
    """
    arr = _as_series(series)
    _check_arviz_draws(arr)
    out = np.asarray(
        _array_stats().ess(arr[:, None, :], chain_axis=1, draw_axis=2, method="bulk"), dtype=float
    ).reshape(-1)
    out[_constant_rows(arr)] = math.nan
    return out


def rhat(series) -> float:
    """Rank-normalised split R-hat over all chains (arviz-stats, ``method="rank"``), as a float.

    ``series`` [chains, draws] with >= 2 chains and >= 4 draws. NaN when every value is
    identical; ``inf`` when the split half-chains are each constant but differ.
    """
    arr = _as_series(series)
    if arr.shape[0] < 2:
        raise ValueError(f"rhat needs at least 2 chains; series has {arr.shape[0]}")
    _check_arviz_draws(arr)
    if np.max(arr) == np.min(arr):
        return math.nan
    half = arr.shape[1] // 2
    halves = np.vstack((arr[:, :half], arr[:, -half:]))  # the split chains arviz-stats uses
    if np.all(_constant_rows(halves)):
        # Zero within-chain variance, non-zero between: chains stuck in different states.
        return math.inf
    return float(_array_stats().rhat(arr, chain_axis=0, draw_axis=1, method="rank"))


@dataclass(frozen=True)
class MixingSummary:
    """Mixing diagnostics of one sampler's summary series, as plain Python values.

    Fields may be ``nan`` (undefined / not computable; see ``notes``) and ``rhat`` may be
    ``inf``. ``json.dumps`` writes these as the non-standard tokens ``NaN`` / ``Infinity``;
    use ``as_dict(nonfinite_as_none=True)`` for strict JSON.
    """

    ess_paper_mean: float
    ess_paper_std: float
    ess_bulk: float
    rhat: float
    n_chains: int
    n_draws: int
    max_lag: int
    n_constant_chains: int
    notes: tuple[str, ...] = field(default=())

    def as_dict(self, nonfinite_as_none: bool = False) -> dict:
        """Plain dict; ``notes`` as a list; optionally NaN/inf replaced by ``None``."""
        out = asdict(self)
        out["notes"] = list(self.notes)
        if nonfinite_as_none:
            for key, value in out.items():
                if isinstance(value, float) and not math.isfinite(value):
                    out[key] = None
        return out


def summarise_mixing(
    series, max_lag: int = PAPER_MAX_LAG, threshold: float = PAPER_THRESHOLD
) -> MixingSummary:
    """Paper ESS (mean and population std over chains), bulk ESS and R-hat of ``series``.

    Unlike the individual functions this does not raise for short or degenerate input (handy
    while a run is in progress): a diagnostic that cannot be computed is ``nan`` and a line
    in ``notes`` says why. Invalid input (not 2-D, non-finite values, bad ``max_lag``) still
    raises ``ValueError``/``TypeError``.
    """
    arr = _as_series(series)
    n_chains, n_draws = arr.shape
    notes: list[str] = []
    n_constant = int(np.count_nonzero(_constant_rows(arr)))
    if n_constant:
        notes.append(f"{n_constant} of {n_chains} chains are constant (paper ESS = 1 for them)")

    max_lag = _validate_max_lag(max_lag)
    threshold = _validate_threshold(threshold)
    if n_draws > max_lag:
        per_chain = ess_paper(arr, max_lag=max_lag, threshold=threshold)
        ess_mean = float(np.mean(per_chain))
        ess_std = float(np.std(per_chain))
    else:
        ess_mean = ess_std = math.nan
        notes.append(f"paper ESS needs more than max_lag={max_lag} draws; have {n_draws}")

    if n_draws >= MIN_DRAWS_ARVIZ:
        bulk = ess_bulk(arr)
        if math.isnan(bulk):
            notes.append("bulk ESS and R-hat undefined: all values identical")
        if n_chains >= 2:
            r = rhat(arr)
        else:
            r = math.nan
            notes.append("R-hat needs at least 2 chains")
    else:
        bulk = r = math.nan
        notes.append(f"bulk ESS and R-hat need at least {MIN_DRAWS_ARVIZ} draws; have {n_draws}")

    return MixingSummary(
        ess_paper_mean=ess_mean,
        ess_paper_std=ess_std,
        ess_bulk=float(bulk),
        rhat=float(r),
        n_chains=int(n_chains),
        n_draws=int(n_draws),
        max_lag=int(max_lag),
        n_constant_chains=n_constant,
        notes=tuple(notes),
    )


def ess_bulk_per_site(states: np.ndarray) -> np.ndarray:
    """Rank-normalised bulk ESS over all chains of every visible unit, ``states [T, B, n]``;
    NaN for a unit that never changed in any chain."""
    x = np.moveaxis(np.asarray(states, dtype=np.float64), 0, 1)  # [B, T, n]
    ess = np.asarray(_array_stats().ess(x, chain_axis=0, draw_axis=1, method="bulk"), dtype=float)
    constant = (x == x[:1, :1]).all(axis=(0, 1))
    ess[constant] = math.nan
    return ess
