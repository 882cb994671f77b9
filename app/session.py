"""The session's run: built from the sidebar's configuration, rebuilt when it must be.

``ensure_run`` keeps the run while only live settings change (mixing length, speed, a burn-in
the run has not yet passed), and otherwise builds a new one and says why (the posterior, the
object prompt or the samplers changed). A new run whose posterior is the old one's, or its
mirror image (the object class flipped: alpha negated, so P(x_i = +1) becomes
1 - P(x_i = +1) exactly), carries the old run's sampled marginal until it has draws of its
own, so the page never shows an unsampled mask as a result. A prompted run refits its colour
models while it goes on, in its worker (``colour_refits``).
The Run / Pause / Step / Reset buttons act through the callbacks here.
"""

from __future__ import annotations

import streamlit as st
import torch
from streamlit.runtime.scriptrunner import get_script_run_ctx

import lsbcore
from app import config as cfgmod
from app import flow_training, page_state, rbm_targets, sources, state
from app import prompt as prompts
from app.config import Config
from app.sidebar import Inputs
from app.target_kind import TargetKind, kind_of, run_kind
from app.text import plain
from app.view_catalogue import PROPOSAL
from lsbcore.samplers.registry import refusal

PARKED_RUNS = 2  # runs kept paused for the sources and targets left (each holds its traces)


def _build(cfg: Config, inputs: Inputs, prompt=None, problem=None) -> state.Run | None:
    """A new run for ``cfg`` (with the user's ``prompt``), or of ``problem`` when given."""
    kind = kind_of(cfg.target)
    if kind is TargetKind.RBM:
        return _build_rbm(cfg, inputs)
    if kind is TargetKind.NETWORK:
        return _build_network(cfg, inputs)
    try:
        if problem is None:
            problem = sources.build_problem(
                cfg, inputs.photo, inputs.dark_mask, inputs.name, prompt=prompt
            )
        balancing = lsbcore.load_balancing(inputs.learned_json) if inputs.learned_json else None
        flow = _flow_job(cfg, problem.target)
        if flow is not None and not flow.ready and set(cfg.samplers) <= set(cfgmod.FLOW_SAMPLERS):
            _wait_for_flow(flow)  # nothing can sample before the flow is trained
            return None
        with st.spinner("Building the samplers…"):
            run, messages = state.build_run(cfg, problem, inputs.photo, balancing, flow)
        run.source = inputs.source
    except ValueError as err:  # lsbcore refuses what it cannot sample, with a sentence
        st.error(f"This configuration cannot be sampled: {plain(err)}")
        return None
    for message in messages:
        st.warning(message)  # the library's own sentences, no user text
    return run


def _flow_job(cfg: Config, target) -> flow_training.FlowJob | None:
    """The session's flow training for ``target`` (started), when a flow sampler is chosen
    and can run on it; None otherwise (the run then says why a flow sampler is left out)."""
    chosen = [n for n in cfg.samplers if n in cfgmod.FLOW_SAMPLERS]
    if not chosen or refusal(chosen[0], target) is not None:
        return None
    key = flow_training.job_key(flow_training.target_key(target), cfg.flow_steps, cfg.seed)
    context = get_script_run_ctx()
    session_id = context.session_id if context is not None else None
    return flow_training.job_for(
        page_state.store(), key, target, cfg.flow_steps, cfg.seed,
        alive=lambda: state.session_connected(session_id),
    )  # fmt: skip


def _wait_for_flow(flow: flow_training.FlowJob) -> None:
    """Only flow samplers are chosen and their flow is not ready: its training, alone."""
    st.info(
        "Only flow samplers are chosen: the run starts when their flow is trained (or when "
        "you stop training). Add another sampler to sample meanwhile."
    )
    from app.views import flow as flow_view  # the flow's view, imported only where a flow trains

    flow_view.controls(flow)


def _build_rbm(cfg: Config, inputs: Inputs) -> state.Run | None:
    """A new run of ``cfg``'s samplers on the sidebar's RBM."""
    name = rbm_targets.TARGET_LABELS[cfg.target].removeprefix("RBM: ")
    try:
        with st.spinner("Drawing the ground truth and building the samplers…"):
            run, messages = state.build_rbm_run(cfg, inputs.rbm, name)
    except ValueError as err:
        st.error(f"This configuration cannot be sampled: {plain(err)}")
        return None
    for message in messages:
        st.warning(message)
    return run


def _build_network(cfg: Config, inputs: Inputs) -> state.Run | None:
    """A new run of ``cfg``'s samplers on the sidebar's Markov network."""
    try:
        with st.spinner("Finding a start of positive probability and building the samplers…"):
            run, messages = state.build_network_run(cfg, inputs.network, inputs.name or "")
    except ValueError as err:
        st.error(f"This configuration cannot be sampled: {plain(err)}")
        return None
    for message in messages:
        st.warning(message)
    return run


