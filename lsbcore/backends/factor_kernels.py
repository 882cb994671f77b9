"""Compiled factor-graph steps: many steps of random-scan ``gibbs``, uniform-site
``metropolis`` or a locally balanced sampler with a fixed ``g`` on a ``FactorGraph`` in one call
(numba, CPU).

A torch step rescores a flip through a dozen small operations; here each chain keeps every
site's flip parts (``flip_scores``: the change of the finite part and of the zero-mass count
under its flip, read from the factors, ``factor_moves.Incidence``: compressed rows of each
variable's factors, scopes padded to the largest arity), a proposal reads its site's, and an
accepted flip rewrites its neighbourhood's from the flipped site's factors
(``flip_scores_after``). Each chain runs all its steps in turn (its row stays in cache).

The chains hold states of positive probability (the samplers start there and never accept a
move into zero mass), so a flip's log-ratio is ``-inf`` where it lands on a zero entry of one of
its factors and the change of the finite part otherwise. The uniforms are the torch step's,
read as it reads them (the site, then the decision), so a seed gives the same chains on both
paths (a decision could differ only where a uniform falls within rounding of a threshold).

``balanced_steps`` runs a locally balanced sampler (``barker``, ``sqrt``, ``min``, ``max``; the
kernels' ``log_g`` knows LSB 1 and 2 too, but their learning runs torch): per chain it keeps
every site's flip log-ratio with its two parts (the change of the finite part and of the
zero-mass count, as ``factor_moves``' ratio cache), and the pairwise kernels' proposal cache
(``kernels``: scaled ``g`` values in blocks of about ``sqrt(n)``, their block sums and a
per-chain shift, rebuilt by ``kernels.rebuild_row`` when ``Z`` leaves its range). A step draws
a site from ``g / Z`` (one uniform against the total, as the torch step's inverse CDF reads
it), scores the flip's neighbourhood through its factors (``Neighbourhoods``: the variables
that share a factor with the site), accepts with ``Z(x) / max(Z(x), Z(x'))`` and, where
accepted, writes the neighbourhood's ratios and ``g`` values and re-adds the sums of the blocks
they sit in: O(sqrt(n) + neighbourhood) a step.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from lsbcore.backends.kernels import log_g, rebuild_row, trace_row, trace_start
from lsbcore.numerics import LOG_RANGE, MAX_LOG_G


@njit(cache=True, nogil=True)
def flip_scores(x, tables, d_finite, d_zeros):
    """Every site's two flip parts (the change of the finite part and of the zero-mass count
    under its flip, ``[B, n]``) at the states ``x``: each factor read once per chain, its change
    under each of its variables' flips added to that variable's. As ``FactorGraph.ratio_cache``
    computes them, in one pass."""
    scopes, place, offsets, finite, zero = (tables.scopes, tables.place, tables.offsets,
                                            tables.finite, tables.zero)  # fmt: skip
    for b in range(x.shape[0]):
        for v in range(x.shape[1]):
            d_finite[b, v] = 0.0
            d_zeros[b, v] = 0.0
        for f in range(scopes.shape[0]):
            entry = 0
            for p in range(scopes.shape[1]):
                if x[b, scopes[f, p]] > 0:
                    entry += place[f, p]
            o = offsets[f]
            for p in range(scopes.shape[1]):
                bit = place[f, p]
                if bit == 0:
                    continue
                d_finite[b, scopes[f, p]] += finite[o + (entry ^ bit)] - finite[o + entry]
                d_zeros[b, scopes[f, p]] += zero[o + (entry ^ bit)] - zero[o + entry]


@njit(cache=True, nogil=True)
def cached_site_steps(
    x, log_p, accepted, u, gibbs, d_finite, d_zeros, tables, site_out, prob_out, flipped_out,
    trace, truth,
):  # fmt: skip
    """``n`` steps of every chain, in place: ``u [n, 2, B]`` (the site, then the decision);
    site ``i = floor(u0 n)`` flips with probability ``sigmoid(s_i)`` (Gibbs) or
    ``min(1, e^s_i)`` (Metropolis), never into zero mass, ``s_i`` read from the kept flip parts
    ``d_finite, d_zeros [B, n]`` (``flip_scores``), which a flip moves in its neighbourhood
    (``flip_scores_after``): a rejected proposal costs one read, not the site's factors.
    ``site_out``, ``prob_out`` and ``flipped_out [B]`` receive the last step's site, flip
    probability and decision; ``trace [n, B, 5]`` (or length 0) every step's row
    (``kernels.trace_row``), ``truth [n]`` the overlap's."""
    n_steps = u.shape[0]
    n_chains, n_sites = x.shape
    most = largest_neighbourhood(tables.near_first)
    fin_new, zero_new = np.empty(most), np.empty(most)
    for b in range(n_chains):
        sum_x, overlap = trace_start(trace, x[b], truth)
        for t in range(n_steps):
            site = min(int(u[t, 0, b] * n_sites), n_sites - 1)
            s = -math.inf if d_zeros[b, site] > 0.0 else d_finite[b, site]
            if s == -math.inf:
                log_flip = -math.inf
            elif gibbs:  # log sigmoid(s), as torch's logsigmoid computes it
                log_flip = min(s, 0.0) - math.log1p(math.exp(-abs(s)))
            else:
                log_flip = min(s, 0.0)
            flip = s > -math.inf and math.log(u[t, 1, b]) < log_flip
            if flip:
                flip_scores_after(b, site, x, d_finite, d_zeros, tables, fin_new, zero_new)
                start = tables.near_first[site]
                for k in range(tables.near_first[site + 1] - start):
                    v = tables.near[start + k]
                    d_finite[b, v] = fin_new[k]
                    d_zeros[b, v] = zero_new[k]
                sum_x -= 2.0 * x[b, site]
                overlap -= 2.0 * x[b, site] * truth[site]
                x[b, site] = -x[b, site]
                log_p[b] += s
                accepted[b] += 1
            trace_row(trace, t, b, log_p[b], sum_x, overlap, 1.0 if flip else 0.0, site)
            if t == n_steps - 1:
                site_out[b] = site
                prob_out[b] = math.exp(log_flip)
                flipped_out[b] = flip


