"""The live part of the page: buttons, progress, and the views, redrawn by a fragment.

Sampling runs on the run's worker thread (``app.state.start``); while it runs, the fragment
reruns every ``scheduler.refresh_interval`` seconds (0.2 s unless many runs share the server)
and redraws only the open tab (the tabs track their state, so hidden views cost nothing).
Sidebar widgets and buttons stay responsive because nothing on the page waits for sampling.

The tabs are the view records' (``app/view_catalogue.py``). On an image run the group chooser,
the tabs and a view's own controls (its record's ``controls``) are drawn once per page run,
and the fragment inside the open tab holds only what changes: the status line and the view.
Widgets redrawn five times a second cost the browser more than the images they sit beside
(eight pages on two cores: about a third of each redraw's CPU, in the browser and on the
server; BENCHMARKS.md, issue 29).
"""

from __future__ import annotations

import logging
import time

import streamlit as st

from app import (
    colour_refits,
    late_imports,
    page_state,
    panel_tabs,
    pin_controls,
    presentation,
    run_length,
    scheduler,
    session,
    state,
    view_catalogue,
)
from app.pace import speed_text
from app.target_kind import TargetKind, run_kind
from app.view_record import Page, View
from lsbcore.diagnostics.settled import UNSETTLED_LIMIT
from lsbcore.samplers.interface import ChainSampler
from lsbcore.studies.figures import sampler_label
from lsbcore.targets.ising import CRITICAL_LAMBDA

log = logging.getLogger(__name__)

# keys for a lecture: one key runs and pauses (only one of the two buttons is enabled at a time)
RUN_PAUSE_KEY = "Space"
STEP_KEY = "S"
# a run waiting for its compiled steps redraws this seldom (seconds): nothing moves meanwhile
WAITING_REFRESH_S = 1.0


def controls(run: state.Run, speed: bool = False) -> None:
    """Run / Pause / Step / Reset, and with ``speed`` the speed cap (presentation mode's
    header: the sidebar is collapsed)."""
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
        pin_controls.pin_button(run)
        if speed:
            presentation.speed_control()
    if run.flow is not None:  # the flow samplers' training: progress, Stop, Resume
        from app.views import flow  # imported only where a flow trains (not on a first page)

        flow.controls(run.flow, run)
    pin_controls.notices()
    if run.finished and not presentation.is_on():  # a lecture's status line says "finished"
        text, settled = finished_text(run)
        (st.success if settled else st.warning)(text)


def finished_text(run: state.Run) -> tuple[str, bool]:
    """The closing line of a run that took all its steps, and whether it is all good news: not
    when "Stop when settled" was on and a sampler's marginal has not settled (which, and why)."""
    done = f"Run complete: every sampler took its {run.config.total_steps:,} steps"
    judged = run.config.until_settled and state.judges_settling(run)
    unsettled = [(n, v) for n, v in run.settledness.items() if not v.settled] if judged else []
    if not unsettled:
        return f"{done}. Raise the mixing steps to go on.", True
    name, verdict = unsettled[0]
    reason = verdict.reason
    if reason.startswith("Not settled"):  # "Not settled yet: P is known ..." -> "P is known ..."
        reason = reason.split(": ", 1)[1]
    others = f" (and {len(unsettled) - 1} more)" if len(unsettled) > 1 else ""
    return (
        f"{done}, and the marginal has not settled. {sampler_label(name)}{others}: {reason} "
        f"Raise the mixing steps to go on{_coupling_advice(run.config, verdict)}.",
        False,
    )


