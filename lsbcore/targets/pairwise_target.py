"""Pairwise binary targets: the targets the compiled and device kernels serve.

A ``PairwiseTarget`` is a binary model

    log p~(x) = sum_i h_i x_i + sum_{(i, j) in E} w_ij x_i x_j,     x in {-1, +1}^n,

given by its field ``h`` (``[batch, n]``: one for all chains, or one per chain) and its
weighted edge list (an edge may repeat: the 2-wide torus is a multigraph). A subclass says how
its parameters become ``h`` and the edges and how its sites are laid out for drawing
(``shape``); this class answers the samplers' questions from them:

- ``flip_log_ratios(x)``: ``s_i(x) = log p~(x with i flipped) - log p~(x) = -2 x_i f_i(x)``,
  with the local field ``f_i = h_i + sum_j J_ij x_j``;
- ``conditional_log_odds(x)``: ``log p(x_i = +1 | rest) / p(x_i = -1 | rest) = 2 f_i(x)``, what a
  Gibbs update needs;
- ``neighbourhood`` / ``coupling`` ``[n, K]``: when site ``i`` flips, ``s_i -> -s_i`` and
  ``s_j -> s_j + coupling[i, k] x_j x_i`` (``x_i`` before the flip) for
  ``j = neighbourhood[i, k]``, ``coupling = 4 J_ij``; column 0 is the site itself, unused
  slots repeat it with coupling 0;
- ``update_ratios(x_old, x_new, s_old)``: the log-ratios after any set of sites flipped at once;
- ``log_prob(x)``, ``log_prob_from_ratios(x, s)``;
- ``colouring()``: a proper colouring of the graph, for block updates.

States may be given flat ``[B, n]`` or in the target's layout ``[B, *shape]``; results keep the
layout they were given.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from lsbcore.targets.base import MAX_LOCAL_FIELD, MAX_VALUES, Target, check_beta  # noqa: F401

#: Block candidates' numbers (``[B, G, k]``) built at once in ``block_log_ratios`` (32 MiB)
BLOCK_VALUES = 1 << 22


def flip_tables(n: int, edges: torch.Tensor, weights: torch.Tensor):
    """``neighbourhood [n, K]`` and ``coupling [n, K]`` from a weighted edge list.

    Neighbours are listed once each, their edges' weights summed (``coupling = 4 sum w``);
    unused slots repeat the site itself with coupling 0, so a sampler can gather and write a
    fixed-width neighbourhood without duplicates that disagree.
    """
    both = torch.cat([edges, edges.flip(1)])  # each edge in both directions
    w = torch.cat([weights, weights])
    keys, inverse = torch.unique(both[:, 0] * n + both[:, 1], return_inverse=True)
    total = torch.zeros(len(keys), dtype=torch.float64).index_add_(0, inverse, w)
    pairs = torch.stack([keys // n, keys % n], 1)  # sorted by site, then neighbour
    site = pairs[:, 0]
    degree = torch.bincount(site, minlength=n)
    first = torch.cumsum(degree, 0) - degree  # where each site's run of pairs starts
    slot = 1 + torch.arange(len(pairs)) - first[site]
    k = 1 + int(degree.max()) if len(pairs) else 1
    if n * k > MAX_VALUES:  # one well-connected site widens every site's row of the tables
        raise ValueError(
            f"the neighbour tables would hold {n:,} sites x {k:,} slots (the most connected site "
            f"has {k - 1:,} neighbours); at most {MAX_VALUES:,} entries are supported."
        )
    neighbourhood = torch.arange(n).unsqueeze(1).repeat(1, k)
    coupling = torch.zeros(n, k, dtype=torch.float64)
    neighbourhood[site, slot] = pairs[:, 1]
    coupling[site, slot] = 4.0 * total
    return neighbourhood, coupling


@functools.cache
def _numba_installed() -> bool:
    from lsbcore.backends import compiled_available

    return compiled_available()


class PairwiseTarget(Target):
    """A pairwise binary target (see the module docstring); subclasses call ``_build``.

    Attributes set by ``_build``: ``n_sites``, ``shape`` (layout, ``prod(shape) == n_sites``),
    ``field [batch, n]``, ``edges [E, 2]``, ``edge_weights [E]``, ``neighbourhood`` and
    ``coupling`` ``[n, K]``.
    """

    provides = frozenset({"pairwise", "incremental", "gradient", "tempering"})

    def _build(self, shape, field: torch.Tensor, edges: torch.Tensor, weights: torch.Tensor):
        self.shape = tuple(int(v) for v in shape)
        self.n_sites = int(np.prod(self.shape))
        self.field = field.reshape(-1, self.n_sites)  # [batch, n]
        self.edges = edges.long().reshape(-1, 2)
        self.edge_weights = weights.to(torch.float64).reshape(-1)
        self.neighbourhood, self.coupling = flip_tables(self.n_sites, self.edges, self.edge_weights)
        self._colouring = None
        largest = float(self.field.abs().max()) + float(self.coupling.abs().sum(1).max()) / 4.0
        if largest > MAX_LOCAL_FIELD:
            raise ValueError(
                f"the largest local field |h_i| + sum_j |J_ij| is {largest:.3g}; at most "
                f"{MAX_LOCAL_FIELD:.0e} is supported, so that the flip log-ratios (up to twice "
                "that) and log p~ stay finite."
            )

    @property
    def batch(self) -> int:
        """Number of fields: 1 (shared by every chain) or B (one per chain)."""
        return self.field.shape[0]

    def chain(self, b: int) -> PairwiseTarget:
        """The target of chain ``b`` alone (its own field, when there is one per chain)."""
        raise NotImplementedError

    def tempered(self, beta: float) -> PairwiseTarget:
        """``p~^beta``: the same graph with the field and every edge weight times ``beta``.

        ``beta = 1`` is the target itself, ``beta -> 0`` the uniform distribution (tempering's
        hot end), ``beta -> inf`` the point mass at the MAP (annealing's end).
        """
        raise NotImplementedError

    def same_graph(self, other: Target) -> bool:
        """Whether ``other`` has this target's sites and neighbour tables (weights may differ)."""
        return (
            isinstance(other, PairwiseTarget)
            and other.shape == self.shape
            and torch.equal(other.neighbourhood, self.neighbourhood)
        )

    def _field_on(self, device: torch.device) -> torch.Tensor:
        return self.field.to(device)

    def _compiled_fields(self, flat: torch.Tensor):
        """``lsbcore.backends.pairwise_fields`` where it can serve ``flat`` (on the CPU, no
        gradient, numba installed), else None. Always where it can, whether or not the warm-up
        has compiled it yet: a value must not depend on what else ran in the process (an
        experiment's workers gave other learned parameters than one process did)."""
        if flat.device.type != "cpu" or flat.requires_grad or self.field.requires_grad:
            return None
        if not _numba_installed():
            return None
        from lsbcore.backends import pairwise_fields

        return pairwise_fields

    def _table_arrays(self, flat: torch.Tensor) -> tuple:
        """``flat``, the field and the neighbour tables as the compiled passes read them."""
        field = self.field.to(torch.float64).contiguous().numpy()
        return flat.contiguous().numpy(), field, self.neighbourhood.numpy(), self.coupling.numpy()

    # ----------------------------------------------------------------- the protocol
    def local_field(self, x: torch.Tensor) -> torch.Tensor:
        """``f_i = h_i + sum_j J_ij x_j`` for every site, in ``x``'s layout."""
        flat = self._flat(x)
        compiled = self._compiled_fields(flat)
        if compiled is not None:
            out = torch.empty(flat.shape, dtype=torch.float64)
            compiled.local_fields(*self._table_arrays(flat), out.numpy())
            return out.view_as(x)
        edges = self.edges.to(flat.device)
        w = self.edge_weights.to(flat.device)
        field = self._field_on(flat.device).expand_as(flat).clone()
        field.index_add_(1, edges[:, 0], flat[:, edges[:, 1]] * w)
        field.index_add_(1, edges[:, 1], flat[:, edges[:, 0]] * w)
        return field.view_as(x)

    def flip_log_ratios(self, x: torch.Tensor) -> torch.Tensor:
        """``s_i(x) = -2 x_i f_i(x)`` for every site (float64), in ``x``'s layout."""
        return -2.0 * x.to(torch.float64) * self.local_field(x)

    def log_prob_and_flip_log_ratios(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log_prob(x), flip_log_ratios(x))``, the same values, from one compiled pass over
        the tables where it serves ``x`` (a block sampler's resync needs both)."""
        flat = self._flat(x)
        compiled = self._compiled_fields(flat)
        if compiled is None:
            return self.log_prob(x), self.flip_log_ratios(x)
        log_p = torch.empty(flat.shape[0], dtype=torch.float64)
        s = torch.empty(flat.shape, dtype=torch.float64)
        compiled.log_probs_and_flip_ratios(*self._table_arrays(flat), log_p.numpy(), s.numpy())
        return log_p, s.view(x.shape)

    def grad_log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """``d log p~ / d x = f(x)``, the local field: ``log p~`` is multilinear, so its
        first-order flip estimate ``-2 x_i f_i`` is exact."""
        return self.local_field(x)

    def flip_log_ratios_after(self, x_old: torch.Tensor, x_new: torch.Tensor, s_old, cache):
        return self.update_ratios(x_old, x_new, s_old), cache

    def conditional_log_odds(self, x: torch.Tensor) -> torch.Tensor:
        """``log p(x_i = +1 | x_-i) - log p(x_i = -1 | x_-i) = 2 f_i(x)``, in ``x``'s layout."""
        return 2.0 * self.local_field(x)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Unnormalised ``log p~(x)`` per chain, ``[B]`` (float64)."""
        flat = self._flat(x)
        compiled = self._compiled_fields(flat)
        if compiled is not None:
            out = torch.empty(flat.shape[0], dtype=torch.float64)
            compiled.log_probs(*self._table_arrays(flat), out.numpy())
            return out
        edges = self.edges.to(flat.device)
        data = (self._field_on(flat.device) * flat).sum(1)
        pairs = flat[:, edges[:, 0]] * flat[:, edges[:, 1]]
        return data + pairs @ self.edge_weights.to(flat.device)

    def block_log_ratios(self, x: torch.Tensor, sites: torch.Tensor, flips: torch.Tensor):
        """``log p~(y) - log p~(x)`` for every candidate ``y``: flat ``x [B, n]`` with the
        distinct sites ``sites[b]`` (``[B, k]``) multiplied by each row of ``flips``
        (``[M, k]``), ``[B, M]``.

        With ``d = y - x`` (nonzero only on the block), ``log p~ = h.x + x^T J x / 2`` gives
        ``d . f_S(x) + sum_{a<c in S} J_ac d_a d_c``: the block's local fields and the couplings
        inside it, O(k K + M k^2) per chain instead of ``M`` whole states. Row 0 of
        ``flips`` all +1 scores exactly 0.
        """
        flat = self._flat(x)
        b, k = sites.shape
        device = flat.device
        neighbours = self.neighbourhood.to(device)[sites]  # [B, k, K]
        j = 0.25 * self.coupling.to(device)[sites]  # [B, k, K]: J between a site and each
        x_s = flat.gather(1, sites)  # [B, k]
        h_s = self._field_on(device).expand(b, -1).gather(1, sites)
        around = flat.gather(1, neighbours.view(b, -1)).view_as(j)
        field = h_s + (j * around).sum(2)  # f_S(x), the block's own sites included
        inside = neighbours.unsqueeze(2) == sites[:, None, :, None]  # [B, k, k, K]
        j_block = (j.unsqueeze(2) * inside).sum(3)  # [B, k, k]: J_ac, zero diagonal
        out = torch.empty(b, flips.shape[0], dtype=torch.float64, device=device)
        group = max(1, BLOCK_VALUES // (b * k))  # candidates scored at once
        for first in range(0, flips.shape[0], group):
            chunk = flips[first : first + group].to(device)
            d = x_s.unsqueeze(1) * (chunk.unsqueeze(0) - 1.0)  # [B, G, k]: 0 or -2 x
            pairs = 0.5 * (torch.bmm(d, j_block) * d).sum(2)
            out[:, first : first + chunk.shape[0]] = (d * field.unsqueeze(1)).sum(2) + pairs
        return out

    def block_log_probs(self, x: torch.Tensor, sites: torch.Tensor, flips: torch.Tensor):
        """``log p~(x)`` once plus ``block_log_ratios``: one whole-state score per chain, not
        one per candidate."""
        flat = self._flat(x)
        return self.log_prob(flat).unsqueeze(1) + self.block_log_ratios(flat, sites, flips)

    def log_prob_from_ratios(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """``log p~(x)`` ``[B]`` from flat states ``x`` and their log-ratios ``s`` ``[B, n]``.

        ``sum_i s_i = -2 sum_i h_i x_i - 4 sum_E w_ij x_i x_j``, so ``log p~ = (sum_i h_i x_i) / 2
        - (sum_i s_i) / 4``: two sums, no neighbour lookups.
        """
        return 0.5 * (self._field_on(x.device) * x).sum(1) - 0.25 * s.sum(1)

    def update_ratios(self, x_old: torch.Tensor, x_new: torch.Tensor, s_old: torch.Tensor):
        """Flat log-ratios ``[B, n]`` at ``x_new`` from those at ``x_old``, any sites flipped.

        ``f = -s x / 2`` before; the flips change it by ``sum_j J_ij (x'_j - x_j)``; then
        ``s' = -2 x' f'``. O(B n K) through the neighbour tables.
        """
        index = self.neighbourhood.to(x_old.device)
        j = self.coupling.to(x_old.device) * 0.25  # [n, K]: J_ij (coupling = 4 J)
        change = ((x_new - x_old)[:, index] * j).sum(2)  # [B, n]
        field = -0.5 * s_old * x_old + change
        return -2.0 * x_new * field

    def colouring(self) -> torch.Tensor:
        """A proper colouring ``[n]`` (int64) of the neighbour graph: no edge joins two sites
        of one colour, so the sites of a colour are independent given the rest. Greedy, in
        site order (on a bipartite lattice that is the checkerboard)."""
        if self._colouring is None:
            self._colouring = torch.from_numpy(greedy_colouring(self.neighbourhood.numpy()))
        return self._colouring


def greedy_colouring(neighbourhood: np.ndarray) -> np.ndarray:
    """Each site in turn takes the smallest colour none of its earlier neighbours has."""
    n = neighbourhood.shape[0]
    colour = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        taken = {int(colour[j]) for j in neighbourhood[i, 1:] if j != i and colour[j] >= 0}
        c = 0
        while c in taken:
            c += 1
        colour[i] = c
    return colour
