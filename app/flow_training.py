"""The flow samplers' training, in the background: start, progress, stop, resume, failure.

``flow-exact`` and ``flow-latent`` (``lsbcore.samplers``) run on a flow trained on the run's
target (``lsbcore.methods.flows.train.FlowTraining``). The page never trains inside a sampler's
construction: a ``FlowJob`` trains on a thread of its own, in chunks of ``CHUNK`` steps, and
the run (``app/state.py``) leaves the flow samplers out until the job is ``ready``, while the
other samplers sample; they then join with a frozen copy of the flow (``snapshot``), starting
from the flow's own draws (as ``lsbcore.Comparison`` starts them), and count their own steps.

One job per session and (target, training steps, seed) (``job_for``): both flow samplers share
it, and a new run of the same posterior (other samplers, more chains) finds it trained. The job
is ready when it has taken its steps, when the user stopped it (the samplers then use the flow
as it is), or when a step met a NaN or an infinity (``FlowTrainingFailed``): it then keeps its
last finite weights, ``failed`` holds the library's sentence for the page, and the flow
samplers join on those weights. Resuming goes on with the same optimiser and generator (the
same seed gives the same weights whether trained in one go or in pieces); the flow samplers
that joined leave the run meanwhile and join again on the newer flow (``state.leave_flow``):
a running chain never sees its proposal change under it, which would no longer leave the
target invariant.

No Streamlit here: the page draws from ``progress``, ``history`` and ``latent_points``.
"""

from __future__ import annotations

import copy
import logging
import threading
import weakref
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass

import numpy as np
import torch

from lsbcore.checks import integer
from lsbcore.methods.flows.model import FlowModel
from lsbcore.methods.flows.train import FlowTraining, FlowTrainingFailed, TrainingSettings
from lsbcore.targets.base import Target

log = logging.getLogger(__name__)

#: Steps per chunk: the model's lock is held this long at most (a snapshot or a latent picture
#: waits for the chunk to end: a tenth of a second on a 30 x 30 lattice), and a stop takes
#: effect within a step.
CHUNK = 1
#: Latent draws in the view's picture (seeded: the same z each redraw, so it moves with training).
LATENT_POINTS = 400
#: Where a session keeps its job (``st.session_state`` in the app).
JOB_KEY = "_flow_job"
#: Every job of this process, so that none trains on past the server's end (``stop_all``).
_JOBS: weakref.WeakSet = weakref.WeakSet()


@dataclass(frozen=True)
class Progress:
    """What the page shows of a job: steps taken of ``goal``, and its state in words."""

    steps: int
    goal: int
    running: bool
    stopped: bool
    failed: str | None
    elbo: float

    @property
    def fraction(self) -> float:
        return 1.0 if self.goal == 0 else min(1.0, self.steps / self.goal)

    @property
    def ready(self) -> bool:
        """Whether the flow samplers may run: the flow is as trained as it will be for now."""
        return not self.running and (self.steps >= self.goal or self.stopped or bool(self.failed))

    def text(self) -> str:
        elbo = "" if not np.isfinite(self.elbo) else f" · ELBO {self.elbo:,.2f}"
        head = f"Flow training: {self.steps:,} / {self.goal:,} steps{elbo}"
        if self.failed:
            return f"{head} · failed"
        if self.running:
            return head
        if self.steps >= self.goal:
            return f"{head} · done"
        return f"{head} · stopped" if self.stopped else f"{head} · waiting"