def _coupling_advice(config, verdict) -> str:
    """Where a photo's chains disagree under a coupling above the critical one: lowering it is
    the remedy measured to work (README, "Segmenting a photo"; tools/lambda_settle.py)."""
    if config.source == "paper" or config.lam <= CRITICAL_LAMBDA:
        return ""
    if verdict.disagreeing_fraction <= UNSETTLED_LIMIT:  # P not yet precise: more steps do it
        return ""
    return (
        f", or lower λ: at λ = {config.lam:g}, above the Ising prior's critical coupling "
        f"(≈ {CRITICAL_LAMBDA:.2f}), a region the photo says little about (a texture) keeps two "
        "nearly equally likely labellings, and samplers that move a site (or a checkerboard "
        "half) at a time rarely switch between them; a smaller λ smooths less and settles "
        "sooner (grass.png at 288 px: not settled in 3,000 sweeps at λ = 1, in 384 at λ = 0.5)"
    )


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


def evaluations_text(n_steps: int, evals: list[int]) -> str:
    """The status line's target evaluations per chain (one figure, or the samplers' range).
    Before the first step the count is only what setting up the start cost (an exact resync
    of every site's log-ratio), and says so rather than pass for sampling work."""
    spread = f"{min(evals):,}" if min(evals) == max(evals) else f"{min(evals):,}–{max(evals):,}"
    if n_steps == 0:
        return f"no steps yet (the start took **{spread}** target evaluations per chain)"
    return f"target evaluations per chain **{spread}**"


def _status(run: state.Run) -> None:
    cfg, comparison = run.config, run.comparison
    with run.lock:  # the worker steps sampler after sampler: read between its chunks
        n, progress = run.n_steps, run.steps_done  # the front; the sampler furthest behind
        refit = colour_refits.text(run)  # a prompt's colours refitted as the run goes on
        evals = [s.n_target_evals for s in comparison.samplers.values()]
        sweeps = sweeps_text(comparison.samplers)
        each = None if run_length.side_by_side(run) else run_length.progress_text(run)
    learners = any(s.learnable for s in comparison.samplers.values())
    if progress < cfg.burn_in:  # the bar follows the sampler furthest behind: the run's end
        fraction = progress / cfg.burn_in
        text = f"Burn-in{' (learning)' if learners else ''}: {progress:,} / {cfg.burn_in:,}"
    else:
        done = max(0, progress - cfg.burn_in)
        fraction = done / cfg.steps if cfg.steps else 1.0
        text = f"Mixing: {done:,} / {cfg.steps:,}"
    st.progress(min(1.0, max(0.0, fraction)), text=text)
    speed = speed_text(
        run.pace,
        progress,
        cfg.burn_in,
        cfg.total_steps,
        running=run.running,
        finished=run.finished,
        stops_when_settled=cfg.until_settled and state.judges_settling(run),
    )
    if run.running and state.waits_for_flow(run):
        speed = "waiting for the flow's training"  # nothing samples meanwhile: no rate
    if run.running and progress == 0 and state.waits_for_kernels(run):
        speed = "compiling the RBM's steps (once after an install: about a minute)"
    others = state.running_runs() - 1 if run.running else 0
    shared = ""
    if others > 0:
        every = scheduler.refresh_interval(others + 1)
        shared = f" · sharing the server with {others} other run{'s' if others > 1 else ''}"
        if every > scheduler.REFRESH_S:
            shared += f", redrawn every {every:.1f} s"
    st.caption(
        f"Step **{n:,}** · {sweeps} · {evaluations_text(n, evals)} · **{speed}** · "
        f"{run.device_label}{shared}"
    )
    if each:  # a sampler that joined late, or one still waiting: how far each is
        st.caption(f"Each sampler's own steps toward the run's length: {each}.")
    waiting = run_length.waiting_text(run)
    if waiting:
        st.info(waiting)
    if refit:
        st.info(refit)
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


def _page(run: state.Run) -> Page:
    """The page of ``run``'s kind of target (its record, ``app/view_catalogue.py``)."""
    return view_catalogue.PAGES[run_kind(run)]


def _groups() -> dict[str, tuple[View, ...]]:
    return view_catalogue.PAGES[TargetKind.ISING].groups


def _tabs_key(group: str) -> str:
    return f"view_tabs_{list(_groups()).index(group)}"


