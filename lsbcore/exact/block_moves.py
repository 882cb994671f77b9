"""The exact transition matrices of the block samplers (``block-gibbs``, ``hamming-ball``) on a
tiny target (every state enumerated).

One sampler is built with one chain at every state of positive probability and asked for its
own ``transition_probabilities()``: the law of its next state, computed by the functions its
step uses (the block's candidates and their ``log p~``), not re-derived here. A block sweep
(``blocks="sweep"``) is the product of its blocks' matrices.

Rows and columns are state codes (``lsbcore.exact.states``); ``v P`` is the law one step on. A
state of zero probability is never entered, and no chain starts there: its row is zero.
"""

from __future__ import annotations

import numpy as np
import torch

from lsbcore.exact.states import all_states, check_target
from lsbcore.samplers.block.block_gibbs import BlockGibbsSampler
from lsbcore.samplers.block.hamming_ball import HammingBallSampler

#: The block samplers by registry name.
BLOCK_SAMPLERS = {"block-gibbs": BlockGibbsSampler, "hamming-ball": HammingBallSampler}


def block_sampler_at_every_state(target, name: str, **options):
    """The sampler ``name`` with one chain at every state of positive probability (CPU, seed 0),
    and those states' codes ``[N]``."""
    n = check_target(target)
    if name not in BLOCK_SAMPLERS:
        raise ValueError(f"name must be one of {tuple(BLOCK_SAMPLERS)}, got {name!r}.")
    states = all_states(n)
    positive = torch.isfinite(target.log_prob(states))
    if not bool(positive.any()):
        raise ValueError(f"{target.describe()} gives every state probability zero.")
    codes = torch.nonzero(positive).view(-1)
    sampler = BLOCK_SAMPLERS[name](
        target, len(codes), seed=0, device="cpu", x0=states[codes], **options
    )
    return sampler, codes


def block_step_matrix(target, name: str, block: int | None = None, **options) -> np.ndarray:
    """``P [2^n, 2^n]`` of one step of the sampler ``name`` (``options``: its ``block_size``,
    ``blocks``, ``radius``). For ``blocks="sweep"``, the step of sweep block ``block`` (default
    the first)."""
    sampler, codes = block_sampler_at_every_state(target, name, **options)
    if sampler.blocks == "sweep":
        block = 0 if block is None else block
    rows = sampler.transition_probabilities(block).numpy()
    p = np.zeros((rows.shape[1], rows.shape[1]))
    p[codes.numpy()] = rows
    return p


def block_sweep_matrix(target, name: str, **options) -> np.ndarray:
    """``P = P_0 P_1 ... P_{J-1}`` of a whole sweep (``blocks="sweep"``): its ``J`` blocks in
    turn, block 0 first (row vectors)."""
    if options.get("blocks") != "sweep":
        raise ValueError('block_sweep_matrix is for blocks="sweep"; give blocks="sweep".')
    sampler, codes = block_sampler_at_every_state(target, name, **options)
    size = 2**sampler.n_sites
    product = None
    for j in range(len(sampler.sweep_blocks)):
        p = np.zeros((size, size))
        p[codes.numpy()] = sampler.transition_probabilities(j).numpy()
        product = p if product is None else product @ p
    return product
