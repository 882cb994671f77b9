"""View 4, Softmax weights: how LSB 1 mixes t/(1+t), √t, min and max over burn-in, and now.

The paper reports that LSB 1 leans to the unbounded functions (√t, max) early in burn-in and
moves away from max near convergence.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app import charts
from lsbcore.balancing.functions import FORMULAS
from lsbcore.studies import figures


def weights_figures(
    history: dict | None, current: np.ndarray | None
) -> tuple[go.Figure | None, go.Figure | None]:
    """(stacked area of the weights over burn-in, bars of the current weights); None for what
    there is no data for."""
    area = None
    if history is not None:
        steps = np.asarray(history.get("step", ()))
        weights = np.asarray(history.get("weights", np.zeros((0, 4))))
        if len(steps) and weights.ndim == 2 and weights.shape[0] == len(steps):
            area = figures.weights_area_figure(steps, weights)
    bars = None
    if current is not None and np.asarray(current).size == 4:
        bars = figures.weights_bar_figure(np.asarray(current, dtype=np.float64))
    return area, bars


def snapshot(run) -> tuple[dict | None, np.ndarray | None]:
    """LSB 1's learning history and current weights, or (None, None) without LSB 1."""
    sampler = run.comparison.samplers.get("lsb1")
    if sampler is None:
        return None, None
    with run.lock:
        return sampler.history.arrays(), sampler.balancing.weights()


def render(run) -> None:
    sampler = run.comparison.samplers.get("lsb1")
    if sampler is None:
        st.info("Add **LSB 1** to the samplers to watch its softmax weights.")
        return
    history, current = snapshot(run)
    area, bars = run.throttled("weights", lambda: weights_figures(history, current))
    left, right = st.columns([3, 1])
    with left:
        if area is None:
            st.caption("The weights are recorded while LSB 1 learns: press Run or Step.")
        else:
            charts.show(area, run, "lsb1-weights")
    with right:
        charts.show(bars, run, "lsb1-final-weights")
    phase = "frozen since burn-in ended" if run.comparison.phase == "mixing" else "learning"
    st.caption(
        "Weights: "
        + ", ".join(
            f"{FORMULAS[n]} {w:.3f}" for n, w in zip(figures.COMPONENTS, current, strict=True)
        )
        + f" ({phase})."
    )
