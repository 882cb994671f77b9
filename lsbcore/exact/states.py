"""The enumerated state space of a tiny target, and the exact target on it.

State codes: state ``x`` in ``{-1, +1}^n`` is the integer whose bit ``i`` is set when site ``i``
(flat, row-major on a lattice) is +1, so flipping site ``i`` is ``code ^ (1 << i)``. Row ``k`` of
every matrix and entry ``k`` of every distribution in ``lsbcore.exact`` is state code ``k``.
"""

from __future__ import annotations

import numpy as np
import torch

#: Enumeration stops here: 2^12 = 4096 states, a dense [4096, 4096] float64 matrix is 128 MiB.
MAX_SITES = 12


def check_target(target) -> int:
    """The number of sites of ``target``, after refusing what cannot be enumerated."""
    n = int(target.n_sites)
    if n > MAX_SITES:
        raise ValueError(
            f"the exact chain enumerates all 2^n states: at most {MAX_SITES} sites, got {n}."
        )
    if target.batch != 1:
        raise ValueError(
            f"the target holds {target.batch} fields (one per chain); pick one chain's target "
            "with target.chain(b)."
        )
    return n


def all_states(n_sites: int) -> torch.Tensor:
    """Every state, ``[2^n, n]`` float64, row ``k`` being state code ``k``."""
    if not 1 <= n_sites <= MAX_SITES:
        raise ValueError(f"n_sites must be between 1 and {MAX_SITES}, got {n_sites}.")
    codes = torch.arange(2**n_sites)
    bits = (codes.unsqueeze(1) >> torch.arange(n_sites)) & 1
    return (2 * bits - 1).to(torch.float64)


def state_codes(x: torch.Tensor) -> torch.Tensor:
    """The code of every row of ``x`` (``[B, n]`` or ``[B, *shape]``), ``[B]`` int64."""
    flat = (x.reshape(x.shape[0], -1) > 0).long().cpu()
    return (flat << torch.arange(flat.shape[1])).sum(1)


def exact_distribution(target) -> np.ndarray:
    """``pi(x) = p~(x) / sum_y p~(y)`` over all ``2^n`` states, ``[2^n]`` (softmax of log p~)."""
    n = check_target(target)
    log_p = target.log_prob(all_states(n))
    return torch.softmax(log_p, 0).numpy()
