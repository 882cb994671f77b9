"""The tabs of a page whose views replace the Ising page's (the RBM and network pages): the
open tab comes from and goes to the link, only it is drawn, and one failing view shows its
error in its own tab instead of taking the page down. Under them, the sentence on the views
the page does not offer."""

from __future__ import annotations

import logging

import streamlit as st

from app import presentation, view_links
from app.view_record import Page

log = logging.getLogger(__name__)


def draw(run, page: Page) -> None:
    """``page``'s tabs, the open one kept under its link parameter."""
    state = st.session_state
    key, labels = page.link, list(page.labels)
    view_links.restore(state, (key,))
    if state[key] not in labels:
        state[key] = labels[0]
    containers = st.tabs(labels, key=key, on_change="rerun")
    view_links.remember(state, (key,))
    view_links.publish(st.query_params, state)  # the fragment does not rewrite the link
    for tab, view in zip(containers, page.views, strict=True):
        if tab.open is False:
            continue
        with tab:
            try:
                presentation.seeing(view.seeing)
                view.draw(run)
            except Exception as err:  # one failing view must not take the page down
                log.exception("%s view %s failed", page.kind, view.label)
                st.error(f"The {view.label} view could not be drawn: {err}")
    if page.not_offered:
        st.caption(page.not_offered)
