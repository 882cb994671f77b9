"""The session's run: built from the sidebar's configuration, rebuilt when it must be.

``ensure_run`` keeps the run while only live settings change (mixing length, speed, a burn-in
the run has not yet passed), and otherwise builds a new one and says why (the posterior or the
samplers changed). The Run / Pause / Step / Reset buttons act through the callbacks here.
"""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

import lsbcore
from app import config as cfgmod
from app import sources, state
from app.config import Config
from app.sidebar import Inputs
from app.text import plain

PROPOSAL_TAB = "Proposal"
RUN_KEY = "_run"  # the Run object (the button keys run/pause/step/reset are widgets)


def _build(cfg: Config, inputs: Inputs) -> state.Run | None:
    try:
        problem = sources.build_problem(cfg, inputs.photo, inputs.dark_mask)
        balancing = lsbcore.load_balancing(inputs.learned_json) if inputs.learned_json else None
        with st.spinner("Building the samplers…"):
            run, messages = state.build_run(cfg, problem, inputs.photo, balancing)
        run.source = inputs.source
    except ValueError as err:  # lsbcore refuses what it cannot sample, with a sentence
        st.error(f"This configuration cannot be sampled: {plain(err)}")
        return None
    for message in messages:
        st.warning(message)  # the library's own sentences, no user text
    return run


def _why_rebuild(run: state.Run, cfg: Config, key: tuple) -> str | None:
    """None when ``run`` can carry on under ``cfg``, else a sentence saying what changed."""
    old, old_key = run.config, st.session_state.get("_run_inputs", key)
    target = cfgmod.changed(old, cfg, cfgmod.TARGET_FIELDS)
    if old_key[0] != key[0]:
        target.append("image")
    if target:
        return f"The posterior changed ({', '.join(target)})"
    samplers = cfgmod.changed(old, cfg, cfgmod.SAMPLER_FIELDS)
    if old_key[1] != key[1]:
        samplers.append("imported learned function")
    if samplers:
        return f"The sampler settings changed ({', '.join(samplers)})"
    if cfg.burn_in != old.burn_in and (run.phase == "mixing" or run.n_steps > cfg.burn_in):
        return "The burn-in length changed after the run had passed it"
    return None


def ensure_run(cfg: Config, inputs: Inputs) -> state.Run | None:
    """The run for ``cfg``: the current one when it still fits, else a new one."""
    session = st.session_state
    run: state.Run | None = session.get(RUN_KEY)
    key = (inputs.image_id, inputs.learned_id)
    reset = session.pop("_pending_reset", False)
    if run is not None and run.released:  # its page was gone for a while: start afresh
        st.info("This page was away, so its run was stopped and its memory released.")
        run = session[RUN_KEY] = None
    if run is not None and not reset:
        reason = _why_rebuild(run, cfg, key)
        if reason is None:
            run.config = cfg  # live settings: mixing steps, speed, an unpassed burn-in
            return run
        if run.n_steps:
            st.info(f"{reason}: the run was reset.")
    keep_running = bool(run and run.running and not reset)
    if run is not None:
        state.pause(run)
    new = _build(cfg, inputs)
    if new is not None:
        context = get_script_run_ctx()
        new.session_id = context.session_id if context is not None else None
    session[RUN_KEY] = new
    session["_run_inputs"] = key
    if new is not None and keep_running:
        state.start(new)
    return new


# ----------------------------------------------------------------------------- buttons
def on_run() -> None:
    run = st.session_state.get(RUN_KEY)
    if run is not None:
        state.start(run)


def on_pause() -> None:
    run = st.session_state.get(RUN_KEY)
    if run is not None:
        state.pause(run)


def on_step() -> None:
    run = st.session_state.get(RUN_KEY)
    if run is not None:
        state.pause(run)
        st.session_state["_pending_step"] = True
        st.session_state["view"] = PROPOSAL_TAB


def on_reset() -> None:
    st.session_state["_pending_reset"] = True


def pending_step(run: state.Run) -> None:
    """Take the slow-motion step the Step button asked for."""
    if st.session_state.pop("_pending_step", False):
        state.slow_step(run, int(st.session_state.get("proposal_chain", 1)) - 1)
