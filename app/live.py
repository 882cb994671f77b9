"""The live part of the page: buttons, progress, and the views, redrawn by a fragment.

Sampling runs on the run's worker thread (``app.state.start``); while it runs, the fragment
reruns every ``scheduler.refresh_interval`` seconds (0.2 s unless many runs share the server)
and redraws only the open tab (the tabs track their state, so hidden views cost nothing).
Sidebar widgets and buttons stay responsive because nothing on the page waits for sampling.

On an image run the group chooser, the tabs and a view's own controls (``VIEW_CONTROLS``) are
drawn once per page run, and the fragment inside the open tab holds only what changes: the
status line and the view. Widgets redrawn five times a second cost the browser more than the
images they sit beside (eight pages on two cores: about a third of each redraw's CPU, in the
browser and on the server; BENCHMARKS.md, issue 29).
"""

from __future__ import annotations

import logging
import time

import streamlit as st

from app import (
    network_panel,
    network_run,
    pin_controls,
    presentation,
    rbm_panel,
    rbm_run,
    scheduler,
    session,
    state,
    view_links,
)
from app.pace import speed_text
from app.views import (
    annealing,
    balancing,
    block_proposals,
    chains,
    compare,
    convergence,
    exact_chain,
    export,
    flow,
    mixing,
    proposal,
    segmentation,
    tempering,
    which_g_where,
    why,
)
from app.views import importance as importance_view
from app.views import weights as weights_view
from lsbcore.samplers.interface import ChainSampler
from lsbcore.studies.figures import sampler_label

log = logging.getLogger(__name__)

VIEWS = (
    ("Chains", chains.render),
    (session.PROPOSAL_TAB, proposal.render),
    ("Balancing functions", balancing.render),
    ("Softmax weights", weights_view.render),
    ("Convergence", convergence.render),
    ("Mixing", mixing.render),
    ("Segmentation", segmentation.render),
    ("Exact chain", exact_chain.render_run),
    ("Tempering", tempering.render_run),
    ("MAP (annealing)", annealing.render_run),
    ("Importance sampling", importance_view.render_run),
    ("Block proposals", block_proposals.render_live),
    ("Flow", flow.render),
    ("Export", export.render),
    ("Compare", compare.render),
    ("Which g where", which_g_where.render_live),
)
VIEW_CONTROLS = {  # drawn above the view, outside the fragment
    "Chains": chains.controls,
    "Block proposals": block_proposals.render_run,  # a state taken once: nothing live to redraw
    "Which g where": which_g_where.render,  # a sweep's map: nothing of the run in it
}
TAB_LABELS = [name for name, _ in VIEWS]
RENDER = dict(VIEWS)
assert set(TAB_LABELS) == set(view_links.VIEW_NAMES), "every view in exactly one group"
GROUP_KEY = "view_group"  # the group chooser; the open view itself is st.session_state["view"]
LAST_KEY = "_view_last"  # the view last open in each group, reopened with its group
LIVE_KEY = "_live"  # whether the fragment was set to refresh itself (the run was running)
# keys for a lecture: one key runs and pauses (only one of the two buttons is enabled at a time)
RUN_PAUSE_KEY = "Space"
STEP_KEY = "S"


def controls(run: state.Run) -> None:
    """Run / Pause / Step / Reset."""
    with st.container(horizontal=True):
        st.button(
            "Run",
            key="run",
            type="primary",
            on_click=session.on_run,
            disabled=run.running or run.finished,
            help="Sample continuously: burn-in (learning), then mixing. Key: Space.",
            shortcut=RUN_PAUSE_KEY,
        )
        st.button(
            "Pause",
            key="pause",
            on_click=session.on_pause,
            disabled=not run.running,
            help="Key: Space.",
            shortcut=RUN_PAUSE_KEY,
        )
        st.button(
            "Step",
            key="step",
            on_click=session.on_step,
            disabled=run.finished,
            help="One step of every sampler"
            + ("." if session.plain_steps(run) else " in slow motion: see the Proposal tab.")
            + " Key: S.",
            shortcut=STEP_KEY,
        )
        st.button(
            "Reset",
            key="reset",
            on_click=session.on_reset,
            help="Start again from the same random start.",
        )
        if not network_run.is_network_run(run):
            pin_controls.pin_button(run)
    if run.flow is not None:  # the flow samplers' training: progress, Stop, Resume
        flow.controls(run.flow, run)
    if network_run.is_network_run(run):
        st.caption(network_panel.NO_PINS)
    pin_controls.notices()
    if run.finished:
        st.success(f"Run complete: {run.n_steps:,} steps. Raise the mixing steps to go on.")


def _sweeps(value: float) -> str:
    whole = value >= 100 or value == int(value)  # a block sampler's sweeps are whole
    return f"{value:,.0f}" if whole else f"{value:,.2f}"


def sweeps_text(samplers: dict[str, ChainSampler]) -> str:
    """Progress in sweeps (site updates per site): one figure when every sampler agrees, else
    one per group, since a block sampler sweeps once per step and a single-site one 1/D."""
    groups: dict[str, list[str]] = {}
    for name, sampler in samplers.items():
        groups.setdefault(_sweeps(sampler.sweeps), []).append(sampler_label(name))
    if len(groups) == 1:
        return f"**{next(iter(groups))}** sweeps"
    return "sweeps " + ", ".join(f"**{v}** ({', '.join(names)})" for v, names in groups.items())


