"""The Inclusion view of a variable-selection run: P(x_i = +1), feature i in the model, per feature
and sampler, the truly informative features marked.

Each sampler's estimate is the comparison's running marginal (``network_graph.marginal``: every
mixing record of every chain; during burn-in the chains' current states). Up to
``selection_target.MAX_EXACT_FEATURES`` features the exact probabilities (all 2^k inclusion
vectors enumerated, once per run) are drawn as the reference; beyond, the caption says the
values are estimates.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app import charts, selection_target
from app.views.network_graph import marginal
from lsbcore.studies.figures import sampler_label

EXACT_KEY = "selection-exact"  # run.cache: the exact inclusion probabilities, or None


def exact(run) -> np.ndarray | None:
    """The exact inclusion probabilities of ``run``'s target on few features, else None."""
    if EXACT_KEY not in run.cache:
        target = run.problem.target
        small = target.n_sites <= selection_target.MAX_EXACT_FEATURES
        run.cache[EXACT_KEY] = selection_target.exact_inclusion(target) if small else None
    return run.cache[EXACT_KEY]


def figure(estimates: dict[str, np.ndarray], informative, reference, title: str) -> go.Figure:
    """Dots of each sampler's P(x_i = +1) over features 1..k, grey bars on the informative
    features, the exact values (``reference``, or None) as black dashes."""
    k = len(next(iter(estimates.values())))
    features = np.arange(1, k + 1)
    fig = go.Figure()
    marked = [i + 1 for i in informative]
    fig.add_trace(
        go.Bar(
            x=marked, y=[1.0] * len(marked), width=0.8, name="truly informative",
            marker={"color": "rgba(120, 120, 120, 0.18)"}, hoverinfo="x",
        )
    )  # fmt: skip
    if reference is not None:
        fig.add_trace(
            go.Scatter(
                x=features.tolist(), y=np.asarray(reference).tolist(), mode="markers",
                name="exact", marker={"symbol": "line-ew-open", "size": 16, "color": "black"},
            )
        )  # fmt: skip
    for name, p in estimates.items():
        fig.add_trace(
            go.Scatter(
                x=features.tolist(), y=np.asarray(p, dtype=np.float64).tolist(),
                mode="markers", name=sampler_label(name), marker={"size": 7, "opacity": 0.8},
            )
        )  # fmt: skip
    fig.update_layout(
        template="plotly_white",
        title={"text": title, "x": 0.01, "xanchor": "left"},
        height=420,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        xaxis={"title": {"text": "feature"}, "range": [0.3, k + 0.7]},
        yaxis={"title": {"text": "P(feature included)"}, "range": [-0.03, 1.05]},
        bargap=0.0,
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def render(run) -> None:
    comparison = run.comparison
    problem = run.problem
    estimates, what = {}, ""
    for name in comparison.names:
        estimates[name], what = marginal(run, name)
    if not estimates:
        st.info("No sampler is running: choose one in the sidebar.")
        return
    reference = exact(run)
    k, m = problem.target.n_sites, len(problem.informative)
    fig = run.throttled(
        "inclusion",
        lambda: figure(
            estimates, problem.informative, reference,
            f"Inclusion probabilities: {k:,} features, {m:,} informative",
        ),
    )  # fmt: skip
    charts.show(fig, run, "inclusion")
    lines = []
    for name, p in estimates.items():
        hits, false = selection_target.found(p, problem.informative)
        error = ""
        if reference is not None:
            error = f", largest error {np.abs(p - reference).max():.3f}"
        lines.append(
            f"- {sampler_label(name)}: {hits} of {m} informative features above 1/2, "
            f"{false} others{error}"
        )
    st.markdown("\n".join(lines))
    where = (
        f"black dashes: the exact values, all 2^{k} inclusion vectors enumerated"
        if reference is not None
        else f"these are estimates (exact values are enumerated up to "
        f"{selection_target.MAX_EXACT_FEATURES} features)"
    )
    st.caption(f"Each dot: {what}; {where}. Grey bars mark the truly informative features.")
