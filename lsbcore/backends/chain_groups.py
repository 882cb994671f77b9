"""A learning kernel's chains in contiguous groups, side by side on the cores (numba, CPU).

Learning couples the chains only through the loss and the update: each step, every chain's
work (its proposal, ratios, ``Z``, term of the loss, gradient share and move, decided under
theta0) is its own, then the sums over the chains and the update. The kernels run the chains'
work in ``groups`` contiguous groups (``group_range``) under a ``prange``, and sum over the
chains in their order afterwards (``chain_sums``), so one group and many give the same
parameters and chains; ``parallel_twin`` compiles a kernel with numba's ``parallel=True``
(``threads.learning_groups`` says when that pays and is safe).
"""

from __future__ import annotations

import pickle
import types

import numpy as np
from numba import njit

#: every kernel's parallel twin, as its kernel module is imported
TWINS = []


@njit(cache=True, nogil=True, inline="always")
def group_range(group, groups, chains):
    """The chains of ``group`` of ``groups`` contiguous ones, as ``range``'s bounds."""
    return group * chains // groups, (group + 1) * chains // groups


@njit(cache=True, nogil=True)
def chain_sums(terms, grads):
    """The loss, ``d loss / d eta`` and ``d loss / d phi`` summed over the chains in their
    order (``terms [2, B]``, ``grads [B, n_phi]``): the same sums whatever the chain groups
    that computed each chain's share."""
    loss, grad_eta = 0.0, 0.0
    grad_phi = np.zeros(grads.shape[1])
    for b in range(grads.shape[0]):
        loss += terms[0, b]
        grad_eta += terms[1, b]
        for q in range(grads.shape[1]):
            grad_phi[q] += grads[b, q]
    return loss, grad_eta, grad_phi


def parallel_twin(kernel):
    """``kernel`` compiled with ``parallel=True``: its ``prange`` over the chain groups runs them
    on the cores side by side, each step's sums over the chains and update after all of them
    (``chain_sums``, in the chains' order: the same parameters and chains as one group).
    A copy of the function under its own name, so that numba's cache keeps the two apart, with
    the kernel's floating-point options (``fastmath``, ``error_model``): the same arithmetic."""
    f = kernel.py_func
    twin = types.FunctionType(f.__code__, f.__globals__, f.__name__ + "_parallel", f.__defaults__)
    twin.__qualname__ = f.__qualname__ + "_parallel"
    twin.__doc__ = f.__doc__
    options = {k: v for k, v in kernel.targetoptions.items() if k in ("fastmath", "error_model")}
    compiled = njit(cache=True, nogil=True, parallel=True, **options)(twin)
    TWINS.append(compiled)
    return compiled


def in_disk_cache(twin) -> bool:
    """Whether numba's disk cache holds ``twin`` compiled from its current source: numba's index
    for it, read without loading anything (loading would bring in numba's OpenMP layer).
    numba's own API has no such question; False wherever the index cannot be read."""
    try:
        return bool(twin._cache._cache_file._load_index())
    except (AttributeError, OSError, EOFError, ValueError, pickle.UnpicklingError):
        return False