def _status(run: state.Run) -> None:
    cfg, comparison = run.config, run.comparison
    with run.lock:  # the worker steps sampler after sampler: read between its chunks
        n = run.n_steps
        evals = [s.n_target_evals for s in comparison.samplers.values()]
        sweeps = sweeps_text(comparison.samplers)
    learners = any(s.learnable for s in comparison.samplers.values())
    if comparison.phase == "burnin" and cfg.burn_in:
        fraction = n / cfg.burn_in
        text = f"Burn-in{' (learning)' if learners else ''}: {n:,} / {cfg.burn_in:,}"
    else:
        done = max(0, n - cfg.burn_in)
        fraction = done / cfg.steps if cfg.steps else 1.0
        text = f"Mixing: {done:,} / {cfg.steps:,}"
    st.progress(min(1.0, max(0.0, fraction)), text=text)
    spread = f"{min(evals):,}" if min(evals) == max(evals) else f"{min(evals):,}–{max(evals):,}"
    speed = speed_text(
        run.pace,
        n,
        cfg.burn_in,
        cfg.total_steps,
        running=run.running,
        finished=run.finished,
        stops_when_settled=cfg.until_settled and state.judges_settling(run),
    )
    others = state.running_runs() - 1 if run.running else 0
    shared = ""
    if others > 0:
        every = scheduler.refresh_interval(others + 1)
        shared = f" · sharing the server with {others} other run{'s' if others > 1 else ''}"
        if every > scheduler.REFRESH_S:
            shared += f", redrawn every {every:.1f} s"
    st.caption(
        f"Step **{n:,}** · {sweeps} · target evaluations per chain "
        f"**{spread}** · **{speed}** · {run.device_label}{shared}"
    )
    if run.settled_at is not None and not run.running and not run.finished:
        st.success(
            f"Settled at step {run.settled_at:,} ({sweeps}): paused, as "
            '"Stop when settled" asks. The Segmentation tab has the result; press Run to keep '
            "refining it."
        )
    if run.error:
        st.error(run.error)
    for notice in run.notices:
        st.warning(notice)


def _tabs_key(group: str) -> str:
    return f"view_tabs_{list(view_links.VIEW_GROUPS).index(group)}"


def _on_group() -> None:
    """A group was chosen: reopen the view last open in it (its first view at first)."""
    group = st.session_state[GROUP_KEY]
    last = st.session_state.get(LAST_KEY, {})
    st.session_state[view_links.VIEW] = last.get(group, view_links.VIEW_GROUPS[group][0])


def _on_tab(group: str) -> None:
    st.session_state[view_links.VIEW] = st.session_state[_tabs_key(group)]


def view_tabs() -> tuple[str, list]:
    """The group chooser and the open group's tabs, both set from ``st.session_state["view"]``
    (which a link, the Step button or a test may set): only one group's views are drawn, and of
    those only the open one."""
    session_state = st.session_state
    view_links.restore(session_state, (view_links.VIEW,))
    view = session_state[view_links.VIEW]
    if view not in view_links.VIEW_NAMES:
        view = session_state[view_links.VIEW] = view_links.VIEW_NAMES[0]
    group = view_links.group_of(view)
    session_state.setdefault(LAST_KEY, {})[group] = view
    view_links.remember(session_state, (view_links.VIEW,))
    view_links.publish(st.query_params, session_state)  # the fragment does not rewrite the link
    session_state[GROUP_KEY] = group
    st.segmented_control(
        "Views",
        list(view_links.VIEW_GROUPS),
        key=GROUP_KEY,
        required=True,
        on_change=_on_group,
        label_visibility="collapsed",
    )
    session_state[_tabs_key(group)] = view
    tabs = st.tabs(
        view_links.VIEW_GROUPS[group], key=_tabs_key(group), on_change=_on_tab, args=(group,)
    )
    return group, tabs


def _current_run() -> state.Run | None:
    """The session's run, or None; a page whose run finished (or was released) is rerun whole
    to redraw its buttons and stop refreshing."""
    run: state.Run | None = st.session_state.get(session.RUN_KEY)
    if run is None:
        return None
    if run.released:
        st.rerun(scope="app")  # the page came back after its run was released: a new one
    run.last_seen = time.perf_counter()
    if st.session_state.get(LIVE_KEY) and not state.active(run):
        st.session_state[LIVE_KEY] = False
        st.rerun(scope="app")  # finished or failed: redraw the buttons, stop refreshing
    return run


def _live() -> None:
    """An RBM's or a network's page: the status line and the target's own tabs."""
    run = _current_run()
    if run is None:
        return
    _status(run)
    if rbm_run.is_rbm_run(run):
        rbm_panel.tabs()
    else:
        network_panel.tabs()


def _live_view(name: str) -> None:
    """An image run's open view, with the status line above it."""
    run = _current_run()
    if run is None:
        return
    _status(run)
    try:
        presentation.seeing(name)
        RENDER[name](run)
        if name in why.VIEWS:
            why.render(run)
    except Exception as err:  # one failing view must not take the page down
        log.exception("view %s failed", name)
        st.error(f"The {name} view could not be drawn: {err}")


def panel(run: state.Run) -> None:
    """The live fragment: it refreshes itself only while the run is running."""
    st.session_state[LIVE_KEY] = state.active(run)
    every = scheduler.refresh_interval(state.running_runs()) if state.active(run) else None
    if rbm_run.is_rbm_run(run) or network_run.is_network_run(run):
        st.fragment(_live, run_every=every)()
        return
    group, tabs = view_tabs()
    for tab, name in zip(tabs, view_links.VIEW_GROUPS[group], strict=True):
        if tab.open is False:
            continue
        with tab:
            if name in VIEW_CONTROLS:
                VIEW_CONTROLS[name](run)
            st.fragment(_live_view, run_every=every)(name)
