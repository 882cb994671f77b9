"""A pairwise target's local fields and ``log p~`` from its neighbour tables, compiled (numba, CPU).

``f_i = h_i + sum_j J_ij x_j`` reads site ``i``'s row of the tables (``coupling = 4 J``, column
0 the site itself, unused slots repeating it: ``targets.pairwise_target.flip_tables``), and
``log p~ = sum_i x_i (h_i + (f_i - h_i) / 2)`` counts each edge once. torch's gathers and
``index_add`` take 5-8 ms for 4 chains of a 256 x 256 lattice, several times what the compiled
steps between two resyncs take; one pass over the tables takes about 1 ms.

The targets use them on the CPU wherever numba is installed; the samplers' warm-up compiles them
in the background (its samplers' resyncs read them), so a page run seldom waits on them.
"""

from __future__ import annotations

from numba import njit

__all__ = ["local_fields", "log_probs", "log_probs_and_flip_ratios"]


@njit(cache=True, nogil=True)
def local_fields(x, field, neighbours, coupling, out):
    """``out [B, n]``: every chain's local fields; ``x [B, n]``, ``field [1 or B, n]`` (one
    field for all chains, or one each)."""
    chains, n = x.shape
    for b in range(chains):
        h = field[min(b, field.shape[0] - 1)]
        for i in range(n):
            total = 0.0  # sum_j 4 J_ij x_j over the neighbours (the loops written out: a
            for slot in range(1, neighbours.shape[1]):  # helper taking x[b] ran 6x slower)
                j = neighbours[i, slot]
                if j == i:
                    break
                total += coupling[i, slot] * x[b, j]
            out[b, i] = h[i] + 0.25 * total


@njit(cache=True, nogil=True)
def log_probs(x, field, neighbours, coupling, out):
    """``out [B]``: every chain's ``log p~``."""
    chains, n = x.shape
    for b in range(chains):
        h = field[min(b, field.shape[0] - 1)]
        log_p = 0.0
        for i in range(n):
            total = 0.0
            for slot in range(1, neighbours.shape[1]):
                j = neighbours[i, slot]
                if j == i:
                    break
                total += coupling[i, slot] * x[b, j]
            log_p += x[b, i] * (h[i] + 0.125 * total)
        out[b] = log_p


@njit(cache=True, nogil=True)
def log_probs_and_flip_ratios(x, field, neighbours, coupling, log_p, s):
    """``log_probs`` into ``log_p [B]`` and every site's flip log-ratio ``-2 x_i f_i`` into
    ``s [B, n]``, from one pass over the tables (a block sampler's resync needs both: two
    passes and torch's arithmetic took three times one). Each value is computed as
    ``log_probs`` and ``local_fields`` compute it, to the last bit. The loops are written out
    as theirs are: the neighbour sum as an inlined helper ran 6x slower, measured again."""
    chains, n = x.shape
    for b in range(chains):
        h = field[min(b, field.shape[0] - 1)]
        total_b = 0.0
        for i in range(n):
            total = 0.0
            for slot in range(1, neighbours.shape[1]):
                j = neighbours[i, slot]
                if j == i:
                    break
                total += coupling[i, slot] * x[b, j]
            total_b += x[b, i] * (h[i] + 0.125 * total)
            s[b, i] = -2.0 * x[b, i] * (h[i] + 0.25 * total)
        log_p[b] = total_b
