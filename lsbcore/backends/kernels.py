"""Compiled CPU steps: many frozen single-flip steps of one sampler in one call (numba).

An eager torch step is dozens of small operations, each costing microseconds of dispatch; here a
chain's step is a few hundred floating-point operations in a loop, about a microsecond. The
kernels work in place on the samplers' own cached arrays (zero-copy numpy views of the CPU
tensors) and keep exactly the invariants the torch path keeps (see ``locally_balanced`` and
``sampler``): the same two-level draw with each level searched against its own total, the same
acceptance ``A = Z / max(Z, Z')``, block sums re-added from ``gn`` (never nudged), and a rebuild
with a fresh scale when ``Z`` leaves ``[e^-LOG_RANGE, e^LOG_RANGE]``.

Frozen chains are independent given their uniforms, so each chain runs all ``n`` steps in turn
(its arrays stay in cache). The uniforms come from the sampler's seeded ``torch.Generator``.
Learning steps (``learning_kernels``) update shared parameters after every step.

A kernel receives the structures of ``structures``: the target's ``Tables``, the ``Chains`` it
updates, and for the locally balanced steps the ``Function`` and the ``ProposalCache``. The flip
rule (``flip_values`` then ``write_flip``) is written once here and used by every kernel,
learning ones included.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from lsbcore.backends.structures import KIND_MIXTURE, KIND_MONOTONE
from lsbcore.numerics import LOG_2, LOG_RANGE, MAX_LOG_G


@njit(cache=True, nogil=True)
def _log_sigmoid(s):
    if s >= 0.0:
        return -math.log1p(math.exp(-s))
    return s - math.log1p(math.exp(s))


@njit(cache=True, nogil=True)
def _log_softplus_piece(s, breakpoints, slope, intercept):
    """``log softplus(z(u))`` with ``u = sigmoid(s) - 1/2`` and ``z`` piecewise linear."""
    u = 1.0 / (1.0 + math.exp(-s)) - 0.5
    k = 0
    for cut in breakpoints:
        if u > cut:
            k += 1
    z = slope[k] * u + intercept[k]
    # as NetworkBalancing: min(z, log softplus(max(z, -30))), softplus linear above 20
    zc = max(z, -30.0)
    soft = zc if zc > 20.0 else math.log1p(math.exp(zc))
    return min(z, math.log(soft))


@njit(cache=True, nogil=True)
def component_log_g(s, out):
    """``log g_k(e^s)`` of the four fixed functions into ``out[0..3]`` (order of ``FIXED``)."""
    out[0] = _log_sigmoid(s)
    out[1] = 0.5 * s
    out[2] = min(0.0, s)
    out[3] = max(0.0, s)


@njit(cache=True, nogil=True, inline="always")
def _line(w, b, s):
    """``w s + b``, its limit ``b`` where ``w = 0`` and ``s`` is infinite (not NaN)."""
    return b if w == 0.0 else w * s + b


@njit(cache=True, nogil=True)
def _piece(s, starts):
    """The last piece whose start is at most ``s`` (``starts`` ascending, the first ``-inf``)."""
    lo, hi = 0, starts.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if starts[mid] <= s:
            lo = mid + 1
        else:
            hi = mid
    return max(lo - 1, 0)


@njit(cache=True, nogil=True)
def _log_g_monotone(s, starts, slope, intercept):
    """LSB 2': ``min(phi(s), s + phi(-s))`` with ``phi`` piecewise linear (``balancing.
    monotone``); ``phi(-s)`` reads a piece ``(w, b)``, so the second term is ``(1 - w) s + b``."""
    k = _piece(s, starts)
    j = _piece(-s, starts)
    return min(_line(slope[k], intercept[k], s), _line(1.0 - slope[j], intercept[j], s))


@njit(cache=True, nogil=True)
def log_g(kind, s, log_w, breakpoints, slope, intercept):
    """``log g(e^s)`` of one balancing function (``kind``: see ``structures.Function``)."""
    if kind == 0:
        return _log_sigmoid(s)
    if kind == 1:
        return 0.5 * s
    if kind == 2:
        return min(0.0, s)
    if kind == 3:
        return max(0.0, s)
    if kind == KIND_MIXTURE:
        terms = np.empty(4)
        component_log_g(s, terms)
        top = -np.inf
        for k in range(4):
            terms[k] += log_w[k]
            top = max(top, terms[k])
        total = 0.0
        for k in range(4):
            total += math.exp(terms[k] - top)
        return top + math.log(total)
    if kind == KIND_MONOTONE:
        return _log_g_monotone(s, breakpoints, slope, intercept)
    a = _log_softplus_piece(s, breakpoints, slope, intercept)
    b = s + _log_softplus_piece(-s, breakpoints, slope, intercept)
    top = max(a, b)
    return top + math.log1p(math.exp(min(a, b) - top)) - LOG_2


@njit(cache=True, nogil=True, inline="always")
def record_step(trace, t, b, stats, changed, site):
    """Row ``t`` of chain ``b`` of a step trace: the statistics, the sites changed, the site."""
    if trace.shape[0] > 0:
        trace[t, b, 0] = stats[b, 0]
        trace[t, b, 1] = stats[b, 1]
        trace[t, b, 2] = stats[b, 2]
        trace[t, b, 3] = changed
        trace[t, b, 4] = site


@njit(cache=True, nogil=True, inline="always")
def trace_start(trace, xb, truth):
    """``sum_i x_i`` and ``x . truth`` of one chain's state, where a kernel keeps a step trace
    (0, 0 without one: ``trace`` of length 0)."""
    sum_x = 0.0
    overlap = 0.0
    if trace.shape[0] > 0:
        for i in range(xb.shape[0]):
            sum_x += xb[i]
            overlap += xb[i] * truth[i]
    return sum_x, overlap


@njit(cache=True, nogil=True)
def trace_starts(trace, x, truth, first, stop):
    """``[2, B]``: ``trace_start`` of chains ``first`` to ``stop`` (the rest 0), kept between
    a kernel's tiles of steps."""
    sums = np.zeros((2, x.shape[0]))
    for b in range(first, stop):
        sums[0, b], sums[1, b] = trace_start(trace, x[b], truth)
    return sums


