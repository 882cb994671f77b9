"""View 6, Mixing (after burn-in): autocorrelation of the magnetisation, the paper's ESS, and
rank-normalised bulk ESS / split R-hat from ``lsbcore.diagnostics.mixing`` (arviz-stats underneath).

The paper ESS is per window of L + 1 recorded draws (Zanella's convention; Table 2 of the LSB
paper uses L = 500 of 30 000 draws). While the mixing phase is shorter than 2L the window is
clipped to half its length, as in the results export (``lsbcore.results.effective_max_lag``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import streamlit as st

import lsbcore
from lsbcore import figures
from lsbcore.figures import sampler_label as label
from lsbcore.results import effective_max_lag

MIN_DRAWS = 4  # bulk ESS and R-hat need at least this many draws per chain


@dataclass
class MixingView:
    acf: go.Figure
    ess: go.Figure
    rows: list[dict]
    summaries: dict[str, dict]
    n_draws: int
    max_lag: int  # the window used


def mixing_view(series: dict[str, np.ndarray], max_lag: int = 500) -> MixingView | None:
    """Diagnostics of per-sampler mixing series ``[B, T]``; None before there are enough draws."""
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
        rows.append(
            {
                "sampler": label(name),
                f"paper ESS per {lag + 1} draws": (
                    "—" if mean is None else f"{mean:.2f} ± {std:.2f}"
                ),
                "bulk ESS": None if d["ess_bulk"] is None else round(d["ess_bulk"], 1),
                "R-hat": None if d["rhat"] is None else round(d["rhat"], 3),
                "draws per chain": d["n_draws"],
                "notes": "; ".join(d["notes"]),
            }
        )
    return MixingView(
        acf=figures.acf_figure(acf),
        ess=figures.ess_figure(summaries),
        rows=rows,
        summaries=summaries,
        n_draws=n_draws,
        max_lag=lag,
    )


def snapshot(run) -> dict[str, np.ndarray]:
    """Each sampler's mixing-phase magnetisation ``[B, T]``."""
    with run.lock:
        return {n: tr.mixing_series() for n, tr in run.comparison.traces.items()}


def render(run) -> None:
    comparison = run.comparison
    if comparison.phase == "burnin":
        left = max(0, run.config.burn_in - run.n_steps)
        st.info(
            f"Mixing diagnostics start after burn-in ({left:,} steps to go). They use the "
            "magnetisation m(x) = Σᵢ xᵢ of each chain over the mixing phase."
        )
        return
    if not comparison.traces:
        st.info("Traces are off for this run.")
        return
    max_lag = 500
    view = run.throttled("mixing", lambda: mixing_view(snapshot(run), max_lag), (max_lag,))
    if view is None:
        st.caption("Collecting mixing draws…")
        return
    if view.max_lag < max_lag:
        st.caption(
            f"{view.n_draws:,} mixing records per chain so far: the paper ESS uses a window "
            f"of L = {view.max_lag} lags until there are {2 * max_lag:,} (then L = {max_lag}, "
            "as in the paper), so early values are on a smaller scale."
        )
    st.dataframe(view.rows, hide_index=True)
    left, right = st.columns(2)
    left.plotly_chart(view.acf, config={"displayModeBar": False})
    right.plotly_chart(view.ess, config={"displayModeBar": False})
    st.caption(
        "Paper ESS = (L+1) / (1 + 2 Σ_{ρⱼ > 0.05} ρⱼ (1 − j/(L+1))) per chain, mean ± std over "
        "chains: effective draws per window of L+1 (i.i.d. draws give L+1). In the paper's cases "
        "1–3 every sampler lies between about 1 and 4 and max(1, t) mixes worst. Bulk ESS and "
        f"R-hat pool all chains; R-hat near 1 means they agree. Recorded every "
        f"{run.config.thin} step(s)."
    )
