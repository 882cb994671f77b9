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
``step_block``, ``draw_index``), so "sweep" and "shuffled" blocks give the torch step's chains.
Random blocks read the same uniforms but pick by Floyd's sampling (``pick_apart``), which
tells from the picks alone, without searching them, that no two are coupled or equal: the
same law as torch's, other draws.

Where that holds (nearly every random block of a large lattice) no pair term is read and the
Hamming ball scores each candidate from its own few sites (``_apart_log_weights``). Long calls
take their steps in tiles (``STEP_TILE``), and a sampler runs groups of chains in parallel
threads (``first``, ``stop``), as the checkerboard's sweeps.

Block Gibbs on random blocks draws each connected part of the block on its own: the block's
conditional is the product of its parts' (no coupling joins two parts), so a block of ``k``
scattered sites costs ``k`` two-way draws, not ``2^k`` candidates. One uniform still draws the
whole block: the inverse CDF of the product law in the parts' order, each part's draw passing
on the uniform's position within the chosen candidate's interval (``draw_passing_on``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from lsbcore.backends.kernels import trace_row, trace_starts
from lsbcore.backends.rbm_kernels import STEP_TILE, draw_index, step_block

__all__ = [
    "STEP_TILE",
    "draw_alone",
    "draw_candidate",
    "draw_passing_on",
    "neighbour_offsets",
    "neighbour_reach",
    "pairwise_block_steps",
    "part_members",
    "part_moves",
    "parts",
    "pick_apart",
    "record_last",
]


def neighbour_reach(neighbours: np.ndarray) -> int:
    """The farthest any site's neighbour lies from it on the ring of site indices
    (``_ring_distance``): the width of a lattice read row by row, free or periodic."""
    n = neighbours.shape[0]
    d = np.abs(neighbours - np.arange(n)[:, None])
    return int(np.minimum(d, n - d).max()) if n else 0


def neighbour_offsets(neighbours: np.ndarray) -> np.ndarray:
    """``[n]`` bool: True at every ``(j - i) mod n`` of a site ``i`` and its neighbour ``j``,
    and at 0 (slot 0, the site itself). Two sites whose difference is not one are not
    coupled: on a lattice a handful of differences, so a block's sites are checked without
    reading their neighbour rows."""
    n = neighbours.shape[0]
    offsets = np.zeros(n, dtype=np.bool_)
    offsets[(neighbours - np.arange(n)[:, None]) % max(n, 1)] = True
    return offsets


@njit(cache=True, nogil=True, inline="always")
def _maybe_coupled(i, j, n, reach, offsets):
    """Whether sites ``i`` and ``j`` may be coupled (or are one site): within ``reach`` on the
    ring and their difference one of the target's (``neighbour_offsets``). The reach, a
    comparison, rules out nearly every pair of a large lattice before the table is read."""
    d = j - i
    if d < 0:
        d += n
    return min(d, n - d) <= reach and offsets[d]


@njit(cache=True, nogil=True, inline="always")
def _ring_distance(i, j, n):
    """``|i - j|`` on a ring of ``n`` sites (a periodic lattice's wrapped neighbours are near)."""
    d = abs(i - j)
    return min(d, n - d)


@njit(cache=True, nogil=True, inline="always")
def pick_apart(u, at, n, k, reach, offsets, sites):
    """``k`` distinct sites from the ``k`` uniforms ``u[at:at + k]`` by Floyd's sampling: step
    ``t`` (``m = n - k + t``) takes ``floor(u (m + 1))``, or ``m`` where that site is taken
    already: a uniform ``k``-subset, in an order that is not uniform (the block moves' law
    depends on the set alone). Step ``t`` reads uniform ``k - 1 - t``, so uniform ``j`` ranges
    over ``n - j`` values as in ``rbm_kernels.pick_block``. Returns True where no two picks
    may be coupled (``_maybe_coupled``), so none repeats and no coupling joins them: a random
    block of a large lattice nearly always, found without searching the picks."""
    for t in range(k):
        m = n - k + t
        sites[t] = min(int(u[at + k - 1 - t] * (m + 1)), m)
    near = False
    for a in range(k):
        for c in range(a):
            if _ring_distance(sites[a], sites[c], n) <= reach:  # rare: a predicted branch
                near |= _maybe_coupled(sites[a], sites[c], n, reach, offsets)
    if not near:
        return True
    for t in range(1, k):  # Floyd's rule, against the picks before it as they came out
        for c in range(t):
            if sites[c] == sites[t]:
                sites[t] = n - k + t
                break
    return False


@njit(cache=True, nogil=True, inline="always")
def _pair_terms(xb, sites, neighbours, coupling, reach, offsets, pair):
    """``pair [k, k]``: ``c_ij x_i x_j`` for the block's sites ``i = sites[a], j = sites[c]``
    (0 where they are not neighbours). Slot 0 of a site is the site itself, and its unused
    slots repeat it. Where no two block sites may be coupled (``_maybe_coupled``: a random
    block of a large lattice nearly always) this returns False and leaves ``pair`` unwritten,
    every term 0; else True. A site that may be coupled to no other block site keeps its
    neighbour row unread: on a large lattice those rows, not the log-ratios, are a random
    block's cache misses."""
    k = sites.shape[0]
    n = xb.shape[0]
    linked = False
    for a in range(k):
        for c in range(a):
            if _maybe_coupled(sites[a], sites[c], n, reach, offsets):
                linked = True
    if not linked:
        return False
    for a in range(k):
        for c in range(k):
            pair[a, c] = 0.0
    for a in range(k):
        i = sites[a]
        near = False
        for c in range(k):
            if c != a and _maybe_coupled(i, sites[c], n, reach, offsets):
                near = True
        if not near:
            continue
        for slot in range(1, neighbours.shape[1]):
            j = neighbours[i, slot]
            if j == i:
                break
            for c in range(k):
                if sites[c] == j:
                    pair[a, c] = coupling[i, slot] * xb[i] * xb[j]
    return True


@njit(cache=True, nogil=True)
def flip_masks(flips):
    """Each candidate's flipped block sites as the bits of one integer (``flips [M, k]``,
    ``k <= MAX_BLOCK``): what a step reads, where the pattern's row cost a load and a product
    a site."""
    count, k = flips.shape
    masks = np.zeros(count, np.int64)
    for q in range(count):
        for a in range(k):
            if flips[q, a] < 0.0:
                masks[q] |= 1 << a
    return masks


@njit(cache=True, nogil=True, inline="always")
def _log_weights(sb, sites, linked, pair, masks, aux_row, log_w):
    """``log p~`` of every candidate minus that of ``x`` into ``log_w [M]``: candidate ``q``
    flips the sites where ``flips[q]`` and ``flips[aux_row]`` disagree, the bits of
    ``masks[q] ^ masks[aux_row]`` (``flip_masks``; ``aux_row`` 0: the identity, block
    Gibbs), summed site by site in the block's order; ``pair`` read only where ``linked``."""
    for q in range(masks.shape[0]):
        moved = masks[q] ^ masks[aux_row]
        total = 0.0
        a = 0
        while moved >> a:
            if (moved >> a) & 1:
                total += sb[sites[a]]
                if linked:
                    for c in range(a):
                        if (moved >> c) & 1:
                            total += pair[a, c]
            a += 1
        log_w[q] = total


@njit(cache=True, nogil=True)
def flip_lists(masks, k):
    """Each candidate's flipped block sites as a list: ``at [M, k]`` (the first ``count[q]``
    of row ``q``) and ``count [M]``, from ``flip_masks``."""
    at = np.zeros((masks.shape[0], k), np.int64)
    count = np.zeros(masks.shape[0], np.int64)
    for q in range(masks.shape[0]):
        for a in range(k):
            if (masks[q] >> a) & 1:
                at[q, count[q]] = a
                count[q] += 1
    return at, count


@njit(cache=True, nogil=True, inline="always")
def _apart_log_weights(sb, sites, masks, flip_at, flip_count, current, signed, log_w):
    """``_log_weights`` where no coupling joins two block sites: candidate ``q`` flips the
    block sites of ``masks[q] ^ masks[current]``, so its log-ratio is the sum of ``s`` over
    ``current``'s sites plus that of ``q``'s sites with ``current``'s negated (a site in both
    cancels): a candidate reads its own few sites (``flip_lists``), not the block's ``k``.
    Candidate ``current``, ``x`` itself, gets 0 exactly. ``signed [k]`` scratch."""
    held = masks[current]
    base = 0.0
    for a in range(sites.shape[0]):
        v = sb[sites[a]]
        if (held >> a) & 1:
            base += v
            v = -v
        signed[a] = v
    for q in range(masks.shape[0]):
        total = base
        for t in range(flip_count[q]):
            total += signed[flip_at[q, t]]
        log_w[q] = total
    log_w[current] = 0.0


@njit(cache=True, nogil=True, inline="always")
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
def parts(pair, part):
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
def draw_passing_on(log_w, w, count, u):
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


@njit(cache=True, nogil=True, inline="always")
def part_moves(q, m, members, moves, changed):
    """Append the members ``members[t]`` of a part whose bit ``t`` is set in its drawn
    candidate ``q`` to ``moves``; returns the new count."""
    for t in range(m):
        if (q >> t) & 1:
            moves[changed] = members[t]
            changed += 1
    return changed


@njit(cache=True, nogil=True, inline="always")
def draw_candidate(log_w, w, u, masks, current, moves):
    """Draw among the candidates ``log_w`` (their log-ratios to ``x``, candidate ``current``
    being ``x``) with ``u``. Returns the probability of staying, the move's log-ratio and the
    number of block sites it flips, their indices in ``moves``."""
    q, total = draw_index(log_w, w, u)
    log_ratio, changed = 0.0, 0
    if q != current:
        log_ratio = log_w[q]
        for a in range(moves.shape[0]):
            if ((masks[q] ^ masks[current]) >> a) & 1:
                moves[changed] = a
                changed += 1
    return w[current] / total, log_ratio, changed


@njit(cache=True, nogil=True, inline="always")
def draw_alone(s_a, u, a, moves, changed):
    """Block site ``a`` alone in its part: it stays with ``1 / (1 + e^s)`` (one ``exp``), as
    ``draw_index`` draws from the weights ``(1, e^s)``. Returns that probability, the passed-on
    uniform (``draw_passing_on``), the log-ratio the draw adds and the count of ``moves``,
    ``a`` appended where it flips."""
    stay = 1.0 / (1.0 + math.exp(s_a))
    if stay > 0.0 and u <= stay:  # draw_index's rule: the first positive weight
        return stay, u / stay, 0.0, changed
    moves[changed] = a
    return stay, min((u - stay) / (1.0 - stay), 1.0), s_a, changed + 1


@njit(cache=True, nogil=True, inline="always")
def part_members(part, root, members):
    """The block sites of the part named ``root`` (``parts``) into ``members``; their count."""
    m = 0
    for a in range(root, part.shape[0]):
        if part[a] == root:
            members[m] = a
            m += 1
    return m


@njit(cache=True, nogil=True, inline="always")
def record_last(last_sites, last, b, sites, stay, changed):
    """The last step's block, probability of moving and whether chain ``b`` moved."""
    for a in range(sites.shape[0]):
        last_sites[b, a] = sites[a]
    last[0, b], last[1, b] = 1.0 - stay, changed > 0


@njit(cache=True, nogil=True, inline="always")
def _apart_block_gibbs(sb, sites, u, moves):
    """One block Gibbs step of one chain whose block sites are pairwise apart (no coupling
    inside the block): ``k`` independent two-way draws from one uniform, each as
    ``draw_alone`` draws it, in odds rather than probabilities: with ``E = e^s``, site ``a``
    stays where ``v = u (1 + E) <= 1`` and passes on ``v``, else ``(v - 1) / E``. So the
    uniform passed on takes a product, not a division, on the usual way (a division's latency
    a site, chained through the block). Returns the move's log-ratio, the probability of
    staying and the number of sites flipped, their block indices in ``moves``."""
    log_ratio, odds, changed = 0.0, 1.0, 0
    for a in range(sites.shape[0]):
        s_a = sb[sites[a]]
        e = math.exp(s_a)
        v = u * (1.0 + e)
        odds *= 1.0 + e
        if v <= 1.0:  # draw_index's rule, as draw_alone: stay where u reaches 1 / (1 + E)
            u = v
            continue
        moves[changed] = a
        changed += 1
        log_ratio += s_a
        if e < math.inf:  # E infinite: staying had no weight, and u passes on as it is
            u = min((v - 1.0) / e, 1.0)
    return log_ratio, 1.0 / odds, changed


@njit(cache=True, nogil=True, inline="always")
def _factorised_block_gibbs(sb, sites, pair, part, members, log_w, w, u, moves):
    """One block Gibbs step of one chain, part by part (the module's docstring). Returns the
    log-ratio of the move, the probability of staying and the number of sites to flip, their
    block indices in ``moves``."""
    k = sites.shape[0]
    log_ratio, stay = 0.0, 1.0
    changed = 0
    for root in range(k):
        if part[root] != root:
            continue
        m = part_members(part, root, members)
        if m == 1:
            stay_part, u, d_log, changed = draw_alone(sb[sites[root]], u, root, moves, changed)
            stay *= stay_part
            log_ratio += d_log
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
        q, stay_part, u = draw_passing_on(log_w, w, count, u)
        stay *= stay_part
        if q == 0:
            continue
        log_ratio += log_w[q]
        changed = part_moves(q, m, members, moves, changed)
    return log_ratio, stay, changed


@njit(cache=True, nogil=True)
def pairwise_block_steps(
    x, s, log_p, n_accepted, u, layout, mode, sweep_blocks, orders, flips, aux, neighbours,
    coupling, reach, offsets, last_sites, last, trace, truth, first=0, stop=-1,
):  # fmt: skip
    """``T = layout.shape[0]`` block steps of every chain of a pairwise target, in place: block
    Gibbs over the candidates ``flips [M, k]`` (``aux`` False) or the Hamming ball sampler with
    the ball ``flips`` (``aux`` True). ``x, s [B, n]``: states and flip log-ratios; ``log_p``,
    ``n_accepted [B]``; ``reach``, ``offsets``: ``neighbour_reach``, ``neighbour_offsets`` of
    ``neighbours``; ``u``, ``layout``,
    ``mode``, ``sweep_blocks``, ``orders``, ``last_sites``, ``last``, ``trace`` and ``truth``
    as in ``rbm_kernels.block_steps``. Only chains ``first`` to ``stop`` (-1: the last) move,
    so that groups of chains run in parallel threads (``threads.run_grouped``)."""
    steps, chains = layout.shape[0], x.shape[0]
    stop = chains if stop < 0 else stop
    n = x.shape[1]
    count, k = flips.shape
    log_w, w = np.empty(count), np.empty(count)
    masks = flip_masks(flips)
    flip_at, flip_count = flip_lists(masks, k)
    signed = np.empty(k)
    sites, swaps = np.empty(k, np.int64), np.empty((2, k), np.int64)
    pair = np.empty((k, k))
    part, members, moves = np.empty(k, np.int64), np.empty(k, np.int64), np.empty(k, np.int64)
    by_parts = mode == 0 and not aux  # block Gibbs on random blocks: its parts one by one
    orders_now = np.zeros(chains, np.int64)  # each chain's current order ("shuffled")
    sums = trace_starts(trace, x, truth, first, stop)  # each chain's sum x and x . truth
    for tile in range(0, steps, STEP_TILE):  # a tile's uniforms stay cached for every chain
        for b in range(first, stop):
            xb, sb = x[b], s[b]
            current_order = orders_now[b]
            sum_x, overlap = sums[0, b], sums[1, b]
            lp, accepted = log_p[b], n_accepted[b]  # locals: the steps' running sums
            for step in range(tile, min(tile + STEP_TILE, steps)):
                aux_at, choice_at = layout[step, 1], layout[step, 2]
                if mode == 0:  # random blocks: apart nearly always, their coupling terms all 0
                    apart = pick_apart(u, layout[step, 0] + b * k, n, k, reach, offsets, sites)
                    linked = not apart and _pair_terms(
                        xb, sites, neighbours, coupling, reach, offsets, pair
                    )
                else:
                    current_order = step_block(
                        u,
                        layout,
                        step,
                        mode,
                        sweep_blocks,
                        orders,
                        current_order,
                        b,
                        n,
                        sites,
                        swaps,
                    )
                    linked = _pair_terms(xb, sites, neighbours, coupling, reach, offsets, pair)
                if by_parts and not linked:
                    log_ratio, stay, changed = _apart_block_gibbs(
                        sb, sites, u[choice_at + b], moves
                    )
                elif by_parts:
                    parts(pair, part)
                    log_ratio, stay, changed = _factorised_block_gibbs(
                        sb, sites, pair, part, members, log_w, w, u[choice_at + b], moves
                    )
                else:
                    current = 0
                    if aux:
                        current = min(int(u[aux_at + b] * count), count - 1)
                    if linked:
                        _log_weights(sb, sites, linked, pair, masks, current, log_w)
                    else:
                        _apart_log_weights(
                            sb, sites, masks, flip_at, flip_count, current, signed, log_w
                        )
                    stay, log_ratio, changed = draw_candidate(
                        log_w, w, u[choice_at + b], masks, current, moves
                    )
                lp += log_ratio
                accepted += changed
                for c in range(changed):
                    i = sites[moves[c]]
                    sum_x -= 2.0 * xb[i]
                    overlap -= 2.0 * xb[i] * truth[i]
                    _flip(xb, sb, i, neighbours, coupling)
                if step == steps - 1:
                    record_last(last_sites, last, b, sites, stay, changed)
                trace_row(trace, step, b, lp, sum_x, overlap, changed, -1)
            log_p[b], n_accepted[b] = lp, accepted
            orders_now[b], sums[0, b], sums[1, b] = current_order, sum_x, overlap
