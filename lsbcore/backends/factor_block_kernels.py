"""Compiled block moves on factor graphs: block Gibbs and the Hamming ball sampler (numba, CPU).

A candidate ``y`` differs from ``x`` on a set ``F`` of the block's sites, and only the factors
whose scopes meet ``F`` change:

    log p~(y) - log p~(x) = sum_{factors f meeting F} log phi_f(y_f) - log phi_f(x_f),

``-inf`` where ``y_f`` lands on a zero entry of one of them (the chains hold states of positive
mass, as in ``factor_kernels``). A step gathers the factors that touch its block once (each
factor's entry at ``x`` and the bit each block site has in it), then scores a candidate by
flipping those bits in the entries it changes: the cost of the block's factors, not of the
network, where the torch step scores every candidate as a whole state through ``log_prob``.

Uniforms, blocks and draws are ``block_kernels``' (``rbm_kernels.block_layout``,
``step_block``, ``draw_index``): "sweep" and "shuffled" blocks give the torch step's chains (a
decision could differ only where a uniform falls within rounding of a threshold); block Gibbs
on random blocks draws each connected part of the block on its own from the one uniform, as on
pairwise targets (two block sites are joined where a factor holds both), so a block of scattered
sites costs a two-way draw a site, not ``2^k`` candidates: the same law, other draws.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from lsbcore.backends.block_kernels import (
    STEP_TILE,
    draw_alone,
    draw_candidate,
    draw_passing_on,
    flip_masks,
    part_members,
    part_moves,
    parts,
    record_last,
)
from lsbcore.backends.kernels import trace_row, trace_starts
from lsbcore.backends.rbm_kernels import step_block

__all__ = ["factor_block_steps"]


@njit(cache=True, nogil=True, inline="always")
def _block_factors(xb, sites, tables, touched, entry, inside, places, of_site, n_of_site):
    """The factors whose scopes meet the block, each once, into ``touched [count]``: each
    one's table entry at ``x`` (``entry``), the block sites in its scope as bits of
    ``inside`` and each block site's bit in its table index (``places [count, k]``, 0 for
    a site outside); block site ``a``'s factors are ``of_site[a, :n_of_site[a]]`` (indices
    into ``touched``). Returns ``count``."""
    k = sites.shape[0]
    count = 0
    for a in range(k):
        v = sites[a]
        n_of_site[a] = 0
        for r in range(tables.first[v], tables.first[v + 1]):
            f = tables.factors[r]
            t = 0
            while t < count and touched[t] != f:
                t += 1
            if t == count:  # a factor not seen yet: its entry at x
                touched[t] = f
                e = 0
                for p in range(tables.scopes.shape[1]):
                    if xb[tables.scopes[f, p]] > 0:
                        e += tables.place[f, p]
                entry[t] = e
                inside[t] = 0
                for c in range(k):
                    places[t, c] = 0
                count += 1
            for p in range(tables.scopes.shape[1]):
                if tables.scopes[f, p] == v and tables.place[f, p] > 0:  # padding: place 0
                    places[t, a] = tables.place[f, p]
            inside[t] |= 1 << a
            of_site[a, n_of_site[a]] = t
            n_of_site[a] += 1
    return count


@njit(cache=True, nogil=True, inline="always")
def _bits_in_entry(hit, places, t):
    """Factor ``t``'s table index bits of the block sites in ``hit`` (bits of block sites): what
    flipping them does to its entry, by ``^``."""
    mask = 0
    a = 0
    while hit >> a:
        if (hit >> a) & 1:
            mask += places[t, a]
        a += 1
    return mask


@njit(cache=True, nogil=True, inline="always")
def _log_ratio(moved, count, touched, entry, inside, places, tables):
    """``log p~`` of ``x`` with the block sites of the bits ``moved`` flipped, minus that of
    ``x``: the change of each factor those sites are in (``-inf`` into zero mass)."""
    total = 0.0
    into_zero = False
    for t in range(count):
        hit = moved & inside[t]
        if hit == 0:
            continue
        mask = _bits_in_entry(hit, places, t)
        old = tables.offsets[touched[t]] + entry[t]
        new = tables.offsets[touched[t]] + (entry[t] ^ mask)
        if tables.zero[new] > 0:
            into_zero = True
        total += tables.finite[new] - tables.finite[old]
    return -math.inf if into_zero else total


@njit(cache=True, nogil=True, inline="always")
def _every_subset(members, m, entry, touched, inside, places, of_site, n_of_site, tables,
                  moved, fin, zeros, log_w):  # fmt: skip
    """``log_w[q]`` for every subset ``q`` of the block sites ``members[:m]`` flipped (bit
    ``t`` of ``q``: ``members[t]``), each from the subset without its lowest member: that
    member's factors read with the rest's bits flipped, the finite part and the count of
    zero entries carried separately (a subset may leave zero mass that a smaller one
    entered). A candidate costs one site's factors, not those of all its flips."""
    moved[0], fin[0], zeros[0] = 0, 0.0, 0
    log_w[0] = 0.0
    for q in range(1, 1 << m):
        low = 0
        while not (q >> low) & 1:
            low += 1
        rest = q & (q - 1)
        a = members[low]
        before = moved[rest]
        d_fin, d_zeros = 0.0, 0
        for j in range(n_of_site[a]):
            t = of_site[a, j]
            mask = _bits_in_entry(before & inside[t], places, t)
            now = tables.offsets[touched[t]] + (entry[t] ^ mask)
            new = tables.offsets[touched[t]] + (entry[t] ^ mask ^ places[t, a])
            d_fin += tables.finite[new] - tables.finite[now]
            d_zeros += tables.zero[new] - tables.zero[now]
        moved[q] = before | (1 << a)
        fin[q] = fin[rest] + d_fin
        zeros[q] = zeros[rest] + d_zeros
        log_w[q] = -math.inf if zeros[q] > 0 else fin[q]


