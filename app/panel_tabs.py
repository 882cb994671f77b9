"""The tabs of a page whose views replace the Ising page's (the RBM and network pages): the
open tab comes from and goes to the link, only it is drawn, and one failing view shows its
error in its own tab instead of taking the page down. Under them, the sentence on the views
the page does not offer."""

from __future__ import annotations

import logging

import streamlit as st

from app import page_state, presentation
from app.view_record import Page

log = logging.getLogger(__name__)


def draw(run, page: Page) -> None:
    """``page``'s tabs, the open one kept under its link parameter."""
    views = [v for v in page.views if v.offers(run)]
    left_out = [v.label for v in page.views if not v.offers(run)]
    open_tab, labels = page_state.Slot(page.link, None), [v.label for v in views]
    page_state.restore_links((open_tab.key,))
    if open_tab.get() not in labels:
        open_tab.set(labels[0])
    containers = st.tabs(labels, key=open_tab.key, on_change="rerun")
    page_state.remember_links((open_tab.key,))  # the fragment does not rewrite the link
    for tab, view in zip(containers, views, strict=True):
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
    if left_out:
        st.caption(f"This target does not offer the {', '.join(left_out)} views: {page.left_out}")