class FlowJob:
    """A flow trained on ``target`` for ``steps`` steps from ``seed`` on a background thread.

    ``start()`` begins (or resumes), ``stop()`` ends it after the current step, ``progress()``
    says where it is; ``snapshot()`` is a frozen copy of the flow for samplers. ``alive()``,
    when given, is asked after every step: once it says False (the page that asked for the
    training has gone) training stops as if stopped by the user.
    """

    def __init__(self, target: Target, steps: int, seed: int = 0,
                 alive: Callable[[], bool] | None = None, **settings):  # fmt: skip
        self.goal = integer(steps, "steps", 0, 10**6)
        self.alive = alive
        self.training = FlowTraining(target, TrainingSettings(seed=int(seed), **settings))
        self.failed: str | None = None
        self.stopped = False  # by the user
        self._stop = threading.Event()
        self._model_lock = threading.Lock()  # an optimiser step vs a copy or a picture
        self._thread: threading.Thread | None = None
        _JOBS.add(self)

    # ----------------------------------------------------------------- control
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Train (again) towards ``goal`` on a background thread; nothing when it is running,
        done or failed."""
        if self.running or self.failed or self.training.steps >= self.goal:
            return
        self._stop.clear()
        self.stopped = False
        self._thread = threading.Thread(target=self._work, name="flow-training", daemon=True)
        self._thread.start()

    resume = start

    def stop(self, wait: bool = True) -> None:
        """Stop after the current step; the flow samplers then use the flow as it is."""
        if not self.running:
            return
        self.stopped = True
        self._stop.set()
        if wait and self._thread is not threading.current_thread():
            self._thread.join(timeout=10.0)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end; whether it has."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.running

    def _work(self) -> None:
        training = self.training
        try:
            while training.steps < self.goal and not self._stop.is_set():
                if self.alive is not None and not self.alive():
                    self.stopped = True  # nobody is looking: Resume goes on
                    break
                with self._model_lock:
                    chunk = min(CHUNK, self.goal - training.steps)
                    if training.run(chunk, should_stop=self._stop.is_set) == 0:
                        break
        except FlowTrainingFailed as err:  # the library's sentence; the last finite weights stay
            self.failed = str(err)
        except Exception as err:  # anything else: a sentence too, and the log has the rest
            log.exception("flow training failed")
            self.failed = f"flow training stopped: {type(err).__name__}: {err}"

    # ----------------------------------------------------------------- what the page reads
    def progress(self) -> Progress:
        return Progress(self.training.steps, self.goal, self.running, self.stopped,
                        self.failed, self.training.elbo)  # fmt: skip

    @property
    def ready(self) -> bool:
        return self.progress().ready

    def history(self) -> tuple[np.ndarray, np.ndarray]:
        """Steps and the ELBO (``-loss``, a lower bound on ``log Z``) of every step so far."""
        rows = list(self.training.history)  # appended by the thread: a copy of what is there
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        steps, losses, _ = zip(*rows, strict=True)
        return np.asarray(steps, dtype=np.int64), -np.asarray(losses, dtype=np.float64)

    def snapshot(self) -> FlowModel:
        """A frozen copy of the flow as it is now, for samplers (training goes on apart)."""
        with self._model_lock:
            model = copy.deepcopy(self.training.model)
        return model.eval().requires_grad_(False)

    def latent_points(self, n: int = LATENT_POINTS, seed: int = 0):
        """``n`` draws of the flow from fixed seeded ``z``: ``v = T(z)`` ``[n, D]`` and their
        states' magnetisation ``mean(sign v)`` ``[n]`` (``latent_projection`` draws them)."""
        model = self.training.model
        generator = torch.Generator(device=model.device).manual_seed(int(seed))
        with self._model_lock, torch.no_grad():
            was_training = model.training
            model.eval()
            v, _, _ = model.generate(model.normal(int(n), generator))
            model.train(was_training)
        v = v.double().cpu().numpy()
        return v, np.where(v < 0, -1.0, 1.0).mean(1)


def latent_projection(points: np.ndarray) -> np.ndarray:
    """The first two principal components of ``points [N, D]`` (``[N, 2]``; zeros where there is
    no spread), signs fixed so that a redraw does not flip the picture."""
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[0] == 0:
        return np.zeros((0, 2))
    finite = np.where(np.isfinite(points), points, 0.0)
    centred = finite - finite.mean(0)
    if points.shape[0] < 2 or not np.any(centred):
        return np.zeros((points.shape[0], 2))
    axes = _top_axes(centred, min(2, points.shape[1]))
    # each axis points where its largest loading is positive
    axes = axes * np.sign(axes[np.arange(axes.shape[0]), np.abs(axes).argmax(1)])[:, None]
    out = centred @ axes.T
    if out.shape[1] < 2:
        out = np.concatenate([out, np.zeros((out.shape[0], 2 - out.shape[1]))], 1)
    return out


def stop_all() -> None:
    """Stop every job's training (at the server's exit, and after each app test)."""
    for job in list(_JOBS):
        job.stop()


def _top_axes(centred: np.ndarray, k: int, iterations: int = 40) -> np.ndarray:
    """The ``k`` leading principal axes ``[k, D]`` of centred rows, by subspace iteration from a
    fixed start and a Rayleigh-Ritz step (a full SVD of 400 x 900 draws took up to seconds on
    a busy two-core machine; this is a few matrix products)."""
    start = np.random.default_rng(0).normal(size=(centred.shape[0], k))
    basis = np.linalg.qr(centred.T @ start)[0]  # [D, k]
    for _ in range(iterations):
        basis = np.linalg.qr(centred.T @ (centred @ basis))[0]
    rows = centred @ basis  # [N, k]
    values, vectors = np.linalg.eigh(rows.T @ rows)
    return (basis @ vectors[:, np.argsort(values)[::-1]]).T


def job_key(target_key, steps: int, seed: int) -> tuple:
    return (target_key, int(steps), int(seed))


def job_for(store: MutableMapping, key: tuple, target: Target, steps: int, seed: int,
            alive: Callable[[], bool] | None = None) -> FlowJob:  # fmt: skip
    """The session's job for ``key`` (``job_key``), started; a job for another key is stopped
    and replaced (one training per session at a time). ``alive``: see ``FlowJob``."""
    held = store.get(JOB_KEY)
    if held is not None and held[0] == key:
        job = held[1]
    else:
        if held is not None:
            held[1].stop(wait=False)
        job = FlowJob(target, steps, seed, alive=alive)
        store[JOB_KEY] = (key, job)
    if not job.stopped:
        job.start()
    return job


def current_job(store: MutableMapping) -> FlowJob | None:
    held = store.get(JOB_KEY)
    return None if held is None else held[1]


def target_key(target: Target) -> tuple:
    """What identifies a target for its training: its size and ``log p~`` at a few seeded
    states (a new posterior, even from the same settings refitted, gets a new training)."""
    generator = torch.Generator().manual_seed(12345)
    x = torch.randint(0, 2, (8, target.n_sites), generator=generator).double() * 2 - 1
    with torch.no_grad():
        log_p = target.log_prob(x.view(8, *target.shape)).double().cpu().numpy()
    return (type(target).__name__, target.n_sites, log_p.round(10).tobytes())
