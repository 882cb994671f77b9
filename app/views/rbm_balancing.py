"""The RBM's balancing functions: g(t) of its locally balanced samplers, the learned ones
(LSB 1, LSB 2, FLSB 1, FLSB 2) moving during burn-in, and their learning loss below.

The figures are the Ising view's (``app/views/balancing.py``); what differs is where the ratios
t come from: the t-axis spans the flip ratios of the chains' current states.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import charts, rbm_targets
from app.views import balancing
from lsbcore import REGISTRY
from lsbcore.studies import figures


def balancings(comparison) -> dict:
    """The balancing function of every locally balanced sampler, by its label."""
    return {
        label: s.balancing
        for label, s in comparison.samplers.items()
        if REGISTRY[rbm_targets.registry_name(label)].balanced
    }


def max_log_ratio(run) -> float:
    """The largest |log t| of a flip from the chains' current states (at least 1)."""
    comparison = run.comparison
    with run.lock:
        states = comparison.states(comparison.labels[0])
    s = run.problem.target.flip_log_ratios(states)
    values = np.abs(s.numpy())
    finite = values[np.isfinite(values)]
    return float(max(1.0, finite.max())) if finite.size else 1.0


def figures_now(run):
    comparison = run.comparison
    t = balancing.t_grid(max_log_ratio(run))
    functions = balancings(comparison)
    with run.lock:  # the worker updates learned parameters in place
        curves = figures.balancing_curves(functions, t) if functions else None
        histories = {
            label: s.history.arrays()
            for label, s in comparison.samplers.items()
            if s.learnable and hasattr(s, "history")
        }
    fig = None if curves is None else figures.balancing_figure(curves[0], curves[1])
    return fig, balancing.loss_figure(histories)


def render(run) -> None:
    from lsbcore.rbm.variants import display_name

    comparison = run.comparison
    functions = balancings(comparison)
    others = [display_name(n) for n in comparison.labels if n not in functions]
    note = f"{', '.join(others)}: not locally balanced, so no balancing function g to draw."
    if not functions:
        st.info(note)
        return
    if others:
        st.caption(note)
    fig, loss = run.throttled("rbm_balancing", lambda: figures_now(run))
    charts.show(fig, run, "balancing-functions")
    state = "frozen (mixing)" if comparison.phase == "mixing" else "learning (burn-in)"
    st.caption(
        f"t spans the flip ratios of the chains' current states. Learned functions are {state}."
    )
    if loss is not None:
        charts.show(loss, run, "learning-objective")
        st.caption(balancing.ETA_MEANING)
