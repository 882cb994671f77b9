"""The run a session drives: a ``Comparison`` plus what the page needs to know about it.

``Run`` lives in ``st.session_state`` (one per browser session). No Streamlit here:

- ``build_run`` creates a run (falling back from CUDA to CPU and saying so);
- ``advance`` steps it: learning during burn-in, then ``start_mixing()``, then mixing;
  every sampler takes the run's length of steps of its own (``burn_in + steps``), so one that
  joined late (a flow sampler after its training) catches up first, and the run is complete
  only when every sampler asked for has taken them (``Run.finished``);
- ``start`` / ``pause`` run ``advance`` on a worker thread, so sampling goes on between redraws
  whatever the browser's refresh cadence; the page's fragment only draws;
- ``slow_step`` takes one step in slow motion for the Proposal view (a single-site sampler shows
  its proposal; a block sampler, which updates every site at once, its state and flip count).

An RBM run (``build_rbm_run``) drives an ``lsbcore.rbm.live.RBMComparison`` the same way, and
``advance`` records its MMD checkpoints as it goes (``app/rbm_run.py``). A network run
(``build_network_run``) is a plain ``Comparison`` on a Markov network (``app/network_run.py``).

Every access to the comparison holds ``run.lock``: the worker steps in chunks of about
``CHUNK_S`` and releases it in between, so views and downloads (built on other threads) read
a consistent state and wait at most one chunk.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import hmac
import logging
import math
import secrets
import threading
import time
import weakref
from dataclasses import dataclass, field

import numpy as np
import torch
from streamlit.runtime import Runtime

import lsbcore
from app import colour_refits, flow_training, network_run, rbm_run, scheduler
from app.config import FLOW_SAMPLERS, Config, steps_per_refresh
from app.pace import Pace
from app.text import escape
from lsbcore.backends import resolve_device
from lsbcore.samplers import warmup
from lsbcore.samplers.registry import refusal
from lsbcore.targets.pairwise_target import PairwiseTarget

log = logging.getLogger(__name__)


# the page's redraw interval while running (with few runs); the slow-motion speed cap counts
# steps per such interval
REFRESH_S = scheduler.REFRESH_S
# The worker holds the lock (and its turn) for at most about this long at a time: a redraw's
# wait for the lock, and a pause, stay within a twentieth of a second (see scheduler.TURN_S)
CHUNK_S = scheduler.TURN_S
STALE_S = 90.0  # a running run nobody has drawn for this long pauses (hidden browser tab)
# a run whose page has been closed or reloaded (its session no longer connected) for this long
# stops: long enough to ride out a brief network drop, short enough that no orphan samples
ORPHAN_S = 3.0
# a run held for a reload (hold) waits this long, paused, for its page to come back
RESUME_S = 30.0
SETTLE_CHECK_S = 0.5  # how often the worker judges whether the marginals have settled


@dataclass
class SiteStep:
    """One chain of one sampler through a single step (the slow-motion view).

    A block sampler (a sweep per step) proposes no site: ``q`` and ``t`` are None, ``site`` and
    ``accept_prob`` too, and ``flipped`` says how many sites the sweep changed.
    """

    state: np.ndarray  # [H, W] of +-1 before the step
    q: np.ndarray | None  # [H, W] proposal Q(i | x)
    t: np.ndarray | None  # [H, W] T(x -> x with i flipped) = Q(i | x) A
    site: tuple[int, int] | None  # the site proposed by the step (None before a step)
    accept_prob: float | None  # A at that site: the probability the proposal was accepted
    move_prob: float  # probability that the step moves at all: sum_i T (NaN for a block)
    accepted: bool | None = None  # whether the proposal was accepted (a block: any flip)
    flipped: int | None = None  # sites the step changed (block samplers)


def proposes_one_site(name: str) -> bool:
    """Whether sampler ``name`` moves by proposing one site, so it has Q and T maps."""
    spec = lsbcore.REGISTRY.get(name)
    return spec is not None and spec.move == "site"


@dataclass
class StepReport:
    step: int  # the comparison's step count after the step
    chain: int
    phase: str
    sites: dict[str, SiteStep]


@dataclass
class Run:
    config: Config
    problem: lsbcore.Problem
    comparison: lsbcore.Comparison
    device_label: str
    photo: lsbcore.Photo | None = None  # image sources: the photo, in colour, with its size
    source: object = None  # image sources: the file again (path or bytes), for full-size output
    running: bool = False
    burnin_wall: dict[str, float] | None = None  # each sampler's wall_seconds at its burn-in's end
    pace: Pace = field(default_factory=Pace)  # steps per wall-clock second, the time left
    chunk_rate: dict = field(default_factory=dict)  # (phase, clock) -> steps/s, last chunk
    last_seen: float = 0.0  # when the page last drew this run
    session_id: str | None = None  # the Streamlit session that owns it (None: no server)
    released: bool = False  # its page went away: samplers and traces dropped (release)
    last_step: StepReport | None = None
    error: str | None = None  # why sampling stopped, if it failed
    settledness: dict = field(default_factory=dict)  # sampler -> Settledness, refreshed
    settled_at: int | None = None  # the step at which every sampler had settled
    # a prompted run: the share of free sites its last colour refit flipped (None before any;
    # colour_refits, which refits while the run goes on and says when to stop)
    refit_moved: float | None = None
    notices: list[str] = field(default_factory=list)  # learning divergence and the like
    cache: dict = field(default_factory=dict)  # views' derived results, keyed by view
    next_record: int = 0  # an RBM run: the step of its next MMD checkpoint (rbm_run.py)
    flow: flow_training.FlowJob | None = None  # the flow samplers' training (shared per target)
    flow_waiting: tuple[str, ...] = ()  # flow samplers not yet in the comparison (join_flow)
    flow_joined_at: int | None = None  # the run's step at which they joined
    # held for a reload of its page (hold): the URL's token, the browser that may take it
    # back (a digest), and the session keys its page needs again (the upload, the prompt)
    resume_token: str | None = None
    resume_browser: str = ""
    resume_keep: dict = field(default_factory=dict, repr=False)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    worker: threading.Thread | None = field(default=None, repr=False)

    @property
    def image(self) -> np.ndarray | None:
        """The working-resolution luma of an image source (None for paper cases)."""
        return None if self.photo is None else self.photo.luma

    @property
    def n_steps(self) -> int:
        """The run's step: the furthest any of its samplers has gone."""
        return self.comparison.n_steps

    @property
    def steps_done(self) -> int:
        """The run's progress toward its length: the steps of the sampler furthest behind
        (of those in the comparison; one waiting for its flow has none yet)."""
        return min(self.comparison.sampler_steps.values())

    @property
    def finished(self) -> bool:
        """Every sampler asked for has taken the run's length of steps of its own: none still
        waits for its flow, and none that joined late is short of it."""
        return not self.flow_waiting and self.steps_done >= self.config.total_steps

    def sampler_steps(self) -> dict[str, int | None]:
        """Each sampler of the run, in the order asked for, with its own steps so far (None:
        waiting for its flow's training)."""
        own = dict(self.comparison.sampler_steps)
        names = [n for n in self.config.samplers if n in own or n in self.flow_waiting]
        names += [n for n in own if n not in names]  # keyed otherwise (an RBM's variants)
        return {n: own.get(n) for n in names}

    @property
    def phase(self) -> str:
        return self.comparison.phase

    def throttled(self, key: str, build, params=(), max_age_s: float = 1.0):
        """``build()``, cached per view: rebuilt when the run moved on and, while it is running,
        at most every ``max_age_s`` seconds (figures cost far more to build than to resend)."""
        entry = self.cache.get(key)
        now = time.perf_counter()
        if entry is not None and entry[0] == params:
            if entry[1] == self.n_steps or (self.running and now - entry[2] < max_age_s):
                return entry[3]
        value = build()
        self.cache[key] = (params, self.n_steps, now, value)
        return value

    def phase_seconds(self) -> tuple[dict[str, float], dict[str, float]]:
        """Sampling seconds per sampler in burn-in and in mixing (for the results JSON); a
        sampler still in its burn-in has no mixing seconds yet."""
        wall = {n: s.wall_seconds for n, s in self.comparison.samplers.items()}
        ended = self.burnin_wall or {}
        burnin = {n: ended.get(n, wall[n]) for n in wall}
        mixing = {n: wall[n] - burnin[n] for n in wall}
        return burnin, mixing