@njit(cache=True, nogil=True, inline="always")
def _joined(count, inside, pair):
    """``pair [k, k]``: 1 where a factor holds both block sites (``block_kernels.parts``
    reads a nonzero as joined), else 0. Returns whether any two are joined."""
    k = pair.shape[0]
    for a in range(k):
        for c in range(k):
            pair[a, c] = 0.0
    any_joined = False
    for t in range(count):
        bits = inside[t]
        if bits & (bits - 1) == 0:  # one block site
            continue
        any_joined = True
        for a in range(k):
            if (bits >> a) & 1:
                for c in range(k):
                    if c != a and (bits >> c) & 1:
                        pair[a, c] = 1.0
    return any_joined


@njit(cache=True, nogil=True, inline="always")
def _block_gibbs_by_parts(
    count, touched, entry, inside, places, of_site, n_of_site, tables, pair, part, members,
    moved, fin, zeros, log_w, w, u, moves,
):  # fmt: skip
    """One block Gibbs step of one chain, its connected parts drawn one by one from the one
    uniform (``block_kernels``). Returns the move's log-ratio, the probability of staying and
    the number of block sites flipped, their indices in ``moves``."""
    k = part.shape[0]
    if _joined(count, inside, pair):
        parts(pair, part)
    else:
        for a in range(k):
            part[a] = a
    log_ratio, stay, changed = 0.0, 1.0, 0
    for root in range(k):
        if part[root] != root:
            continue
        m = part_members(part, root, members)
        if m == 1:
            s_a = _log_ratio(1 << root, count, touched, entry, inside, places, tables)
            stay_a, u, d_log, changed = draw_alone(s_a, u, root, moves, changed)
            stay *= stay_a
            log_ratio += d_log
            continue
        _every_subset(members, m, entry, touched, inside, places, of_site, n_of_site, tables,
                      moved, fin, zeros, log_w)  # fmt: skip
        q, stay_part, u = draw_passing_on(log_w, w, 1 << m, u)
        stay *= stay_part
        if q == 0:
            continue
        log_ratio += log_w[q]
        changed = part_moves(q, m, members, moves, changed)
    return log_ratio, stay, changed


