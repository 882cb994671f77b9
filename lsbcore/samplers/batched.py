"""Samplers on any target: ``B`` chains advanced by batched torch operations.

``BatchedSampler`` asks its target only through the protocol (``lsbcore.targets.base``), so it
samples an RBM, a factor graph or a pairwise network alike, on any device, and reads nothing on
the host inside a chunk of steps. The compiled and device kernels (``samplers.base.Sampler``)
serve pairwise targets only; the registry sends every other target here. On an ``RBM`` on the
CPU, ``gwg``, ``gibbs``, ``metropolis``, ``block-gibbs``, ``hamming-ball`` and the locally
balanced samplers (frozen; ``balanced.rbm_steps``) also have compiled steps
(``lsbcore.backends.rbm_kernels``, backend ``"compiled"``, the one ``"auto"`` picks there):
``_compiled_steps`` runs a chunk of steps in one call, from uniforms of the same
generator. They give the torch steps' chains, except the block samplers on random blocks, which
pick blocks from other uniforms and give the torch steps' law. On a ``FactorGraph`` on the CPU,
``gibbs``, ``metropolis`` (``lsbcore.backends.factor_kernels``) and the locally balanced
samplers with a fixed balancing function (``balanced.factor_graph_steps``) have compiled steps
too, with the torch steps' chains. The kernels write a step trace as the torch loop does (a
``Comparison`` recording every step runs them compiled too).

Cached per chain: ``x [B, n]`` (+-1), ``log p~(x)`` ``[B]`` and, for samplers that read them
(``uses_ratios``), the flip log-ratios ``s [B, n]`` with the target's ``ratio_cache``. Moves go
through ``_move``, which keeps all three; ``resync()`` recomputes them exactly every
``resync_every`` steps.

Evaluations (``n_target_evals``, per chain; ``docs/method.md``): one evaluation is ``log p~``
(or a log-ratio to the current state) at one state, or one gradient of ``log p~``. Each sampler
says what one of its steps costs in ``evals_per_step``.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from lsbcore.samplers.base import resolve_device
from lsbcore.samplers.chain_base import ChainBase
from lsbcore.targets.base import Target

#: Backends a batched sampler accepts: torch operations on the chosen device, or, where the
#: sampler has one for its target (``compiled_refusal``), compiled CPU loops; ``"auto"`` picks
#: the compiled loops where they serve.
BATCHED_BACKENDS = ("auto", "torch", "compiled")
#: Uniforms drawn at once for a chunk of compiled steps (2^20 float64: 8 MiB).
COMPILED_UNIFORMS = 1 << 20


class BatchedSampler(ChainBase):
    """Base class of the samplers that run on any ``Target`` (see the module docstring); its
    checks, counters and last step (``StepInfo``) are ``ChainBase``'s.

    Subclasses set ``name``, ``needs`` (capabilities the target must provide),
    ``sites_per_step``, ``evals_per_step`` and ``uses_ratios``, and define ``_step()``.
    """

    needs: frozenset[str] = frozenset()
    uses_ratios = True  # whether the step reads the cached flip log-ratios

    def __init__(
        self,
        target: Target,
        n_chains: int,
        seed: int = 0,
        device=None,
        x0=None,
        resync_every: int | None = None,
        backend: str = "auto",
    ):
        if not isinstance(target, Target):
            raise ValueError(f"target must be an lsbcore Target, got {type(target).__name__}.")
        missing = sorted(set(self.needs) - set(target.provides))
        if missing:
            raise ValueError(refusal(self.name, target, missing))
        self._init_chains(target, n_chains, seed, resync_every)
        self.device = resolve_device(device)
        self._backend_asked = backend
        self.backend = self._check_backend(backend)
        self.generator = torch.Generator(device=self.device).manual_seed(self.seed)
        self._chains = torch.arange(self.n_chains, device=self.device)
        if x0 is None:
            x = target.start(self.n_chains, self.generator)
        else:
            x = self._check_start(x0)
        self._x = x.to(self.device, torch.float64).reshape(self.n_chains, self.n_sites).clone()
        self._n_accepted = torch.zeros(self.n_chains, dtype=torch.int64, device=self.device)
        self._s = self._cache = None
        self.resync()
        if not bool(torch.isfinite(self._log_p).all()):
            raise ValueError(
                f"a starting state has probability zero under {target.describe()}; start the "
                "chains where p~(x) > 0 (x0=None lets the target find such states)."
            )

    # ----------------------------------------------------------------- checks
    def _check_backend(self, backend: str) -> str:
        if backend == "torch":
            return "torch"
        if backend in ("auto", "compiled"):
            why = self.compiled_refusal()
            if why is None:
                return "compiled"
            if backend == "auto":
                return "torch"
            raise ValueError(why)
        if backend == "device":
            raise ValueError(
                f"the {self.name!r} sampler runs on batched torch operations on any device; the "
                "device backend serves the pairwise samplers only. Use backend='torch'."
            )
        raise ValueError(f"backend must be one of {BATCHED_BACKENDS}, got {backend!r}.")

    def compiled_refusal(self) -> str | None:
        """None where this sampler has compiled steps for its target and device, else the
        sentence that says why not (subclasses with compiled steps override it)."""
        return (
            f"the {self.name!r} sampler runs on batched torch operations on any device; the "
            "compiled backend serves the pairwise samplers only (and, on the CPU, block-gibbs "
            "and hamming-ball on pairwise targets; gwg, gibbs, metropolis, block-gibbs, "
            "hamming-ball and the locally balanced samplers on an RBM; gibbs, metropolis and the "
            "fixed balancing functions barker, sqrt, min and max on a factor graph). Use "
            "backend='torch'."
        )

    def set_backend(self, backend: str) -> None:
        self._backend_asked = backend
        self.backend = self._check_backend(backend)

    # ----------------------------------------------------------------- state
    @property
    def x(self) -> torch.Tensor:
        """Current states ``[B, *target.shape]`` of +-1 (a view: copy it before keeping it)."""
        return self._x.view(self.n_chains, *self.target.shape)

    @property
    def log_p(self) -> torch.Tensor:
        """``log p~(x)`` of the current states, ``[B]`` (kept with every move)."""
        return self._log_p

    @property
    def log_ratios(self) -> torch.Tensor:
        """The flip log-ratios ``s`` of the current states ``[B, *target.shape]``."""
        if self._s is None:
            return self.target.flip_log_ratios(self.x)
        return self._s.view(self.n_chains, *self.target.shape)

    def resync(self) -> None:
        """Recompute ``log p~``, and ``s`` with the target's cache where used, from ``x``."""
        with torch.no_grad():
            self._log_p = self.target.log_prob(self._x)
            self.n_target_evals += 1
            if self.uses_ratios:
                self._cache = self.target.ratio_cache(self._x)
                self._s = self.target.flip_log_ratios(self._x)
                self.n_target_evals += self.n_sites
        self._since_resync = 0
        self._after_resync()

    def _after_resync(self) -> None:
        """Subclasses rebuild what they derive from ``s``."""

    def set_state(self, x) -> None:
        """Put the chains at ``x`` and recompute every cache exactly."""
        self._x = self._check_start(x).to(self.device).clone()
        self.resync()

    def set_target(self, target: Target) -> None:
        """Go on sampling ``target`` (one the current target calls ``same_graph``)."""
        if not self.target.same_graph(target):
            raise ValueError(
                "set_target needs a target on the same sites and graph; got "
                f"{target.describe() if isinstance(target, Target) else type(target).__name__}."
            )
        self.target = target
        self.backend = self._check_backend(self._backend_asked)
        self.resync()

    # ----------------------------------------------------------------- moves
    def _move(self, x_new: torch.Tensor, accept: torch.Tensor, log_ratio: torch.Tensor) -> None:
        """Chains where ``accept`` (``[B]`` bool) go to ``x_new`` (``[B, n]``), whose
        ``log p~`` is ``log_ratio`` (``[B]``) above the current one; the rest stay."""
        x_old = self._x
        x = torch.where(accept.unsqueeze(1), x_new, x_old)
        self._n_accepted += (x != x_old).sum(1)
        self._log_p = self._log_p + torch.where(accept, log_ratio, 0.0)
        if self.uses_ratios:
            self._s, self._cache = self.target.flip_log_ratios_after(x_old, x, self._s, self._cache)
        self._x = x

    def _flip_sites(self, i: torch.Tensor) -> torch.Tensor:
        """The current states with site ``i[b]`` of chain ``b`` flipped, ``[B, n]``."""
        x_new = self._x.clone()
        x_new[self._chains, i] = -x_new[self._chains, i]
        return x_new

    # ----------------------------------------------------------------- the step loop
    @property
    def evals_per_step(self) -> int:
        """Target evaluations per chain per step (the rule: the module docstring)."""
        return self.n_sites

    def step(self, n: int = 1, learn: bool = False, trace: torch.Tensor | None = None) -> None:
        """Advance every chain ``n`` steps (``learn=True`` only for learnable samplers).

        ``trace`` (optional, ``[n, B, 5]`` float64 on the CPU, after ``track_statistics``)
        receives after every step ``statistics``, the number of sites that changed and the
        proposed site (-1 for a move of many sites).
        """
        n = self._check_step(n, learn, trace)
        start = time.perf_counter()
        if self.backend == "compiled" and not learn:
            self._run_compiled(n, trace)
            n = 0
        for t in range(n):
            before = self._x if trace is not None else None
            if learn:
                self._learn_step()
            else:
                with torch.no_grad():
                    self._step()
            self._count_step()
            if trace is not None:
                self._fill_trace(trace, t, before)
        self._finish_step(start)

    def _step(self) -> None:
        """One step of every chain."""
        raise NotImplementedError

    def _run_compiled(self, n: int, trace: torch.Tensor | None = None) -> None:
        """``n`` steps by ``_compiled_steps`` in chunks that end where a resync is due (as the
        torch loop resyncs) and whose uniforms fit in ``COMPILED_UNIFORMS``; the kernels write
        ``trace``'s rows as the torch loop's ``_fill_trace`` does."""
        most = max(1, COMPILED_UNIFORMS // (self.n_chains * self.compiled_uniforms_per_step))
        done = 0
        while done < n:
            chunk = min(n - done, self.resync_every - self._since_resync, most)
            part = None if trace is None else trace[done : done + chunk]
            self._compiled_steps(chunk, *self._kernel_trace(part))
            self._count_step(chunk)
            done += chunk

    #: Uniforms one compiled step draws per chain (subclasses with compiled steps set it).
    compiled_uniforms_per_step = 1

    def _compiled_steps(self, n: int, trace: np.ndarray, truth: np.ndarray) -> None:
        """``n`` steps of every chain by compiled loops (where ``compiled_refusal`` is None),
        each step's row written into ``trace [n, B, 5]`` (length 0: none) with ``truth [n]``
        for the overlap (``_kernel_trace``)."""
        raise NotImplementedError

    def _kernel_trace(self, trace: torch.Tensor | None) -> tuple[np.ndarray, np.ndarray]:
        """``trace`` and the truth as a kernel writes them (numpy views; an empty trace when
        none is asked)."""
        if trace is None:
            return np.zeros((0, self.n_chains, 5)), np.zeros(self.n_sites)
        return trace.numpy(), self._truth_values[: self.n_sites].cpu().numpy()

    def _learn_step(self) -> None:
        raise NotImplementedError

    # ----------------------------------------------------------------- statistics
    # n_accepted, accept_rate, sweeps, steps_to_resync and track_statistics: ChainBase's
    @property
    def statistics(self) -> torch.Tensor:
        """``[B, 3]`` per chain: ``log p~(x)``, ``sum_i x_i`` and ``x . truth``."""
        if not self._tracking:
            raise ValueError("call track_statistics() first.")
        x = self._x
        return torch.stack([self._log_p, x.sum(1), x @ self._truth_values], 1)

    def _fill_trace(self, trace: torch.Tensor, t: int, before: torch.Tensor) -> None:
        trace[t, :, :3] = self.statistics.cpu()
        trace[t, :, 3] = (self._x != before).sum(1).cpu().to(torch.float64)
        info = self.step_info
        site = None if info is None else info.site
        trace[t, :, 4] = -1.0 if site is None else site.view(-1).cpu().to(torch.float64)

    def invariant_error(self) -> float:
        """Largest relative gap between the cached ``log p~`` (and ``s``) and a recompute."""
        with torch.no_grad():
            errors = [_relative_gap(self._log_p, self.target.log_prob(self._x))]
            if self.uses_ratios:
                errors.append(_relative_gap(self._s, self.target.flip_log_ratios(self._x)))
        return max(errors)


def refusal(sampler: str, target: Target, missing) -> str:
    """The sentence that refuses a sampler/target pair (also the registry's)."""
    what = {
        "pairwise": "a pairwise model (its flip tables)",
        "incremental": "incremental flip log-ratios",
        "gradient": "a differentiable log p~ (a gradient)",
        "tempering": "tempered copies p~^beta",
    }
    needed = " and ".join(what.get(m, m) for m in missing)
    return f"the {sampler!r} sampler needs {needed}, which {target.describe()} does not provide."


def rbm_compiled_refusal(sampler: BatchedSampler, block: int = 1) -> str | None:
    """None where ``lsbcore.backends.rbm_kernels`` can run ``sampler`` (its target an ``RBM``,
    on the CPU, numba installed, moves of ``block`` sites whose shifts stay finite), else why
    not, in a sentence."""
    from lsbcore.backends import compiled_available
    from lsbcore.targets.rbm import RBM

    if not isinstance(sampler.target, RBM):
        return BatchedSampler.compiled_refusal(sampler)
    if sampler.device.type != "cpu":
        return "the compiled backend runs on the CPU only; use backend='torch' on a GPU."
    if not compiled_available():
        return "the compiled backend needs numba; install it or use backend='torch'."
    from lsbcore.backends.rbm_kernels import MAX_SHIFT

    if block * sampler.target.max_abs_weight > MAX_SHIFT:
        return (
            f"the compiled RBM steps need block size times the largest |W| to be at most "
            f"{MAX_SHIFT:g}, got {block * sampler.target.max_abs_weight:g}; use backend='torch'."
        )
    return None


def factor_graph_compiled_refusal(sampler: BatchedSampler) -> str | None:
    """None where ``lsbcore.backends.factor_kernels`` can run ``sampler`` (its target a
    ``FactorGraph``, on the CPU, numba installed), else why not, in a sentence."""
    from lsbcore.backends import compiled_available
    from lsbcore.targets.factor_graph import FactorGraph

    if not isinstance(sampler.target, FactorGraph):
        return BatchedSampler.compiled_refusal(sampler)
    if sampler.device.type != "cpu":
        return "the compiled backend runs on the CPU only; use backend='torch' on a GPU."
    if not compiled_available():
        return "the compiled backend needs numba; install it or use backend='torch'."
    return None


def _relative_gap(cached: torch.Tensor, exact: torch.Tensor) -> float:
    finite = torch.isfinite(exact)
    if not bool((finite == torch.isfinite(cached)).all()):
        return float("inf")
    if not bool(finite.any()):
        return 0.0
    gap = (cached[finite] - exact[finite]).abs().max()
    return float(gap / exact[finite].abs().max().clamp(min=1.0))
