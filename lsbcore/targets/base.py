"""The target protocol: everything a sampler may ask of a distribution over ``{-1, +1}^n``.

A ``Target`` is an unnormalised ``p~(x)`` on states ``x in {-1, +1}^n`` (``n_sites``; ``shape``
is the layout a view draws, ``prod(shape) == n_sites``). It answers, batched over chains:

- ``log_prob(x)``: ``log p~(x)`` per chain, ``[B]``;
- ``flip_log_ratios(x)``: ``s_i(x) = log p~(x with i flipped) - log p~(x)`` for all ``n`` sites;
- ``log_ratio(x, x_new)``: ``log p~(x_new) - log p~(x)`` for any multi-site move;
- ``grad_log_prob(x)``: the gradient in ``x`` of a differentiable extension of ``log p~`` to
  real ``x`` (for the gradient-approximated proposals, ``s_i ~ -2 x_i d_i``), where the target
  ``provides`` ``"gradient"``;
- ``conditional_log_odds(x)``: ``log p(x_i = +1 | rest) - log p(x_i = -1 | rest) = -x_i s_i``;
- incremental ratios, where it ``provides`` ``"incremental"``: ``ratio_cache(x)`` is what the
  target keeps per chain (an RBM's hidden pre-activations) and ``flip_log_ratios_after(x_old,
  x_new, s_old, cache)`` the log-ratios and cache after any sites flipped, faster than anew;
- ``start(n_chains, generator)``: starting states of positive probability.

``provides`` names what a target offers beyond the required ``log_prob``: ``"pairwise"``
(``PairwiseTarget``: flip tables the compiled and device kernels read), ``"incremental"``,
``"gradient"``, ``"tempering"`` (``tempered(beta)`` gives ``p~^beta``). A sampler's registry
entry names what it needs (``lsbcore.samplers.registry``), and a pair that cannot work is
refused in a sentence before anything runs.

Adding a target is one module: a subclass that sets ``n_sites``, ``shape`` and ``provides`` and
answers ``log_prob`` (and, where cheaper than the defaults, the rest). States may be given flat
``[B, n]`` or in the target's layout ``[B, *shape]``; results keep the layout they were given.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lsbcore.checks import integer, real
from lsbcore.numerics import MAX_LOCAL_FIELD  # noqa: F401  (the targets' bound, read here)

# Sizes: about 2048 x 2048 sites (the flip tables then take about 0.7 GB), and the fields of
# every chain together at most 512 MB of float64
MAX_SITES = 4_200_000
MAX_VALUES = 2**26
# inverse temperatures: annealing ends far beyond any ratio that still moves a chain
MAX_BETA = 1e6

#: What a target may provide beyond ``log_prob`` (see the module docstring).
CAPABILITIES = ("pairwise", "incremental", "gradient", "tempering")


def as_real_tensor(value, name: str, max_values: int = MAX_VALUES) -> torch.Tensor:
    """``value`` as a float64 tensor, refusing complex, non-numeric and boolean input, and more
    than ``max_values`` numbers (checked before any conversion allocates)."""
    size = value.numel() if isinstance(value, torch.Tensor) else np.size(value)
    if size > max_values:
        raise ValueError(f"{name} holds {size:,} numbers; at most {max_values:,} are supported.")
    complex_ = value.is_complex() if isinstance(value, torch.Tensor) else np.iscomplexobj(value)
    if complex_:
        raise ValueError(f"{name} must hold real numbers, not complex ones.")
    if not isinstance(value, torch.Tensor):
        try:
            value = torch.as_tensor(value, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(
                f"{name} must be a numeric array, got {type(value).__name__}."
            ) from err
    if not (value.is_floating_point() or value.dtype in (torch.int32, torch.int64)):
        raise ValueError(f"{name} must hold real numbers, got dtype {value.dtype}.")
    return value.to(torch.float64)


def check_layout(shape, n: int, what: str = "sites") -> tuple[int, ...]:
    """A drawing layout for ``n`` sites: ``(n,)`` for ``None``, else positive sizes whose product
    is ``n`` (``what`` names the sites in the message)."""
    if shape is None:
        return (n,)
    try:
        sizes = tuple(integer(v, "shape", 1, n) for v in shape)
    except TypeError as err:
        raise ValueError(f"shape must be a tuple of positive integers, got {shape!r}.") from err
    if not sizes or math.prod(sizes) != n:
        raise ValueError(
            f"shape must be positive sizes whose product is the {n} {what}, got {shape!r}."
        )
    return sizes


def check_beta(beta) -> float:
    """An inverse temperature: a finite real ``>= 0`` (``real`` refuses booleans and strings)."""
    return real(beta, "beta", 0.0, MAX_BETA)


class Target:
    """Any distribution over ``{-1, +1}^n`` (see the module docstring).

    Subclasses set ``n_sites``, ``shape`` and ``provides`` and define ``log_prob``; every other
    answer has a default built on it (exact, and as slow as ``n`` evaluations where it must).
    """

    n_sites: int
    shape: tuple[int, ...]
    provides: frozenset[str] = frozenset()

    @property
    def batch(self) -> int:
        """Number of parameter sets: 1 (shared by every chain) or B (one per chain)."""
        return 1

    def offers(self, capability: str) -> bool:
        return capability in self.provides

    def describe(self) -> str:
        """The target in a few words, for messages."""
        return f"{type(self).__name__} on {self.n_sites:,} sites"

    # ----------------------------------------------------------------- states
    def _flat(self, x) -> torch.Tensor:
        """``x`` as ``[B, n]`` float64, after checking its shape and batch."""
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"x must be a tensor, got {type(x).__name__}.")
        if x.dim() >= 2 and (
            tuple(x.shape[1:]) == self.shape or (x.dim() == 2 and x.shape[1] == self.n_sites)
        ):
            flat = x.reshape(x.shape[0], self.n_sites).to(torch.float64)
        else:
            layout = ", ".join(str(v) for v in self.shape)
            raise ValueError(
                f"x must have shape [B, {layout}] or [B, {self.n_sites}], got {tuple(x.shape)}."
            )
        if self.batch not in (1, flat.shape[0]):
            raise ValueError(
                f"x has {flat.shape[0]} chains but the target holds {self.batch} fields "
                "(one per chain)."
            )
        return flat

    def start(self, n_chains: int, generator: torch.Generator, tries: int = 100) -> torch.Tensor:
        """Starting states ``[n_chains, n]`` of +-1, uniform draws from ``generator``: a chain
        that drew a state of zero probability draws again, up to ``tries`` times (a target
        whose mass is rarer than that overrides this with a search of its own)."""

        def draw(count: int) -> torch.Tensor:
            shape = (count, self.n_sites)
            bits = torch.randint(0, 2, shape, generator=generator, device=generator.device)
            return (2 * bits - 1).to(torch.float64)

        x = draw(n_chains)
        for _ in range(tries):
            zero = torch.isneginf(self.log_prob(x))
            if not bool(zero.any()):
                return x
            x[zero] = draw(int(zero.sum()))
        raise ValueError(
            f"no state of positive probability was found for {self.describe()} in {tries} "
            "uniform draws per chain; give the chains a start (x0=)."
        )

    # ----------------------------------------------------------------- the protocol
    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Unnormalised ``log p~(x)`` per chain, ``[B]`` (float64; ``-inf`` where p~ is 0)."""
        raise NotImplementedError

    def log_ratio(self, x: torch.Tensor, x_new: torch.Tensor) -> torch.Tensor:
        """``log p~(x_new) - log p~(x)`` per chain ``[B]``, for any sites changed."""
        return self.log_prob(x_new) - self.log_prob(x)

    def flip_log_ratios(self, x: torch.Tensor) -> torch.Tensor:
        """``s_i(x)`` for every site (float64), in ``x``'s layout. By default ``n + 1``
        evaluations of ``log p~`` per chain, the flips batched in groups."""
        flat = self._flat(x)
        b, n = flat.shape
        log_p = self.log_prob(flat)
        s = torch.empty_like(flat)
        group = max(1, (1 << 22) // max(1, b * n))  # states evaluated at once
        for first in range(0, n, group):
            sites = torch.arange(first, min(n, first + group), device=flat.device)
            flipped = flat.unsqueeze(1).repeat(1, len(sites), 1)  # [B, G, n]
            flipped[:, torch.arange(len(sites)), sites] *= -1.0
            log_p_flipped = self.log_prob(flipped.reshape(-1, n)).view(b, len(sites))
            s[:, sites] = log_p_flipped - log_p.unsqueeze(1)
        return s.view_as(x)

    def log_prob_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``log p~(x)`` ``[B]`` and ``grad_log_prob(x)`` (flat ``[B, n]``) together: one
        autograd pass by default, or the target's closed forms where it has them (a target that
        shares work between the two overrides this)."""
        flat = self._flat(x)
        if type(self).grad_log_prob is not Target.grad_log_prob:
            return self.log_prob(flat), self.grad_log_prob(flat)
        if not self.offers("gradient"):
            raise ValueError(f"{self.describe()} has no differentiable log p~ to take a gradient.")
        with torch.enable_grad():
            real_x = flat.detach().requires_grad_(True)
            log_p = self.log_prob(real_x)
            (grad,) = torch.autograd.grad(log_p.sum(), real_x)
        return log_p.detach(), grad

    def conditional_log_odds(self, x: torch.Tensor) -> torch.Tensor:
        """``log p(x_i = +1 | x_-i) - log p(x_i = -1 | x_-i) = -x_i s_i(x)``, in ``x``'s layout."""
        return -x.to(torch.float64) * self.flip_log_ratios(x)

    def grad_log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """``d log p~ / d x`` of a differentiable extension of ``log p~`` (float64, ``x``'s
        layout). By default autograd through ``log_prob``, which must then be written in
        differentiable operations on real ``x``: only where the target provides ``"gradient"``."""
        if not self.offers("gradient"):
            raise ValueError(f"{self.describe()} has no differentiable log p~ to take a gradient.")
        with torch.enable_grad():
            real_x = self._flat(x).detach().requires_grad_(True)
            (grad,) = torch.autograd.grad(self.log_prob(real_x).sum(), real_x)
        return grad.view_as(x)

    def block_log_probs(self, x: torch.Tensor, sites: torch.Tensor, flips: torch.Tensor):
        """``log p~`` of every candidate of a block move, ``[B, M]``: flat ``x [B, n]`` with the
        sites ``sites[b]`` (``[B, k]``) multiplied by each row of ``flips`` (``[M, k]`` of +-1).
        A target that scores such moves faster than whole states (from what it keeps per chain)
        overrides this; by default the block samplers build the candidate states and score them
        through ``log_prob`` (``samplers.block_gibbs.block_log_probs``)."""
        raise NotImplementedError

    def block_log_ratios(self, x: torch.Tensor, sites: torch.Tensor, flips: torch.Tensor):
        """``log p~(candidate) - log p~(x)`` for the candidates of ``block_log_probs``,
        ``[B, M]``: a target whose block moves cost only their block's local terms overrides
        this, and the block samplers add the chain's known ``log p~`` (no whole state scored)."""
        raise NotImplementedError

    # ----------------------------------------------------------------- incremental ratios
    def ratio_cache(self, x: torch.Tensor):
        """What the target keeps per chain to update its log-ratios fast (flat ``x [B, n]``);
        ``None`` for a target that recomputes them."""
        return None

    def flip_log_ratios_after(self, x_old: torch.Tensor, x_new: torch.Tensor, s_old, cache):
        """Flat log-ratios ``[B, n]`` at ``x_new`` and the updated cache, from those at
        ``x_old`` (any sites flipped). By default recomputed from ``x_new``."""
        return self.flip_log_ratios(x_new), cache

    # ----------------------------------------------------------------- optional
    def chain(self, b: int) -> Target:
        """The target of chain ``b`` alone (its own parameters, when there is one set per
        chain)."""
        if self.batch == 1:
            return self
        raise NotImplementedError

    def tempered(self, beta: float) -> Target:
        """``p~^beta``, where the target provides ``"tempering"``."""
        raise ValueError(f"{self.describe()} cannot be tempered (p~^beta is not of its kind).")

    def same_graph(self, other: Target) -> bool:
        """Whether a sampler of this target may go on with ``other`` (``set_target``)."""
        return other is self