@njit(cache=True, nogil=True)
def factor_block_steps(
    x, log_p, n_accepted, u, layout, mode, sweep_blocks, orders, flips, aux, tables,
    last_sites, last, trace, truth, first=0, stop=-1,
):  # fmt: skip
    """``T = layout.shape[0]`` block steps of every chain of a factor graph, in place: block
    Gibbs over the candidates ``flips [M, k]`` (``aux`` False) or the Hamming ball sampler with
    the ball ``flips`` (``aux`` True). ``x [B, n]``: states; ``log_p``, ``n_accepted [B]``;
    ``tables``: the graph's ``FactorTables``; ``u``, ``layout``, ``mode``, ``sweep_blocks``,
    ``orders``, ``last_sites``, ``last``, ``trace`` and ``truth`` as in
    ``rbm_kernels.block_steps``; steps in tiles and chains ``first`` to ``stop`` (-1: the last)
    as in ``block_kernels.pairwise_block_steps``."""
    steps, chains = layout.shape[0], x.shape[0]
    stop = chains if stop < 0 else stop
    n = x.shape[1]
    count_q, k = flips.shape
    masks = flip_masks(flips)
    log_w, w = np.empty(count_q), np.empty(count_q)
    sites, swaps = np.empty(k, np.int64), np.empty((2, k), np.int64)
    most = 0  # the most factors a block can touch: its sites' factor counts summed
    degree = tables.first[1:] - tables.first[:-1]
    for v in np.argsort(degree)[::-1][:k]:
        most += degree[v]
    most = max(most, 1)
    touched, entry = np.empty(most, np.int64), np.empty(most, np.int64)
    inside, places = np.empty(most, np.int64), np.empty((most, k), np.int64)
    of_site, n_of_site = np.empty((k, most), np.int64), np.empty(k, np.int64)
    moved, fin, zeros = np.empty(1 << k, np.int64), np.empty(1 << k), np.empty(1 << k)
    pair = np.empty((k, k))
    part, members, moves = np.empty(k, np.int64), np.empty(k, np.int64), np.empty(k, np.int64)
    every = np.arange(k)  # the whole block's sites, in order
    by_parts = mode == 0 and not aux  # block Gibbs on random blocks: its parts one by one
    orders_now = np.zeros(chains, np.int64)  # each chain's current order ("shuffled")
    sums = trace_starts(trace, x, truth, first, stop)  # each chain's sum x and x . truth
    for tile in range(0, steps, STEP_TILE):  # a tile's uniforms stay cached for every chain
        for b in range(first, stop):
            xb = x[b]
            current_order = orders_now[b]
            sum_x, overlap = sums[0, b], sums[1, b]
            lp, accepted = log_p[b], n_accepted[b]  # locals: the steps' running sums
            for step in range(tile, min(tile + STEP_TILE, steps)):
                aux_at, choice_at = layout[step, 1], layout[step, 2]
                current_order = step_block(
                    u, layout, step, mode, sweep_blocks, orders, current_order, b, n, sites, swaps
                )
                count = _block_factors(
                    xb, sites, tables, touched, entry, inside, places, of_site, n_of_site
                )
                if by_parts:
                    log_ratio, stay, changed = _block_gibbs_by_parts(
                        count, touched, entry, inside, places, of_site, n_of_site, tables, pair,
                        part, members, moved, fin, zeros, log_w, w, u[choice_at + b], moves,
                    )  # fmt: skip
                else:
                    current = 0
                    if aux:  # the ball's few candidates, each scored on its own
                        current = min(int(u[aux_at + b] * count_q), count_q - 1)
                        for q in range(count_q):
                            log_w[q] = _log_ratio(masks[q] ^ masks[current], count, touched, entry,
                                                  inside, places, tables)  # fmt: skip
                    else:  # every subset of the block (``flip_patterns``: row q flips q's bits)
                        _every_subset(every, k, entry, touched, inside, places, of_site, n_of_site,
                                      tables, moved, fin, zeros, log_w)  # fmt: skip
                    stay, log_ratio, changed = draw_candidate(
                        log_w, w, u[choice_at + b], masks, current, moves
                    )
                lp += log_ratio
                accepted += changed
                for c in range(changed):
                    i = sites[moves[c]]
                    sum_x -= 2.0 * xb[i]
                    overlap -= 2.0 * xb[i] * truth[i]
                    xb[i] = -xb[i]
                if step == steps - 1:
                    record_last(last_sites, last, b, sites, stay, changed)
                trace_row(trace, step, b, lp, sum_x, overlap, changed, -1)
            log_p[b], n_accepted[b] = lp, accepted
            orders_now[b], sums[0, b], sums[1, b] = current_order, sum_x, overlap