@njit(cache=True, nogil=True, inline="always")
def trace_row(trace, t, b, log_p, sum_x, overlap, changed, site):
    """Row ``t`` of chain ``b`` of a batched sampler's step trace (``BatchedSampler.step``):
    ``log p~``, ``sum x``, ``x . truth``, the sites changed and the proposed site (-1 for a
    block). Nothing without a trace."""
    if trace.shape[0] > 0:
        trace[t, b, 0] = log_p
        trace[t, b, 1] = sum_x
        trace[t, b, 2] = overlap
        trace[t, b, 3] = changed
        trace[t, b, 4] = site


@njit(cache=True, nogil=True, inline="always")
def trace_move(trace, t, b, log_p, sum_x, overlap, truth, i, x_i, moved):
    """Chain ``b``'s running ``sum x`` and ``x . truth`` after a single-site step at site ``i``
    (``x_i`` its value before; ``moved``: the flip was taken) and its trace row (``trace_row``)."""
    if moved:
        sum_x[b] -= 2.0 * x_i
        overlap[b] -= 2.0 * x_i * truth[i]
    trace_row(trace, t, b, log_p, sum_x[b], overlap[b], 1.0 if moved else 0.0, i)


@njit(cache=True, nogil=True, inline="always")
def flip_values(b, site, x, s, tables, s_new, x_new):
    """The neighbourhood of ``site`` in chain ``b`` after flipping it, into ``s_new, x_new [K]``:
    ``s_i -> -s_i``, ``s_j -> s_j + coupling_ij x_j x_i`` (spec 1, ``x_i`` before the flip).
    Computed before any write: padding slots repeat the site."""
    neighbours, sign, coupling, _ = tables
    x_site = x[b, site]
    for k in range(neighbours.shape[1]):
        j = neighbours[site, k]
        s_new[k] = s[b, j] * sign[site, k] + coupling[site, k] * x[b, j] * x_site
        x_new[k] = x[b, j] * sign[site, k]


