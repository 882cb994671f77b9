"""What every sampler shares: target, device, backend, seeded generator, start, cached log-ratios.

A sampler advances ``B`` chains together as one batch on any ``lsbcore.targets.Target``. Its
state caches, per chain:

- ``x [B, D]``: the current state (+-1), the target's ``D`` sites flattened (row-major for a
  lattice);
- ``s [B, D]``: the flip log-ratios ``s_i(x)`` (float64), so a step never re-evaluates the target
  beyond the flipped site's neighbourhood;

Both carry one spare column past the last site: a rejected flip is written there instead of
being masked, which saves work on the hot path.

A step may move one site (the locally balanced and uniform-site samplers) or many (block Gibbs):
``sites_per_step`` says how many sites a step updates per chain, and ``n_site_updates`` counts
them, so progress can be read in sweeps (one update per site on average).

Invariant: ``s[:, :D] == target.flip_log_ratios(x)``. Updates are incremental (O(1) per step);
``resync()`` recomputes ``s`` exactly every ``resync_every`` steps so rounding drift stays far
below 1e-9 relative.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from lsbcore.backends import resolve_backend, resolve_device
from lsbcore.backends.structures import Chains, Tables
from lsbcore.samplers.chain_base import ChainBase, StepInfo
from lsbcore.targets.pairwise_target import PairwiseTarget


def uniform_start(shape: tuple[int, ...], n_chains: int, seed: int = 0) -> torch.Tensor:
    """One uniform random state per chain, ``[n_chains, *shape]`` of +-1, from a seeded
    generator (``shape``: the target's layout, ``(H, W)`` for a lattice)."""
    generator = torch.Generator().manual_seed(int(seed))
    bits = torch.randint(0, 2, (n_chains, *shape), generator=generator)
    return (2 * bits - 1).to(torch.float64)


class Sampler(ChainBase):
    """Base class: ``B`` chains advanced together, on a ``PairwiseTarget``, with a chosen backend.

    The pairwise fast path: the specialisation of ``ChainBase`` (checks, counters, last step)
    that caches the flip log-ratios and runs on the compiled and device kernels.

    Its samplers offer ``interface.ChainSampler``; the single-site ones ``SingleSiteSampler``.

    Args:
        backend: ``"auto"`` (compiled loops on the CPU when numba is there, else torch),
            ``"compiled"``, ``"torch"`` or ``"device"`` (Triton kernels on CUDA, explicit
            only); see ``lsbcore.backends``.

    Attributes:
        n_steps: steps taken (each advances all chains once).
        n_site_updates: sites updated per chain so far, proposed moves included
            (``sites_per_step`` per step); ``sweeps`` is this over the number of sites.
        n_target_evals: single-site log-ratio evaluations *per chain*. One evaluation is one
            ``s_i(x) = log p~(x with i flipped) - log p~(x)``. A step evaluates the flipped
            site's neighbourhood (site plus lattice neighbours: ``neighbourhood_size``, 5 on a
            4-neighbour lattice); an exact resync evaluates all ``H * W`` sites; a learning
            step also evaluates the neighbourhood of a uniformly flipped site.
    """

    batch_names = ("alpha images", "image")
    flat_starts = False

    def __init__(
        self,
        target: PairwiseTarget,
        n_chains: int,
        seed: int = 0,
        device=None,
        x0=None,
        resync_every: int | None = None,
        backend: str = "auto",
    ):
        if not isinstance(target, PairwiseTarget):
            raise ValueError(
                "target must be an lsbcore target (IsingPosterior, PairwiseMRF), "
                f"got {type(target).__name__}."
            )
        self._init_chains(target, n_chains, seed, resync_every)
        n_chains, seed = self.n_chains, self.seed
        self.device = resolve_device(device)
        self.backend = resolve_backend(backend, self.device)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)

        if x0 is None:
            x0 = uniform_start(target.shape, n_chains, seed)
        x = self._check_start(x0)
        self._x = torch.ones(
            n_chains, self._padded_width(), dtype=torch.float64, device=self.device
        )
        self._x[:, : self.n_sites] = x.to(self.device)
        self._site_values = self._value_table(target)  # [D, 3, K]
        self._site_index = self._index_table(target.neighbourhood).to(self.device).contiguous()
        self.neighbourhood_size = int(target.neighbourhood.shape[1])
        # x and s get spare columns: writes of rejected flips are sent to the last, not masked
        self._width = self._padded_width()
        self._dummy = torch.tensor([[self._width - 1]], device=self.device)
        self._chains = torch.arange(n_chains, device=self.device)
        self._tables = None  # the kernels' view of the flip tables, built on first use
        # what the last step proposed: references only, described when read (see step_info)
        self._last_refs: tuple[torch.Tensor, ...] | None = None
        self._n_accepted = torch.zeros(n_chains, 1, dtype=torch.int64, device=self.device)
        self.resync()

    def _value_table(self, target: PairwiseTarget) -> torch.Tensor:
        """Per-site values, packed so one lookup per step fetches them: slot k of site i holds
        (sign, coupling, unique): the sign applied to its x and s on a flip (-1 for the site
        itself), the target's coupling, and whether the slot counts in sums over changed sites
        (slots repeating the site are padding)."""
        is_self = target.neighbourhood == torch.arange(target.n_sites).unsqueeze(1)
        unique = (~is_self).double()
        unique[:, 0] = 1.0
        values = torch.stack([1.0 - 2.0 * is_self.double(), target.coupling, unique], 1)
        return values.to(self.device).contiguous()

    # ----------------------------------------------------------------- replacing state or target
    def set_state(self, x) -> None:
        """Put the chains at ``x`` (``[B, *shape]`` or ``[*shape]`` of +-1) and recompute the
        cached log-ratios exactly: what a replica exchange or a restart from outside needs."""
        x = self._check_start(x)
        self._x[:, : self.n_sites] = x.to(self.device)
        self._replaced()

    def set_target(self, target: PairwiseTarget) -> None:
        """Sample ``target`` from the current states on: another target on the same graph (a
        tempered or annealed copy, ``target.tempered(beta)``), its weights and field free.
        The chains keep their states; the cached log-ratios are recomputed exactly."""
        if not self.target.same_graph(target):
            raise ValueError(
                "set_target needs a target on the same graph (the same sites and neighbours); "
                f"got {type(target).__name__} with shape {getattr(target, 'shape', '?')}."
            )
        if target.batch not in (1, self.n_chains):
            raise ValueError(
                f"the target holds {target.batch} fields but the sampler has {self.n_chains} "
                "chains; give one field or one per chain."
            )
        self.target = target
        self._site_values = self._value_table(target)
        self._tables = None  # the kernels' view of the tables is rebuilt on next use
        self._replaced()

    def _replaced(self) -> None:
        """After ``x`` or the target changed from outside: every cache is rebuilt from them."""
        self.resync()

    # ----------------------------------------------------------------- state
    @property
    def x(self) -> torch.Tensor:
        """Current states ``[B, *target.shape]`` of +-1 (a view: copy it before keeping it)."""
        return self._x[:, : self.n_sites].view(self.n_chains, *self.target.shape)

    @property
    def log_ratios(self) -> torch.Tensor:
        """The cached flip log-ratios ``s`` of the current states ``[B, *target.shape]`` (a
        view: copy it before keeping it)."""
        return self._s[:, : self.n_sites].view(self.n_chains, *self.target.shape)

    @property
    def log_p(self) -> torch.Tensor:
        """``log p~(x)`` of the current states, ``[B]``: from the cached log-ratios, O(HW)."""
        with torch.no_grad():
            d = self.n_sites
            return self.target.log_prob_from_ratios(self._x[:, :d], self._s[:, :d])

    def set_backend(self, backend: str) -> None:
        """Run the next steps on ``backend`` (one of ``BACKENDS``). All backends draw and read
        the uniforms alike, so a switch between calls leaves the chains exactly as they would
        have been."""
        self.backend = resolve_backend(backend, self.device)

    def resync(self) -> None:
        """Recompute the cached ``s`` and ``log p~`` exactly from ``x`` (restores the invariant)."""
        s = torch.zeros(self.n_chains, self._width, dtype=torch.float64, device=self.device)
        s[:, : self.n_sites] = self.target.flip_log_ratios(self.x).reshape(self.n_chains, -1)
        self._s = s
        self.n_target_evals += self.n_sites
        self._since_resync = 0
        self._epoch = getattr(self, "_epoch", 0) + 1  # s was recomputed: derived caches expire
        self._after_resync()
        self._stats_resync()

    # ----------------------------------------------------------------- running statistics
    # track_statistics (ChainBase) keeps them up to date on every step (a few small ops each)
    def _truth_width(self) -> int:
        return self._width  # the truth is padded like x, so a rejected write reads a 0

    @property
    def statistics(self) -> torch.Tensor:
        """``[B, 3]`` per chain: ``log p~(x)``, magnetisation ``sum_i x_i`` and ``x . truth``.

        Kept incrementally after ``track_statistics()`` (an accepted flip of site ``i`` adds
        ``s_i``, ``2 x_i'`` and ``2 x_i' truth_i``) and recomputed exactly at every resync.
        """
        if not self._tracking:
            raise ValueError("call track_statistics() first.")
        return self._stats

    @torch.no_grad()
    def _stats_resync(self) -> None:
        if not self._tracking:
            return
        x = self._x[:, : self.n_sites]
        overlap = x @ self._truth_values[: self.n_sites]
        self._stats = torch.stack([self.log_p, x.sum(1), overlap], 1)

    def _index_table(self, neighbourhood: torch.Tensor) -> torch.Tensor:
        """``[D, R, K]`` index rows looked up per step; row 0 is the neighbourhood."""
        return neighbourhood.unsqueeze(1)

    def _padded_width(self) -> int:
        """Columns of the per-site arrays: the sites, then at least one spare."""
        return self.n_sites + 1

    def _after_resync(self) -> None:
        """Subclasses rebuild what they derive from ``s``."""

    @property
    def step_info(self) -> StepInfo | None:
        """The last step per chain: ``site`` (flat index ``row * W + col``) ``[B]``, its
        ``accept_prob`` ``[B]`` and whether it was ``accepted`` ``[B]``; None before any step.
        Built here from the references the step kept, so a step computes nothing for it."""
        refs = self._last_refs
        return None if refs is None else self._describe_last(*refs)

    def _describe_last(self, *refs: torch.Tensor) -> StepInfo:
        """The ``StepInfo`` of the references a step kept in ``_last_refs``."""
        raise NotImplementedError

    # ----------------------------------------------------------------- the step loop
    def _draw_uniforms(self, m: int, width: int) -> torch.Tensor:
        """``[m, B, width]`` uniforms for ``m`` steps, below ``BELOW_ONE``, from the generator.

        Every backend draws exactly these per chunk and read ``u[t, b, k]`` with the same
        meaning, so one seed gives the same chains on either.
        """
        return self._uniforms(m, self.n_chains, width)

    def step(self, n: int = 1, learn: bool = False, trace: torch.Tensor | None = None) -> None:
        """Advance every chain ``n`` steps. ``learn=True`` is only for learnable samplers.

        ``trace`` (optional, ``[n, B, 5]`` float64 on the CPU, after ``track_statistics``)
        receives after every step ``statistics``, the number of sites that changed and the
        proposed site (-1 for a move of many sites) of every chain. Steps run in chunks that
        end at every resync, on this sampler's backend.
        """
        n = self._check_step(n, learn, trace)
        start = time.perf_counter()
        chunk_cap = max(1, (1 << 20) // (self.n_chains * self.uniforms_per_step))
        done = 0
        while done < n:
            m = min(n - done, self.resync_every - self._since_resync, chunk_cap)
            part = trace[done : done + m] if trace is not None else None
            # a learner whose learning stopped (diverged) takes frozen steps
            if learn and not getattr(self, "learning_failed", False):
                done += self._learning_chunk(m, part)  # may stop early: a restart, a failure
                continue
            u = self._draw_uniforms(m, self.uniforms_per_step)
            if self._uses_compiled(False):
                self._compiled_steps(m, u.numpy(), part)
                self._count_step(m)
            elif self._uses_device():
                self._device_steps(m, u, part)
                self._count_step(m)
            else:
                with torch.no_grad():
                    for t in range(m):
                        self._step(self._step_uniforms(u[t]))
                        self._count_step()
                        if part is not None:
                            self._fill_trace(part, t)
            done += m
        self._finish_step(start)

    def _learning_refusal(self) -> str:
        return (
            f"the {self.name!r} sampler has a fixed balancing function and cannot learn; "
            "call step(n) without learn=True, or use 'lsb1' / 'lsb2'."
        )

    uniforms_per_step = 3  # uniforms a frozen step draws per chain

    def _step_uniforms(self, u_t: torch.Tensor):
        """One step's uniforms ``[B, width]`` as ``_step`` reads them: columns ``[B, 1]``."""
        return u_t.split(1, dim=1)

    @property
    def evals_per_step(self) -> int:
        """Single-site log-ratio evaluations per chain per step (see ``n_target_evals``)."""
        return self.neighbourhood_size

    def _learning_chunk(self, m: int, trace) -> int:
        raise NotImplementedError

    def _fill_trace(self, trace: torch.Tensor, t: int) -> None:
        info = self.step_info
        trace[t, :, :3] = self._stats.cpu()
        trace[t, :, 3] = info.accepted.view(-1).cpu()
        trace[t, :, 4] = info.site.view(-1).cpu()

    # ----------------------------------------------------------------- the compiled path
    def _uses_compiled(self, learn: bool) -> bool:
        """Whether this step kind runs compiled: the backend says so and a kernel exists.
        numba compiles a kernel on its first call (or loads it from its on-disk cache);
        ``samplers.warmup`` compiles them all ahead of time."""
        return self.backend == "compiled" and self._has_kernel(learn)

    def _has_kernel(self, learn: bool = False) -> bool:
        return False

    def _uses_device(self) -> bool:
        """Whether frozen steps run the device kernels (``backends.device``): the backend says
        so and this sampler has one; otherwise the ``"device"`` backend runs the torch steps."""
        return self.backend == "device" and self._has_device_kernel()

    def _has_device_kernel(self) -> bool:
        return False

    def _device_steps(self, m: int, u: torch.Tensor, trace) -> None:
        raise NotImplementedError

    def _kernel_tables(self) -> Tables:
        """The target's flip tables as a kernel takes them (numpy views, built once)."""
        if self._tables is None:
            sign, coupling, unique = self._site_values.unbind(1)
            self._tables = Tables(
                self._site_index[:, 0].contiguous().numpy(),
                sign.contiguous().numpy(),
                coupling.contiguous().numpy(),
                unique.contiguous().numpy(),
            )
        return self._tables

    def _device_tables(self) -> dict[str, torch.Tensor]:
        """The target's flip tables as the device kernels take them (contiguous, on the
        device; built once per target)."""
        if getattr(self, "_device_tables_of", (None,))[0] is not self.target:
            sign, coupling, unique = (v.contiguous() for v in self._site_values.unbind(1))
            tables = {
                "neighbours": self._site_index[:, 0].contiguous(),
                "sign": sign,
                "coupling": coupling,
                "unique": unique,
            }
            self._device_tables_of = (self.target, tables)
        return self._device_tables_of[1]

    def _device_chains(self) -> dict[str, torch.Tensor]:
        """The cached chain state as the device kernels update it (the tensors themselves)."""
        if self._tracking:
            stats, truth = self._stats, self._truth_values
        else:  # nothing tracked: the kernels write statistics nobody reads
            stats = torch.zeros(self.n_chains, 3, dtype=torch.float64, device=self.device)
            truth = torch.zeros(self._width, dtype=torch.float64, device=self.device)
        return {"x": self._x, "s": self._s, "n_accepted": self._n_accepted, "stats": stats,
                "truth": truth}  # fmt: skip

    def _kernel_chains(self, trace: torch.Tensor | None) -> Chains:
        """The cached chain state as a kernel updates it (zero-copy views), with ``trace``."""
        if self._tracking:
            stats, truth = self._stats.numpy(), self._truth_values.numpy()
        else:  # nothing tracked: the kernels write statistics nobody reads
            stats, truth = np.zeros((self.n_chains, 3)), np.zeros(self._width)
        trace = trace.numpy() if trace is not None else np.zeros((0, self.n_chains, 5))
        return Chains(
            self._x.numpy(), self._s.numpy(), self._n_accepted.numpy(), stats, truth,
            self._tracking, trace,
        )  # fmt: skip

    def _compiled_steps(self, m: int, u, trace) -> None:
        raise NotImplementedError

    def _step(self, u: tuple[torch.Tensor, ...]) -> None:
        """One frozen torch step of every chain from its uniforms ``u[k]`` (each ``[B, 1]``)."""
        raise NotImplementedError

    # ----------------------------------------------------------------- the flip
    def _flip_neighbourhood(self, i: torch.Tensor):
        """The proposal "flip site ``i``" (``[B]``) seen through the target's tables.

        Returns ``(index [B, R, K], unique [B, K], x_old, s_old, x_new, s_new)``: the lookup rows
        for each chain's site (row 0: its neighbourhood, the only sites whose ``s`` changes), and
        their states and log-ratios before and after the flip, each ``[B, K]``.
        """
        index = self._site_index.index_select(0, i)
        sign, coupling, unique = self._site_values.index_select(0, i).unbind(1)
        slots = index[:, 0]
        x_old = self._x.gather(1, slots)
        s_old = self._s.gather(1, slots)
        # s_i -> -s_i;  s_j -> s_j + coupling_ij * x_j * x_i   (spec 1, x_i before the flip)
        s_new = torch.addcmul(s_old * sign, coupling * x_old, x_old[:, :1])
        x_new = x_old * sign
        return index, unique, x_old, s_old, x_new, s_new

    def _write(self, accept, slots, x_new, s_new) -> torch.Tensor:
        """Commit the flip where ``accept`` (``[B, 1]``); rejected chains write a spare column.

        Returns the write index ``[B, K]`` so subclasses can commit their own cached values.
        """
        self._n_accepted += accept
        where = torch.where(accept, slots, self._dummy)
        self._x.scatter_(1, where, x_new)
        self._s.scatter_(1, where, s_new)
        if self._tracking:
            site, x_i = slots[:, 0], x_new[:, :1]
            truth_i = self._truth_values.index_select(0, site).unsqueeze(1)
            delta = torch.cat([-s_new[:, :1], 2.0 * x_i, 2.0 * x_i * truth_i], 1)
            self._stats.add_(torch.where(accept, delta, 0.0))
        return where

    # ----------------------------------------------------------------- checks
    def invariant_error(self) -> float:
        """Largest relative gap between the cached quantities and a full recompute."""
        with torch.no_grad():
            s = self.target.flip_log_ratios(self.x).reshape(self.n_chains, -1)
            errors = [_relative_gap(self._s[:, : self.n_sites], s)]
            errors += self._extra_invariant_errors()
        return max(errors)

    def _extra_invariant_errors(self) -> list[float]:
        return []


def _relative_gap(cached: torch.Tensor, exact: torch.Tensor) -> float:
    scale = exact.abs().max().clamp(min=1.0)
    return float((cached - exact).abs().max() / scale)
