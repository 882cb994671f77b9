"""Flow: the flow samplers' training curve and the flow's draws, redrawn while it trains.

``flow-exact`` and ``flow-latent`` run on a flow trained on this posterior in the background
(``app/flow_training.py``). The view shows the ELBO per training step (a lower bound on log Z;
against the exact log Z where enumeration or the transfer matrix reaches: at most 12 sites, or
one field on a free lattice whose narrower side is at most 16, the flow paper's 16 x 16 digit
among them) and the
flow's draws ``v = T(z)`` from fixed ``z``, projected on their first two principal components
and coloured by the magnetisation of the state each maps to (``x = sign v``): as training
learns the posterior, the picture gathers into the posterior's modes.

``controls`` draws the training's progress bar with its Stop and Resume buttons (beside the
run's buttons, and alone while only flow samplers are chosen and none can start yet).
Everything else is a function of plain data, tested without a browser.
"""

from __future__ import annotations

import math
import time

import streamlit as st
import torch

from app import flow_training, run_length, state
from app.config import FLOW_SAMPLERS
from app.page_state import FLOW_WAS_TRAINING
from app.text import plain
from lsbcore.exact.states import MAX_SITES, all_states
from lsbcore.importance.reference import transfer_applies
from lsbcore.importance.transfer import transfer_log_partition
from lsbcore.studies import figures

#: The view's latent picture is redrawn at most this often while training (seconds).
REDRAW_S = 1.0
#: How often the progress bar refreshes while training runs (seconds).
PROGRESS_S = 1.0

#: Why flow-latent is labelled approximate, and what flow-exact does instead (the page says it
#: where the samplers are described).
APPROXIMATE = (
    "**Flow latent (approx.)** is the paper's sampler: a random walk in the flow's latent space, "
    "its states mapped back by x = sign(T(z)). Its law is the posterior's only in the limit of "
    "a long run, and nothing in the chain says how far it is: it is approximate. "
    "**Flow (exact)** uses the same flow as a proposal on the posterior itself, with an "
    "unbiased estimate of the flow's probability of each state (pseudo-marginal "
    "Metropolis-Hastings): exact whatever the flow; a poor flow only lowers its acceptance."
)
WAITING = (
    "The flow samplers wait for their flow: they join the run when training is done or "
    "stopped, starting from the flow's own draws (not the shared start: an independence proposal "
    "almost never leaves a random state to which the flow gives no mass), and take the run's "
    "steps of their own from there; the run is complete when they have."
)


def exact_log_z(target) -> float | None:
    """``log Z`` of ``target`` by enumeration (at most ``MAX_SITES`` sites, one parameter set)
    or by the transfer matrix (``lsbcore.importance.reference``), else None."""
    if getattr(target, "batch", 1) != 1:
        return None
    if target.n_sites <= MAX_SITES:
        with torch.no_grad():
            log_p = target.log_prob(all_states(target.n_sites).double())
        return float(torch.logsumexp(log_p.reshape(-1), 0))
    if transfer_applies(target):
        return transfer_log_partition(target)
    return None


def run_log_z(run: state.Run) -> float | None:
    """``exact_log_z`` of the run's target, computed once per target (the transfer matrix of a
    16-wide lattice takes about half a second)."""
    target = run.problem.target
    cached = run.cache.get("flow_log_z")
    if cached is None or cached[0] is not target:
        cached = run.cache["flow_log_z"] = (target, exact_log_z(target))
    return cached[1]


def joined_text(run: state.Run) -> str | None:
    """Where the flow samplers are in the run, and how far each is toward its length (None
    without them)."""
    if run.flow is None:
        return None
    own = run_length.progress_text(run, FLOW_SAMPLERS)
    if run.flow_waiting:
        return f"{WAITING} {own}."
    at = run.flow_joined_at or 0
    if at == 0:
        return f"The flow samplers started with the run. {own}."
    return (
        f"The flow samplers joined at step {at:,} of the run and take the run's "
        f"{run.config.total_steps:,} steps of their own from there (the others wait while they "
        "catch up), on the flow as it was then (Resume training: they join again on a newer "
        f"one). {own}."
    )