def device_label(device: torch.device) -> str:
    if device.type == "cuda":
        try:
            return torch.cuda.get_device_name(device)
        except (RuntimeError, AssertionError):
            return "CUDA GPU"
    return "CPU"


# Runs whose worker may be sampling: stopped before the interpreter exits, so a server shut
# down mid-run does not tear torch down under a sampling thread.
_LIVE_RUNS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # id -> Run


def running_runs() -> int:
    """Runs sampling on this server now (every session's)."""
    return sum(1 for run in list(_LIVE_RUNS.values()) if run.running)


@atexit.register
def _pause_all_runs() -> None:
    for run in list(_LIVE_RUNS.values()):
        try:
            pause(run)
        except Exception:  # shutting down: nothing left to report to
            log.exception("could not pause a run at exit")
    flow_training.stop_all()  # and no flow trains on


def _on_a_device(cfg: Config, make) -> tuple[object, list[str]]:
    """``make(device)`` on the configured device, falling back to the CPU when CUDA is absent
    or fails (out of memory, driver errors); the messages say so."""
    messages: list[str] = []
    device = None if cfg.device == "auto" else cfg.device
    if cfg.device == "cuda" and not torch.cuda.is_available():
        messages.append("No CUDA GPU is available here; running on the CPU instead.")
        device = "cpu"
    try:
        return make(device), messages
    except RuntimeError as err:
        if resolve_device(device).type == "cpu":
            raise
        messages.append(f"The GPU failed ({str(err)[:120]}); running on the CPU instead.")
        return make("cpu"), messages


