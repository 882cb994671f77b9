"""The mixing diagnostics of a run, as plain data and figures: the autocorrelation of each
sampler's magnetisation, the paper's ESS, rank-normalised bulk ESS and split R-hat
(``lsbcore.diagnostics.mixing``). The Mixing view draws them and a pinned run keeps them
(``app.pins``); neither imports the other.

The paper ESS is per window of L + 1 recorded draws (Zanella's convention; Table 2 of the LSB
paper uses L = 500 of 30 000 draws). While the mixing phase is shorter than 2L the window is
clipped to half its length, as in the results export
(``lsbcore.studies.results.effective_max_lag``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

import lsbcore
from lsbcore.studies import figures
from lsbcore.studies.figures import sampler_label as label
from lsbcore.studies.results import effective_max_lag

MIN_DRAWS = 4  # bulk ESS and R-hat need at least this many draws per chain


@dataclass
class MixingView:
    acf: go.Figure
    ess: go.Figure
    rows: list[dict]
    summaries: dict[str, dict]
    n_draws: int
    max_lag: int  # the window used
    acf_curves: dict[str, np.ndarray]  # name -> [B, max_lag + 1], what a pinned run keeps


RHAT_WARN = 1.01  # Vehtari et al. (2021): above this, the chains do not agree yet


def mixing_view(
    series: dict[str, np.ndarray], max_lag: int = 500, shared: bool = True
) -> MixingView | None:
    """Diagnostics of per-sampler mixing series ``[B, T]``; None before there are enough draws.

    ``shared``: every chain samples the same posterior. When not (the paper cases give every
    chain its own noisy alpha), pooled bulk ESS and R-hat would compare unlike chains: the bulk
    ESS is then each chain's own (mean ± std over chains) and R-hat is left out.
    """
    series = {n: np.asarray(s, dtype=np.float64) for n, s in series.items()}
    series = {n: s for n, s in series.items() if s.ndim == 2 and s.shape[1] >= MIN_DRAWS}
    if not series:
        return None
    n_draws = min(s.shape[1] for s in series.values())
    lag = effective_max_lag(n_draws, max_lag)
    acf = {n: lsbcore.autocorrelation(s, lag) for n, s in series.items()}
    summaries = {
        n: lsbcore.summarise_mixing(s, max_lag=lag).as_dict(nonfinite_as_none=True)
        for n, s in series.items()
    }
    rows = []
    for name, d in summaries.items():
        mean, std = d["ess_paper_mean"], d["ess_paper_std"]
        row = {
            "sampler": label(name),
            f"paper ESS per {lag + 1} draws": "—" if mean is None else f"{mean:.2f} ± {std:.2f}",
        }
        if shared:
            row["bulk ESS (pooled)"] = None if d["ess_bulk"] is None else round(d["ess_bulk"], 1)
            row["R-hat"] = None if d["rhat"] is None else round(d["rhat"], 3)
        else:
            own = lsbcore.ess_bulk_per_chain(series[name])
            own = own[np.isfinite(own)]
            row["bulk ESS per chain"] = (
                "—" if own.size == 0 else f"{own.mean():.1f} ± {own.std():.1f}"
            )
            d["ess_bulk"] = float(own.mean()) if own.size else None  # what the chart shows
            d["rhat"] = None  # not defined across chains of different posteriors
        row["draws per chain"] = d["n_draws"]
        row["notes"] = "; ".join(d["notes"])
        rows.append(row)
    return MixingView(
        acf=figures.acf_figure(acf),
        ess=figures.ess_figure(
            summaries,
            "bulk ESS (pooled)" if shared else "bulk ESS (per chain)",
        ),
        rows=rows,
        summaries=summaries,
        n_draws=n_draws,
        max_lag=lag,
        acf_curves=acf,
    )


def snapshot(run) -> dict[str, np.ndarray]:
    """Each sampler's mixing-phase magnetisation ``[B, T]``."""
    with run.lock:
        return {n: tr.mixing_series() for n, tr in run.comparison.traces.items()}


def rhat_warnings(summaries: dict[str, dict]) -> list[str]:
    """Samplers whose chains do not agree yet (pooled R-hat above RHAT_WARN)."""
    return [
        f"{label(n)} (R-hat {d['rhat']:.3f})"
        for n, d in summaries.items()
        if d.get("rhat") is not None and d["rhat"] > RHAT_WARN
    ]
