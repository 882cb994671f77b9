"""Compiled block moves on pairwise targets: block Gibbs and the Hamming ball sampler (numba, CPU).

A candidate ``y`` differs from ``x`` on a set ``F`` of the block's sites, and on a pairwise
target its log-ratio is the flip log-ratios of ``F`` plus one term per coupled pair inside it:

    log p~(y) - log p~(x) = sum_{i in F} s_i + sum_{i < j in F} c_ij x_i x_j,

``s_i = -2 x_i f_i`` the chain's flip log-ratios and ``c_ij = 4 w_ij`` the target's coupling
(``targets.pairwise_target.flip_tables``: flipping ``i`` moves ``s_j`` by ``c_ij x_j x_i``).
So a step reads the block's ``k`` log-ratios and the couplings among its sites, scores its
``M`` candidates in ``O(M k + k^2)`` whatever the size of the target, and a move updates the
flipped sites' neighbourhoods: the cost of the block, not of the state. The Hamming ball's
auxiliary state is never written: with ``a`` its pattern, candidate ``q`` differs from ``x`` on
the sites where ``a`` and ``q`` disagree.

Uniforms, blocks and draws follow ``rbm_kernels.block_steps`` exactly (``block_layout``,
``step_block``, ``draw_index``), so "sweep" and "shuffled" blocks give the torch step's chains
(``blocks="random"``: the same law, other draws; see ``rbm_kernels``).

Block Gibbs on random blocks draws each connected part of the block on its own: the block's
conditional is the product of its parts' (no coupling joins two parts), so a block of ``k``
scattered sites costs ``k`` two-way draws, not ``2^k`` candidates. One uniform still draws the
whole block: the inverse CDF of the product law in the parts' order, each part's draw passing
on the uniform's position within the chosen candidate's interval (``_draw_passing_on``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from lsbcore.backends.kernels import trace_row, trace_start
from lsbcore.backends.rbm_kernels import draw_index, step_block

__all__ = ["pairwise_block_steps"]


@njit(cache=True, nogil=True)
def _pair_terms(xb, sites, neighbours, coupling, pair):
    """``pair [k, k]``: ``c_ij x_i x_j`` for the block's sites ``i = sites[a], j = sites[c]``
    (0 where they are not neighbours). Slot 0 of a site is the site itself, and its unused
    slots repeat it."""
    k = sites.shape[0]
    for a in range(k):
        for c in range(k):
            pair[a, c] = 0.0
    for a in range(k):
        i = sites[a]
        for slot in range(1, neighbours.shape[1]):
            j = neighbours[i, slot]
            if j == i:
                break
            for c in range(k):
                if sites[c] == j:
                    pair[a, c] = coupling[i, slot] * xb[i] * xb[j]


@njit(cache=True, nogil=True)
def _log_weights(sb, sites, pair, flips, aux_row, log_w):
    """``log p~`` of every candidate minus that of ``x`` into ``log_w [M]``: candidate ``q``
    flips the sites where ``flips[q]`` and ``flips[aux_row]`` disagree (``aux_row`` 0: the
    identity, block Gibbs)."""
    count, k = flips.shape
    for q in range(count):
        total = 0.0
        for a in range(k):
            if flips[q, a] * flips[aux_row, a] < 0.0:
                total += sb[sites[a]]
                for c in range(a):
                    if flips[q, c] * flips[aux_row, c] < 0.0:
                        total += pair[a, c]
        log_w[q] = total


@njit(cache=True, nogil=True)
def _flip(xb, sb, i, neighbours, coupling):
    """Flip site ``i`` of one chain: its neighbours' log-ratios move by ``c_ij x_j x_i``, its own
    changes sign."""
    x_i = xb[i]
    for slot in range(1, neighbours.shape[1]):
        j = neighbours[i, slot]
        if j == i:
            break
        sb[j] += coupling[i, slot] * xb[j] * x_i
    sb[i] = -sb[i]
    xb[i] = -x_i


@njit(cache=True, nogil=True)
def _parts(pair, part):
    """``part [k]``: each block site's connected part of the block's coupling graph (``pair``,
    from ``_pair_terms``: a zero coupling joins nothing), named by its first site."""
    k = part.shape[0]
    for a in range(k):
        part[a] = a
    for a in range(k):
        for c in range(a):
            if pair[a, c] != 0.0:  # union, the smaller index the root
                ra, rc = a, c
                while part[ra] != ra:
                    ra = part[ra]
                while part[rc] != rc:
                    rc = part[rc]
                part[max(ra, rc)] = min(ra, rc)
    for a in range(k):
        root = a
        while part[root] != root:
            root = part[root]
        part[a] = root


@njit(cache=True, nogil=True)
def _draw_passing_on(log_w, w, count, u):
    """``draw_index`` on ``log_w[:count]`` with ``u``; also the stay weight ``w[0] / total``
    and ``u``'s position within the chosen candidate's interval, itself uniform: the next
    part's draw."""
    q, total = draw_index(log_w[:count], w[:count], u)
    before, running, last_positive = 0.0, 0.0, 0.0  # as draw_index sums them
    for r in range(count):
        if r == q:
            before = running
        running += w[r]
        if w[r] > 0.0:
            last_positive = running
    rest = (u * last_positive - before) / w[q] if w[q] > 0.0 else u
    return q, w[0] / total, min(max(rest, 0.0), 1.0)