def build_run(
    cfg: Config,
    problem: lsbcore.Problem,
    photo: lsbcore.Photo | None = None,
    balancing=None,
    flow: flow_training.FlowJob | None = None,
) -> tuple[Run, list[str]]:
    """A fresh run of ``cfg`` on ``problem``; messages say when the device fell back to CPU.

    ``balancing`` is the imported learned function for the "learned" sampler (required when
    ``cfg.samplers`` lists it). ``flow`` is the training of the flow samplers' flow: they join
    the run once it is ready (``join_flow``), at once when it is; a flow sampler the target
    refuses (a paper case with one noisy alpha per chain) is left out with a sentence.
    """
    options = {"lr": cfg.lr, "optimizer": cfg.optimizer, "hidden": cfg.hidden}
    if any(lsbcore.REGISTRY[n].needs_balancing for n in cfg.samplers):
        options["balancing"] = balancing
    flows, refused = _flow_samplers(cfg, problem.target)
    if flows and flow is None:
        raise ValueError("the flow samplers need a flow training (app.flow_training).")
    others = [n for n in cfg.samplers if n not in FLOW_SAMPLERS]
    if not others and not flows:
        raise ValueError(" ".join(refused) or "no sampler chosen.")
    if not others and not flow.ready:
        raise ValueError("no sampler can start yet: the flow samplers wait for their training.")

    def make(dev):
        return lsbcore.Comparison(
            others or list(flows),
            problem.target,
            cfg.chains,
            seed=cfg.seed,
            device=dev,
            x0=problem.x0,
            thin=cfg.thin,
            truth=problem.truth,
            **options,
        )

    if not others:  # only flow samplers, their flow ready: built on it at once
        options["flow"] = flow.snapshot()
    comparison, messages = _on_a_device(cfg, make)
    run = Run(
        config=cfg,
        problem=problem,
        comparison=comparison,
        device_label=device_label(comparison.device),
        photo=photo,
        flow=flow if flows else None,
        flow_waiting=flows if others else (),
        flow_joined_at=None if others or not flows else 0,
    )
    messages.extend(refused)
    join_flow(run)
    _LIVE_RUNS[id(run)] = run
    return run, messages


def _flow_samplers(cfg: Config, target) -> tuple[tuple[str, ...], list[str]]:
    """The flow samplers of ``cfg`` that can run on ``target``, and a sentence for each left
    out."""
    kept, refused = [], []
    for name in cfg.samplers:
        if name not in FLOW_SAMPLERS:
            continue
        reason = refusal(name, target)
        if reason is None:
            kept.append(name)
            continue
        label = lsbcore.REGISTRY[name].label
        hint = ' Tick "One α for all chains" to run it.' if target.batch != 1 else ""
        refused.append(f"{label} is left out: {reason}{hint}")
    return tuple(kept), refused


