"""Learned block proposals, exact by Metropolis-Hastings: the ``neural-block`` sampler.

A step picks an offset of the ``k``-tiling and one colour of its tiles
(``lsbcore.methods.block_proposals.tiling``)
and, in every tile ``B`` of that colour at once,

1. reads the tile's context ``c`` (``lsbcore.methods.block_proposals.motif``: its interactions and
the pull of its
   boundary; a function of the sites outside ``B`` only);
2. proposes ``y_B ~ q(. | c)`` from the network (``lsbcore.methods.block_proposals.proposal``);
3. accepts with probability ``min(1, p~(y) q(x_B | c) / (p~(x) q(y_B | c)))``, the target ratio
   exact (``log_ratios`` of the target's block context).

Because ``c`` does not read ``B``, the reverse move has the same context, and step 3 is the
Metropolis-Hastings test of an independence proposal on ``p(x_B | x_-B)``: each tile's update is
reversible with respect to ``p`` whatever ``q`` is, as long as ``q > 0`` (an autoregressive
logit is never infinite). A poor network lowers the acceptance, never the exactness.

Evaluations (``docs/method.md``): a tile's move is one target ratio over its ``k^2`` sites; a
step counts the sites of the tiles it updates, as checkerboard Gibbs counts its sweep's sites.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from lsbcore.methods.block_proposals.exact_proposal import ExactBlockProposal
from lsbcore.methods.block_proposals.motif import check_side
from lsbcore.methods.block_proposals.pairwise_context import PairwiseBlocks
from lsbcore.methods.block_proposals.proposal import BlockProposal, load_proposal
from lsbcore.methods.block_proposals.tiling import Blocks, Tiling, grid_shape, interaction_pairs
from lsbcore.samplers.batched import BatchedSampler
from lsbcore.samplers.chain_base import StepInfo
from lsbcore.targets.factor_graph import FactorGraph
from lsbcore.targets.pairwise_target import PairwiseTarget

ASSETS = Path(__file__).resolve().parents[3] / "assets"
#: Which network proposes: the shipped meta-trained one, or the untrained start (its correction
#: zero: the last-site conditionals alone), which shows that exactness does not rest on training;
#: or "exact", the enumerated block conditional itself: block Gibbs on the same tiles.
WEIGHTS = ("trained", "untrained", "exact")
#: Enumerated transition laws: at most this many sites.
MAX_EXACT_SITES = 16


def weights_file(k: int) -> Path:
    """Where the shipped meta-trained proposal for ``k x k`` blocks lies."""
    return ASSETS / f"neural_block_k{k}.pt"


def shipped_proposal(k: int, weights: str = "trained") -> BlockProposal:
    """The proposal for ``k x k`` blocks: the shipped trained weights, or an untrained network."""
    k = check_side(k)
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}.")
    if weights == "untrained":
        return BlockProposal(k).eval().requires_grad_(False)
    if weights == "exact":
        return ExactBlockProposal(k)
    path = weights_file(k)
    if not path.is_file():
        raise ValueError(
            f"no trained proposal for {k} x {k} blocks ships at {path.name}; train one with "
            f"python -m lsbcore.methods.block_proposals.train --block-size {k}."
        )
    proposal = load_proposal(path)
    if proposal.k != k:
        raise ValueError(f"{path.name} holds a proposal for {proposal.k} x {proposal.k} blocks.")
    return proposal


def grid_refusal(target, k: int = 2) -> str | None:
    """Why ``neural-block`` cannot run on ``target`` (not a grid of pairwise or factor-graph
    terms, or smaller than a block), in a sentence; None when it can."""
    if not isinstance(target, (PairwiseTarget, FactorGraph)):
        return (
            "neural-block runs on pairwise lattices and grid factor graphs, not on "
            f"{target.describe()}."
        )
    try:
        grid_shape(target, k)
    except ValueError as err:
        return str(err)
    return None


def block_context(target, motif, tiling: Tiling):
    """The object that turns ``target``'s tiles into motif coefficients and exact ratios."""
    if isinstance(target, PairwiseTarget):
        return PairwiseBlocks(target, motif, tiling)
    if isinstance(target, FactorGraph):
        from lsbcore.methods.block_proposals.factor_context import FactorBlocks

        return FactorBlocks(target, motif, tiling)
    raise ValueError(
        "neural-block runs on pairwise lattices and grid factor graphs, not on "
        f"{target.describe()}."
    )


