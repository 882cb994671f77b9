"""Block Gibbs on any target: a block of ``k`` sites resampled exactly from its conditional.

A step picks a block ``S`` of ``k`` sites and scores every one of the ``2^k`` states that agree
with ``x`` off ``S``; the new state is drawn from

    p(y_S | x_-S) = p~(y) / sum_{y'_S} p~(y'),        y = (y_S, x_-S),

which leaves ``p`` invariant and is reversible for a fixed block. The paper's Gibbs-2/4/10
(Table 4: 4, 16 and 1024 evaluations per step) are this step with ``k = 2, 4, 10``.

Blocks (``blocks=``):

- ``"random"``: ``k`` distinct sites drawn uniformly, afresh for each chain and step. A mixture
  of reversible block updates, so the step is reversible.
- ``"sweep"``: fixed consecutive blocks ``{jk, ..., jk + k - 1}`` (mod ``n``) taken in order,
  ``ceil(n / k)`` of them per sweep; when ``k`` does not divide ``n`` the last block wraps round
  to the first sites, so every step scores exactly ``2^k`` states. Each step leaves ``p``
  invariant; a whole sweep does too, but is not reversible.
- ``"shuffled"``: the same consecutive blocks, of a random permutation of the sites that each
  chain draws afresh at the start of every sweep: the choice of the public Gibbs-with-Gradients
  code, whose block samplers the LSB paper ran for Gibbs-2/4/10 and HB-10-r (there one
  permutation serves all chains). Every site is updated at least once a sweep, in a random
  order, and the sites are chosen by one ``[B, n]`` sort per sweep rather than a ``[B, n]``
  selection per step.

On a pairwise target the candidates' ``log p~`` are the chain's own plus the block's local
differences (``PairwiseTarget.block_log_ratios``: its sites' fields and the couplings that
touch them); an RBM scores them from its hidden pre-activations; any other target through one
``target.log_prob`` call on ``[B * M, n]`` states, chunked so that no more than
``MAX_CANDIDATE_VALUES`` numbers are built at once (``k = 12`` on 800 sites with 100 chains is
3.3e8 of them). ``HammingBallSampler`` reuses these functions:
its step is a block update restricted to a Hamming ball.

Evaluations (``docs/method.md``): a step scores ``2^k`` states, the current one included.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from lsbcore.checks import integer
from lsbcore.samplers.batched import (
    BatchedSampler,
    factor_graph_compiled_refusal,
    rbm_compiled_refusal,
)
from lsbcore.samplers.chain_base import StepInfo
from lsbcore.samplers.factor_graph_kernel import keep, still_kept
from lsbcore.targets.base import Target
from lsbcore.targets.factor_graph import FactorGraph
from lsbcore.targets.pairwise_target import PairwiseTarget

#: Largest block: 2^12 = 4096 states scored per chain and step.
MAX_BLOCK = 12
#: Candidate states' numbers built at once (2^22 float64: 32 MiB), before ``log_prob`` sees them.
MAX_CANDIDATE_VALUES = 1 << 22
#: How blocks are chosen (the module docstring).
BLOCK_CHOICES = ("random", "sweep", "shuffled")
#: Enumerated transition probabilities: at most this many sites (2^12 states).
MAX_EXACT_SITES = 12


# ----------------------------------------------------------------- the block update
def flip_patterns(k: int) -> torch.Tensor:
    """Every multiplier of a ``k``-site block, ``[2^k, k]`` of +-1: bit ``j`` of row ``m`` set
    means site ``j`` flipped (-1). Row 0 flips nothing, so candidate 0 is the current state."""
    bits = (torch.arange(2**k).unsqueeze(1) >> torch.arange(k)) & 1
    return (1 - 2 * bits).to(torch.float64)


def block_states(x: torch.Tensor, sites: torch.Tensor, flips: torch.Tensor) -> torch.Tensor:
    """``x`` (``[B, n]``) with ``sites[b]`` (``[B, k]``) multiplied by each of ``flips``
    (``[M, k]``): the candidates ``[B, M, n]``."""
    b, m = x.shape[0], flips.shape[0]
    new = x.gather(1, sites).unsqueeze(1) * flips.unsqueeze(0)  # [B, M, k]
    states = x.unsqueeze(1).repeat(1, m, 1)
    return states.scatter_(2, sites.unsqueeze(1).expand(b, m, -1), new)


def block_log_probs(
    target, x: torch.Tensor, sites: torch.Tensor, flips: torch.Tensor, known=None
) -> torch.Tensor:
    """``log p~`` of every candidate of ``block_states``, ``[B, M]``.

    ``known = (index [B], log_p [B])`` says candidate ``index[b]`` of chain ``b`` is a state
    whose ``log p~`` the sampler keeps (its current one): a target with ``block_log_ratios``
    (pairwise) then scores only the block's local terms, and the ratios are shifted to agree
    with ``log_p`` there. Else the target's own ``block_log_probs`` (an RBM's), else whole
    candidate states through ``log_prob``, in chunks of at most ``MAX_CANDIDATE_VALUES``
    numbers."""
    if known is not None and type(target).block_log_ratios is not Target.block_log_ratios:
        index, log_p = known
        ratios = target.block_log_ratios(x, sites, flips)
        at_known = ratios.gather(1, index.unsqueeze(1)).squeeze(1)  # 0 where index is 0
        return ratios + (log_p - at_known).unsqueeze(1)
    if type(target).block_log_probs is not Target.block_log_probs:  # the target's own scoring
        return target.block_log_probs(x, sites, flips)
    b, n = x.shape
    m = flips.shape[0]
    group = max(1, MAX_CANDIDATE_VALUES // (b * n))  # candidates per chain in one chunk
    out = torch.empty(b, m, dtype=torch.float64, device=x.device)
    for first in range(0, m, group):
        chunk = flips[first : first + group]
        states = block_states(x, sites, chunk)  # [B, G, n]
        g = chunk.shape[0]
        if target.batch == 1:
            out[:, first : first + g] = target.log_prob(states.reshape(b * g, n)).view(b, g)
        else:  # one parameter set per chain: score each candidate's [B, n] in turn
            for j in range(g):
                out[:, first + j] = target.log_prob(states[:, j])
    return out


def with_block(x: torch.Tensor, sites: torch.Tensor, flip: torch.Tensor) -> torch.Tensor:
    """``x`` (``[B, n]``) with ``sites`` (``[B, k]``) multiplied by ``flip`` (``[B, k]``)."""
    return x.scatter(1, sites, x.gather(1, sites) * flip)


def weights_of(log_w: torch.Tensor) -> torch.Tensor:
    """``p~`` of the candidates up to a factor per row, ``[B, M]``: ``exp(log_w - max)``, so the
    largest is 1 and ``-inf`` (zero probability) gives 0."""
    return torch.exp(log_w - log_w.max(1, keepdim=True).values)


def draw_index(w: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """One index per row of the weights ``w`` (``[B, M]``, ``>= 0``, one positive per row) with
    probability ``w / sum(w)``, by inverse CDF on ``u`` (``[B]``, in ``[0, 1]``).

    The first positive-weight index whose CDF reaches ``u`` times the CDF at the last positive
    weight: that one always qualifies, and a zero weight is never drawn, even where a parallel
    scan rounds the CDF unevenly."""
    cdf = w.cumsum(1)
    positive = w > 0
    total = (cdf * positive).amax(1, keepdim=True)  # the CDF at the last positive weight
    above = (cdf >= u.unsqueeze(1) * total) & positive
    return above.to(torch.int8).argmax(1)  # the first True (argmax returns the first maximum)


def state_codes_of(states: torch.Tensor) -> torch.Tensor:
    """The state code (``lsbcore.exact.states``: bit ``i`` set where site ``i`` is +1) of every
    state ``[..., n]``, on its device."""
    n = states.shape[-1]
    powers = 2 ** torch.arange(n, device=states.device)
    return ((states > 0).long() * powers).sum(-1)


def add_block_law(rows, target, x, sites, flips, weight: float) -> None:
    """Add ``weight`` times the law of one block update (the step's conditional over the
    candidates ``flips`` on ``sites``) to ``rows`` (``[B, 2^n]``, columns state codes)."""
    q = torch.softmax(block_log_probs(target, x, sites, flips), 1)  # [B, M]
    codes = state_codes_of(block_states(x, sites, flips))  # [B, M]
    rows.scatter_add_(1, codes, weight * q)


def pairwise_block_refusal(sampler) -> str | None:
    """None where ``block_kernels`` can run the block sampler ``sampler`` on its pairwise
    target (on the CPU, numba installed), else why not, in a sentence."""
    from lsbcore.backends import compiled_available

    if sampler.device.type != "cpu":
        return "the compiled backend runs on the CPU only; use backend='torch' on a GPU."
    if not compiled_available():
        return "the compiled backend needs numba; install it or use backend='torch'."
    return None


def check_block_size(block_size, n_sites: int) -> int:
    k = integer(block_size, "block_size", 1, MAX_BLOCK)
    if k > n_sites:
        raise ValueError(f"block_size must be at most the number of sites ({n_sites}), got {k}.")
    return k


def check_exact_size(n_sites: int) -> None:
    if n_sites > MAX_EXACT_SITES:
        raise ValueError(
            "transition_probabilities enumerates all 2^n states: at most "
            f"{MAX_EXACT_SITES} sites, got {n_sites}."
        )


class BlockGibbsSampler(BatchedSampler):
    """Block Gibbs with blocks of ``block_size`` sites (see the module docstring).

    State beyond the base's ``x`` and ``log p~``: for ``"sweep"`` and ``"shuffled"``, the
    position of the next block in the sweep, and for ``"shuffled"`` each chain's order of the
    sites (``[B, n]``). ``log p~`` of the new state is taken from the drawn candidate's score, so
    it is exact to rounding after every step.
    """

    name = "block-gibbs"
    uses_ratios = False
    #: A step's trace names no site, even of a one-site block: a comparison adds the states to
    #: the marginals, not the flips (``Comparison._advance_recording``).
    moves_one_site = False

    def __init__(
        self, target, n_chains: int, block_size: int | None = None, blocks: str = "random",
        **common,
    ):  # fmt: skip
        if block_size is None:  # 2, or the one site of a one-variable target
            block_size = min(2, getattr(target, "n_sites", 2))
        if blocks not in BLOCK_CHOICES:
            raise ValueError(f"blocks must be one of {BLOCK_CHOICES}, got {blocks!r}.")
        k = integer(block_size, "block_size", 1, MAX_BLOCK)
        super().__init__(target, n_chains, **common)
        self.block_size = check_block_size(k, self.n_sites)
        self.blocks = blocks
        self.sites_per_step = self.block_size
        self._flips = flip_patterns(self.block_size).to(self.device)  # [2^k, k]
        starts = range(0, self.n_sites, self.block_size)
        self.sweep_blocks = tuple(
            torch.arange(j, j + self.block_size, device=self.device) % self.n_sites for j in starts
        )  # ceil(n / k) blocks of k sites; the last wraps round
        self._position = 0  # the next block of the sweep
        self._order = None  # "shuffled": each chain's permutation of the sites, [B, n]
        self._no_flip = torch.zeros(self.n_chains, dtype=torch.long, device=self.device)
        self.set_backend(self._backend_asked)  # the compiled steps depend on the block

    @property
    def evals_per_step(self) -> int:
        """``2^k``: every state of the block is scored (the paper's Table 4 counts the same)."""
        return 2**self.block_size

    def _next_sites(self) -> torch.Tensor:
        """The block of every chain for this step, ``[B, k]`` (advances the sweep)."""
        if self.blocks == "random":  # the k largest of n uniforms: a uniform k-subset per chain
            u = self._uniforms(self.n_chains, self.n_sites)
            return torch.topk(u, self.block_size, dim=1, sorted=False).indices
        if self.blocks == "shuffled" and self._position == 0:
            self._order = self._uniforms(self.n_chains, self.n_sites).argsort(1)
        slots = self.sweep_blocks[self._position]
        self._position = (self._position + 1) % len(self.sweep_blocks)
        if self.blocks == "sweep":
            return slots.expand(self.n_chains, -1)
        return self._order[:, slots]

    def _step(self) -> None:
        sites = self._next_sites()
        known = (self._no_flip, self._log_p)  # candidate 0 is x
        log_w = block_log_probs(self.target, self._x, sites, self._flips, known)  # [B, 2^k]
        self._update_block(self._x, sites, self._flips, log_w, self._no_flip)

    def _update_block(self, base, sites, flips, log_w, current) -> None:
        """Move to ``base`` with ``sites`` multiplied by ``flips[m]``, ``m`` drawn from
        ``softmax(log_w)`` (``[B, M]``: the candidates' ``log p~``); ``current [B]`` is the index
        of the current ``x`` among the candidates."""
        w = weights_of(log_w)
        choice = draw_index(w, self._uniforms(self.n_chains))  # [B]
        x_new = with_block(base, sites, flips[choice])
        moved = choice != current
        log_ratio = log_w.gather(1, choice.unsqueeze(1)).squeeze(1) - self._log_p
        stay = w.gather(1, current.unsqueeze(1)).squeeze(1) / w.sum(1)
        self._move(x_new, moved, log_ratio)
        self._last = StepInfo(sites=sites, accept_prob=1.0 - stay, accepted=moved)

    # ----------------------------------------------------------------- compiled steps
    _aux = False  # the Hamming ball's auxiliary draw

    @property
    def compiled_uniforms_per_step(self) -> int:
        """Per chain: the block's (``k``; ``n`` a sweep for "shuffled"), one for the auxiliary
        state (Hamming ball), one for the draw."""
        if self.blocks == "random":
            picks = self.block_size
        else:
            picks = 0 if self.blocks == "sweep" else -(-self.n_sites // len(self.sweep_blocks))
        return picks + 1 + self._aux

    def _candidates(self) -> torch.Tensor:
        """The multipliers a step chooses among (``[M, k]``, row 0 the identity)."""
        return self._flips

    def compiled_refusal(self) -> str | None:
        if isinstance(self.target, PairwiseTarget):
            return pairwise_block_refusal(self)
        if isinstance(self.target, FactorGraph):
            return factor_graph_compiled_refusal(self)
        return rbm_compiled_refusal(self, self._most_flips())

    def _most_flips(self) -> int:
        """Sites one move flips at most (1 until the block size is set)."""
        return getattr(self, "block_size", 1)

    def _compiled_steps(self, n: int, trace, truth) -> None:
        """``n`` steps on an RBM by ``rbm_kernels.block_steps``, on a pairwise target by
        ``block_kernels.pairwise_block_steps``, on a factor graph by
        ``factor_block_kernels.factor_block_steps``. "sweep" and "shuffled" read the torch step's
        uniforms as it reads them (the same chains); "random" picks each block from ``k``
        uniforms (``rbm_kernels.pick_block``; on a pairwise target ``block_kernels.pick_apart``):
        the torch step's law, other draws."""
        from lsbcore.backends.rbm_kernels import BLOCK_MODES, block_layout, block_steps

        pairwise = isinstance(self.target, PairwiseTarget)
        factors = isinstance(self.target, FactorGraph)
        arrays = None if pairwise or factors else self.target.kernel_arrays()
        mode = BLOCK_MODES.index(self.blocks)
        layout, sweeps, count, position = block_layout(
            n, self.n_chains, self.n_sites, self.block_size, mode, self._aux, self._position,
            len(self.sweep_blocks),
        )  # fmt: skip
        u = self._uniforms(count)
        x, log_p, accepted = self._x.clone(), self._log_p.clone(), self._n_accepted.clone()
        # "shuffled": the order before these steps, then each new sweep's, argsorted as the
        # torch step argsorts them
        b, n_sites = self.n_chains, self.n_sites
        if self.blocks == "shuffled":
            old = self._order if self._order is not None else torch.zeros(b, n_sites).long()
            orders = torch.stack(
                [old, *(u[at : at + b * n_sites].view(b, n_sites).argsort(1) for at in sweeps)]
            )
        else:  # not read
            orders = torch.zeros(1, 1, 1, dtype=torch.long)
        sites = torch.empty(self.n_chains, self.block_size, dtype=torch.int64)
        last = torch.empty(2, self.n_chains, dtype=torch.float64)
        blocks = self._sweep_blocks_array()
        if pairwise:  # the chains' flip log-ratios, moved with every flip of the steps
            from lsbcore.backends import block_kernels

            s = self._flip_ratios(x)
            arrays = (
                x.numpy(), s.numpy(), log_p.numpy(), accepted.numpy(), u.numpy(), layout, mode,
                blocks, orders.numpy(), self._candidates().numpy(), self._aux,
                *self._pairwise_tables(), sites.numpy(), last.numpy(), trace, truth,
            )  # fmt: skip
            self._run_in_groups(block_kernels.pairwise_block_steps, arrays, n)
        elif factors:
            from lsbcore.backends.factor_block_kernels import factor_block_steps
            from lsbcore.samplers.factor_graph_kernel import factor_tables

            arrays = (
                x.numpy(), log_p.numpy(), accepted.numpy(), u.numpy(), layout, mode, blocks,
                orders.numpy(), self._candidates().numpy(), self._aux, factor_tables(self),
                sites.numpy(), last.numpy(), trace, truth,
            )  # fmt: skip
            self._run_in_groups(factor_block_steps, arrays, n)
        else:
            calls = (
                x.numpy(), log_p.numpy(), accepted.numpy(), u.numpy(), layout, mode, blocks,
                orders.numpy(), self._candidates().numpy(), self._aux, arrays["w_t"],
                arrays["b_vis"], arrays["c"], arrays["exp_w"], arrays["exp_neg_w"],
                sites.numpy(), last.numpy(), trace, truth,
            )  # fmt: skip
            self._run_in_groups(block_steps, calls, n)
        self._x, self._log_p, self._n_accepted = x, log_p, accepted
        if pairwise:  # moved with the chains: the next call starts from them
            keep(self, "_flip_ratios_of", s)
        self._position = position
        if sweeps:
            self._order = orders[-1]
        self._last = StepInfo(sites=sites, accept_prob=last[0], accepted=last[1] > 0)

    def _run_in_groups(self, kernel, arrays: tuple, n: int) -> None:
        """``kernel(*arrays, first, stop)`` for ``n`` steps: a long call's chains in groups on
        all cores (``threads.chain_groups`` on its work: ``k`` sites a step where a pairwise
        target's random blocks fall apart into single sites, else every candidate scored), as
        the checkerboard's sweeps; the chains are independent given their uniforms, so the
        groups give one call's."""
        from lsbcore.backends import threads

        apart = (
            self.blocks == "random" and not self._aux and isinstance(self.target, PairwiseTarget)
        )
        work = n * (self.block_size if apart else self.evals_per_step)
        groups = threads.chain_groups(self.n_chains, work)
        threads.run_grouped(kernel, groups, *((*arrays, g.start, g.stop) for g in groups))

    def _flip_ratios(self, x: torch.Tensor) -> torch.Tensor:
        """Every site's flip log-ratio at the chains' states ``x`` (a copy of them): as the last
        compiled call left them while neither the chains nor the target changed and no resync
        came since (which bounds their rounding drift), else computed afresh, ``O(n)`` a call
        that a short call (the live page's) would spend most of its time on."""
        kept = still_kept(self, "_flip_ratios_of")
        if kept is not None:
            return kept[0]
        return self.target.flip_log_ratios(x).contiguous()

    def resync(self) -> None:
        """As ``BatchedSampler.resync``; on a pairwise target on the compiled backend the flip
        log-ratios the next call starts from come from the same pass as ``log p~``
        (``log_prob_and_flip_log_ratios``): recomputing them apart cost a third of block
        Gibbs' time on a 256 x 256 photo."""
        if self.backend != "compiled" or not isinstance(self.target, PairwiseTarget):
            super().resync()
            return
        with torch.no_grad():
            self._log_p, s = self.target.log_prob_and_flip_log_ratios(self._x)
        self.n_target_evals += 1
        self._since_resync = 0
        self._after_resync()
        keep(self, "_flip_ratios_of", s.reshape(self.n_chains, self.n_sites))

    def _after_resync(self) -> None:
        self._flip_ratios_of = None
        super()._after_resync()

    def _sweep_blocks_array(self) -> np.ndarray:
        """``sweep_blocks`` as one ``[blocks, k]`` array (built once per block size: a large
        lattice has tens of thousands)."""
        cached = getattr(self, "_sweep_array", None)
        if cached is None or cached.shape != (len(self.sweep_blocks), self.block_size):
            self._sweep_array = cached = torch.stack(self.sweep_blocks).cpu().numpy()
        return cached

    def _pairwise_tables(self) -> tuple:
        """The pairwise target's neighbour and coupling tables as numpy arrays, their reach
        and their offsets (``block_kernels.neighbour_reach``, ``neighbour_offsets``), built
        once per target."""
        from lsbcore.backends.block_kernels import neighbour_offsets, neighbour_reach

        cached = getattr(self, "_tables_of", None)
        if cached is None or cached[0] is not self.target:
            neighbours = self.target.neighbourhood.contiguous().numpy()
            tables = (neighbours, self.target.coupling.contiguous().numpy(),
                      neighbour_reach(neighbours), neighbour_offsets(neighbours))  # fmt: skip
            self._tables_of = cached = (self.target, tables)
        return cached[1]

    # ----------------------------------------------------------------- the exact law
    def transition_probabilities(self, block: int | None = None) -> torch.Tensor:
        """The law of every chain's next state, ``[B, 2^n]`` float64 (columns: state codes of
        ``lsbcore.exact.states``), from the functions the step uses.

        ``"random"``, and ``"shuffled"`` at the start of a sweep (a fresh permutation's first
        ``k`` sites are a uniform ``k``-subset): the average of the block updates over all
        ``C(n, k)`` blocks. ``"shuffled"`` within a sweep: the update of each chain's next
        block. ``"sweep"``: the update of sweep block ``block`` (default: the next step's).
        """
        check_exact_size(self.n_sites)
        if block is not None and self.blocks != "sweep":
            raise ValueError(f'block= picks a block of blocks="sweep", not of {self.blocks!r}.')
        b = self.n_chains
        if self.blocks == "sweep":
            last = len(self.sweep_blocks) - 1
            j = self._position if block is None else integer(block, "block", 0, last)
            blocks, weight = [self.sweep_blocks[j].expand(b, -1)], 1.0
        elif self.blocks == "shuffled" and self._position > 0:
            blocks, weight = [self._order[:, self.sweep_blocks[self._position]]], 1.0
        else:
            every = itertools.combinations(range(self.n_sites), self.block_size)
            blocks = [torch.tensor(c, device=self.device).expand(b, -1) for c in every]
            weight = 1.0 / len(blocks)
        rows = torch.zeros(b, 2**self.n_sites, dtype=torch.float64, device=self.device)
        with torch.no_grad():
            for sites in blocks:
                self._add_law(rows, sites, weight)
        return rows

    def _add_law(self, rows: torch.Tensor, sites: torch.Tensor, weight: float) -> None:
        """Add ``weight`` times the law of this sampler's update of the block ``sites``."""
        add_block_law(rows, self.target, self._x, sites, self._flips, weight)