@njit(cache=True, nogil=True)
def _factorised_block_gibbs(xb, sb, sites, pair, part, members, log_w, w, u, neighbours,
                            coupling, truth, moves):  # fmt: skip
    """One block Gibbs step of one chain, part by part (the module's docstring). Returns the
    log-ratio of the move, the probability of staying, the sites changed and ``sum x``'s and
    ``x . truth``'s changes; ``moves`` holds the flipped sites' block indices."""
    k = sites.shape[0]
    log_ratio, stay = 0.0, 1.0
    changed = 0
    d_sum, d_overlap = 0.0, 0.0
    for root in range(k):
        if part[root] != root:
            continue
        m = 0
        for a in range(root, k):
            if part[a] == root:
                members[m] = a
                m += 1
        if m == 1:  # a site alone: stay with 1 / (1 + e^s), one exp
            s_a = sb[sites[root]]
            stay_part = 1.0 / (1.0 + math.exp(s_a))
            stay *= stay_part
            if stay_part > 0.0 and u <= stay_part:  # draw_index's rule: the first positive
                u = u / stay_part
                continue
            u = min((u - stay_part) / (1.0 - stay_part), 1.0)
            log_ratio += s_a
            moves[changed] = root
            changed += 1
            continue
        count = 1 << m
        log_w[0] = 0.0
        for q in range(1, count):  # q's lowest member added to the candidate without it
            low = 0
            while not (q >> low) & 1:
                low += 1
            rest = q & (q - 1)
            a = members[low]
            total = log_w[rest] + sb[sites[a]]
            for t in range(low + 1, m):
                if (rest >> t) & 1:
                    total += pair[a, members[t]]
            log_w[q] = total
        q, stay_part, u = _draw_passing_on(log_w, w, count, u)
        stay *= stay_part
        if q == 0:
            continue
        log_ratio += log_w[q]
        for t in range(m):
            if (q >> t) & 1:
                moves[changed] = members[t]
                changed += 1
    for c in range(changed):
        i = sites[moves[c]]
        d_sum -= 2.0 * xb[i]
        d_overlap -= 2.0 * xb[i] * truth[i]
        _flip(xb, sb, i, neighbours, coupling)
    return log_ratio, stay, changed, d_sum, d_overlap


@njit(cache=True, nogil=True)
def pairwise_block_steps(
    x, s, log_p, n_accepted, u, layout, mode, sweep_blocks, orders, flips, aux, neighbours,
    coupling, last_sites, last, trace, truth,
):  # fmt: skip
    """``T = layout.shape[0]`` block steps of every chain of a pairwise target, in place: block
    Gibbs over the candidates ``flips [M, k]`` (``aux`` False) or the Hamming ball sampler with
    the ball ``flips`` (``aux`` True). ``x, s [B, n]``: states and flip log-ratios; ``log_p``,
    ``n_accepted [B]``; ``u``, ``layout``, ``mode``, ``sweep_blocks``, ``orders``,
    ``last_sites``, ``last``, ``trace`` and ``truth`` as in ``rbm_kernels.block_steps``."""
    steps, chains = layout.shape[0], x.shape[0]
    n = x.shape[1]
    count, k = flips.shape
    log_w, w = np.empty(count), np.empty(count)
    sites, chosen = np.empty(k, np.int64), np.empty(k, np.int64)
    pair = np.empty((k, k))
    part, members, moves = np.empty(k, np.int64), np.empty(k, np.int64), np.empty(k, np.int64)
    by_parts = mode == 0 and not aux  # block Gibbs on random blocks: its parts one by one
    for b in range(chains):
        xb, sb = x[b], s[b]
        current_order = 0
        sum_x, overlap = trace_start(trace, xb, truth)
        for step in range(steps):
            _, aux_at, choice_at, _ = layout[step]
            current_order = step_block(
                u, layout[step], mode, sweep_blocks, orders, current_order, b, n, sites, chosen
            )
            if by_parts:
                _pair_terms(xb, sites, neighbours, coupling, pair)
                _parts(pair, part)
                log_ratio, stay, changed, d_sum, d_overlap = _factorised_block_gibbs(
                    xb, sb, sites, pair, part, members, log_w, w, u[choice_at + b], neighbours,
                    coupling, truth, moves,
                )  # fmt: skip
                log_p[b] += log_ratio
                n_accepted[b] += changed
                sum_x += d_sum
                overlap += d_overlap
                if step == steps - 1:
                    for a in range(k):
                        last_sites[b, a] = sites[a]
                    last[0, b], last[1, b] = 1.0 - stay, changed > 0
                trace_row(trace, step, b, log_p[b], sum_x, overlap, changed, -1)
                continue
            current = 0
            if aux:
                current = min(int(u[aux_at + b] * count), count - 1)
            _pair_terms(xb, sites, neighbours, coupling, pair)
            _log_weights(sb, sites, pair, flips, current, log_w)
            q, total = draw_index(log_w, w, u[choice_at + b])
            moved = q != current
            if step == steps - 1:
                for a in range(k):
                    last_sites[b, a] = sites[a]
                last[0, b], last[1, b] = 1.0 - w[current] / total, moved
            changed = 0
            if moved:
                log_p[b] += log_w[q]
                for a in range(k):
                    if flips[q, a] * flips[current, a] < 0.0:
                        i = sites[a]
                        sum_x -= 2.0 * xb[i]
                        overlap -= 2.0 * xb[i] * truth[i]
                        _flip(xb, sb, i, neighbours, coupling)
                        n_accepted[b] += 1
                        changed += 1
            trace_row(trace, step, b, log_p[b], sum_x, overlap, changed, -1)
