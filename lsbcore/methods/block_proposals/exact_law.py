"""The exact transition law of ``neural-block`` on a tiny grid (every state enumerated).

One sampler is built with one chain at every state of positive probability; each tile's
update law comes from its own ``tile_law`` (the step's functions scored on every block state).
A selection (an offset and a colour) updates its tiles together, and their updates commute,
so its matrix is the product of its tiles' matrices; the step is the average of its selections
with the sampler's weights (``1 / k^2`` per offset, then ``1 / colours``; an offset with no
whole tile is the identity).

Matrices are scipy sparse (``[2^n, 2^n]``, rows and columns state codes of
``lsbcore.exact.states``): a tile's row holds at most ``2^(k^2)`` entries, so 16 sites are held
in a few MB where the dense matrix would take 32 GB. ``step_matrix`` forms the whole step (small
grids); ``apply_step`` gives ``v P`` and ``P v`` without forming it.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from lsbcore.methods.block_proposals.sampler import MAX_EXACT_SITES, NeuralBlockSampler


def every_state(target) -> torch.Tensor:
    """All ``2^n`` states ``[2^n, n]`` of +-1 in code order (up to ``MAX_EXACT_SITES``: 16 sites
    fit as sparse laws, where ``lsbcore.exact`` stops at 12 for dense matrices)."""
    n = target.n_sites
    if n > MAX_EXACT_SITES:
        raise ValueError(
            f"the exact law of neural-block enumerates all 2^n states: at most "
            f"{MAX_EXACT_SITES} sites, got {n}."
        )
    bits = (torch.arange(2**n).unsqueeze(1) >> torch.arange(n)) & 1
    return (2 * bits - 1).to(torch.float64)


def sampler_at_every_state(target, **options) -> tuple[NeuralBlockSampler, np.ndarray]:
    """``neural-block`` (``options``: ``block_size``, ``weights``, ``proposal``) with one chain at
    every state of positive probability (CPU, seed 0), and those states' codes."""
    states = every_state(target)
    positive = torch.isfinite(target.log_prob(states))
    codes = torch.nonzero(positive).view(-1)
    sampler = NeuralBlockSampler(
        target, len(codes), seed=0, device="cpu", x0=states[codes], **options
    )
    return sampler, codes.numpy()


def selection_matrices(target, **options) -> list[tuple[float, list[sp.csr_matrix]]]:
    """Every selection of the step: its probability and its tiles' sparse matrices."""
    sampler, codes = sampler_at_every_state(target, **options)
    size = 2**sampler.n_sites
    offsets = sampler.tiling.offsets
    out = []
    for offset in range(len(offsets)):
        colours = sampler.tiling.blocks(offset).n_colours
        if colours == 0:
            out.append((1.0 / len(offsets), []))
            continue
        for colour in range(colours):
            blocks = sampler.selection(offset, colour)
            tiles = []
            for chains, cols, probs in sampler.tile_law(blocks):
                rows = codes[chains]
                tiles.append(sp.csr_matrix((probs, (rows, cols)), shape=(size, size)))
            out.append((1.0 / (len(offsets) * colours), tiles))
    return out


def step_matrix(target, **options) -> sp.csr_matrix:
    """``P`` of one step, formed (a sum of products of the tiles' matrices)."""
    total = None
    for weight, tiles in selection_matrices(target, **options):
        size = 2**target.n_sites
        product = sp.identity(size, format="csr")
        for matrix in tiles:
            product = product @ matrix
        total = weight * product if total is None else total + weight * product
    return total.tocsr()


def apply_step(selections, v: np.ndarray, left: bool = True) -> np.ndarray:
    """``v P`` (``left``) or ``P v`` for the step made of ``selections``, without forming ``P``."""
    out = np.zeros_like(v, dtype=np.float64)
    for weight, tiles in selections:
        w = v.astype(np.float64)
        for matrix in tiles if left else reversed(tiles):
            w = matrix.T @ w if left else matrix @ w
        out += weight * w
    return out
