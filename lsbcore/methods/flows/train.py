"""Training the flow-augmented model on a target: seeded, stoppable, resumable.

``FlowTraining`` holds the model, its Adam optimiser (the paper's: learning rate 1e-3, batches
of 128), the generator of its draws and the history of the objective. ``run(n)`` takes up to
``n`` steps and returns early when ``should_stop()`` says so; calling it again goes on where it
stopped, and ``state()`` / ``FlowTraining.resume(target, state)`` carry a training across
processes: the same seed gives the same weights whether it ran in one go or in pieces.

A step whose loss or gradient is not finite is not taken: training stops with
``FlowTrainingFailed``, whose sentence says at which step and what to try, and the model keeps
its last finite weights, so the samplers built on it still run.
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from lsbcore.checks import integer, real
from lsbcore.methods.flows.model import FlowModel
from lsbcore.methods.flows.objective import ESTIMATORS, flow_loss
from lsbcore.targets.base import Target

#: The paper's training settings (section 5): Adam, learning rate 1e-3, batches of 128.
LEARNING_RATE = 1e-3
BATCH = 128
MAX_STEPS = 100_000
MAX_BATCH = 4096


class FlowTrainingFailed(RuntimeError):
    """Training met a non-finite loss or gradient; the model keeps its last finite weights."""


@dataclass(frozen=True)
class TrainingSettings:
    """How a flow is trained: Adam's ``lr``, ``batch`` draws per step, the gradient
    ``estimator`` (``lsbcore.methods.flows.objective``), the model's shape and the seed of
    everything."""

    lr: float = LEARNING_RATE
    batch: int = BATCH
    estimator: str = "score"
    transforms: int = 4
    hidden: int = 64
    seed: int = 0

    def __post_init__(self):
        real(self.lr, "lr", 1e-7, 1.0)
        integer(self.batch, "batch", 2, MAX_BATCH)
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {ESTIMATORS}, got {self.estimator!r}.")
        integer(self.seed, "seed", 0, 2**63 - 1)


class FlowTraining:
    """A training of a ``FlowModel`` on ``target`` (module docstring).

    ``history`` holds one ``(step, loss, seconds)`` per step taken, ``loss`` the estimate of
    ``E[log r(v) - log q(v)]`` (``-loss`` is a lower bound on ``log Z``).
    """

    def __init__(self, target: Target, settings: TrainingSettings | None = None, device=None,
                 dtype: torch.dtype = torch.float32):  # fmt: skip
        if not isinstance(target, Target):
            raise ValueError(f"target must be an lsbcore Target, got {type(target).__name__}.")
        if target.batch != 1:
            raise ValueError("a flow is trained on one target, not on one per chain.")
        if target.n_sites < 2:
            raise ValueError("a flow needs a target of at least 2 sites.")
        self.target = target
        self.settings = settings or TrainingSettings()
        s = self.settings
        device = torch.device("cpu") if device is None else torch.device(device)
        self.model = FlowModel(target.n_sites, s.transforms, s.hidden, s.seed).to(device, dtype)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=s.lr)
        self.generator = torch.Generator(device=device).manual_seed(s.seed)
        self.history: list[tuple[int, float, float]] = []
        self.steps = 0
        self.seconds = 0.0
        self.failed: str | None = None

    def _log_prob(self, x: torch.Tensor) -> torch.Tensor:
        return self.target.log_prob(x.to(torch.float64))

    def run(self, n_steps: int, should_stop: Callable[[], bool] | None = None,
            on_step: Callable[[FlowTraining], None] | None = None) -> int:  # fmt: skip
        """Take up to ``n_steps`` steps; return how many were taken (fewer when
        ``should_stop()`` turned true). Raises ``FlowTrainingFailed`` on a non-finite step."""
        n_steps = integer(n_steps, "n_steps", 0, MAX_STEPS)
        if self.failed is not None:
            raise FlowTrainingFailed(self.failed)
        self.model.train()
        taken = 0
        for _ in range(n_steps):
            if should_stop is not None and should_stop():
                break
            start = time.perf_counter()
            loss, surrogate = flow_loss(self.model, self._log_prob, self.settings.batch,
                                        self.generator, self.settings.estimator)  # fmt: skip
            self.optimizer.zero_grad(set_to_none=True)
            finite = math.isfinite(float(loss))
            if finite:
                surrogate.backward()
                finite = all(bool(torch.isfinite(p.grad).all()) for p in self.model.parameters()
                             if p.grad is not None)  # fmt: skip
            if not finite:
                self.failed = (
                    f"flow training stopped at step {self.steps + 1}: the objective or its "
                    "gradient became NaN or infinite. The flow keeps the weights of step "
                    f"{self.steps}; try a smaller learning rate (now {self.settings.lr:g}) or "
                    "the pathwise estimator. The other samplers are not affected."
                )
                self.optimizer.zero_grad(set_to_none=True)
                raise FlowTrainingFailed(self.failed)
            self.optimizer.step()
            self.steps += 1
            taken += 1
            self.seconds += time.perf_counter() - start
            self.history.append((self.steps, float(loss), self.seconds))
            if on_step is not None:
                on_step(self)
        self.model.eval()
        return taken

    @property
    def elbo(self) -> float:
        """The last step's lower bound on ``log Z`` (``-loss``); NaN before the first step."""
        return -self.history[-1][1] if self.history else float("nan")

    # ----------------------------------------------------------------- stop and resume
    def state(self) -> bytes:
        """Everything needed to go on later, as bytes: weights, optimiser, generator, history."""
        buffer = io.BytesIO()
        s = self.settings
        torch.save({
            "settings": dict(lr=s.lr, batch=s.batch, estimator=s.estimator,
                             transforms=s.transforms, hidden=s.hidden, seed=s.seed),
            "model": {k: v.detach().cpu() for k, v in self.model.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            "generator": self.generator.get_state(),
            "history": self.history, "steps": self.steps, "seconds": self.seconds,
            "n_sites": self.target.n_sites, "dtype": str(self.model.dtype),
        }, buffer)  # fmt: skip
        return buffer.getvalue()

    @classmethod
    def resume(cls, target: Target, state: bytes, device=None) -> FlowTraining:
        """The training that ``state()`` saved, on ``target`` (the same number of sites)."""
        try:
            saved = torch.load(io.BytesIO(bytes(state)), weights_only=True, map_location="cpu")
            settings = TrainingSettings(**saved["settings"])
            n_sites = int(saved["n_sites"])
            dtype = getattr(torch, str(saved["dtype"]).removeprefix("torch."))
        except Exception as err:  # a malformed file: one sentence
            raise ValueError(f"not a saved flow training ({type(err).__name__}).") from err
        if n_sites != target.n_sites:
            raise ValueError(
                f"the saved training is for {n_sites} sites; this target has {target.n_sites}."
            )
        training = cls(target, settings, device=device, dtype=dtype)
        training.model.load_state_dict(saved["model"])
        training.optimizer.load_state_dict(saved["optimizer"])
        training.generator.set_state(saved["generator"])
        training.history = [tuple(h) for h in saved["history"]]
        training.steps, training.seconds = int(saved["steps"]), float(saved["seconds"])
        return training


def trained_flow(target: Target, steps: int, seed: int = 0, device=None,
                 dtype: torch.dtype = torch.float32, **settings) -> FlowModel:  # fmt: skip
    """A flow trained ``steps`` steps on ``target`` (0: the seeded untrained flow)."""
    training = FlowTraining(target, TrainingSettings(seed=seed, **settings), device, dtype)
    training.run(steps)
    return training.model.requires_grad_(False)
