"""The live views of a run on a Markov network, in place of the Ising page's tabs.

A network has no image and no lattice of pixels: the segmentation, pixels, posterior, proposal
maps, exact chain, tempering, annealing, importance sampling, export and compare views are
about the Ising posterior of an image, so they are not offered (one sentence says so). What is
offered: the network drawn as a graph coloured by each variable's running marginal, the traces
(the Ising page's Convergence figures: log p~ and the magnetisation against iterations, sweeps
or target evaluations), the paper's ESS, the balancing functions and LSB 1's softmax weights.
Only the open tab is drawn; one failing view does not take the page down.
"""

from __future__ import annotations

import streamlit as st

from app import panel_tabs, view_links
from app.views import (
    block_proposals,
    convergence,
    network_balancing,
    network_ess,
    network_graph,
)
from app.views import weights as weights_view
from app.widgets import ensure


def trace(run) -> None:
    """The Convergence figures, against target evaluations unless the user chose otherwise:
    what a learned sampler's extra evaluations per step cost shows there."""
    ensure("x_axis", "target evaluations per chain", lambda v: v in convergence.X_AXES)
    convergence.render(run)


VIEWS = (
    ("Network", network_graph.render),
    ("Trace", trace),
    ("ESS", network_ess.render),
    ("Balancing functions", network_balancing.render),
    ("Softmax weights", weights_view.render),
    ("Block proposals", block_proposals.render_network),
)
TAB_LABELS = tuple(name for name, _ in VIEWS)
RENDER = dict(VIEWS)
TABS_KEY = view_links.NETWORK_VIEW  # the open tab, carried in links
assert TAB_LABELS == view_links.NETWORK_VIEW_NAMES, "the link parameter names every network view"
NOT_OFFERED = (
    "The segmentation, pixels, proposal-map, exact-chain, tempering, annealing, "
    "importance-sampling, export and compare views are about the Ising posterior of an image, "
    "so a network run does not offer them."
)
NO_PINS = "Pins are for the Ising and RBM pages: a network run cannot be pinned yet."


def tabs() -> None:
    """The network views of the session's run (its open tab only)."""
    from app import session

    panel_tabs.draw(st.session_state.get(session.RUN_KEY), TABS_KEY, RENDER, "network")
    st.caption(NOT_OFFERED)
