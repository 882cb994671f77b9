"""View 6, Mixing (after burn-in): autocorrelation of the magnetisation, the paper's ESS, and
rank-normalised bulk ESS / split R-hat from ``lsbcore.diagnostics.mixing`` (arviz-stats
underneath), computed by ``app.mixing_diagnostics``.
"""

from __future__ import annotations

import streamlit as st

from app import charts, presentation, tables
from app.mixing_diagnostics import RHAT_WARN, mixing_view, rhat_warnings, snapshot


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
    shared = run.problem.target.batch == 1
    view = run.throttled(
        "mixing", lambda: mixing_view(snapshot(run), max_lag, shared), (max_lag, shared)
    )
    if view is None:
        st.caption("Collecting mixing draws…")
        return
    if view.max_lag < max_lag:
        st.caption(
            f"{view.n_draws:,} mixing records per chain so far: the paper ESS uses a window "
            f"of L = {view.max_lag} lags until there are {2 * max_lag:,} (then L = {max_lag}, "
            "as in the paper), so early values are on a smaller scale."
        )
    # a lecture's screen shows the charts first; the table and its notes follow below
    if not presentation.is_on():
        _table(view, shared)
    left, right = charts.row("mixing")
    charts.show(view.acf, run, "autocorrelation", left)
    charts.show(view.ess, run, "ess", right)
    if presentation.is_on():
        _table(view, shared)
    pooled = (
        "Bulk ESS (pooled): effective independent draws of m(x) over all chains together "
        "(rank-normalised, Vehtari et al. 2021). R-hat: whether the chains agree; above "
        f"{RHAT_WARN} they do not yet."
        if shared
        else "Bulk ESS per chain: each chain's effective independent draws of m(x) on its own "
        "(rank-normalised, Vehtari et al. 2021), mean ± std over chains."
    )
    st.caption(
        "Paper ESS = (L+1) / (1 + 2 Σ_{ρⱼ > 0.05} ρⱼ (1 − j/(L+1))) per chain, mean ± std over "
        "chains: effective draws per window of L+1 (i.i.d. draws give L+1). In the paper's cases "
        f"1–3 every sampler lies between about 1 and 4 and max(1, t) mixes worst. {pooled} "
        "Autocorrelation ρⱼ: the correlation of m(x) with itself j recorded draws later. "
        f"Recorded every {run.config.thin} step(s)."
    )


def _table(view, shared: bool) -> None:
    """The ESS table, with the notes on what its figures mean for this run."""
    if not shared:
        st.info(
            "Every chain here samples its own posterior (each has its own noisy α, as in the "
            "paper), so the chains are not meant to agree: R-hat is left out and the bulk ESS is "
            'each chain\'s own. Tick "one α for all chains" in the sidebar to compare chains of '
            "one posterior."
        )
    unsettled = rhat_warnings(view.summaries) if shared else []
    if unsettled:
        st.warning(
            f"R-hat above {RHAT_WARN} for {', '.join(unsettled)}: the chains do not agree yet "
            "(not mixed, or not run long enough); ESS figures are not reliable until it drops."
        )
    tables.dataframe(view.rows, hide_index=True)
