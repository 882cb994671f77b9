"""The RBM's convergence view: log10 MMD to the ground truth against target evaluations.

One line per sampler (its checkpoints, ``RBMComparison.curve``), the x axis logarithmic in the
target evaluations per chain (``docs/method.md`` section 9), and the noise floor: the MMD of as
many exact samples as there are chains against the same ground truth. A sampler on the floor
cannot be told from exact sampling at this chain count.
"""

from __future__ import annotations

import math
import time

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app import charts
from lsbcore.studies import figures

FLOOR_COLOUR = "#555555"
MAX_AGE_S = 1.0  # while running, the chart is built again at most this often
AXES = {"evals": "target evaluations per chain", "seconds": "sampling seconds"}


def mmd_figure(curves: dict[str, dict], floor: float | None, x: str = "evals") -> go.Figure:
    """``log_mmd`` of every curve against ``x`` ("evals" or "seconds"), log x axis, with the
    noise floor as a dashed line named in the legend."""
    from lsbcore.rbm.variants import display_name

    fig = go.Figure()
    for label, curve in curves.items():
        xs = np.asarray(curve[x], dtype=np.float64)
        ys = np.asarray(curve["log_mmd"], dtype=np.float64)
        keep = (xs > 0) & np.isfinite(ys)  # a log axis has no room for the start at 0
        fig.add_trace(
            go.Scatter(
                x=xs[keep],
                y=ys[keep],
                mode="lines",
                name=display_name(label),
                line={"color": figures.sampler_colour(label), "width": 2.5},
                hovertemplate="%{y:.2f}",
            )
        )
    if floor is not None and math.isfinite(floor):
        fig.add_hline(y=floor, line={"color": FLOOR_COLOUR, "dash": "dash", "width": 2})
        fig.add_trace(  # the legend entry of the floor line
            go.Scatter(
                x=[None],
                y=[None],
                mode="lines",
                name=f"noise floor ({floor:.2f})",
                line={"color": FLOOR_COLOUR, "dash": "dash", "width": 2},
            )
        )
    fig.update_layout(
        template="plotly_white",
        title={"text": "log10 MMD to the ground truth", "x": 0.01, "xanchor": "left"},
        height=420,
        margin={"l": 60, "r": 20, "t": 60, "b": 50},
        legend={"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0, "xanchor": "left"},
        hovermode="x unified",
        font={"size": 13},
    )
    fig.update_xaxes(type="log", title_text=AXES[x])
    fig.update_yaxes(title_text="log10 MMD")
    return fig


def curves_now(run) -> dict[str, dict]:
    comparison = run.comparison
    with run.lock:
        return {label: comparison.curve(label) for label in comparison.labels}


def figure_now(run, floor: float | None, x: str) -> go.Figure:
    """The chart of the curves so far, built again only when a checkpoint was added (and, while
    running, at most every ``MAX_AGE_S``): between checkpoints the page resends the same
    figure, which neither the server nor the browser redraws, so an open tab leaves the
    sampler its pace."""
    shown = (x, floor, run.comparison.n_records)
    entry = run.cache.get("rbm_mmd")
    if entry is not None and entry[0][:2] == shown[:2]:
        young = time.perf_counter() - entry[1] < MAX_AGE_S
        if entry[0] == shown or (run.running and young):
            return entry[2]
    fig = mmd_figure(curves_now(run), floor, x)
    run.cache["rbm_mmd"] = (shown, time.perf_counter(), fig)
    return fig


def floor_note(run, follows: str = "the dashed line follows") -> str:
    """What the first open of the tab computes, said while it does; ``follows``: what waits."""
    return (
        f"Computing the noise floor: 8 draws of {run.config.chains} exact samples, "
        f"{run.comparison.truth_steps:,} sweeps of block Gibbs each, against the ground truth "
        f"(once per run; {follows})."
    )


def floor_of(run, note=None, follows: str = "the dashed line follows") -> float:
    """The noise floor for this run's chain count (a Gibbs run of its own: computed once);
    ``note`` (a placeholder of the page by default) says so meanwhile."""
    if "rbm_floor" not in run.cache:
        note = note if note is not None else st.empty()
        note.info(floor_note(run, follows))
        run.cache["rbm_floor"] = run.comparison.noise_floor
        note.empty()
    return run.cache["rbm_floor"]


def render(run) -> None:
    x = st.radio(
        "Against",
        list(AXES),
        format_func=AXES.get,
        key="rbm_mmd_axis",
        horizontal=True,
        label_visibility="collapsed",
    )
    chart, note = st.empty(), st.empty()
    if "rbm_floor" not in run.cache:  # first open: the curves at once, the floor after
        charts.show(figure_now(run, None, x), run, "rbm-mmd", where=chart)
    floor = floor_of(run, note)
    charts.show(figure_now(run, floor, x), run, "rbm-mmd", where=chart)
    from lsbcore.rbm.ground_truth import TRUTH_STEPS

    sweeps = run.comparison.truth_steps
    st.caption(
        f"MMD with the exponentiated average Hamming kernel between each sampler's "
        f"{run.config.chains} chains and the ground truth ({len(run.comparison.truth):,} exact "
        f"block-Gibbs chains of {sweeps:,} sweeps). The dashed line is the noise floor "
        f"({floor:.2f}): {run.config.chains} exact samples against the same truth. Checkpoints "
        "are spaced geometrically in steps."
    )
    if sweeps < TRUTH_STEPS:
        st.info(
            f"This model is large, so its ground truth ran {sweeps:,} sweeps rather than the "
            f"{TRUTH_STEPS:,} of the shipped models, to be ready within seconds: if block Gibbs "
            "mixes slowly on it, the truth and its floor are approximate."
        )
