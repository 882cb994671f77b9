"""View 3, Balancing functions: g(t) on log-log axes, the learned ones moving during burn-in.

A balancing function satisfies g(t) = t·g(1/t); overlaying t·g(1/t) shows it (the thin black curve
lies on the function's own). The t-axis covers the ratios that occur in this posterior. The learning
objective of the learned functions is plotted below.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app import charts
from app.page_state import ensure
from lsbcore import REGISTRY
from lsbcore.studies import figures

ETA_MEANING = (
    "Top: the learning loss, LSB's upper bound on the mutual information between consecutive "
    "states (lower means the next state depends less on the current one: faster mixing). "
    "Bottom: η (eta), an auxiliary variable of that bound learned with g; the bound is "
    "tightest at η = p̂/M̃, where M̃ estimates the chance that a step stays put, so η rises "
    "as the learned sampler rejects less."
)


def t_grid(max_abs_log_t: float, points: int = 201) -> np.ndarray:
    """Ratios t from e^-r to e^r, r the largest |log t| of the posterior (1e-1..1e8 decades)."""
    decades = min(8.0, max(1.0, max_abs_log_t / math.log(10.0)))
    return np.logspace(-decades, decades, points)


def balancing_figure(balancings: dict, overlay: bool = False, t=None) -> go.Figure | None:
    """g(t) of each balancing function (and t·g(1/t) when ``overlay``); None if there is none."""
    if not balancings:
        return None
    t, g, reflected = figures.balancing_curves(balancings, t)
    return figures.balancing_figure(t, g, reflected if overlay else None)


def loss_figure(histories: dict[str, dict]) -> go.Figure | None:
    """The learning loss of each learned sampler over burn-in; None before any learning."""
    histories = {n: h for n, h in histories.items() if len(h.get("step", ())) > 0}
    if not histories:
        return None
    return figures.loss_figure(histories)


def max_log_ratio(target) -> float:
    """The largest |log t| a flip can have in ``target``: 2 (max |alpha| + 4 lambda)."""
    return 2.0 * (target.alpha.abs().max().item() + 4.0 * target.lam)


def figures_now(run, overlay: bool = False) -> tuple[go.Figure | None, dict]:
    """The g(t) figure of the samplers' current functions, and the learners' histories."""
    comparison = run.comparison
    balancings = figures.balancings_of(comparison.samplers)
    t = t_grid(max_log_ratio(run.problem.target))
    with run.lock:  # the worker updates learned parameters in place
        curves = figures.balancing_curves(balancings, t) if balancings else None
        histories = {
            n: s.history.arrays() for n, s in comparison.samplers.items() if REGISTRY[n].learnable
        }
    if curves is None:
        return None, histories
    t, g, reflected = curves
    return figures.balancing_figure(t, g, reflected if overlay else None), histories


def _figures(run, overlay: bool):
    fig, histories = figures_now(run, overlay)
    return fig, loss_figure(histories)


def overlay_choice(comparison) -> bool | None:
    """The note on the samplers without a g and the reflection checkbox: whether to overlay
    ``t g(1/t)``, or None (and a sentence) when no sampler has a balancing function."""
    balancings = figures.balancings_of(comparison.samplers)
    others = [figures.sampler_label(n) for n in comparison.names if n not in balancings]
    note = f"{', '.join(others)}: not locally balanced, so no balancing function g to draw."
    if not balancings:
        st.info(note)
        return None
    if others:
        st.caption(note)
    ensure("overlay_reflection", False)
    return st.checkbox(
        "Overlay t·g(1/t) (thin black): it coincides with g(t) for every balancing function",
        key="overlay_reflection",
    )


def render(run) -> None:
    comparison = run.comparison
    overlay = overlay_choice(comparison)
    if overlay is None:
        return
    max_s = max_log_ratio(run.problem.target)
    fig, loss = run.throttled("balancing", lambda: _figures(run, overlay), (overlay,))
    charts.show(fig, run, "balancing-functions")
    state = "frozen (mixing)" if comparison.phase == "mixing" else "learning (burn-in)"
    st.caption(
        f"t ranges over e^±{max_s:.1f} in this posterior. Learned functions are {state}. "
        "Curves that coincide stay visible: each function has its own dash, width or markers, "
        "and the wider lines lie underneath."
    )
    if loss is not None:
        charts.show(loss, run, "learning-objective")
        st.caption(ETA_MEANING)