@njit(cache=True, nogil=True, inline="always")
def _draw_site(b, target, gn, block_sum, block, n_sites):
    """The first site whose cumulative ``gn`` passes ``target`` (``u Z``), blocks first: the
    torch step's inverse CDF over all sites. A chain with ``Z = 0`` gets the last site (as
    torch's search does); rounding at a block's end falls back on its last positive term."""
    acc = 0.0
    chosen = -1
    for j in range(block_sum.shape[1]):
        after = acc + block_sum[b, j]
        if after > target:
            chosen = j
            break
        acc = after
    if chosen < 0:
        return n_sites - 1
    rest = target - acc
    part = 0.0
    last = -1
    for c in range(chosen * block, (chosen + 1) * block):
        if gn[b, c] > 0.0:
            last = c
        part += gn[b, c]
        if part > rest:
            return c
    return last


@njit(cache=True, nogil=True)
def largest_neighbourhood(near_first):
    """The most variables in one neighbourhood (``near_first``: ``Neighbourhoods.first``)."""
    most = 1
    for i in range(near_first.shape[0] - 1):
        most = max(most, near_first[i + 1] - near_first[i])
    return most


@njit(cache=True, nogil=True, inline="always")
def flip_scores_after(b, site, x, d_finite, d_zeros, tables, fin_new, zero_new):
    """The two parts of the flip log-ratios (the change of the finite part and of the zero-mass
    count) of ``site``'s neighbourhood at chain ``b``'s state with ``site`` flipped, into
    ``fin_new`` and ``zero_new [size]`` in the neighbourhood's order: each factor of the site
    read at ``x`` and ``x'``, every variable's share at ``x'`` in and its share at ``x`` out."""
    scopes, place, offsets, finite, zero, first, factors, near_first, near, slot = tables
    start, size = near_first[site], near_first[site + 1] - near_first[site]
    width = scopes.shape[1]
    for k in range(size):
        fin_new[k] = d_finite[b, near[start + k]]
        zero_new[k] = d_zeros[b, near[start + k]]
    for r in range(first[site], first[site + 1]):
        f = factors[r]
        entry = 0
        mask = 0
        for p in range(width):
            if x[b, scopes[f, p]] > 0:
                entry += place[f, p]
            if scopes[f, p] == site:
                mask += place[f, p]  # the padding's place is 0
        flipped = entry ^ mask
        o = offsets[f]
        for p in range(width):
            bit = place[f, p]
            if bit == 0:
                continue
            k = slot[r, p]
            fin_new[k] += (finite[o + (flipped ^ bit)] - finite[o + flipped]) - (
                finite[o + (entry ^ bit)] - finite[o + entry]
            )
            zero_new[k] += (zero[o + (flipped ^ bit)] - zero[o + flipped]) - (
                zero[o + (entry ^ bit)] - zero[o + entry]
            )