def join_flow(run: Run) -> list[str]:
    """Put the waiting flow samplers into the run once their flow is ready (trained, stopped,
    or failed with its last finite weights); return the names that joined.

    They start from the flow's own draws (an independence proposal never leaves a random start
    to which the flow gives no mass), with a frozen copy of the flow, and count their own steps
    (their traces begin at their step 0): a burn-in of their own, then mixing, to the run's
    length, the run waiting for them (``advance`` steps the samplers furthest behind first).
    """
    if not run.flow_waiting or run.flow is None or not run.flow.ready:
        return []
    with run.lock:  # the worker and the page may both find the flow ready: one joins them
        if not run.flow_waiting or run.comparison is None:
            return []
        cfg, comparison, target = run.config, run.comparison, run.problem.target
        model = run.flow.snapshot()
        joined = list(run.flow_waiting)
        for name in joined:  # from the flow's own draws, as Comparison starts them
            sampler = lsbcore.make_sampler(
                name, target, cfg.chains, seed=cfg.seed, device=comparison.device, flow=model
            )
            comparison.add(name, sampler, phase="burnin")
        run.flow_waiting = ()
        run.flow_joined_at = comparison.n_steps
    return joined


def build_rbm_run(cfg: Config, rbm, name: str) -> tuple[Run, list[str]]:
    """A fresh run of ``cfg``'s samplers (RBM variant labels) on the RBM ``rbm``, falling back
    from CUDA to the CPU as ``build_run`` does. Its first MMD checkpoint is the shared start."""
    from lsbcore.rbm.ground_truth import TRUTH_STEPS, affordable_steps, is_shipped
    from lsbcore.rbm.live import RBMComparison

    options = {"lr": cfg.lr, "optimizer": cfg.optimizer, "hidden": cfg.hidden}
    # a shipped model's truth is read from assets/; the user's own is drawn now, within a budget
    steps = TRUTH_STEPS if is_shipped(rbm) else affordable_steps(rbm)

    def make(dev):
        return RBMComparison(
            rbm, list(cfg.samplers), cfg.chains, seed=cfg.seed, device=dev, truth_steps=steps,
            **options,
        )  # fmt: skip

    comparison, messages = _on_a_device(cfg, make)
    run = Run(
        config=cfg,
        problem=rbm_run.RBMProblem(name=name, target=rbm),
        comparison=comparison,
        device_label=device_label(comparison.device),
    )
    rbm_run.checkpoint(run)
    _LIVE_RUNS[id(run)] = run
    return run, messages


def build_network_run(cfg: Config, graph, name: str) -> tuple[Run, list[str]]:
    """A fresh run of ``cfg``'s samplers (registry names) on the Markov network ``graph``, with
    traces, falling back from CUDA to the CPU as ``build_run`` does. The messages include the
    comparison's sentence on chains it moved out of zero mass at the start."""
    from app.selection_target import SyntheticSelection
    from lsbcore.networks.layout import network_layout

    options = {"lr": cfg.lr, "optimizer": cfg.optimizer, "hidden": cfg.hidden}

    def make(dev):
        return lsbcore.Comparison(
            list(cfg.samplers), graph, cfg.chains, seed=cfg.seed, device=dev, thin=cfg.thin,
            **options,
        )  # fmt: skip

    comparison, messages = _on_a_device(cfg, make)
    note = network_run.start_note(comparison)
    if isinstance(graph, SyntheticSelection):  # variable selection: no factor graph to lay out
        problem = network_run.SelectionProblem(
            name=name, target=graph, informative=graph.informative
        )
    else:
        problem = network_run.NetworkProblem(
            name=name, target=graph, layout=network_layout(graph, seed=cfg.seed)
        )
    run = Run(
        config=cfg,
        problem=problem,
        comparison=comparison,
        device_label=device_label(comparison.device),
    )
    if note:  # the library's sentence, shown literally (its p~ is no Markdown)
        run.notices.append(escape(note))
    _LIVE_RUNS[id(run)] = run
    return run, messages


