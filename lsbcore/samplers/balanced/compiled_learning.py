"""The batched locally balanced sampler's learning steps on a compiled learning kernel: the loop
that cuts a call into chunks, and what passes between the sampler and a kernel.

A chunk ends where the torch loop would restart chains (the paper's Q1) or resync, and its
uniforms fit in ``COMPILED_UNIFORMS``; the optimiser's state passes between the kernels and
``torch.optim`` when the backend changes (``kernel_optimizer_state``); the parameters, the
history's rows and a divergence come back as the torch step leaves them (``_guard``,
``_pending``). Each target's mixin (``rbm_steps``, ``factor_graph_steps``) says whether its
kernels learn (``learns_compiled``) and runs a chunk (``_kernel_learning``).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from lsbcore.backends.learned_function import HISTORY_COLUMNS
from lsbcore.backends.structures import KIND_MIXTURE, KIND_MONOTONE, KIND_NETWORK, Learner
from lsbcore.balancing.functions import MixtureBalancing, NetworkBalancing
from lsbcore.balancing.monotone import MonotoneBalancing
from lsbcore.samplers.balanced.backends import kernel_optimizer_state
from lsbcore.samplers.batched import COMPILED_UNIFORMS
from lsbcore.samplers.chain_base import StepInfo


class CompiledLearning:
    """A mixin of ``BatchedBalancedSampler``: learning steps on a compiled kernel where one
    serves (see the module docstring)."""

    def learns_compiled(self) -> bool:
        """Whether ``step(learn=True)`` runs a compiled learning kernel (the target's mixin
        says; none here)."""
        return False

    def _learns_on_kernels(self, monotone: bool = False) -> bool:
        """LSB 1 or LSB 2 (and LSB 2' where ``monotone``: kept monotone by projection; the
        authors' penalty draws from the generator and learns on torch steps) on the compiled
        backend, or on ``"auto"`` where the frozen kernels run: what every target's learning
        kernels ask first."""
        b = self.balancing
        projected = isinstance(b, MonotoneBalancing) and (
            b.monotonicity == "projection" or b.penalty == 0
        )
        if not (isinstance(b, (MixtureBalancing, NetworkBalancing)) or (monotone and projected)):
            return False
        return self.backend == "compiled" or (
            self._backend_asked == "auto" and self.compiled_refusal() is None
        )

    def step(self, n: int = 1, learn: bool = False, trace: torch.Tensor | None = None) -> None:
        if not (learn and self.learns_compiled()):
            return super().step(n, learn=learn, trace=trace)
        n = self._check_step(n, learn, trace)
        self._learning_calls = getattr(self, "_learning_calls", 0) + 1  # the function changes
        start = time.perf_counter()
        most = max(1, COMPILED_UNIFORMS // (3 * self.n_chains))
        done = 0
        while done < n and not self.learning_failed:
            part = None if trace is None else trace[done:]
            if self._restart_wait <= 0:  # the paper's Q1, as the torch step restarts
                with torch.no_grad():
                    self._restart_some_chains()
                self._restart_wait = self._draw_restart_wait() + 1
            chunk = int(
                min(n - done, self._restart_wait, self.resync_every - self._since_resync, most)
            )
            self._kernel_learning(chunk, None if part is None else part[:chunk])
            self._restart_wait -= chunk
            self._count_step(chunk)
            self.n_target_evals += chunk * self.evals_per_step  # x~ was scored too
            done += chunk
        self._finish_step(start)
        if done < n:  # learning stopped in an earlier call: frozen steps, as the torch loop
            super().step(n - done, learn=True, trace=None if trace is None else trace[done:])

    def _kernel_learning(self, steps: int, trace) -> None:
        """``steps`` learning steps on the target's kernel (the target's mixin)."""
        raise NotImplementedError

    def _kernel_learner(self, steps: int, log_p: torch.Tensor):
        """What a learning kernel of ``steps`` steps takes besides the chains: ``(kind, hidden,
        learner, params, history, last, failed)``, the parameters' vector a copy the kernel
        updates in place (``Learner``: the parameters, the optimiser's state, ``log_p`` the
        chains' copy)."""
        params = self._parameter_vector().clone()
        learner = Learner(
            params.numpy(),
            kernel_optimizer_state(self).numpy(),
            0 if self.optimizer_name == "adam" else 1,
            self.lr,
            log_p.numpy(),
            np.zeros((0, self.n_sites)),
        )
        b = self.balancing
        mixture = isinstance(b, MixtureBalancing)
        if isinstance(b, MonotoneBalancing):  # the kernels' hidden: the units of a group
            kind, hidden = KIND_MONOTONE, b.units
        else:
            kind, hidden = (KIND_MIXTURE, 0) if mixture else (KIND_NETWORK, b.hidden)
        rows = HISTORY_COLUMNS["mixture" if mixture else "network"]
        history = np.zeros((steps, rows))
        last = torch.empty(3, self.n_chains, dtype=torch.float64)
        failed = np.array([1.0 if bool(self._failed) else 0.0])
        return kind, hidden, learner, params, history, last, failed

    def _after_kernel_learning(self, params, history, last, failed) -> None:
        """The parameters, the last step, a divergence and the history's rows back as the torch
        step leaves them, after ``len(history)`` kernel steps."""
        torch.nn.utils.vector_to_parameters(params, self._learned_params())
        self._last_good = params.clone()
        self._failed = self._failed | bool(failed[0])
        self._stale = True  # g changed everywhere: log g and log Z are rebuilt where next read
        self._last = StepInfo(site=last[0].long(), accept_prob=last[1], accepted=last[2] > 0)
        rows = torch.from_numpy(history)
        for t in range(history.shape[0]):
            if self.history.wants(self.n_steps + t):
                self._pending.append((self.n_steps + t, rows[t]))
