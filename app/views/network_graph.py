"""The Network view: the Markov network as a graph, each variable coloured by its marginal.

Nodes are the variables, laid out by ``lsbcore.networks.layout`` (the grid of a grid network,
else a seeded spring layout); edges join variables that share a factor. A node's colour is
P(x_i = +1) under one chosen sampler: after burn-in the comparison's running marginal (every
mixing record of every chain), during burn-in the mean of the chains' current states (the
marginal starts with mixing, when the learned functions are frozen); the caption says which.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app import charts
from app.page_state import ensure
from lsbcore.studies.figures import sampler_label

SAMPLER_KEY = "network_sampler"
COLOURS = "RdBu_r"  # blue for -1, red for +1, white for undecided


def marginal(run, name: str) -> tuple[np.ndarray, str]:
    """P(x_i = +1) per variable ``[n]`` under sampler ``name``, and what it is."""
    comparison = run.comparison
    with run.lock:
        estimate = comparison.marginals[name]
        if comparison.phase == "mixing" and estimate.count > 0:
            p = estimate.mean().reshape(-1)
            return p, (
                f"running marginal over {estimate.count:,} mixing records of each of "
                f"{comparison.n_chains} chains"
            )
        x = comparison[name].x.detach().reshape(comparison.n_chains, -1)
        p = ((x.double().mean(0) + 1.0) / 2.0).cpu().numpy()
    return p, (
        f"burn-in: the mean of the {comparison.n_chains} chains' current states (the running "
        "marginal starts after burn-in)"
    )


def node_size(n: int, kind: str) -> float:
    if kind == "grid":
        return float(max(6.0, min(22.0, 220.0 / np.sqrt(n))))
    return float(max(4.0, min(14.0, 300.0 / np.sqrt(n))))


def graph_figure(layout, p: np.ndarray, title: str) -> go.Figure:
    """The graph of ``layout`` with node colours ``p`` in [0, 1]."""
    pos, edges = layout.positions, layout.edges
    n = len(pos)
    fig = go.Figure()
    if len(edges):
        xs = np.full(3 * len(edges), np.nan)
        ys = np.full(3 * len(edges), np.nan)
        xs[0::3], xs[1::3] = pos[edges[:, 0], 0], pos[edges[:, 1], 0]
        ys[0::3], ys[1::3] = pos[edges[:, 0], 1], pos[edges[:, 1], 1]
        fig.add_trace(
            go.Scatter(
                x=xs, y=ys, mode="lines", line={"color": "#c8c8c8", "width": 1},
                hoverinfo="skip", showlegend=False, name="shared factor",
            )
        )  # fmt: skip
    fig.add_trace(
        go.Scatter(
            x=pos[:, 0],
            y=pos[:, 1],
            mode="markers",
            name="variables",
            showlegend=False,
            marker={
                # a plain list: the browser's figure holds numbers, not an encoded array
                "color": np.asarray(p, dtype=np.float64).tolist(),
                "colorscale": COLOURS,
                "cmin": 0.0,
                "cmax": 1.0,
                "size": node_size(n, layout.kind),
                "line": {"color": "#555555", "width": 0.5},
                "colorbar": {"title": {"text": "P(x = +1)"}, "thickness": 14},
            },
            text=[f"x{i}: P(x = +1) = {v:.3f}" for i, v in enumerate(p)],
            hoverinfo="text",
        )
    )
    fig.update_layout(
        template="plotly_white",
        title={"text": title, "x": 0.01, "xanchor": "left"},
        height=560,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        xaxis={"visible": False},
        yaxis={"visible": False, "scaleanchor": "x", "scaleratio": 1},
    )
    return fig


def render(run) -> None:
    comparison = run.comparison
    names = comparison.names
    ensure(SAMPLER_KEY, names[0], lambda v: v in names)
    name = st.selectbox(
        "Colour by the marginal of",
        names,
        format_func=sampler_label,
        key=SAMPLER_KEY,
        help="Each variable's colour is P(x = +1) under this sampler's chains.",
    )
    layout = run.problem.layout
    p, what = marginal(run, name)
    fig = run.throttled(
        "network-graph",
        lambda: graph_figure(
            layout, p, f"{run.problem.name}: P(x = +1) under {sampler_label(name)}"
        ),
        (name,),
    )
    charts.show(fig, run, "network")
    edges = f"{len(layout.edges):,} edges join variables that share a factor"
    where = "on its grid" if layout.kind == "grid" else "by a spring layout (seeded)"
    st.caption(
        f"Colour: {what}. Drawn {where}; {edges}. Blue: x = −1, red: x = +1, white: the chains "
        "disagree."
    )