# ----------------------------------------------------------------------------- stepping
def leave_flow(run: Run) -> tuple[str, ...]:
    """Before training resumes: the flow samplers leave the run (their chains, traces and
    marginals dropped) and wait to join again with the flow trained further; return them.
    In a run of flow samplers only, nothing would be left: they keep their flow (Reset takes
    the newer one)."""
    if run.flow is None or run.comparison is None:
        return ()
    with run.lock:
        comparison = run.comparison
        names = tuple(n for n in run.config.samplers if n in comparison.samplers
                      and n in FLOW_SAMPLERS)  # fmt: skip
        if not names or len(names) == len(comparison.samplers):
            return ()
        for name in names:
            comparison.remove(name)
            run.settledness.pop(name, None)
            (run.burnin_wall or {}).pop(name, None)
        run.flow_waiting = names
        run.flow_joined_at = None
        run.cache.clear()
    return names


def _maybe_start_mixing(run: Run) -> None:
    """End the burn-in of every sampler that has taken the run's burn-in steps of its own."""
    comparison = run.comparison
    due = [
        n for n, phase in comparison.sampler_phases.items()
        if phase == "burnin" and comparison.sampler_steps[n] >= run.config.burn_in
    ]  # fmt: skip
    if due:
        run.burnin_wall = run.burnin_wall or {}
        run.burnin_wall.update({n: comparison[n].wall_seconds for n in due})
        comparison.start_mixing(due)


def _next_group(run: Run) -> tuple[list[str], int]:
    """The samplers to step next and how many steps they may take: those furthest behind (all
    of them, side by side), up to where they meet the next ones, the end of their burn-in, or
    the run's length. No sampler when every one has its steps."""
    cfg, own = run.config, run.comparison.sampler_steps
    low = min(own.values())
    if low >= cfg.total_steps:
        return [], 0
    end = cfg.burn_in if low < cfg.burn_in else cfg.total_steps
    end = min([end] + [s for s in own.values() if s > low])
    return [n for n, s in own.items() if s == low], end - low


def _note_failed_learning(run: Run) -> None:
    for name, sampler in run.comparison.samplers.items():
        if getattr(sampler, "learning_failed", False):
            text = (
                f"{name}: learning diverged (a non-finite loss or parameter) by step "
                f"{run.n_steps:,}; it stopped learning and keeps its last good balancing "
                "function. Try a smaller learning rate."
            )
            if not any(n.startswith(f"{name}: learning diverged") for n in run.notices):
                run.notices.append(text)


def turn_clock(run: Run, running: int):
    """The clock a turn of ``run``'s worker is counted on while ``running`` runs sample.

    With other runs waiting for a turn, the wall clock: a turn's length is what keeps sessions
    fair (``scheduler.turn_seconds``). A run alone on the CPU counts its own CPU time instead
    (the compiled steps run in its thread), so that a machine busy with other work lengthens its
    turns rather than cutting them into chunks too short to pay for their calls (at a fifth of
    a core, 50 ms wall turns are 10 ms chunks, a third of it the calls' cost). A GPU's work
    this thread only waits for: the wall clock there too.
    """
    if running <= scheduler.SLOTS and run.comparison.device.type == "cpu":
        return time.thread_time
    return time.perf_counter