def _why_rebuild(run: state.Run, cfg: Config, key: tuple, old_key=None) -> str | None:
    """None when ``run`` (built from ``old_key``: the session's run's inputs when not given)
    can carry on under ``cfg``, else a sentence saying what changed."""
    old, old_key = run.config, old_key or page_state.RUN_INPUTS.get() or key
    target = cfgmod.changed(old, cfg, cfgmod.TARGET_FIELDS)
    kind = kind_of(cfg.target)
    if old_key[0] != key[0]:
        target.append({TargetKind.RBM: "model", TargetKind.NETWORK: "network"}.get(kind, "image"))
    elif len(old_key) < 3 or old_key[2] != key[2]:
        target.append("object prompt")
    if target:
        what = "posterior" if kind is TargetKind.ISING else "target"
        return f"The {what} changed ({', '.join(target)})"
    samplers = cfgmod.changed(old, cfg, cfgmod.SAMPLER_FIELDS)
    if old_key[1] != key[1]:
        samplers.append("imported learned function")
    if samplers:
        return f"The sampler settings changed ({', '.join(samplers)})"
    if cfg.burn_in != old.burn_in and (run.phase == "mixing" or run.n_steps > cfg.burn_in):
        return "The burn-in length changed after the run had passed it"
    return None


def ensure_run(cfg: Config, inputs: Inputs) -> state.Run | None:
    """The run for ``cfg``: the current one when it still fits, else a new one; started when
    Run was pressed for it before the page had drawn it (``on_run``)."""
    pending = page_state.PENDING_RUN.pop()
    run = _fitting_run(cfg, inputs)
    if run is not None and pending is not None and pending + 1 == page_state.PAGE_RUNS.get():
        state.start(run)
    return run


def _fitting_run(cfg: Config, inputs: Inputs) -> state.Run | None:
    run: state.Run | None = page_state.RUN.get()
    ising_image = cfg.source != "paper" and kind_of(cfg.target) is TargetKind.ISING
    prompt = prompts.current(inputs.image_id) if ising_image else None
    key = (inputs.image_id, inputs.learned_id, prompt)
    reset = page_state.PENDING_RESET.pop()
    if run is not None and run.released:  # its page was gone for a while: start afresh
        st.info("This page was away, so its run was stopped and its memory released.")
        run = page_state.RUN.set(None)
    if run is not None and not reset:
        reason = _why_rebuild(run, cfg, key)
        if reason is None:
            run.config = cfg  # live settings: mixing steps, speed, an unpassed burn-in
            return run
        if _same_object(run, cfg, inputs, prompt, key):
            st.info("That object class is the one already in use: the posterior and the run stay.")
            run.config = cfg
            return run
        parks = bool(run.n_steps) and _park_key(run.config) != _park_key(cfg)
        back = _take_parked(run, cfg, key)
        if back is not None:
            return back
        if parks:  # not lost: it waits for its source or target to be chosen again
            left = "source" if run.config.target == cfg.target else "target"
            how = "complete" if run.finished else "paused"
            st.info(
                f"The run of the {left} left ({run.n_steps:,} steps) is kept, {how}, for when "
                f"you choose it again; this {left}'s run starts here."
            )
        elif run.n_steps:
            st.info(f"{reason}: the run was reset.")
    keep_running = bool(run and run.running and not reset)
    if run is not None:
        state.pause(run)
    new = _build(cfg, inputs, prompt)
    if new is not None and run is not None and not reset:
        _carry_marginal(run, new)
    if new is not None:
        context = get_script_run_ctx()
        new.session_id = context.session_id if context is not None else None
    page_state.RUN.set(new)
    page_state.RUN_INPUTS.set(key)
    if new is not None and keep_running:
        state.start(new)
    return new


def _park_key(cfg: Config) -> tuple[str, str]:
    """What a parked run is kept under: its target, and for the Ising posterior its source."""
    return _choice_key(cfg.target, cfg.source)


def _choice_key(target: str, source: str) -> tuple[str, str]:
    return target, source if kind_of(target) is TargetKind.ISING else ""


