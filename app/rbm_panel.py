"""The live views of a run on an RBM, in place of the Ising page's tabs.

An RBM has no image to segment and no lattice: the segmentation, pixels, posterior, proposal
maps, exact chain, tempering, annealing, importance sampling and export views are about the
Ising posterior, so they are not offered (one sentence says so). What is offered: the digit
grid, the MMD chart, the balancing functions and LSB 1's softmax weights (the Ising page's own
views), the acceptance and hop distance per sampler, and the pinned RBM runs' MMD curves.
Only the open tab is drawn.
"""

from __future__ import annotations

import streamlit as st

from app import panel_tabs, view_links
from app.views import digits, rbm_balancing, rbm_mmd, rbm_moves, rbm_pins
from app.views import weights as weights_view

VIEWS = (
    ("Digits", digits.render),
    ("MMD", rbm_mmd.render),
    ("Balancing functions", rbm_balancing.render),
    ("Softmax weights", weights_view.render),
    ("Acceptance and hops", rbm_moves.render),
    ("Pinned runs", rbm_pins.render),
)
TAB_LABELS = tuple(name for name, _ in VIEWS)
RENDER = dict(VIEWS)
TABS_KEY = view_links.RBM_VIEW  # the open tab, carried in links
assert TAB_LABELS == view_links.RBM_VIEW_NAMES, "the link parameter names every RBM view"
NOT_OFFERED = (
    "The segmentation, posterior, proposal-map, exact-chain, tempering, annealing, "
    "importance-sampling and export views are about the Ising posterior of an image, so an "
    "RBM run does not offer them."
)


def tabs() -> None:
    """The RBM views of the session's run (its open tab only)."""
    from app import session

    panel_tabs.draw(st.session_state.get(session.RUN_KEY), TABS_KEY, RENDER, "RBM")
    st.caption(NOT_OFFERED)
