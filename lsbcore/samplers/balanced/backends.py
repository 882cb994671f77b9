"""The locally balanced sampler on the compiled and device backends: the adapters between its
torch state and the kernels (``backends.kernels``, ``backends.learning_kernels``,
``backends.device``).

The kernels take the same cached state as the torch step (``x``, ``s``, ``gn``, the block sums,
``Z``, ``shift``; see ``locally_balanced``), as zero-copy numpy views (compiled) or as the device
tensors themselves (device), and read the same uniforms: one seed gives the same chains on
every backend. What the kernels cannot read from torch (the balancing function, the optimiser's
state, the learning caches) is packed here into the named structures of
``backends.structures``.

A mixin of ``LocallyBalancedSampler``: it uses that sampler's cache and, for learning chunks,
the learning state of ``BalancedLearning``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lsbcore.backends.network_terms import network_scratch
from lsbcore.backends.structures import (
    KIND_MIXTURE,
    KIND_MONOTONE,
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
from lsbcore.balancing.functions import FIXED, FixedBalancing, MixtureBalancing, NetworkBalancing
from lsbcore.balancing.monotone import MonotoneBalancing

#: LSB 2's learning step on a pairwise target in ``threads.learning_groups``' units, a site (the
#: network's terms, their sums per piece and the draw: 11-13 ns) and a chain, set from timings
#: of one group against two (``studies.benchmarks.learning_groups``, BENCHMARKS.md): 1.06-1.95x
#: from 2 chains of 16 x 16 up, alone on two cores
LATTICE_WORK_PER_SITE = 80
LATTICE_WORK_PER_CHAIN = 1 << 14
#: ... but groups only from a 64 x 64 lattice (1.54-1.93x): on the paper cases' 30 x 30 with the
#: browser on the server's two cores, the page's burn-in took 2.1-2.9 s after Run against
#: 1.6-1.9 s in one group (``tools.live_speed``)
LATTICE_MIN_SITES = 64 * 64


class BalancedBackends:
    """Frozen and learning steps of a locally balanced sampler on the compiled and device
    backends (the torch steps are the sampler's own ``_step`` and ``_learn_step``)."""

    def _has_kernel(self, learn: bool = False) -> bool:
        if learn:  # LSB 2' learns on torch steps: no learning kernel knows its network
            return isinstance(self.balancing, (MixtureBalancing, NetworkBalancing))
        known = (FixedBalancing, MixtureBalancing, NetworkBalancing, MonotoneBalancing)
        return isinstance(self.balancing, known)

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
        from lsbcore.backends.device.learning import MAX_LANES

        learned = isinstance(self.balancing, (MixtureBalancing, NetworkBalancing))
        return learned and self.n_chains <= MAX_LANES  # one program holds every chain

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

    def learning_work(self) -> int:
        """A chain's LSB 2 learning step in ``threads.learning_groups``' units (LSB 1's is O(1)
        in the sites and has no groups)."""
        if self.n_sites < LATTICE_MIN_SITES:
            return 0
        return LATTICE_WORK_PER_SITE * self.n_sites + LATTICE_WORK_PER_CHAIN

    def _network_learning(self, m, chains, tables, learner, u, out, cache, fresh):
        """LSB 2's learning steps: per step the network's pieces, then the step (compiled).
        Returns the steps taken, the status of the last and the cache."""
        from lsbcore.backends import learning_kernels as lk
        from lsbcore.backends.threads import learning_groups, torch_threads_kept

        b, d, hidden = self.n_chains, self.n_sites, self.balancing.hidden
        if fresh:
            cache = NetworkCache(np.empty((b, d)), np.empty((b, d)), np.empty((b, d)), np.empty(b))
            lk.network_caches(self._s.numpy(), d, *cache)
        # each chain's Z(x) and its gradient sums at every site: chains in groups on all cores
        groups = learning_groups(b, self.learning_work())
        step = lk.network_learning_step_parallel if groups > 1 else lk.network_learning_step
        scratch = [network_scratch(min(d, lk.LATTICE_TILE)) for _ in range(groups)]
        lattice = NetworkLattice(*(np.stack(rows) for rows in zip(*scratch, strict=True)))
        u = u.numpy()
        with torch_threads_kept():
            for t in range(m):
                pieces = Pieces(*lk.network_pieces(learner.params, hidden))
                status = step(
                    t, chains, tables, learner, hidden, u[t], out, cache, lattice, pieces, groups
                )
                if status == 2:
                    return t, status, cache
                if status == 1:
                    return t + 1, status, cache
        return m, 0, cache

    def _optimizer_state(self, n_params: int) -> torch.Tensor:
        """The compiled and device optimisers' state ``[2, P + 1]`` on this sampler's device
        (see ``learning_kernels.optimizer_step``), taken over from ``torch.optim`` where torch
        learning steps ran last (the app steps with torch until the kernels are compiled)."""
        state = kernel_optimizer_state(self)
        if tuple(state.shape) != (2, n_params + 1):
            raise RuntimeError(f"optimiser state {tuple(state.shape)} for {n_params} parameters.")
        if state.device != self.device:
            state = self._kernel_state = state.to(self.device)
        return state

    def _function_key(self) -> tuple:
        """What the kernels' form of the balancing function depends on: the function, its
        parameters' versions (an in-place edit from outside bumps them) and addresses (a
        ``.data`` swap moves them), and ``_parameter_writes``, which learning bumps: its writes
        (``.data``, fused Adam) leave the versions alone."""
        b = self.balancing
        params = tuple((p._version, p.data_ptr()) for p in b.parameters())
        return (b, getattr(self, "_parameter_writes", 0), params)

    def _kernel_function(self) -> Function | None:
        """The balancing function as ``kernels.log_g`` takes it, or None (no kernel for it),
        built once per change of the function (``_function_key``), not per call: LSB 2's
        pieces cost more than a short chunk of steps."""
        key = self._function_key()
        cached = getattr(self, "_kernel_function_of", None)
        if cached is not None and cached[0] == key:
            return cached[1]
        function = self._build_kernel_function()
        self._kernel_function_of = (key, function)
        return function

    def _build_kernel_function(self) -> Function | None:
        return kernel_function(self.balancing)

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
        self._last_refs = (last[:, 0].long(), last[:, 1:2], last[:, 2:3], last[:, 3:4] > 0.5)

    def _has_device_kernel(self) -> bool:
        # the six functions of the paper comparison (learning: ``_has_device_learning``)
        return isinstance(self.balancing, (FixedBalancing, MixtureBalancing, NetworkBalancing))

    def _device_function(self) -> Function:
        """The balancing function as the device kernel takes it (``Function`` of device
        tensors), computed once per learned function, not per chunk: LSB 2's pieces read its
        breakpoints on the host (a sync), and they change only with the parameters
        (``_function_key``)."""
        b = self.balancing
        key = self._function_key()
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
        from lsbcore.backends.device.balanced import device_balanced_steps

        if self._cache_stale:
            self._renormalise()
        cache = {"gn": self._gn, "block_sum": self._block_sum, "z": self._Z, "shift": self._shift}
        out = None
        if trace is not None:
            out = torch.empty(m, self.n_chains, 5, dtype=torch.float64, device=self.device)
        last, _ = device_balanced_steps(
            m, self._device_chains(), self._device_tables(), self._device_function(), cache, u,
            out,
        )  # fmt: skip
        if trace is not None:  # one copy per chunk
            trace.copy_(out)
        self._last_refs = (last[:, 0].long(), last[:, 1:2], last[:, 2:3], last[:, 3:4] > 0.5)


def kernel_function(b) -> Function | None:
    """The balancing function ``b`` as ``kernels.log_g`` takes it (numpy arrays), or None where
    the kernels do not know it (LSB 2' only on the batched samplers' kernels: the pairwise
    ones gate it out with ``_has_kernel``)."""
    empty = np.zeros(0)
    with torch.no_grad():
        if isinstance(b, FixedBalancing):
            return Function(FIXED.index(b.name), np.zeros(4), empty, empty, empty)
        if isinstance(b, MixtureBalancing):
            log_w = b.log_weights().detach().cpu().numpy().astype(np.float64)
            return Function(KIND_MIXTURE, log_w, empty, empty, empty)
        if isinstance(b, MonotoneBalancing):  # phi's pieces that are used (unused: start +inf)
            starts, units = b.pieces()
            used = starts < math.inf
            units = units[used]
            return Function(
                KIND_MONOTONE,
                np.zeros(4),
                starts[used].cpu().numpy().astype(np.float64),
                b.slope.detach().reshape(-1)[units].cpu().numpy().astype(np.float64),
                b.intercept.detach().reshape(-1)[units].cpu().numpy().astype(np.float64),
            )
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


class CompiledFunction:
    """The balancing function as the batched samplers' kernels take it (a mixin of
    ``BatchedBalancedSampler``'s compiled steps on RBMs and factor graphs)."""

    def step(self, n: int = 1, learn: bool = False, trace: torch.Tensor | None = None) -> None:
        if learn:  # the function may change: the kernel's form of it is built again
            self._learning_calls = getattr(self, "_learning_calls", 0) + 1
        super().step(n, learn=learn, trace=trace)

    def _compiled_function(self) -> Function:
        """``kernel_function`` of the balancing function, built once per change of it (LSB 2's
        pieces cost more than a short chunk of steps): a learning call, or an edit of its
        parameters from outside (their versions and addresses)."""
        b = self.balancing
        key = (b, getattr(self, "_learning_calls", 0),
               tuple((p._version, p.data_ptr()) for p in b.parameters()))  # fmt: skip
        cached = getattr(self, "_compiled_function_of", None)
        if cached is None or cached[0] != key:
            cached = self._compiled_function_of = (key, kernel_function(b))
        return cached[1]


def kernel_optimizer_state(sampler) -> torch.Tensor:
    """The compiled learning kernels' optimiser state ``[2, P + 1]`` of a batched sampler
    (``learning_kernels.optimizer_step``'s layout), taken over from its ``torch.optim``
    optimiser where torch learning steps ran before (which is then dropped: one of the two
    holds the state at a time; ``load_kernel_state`` hands it back)."""
    state = getattr(sampler, "_kernel_state", None)
    if state is not None:
        return state
    params = sampler._learned_params()
    state = torch.zeros(2, sum(p.numel() for p in params) + 1, dtype=torch.float64)
    optimizer, adam = sampler._torch_optimizer, sampler.optimizer_name == "adam"
    offset = 0
    for p in params:
        size = p.numel()
        held = {} if optimizer is None else optimizer.state.get(p, {})
        if adam and "exp_avg" in held:
            state[0, offset : offset + size] = held["exp_avg"].reshape(-1)
            state[1, offset : offset + size] = held["exp_avg_sq"].reshape(-1)
            state[0, -1] = float(held["step"])
        elif not adam and held.get("momentum_buffer") is not None:
            state[0, offset : offset + size] = held["momentum_buffer"].reshape(-1)
            state[1, -1] = 1.0
        offset += size
    sampler._kernel_state, sampler._torch_optimizer = state, None
    return state


def load_kernel_state(sampler, optimizer) -> None:
    """Give a freshly built ``torch.optim`` optimiser the state the compiled learning kernels
    left (``kernel_optimizer_state``), if any; the kernels' copy is dropped."""
    state = getattr(sampler, "_kernel_state", None)
    if state is None:
        return
    sampler._kernel_state = None
    adam = sampler.optimizer_name == "adam"
    if (adam and state[0, -1] <= 0) or (not adam and state[1, -1] <= 0):
        return  # no step yet: torch builds its state on its first step
    offset = 0
    for p in sampler._learned_params():
        size = p.numel()
        first = state[:, offset : offset + size].reshape(2, *p.shape).to(p.device)
        if adam:
            from torch.optim.optimizer import _get_scalar_dtype

            fused = bool(optimizer.defaults.get("fused"))  # then its step lives with p
            step = torch.tensor(
                float(state[0, -1]),
                dtype=_get_scalar_dtype(is_fused=fused),
                device=p.device if fused else "cpu",
            )
            optimizer.state[p] = {"step": step, "exp_avg": first[0].clone(),
                                  "exp_avg_sq": first[1].clone()}  # fmt: skip
        else:
            optimizer.state[p] = {"momentum_buffer": first[0].clone()}
        offset += size