def advance(
    run: Run, budget_s: float, max_steps: int | None = None, clock=time.perf_counter
) -> int:
    """Step ``run`` for about ``budget_s`` seconds (and at most ``max_steps``); return the steps.

    Burn-in steps learn (learnable samplers only); at ``burn_in`` steps of its own a
    sampler's balancing function is frozen with ``start_mixing``; a sampler stops at
    ``burn_in + steps`` of its own. The samplers furthest behind step first (``_next_group``:
    one that joined late catches up, then all go on side by side); the steps counted are the
    group's. Steps go in chunks sized from the measured rate, so the budget holds without a
    clock check after every step; at least one step is taken when any is left. The seconds
    are ``clock``'s (see ``turn_clock``).
    """
    comparison = run.comparison
    start = clock()
    done = 0
    limit = max_steps if max_steps is not None else 10**9
    rbm = rbm_run.is_rbm_run(run)
    with run.lock:
        join_flow(run)  # the flow samplers, once their flow is ready
        # until the compiled kernels are ready (streamlit_app compiles them in the background)
        # the torch steps run: every backend gives the same chains, so the switch is invisible.
        # Not an RBM's: on a fresh install its torch steps, learning, took 10-100 a second and
        # slowed the compile beside them; a page Run 10 s after opening ended its 51,000 steps
        # 88 s after Run with them on half the time (none came before 44 s without them, and
        # all were done at 59 s). Its page says that it waits (``waits_for_kernels``)
        if not rbm:  # a lattice's kernels are compiled first (the paper page's)
            section = "lattice" if isinstance(comparison.target, PairwiseTarget) else None
            comparison.set_backend("auto" if warmup.ready(section) else "torch")
        while done < limit:
            _maybe_start_mixing(run)
            group, room = _next_group(run)
            if not group:
                break  # every sampler in the run has its steps (a flow may still be training)
            phase = comparison.sampler_phases[group[0]]
            left = budget_s - (clock() - start)
            if done and left < 0.5 * budget_s:
                break  # a short tail chunk would cost a whole call for a few steps
            colour_refits.refit_if_due(run)  # a prompt's colours, on the library's schedule
            # the rate carries over between calls (per phase and group of samplers), so a
            # call fills its budget with one chunk. Measured over whole chunks it includes the
            # per-call cost, so from a single step it grows chunk by chunk until a chunk fills
            # the budget (as long as the budget exceeds one call's cost; else every chunk
            # stays one step long)
            key = (phase, clock, tuple(group))  # steps per second of that clock
            rate = run.chunk_rate.get(key, math.nan)
            chunk = 1 if math.isnan(rate) else max(1, int(rate * left))
            chunk = min(chunk, room, limit - done)
            if rbm:  # end the chunk at the next MMD checkpoint
                chunk = min(chunk, rbm_run.steps_to_checkpoint(run))
            to_refit = colour_refits.steps_to_refit(run, group)
            if to_refit is not None:  # the chunk ends where the next refit is due
                chunk = min(chunk, to_refit)
            t0 = clock()
            comparison.step(chunk, learn=phase == "burnin", names=group)
            run.chunk_rate[key] = chunk / max(clock() - t0, 1e-9)
            done += chunk
            if rbm:
                rbm_run.checkpoint(run, force=run.finished)
        _maybe_start_mixing(run)
        _note_failed_learning(run)
    return done


def waits_for_kernels(run: Run) -> bool:
    """Whether the run's steps wait for the warm-up to compile them (an RBM's, on a fresh
    install's first minute: ``advance`` runs no torch steps for it). The worker waits without
    the run's lock: a compiled call waiting on numba's compiler held it, and the page with it
    (it still read "paused" 51 s after Run)."""
    return rbm_run.is_rbm_run(run) and not warmup.ready("rbm")


def active(run: Run) -> bool:
    """Whether the page should keep redrawing: the run samples, or its flow trains."""
    return run.running or (run.flow is not None and run.flow.running)


def judges_settling(run: Run) -> bool:
    """Whether split R-hat across chains means something here: every chain samples the same
    posterior (one field for all; the paper cases give each chain its own) and there are at
    least two chains."""
    if rbm_run.is_rbm_run(run):  # no marginal to judge: the MMD chart shows convergence
        return False
    if network_run.is_network_run(run):  # the ESS view judges a network run, not a stop rule
        return False
    return run.problem.target.batch == 1 and run.config.chains >= 2


def refresh_settledness(run: Run) -> bool:
    """Judge every sampler's marginal again; True when all have settled."""
    if not judges_settling(run) or run.phase != "mixing":
        return False
    if colour_refits.pending(run):  # as the library: only the last field's draws settle
        return False
    with run.lock:
        verdicts = {n: m.settledness() for n, m in run.comparison.marginals.items()}
    run.settledness = {n: v for n, v in verdicts.items() if v is not None}
    return len(run.settledness) == len(verdicts) and all(
        v.settled for v in run.settledness.values()
    )