@njit(cache=True, nogil=True)
def balanced_steps(
    n, chains, tables, function, cache, u, site_out, prob_out, flipped_out, trace, truth
):
    """``n`` frozen locally balanced steps of every chain on a factor graph, in place (see the
    module docstring).

    ``u [n, 2, B]``: the site, then the decision (the torch step's layout); ``site_out``,
    ``prob_out`` and ``flipped_out [B]`` receive the last step's site, acceptance probability
    (0 for a flip into zero mass or from a chain with ``Z = 0``) and decision; ``trace`` and
    ``truth`` as in ``cached_site_steps``. Returns the number of rows rebuilt for range.
    """
    x, log_p, n_accepted, s, d_finite, d_zeros = chains
    near_first, near = tables.near_first, tables.near
    kind, log_w, bp, slope, icpt = function
    gn, block_sum, z, shift = cache
    n_chains, n_sites = x.shape
    n_blocks = block_sum.shape[1]
    block = gn.shape[1] // (n_blocks + 1)
    most = largest_neighbourhood(near_first)
    fin_new = np.empty(most)
    zero_new = np.empty(most)
    s_new = np.empty(most)
    g_new = np.empty(most)
    low, high = math.exp(-LOG_RANGE), math.exp(LOG_RANGE)
    rebuilt = 0
    for b in range(n_chains):
        total = 0.0
        for j in range(n_blocks):
            total += block_sum[b, j]
        sum_x, overlap = trace_start(trace, x[b], truth)
        for t in range(n):
            site = _draw_site(b, u[t, 0, b] * total, gn, block_sum, block, n_sites)
            s_i = s[b, site]
            # never into zero mass, nor from a chain with nothing to propose
            alive = total > 0.0 and s_i > -math.inf
            accept = False
            prob = 0.0
            start, size = near_first[site], near_first[site + 1] - near_first[site]
            if alive:
                flip_scores_after(b, site, x, d_finite, d_zeros, tables, fin_new, zero_new)
                # Z(x') from the neighbourhood's new g values (x' has positive mass)
                dz = 0.0
                for k in range(size):
                    s_new[k] = -math.inf if zero_new[k] > 0.0 else fin_new[k]
                    scaled = log_g(kind, s_new[k], log_w, bp, slope, icpt) - shift[b, 0]
                    g_new[k] = math.exp(min(scaled, MAX_LOG_G))
                    dz += g_new[k] - gn[b, near[start + k]]
                z_new = total + dz
                # A = min(1, Z / Z') = Z / max(Z, Z'): the balancing property (spec 2)
                prob = total / max(total, z_new)
                accept = u[t, 1, b] * max(total, z_new) < total
            if accept:
                sum_x -= 2.0 * x[b, site]
                overlap -= 2.0 * x[b, site] * truth[site]
                x[b, site] = -x[b, site]
                log_p[b] += s_i
                n_accepted[b] += 1
                for k in range(size):
                    v = near[start + k]
                    d_finite[b, v] = fin_new[k]
                    d_zeros[b, v] = zero_new[k]
                    s[b, v] = s_new[k]
                    gn[b, v] = g_new[k]
                # the touched blocks' sums re-added from gn (never nudged), each once
                for k in range(size):
                    j = near[start + k] // block
                    seen = False
                    for k2 in range(k):
                        if near[start + k2] // block == j:
                            seen = True
                            break
                    if seen:
                        continue
                    part = 0.0
                    for c in range(j * block, (j + 1) * block):
                        part += gn[b, c]
                    block_sum[b, j] = part
                total = 0.0
                for j in range(n_blocks):
                    total += block_sum[b, j]
                if not (low < total < high):
                    rebuild_row(b, s, cache, n_sites, block, function)
                    rebuilt += 1
                    total = 0.0
                    for j in range(n_blocks):
                        total += block_sum[b, j]
            trace_row(trace, t, b, log_p[b], sum_x, overlap, 1.0 if accept else 0.0, site)
            if t == n - 1:
                site_out[b] = site
                prob_out[b] = prob
                flipped_out[b] = accept
        z[b, 0] = total
    return rebuilt


@njit(cache=True, nogil=True)
def proposal_cache(s, function, cache):
    """Every row of ``cache`` (``ProposalCache``) rebuilt from the ratios ``s [B, n]`` under
    ``function``: ``gn``, block sums, shift and ``Z``."""
    gn, block_sum, z, _ = cache
    n_blocks = block_sum.shape[1]
    block = gn.shape[1] // (n_blocks + 1)
    for b in range(s.shape[0]):
        rebuild_row(b, s, cache, s.shape[1], block, function)
        total = 0.0
        for j in range(n_blocks):
            total += block_sum[b, j]
        z[b, 0] = total
