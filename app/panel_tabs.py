"""The tabs of a page whose views replace the Ising page's (the RBM and network pages): the
open tab comes from and goes to the link, only it is drawn, and one failing view shows its
error in its own tab instead of taking the page down."""

from __future__ import annotations

import logging

import streamlit as st

from app import presentation, view_links

log = logging.getLogger(__name__)


def draw(run, key: str, views: dict, what: str) -> None:
    """Tabs named by ``views`` (label -> ``render(run)``), the open one kept under ``key`` (a
    link parameter); ``what`` names the page in the log."""
    state = st.session_state
    labels = list(views)
    view_links.restore(state, (key,))
    if state[key] not in views:
        state[key] = labels[0]
    containers = st.tabs(labels, key=key, on_change="rerun")
    view_links.remember(state, (key,))
    view_links.publish(st.query_params, state)  # the fragment does not rewrite the link
    for tab, name in zip(containers, labels, strict=True):
        if tab.open is False:
            continue
        with tab:
            try:
                presentation.seeing(name)
                views[name](run)
            except Exception as err:  # one failing view must not take the page down
                log.exception("%s view %s failed", what, name)
                st.error(f"The {name} view could not be drawn: {err}")