def _take_parked(run: state.Run, cfg: Config, key: tuple) -> state.Run | None:
    """Leaving ``run`` for another source or target: park it (paused) so that coming back
    finds it as it was; return the run parked for ``cfg`` when it still fits (None: build)."""
    parked = page_state.PARKED.get() or {}
    back = parked.pop(_park_key(cfg), None)
    if run.n_steps and _park_key(run.config) != _park_key(cfg):
        state.pause(run)
        parked[_park_key(run.config)] = (run, page_state.RUN_INPUTS.get() or key)
        while len(parked) > PARKED_RUNS:  # the oldest goes, and its memory with it
            state.release(parked.pop(next(iter(parked)))[0])
    page_state.PARKED.set(parked)
    if back is None:
        return None
    old, old_key = back
    if old.released or _why_rebuild(old, cfg, key, old_key) is not None:
        state.release(old)  # its settings changed since: not the run it was
        return None
    page_state.RUN.set(old)
    page_state.RUN_INPUTS.set(old_key)
    old.config = cfg
    kept_for = "source" if run.config.target == cfg.target else "target"
    if old.finished:  # Run is disabled: the status says how to go on (raise the mixing steps)
        st.info(f"Back to the run kept for this {kept_for}: {old.n_steps:,} steps, complete.")
    else:
        st.info(
            f"Back to the run kept for this {kept_for}: {old.n_steps:,} steps, paused while "
            "you were away; press Run to go on."
        )
    return old


def _same_object(run: state.Run, cfg: Config, inputs: Inputs, prompt, key: tuple) -> bool:
    """Whether only the object choice changed and it leaves the posterior as it is (auto had
    picked that class, or a prompt decides the object anyway)."""
    old_key = page_state.RUN_INPUTS.get() or key
    only_object = cfgmod.changed(run.config, cfg, cfgmod.TARGET_FIELDS) == [
        cfgmod.LABELS["polarity"]
    ]
    if not only_object or old_key != key or cfgmod.changed(run.config, cfg, cfgmod.SAMPLER_FIELDS):
        return False
    try:
        problem = sources.build_problem(
            cfg, inputs.photo, inputs.dark_mask, inputs.name, prompt=prompt
        )
    except ValueError:
        return False
    return torch.equal(problem.target.alpha, run.problem.target.alpha)


def _carry_marginal(old: state.Run, new: state.Run) -> None:
    """Give ``new`` the old run's sampled marginal when its posterior is the same or the
    mirror image (alpha negated, as flipping the object class does; the Ising prior is
    symmetric under x -> -x, so P_new(x_i = +1) = 1 - P_old(x_i = +1) exactly)."""
    if any(run_kind(r) is not TargetKind.ISING for r in (old, new)):
        return  # an RBM or a network run has no segmentation marginal to carry
    # the Segmentation view, imported only when a run replaces one (not on a first page)
    from app.views.segmentation import CARRIED, recorded_marginal

    marginal = recorded_marginal(old)
    a, b = old.problem.target, new.problem.target
    if marginal is None or a.batch != 1 or b.batch != 1 or a.shape != b.shape:
        return
    if (a.lam, a.boundary) != (b.lam, b.boundary):
        return
    records = old.comparison.marginals[old.comparison.names[0]].count
    if torch.equal(a.alpha, b.alpha):
        new.cache[CARRIED] = (
            marginal,
            f"previous run's posterior marginal ({records:,} records per chain; the posterior "
            "is the same), until this run has draws of its own",
        )
    elif torch.equal(a.alpha, -b.alpha):
        new.cache[CARRIED] = (
            1.0 - marginal,
            f"previous run's posterior marginal with the classes swapped ({records:,} records "
            "per chain): flipping the object negates α, so P(x = +1) is 1 − the old one "
            "exactly; shown until this run has draws of its own",
        )


# ----------------------------------------------------------------------------- buttons
def plain_steps(run: state.Run) -> bool:
    """Whether Step takes a plain step (an RBM or a network: no Proposal view to show it)."""
    return run_kind(run) is not TargetKind.ISING


def on_run() -> None:
    """Start the run on the page; but where a new source or target was chosen just before and
    the page still showed the run being left, the click is for the next page run's run: a
    run started here would only be parked (paused) by it, and the chosen one left paused."""
    run = page_state.RUN.get()
    if run is None:
        return
    chosen = st.session_state  # the sidebar's choice, already updated in a callback
    defaults = Config()
    target, source = chosen.get("target", defaults.target), chosen.get("source", defaults.source)
    if _park_key(run.config) != _choice_key(target, source):
        page_state.PENDING_RUN.set(page_state.PAGE_RUNS.get())
        return
    state.start(run)


def on_pause() -> None:
    run = page_state.RUN.get()
    if run is not None:
        state.pause(run)


def on_step() -> None:
    run = page_state.RUN.get()
    if run is not None:
        state.pause(run)
        page_state.PENDING_STEP.set(True)
        if not plain_steps(run):  # an RBM's or a network's step is a plain one
            page_state.VIEW.set(PROPOSAL)


def on_reset() -> None:
    page_state.PENDING_RESET.set(True)


def pending_step(run: state.Run) -> None:
    """Take the slow-motion step the Step button asked for."""
    if page_state.PENDING_STEP.pop():
        if plain_steps(run):  # no slow-motion view on an RBM or a network: one plain step
            state.advance(run, 0.0, max_steps=1)
            return
        state.slow_step(run, int(page_state.PROPOSAL_CHAIN.get()) - 1)