def _on_group() -> None:
    """A group was chosen: reopen the view last open in it (its first view at first)."""
    group = page_state.VIEW_GROUP.get()
    last = page_state.VIEW_LAST.get() or {}
    page_state.VIEW.set(last.get(group, _groups()[group][0].label))


def _on_tab(group: str) -> None:
    page_state.VIEW.set(page_state.Slot(_tabs_key(group), None).get())


def view_tabs(page: Page) -> tuple[tuple[View, ...], list]:
    """The group chooser and the open group's tabs (its views and their containers), both set
    from ``page_state.VIEW`` (which a link, the Step button or a test may set): only one
    group's views are drawn, and of those only the open one."""
    groups = page.groups
    page_state.restore_links((page_state.VIEW.key,))
    view = page_state.VIEW.get()
    if view not in page.labels:
        view = page_state.VIEW.set(page.labels[0])
    group = page.group_of(view)
    last = page_state.VIEW_LAST.get()
    if last is None:
        last = page_state.VIEW_LAST.set({})
    last[group] = view
    page_state.remember_links((page_state.VIEW.key,))  # the fragment does not rewrite the link
    page_state.VIEW_GROUP.set(group)
    st.segmented_control(
        "Views",
        list(groups),
        key=page_state.VIEW_GROUP.key,
        required=True,
        on_change=_on_group,
        label_visibility="collapsed",
    )
    page_state.Slot(_tabs_key(group), None).set(view)
    views = groups[group]
    tabs = st.tabs([v.label for v in views], key=_tabs_key(group), on_change=_on_tab, args=(group,))
    return views, tabs


def _current_run() -> state.Run | None:
    """The session's run, or None; a page whose run finished (or was released) is rerun whole
    to redraw its buttons and stop refreshing."""
    run: state.Run | None = page_state.RUN.get()
    if run is None:
        return None
    if run.released:
        st.rerun(scope="app")  # the page came back after its run was released: a new one
    run.last_seen = time.perf_counter()
    if page_state.LIVE.get() and not state.active(run):
        page_state.LIVE.set(False)
        st.rerun(scope="app")  # finished or failed: redraw the buttons, stop refreshing
    if page_state.WAITING.get() and not state.waits_for_kernels(run):
        page_state.WAITING.set(False)
        st.rerun(scope="app")  # its kernels are ready: refresh at the live rate again
    return run


@late_imports.drawing()
def _live() -> None:
    """An RBM's or a network's page: the status line and the target's own tabs."""
    run = _current_run()
    if run is None:
        return
    _status(run)
    panel_tabs.draw(run, _page(run))


@late_imports.drawing()
def _live_view(view: View) -> None:
    """An image run's open view, with the status line above it."""
    run = _current_run()
    if run is None:
        return
    _status(run)
    try:
        view.draw(run)
    except Exception as err:  # one failing view must not take the page down
        log.exception("view %s failed", view.label)
        st.error(f"The {view.label} view could not be drawn: {err}")


def panel(run: state.Run) -> None:
    """The live fragment: it refreshes itself only while the run is running."""
    page_state.LIVE.set(state.active(run))
    every = scheduler.refresh_interval(state.running_runs()) if state.active(run) else None
    waiting = state.active(run) and state.waits_for_kernels(run)
    page_state.WAITING.set(waiting)
    if waiting:  # nothing moves: the redraws would only slow the compile it waits for
        every = WAITING_REFRESH_S
    page = _page(run)
    if not page.groups:  # the RBM and network pages: their tabs inside the fragment
        st.fragment(_live, run_every=every)()
        return
    views, tabs = view_tabs(page)
    for tab, view in zip(tabs, views, strict=True):
        if tab.open is False:
            continue
        with tab:
            # the sentence heads the tab, above the view's own controls (a sweep's map is
            # taller than a screen: below it, nobody would read it)
            presentation.seeing(view.seeing)
            if view.controls is not None:
                view.controls(run)
            st.fragment(_live_view, run_every=every)(view)