def _work(run: Run) -> None:
    """The worker: advance in short chunks while the run is running, honouring the speed cap,
    and (images) pausing once the marginals have settled when asked to."""
    window_start, window_steps = time.perf_counter(), 0
    run.pace.restart()
    run.pace.add(window_start, run.steps_done, _progress_phase(run))
    judged, judging = time.perf_counter(), True
    gone_since = None
    while run.running and not run.finished:
        now = time.perf_counter()
        if now - run.last_seen > STALE_S:
            run.notices.append("Paused: nobody has looked at this run for a while.")
            break
        if session_connected(run.session_id):
            gone_since = None
        elif gone_since is None:
            gone_since = now
        elif now - gone_since > ORPHAN_S and run.resume_token and now - gone_since < RESUME_S:
            time.sleep(REFRESH_S)  # held for a reload of its page: wait, without sampling
            continue
        elif now - gone_since > ORPHAN_S:
            log.info("run of session %s stopped: its page was closed or reloaded", run.session_id)
            run.running = False
            release(run)
            return
        if waits_for_flow(run):  # every other sampler has its steps: wait for the flow samplers
            join_flow(run)
            time.sleep(REFRESH_S)
            continue
        if waits_for_kernels(run):  # outside the run's lock: the page redraws and says why
            time.sleep(REFRESH_S)
            run.pace.restart()  # the rate counts from the first step, not from Run
            run.pace.add(time.perf_counter(), run.steps_done, _progress_phase(run))
            continue
        cap = steps_per_refresh(run.config)
        max_steps = None
        if cap is not None:  # at most `cap` steps per refresh interval: slow motion
            if now - window_start >= REFRESH_S:
                window_start, window_steps = now, 0
                # the pace is taken where each interval's steps are due: the interval's start
                run.pace.add(now, run.steps_done, _progress_phase(run))
            max_steps = cap - window_steps
            if max_steps <= 0:
                time.sleep(max(0.0, REFRESH_S - (now - window_start)))
                continue
        try:
            # sessions sample in turn, and a core (and, when busy, some time) stays for the pages
            running = running_runs()
            with scheduler.TURNS.turn(scheduler.idle_share(running)):
                budget, clock = scheduler.turn_seconds(running), turn_clock(run, running)
                with run.lock:  # the steps with their pace: a page reading one finds the other
                    window_steps += advance(run, budget, max_steps, clock)
                    if cap is None or not run.pace.measured():  # capped: the first turn only
                        at = time.perf_counter()
                        if cap is not None:  # its steps are the interval's: due at its end
                            at = max(at, window_start + REFRESH_S)
                        run.pace.add(at, run.steps_done, _progress_phase(run))
        except Exception as err:  # the page shows why; the run stays inspectable
            log.exception("sampling failed")
            hint = " Switch the device to cpu to go on." if run.device_label != "CPU" else ""
            run.error = f"Sampling stopped: {err}.{hint}"
            break
        now = time.perf_counter()
        if judging and now - judged >= SETTLE_CHECK_S:
            judged = now
            settled = _settled_now(run)
            judging = settled is not None
            if settled and run.config.until_settled:
                if run.settled_at is None:
                    run.settled_at = run.n_steps
                    break
        time.sleep(0)  # let a waiting reader take the lock
    if run.finished and not run.error and judging:  # the last steps' verdict, for the page
        _settled_now(run)
    run.running = False


def _settled_now(run: Run) -> bool | None:
    """``refresh_settledness`` for the worker; None when judging failed (logged, and said on
    the page), so that sampling goes on unjudged instead of the worker dying mid-run."""
    try:
        return refresh_settledness(run)
    except Exception as err:
        log.exception("judging whether the run settled failed")
        run.notices.append(
            f"Whether the marginal has settled could not be judged ({err}); the run goes on "
            'without "Stop when settled".'
        )
        return None


def waits_for_flow(run: Run) -> bool:
    """Whether the run has nothing left to sample until its flow samplers join: every sampler
    in it has the run's length of steps, and flow samplers wait for their training."""
    return bool(run.flow_waiting) and run.steps_done >= run.config.total_steps


def _progress_phase(run: Run) -> str:
    """The phase of the run's progress (``steps_done``): burn-in until the sampler furthest
    behind has taken the run's burn-in steps."""
    return "burnin" if run.steps_done < run.config.burn_in else "mixing"


def release(run: Run) -> None:
    """Drop a run whose page has gone: its samplers, traces and cached views, then hand the
    freed memory back to the system. A page that comes back gets a new run."""
    if run.flow is not None:
        run.flow.stop(wait=False)
    with run.lock:
        run.released = True
        run.comparison = None
        run.cache.clear()
        run.last_step = None
    give_memory_back()


