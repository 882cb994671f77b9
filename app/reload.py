"""A reload mid-run takes the run back: the page's link names its run, the server holds it.

Streamlit gives a reloaded page a new session, with nothing of the old one. So every run is
held by the server (``state.hold``) under an unguessable token that the page's link carries
(``?run=...``), with the session values its page needs again (the photo uploaded, its prompt,
the user's own RBM). A session whose first run finds a token takes that run back
(``state.reclaim``) when the server still holds it and the browser is the one that held it:
the browser is known by the token inside Streamlit's XSRF cookie, which the browser keeps and
sends with every page load but which a copied link does not carry. A running run whose page
went away waits ``state.RESUME_S`` seconds, paused, for its page, then lets its memory go; a
paused one is held as long as Streamlit keeps the closed page's session. Where the run cannot
be taken back the page says so, and a new run starts.
"""

from __future__ import annotations

import hashlib
import itertools

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from app import network_sidebar, page_state, rbm_training, sidebar, state
from app import prompt as prompts

PARAM = "run"  # the link parameter that names the page's run
XSRF_COOKIE = "_streamlit_xsrf"
TRIED = page_state.Slot("_resume_tried", False)  # this session looked for its link's run
# what a page needs again to go on with its run, beside the link's settings
KEEP = (
    "_kept_upload",
    sidebar.KEPT_SOURCES,
    sidebar.KEPT_TARGETS,
    prompts.STATE,
    prompts.KEPT,
    rbm_training.KEY,
    rbm_training.DATA_KEPT.key,
    rbm_training.HIDDEN_KEPT.key,
    rbm_training.EPOCHS_KEPT.key,
    network_sidebar.KEPT,
    page_state.RUN_INPUTS.key,
)


def _xsrf_token(cookie: str) -> bytes:
    """The token inside an XSRF cookie: version 2 is ``2|mask|masked token|time`` in hex, the
    mask new on every response, so only the unmasked token stays the browser's own."""
    parts = cookie.split("|")
    if len(parts) == 4 and parts[0] == "2":
        try:
            mask, masked = bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
        except ValueError:
            return cookie.encode()
        if not mask:
            return cookie.encode()
        return bytes(a ^ b for a, b in zip(itertools.cycle(mask), masked, strict=False))
    return cookie.encode()


def browser() -> str:
    """A digest of what this browser keeps (its XSRF token); empty when it sends none."""
    cookie = st.context.cookies.get(XSRF_COOKIE)
    if not isinstance(cookie, str) or not cookie:  # none sent (or a test's stand-in)
        return ""
    return hashlib.sha256(_xsrf_token(cookie)).hexdigest()


def resume() -> list[str]:
    """On a session's first run, take back the run its link names; the sentences to show."""
    if TRIED.get():
        return []
    TRIED.set(True)
    token = st.query_params.get(PARAM)
    if not token or page_state.RUN.get() is not None:
        return []
    context = get_script_run_ctx()
    run = state.reclaim(token, browser(), context.session_id if context is not None else None)
    if run is None:
        return [
            "The run this link named is no longer held by the server (a reloaded page takes "
            f"its run back within {state.RESUME_S:.0f} s, in the same browser only): a new run "
            "starts."
        ]
    for key, value in run.resume_keep.items():
        st.session_state[key] = value
    page_state.RUN.set(run)
    going = "it goes on sampling" if run.running else "press Run to go on"
    return [f"The page was reloaded: its run is back as the server held it, at step "
            f"{run.n_steps:,}; {going}."]  # fmt: skip


def hold(run: state.Run) -> dict[str, str]:
    """Hold ``run`` for a reload of this page; the link parameter that names it."""
    keep = {key: st.session_state[key] for key in KEEP if key in st.session_state}
    return {PARAM: state.hold(run, browser(), keep)}