def gap_text(elbo: float, log_z: float | None) -> str | None:
    """What the training has left, in nats, where the exact ``log Z`` is known."""
    if log_z is None or not math.isfinite(elbo):
        return None
    return (
        f"The last ELBO, {elbo:,.2f}, is {log_z - elbo:,.2f} nats below the exact log Z "
        f"({log_z:,.2f}): what training has left. While that is more than a few nats, the flow "
        "proposes few of the states the posterior holds: Flow (exact) accepts rarely, and the "
        "flow's draws vary at fewer sites than the posterior's (docs/method.md, section 13)."
    )


def elbo_figure(job: flow_training.FlowJob, log_z: float | None):
    steps, elbo = job.history()
    return figures.flow_elbo_figure(steps, elbo, log_z)


def latent_figure(job: flow_training.FlowJob, seed: int = 0):
    v, magnetisation = job.latent_points(seed=seed)
    return figures.flow_latent_figure(flow_training.latent_projection(v), magnetisation)


# ----------------------------------------------------------------------------- Streamlit
def _status(job: flow_training.FlowJob, run: state.Run | None) -> None:
    """The progress bar (a fragment: refreshed while training runs); the whole page reruns
    once when training ends, so the buttons and the waiting samplers follow."""
    progress = job.progress()
    st.progress(progress.fraction, text=progress.text())
    if progress.failed:
        st.error(
            f"{plain(progress.failed)} The flow samplers use the last finite weights; "
            "the other samplers keep running."
        )
    if run is not None and progress.ready:
        state.join_flow(run)
    was = FLOW_WAS_TRAINING.get()
    FLOW_WAS_TRAINING.set(progress.running)
    if was and not progress.running:
        st.rerun(scope="app")


def _resume(job: flow_training.FlowJob, run: state.Run | None) -> None:
    """Resume training; the flow samplers that joined leave the run and join again later."""
    if run is not None:
        state.leave_flow(run)
    job.resume()


def controls(job: flow_training.FlowJob, run: state.Run | None = None) -> None:
    """Stop / Resume and the training's progress bar."""
    progress = job.progress()
    with st.container(horizontal=True):
        st.button(
            "Stop training",
            key="flow_stop",
            on_click=job.stop,
            disabled=not progress.running,
            help="Stop training the flow now: the flow samplers then run on the flow as it is.",
        )
        st.button(
            "Resume training",
            key="flow_resume",
            on_click=_resume,
            args=(job, run),
            disabled=progress.running or bool(progress.failed) or progress.steps >= progress.goal,
            help="Go on training towards the training steps set in the sidebar (the same seed "
            "gives the same flow whether trained in one go or in pieces). The flow samplers "
            "leave the run meanwhile and join again, from the newer flow's draws.",
        )
    FLOW_WAS_TRAINING.set(progress.running)
    st.fragment(_status, run_every=PROGRESS_S if progress.running else None)(job, run)


def render(run: state.Run) -> None:
    job = run.flow
    if job is None:
        st.info(
            "Choose Flow (exact) or Flow latent (approx.) in the sidebar's samplers: their flow "
            "is trained on this posterior in the background, and drawn here while it trains."
        )
        st.markdown(APPROXIMATE)
        return
    text = joined_text(run)
    if text:
        st.caption(text)
    progress = job.progress()
    left, right = st.columns(2)
    with left:
        fig = _throttled(run, "flow_elbo", progress, lambda: elbo_figure(job, run_log_z(run)))
        st.plotly_chart(fig, key="flow_elbo")
        if not math.isfinite(progress.elbo):
            st.caption("No training step yet.")
        elif (gap := gap_text(progress.elbo, run_log_z(run))) is not None:
            st.caption(gap)
    with right:
        fig = _throttled(run, "flow_latent", progress, lambda: latent_figure(job, run.config.seed))
        st.plotly_chart(fig, key="flow_latent")
    st.caption(APPROXIMATE)


def _throttled(run: state.Run, key: str, progress: flow_training.Progress, build):
    """``build()`` again when training moved on, at most every ``REDRAW_S`` seconds while it
    runs (the run's own cache: ``Run.throttled`` follows the run's steps, not training's)."""
    entry = run.cache.get(key)
    now = time.perf_counter()
    if entry is not None and (
        entry[0] == progress.steps or (progress.running and now - entry[1] < REDRAW_S)
    ):
        return entry[2]
    value = build()
    run.cache[key] = (progress.steps, now, value)
    return value
