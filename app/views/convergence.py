"""View 5, Convergence: magnetisation, log p̃, accuracy and acceptance against iterations,
sweeps or target evaluations (mean and 95 % band over chains), with the end of burn-in marked.

Sweeps (site updates per site) put a block sampler, which updates every site per step, on the
same footing as the single-site ones. A sampler updates a fixed number of sites per step, so its
sweeps are its recorded steps scaled: the traces need no column of their own.

Long traces are thinned evenly before plotting (fewer points while the run is running), so the
figures stay light however long the run; the figures are rebuilt at most every two seconds
while running.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app import charts, presentation
from app.page_state import ensure
from lsbcore.studies import figures

X_AXES = {
    "iterations": "step",
    "sweeps": "sweeps",
    "target evaluations per chain": "target_evals",
}
X_LABELS = {"step": "iteration", "sweeps": "sweeps (site updates per site)"}
MAX_POINTS = 600  # per curve on screen when paused; the CSV export has every record
# while running fewer: lsbcore.studies.figures.band_figure's per-row nanquantile costs ~0.1 ms a
# point
LIVE_POINTS = 150
PANELS = (
    ("magnetisation", "magnetisation m(x) = Σᵢ xᵢ", "m(x)"),
    ("log_p", "unnormalised log posterior log p̃(x)", "log p̃(x)"),
    ("accuracy", "accuracy against the ground truth", "fraction of sites right"),
    ("accept_rate", "running acceptance rate (all chains)", "acceptance"),
)


def _thin_index(n: int, max_points: int) -> np.ndarray:
    if n <= max_points:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, max_points).round().astype(int))


def convergence_figures(
    traces: dict[str, dict[str, np.ndarray]],
    x_axis: str = "iterations",
    burn_in: int | None = None,
    max_points: int = MAX_POINTS,
) -> list[go.Figure]:
    """One band figure per recorded quantity; accuracy only when every trace has it."""
    traces = {n: a for n, a in traces.items() if len(a.get("step", ())) > 0}
    if not traces:
        return []
    x_key = X_AXES.get(x_axis, "step")
    if not all(x_key in a for a in traces.values()):
        x_key = "step"  # traces without sweeps (not from a run): fall back to iterations
    x_label = X_LABELS.get(x_key, "target evaluations per chain")
    figs = []
    for field, title, y_label in PANELS:
        if not all(field in a for a in traces.values()):
            continue
        series = {}
        for name, arrays in traces.items():
            idx = _thin_index(len(arrays["step"]), max_points)
            values = np.asarray(arrays[field], dtype=np.float64)
            values = values.reshape(len(arrays["step"]), -1)[idx]
            series[name] = (np.asarray(arrays[x_key])[idx], values)
        fig = figures.band_figure(series, title, y_label, x_label=x_label)
        if burn_in and x_key == "step":
            fig.add_vline(x=burn_in, line_dash="dash", line_color="#888888")
        figs.append(fig)
    return figs


def snapshot(run) -> dict[str, dict[str, np.ndarray]]:
    """Copies of every sampler's trace arrays, with each record's sweeps."""
    with run.lock:
        out = {n: tr.arrays() for n, tr in run.comparison.traces.items()}
        for name, arrays in out.items():
            sampler = run.comparison[name]
            arrays["sweeps"] = arrays["step"] * (sampler.sites_per_step / sampler.n_sites)
    return out


def render(run) -> None:
    if not run.comparison.traces:
        st.info("Traces are off for this run.")
        return
    ensure("x_axis", "iterations", lambda v: v in X_AXES)
    x_axis = st.radio(
        "x-axis",
        list(X_AXES),
        horizontal=True,
        key="x_axis",
        label_visibility="collapsed" if presentation.is_on() else "visible",  # room for the chart
    )
    points = LIVE_POINTS if run.running else MAX_POINTS
    figs = run.throttled(
        "convergence",
        lambda: convergence_figures(snapshot(run), x_axis, run.config.burn_in, points),
        (x_axis, points),
        max_age_s=2.0,
    )
    if run.n_steps == 0:
        st.caption("Press Run or Step: the traces start at the first recorded step.")
    for i, fig in enumerate(figs):
        charts.show(fig, run, f"convergence-{i + 1}")
    st.caption(
        "Lines: mean over chains; bands: 95 % of chains. Dashed line: end of burn-in. A sweep "
        "updates every site once on average: a single-site step is 1/(sites) of one, a block "
        "sampler's step a whole one. "
        "Target evaluations count single-site log-ratio evaluations per chain: the learning "
        "samplers spend more per step during burn-in."
    )


def render_by_evaluations(run) -> None:
    """The figures against target evaluations unless the user chose otherwise (the network
    page's Trace tab): what a learned sampler's extra evaluations per step cost shows there."""
    ensure("x_axis", "target evaluations per chain", lambda v: v in X_AXES)
    render(run)