@njit(cache=True, nogil=True, inline="always")
def write_flip(b, site, chains, neighbours, s_new, x_new):
    """Commit chain ``b``'s flip of ``site`` (values from ``flip_values``): the neighbourhood's
    ``x`` and ``s``, the count, and the statistics (log p~ gains ``s_i = -s_new[0]``)."""
    x, s, n_accepted, stats, truth, track, _ = chains
    x_site = x[b, site]
    n_accepted[b, 0] += 1
    if track:
        stats[b, 0] -= s_new[0]
        stats[b, 1] -= 2.0 * x_site
        stats[b, 2] -= 2.0 * x_site * truth[site]
    for k in range(neighbours.shape[1]):
        j = neighbours[site, k]
        x[b, j] = x_new[k]
        s[b, j] = s_new[k]


@njit(cache=True, nogil=True)
def rebuild_row(b, s, cache, n_sites, block, function):
    """Row ``b``'s ``gn``, block sums and shift from its exact ``s`` (the torch renormalise).
    A row whose every ``g`` is 0 (a factor graph's state whose every flip leads into zero mass,
    with ``g(0) = 0``) gets shift 0 and ``gn = 0``: nothing to propose."""
    gn, block_sum, _, shift = cache
    kind, log_w, bp, slope, icpt = function
    top = -np.inf
    for i in range(n_sites):
        v = log_g(kind, s[b, i], log_w, bp, slope, icpt)
        gn[b, i] = v  # log values first, exponentiated below
        if v > top:
            top = v
    if top == -np.inf:
        top = 0.0
    shift[b, 0] = top
    for i in range(n_sites):
        gn[b, i] = math.exp(gn[b, i] - top)
    for j in range(block_sum.shape[1]):
        total = 0.0
        for c in range(j * block, (j + 1) * block):
            total += gn[b, c]
        block_sum[b, j] = total


