"""Titsias and Yau's Hamming ball sampler on any target (the LSB paper's HB-10-1/2/3).

A step picks a block ``S`` of ``k`` sites (as ``BlockGibbsSampler`` does) and works on the
states that agree with ``x`` off ``S``. With ``H_r(z)`` the states within Hamming distance ``r``
of ``z`` on ``S`` (``M = sum_{j <= r} C(k, j)`` of them), it

1. draws the auxiliary ``u`` uniformly from ``H_r(x)``;
2. draws the new ``x'`` from ``p`` restricted to ``H_r(u)``: ``P(x' | u) = p~(x') / sum_{y in
   H_r(u)} p~(y)``.

Since ``u in H_r(x)`` exactly when ``x in H_r(u)``, this is Gibbs sampling of the joint
``p(x) 1[u in H_r(x)] / M``, so each step leaves ``p`` invariant and, for a fixed block, is
reversible. The ball around ``u`` contains ``x``, so a chain never leaves positive mass.
``radius = block_size`` makes ``u`` irrelevant: the step is then block Gibbs.

Radius: 1 to ``block_size``. The ball has at most ``2^k`` states, never more than block Gibbs
on the same block scores, so the block size's cap (2^12 = 4096 states) already bounds the cost;
the paper's settings are ``k = 10``, ``r = 1, 2, 3``.

Evaluations (``docs/method.md``): a step scores the ``M`` states of ``H_r(u)`` (``x`` among
them): 11, 56 and 176 for HB-10-1/2/3. The paper's Table 4 gives ``C(k, r) 2^r`` (20, 180,
960): all ``2^r`` values of every choice of ``r`` of the ``k`` sites, which counts a state at
distance ``j < r`` from ``u`` ``C(k - j, r - j)`` times; ``paper_evals_per_step`` is that count.
"""

from __future__ import annotations

import math

import torch

from lsbcore.checks import integer
from lsbcore.samplers.block.block_gibbs import (
    BlockGibbsSampler,
    add_block_law,
    block_log_probs,
    flip_patterns,
    with_block,
)


def ball_patterns(k: int, r: int) -> torch.Tensor:
    """The multipliers of ``H_r`` on a ``k``-site block, ``[M, k]`` of +-1 (-1: flipped), by
    number of flips: row 0 flips nothing."""
    flips = flip_patterns(k)
    distance = (flips < 0).sum(1)
    order = torch.argsort(distance, stable=True)
    return flips[order[distance[order] <= r]]


#: The paper's HB-10-r: blocks of 10 sites, where the target has as many.
DEFAULT_BLOCK = 10


class HammingBallSampler(BlockGibbsSampler):
    """The Hamming ball sampler with blocks of ``block_size`` sites and balls of ``radius``
    (see the module docstring); blocks are chosen as ``BlockGibbsSampler`` chooses them.
    ``block_size`` unset: the paper's 10, or every site of a target with fewer (a network of
    6 variables still gets its Hamming ball, where a block of 10 cannot be drawn)."""

    name = "hamming-ball"

    def __init__(
        self,
        target,
        n_chains: int,
        block_size: int | None = None,
        radius: int = 1,
        blocks: str = "random",
        **common,
    ):
        r = integer(radius, "radius", 1, None)
        if block_size is None:
            block_size = min(DEFAULT_BLOCK, getattr(target, "n_sites", DEFAULT_BLOCK))
        super().__init__(target, n_chains, block_size=block_size, blocks=blocks, **common)
        if r > self.block_size:
            raise ValueError(
                f"radius must be between 1 and block_size ({self.block_size}), got {r}."
            )
        self.radius = r
        self._ball = ball_patterns(self.block_size, r).to(self.device)  # [M, k]
        self.set_backend(self._backend_asked)

    @property
    def ball_size(self) -> int:
        """``M = sum_{j <= r} C(k, j)``: the states of one Hamming ball on the block."""
        return self._ball.shape[0]

    @property
    def evals_per_step(self) -> int:
        """``M``: the states of the ball around ``u`` are scored (``x`` among them)."""
        return self.ball_size

    @property
    def paper_evals_per_step(self) -> int:
        """``C(k, r) 2^r``, the LSB paper's Table 4 count (the module docstring)."""
        return math.comb(self.block_size, self.radius) * 2**self.radius

    def _step(self) -> None:
        sites = self._next_sites()
        m = self.ball_size
        a = (self._uniforms(self.n_chains) * m).long().clamp_(max=m - 1)  # u uniform in H_r(x)
        u = with_block(self._x, sites, self._ball[a])
        # x = u with ball[a] applied again (a flip undoes itself): candidate a is x
        known = (a, self._log_p)
        log_w = block_log_probs(self.target, u, sites, self._ball, known)  # [B, M] over H_r(u)
        self._update_block(u, sites, self._ball, log_w, a)

    _aux = True  # compiled steps: the auxiliary state first

    def _candidates(self) -> torch.Tensor:
        return self._ball

    def _most_flips(self) -> int:
        """The auxiliary state and every candidate lie within ``radius`` flips of their base."""
        return getattr(self, "radius", 1)

    def _add_law(self, rows: torch.Tensor, sites: torch.Tensor, weight: float) -> None:
        """The block's law: the average over the ``M`` values of ``u`` of the update in
        ``H_r(u)``."""
        for a in range(self.ball_size):
            u = with_block(self._x, sites, self._ball[a].expand(self.n_chains, -1))
            add_block_law(rows, self.target, u, sites, self._ball, weight / self.ball_size)
