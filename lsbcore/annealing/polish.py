"""The greedy polish that may end an annealing run: zero-temperature sweeps (iterated
conditional modes, Besag 1986).

Sweep over the colour classes of a proper colouring (``target.colouring()``; on a lattice the
two checkerboard colours): every site of the class whose flip raises ``log p~`` (``s_i > 0``)
flips at once. Sites of one colour are not neighbours, so each flip raises ``log p~`` by exactly
its own ``s_i`` and the class as a whole by their sum: ``log p~`` only increases, and the polish
stops at a local maximum (no single flip helps), after at most a finite number of sweeps.
It never finds a better mode than the one the chain is in; annealing does that.
"""

from __future__ import annotations

import torch

from lsbcore.checks import integer
from lsbcore.targets.pairwise_target import PairwiseTarget


def greedy_polish(target: PairwiseTarget, x: torch.Tensor, max_sweeps: int = 1000):
    """``x`` (``[B, *shape]`` of +-1) moved uphill to a local maximum of ``log p~``.

    Returns ``(x', sweeps)``: the polished states (a new tensor, ``x``'s layout and device) and
    the number of sweeps that flipped something (0 when ``x`` was a local maximum already).
    """
    max_sweeps = integer(max_sweeps, "max_sweeps", 1, 10**6)
    if not isinstance(x, torch.Tensor) or x.numel() % target.n_sites or x.dim() < 2:
        raise ValueError(f"x must be a tensor of states [B, *shape] of {target.n_sites} sites.")
    flat = x.reshape(x.shape[0], target.n_sites).to(torch.float64).clone()  # [B, n]
    colour = target.colouring().to(flat.device)
    classes = [colour == c for c in range(int(colour.max()) + 1)]
    sweeps = 0
    while sweeps < max_sweeps:
        changed = False
        for members in classes:
            s = target.flip_log_ratios(flat)  # [B, n]: exact, recomputed after every class
            flip = (s > 0) & members
            if bool(flip.any()):
                flat = torch.where(flip, -flat, flat)
                changed = True
        if not changed:
            break
        sweeps += 1
    return flat.view_as(x), sweeps
