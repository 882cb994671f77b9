"""The ESS view of a network run: the paper's ESS per sampler (mean ± std over chains), the
measure of its Table 3, with the autocorrelation it is computed from (``app.mixing_diagnostics``,
the Ising page's Mixing view's helpers)."""

from __future__ import annotations

import streamlit as st

from app import charts, network_run, presentation
from app.mixing_diagnostics import RHAT_WARN, mixing_view, rhat_warnings, snapshot

MAX_LAG = 500  # the paper's window L
TABLE3 = (
    "The paper's Table 3, on its own competition networks (not these: the generated ones are "
    "of the same kind): MN 1, √t best at 3.41 ± 0.77 and LSB 2 3.22; MN 2, √t 3.92 and LSB 2 "
    "3.44."
)


def render(run) -> None:
    comparison = run.comparison
    if comparison.phase == "burnin":
        left = max(0, run.config.burn_in - run.n_steps)
        st.info(
            f"The ESS starts after burn-in ({left:,} steps to go): it uses the magnetisation "
            "m(x) = Σᵢ xᵢ of each chain over the mixing phase."
        )
        return
    view = run.throttled("network-ess", lambda: mixing_view(snapshot(run), MAX_LAG, True))
    if view is None:
        st.caption("Collecting mixing draws…")
        return
    if view.max_lag < MAX_LAG:
        st.caption(
            f"{view.n_draws:,} mixing records per chain so far: the window is L = "
            f"{view.max_lag} lags until there are {2 * MAX_LAG:,} (then L = {MAX_LAG}, as in "
            "the paper), so early values are on a smaller scale."
        )
    # a lecture's screen shows the bars first; the table and its warning follow below
    if not presentation.is_on():
        _table(view)
    left, right = charts.row("network-ess")
    charts.show(view.ess, run, "ess", left)
    charts.show(view.acf, run, "autocorrelation", right)
    if presentation.is_on():
        _table(view)
    # the paper's Table 3 is about Markov networks, not variable selection
    table3 = " " + TABLE3 if network_run.draws_a_network(run) else ""
    st.caption(
        "Paper ESS = (L+1) / (1 + 2 Σ_{ρⱼ > 0.05} ρⱼ (1 − j/(L+1))) of the magnetisation, per "
        "chain; the bars are its mean ± std over the chains of this run (one seed; the "
        f"reproduction command repeats seeds). Recorded every {run.config.thin} step(s)." + table3
    )


def _table(view) -> None:
    """The ESS table, under a warning when the chains do not agree yet."""
    unsettled = rhat_warnings(view.summaries)
    if unsettled:
        st.warning(
            f"R-hat above {RHAT_WARN} for {', '.join(unsettled)}: the chains do not agree yet "
            "(stuck in different near-deterministic patterns, or not run long enough)."
        )
    st.dataframe(view.rows, hide_index=True)
