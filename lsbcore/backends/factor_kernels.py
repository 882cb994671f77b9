"""Compiled factor-graph steps: many steps of random-scan ``gibbs`` or uniform-site
``metropolis`` on a ``FactorGraph`` in one call (numba, CPU).

A torch step rescores a flip through a dozen small operations; here the proposed flip of site
``i`` reads only the factors that touch ``i`` (``factor_moves.Incidence``: compressed rows of
each variable's factors, scopes padded to the largest arity), about a microsecond a step. Each
chain runs all its steps in turn (its row stays in cache).

The chains hold states of positive probability (the samplers start there and never accept a
move into zero mass), so a flip's log-ratio is ``-inf`` where it lands on a zero entry of one of
its factors and the change of the finite part otherwise, summed over the factors of ``i`` in the
order the torch step sums them. The uniforms are the torch step's, read as it reads them (the
site, then the decision), so a seed gives the same chains on both paths (a decision could differ
only where a uniform falls within rounding of a threshold).
"""

from __future__ import annotations

import math

from numba import njit


@njit(cache=True, nogil=True, inline="always")
def _flip_log_ratio(x, b, site, scopes, place, offsets, finite, zero, first, factors):
    """``log p~(x with site flipped) - log p~(x)`` for chain ``b`` at a state of positive mass."""
    total = 0.0
    into_zero = False
    for r in range(first[site], first[site + 1]):
        f = factors[r]
        entry = 0
        mask = 0
        for p in range(scopes.shape[1]):
            v = scopes[f, p]
            if x[b, v] > 0:
                entry += place[f, p]
            if v == site:
                mask += place[f, p]  # the padding's place is 0
        old = offsets[f] + entry
        new = offsets[f] + (entry ^ mask)
        if zero[new] > 0:
            into_zero = True
        total += finite[new] - finite[old]
    return -math.inf if into_zero else total


@njit(cache=True, nogil=True)
def uniform_site_steps(
    x, log_p, accepted, u, gibbs, scopes, place, offsets, finite, zero, first, factors,
    site_out, prob_out, flipped_out,
):  # fmt: skip
    """``n`` steps of every chain, in place: ``u [n, 2, B]`` (the site, then the decision);
    site ``i = floor(u0 n)`` flips with probability ``sigmoid(s_i)`` (Gibbs) or
    ``min(1, e^s_i)`` (Metropolis), never into zero mass; ``site_out``, ``prob_out`` and
    ``flipped_out [B]`` receive the last step's site, flip probability and decision."""
    n_steps = u.shape[0]
    n_chains, n_sites = x.shape
    for b in range(n_chains):
        for t in range(n_steps):
            site = min(int(u[t, 0, b] * n_sites), n_sites - 1)
            s = _flip_log_ratio(x, b, site, scopes, place, offsets, finite, zero, first, factors)
            if s == -math.inf:
                log_flip = -math.inf
            elif gibbs:  # log sigmoid(s), as torch's logsigmoid computes it
                log_flip = min(s, 0.0) - math.log1p(math.exp(-abs(s)))
            else:
                log_flip = min(s, 0.0)
            flip = s > -math.inf and math.log(u[t, 1, b]) < log_flip
            if flip:
                x[b, site] = -x[b, site]
                log_p[b] += s
                accepted[b] += 1
            if t == n_steps - 1:
                site_out[b] = site
                prob_out[b] = math.exp(log_flip)
                flipped_out[b] = flip
