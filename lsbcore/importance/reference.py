"""Exact answers to hold the importance estimates against, where they can be had.

``log Z``: by enumeration of all ``2^n`` states up to ``lsbcore.exact.MAX_SITES`` sites (any
target), else by the transfer matrix for an Ising posterior with a free boundary and a narrow
side (``transfer.MAX_WIDTH``); ``None`` beyond both. Marginals: by enumeration only.
"""

from __future__ import annotations

import torch

from lsbcore import exact
from lsbcore.importance.transfer import MAX_WIDTH, transfer_log_partition


def enumerated_log_partition(target) -> float:
    """``log Z = logsumexp_x log p~(x)`` over every state (at most 12 sites)."""
    n = exact.check_target(target)
    return float(torch.logsumexp(target.log_prob(exact.all_states(n)), 0))


def enumerated_p_plus(target) -> torch.Tensor:
    """Exact ``P(x_i = +1)`` in the target's layout (at most 12 sites)."""
    n = exact.check_target(target)
    pi = torch.as_tensor(exact.exact_distribution(target))
    plus = (exact.all_states(n) > 0).to(torch.float64)
    return (pi @ plus).reshape(target.shape)


def transfer_applies(target) -> bool:
    return (
        getattr(target, "boundary", None) == "free"
        and hasattr(target, "alpha")
        and target.batch == 1
        and min(target.shape) <= MAX_WIDTH
        and getattr(target, "edge_scale", None) is None  # one lambda on every edge
    )


def exact_log_partition(target) -> float | None:
    """``log Z`` exactly where enumeration or the transfer matrix reaches, else ``None``."""
    if target.batch == 1 and target.n_sites <= exact.MAX_SITES:
        return enumerated_log_partition(target)
    if transfer_applies(target):
        return transfer_log_partition(target)
    return None
