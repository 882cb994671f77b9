"""One seed of the LSB paper's RBM protocol (``run_seed``) and the measures it takes: the
comparison's MMD curves on a log grid of steps (``log_grid``), the ESS after burn-in as the GWG
code's ``rbm_sample.py`` computes it (``gwg_ess``) and the first checkpoint at the noise floor
(``reach_floor``). ``experiment`` runs the seeds in one process, ``cells`` as cells of the
sweep; both call this.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lsbcore.diagnostics.mixing import ess_bulk_per_site
from lsbcore.rbm.live import RBMComparison

__all__ = ["MAX_KEPT_VALUES", "gwg_ess", "log_grid", "reach_floor", "run_seed"]

# Chain states kept for the ESS (int8): at most this many numbers per sampler, thinned evenly
MAX_KEPT_VALUES = 8_000_000


# ============================================================================ measures
def gwg_ess(series) -> np.ndarray:
    """ESS of every column of ``series [T, d]`` as the GWG code computes it (TensorFlow
    Probability's ``effective_sample_size`` with its defaults, NaN set to 1):

        ESS = T / (-1 + 2 sum_{k < K} rho_k),   rho_k = c_k / c_0,   c_k = sum_t y_t y_{t+k} / T,

    ``y`` the centred column and ``K`` the first lag with ``rho_K < 0`` (that lag and all
    later ones are dropped). A constant column (``c_0 = 0``) has ESS 1.
    """
    x = np.asarray(series, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"series must have shape [T, d] with T >= 2 draws, got {x.shape}.")
    t = x.shape[0]
    y = x - x.mean(0)
    size = 1 << (2 * t - 1).bit_length()  # zero padding: a linear, not circular, correlation
    spectrum = np.fft.rfft(y, n=size, axis=0)
    c = np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=0)[:t]  # [T, d] lag sums
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = c / c[0]
        keep = np.cumsum(rho < 0.0, axis=0) == 0  # up to the first negative lag
        ess = t / (-1.0 + 2.0 * np.where(keep, rho, 0.0).sum(0))
    ess[~np.isfinite(ess)] = 1.0
    return ess


def log_grid(total: int, points: int, burn_in: int) -> list[int]:
    """Checkpoint steps: 0, ``points`` steps spaced evenly in log between 1 and ``total``,
    the end of burn-in and ``total``."""
    grid = np.unique(np.round(np.geomspace(1, max(total, 1), max(points, 2))).astype(int))
    return sorted({0, burn_in, total, *(int(s) for s in grid if s <= total)})


def reach_floor(curve: dict, level: float) -> dict:
    """The first checkpoint of ``curve`` at or below ``level``: its step, evaluations and
    seconds (None each when no checkpoint reaches it)."""
    for i, value in enumerate(curve["log_mmd"]):
        if value <= level:
            return {k: curve[k][i] for k in ("step", "evals", "seconds")}
    return {"step": None, "evals": None, "seconds": None}


# ============================================================================ the run
def run_seed(rbm, labels, seed, *, burn_in, steps, chains, truth, checkpoints, options,
             progress=None) -> dict:  # fmt: skip
    """One seed of the protocol: the comparison's curves and mixing figures per sampler."""
    comparison = RBMComparison(rbm, labels, chains, seed=seed, truth=truth, **options)
    total = burn_in + steps
    grid = log_grid(total, checkpoints, burn_in)
    n = rbm.n_visible
    thin = max(1, math.ceil(steps * chains * n / MAX_KEPT_VALUES))
    kept = {label: np.empty((steps // thin, chains, n), dtype=np.int8) for label in labels}
    evals_at_mixing, seconds_at_mixing = {}, {}
    done, row = 0, 0
    comparison.record()
    for target in grid[1:]:
        while done < target:
            if done == burn_in and comparison.phase == "burnin":
                comparison.start_mixing()
                evals_at_mixing = {lb: s.n_target_evals for lb, s in comparison.samplers.items()}
                seconds_at_mixing = {lb: s.wall_seconds for lb, s in comparison.samplers.items()}
            if done < burn_in:
                k = min(target, burn_in) - done
                comparison.step(k, learn=True)
            else:  # mixing: keep every thin-th state for the ESS
                k = min(target - done, thin - (done - burn_in) % thin)
                comparison.step(k)
                if (done + k - burn_in) % thin == 0 and row < len(kept[labels[0]]):
                    for label in labels:
                        x = comparison.samplers[label].x.reshape(chains, n)
                        kept[label][row] = (x > 0).to("cpu", torch.int8).numpy()
                    row += 1
            done += k
        comparison.record()
        if progress:
            progress(done / total)
    out = {}
    truth_bits = (truth > 0).numpy()
    for label in labels:
        sampler = comparison.samplers[label]
        states = kept[label][:row]
        chain0 = states[:, 0, :].astype(np.float64)  # [T, n]
        hamming = (chain0[:, None, :] != truth_bits[None, :, :]).sum(-1)  # [T, truth]
        dims, ham = gwg_ess(chain0), gwg_ess(hamming)
        bulk = ess_bulk_per_site(states) if row >= 4 else np.full(n, math.nan)
        evals = sampler.n_target_evals - evals_at_mixing[label]
        seconds = sampler.wall_seconds - seconds_at_mixing[label]
        ess = float(dims.mean())
        out[label] = {
            "curve": comparison.curve(label),
            "ess_dims_mean": ess,
            "ess_dims_std": float(dims.std()),
            "ess_hamming_mean": float(ham.mean()),
            "ess_bulk_mean": float(np.nanmean(bulk)) if np.isfinite(bulk).any() else None,
            "ess_draws": int(row),
            "mixing_evals_per_chain": int(evals),
            "mixing_seconds": float(seconds),
            "ess_per_eval": ess / evals if evals else None,
            "ess_per_second": ess / seconds if seconds > 0 else None,
            "evals_per_step_mixing": evals / steps if steps else None,
            "accept_rate": float(sampler.accept_rate),
            "backend": sampler.backend,
            "hop_distance": comparison.hop_distance(label),
        }
    return {"thin": thin, "samplers": out}