def give_memory_back() -> None:
    """Collect cycles now and return freed heap pages to the system: glibc keeps them in its
    arenas otherwise, so a server's memory only ever grows as sessions come and go."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


# Runs a page may take back after a reload, by the token its URL carries: weakly held, so a
# run goes with the last session that holds it (Streamlit keeps a closed page's session a while)
_HELD: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # token -> Run


def hold(run: Run, browser: str, keep: dict) -> str:
    """Let a reload of ``run``'s page in the browser ``browser`` (a digest of what it keeps)
    take it back, with the session values ``keep``; return the run's token (unguessable)."""
    if run.resume_token is None:
        run.resume_token = secrets.token_urlsafe(18)
        _HELD[run.resume_token] = run
    run.resume_browser, run.resume_keep = browser, keep
    return run.resume_token


def reclaim(token: str, browser: str, session_id: str | None) -> Run | None:
    """The run held under ``token`` for the browser ``browser``, now the session
    ``session_id``'s; None when none is (never held, released, or another browser's)."""
    run = _HELD.get(token)
    if run is None or run.released or not hmac.compare_digest(run.resume_browser, browser):
        return None
    run.session_id, run.last_seen = session_id, time.perf_counter()
    return run


def session_connected(session_id: str | None) -> bool:
    """Whether the browser session ``session_id`` is still connected to this server (True
    without a server, as in tests and scripts)."""
    if session_id is None or not Runtime.exists():
        return True
    try:
        return Runtime.instance().is_active_session(session_id)
    except Exception:  # a runtime shutting down: treat the page as gone
        return False


def start(run: Run) -> None:
    """Sample on a worker thread until paused, finished, or nobody looks any more."""
    if run.finished:
        return
    if run.worker is not None and run.worker.is_alive() and not run.running:
        run.worker.join(timeout=5.0)  # a worker on its way out: let it finish first
    run.error = None
    run.last_seen = time.perf_counter()
    run.running = True
    if run.worker is None or not run.worker.is_alive():
        run.worker = threading.Thread(target=_work, args=(run,), name="lsb-sampler", daemon=True)
        run.worker.start()


def pause(run: Run, wait: bool = True) -> None:
    """Stop the worker (after its current chunk, a few hundredths of a second)."""
    run.running = False
    worker = run.worker
    if wait and worker is not None and worker is not threading.current_thread():
        worker.join(timeout=5.0)
    run.pace.restart()


@torch.no_grad()
def slow_step(run: Run, chain: int = 0) -> StepReport | None:
    """One real step of every sampler, with the proposal and transition maps seen before it.

    For chain ``chain`` of each sampler: ``Q(i | x)`` and ``T(x -> x_i) = Q A`` for every site
    ``i`` just before the step, then the proposed site, its acceptance probability and whether
    it was accepted. A block sampler proposes no site: its state before the step and the number
    of sites its sweep changed. Only the samplers furthest behind step (``_next_group``): a
    sampler that joined late catches up first. None when no sampler has a step left.
    """
    comparison = run.comparison
    chain = min(max(chain, 0), run.config.chains - 1)
    with run.lock:
        _maybe_start_mixing(run)
        colour_refits.refit_if_due(run)
        group, _ = _next_group(run)
        if not group:
            return None
        before = {}
        for name in group:
            sampler = comparison[name]
            q = t = None
            if proposes_one_site(name):
                q = torch.exp(sampler.proposal_log_probs()[chain]).cpu().numpy()
                t = sampler.flip_probabilities()[chain].cpu().numpy()
            before[name] = (sampler.x[chain].cpu().numpy().copy(), q, t)
        phase = comparison.sampler_phases[group[0]]
        comparison.step(1, learn=phase == "burnin", names=group)
        _maybe_start_mixing(run)
        _note_failed_learning(run)
        sites = {}
        for name in group:
            sampler = comparison[name]
            state, q, t = before[name]
            if q is None:  # a sweep: no proposed site, only what changed
                flipped = int((sampler.x[chain].cpu().numpy() != state).sum())
                sites[name] = SiteStep(
                    state, None, None, None, None, math.nan, flipped > 0, flipped
                )
                continue
            last = sampler.last_proposal
            site = divmod(int(last["site"][chain]), state.shape[1])
            accept = float(last["accept_prob"][chain])
            accepted = bool(last["accepted"][chain])
            sites[name] = SiteStep(state, q, t, site, accept, float(t.sum()), accepted)
        run.last_step = StepReport(comparison.n_steps, chain, phase, sites)
    return run.last_step
