"""The balancing functions of a network run: g(t) of every locally balanced sampler, the
learned ones (LSB 1, LSB 2, LSB 2') live during burn-in, over the ratios this network has.

The Ising page's view bounds t by the posterior's field and coupling; a network's largest
finite |log t| is bounded by ``network_targets.max_abs_log_ratio`` (moves into zero mass have
t = 0 and are never taken). Each curve is drawn through its ``Balancing.g``.
"""

from __future__ import annotations

import streamlit as st

from app import charts, network_targets
from app.file_names import export_stem
from app.views.balancing import ETA_MEANING, loss_figure, overlay_choice, t_grid
from app.views.export import learned_functions
from lsbcore import REGISTRY
from lsbcore.studies import figures
from lsbcore.studies.networks.escape import g_at_zero


def _bound(run) -> float:
    """The network's bound on a flip's finite |log t|, computed once per run (a loop over the
    factors: an upload may have many)."""
    if "network-log-ratio-bound" not in run.cache:
        run.cache["network-log-ratio-bound"] = network_targets.max_abs_log_ratio(run.problem.target)
    return run.cache["network-log-ratio-bound"]


def _figures(run, overlay: bool):
    comparison = run.comparison
    balancings = figures.balancings_of(comparison.samplers)
    t = t_grid(_bound(run))
    with run.lock:  # the worker updates learned parameters in place
        t, g, reflected = figures.balancing_curves(balancings, t)
        histories = {
            n: s.history.arrays() for n, s in comparison.samplers.items() if REGISTRY[n].learnable
        }
    fig = figures.balancing_figure(t, g, reflected if overlay else None)
    return fig, loss_figure(histories)


def render(run) -> None:
    comparison = run.comparison
    overlay = overlay_choice(comparison)
    if overlay is None:
        return
    fig, loss = run.throttled("network-balancing", lambda: _figures(run, overlay), (overlay,))
    charts.show(fig, run, "balancing-functions")
    bound = _bound(run)
    state = "frozen (mixing)" if comparison.phase == "mixing" else "learning (burn-in)"
    st.caption(
        f"A single flip's finite |log t| is at most {bound:.1f} in this network (a move into "
        f"zero mass has t = 0 and is never taken). Learned functions are {state}. LSB 2' is "
        "g(t) = min{h(t), t h(1/t)} with h a monotone network: balanced by construction."
    )
    if loss is not None:
        charts.show(loss, run, "learning-objective")
        st.caption(ETA_MEANING)
    _downloads(run)


def _downloads(run) -> None:
    """Each learned function as JSON (the Ising page's "Imported" sampler reads it back), with
    its g(0): whether it proposes moves into zero mass."""
    comparison = run.comparison
    learned = [n for n in comparison.names if REGISTRY[n].learnable]
    if not learned:
        return
    with run.lock:
        zeros = {n: g_at_zero(comparison[n].balancing) for n in learned}
        files = learned_functions({n: comparison[n] for n in learned}, {"target": run.problem.name})
    st.caption(
        "g(0) of the learned functions (above 0: moves into zero mass are proposed, and "
        "rejected): "
        + ", ".join(f"{figures.sampler_label(n)} {zeros[n]:.3g}" for n in learned)
        + "."
    )
    row = st.container(horizontal=True)
    for name in learned:
        row.download_button(
            f"{figures.sampler_label(name)} (JSON)",
            data=files[name],
            file_name=f"{export_stem(run)}-{name}.json",
            mime="application/json",
            on_click="ignore",
            key=f"network_download_{name}",
            help="A learned balancing function; import it with the sampler 'Imported'.",
        )
