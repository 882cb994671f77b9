"""Locally balanced samplers: propose flipping site ``i`` with ``Q(i|x) = g(t_i) / Z(x)`` (spec 2).

With a balancing ``g`` the Metropolis-Hastings acceptance is ``A = min(1, Z(x) / Z(x'))``, and only
the flipped site's neighbourhood changes ``t``, so ``Z(x')`` is ``Z(x)`` plus a few terms.

Cached state on top of ``Sampler`` (per chain ``b``), and the invariant tying it:

- ``shift [B]``: a per-chain log-scale, so that ``g`` values far beyond float range stay finite;
- ``gn [B, (nb + 1) * bs]``: ``exp(log_g(s) - shift)``, sites laid out in ``nb`` blocks of
  ``bs ~ sqrt(D)`` (zero padding after the last site), then a spare block for rejected writes;
- ``block_sum [B, nb]``: ``gn`` summed per block; ``Z [B]``: ``block_sum`` summed.

``gn`` is recomputed from the exact ``s`` for every changed site, and the sums of every touched
block are re-added from ``gn`` (not nudged by differences), so the sums never drift; ``s`` itself
is resynced from ``x`` every ``resync_every`` steps. Choosing a site is two-level: a block with
probability ``block_sum / Z``, then a site inside it: O(sqrt(D)) work per step, whatever the shape.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import torch

from lsbcore.backends.structures import (
    KIND_MIXTURE,
    KIND_NETWORK,
    Function,
    Learner,
    LearningOut,
    MixtureCache,
    NetworkCache,
    NetworkLattice,
    Pieces,
    ProposalCache,
)
from lsbcore.learning.balancing import (
    FIXED,
    Balancing,
    FixedBalancing,
    MixtureBalancing,
    NetworkBalancing,
)
from lsbcore.learning.history import LearningHistory
from lsbcore.learning.objective import OBJECTIVES, authors_log_ratio, lsb_loss_and_grads
from lsbcore.numerics import LOG_RANGE, MAX_LOG_G, SGD_MOMENTUM
from lsbcore.samplers.base import Sampler

OPTIMIZERS = ("adam", "sgd")


class LocallyBalancedSampler(Sampler):
    """Locally balanced single-flip sampler for a fixed or learnable balancing function.

    ``common``: ``seed``, ``device``, ``x0``, ``resync_every``, ``backend`` (see ``Sampler``).

    Options:
        lr: learning rate for learnable functions (default 1e-2).
        optimizer: ``"adam"`` (the authors' code) or ``"sgd"`` (SGD with momentum 0.9, the paper's
            appendix).
        restart_prob: the paper's ``pi``: during learning, each chain restarts from a uniform
            random state with this probability per step (default 1e-8).
    """

    def __init__(
        self,
        target,
        n_chains: int,
        balancing: Balancing,
        lr: float = 1e-2,
        optimizer: str = "adam",
        restart_prob: float = 1e-8,
        objective: str = "exact",
        name: str | None = None,
        **common,
    ):
        if not isinstance(balancing, Balancing):
            raise ValueError(f"balancing must be a Balancing, got {type(balancing).__name__}.")
        self.name = name or balancing.name
        self.balancing = balancing
        d = target.n_sites
        self._block = math.isqrt(d - 1) + 1 if d > 1 else 1  # bs = ceil(sqrt(D))
        self._n_blocks = -(-d // self._block)
        # a frozen function (loaded from JSON) samples but does not learn
        self.learnable = balancing.learnable and any(
            p.requires_grad for p in balancing.parameters()
        )
        self.learning_failed = False
        self._parameter_writes = 0  # see _write_learned_params
        self._cache_stale = False
        self.history = LearningHistory()
        super().__init__(target, n_chains, **common)
        self.balancing.to(self.device)
        self._ready = True
        self._setup_learning(lr, optimizer, restart_prob, objective)
        self._renormalise()

    # ----------------------------------------------------------------- cache
    def _padded_width(self) -> int:
        # the blocks, then one spare block whose last column takes rejected writes
        return (self._n_blocks + 1) * self._block

    def _index_table(self, neighbourhood: torch.Tensor) -> torch.Tensor:
        # row 0: the neighbourhood; row 1: the block of each slot (for the block sums)
        return torch.stack([neighbourhood, neighbourhood // self._block], 1)

    def _after_resync(self) -> None:
        if getattr(self, "_ready", False):
            self._renormalise()

    def _replaced(self) -> None:
        super()._replaced()
        self._log_p_learning = None  # the learning objective's log p~ is of the old state

    @torch.no_grad()
    def _renormalise(self, log_g: torch.Tensor | None = None) -> None:
        """Rebuild ``gn``, block sums and ``Z`` from ``s`` with a fresh shift (the chain's max).

        ``log_g`` (``[B, D]``), when given, must be ``balancing.log_g(s)`` for the current state.
        """
        if log_g is None:
            log_g = self.balancing.log_g(self._s[:, : self.n_sites])  # [B, D]
        self._cache_stale = False
        self._shift = log_g.max(1, keepdim=True).values  # [B, 1]
        width = self._n_blocks * self._block
        gn = torch.zeros(self.n_chains, self._width, dtype=torch.float64, device=self.device)
        gn[:, : self.n_sites] = torch.exp(log_g - self._shift)
        self._gn = gn
        self._gn_blocks = gn[:, :width].view(self.n_chains, self._n_blocks, self._block)
        self._gn_rows = gn.view(self.n_chains * (self._n_blocks + 1), self._block)
        self._row_offset = (self._chains * (self._n_blocks + 1)).unsqueeze(1)  # [B, 1]
        self._block_sum = self._gn_blocks.sum(2)  # [B, nb]
        self._Z = self._block_sum.sum(1, keepdim=True)  # [B, 1]

    def _extra_invariant_errors(self) -> list[float]:
        if self._cache_stale:  # after learning the g-cache is rebuilt at the next frozen step
            self._renormalise()
        s = self.target.flip_log_ratios(self.x).reshape(self.n_chains, -1)
        log_g = self.balancing.log_g(s)
        log_z = torch.logsumexp(log_g, 1)
        cached_log_z = (torch.log(self._Z) + self._shift).squeeze(1)
        gn = torch.exp(log_g - self._shift)
        gn_gap = ((self._gn[:, : self.n_sites] - gn).abs() / self._Z).max()
        return [float((cached_log_z - log_z).abs().max()), float(gn_gap)]

    # ----------------------------------------------------------------- proposals
    def _choose_site(self, u: torch.Tensor) -> torch.Tensor:
        """Site ``i ~ gn / Z`` per chain (``[B]``) from uniforms ``u[0], u[1]``: block, then column.

        Each level draws against its own total, so a block is chosen with probability
        ``block_sum / Z`` and a site inside it with ``gn / block_sum``.
        """
        # u < 1 - 2^-52 keeps each level strictly below its total: the search lands on a
        # positive term, never past the end or on padding (see sampler.BELOW_ONE)
        cum_blocks = self._block_sum.cumsum(1)
        block = torch.searchsorted(cum_blocks, u[0] * cum_blocks[:, -1:], right=True)  # [B, 1]
        cum_row = self._gn_rows.index_select(0, (self._row_offset + block).view(-1)).cumsum(1)
        col = torch.searchsorted(cum_row, u[1] * cum_row[:, -1:], right=True)
        return (block * self._block + col).view(-1)

    def proposal_log_probs(self) -> torch.Tensor:
        """``log Q(i | x)`` for every chain and site, ``[B, H, W]`` (for the teaching views)."""
        with torch.no_grad():
            log_g = self.balancing.log_g(self._s[:, : self.n_sites])
            return (log_g - torch.logsumexp(log_g, 1, keepdim=True)).view(self.x.shape)

    def flip_probabilities(self) -> torch.Tensor:
        """``T(x -> x with i flipped) = Q(i|x) A`` for every chain and site, ``[B, H, W]``.

        Computed from the sampler's cached state with the same acceptance as ``step``: exact
        transition probabilities for tests and for the app's slow-motion step. O(B * D) work.
        """
        with torch.no_grad():
            if self._cache_stale:  # learning changed g: the cached g, shift and Z are old
                self._renormalise()
            d = self.n_sites
            index = self._site_index[:, 0]  # [D, K]
            sign, coupling, unique = self._site_values.unbind(1)
            x_nb, s_nb, g_old = self._x[:, index], self._s[:, index], self._gn[:, index]
            s_new = s_nb * sign + coupling * x_nb * x_nb[..., :1]  # [B, D, K]
            g_new = torch.exp(
                (self.balancing.log_g(s_new) - self._shift.unsqueeze(2)).clamp_(max=MAX_LOG_G)
            )
            z = self._Z  # [B, 1]
            z_new = z + ((g_new - g_old) * unique).sum(2)  # [B, D]
            probs = g_old[..., 0] / z * (z / torch.maximum(z, z_new))
            return probs[:, :d].reshape(self.x.shape)

    def _describe_last(self, i, z, z_new, accept) -> dict[str, torch.Tensor]:
        return {
            "site": i,
            "accept_prob": (z / torch.maximum(z, z_new)).squeeze(1),  # A = Z / max(Z, Z')
            "accepted": accept.squeeze(1),
        }

    def _propose(self, i: torch.Tensor):
        """Everything about "flip ``i``": neighbourhood, new values and ``Z(x')`` per chain."""
        index, unique, _, s_old, x_new, s_new = self._flip_neighbourhood(i)
        g_old = self._gn.gather(1, index[:, 0])
        g_new = torch.exp((self.balancing.log_g(s_new) - self._shift).clamp_(max=MAX_LOG_G))
        z_new = self._Z + ((g_new - g_old) * unique).sum(1, keepdim=True)
        return index, s_old, x_new, s_new, g_old, g_new, z_new

    def _commit(self, accept, index, x_new, s_new, g_new) -> None:
        """Write the flip where accepted, then re-add the sums of every touched block."""
        where = self._write(accept, index[:, 0], x_new, s_new)
        self._gn.scatter_(1, where, g_new)
        blocks = index[:, 1]  # [B, K]
        rows = self._gn_blocks.gather(1, blocks.unsqueeze(2).expand(-1, -1, self._block))
        self._block_sum.scatter_(1, blocks, rows.sum(2))
        self._Z = self._block_sum.sum(1, keepdim=True)
        low, high = torch.aminmax(self._Z)
        if not (math.exp(-LOG_RANGE) < float(low) and float(high) < math.exp(LOG_RANGE)):
            self._renormalise()

    def _step(self, u) -> None:
        if self._cache_stale:  # the last learning step changed g everywhere
            self._renormalise()
        i = self._choose_site(u)
        index, _, x_new, s_new, _, g_new, z_new = self._propose(i)
        # A = min(1, Z / Z') = Z / max(Z, Z'): no cancellation, and Z' = inf simply rejects
        accept = u[2] * torch.maximum(self._Z, z_new) < self._Z
        self._last = (i, self._Z, z_new, accept)  # references only: nothing computed here
        self._commit(accept, index, x_new, s_new, g_new)

    # ----------------------------------------------------------------- the compiled path
    def _has_kernel(self, learn: bool = False) -> bool:
        if learn:
            return isinstance(self.balancing, (MixtureBalancing, NetworkBalancing))
        return self._kernel_function() is not None

    learning_uniforms = 4  # a learning step: the proposal's two, the acceptance, x~'s site

    def _learning_chunk(self, m: int, trace) -> int:
        """Up to ``m`` learning steps on this sampler's backend; returns the steps taken.

        A chunk starts with the paper's Q1 restarts when they are due and ends before the next
        one, or after a step that diverged (learning stops; ``step`` goes on frozen).
        """
        if self._restart_wait <= 0:  # chains restart before this step (spec 5, pi)
            with torch.no_grad():
                self._restart_some_chains()
            self._restart_wait = self._next_restart() + 1  # counting this step
        m = int(min(m, self._restart_wait))
        u = self._draw_uniforms(m, self.learning_uniforms)
        if self._uses_compiled(True):
            taken = self._compiled_learning(m, u, trace)
        elif self.backend == "device" and self._has_device_learning():
            taken = self._device_learning(m, u, trace)
        else:
            taken = 0
            while taken < m and not self.learning_failed:
                self._learn_step(u[taken].split(1, dim=1))
                self._count_step()
                if trace is not None:
                    self._fill_trace(trace, taken)
                taken += 1
        self._restart_wait -= taken
        return taken

    def _compiled_learning(self, m: int, u: torch.Tensor, trace) -> int:
        """Up to ``m`` learning steps through ``learning_kernels`` from uniforms ``u [m, B, 4]``;
        stops after a step that diverged. Returns the steps taken."""
        from lsbcore.backends import learning_kernels

        params = torch.nn.utils.parameters_to_vector(self._learned_params()).detach().clone()
        params = params.cpu()
        log_p = self._learning_log_p().clone()
        learner = Learner(
            params.numpy(),
            self._optimizer_state(params.shape[0]).numpy(),
            0 if self.optimizer_name == "adam" else 1,
            self.lr,
            log_p.numpy(),
            self._kernel_authors_field(),
        )
        out = LearningOut(np.zeros(m), np.zeros((m, 5)), np.zeros((self.n_chains, 4)))
        chains, tables = self._kernel_chains(trace), self._kernel_tables()
        cache, fresh = self._learning_cache()
        if isinstance(self.balancing, MixtureBalancing):
            if fresh:
                b, d = self.n_chains, self.n_sites
                cache = MixtureCache(np.empty((b, 4, d)), np.empty((b, 4)), np.empty((b, 4)))
            taken = learning_kernels.mixture_learning_steps(
                m, chains, tables, learner, u.numpy(), out, cache, fresh
            )
            status = 0 if taken == m else 1
        else:
            taken, status, cache = self._network_learning(
                m, chains, tables, learner, u, out, cache, fresh
            )
        self._after_learning(
            taken, status, params, out.losses, out.weights, torch.from_numpy(out.last), log_p
        )
        # the caches stay valid while nothing else changes s (a resync or another step)
        self._learning_state = (self._epoch, self.n_steps, cache, self.backend)
        return taken

    def _has_device_learning(self) -> bool:
        return isinstance(self.balancing, (MixtureBalancing, NetworkBalancing))

    def _device_learning(self, m: int, u: torch.Tensor, trace) -> int:
        """Up to ``m`` learning steps as one device kernel launch (``backends.device``) from
        uniforms ``u [m, B, 4]``. The host reads one small tensor at the end: the steps taken,
        whether learning stopped, the losses and weights for the history."""
        from lsbcore.backends.device import mixture, network

        device = self.device
        params = torch.nn.utils.parameters_to_vector(self._learned_params()).detach().clone()
        log_p = self._learning_log_p().clone().contiguous()
        field = self._authors_field()
        learner = {
            "params": params.contiguous(),
            "opt_state": self._optimizer_state(params.shape[0]),
            "opt_kind": 0 if self.optimizer_name == "adam" else 1,
            "lr": self.lr,
            "log_p": log_p,
            "field": (field if field is not None else torch.zeros(0, self.n_sites,
                      dtype=torch.float64, device=device)).contiguous(),
        }  # fmt: skip
        zeros = dict(dtype=torch.float64, device=device)
        out = {"losses": torch.zeros(m, **zeros), "weights": torch.zeros(m, 5, **zeros),
               "last": torch.zeros(self.n_chains, 4, **zeros)}  # fmt: skip
        steps = torch.zeros(m, self.n_chains, 5, **zeros) if trace is not None else None
        cache, fresh = self._learning_cache()
        b, d = self.n_chains, self.n_sites
        chains, tables, u = self._device_chains(), self._device_tables(), u.contiguous()
        if isinstance(self.balancing, MixtureBalancing):
            if fresh:
                cache = {
                    "comps": torch.empty(b, 4, d, **zeros),
                    "shift": torch.empty(b, 4, **zeros),
                    "sums": torch.empty(b, 4, **zeros),
                }
            halt = mixture.mixture_learning_steps(
                m, chains, tables, learner, u, out, cache, fresh, steps
            )
        else:
            if fresh:
                cache = {
                    "u": torch.empty(b, d, **zeros),
                    "scale": torch.empty(b, d, **zeros),
                    "small": torch.empty(b, d, **zeros),
                    "top": torch.empty(b, **zeros),
                }
            halt = network.network_learning_steps(
                m, chains, tables, learner, u, out, cache, fresh, steps, self.balancing.hidden
            )  # fmt: skip
        # the chunk's one host read: steps taken and status, then the history's values
        summary = torch.cat([halt.to(torch.float64), out["losses"], out["weights"].view(-1)])
        summary = summary.cpu().numpy()
        taken, status = int(summary[0]), int(summary[1])
        if trace is not None:
            trace[:taken].copy_(steps[:taken])
        losses, weights = summary[2 : 2 + m], summary[2 + m :].reshape(m, 5)
        self._after_learning(taken, status, params, losses, weights, out["last"], log_p)
        self._learning_state = (self._epoch, self.n_steps, cache, self.backend)
        return taken

    def _after_learning(self, taken, status, params, losses, weights, last, log_p) -> None:
        """What every backend's learning chunk ends with: the parameters back into the
        function, the history, a stop after a divergence, the last step and the counts."""
        self._write_learned_params(params.to(self.device))
        self._last_good = params.clone()
        for t in range(taken):
            step = self.n_steps + t
            if self.history.wants(step):
                mixture = weights[t, :4] if isinstance(self.balancing, MixtureBalancing) else None
                self.history.record(step, float(losses[t]), float(weights[t, 4]), mixture)
        if status:
            self._stop_learning()
        if taken:
            self._last = (last[:, 0].long(), last[:, 1:2], last[:, 2:3], last[:, 3:4] > 0.5)
            self._cache_stale = True
            self.n_target_evals += taken * self.neighbourhood_size  # the uniform flips x~
            self._count_step(taken)
            self._log_p_learning, self._log_p_step = log_p, self.n_steps

    def _kernel_authors_field(self) -> np.ndarray:
        field = self._authors_field()
        if field is None:
            return np.zeros((0, self.n_sites))
        return field.cpu().numpy()

    def _learning_cache(self):
        """The compiled learning step's cache (None when it must be rebuilt from ``s``) and
        whether it must be."""
        epoch, steps, cache, backend = getattr(self, "_learning_state", (None,) * 4)
        # each backend keeps its own form (numpy arrays, device tensors): another one rebuilds
        fresh = (epoch, steps, backend) != (self._epoch, self.n_steps, self.backend)
        fresh = fresh or cache is None
        return (None if fresh else cache), fresh

    def _network_learning(self, m, chains, tables, learner, u, out, cache, fresh):
        """LSB 2's learning steps: per step the network's inputs (compiled), ``exp`` and
        ``log1p`` over the lattice (torch, vectorised), then the step (compiled). Returns the
        steps taken, the status of the last and the cache."""
        from lsbcore.backends import learning_kernels as lk

        b, d, hidden = self.n_chains, self.n_sites, self.balancing.hidden
        if fresh:
            cache = NetworkCache(np.empty((b, d)), np.empty((b, d)), np.empty((b, d)), np.empty(b))
            lk.network_caches(self._s.numpy(), d, *cache)
        z = torch.empty(2, b, d, dtype=torch.float64)
        e, lp = torch.empty_like(z), torch.empty_like(z)
        lattice = NetworkLattice(
            z.numpy(), np.empty((2, b, d), dtype=np.int32), e.numpy(), lp.numpy()
        )
        u = u.numpy()
        for t in range(m):
            pieces = Pieces(*lk.network_pieces(learner.params, hidden))
            lk.network_inputs(cache.u, *pieces[:3], lattice.z, lattice.piece)
            torch.clamp(z, max=20.0, out=e).exp_()
            torch.log1p(e, out=lp)
            status = lk.network_learning_step(
                t, chains, tables, learner, hidden, u[t], out, cache, lattice, pieces
            )
            if status == 2:
                return t, status, cache
            if status == 1:
                return t + 1, status, cache
        return m, 0, cache

    def _optimizer_state(self, n_params: int) -> torch.Tensor:
        """The compiled and device optimisers' state ``[2, P + 1]`` on this sampler's device
        (see ``learning_kernels.optimizer_step``)."""
        state = getattr(self, "_kernel_state", None)
        if state is None or tuple(state.shape) != (2, n_params + 1):
            state = torch.zeros(2, n_params + 1, dtype=torch.float64, device=self.device)
            self._kernel_state = state
        return state

    def _kernel_function(self) -> Function | None:
        """The balancing function as ``kernels.log_g`` takes it, or None (no kernel for it)."""
        b = self.balancing
        empty = np.zeros(0)
        with torch.no_grad():
            if isinstance(b, FixedBalancing):
                return Function(FIXED.index(b.name), np.zeros(4), empty, empty, empty)
            if isinstance(b, MixtureBalancing):
                log_w = b.log_weights().detach().cpu().numpy().astype(np.float64)
                return Function(KIND_MIXTURE, log_w, empty, empty, empty)
            if isinstance(b, NetworkBalancing):
                breakpoints, slope, intercept = b.pieces()
                return Function(
                    KIND_NETWORK,
                    np.zeros(4),
                    np.asarray(breakpoints, dtype=np.float64),
                    slope.detach().cpu().numpy().astype(np.float64),
                    intercept.detach().cpu().numpy().astype(np.float64),
                )
        return None

    def _compiled_steps(self, m: int, u, trace) -> None:
        from lsbcore.backends import kernels

        if self._cache_stale:  # the last learning step changed g everywhere
            self._renormalise()
        last = np.zeros((self.n_chains, 4))
        cache = ProposalCache(
            self._gn.numpy(), self._block_sum.numpy(), self._Z.numpy(), self._shift.numpy()
        )
        kernels.balanced_steps(
            m, self._kernel_chains(trace), self._kernel_tables(), self._kernel_function(), cache,
            u, last,
        )  # fmt: skip
        last = torch.from_numpy(last)
        self._last = (last[:, 0].long(), last[:, 1:2], last[:, 2:3], last[:, 3:4] > 0.5)

    def _has_device_kernel(self) -> bool:
        # the six functions of the paper comparison; learning steps stay on torch
        return isinstance(self.balancing, (FixedBalancing, MixtureBalancing, NetworkBalancing))

    def _device_function(self) -> Function:
        """The balancing function as the device kernel takes it (``Function`` of device
        tensors), computed once per learned function, not per chunk: LSB 2's pieces read its
        breakpoints on the host (a sync), and they change only with the parameters. Keyed on
        the function, its parameters' versions (an in-place edit from outside bumps them) and
        ``_parameter_writes``, which learning bumps: its writes (``.data``, fused Adam) do not."""
        b = self.balancing
        key = (b, self._parameter_writes, tuple(p._version for p in b.parameters()))
        cached = getattr(self, "_device_function_of", None)
        if cached is not None and cached[0] == key:
            return cached[1]
        options = {"dtype": torch.float64, "device": self.device}
        empty, log_w = torch.zeros(0, **options), torch.zeros(4, **options)
        with torch.no_grad():
            if isinstance(b, FixedBalancing):
                function = Function(FIXED.index(b.name), log_w, empty, empty, empty)
            elif isinstance(b, MixtureBalancing):
                log_w = b.log_weights().detach().contiguous()
                function = Function(KIND_MIXTURE, log_w, empty, empty, empty)
            else:
                breakpoints, slope, intercept = b.pieces()
                breakpoints = torch.tensor(breakpoints, **options)
                slope, intercept = slope.detach().contiguous(), intercept.detach().contiguous()
                function = Function(KIND_NETWORK, log_w, breakpoints, slope, intercept)
        self._device_function_of = (key, function)
        return function

    def _device_steps(self, m: int, u: torch.Tensor, trace) -> None:
        from lsbcore.backends.device.balanced import balanced_steps

        if self._cache_stale:
            self._renormalise()
        cache = {"gn": self._gn, "block_sum": self._block_sum, "z": self._Z, "shift": self._shift}
        out = None
        if trace is not None:
            out = torch.empty(m, self.n_chains, 5, dtype=torch.float64, device=self.device)
        last, _ = balanced_steps(
            m, self._device_chains(), self._device_tables(), self._device_function(), cache, u,
            out,
        )  # fmt: skip
        if trace is not None:  # one copy per chunk
            trace.copy_(out)
        self._last = (last[:, 0].long(), last[:, 1:2], last[:, 2:3], last[:, 3:4] > 0.5)

    # ----------------------------------------------------------------- learning (spec 5)
    def _setup_learning(self, lr, optimizer, restart_prob, objective) -> None:
        number = not isinstance(lr, (bool, np.bool_)) and isinstance(lr, numbers.Real)
        if not (number and 0 < float(lr) <= 10):  # False for NaN too
            raise ValueError(f"lr must be a number in (0, 10], got {lr!r}.")
        lr = float(lr)
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}.")
        number = not isinstance(restart_prob, (bool, np.bool_))
        if not (number and isinstance(restart_prob, numbers.Real) and 0 <= restart_prob <= 1):
            raise ValueError(f"restart_prob must be a probability in [0, 1], got {restart_prob!r}.")
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}.")
        self.lr, self.optimizer_name, self.restart_prob = float(lr), optimizer, float(restart_prob)
        self.objective = objective
        self.eta_raw = torch.zeros(1, dtype=torch.float64, device=self.device, requires_grad=True)
        self._log_p_learning, self._log_p_step = None, -1
        self._restart_wait = self._next_restart()
        self._torch_optimizer = None
        if self.learnable:
            params = [*self.balancing.parameters(), self.eta_raw]
            self._last_good = torch.nn.utils.parameters_to_vector(params).detach().clone()

    @property
    def _optimizer(self):
        """The torch optimiser of the torch learning step, built on first use: the first
        ``torch.optim`` construction in a process costs about 1.5 s, which compiled learning
        (its own optimiser state) never pays."""
        if self._torch_optimizer is None and self.learnable:
            params = [*self.balancing.parameters(), self.eta_raw]
            if self.optimizer_name == "adam":
                try:  # the fused kernel halves the per-step cost; older builds may lack it
                    self._torch_optimizer = torch.optim.Adam(params, lr=self.lr, fused=True)
                except (RuntimeError, TypeError, ValueError):
                    self._torch_optimizer = torch.optim.Adam(params, lr=self.lr)
            else:
                self._torch_optimizer = torch.optim.SGD(params, lr=self.lr, momentum=SGD_MOMENTUM)
        return self._torch_optimizer

    @property
    def eta(self) -> float:
        return float(torch.nn.functional.softplus(self.eta_raw.detach()))

    def _next_restart(self) -> float:
        """Learning steps until the paper's Q1 next restarts a chain (spec 5, ``pi``).

        Each chain restarts with probability ``pi`` per learning step, independently, so the
        wait until any of the ``B`` chains does is geometric with ``p = 1 - (1 - pi)^B``: drawn
        once, not per step.
        """
        if self.restart_prob <= 0:
            return math.inf
        if self.restart_prob >= 1:
            return 0
        p = -math.expm1(self.n_chains * math.log1p(-self.restart_prob))
        u = float(torch.rand((), generator=self.generator, dtype=torch.float64, device=self.device))
        return math.floor(math.log1p(-u) / math.log1p(-p)) if p < 1 else 0

    def _restart_some_chains(self) -> None:
        """Restart chains from uniform random states, given that at least one restarts.

        Exact: the first restarting chain ``J`` has ``P(J = j | J <= B) ~ (1 - pi)^j pi`` (a
        truncated geometric), and every chain after it restarts independently with ``pi``.
        """
        pi, b = self.restart_prob, self.n_chains
        u = torch.rand(b + 1, generator=self.generator, dtype=torch.float64, device=self.device)
        if pi >= 1:
            first = 0
        else:
            none = math.exp(b * math.log1p(-pi))  # (1 - pi)^B
            first = min(b - 1, math.floor(math.log1p(-float(u[0]) * (1 - none)) / math.log1p(-pi)))
        restart = torch.zeros(b, dtype=torch.bool, device=self.device)
        restart[first] = True
        restart[first + 1 :] = u[first + 2 :] < pi
        bits = torch.randint(0, 2, self._x.shape, generator=self.generator, device=self.device)
        self._x = torch.where(restart.unsqueeze(1), (2 * bits - 1).to(torch.float64), self._x)
        self.resync()
        self._log_p_learning = None

    def _learn_step(self, u) -> None:
        """One burn-in step of Algorithm 1: propose, update (theta, eta), accept with theta0.

        ``log g_theta0`` over every site is evaluated once: its values give ``Z(x)`` and the
        proposal (the proposal and the acceptance use theta0), and the loss reuses them. The
        loss's gradient in ``log Z`` and in the neighbourhoods' ``log g`` comes by hand
        (``lsb_loss_and_grads``); LSB 1 chains it to theta by hand as well, LSB 2 by autograd
        through its network.
        """
        mixture = isinstance(self.balancing, MixtureBalancing)
        if mixture:
            log_z, i, shares = self._mixture_partition_and_site(u)
        else:
            log_g = self.balancing.log_g(self._s[:, : self.n_sites])  # [B, D], theta0, with grad
            log_z = torch.logsumexp(log_g, 1)
            if not bool(torch.isfinite(log_z.detach()).all()):
                with torch.no_grad():
                    self._stop_learning()
                    self._step(u[:3])
                return
            with torch.no_grad():  # i ~ g / Z by one inverse CDF: g changes everywhere anyway
                cdf = torch.exp(log_g.detach() - log_z.detach().unsqueeze(1)).cumsum(1)
                i = torch.searchsorted(cdf, u[0] * cdf[:, -1:], right=True).view(-1)
        with torch.no_grad():
            # x~: one uniformly chosen site j flipped (the one-sample rejection estimate); both
            # flips are looked up at once, [2, B, K]: the proposed x', then x~
            j = (u[3] * self.n_sites).long().clamp_(max=self.n_sites - 1).view(-1)
            index, unique, s_old, x_new, s_new = self._flip_neighbourhoods(torch.stack([i, j]))
            # [4, B, K]: x' before and after the flip, then x~ before and after
            s_flips = torch.stack([s_old, s_new], 1).view(4, self.n_chains, -1)
        if mixture:
            log_g_flips, responsibilities = self.balancing.log_g_and_responsibilities(s_flips)
        else:  # one evaluation of g_theta0 on both neighbourhoods, with gradient
            log_g_flips = self.balancing.log_g(s_flips)
        with torch.no_grad():
            log_q0 = log_g_flips[0, :, 0].detach() - log_z.detach()  # log Q_theta0(x'|x)
            log_p = self._learning_log_p()
            s_objective = self._objective_log_ratio(i, s_old[0, :, 0])
        loss, grad_log_z, grad_flips, grad_eta_raw, dz = lsb_loss_and_grads(
            log_z, log_g_flips, unique[0], unique[1], log_p, s_objective, log_q0, self.eta_raw
        )
        if mixture:  # log Z and log g depend on theta through the log-weights only
            n_components = shares.shape[1]
            grad_log_w = grad_log_z @ shares + grad_flips.reshape(-1) @ responsibilities.reshape(
                -1, n_components
            )
            self.balancing.theta.grad = self._log_softmax_backward(grad_log_w)
        else:
            self._optimizer.zero_grad(set_to_none=True)
            torch.autograd.backward([log_z, log_g_flips], [grad_log_z, grad_flips])
        self.eta_raw.grad = grad_eta_raw
        with torch.no_grad():
            self._optimizer.step()
            self._parameter_writes += 1  # fused Adam leaves the version counters alone
            # one check: a non-finite loss or gradient leaves non-finite parameters or loss
            params = torch.nn.utils.parameters_to_vector(self._learned_params())
            if bool(torch.isfinite(params.sum() + loss)):
                self._last_good = params
            else:
                self._stop_learning()
            # the proposal's acceptance under theta0, in units of Z(x): A = Z / max(Z, Z')
            z_new = 1.0 + dz[0].unsqueeze(1)
            accept = u[2] * torch.clamp(z_new, min=1.0) < 1.0
            self._last = (i, torch.ones_like(z_new), z_new, accept)
            self._write(accept, index[0], x_new[0], s_new[0])
            self._log_p_learning = log_p + torch.where(accept, s_old[0, :, :1], 0.0).squeeze(1)
            self._cache_stale = True  # g changed everywhere: rebuild before the next proposal
            if self.history.wants(self.n_steps):
                self.history.record(self.n_steps, float(loss), self.eta, self._weights_or_none())
        self.n_target_evals += self.neighbourhood_size  # the uniformly flipped neighbourhood

    def _log_softmax_backward(self, grad_log_w: torch.Tensor) -> torch.Tensor:
        """theta's gradient from that of ``log w = log_softmax(theta)``, as autograd computes it."""
        weights = torch.softmax(self.balancing.theta.detach(), 0)
        return grad_log_w - weights * grad_log_w.sum()

    def _flip_neighbourhoods(self, sites: torch.Tensor):
        """``_flip_neighbourhood`` for several sites per chain at once (``sites [F, B]``).

        Returns ``(index [F, B, K], unique, s_old, x_new, s_new)``, each ``[F, B, K]``: the
        same values, in fewer (batched) lookups.
        """
        f, b = sites.shape
        k = self._site_index.shape[-1]
        flat = sites.reshape(-1)
        slots = self._site_index[:, 0].index_select(0, flat).view(f, b, k)
        sign, coupling, unique = self._site_values.index_select(0, flat).view(f, b, 3, k).unbind(2)
        x_old = self._x.expand(f, -1, -1).gather(2, slots)
        s_old = self._s.expand(f, -1, -1).gather(2, slots)
        # s_i -> -s_i;  s_j -> s_j + coupling_ij * x_j * x_i   (spec 1, x_i before the flip)
        s_new = torch.addcmul(s_old * sign, coupling * x_old, x_old[..., :1])
        return slots, unique, s_old, x_old * sign, s_new

    def _mixture_partition_and_site(self, u: torch.Tensor):
        """LSB 1 shortcut (spec 5): ``Z_theta = sum_k w_k S_k`` with ``S_k = sum_i g_k(t_i)``.

        The component sums do not depend on theta, so ``log Z`` depends on theta through the
        four weights only (its gradient in ``log w`` is the components' shares ``w_k S_k / Z``,
        returned ``[B, 4]``), and the proposal draws a component ``k`` with that share and then
        a site ``i ~ g_k(t_i) / S_k``: together exactly ``Q(i) = g_theta(t_i) / Z``.
        """
        with torch.no_grad():
            log_sums, scaled = self.balancing.component_log_sums(self._s[:, : self.n_sites])
            logits = log_sums + self.balancing.log_weights().detach()
            log_z = torch.logsumexp(logits, 1)
            shares = torch.softmax(logits, 1)
            cdf = shares.cumsum(1)
            k = torch.searchsorted(cdf, u[0] * cdf[:, -1:], right=True)  # [B, 1]
            # NaN weights (a diverged theta) search past the end: stay in range, and let the NaN
            # loss stop learning
            k.clamp_(max=shares.shape[1] - 1)
            row = scaled.gather(1, k.unsqueeze(2).expand(-1, 1, self.n_sites)).squeeze(1)
            cdf = row.cumsum(1)
            i = torch.searchsorted(cdf, u[1] * cdf[:, -1:], right=True).view(-1)
        return log_z, i, shares

    def _authors_field(self) -> torch.Tensor | None:
        """The target's field ``[1 or B, D]`` when the objective uses the authors' log p~."""
        if self.objective != "authors":
            return None
        return self.target.field.to(device=self.device, dtype=torch.float64)

    def _objective_log_ratio(self, i: torch.Tensor, s_i: torch.Tensor) -> torch.Tensor:
        """``log p~(x') - log p~(x)`` as the objective sees it for the flips of sites ``i``."""
        field = self._authors_field()
        if field is None:
            return s_i
        rows = self._chains if field.shape[0] > 1 else torch.zeros_like(self._chains)
        x_i = self._x[self._chains, i]
        return authors_log_ratio(s_i, x_i, field[rows, i])

    def _learning_log_p(self) -> torch.Tensor:
        """``log p~(x)`` during learning: kept incrementally between consecutive learning steps."""
        cached = self._log_p_learning
        if cached is None or self._log_p_step != self.n_steps:
            cached = self.log_p
        self._log_p_step = self.n_steps + 1
        return cached

    def _stop_learning(self) -> None:
        """Restore the last good parameters, stop learning and say so."""
        self._write_learned_params(self._last_good)
        self.learning_failed = True
        warnings.warn(
            f"{self.name}: learning produced a non-finite loss or parameters at step "
            f"{self.n_steps}; it stops learning and keeps its last good balancing function.",
            RuntimeWarning,
            stacklevel=4,
        )

    def _learned_params(self):
        return [*self.balancing.parameters(), self.eta_raw]

    def _write_learned_params(self, vector: torch.Tensor) -> None:
        """Set the function's parameters and ``eta_raw`` from one flat vector. The write
        replaces their ``.data``, which leaves their version counters alone: counted here for
        ``_device_function``."""
        torch.nn.utils.vector_to_parameters(vector, self._learned_params())
        self._parameter_writes += 1

    def _weights_or_none(self):
        weights = getattr(self.balancing, "weights", None)
        return weights() if weights is not None else None