@njit(cache=True, nogil=True)
def balanced_steps(n, chains, tables, function, cache, u, last):
    """``n`` frozen locally balanced steps for every chain, in place.

    ``u [n, B, 3]`` (below 1 - 2^-52): the block, the site in it, the decision; ``last [B, 4]``:
    the last step's site, Z, Z' and decision. Returns the number of rows rebuilt for range.
    """
    x, s, _, stats, _, _, trace = chains
    neighbours, _, _, unique = tables
    kind, log_w, bp, slope, icpt = function
    gn, block_sum, z, shift = cache
    n_chains = x.shape[0]
    n_blocks = block_sum.shape[1]
    block = gn.shape[1] // (n_blocks + 1)
    n_sites = neighbours.shape[0]
    k_slots = neighbours.shape[1]
    g_new = np.empty(k_slots)
    s_new = np.empty(k_slots)
    x_new = np.empty(k_slots)
    rebuilt = 0
    low, high = math.exp(-LOG_RANGE), math.exp(LOG_RANGE)
    for b in range(n_chains):
        for t in range(n):
            # level 1: a block with probability block_sum / Z, against the sums' own total
            total = 0.0
            for j in range(n_blocks):
                total += block_sum[b, j]
            target = u[t, b, 0] * total
            acc = 0.0
            chosen = n_blocks - 1
            for j in range(n_blocks):
                acc += block_sum[b, j]
                if acc > target:
                    chosen = j
                    break
            # level 2: a site inside it with probability gn / block total
            start = chosen * block
            row_total = 0.0
            for c in range(start, start + block):
                row_total += gn[b, c]
            target = u[t, b, 1] * row_total
            acc = 0.0
            site = start + block - 1
            for c in range(start, start + block):
                acc += gn[b, c]
                if acc > target:
                    site = c
                    break
            # Z(x'): the neighbourhood's new log-ratios and g values
            flip_values(b, site, x, s, tables, s_new, x_new)
            dz = 0.0
            for k in range(k_slots):
                v = log_g(kind, s_new[k], log_w, bp, slope, icpt) - shift[b, 0]
                g_new[k] = math.exp(min(v, MAX_LOG_G))
                dz += (g_new[k] - gn[b, neighbours[site, k]]) * unique[site, k]
            z_new = total + dz
            accept = u[t, b, 2] * max(total, z_new) < total
            if t == n - 1:
                last[b, 0] = site
                last[b, 1] = total
                last[b, 2] = z_new
                last[b, 3] = 1.0 if accept else 0.0
            if accept:
                write_flip(b, site, chains, neighbours, s_new, x_new)
                for k in range(k_slots):
                    gn[b, neighbours[site, k]] = g_new[k]
                total = 0.0
                for k in range(k_slots):
                    first = (neighbours[site, k] // block) * block
                    part = 0.0
                    for c in range(first, first + block):
                        part += gn[b, c]
                    block_sum[b, first // block] = part
                for j in range(n_blocks):
                    total += block_sum[b, j]
                if not (low < total < high):
                    rebuild_row(b, s, cache, n_sites, block, function)
                    rebuilt += 1
                    total = 0.0
                    for j in range(n_blocks):
                        total += block_sum[b, j]
            z[b, 0] = total
            record_step(trace, t, b, stats, 1.0 if accept else 0.0, site)
    return rebuilt


@njit(cache=True, nogil=True)
def uniform_site_steps(n, chains, tables, gibbs, u, last):
    """``n`` steps of random-scan Gibbs (``gibbs``) or uniform-site Metropolis, in place.

    A site ``i = floor(u0 D)`` flips with probability ``sigmoid(s_i)`` (Gibbs) or ``min(1, t_i)``
    (Metropolis); ``last [B, 4]``: site, ``s_i``, decision, unused.
    """
    x, s, _, stats, _, _, trace = chains
    neighbours = tables.neighbours
    n_sites, k_slots = neighbours.shape
    s_new = np.empty(k_slots)
    x_new = np.empty(k_slots)
    for b in range(x.shape[0]):
        for t in range(n):
            site = min(int(u[t, b, 0] * n_sites), n_sites - 1)
            s_i = s[b, site]
            if gibbs:
                accept = u[t, b, 1] < 1.0 / (1.0 + math.exp(-s_i))
            else:
                accept = math.log(u[t, b, 1]) < s_i
            if t == n - 1:
                last[b, 0] = site
                last[b, 1] = s_i
                last[b, 2] = 1.0 if accept else 0.0
            if accept:
                flip_values(b, site, x, s, tables, s_new, x_new)
                write_flip(b, site, chains, neighbours, s_new, x_new)
            record_step(trace, t, b, stats, 1.0 if accept else 0.0, site)


@njit(cache=True, nogil=True)
def checkerboard_steps(n, chains, tables, order, u, flipped):
    """``n`` block Gibbs sweeps for every chain, in place: the sites in ``order`` (by colour),
    each flipped with probability ``sigmoid(s_i)`` read against ``u[t, b, i]``; ``flipped [B]``
    gets the sites changed in the last sweep.

    Sites of one colour are not neighbours, so visiting them one by one with their neighbours'
    log-ratios updated after each flip is the same as updating the colour at once.
    """
    x, s, n_accepted, stats, _, _, trace = chains
    neighbours = tables.neighbours
    k_slots = neighbours.shape[1]
    s_new = np.empty(k_slots)
    x_new = np.empty(k_slots)
    for b in range(x.shape[0]):
        for t in range(n):
            before = n_accepted[b, 0]
            for i in order:
                if u[t, b, i] < 1.0 / (1.0 + math.exp(-s[b, i])):
                    flip_values(b, i, x, s, tables, s_new, x_new)
                    write_flip(b, i, chains, neighbours, s_new, x_new)
            count = n_accepted[b, 0] - before
            flipped[b] = count
            record_step(trace, t, b, stats, count, -1.0)


@njit(cache=True, nogil=True)
def search_cdf(cdf, target):
    """The first index whose ``cdf`` exceeds ``target`` (torch's ``searchsorted(right=True)``),
    at most the last."""
    n = cdf.shape[0]
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if cdf[mid] <= target:
            lo = mid + 1
        else:
            hi = mid
    return min(lo, n - 1)