class NeuralBlockSampler(BatchedSampler):
    """Learned block proposals on ``k x k`` tiles (see the module docstring).

    ``block_size`` is ``k`` (2, 3 or 4); ``weights`` picks the shipped network (``WEIGHTS``), or
    ``proposal`` gives any ``BlockProposal`` of that size. Beyond the base's ``x`` and ``log p~``
    (exact to rounding after every step: a move adds its tiles' exact ratios), it counts the
    tiles proposed and accepted per chain (``block_accept_rate``).
    """

    name = "neural-block"
    uses_ratios = False

    def __init__(
        self,
        target,
        n_chains: int,
        block_size: int = 2,
        weights: str = "trained",
        proposal: BlockProposal | ExactBlockProposal | None = None,
        **common,
    ):
        k = check_side(block_size)
        grid = grid_shape(target, k)
        super().__init__(target, n_chains, **common)
        self.weights = weights if proposal is None else "given"
        if proposal is None:
            proposal = shipped_proposal(k, weights)
        if not isinstance(proposal, (BlockProposal, ExactBlockProposal)) or proposal.k != k:
            raise ValueError(f"proposal must be a BlockProposal for {k} x {k} blocks.")
        self.block_size = k
        # float64, so that log q is one number forwards and backwards (the proposal's docstring)
        self.proposal = proposal.to(self.device, torch.float64).eval().requires_grad_(False)
        self.motif = proposal.motif
        self.tiling = Tiling(grid, k, interaction_pairs(target))
        self.context = block_context(target, self.motif, self.tiling)
        self._selections: dict[tuple[int, int], Blocks] = {}
        self.last_selection: tuple[int, int] | None = None  # the last step's (offset, colour)
        self.sites_per_step = k * k
        self._n_proposed = torch.zeros(self.n_chains, dtype=torch.int64, device=self.device)
        self._n_block_accepted = torch.zeros_like(self._n_proposed)

    @property
    def evals_per_step(self) -> int:
        """The sites of the tiles the last step updated (one ratio over each tile's sites)."""
        return self.sites_per_step

    def selection(self, offset: int, colour: int) -> Blocks:
        """The tiles of ``colour`` at ``offset``, on the sampler's device (cached)."""
        key = (offset, colour)
        if key not in self._selections:
            chosen = self.tiling.blocks(offset).of_colour(colour)
            self._selections[key] = Blocks(
                chosen.tops.to(self.device), chosen.sites.to(self.device), chosen.colour
            )
        return self._selections[key]

    def _pick(self) -> Blocks:
        """This step's tiles: an offset, then one of its colours, uniformly."""
        n_offsets = len(self.tiling.offsets)
        u_offset, u_colour = self._uniforms(2).tolist()  # one host read a step
        offset = int(u_offset * n_offsets)
        colours = self.tiling.blocks(offset).n_colours
        colour = int(u_colour * colours)
        self.last_selection = (offset, colour)
        return self.selection(offset, colour)

    def _step(self) -> None:
        blocks = self._pick()
        b, n_tiles, m = self.n_chains, len(blocks.tops), self.motif.n
        self.sites_per_step = n_tiles * m
        if n_tiles == 0:  # an offset with no whole tile of this colour: the identity
            self._last = None
            return
        x = self._x
        c = self.context.coefficients(x, blocks)  # [B, T, terms]
        x_b = x[:, blocks.sites]  # [B, T, k^2]
        # every tile of the colour in every chain: one batch, the context read once for the
        # draw and both log q
        y, log_q_y, log_q_x = self.proposal.propose(
            c.reshape(b * n_tiles, -1), x_b.reshape(-1, m), self.generator
        )
        y = y.view(b, n_tiles, m)
        log_ratio = self.context.log_ratios(x, blocks, y, c)  # [B, T]
        log_alpha = log_ratio + (log_q_x - log_q_y).view(b, n_tiles)
        accept = torch.log(self._uniforms(b, n_tiles)) < log_alpha  # [B, T]
        x_new = x.clone()
        x_new[:, blocks.sites] = torch.where(accept.unsqueeze(-1), y, x_b)
        gain = torch.where(accept, log_ratio, 0.0).sum(1)
        self._move(x_new, torch.ones(b, dtype=torch.bool, device=self.device), gain)
        self._n_proposed += n_tiles
        self._n_block_accepted += accept.sum(1)
        accept_prob = log_alpha.clamp(max=0.0).exp().mean(1)
        self._last = StepInfo(
            accept_prob=accept_prob,
            accepted=accept.any(1),
            extra={"tiles": accept},
        )

    @property
    def block_accept_rate(self) -> float:
        """Tiles accepted over tiles proposed, over all chains and steps so far."""
        proposed = int(self._n_proposed.sum())
        return float("nan") if proposed == 0 else int(self._n_block_accepted.sum()) / proposed

    # ----------------------------------------------------------------- the exact law
    def tile_moves(self, blocks: Blocks) -> list[torch.Tensor]:
        """For each tile of ``blocks``, the probability that one step's update of that tile
        takes every chain's tile to each block state (``motif.states``), ``[B, 2^(k^2)]``: the
        functions the step uses, scored on every block state (``proposal.all_log_probs``)
        instead of one draw. A tile's law does not depend on the other tiles of its colour (no
        term joins them), so a selection's law is the product of these."""
        if self.n_sites > MAX_EXACT_SITES:
            raise ValueError(f"the exact law enumerates states: at most {MAX_EXACT_SITES} sites.")
        x = self._x
        states = self.motif.states.to(self.device)  # [M, k^2]
        moves = []
        with torch.no_grad():
            c = self.context.coefficients(x, blocks)  # [B, T, terms]
            for t in range(len(blocks.tops)):
                sites = blocks.sites[t]
                c_t = c[:, t]  # [B, terms]
                # chains share contexts (those of the sites outside the tile): score each once
                unique, which = torch.unique(c_t, dim=0, return_inverse=True)
                log_q = self.proposal.all_log_probs(unique)[which]  # [B, M]
                now = self.motif.codes(x[:, sites]).unsqueeze(1)  # [B, 1]
                log_q_x = log_q.gather(1, now)
                if isinstance(self.context, PairwiseBlocks):  # the ratio is exact from c
                    log_w = c_t @ self.motif.state_features.to(c_t).T  # [B, M]
                    log_ratio = log_w - log_w.gather(1, now)
                else:
                    m = len(states)
                    tile = Blocks(blocks.tops[t].expand(m, -1), sites.expand(m, -1),
                                  blocks.colour[:1].expand(m))  # fmt: skip
                    y = states.unsqueeze(0).expand(self.n_chains, -1, -1)  # [B, M, k^2]
                    c_rep = c_t.unsqueeze(1).expand(-1, m, -1)
                    log_ratio = self.context.log_ratios(x, tile, y, c_rep)  # [B, M]: each alone
                log_alpha = (log_ratio + log_q_x - log_q).clamp(max=0.0)
                move = (log_q + log_alpha).exp().scatter(1, now, 0.0)  # [B, M]
                moves.append(move.scatter(1, now, 1.0 - move.sum(1, keepdim=True)))
        return moves

    def tile_law(self, blocks: Blocks) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``tile_moves`` as ``(chain, state code, probability)`` triples over whole states
        (state codes of ``lsbcore.exact.states``), for sparse matrices."""
        powers = 2 ** torch.arange(self.n_sites, device=self.device)
        now = ((self._x > 0).long() * powers).sum(1, keepdim=True)  # [B, 1] state codes
        up = (self.motif.states.to(self.device) > 0).long()  # [M, k^2]
        chains = torch.arange(self.n_chains).unsqueeze(1).expand(-1, len(up))
        laws = []
        for sites, move in zip(blocks.sites, self.tile_moves(blocks), strict=True):
            bits = (up * powers[sites]).sum(1)  # [M]: the tile's sites set as each state says
            codes = (now & ~int(powers[sites].sum())) | bits.unsqueeze(0)  # [B, M]
            laws.append((chains.reshape(-1).numpy(), codes.reshape(-1).cpu().numpy(),
                         move.reshape(-1).cpu().numpy()))  # fmt: skip
        return laws

    def transition_probabilities(self) -> torch.Tensor:
        """The law of every chain's next state, ``[B, 2^n]`` float64 (columns: state codes of
        ``lsbcore.exact.states``; tiny targets, ``n <= 12``): the average over the step's
        selections of the product of their tiles' updates."""
        from lsbcore.exact.states import MAX_SITES

        if self.n_sites > MAX_SITES:
            raise ValueError(f"transition_probabilities: at most {MAX_SITES} sites.")
        powers = 2 ** torch.arange(self.n_sites, device=self.device)
        start = ((self._x > 0).long() * powers).sum(1, keepdim=True)  # [B, 1]
        rows = torch.zeros(self.n_chains, 2**self.n_sites, dtype=torch.float64)
        n_offsets = len(self.tiling.offsets)
        for offset in range(n_offsets):
            colours = self.tiling.blocks(offset).n_colours
            if colours == 0:  # no whole tile: the step stays
                rows.scatter_add_(
                    1, start, torch.full(start.shape, 1.0 / n_offsets, dtype=rows.dtype)
                )
                continue
            for colour in range(colours):
                blocks = self.selection(offset, colour)
                law = torch.zeros_like(rows).scatter_(1, start, 1.0)
                for sites, move in zip(blocks.sites, self.tile_moves(blocks), strict=True):
                    law = self._move_tile(law, sites, move)
                rows += law / (n_offsets * colours)
        return rows

    def _move_tile(self, law: torch.Tensor, sites: torch.Tensor, move: torch.Tensor):
        """``law [B, 2^n]`` after the tile ``sites`` moves to block state ``m`` with
        probability ``move[:, m]``, whatever the rest of the state."""
        codes = torch.arange(law.shape[1])
        mask = int((2**sites).sum())
        states = self.motif.states  # [M, k^2]
        out = torch.zeros_like(law)
        for m in range(len(states)):
            bits = int(((states[m] > 0).long() * 2**sites).sum())
            out.index_add_(1, (codes & ~mask) | bits, law * move[:, m : m + 1])
        return out
