"""Compiled learning steps (Algorithm 1, spec 5) for LSB 1 and LSB 2 on the CPU (numba).

The same step as ``LocallyBalancedSampler._learn_step`` and ``objective.lsb_loss_and_grads``,
written as loops: propose with theta0, evaluate the objective and its gradient by hand, update
(theta, eta) with Adam or SGD with momentum, accept with theta0. Learning couples the chains
(the loss is a mean over them and the parameters change every step), so here the steps are the
outer loop and the chains the inner one.

- LSB 1 keeps the four component values ``g_k(t_i) e^-shift_k`` per chain and site and their
  exact sums ``S_k``: ``log Z_theta = logsumexp_k(log w_k + shift_k + log S_k)`` is O(1) in theta
  (spec 5's shortcut); a step re-adds ``S_k`` (4 D additions) and evaluates no exponential
  outside the two flipped neighbourhoods.
- LSB 2's ``g`` changes everywhere at every step, so ``Z_theta`` and its gradient take O(D)
  network evaluations per chain and step; the network is evaluated through its pieces (see
  ``NetworkBalancing.pieces``) and the gradient in every piece's slope and intercept is a sum
  over the sites on that piece, chained to the weights by hand.

The optimiser's state (Adam's moments, SGD's momentum) lives with the sampler (its
``_optimizer_state``, ``[2, P + 1]``, shared by the compiled and device learning steps) and
``optimizer_step`` follows ``torch.optim`` step for step.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from lsbcore.backends.chain_groups import group_range, parallel_twin
from lsbcore.backends.kernels import component_log_g, flip_values, log_g, record_step, write_flip
from lsbcore.backends.network_terms import network_terms_at, piece_sums
from lsbcore.backends.structures import NetworkLattice
from lsbcore.balancing import objective
from lsbcore.numerics import (
    ADAM_BETA1,
    ADAM_BETA2,
    ADAM_EPS,
    LOG_RANGE,
    MAX_LOG_G,
    SGD_MOMENTUM,
)

# the lattice loops may reorder sums and fuse multiply-adds; no flag that assumes finite values
# (the divergence checks must see NaN and inf)
LOOP_MATH = {"contract", "arcp", "reassoc"}
#: Sites of a chain whose LSB 2 terms are computed together (``_lattice_sums``): the work rows
#: of a tile (about 100 kB) stay in cache, where a whole photo's (65,536 sites: 6 MB) do not
LATTICE_TILE = 1024


# ----------------------------------------------------------------------------- shared pieces
@njit(cache=True, nogil=True)
def _softplus(v):
    return v if v > 20.0 else math.log1p(math.exp(v))


@njit(cache=True, nogil=True, inline="always")
def eta_terms(eta_raw):
    """``(eta, log eta + 1, d eta / d eta_raw)`` with ``eta = softplus(eta_raw)`` (linear above
    torch's threshold of 20, as its softplus and its gradient)."""
    eta = _softplus(eta_raw)
    slope = 1.0 if eta_raw > 20.0 else 1.0 / (1.0 + math.exp(-eta_raw))
    return eta, math.log(eta) + 1.0, slope


@njit(cache=True, nogil=True, inline="always")
def chain_objective(log_t, log_t_uniform, log_p_hat, log_q0, log_p_new, eta, log_eta_1, n):
    """One chain's term of spec 5's loss, for any transition probability (the balanced one of
    ``loss_and_grads``, FLSB's Metropolis-Hastings one), and its gradient:

        w T (log T - log p~(x'))  +  M~ (eta M~ - p^ (log eta + 1)),    M~ = 1 - T(x~|x),

    ``p^ = e^log_p_hat`` (batch-normalised), ``w = p^ / Q0``. Returns ``(term, d loss / d log T,
    d loss / d log T(x~|x), the chain's share of d loss / d eta)``, the gradients of the mean
    over ``n`` chains (the last before ``/ n``). ``d M~ / d log T~ = -(1 - M~)``, rounded as
    autograd's ``expm1`` backward."""
    p_hat = math.exp(log_p_hat)
    w = math.exp(log_p_hat - log_q0)
    t = math.exp(log_t)
    m = -math.expm1(log_t_uniform)
    log_ratio = log_t - log_p_new
    term = w * t * log_ratio + m * (eta * m - p_hat * log_eta_1)
    grad_log_t = w * t * (log_ratio + 1.0) / n
    grad_log_t_uniform = -(2.0 * eta * m - p_hat * log_eta_1) * (1.0 - m) / n
    return term, grad_log_t, grad_log_t_uniform, m * (m - p_hat / eta)


@njit(cache=True, nogil=True)
def loss_and_grads(log_z, log_g_flips, unique_i, unique_j, log_p, s_flipped, log_q0, eta_raw):
    """``objective.lsb_loss_and_grads`` as loops (same arguments, ``[B]`` / ``[4, B, K]``).

    Returns ``(loss, grad_log_z [B], grad_flips [4, B, K], grad_eta_raw, dz [2, B])``.
    """
    n, k_slots = log_g_flips.shape[1], log_g_flips.shape[2]
    grad_log_z = np.zeros(n)
    grad_flips = np.zeros(log_g_flips.shape)
    dz = np.zeros((2, n))
    top = log_p.max()
    eta, log_eta_1, slope = eta_terms(eta_raw)
    loss = 0.0
    grad_eta = 0.0
    scaled = np.empty((2, 2, k_slots))
    below = np.empty((2, 2, k_slots))
    denominator = np.empty(2)
    log_ts = np.empty(2)
    grad_log_ts = np.empty(2)
    for b in range(n):
        for f in range(2):
            mask = unique_i if f == 0 else unique_j
            total = 0.0
            for o in range(2):
                for k in range(k_slots):
                    shifted = log_g_flips[2 * f + o, b, k] - log_z[b]
                    below[f, o, k] = 1.0 if shifted <= MAX_LOG_G else 0.0
                    scaled[f, o, k] = math.exp(min(shifted, MAX_LOG_G))
            for k in range(k_slots):
                total += (scaled[f, 1, k] - scaled[f, 0, k]) * mask[b, k]
            dz[f, b] = total
            denominator[f] = 1.0 + max(total, 0.0)
            log_ts[f] = (log_g_flips[2 * f, b, 0] - log_z[b]) - math.log(denominator[f])
        term, grad_log_ts[0], grad_log_ts[1], grad_eta_b = chain_objective(
            log_ts[0], log_ts[1], log_p[b] - top, log_q0[b], log_p[b] + s_flipped[b], eta,
            log_eta_1, n,
        )  # fmt: skip
        loss += term
        for f in range(2):
            mask = unique_i if f == 0 else unique_j
            grad_dz = -grad_log_ts[f] / denominator[f]
            grad_log_z[b] += grad_dz
            if not dz[f, b] > 0.0:
                grad_dz = 0.0
            for k in range(k_slots):
                common = grad_dz * mask[b, k]
                grad_flips[2 * f, b, k] = -(scaled[f, 0, k] * below[f, 0, k] * common)
                grad_flips[2 * f + 1, b, k] = scaled[f, 1, k] * below[f, 1, k] * common
            grad_flips[2 * f, b, 0] += grad_log_ts[f]
        grad_eta += grad_eta_b
    return loss / n, grad_log_z, grad_flips, grad_eta / n * slope, dz


@njit(cache=True, nogil=True)
def optimizer_step(params, grads, state, opt_kind, lr):
    """One ``torch.optim`` step, in place. ``opt_kind`` 0: Adam (betas 0.9, 0.999, eps 1e-8),
    ``state [2, P + 1]`` (moments; ``state[0, P]`` counts steps); 1: SGD with momentum 0.9,
    ``state[0]`` the momentum buffer, ``state[1, P]`` 1 once it exists."""
    p = params.shape[0]
    if opt_kind == 0:
        state[0, p] += 1.0
        step = state[0, p]
        correction1 = 1.0 - ADAM_BETA1**step
        correction2_sqrt = math.sqrt(1.0 - ADAM_BETA2**step)
        for i in range(p):
            g = grads[i]
            state[0, i] += (g - state[0, i]) * (1.0 - ADAM_BETA1)  # lerp, as torch
            state[1, i] = state[1, i] * ADAM_BETA2 + (1.0 - ADAM_BETA2) * g * g
            denominator = math.sqrt(state[1, i]) / correction2_sqrt + ADAM_EPS
            params[i] -= lr / correction1 * state[0, i] / denominator
    else:
        started = state[1, p] > 0.0
        for i in range(p):
            if started:
                state[0, i] = SGD_MOMENTUM * state[0, i] + grads[i]
            else:
                state[0, i] = grads[i]
            params[i] -= lr * state[0, i]
        state[1, p] = 1.0


@njit(cache=True, nogil=True)
def _flip_workspace(n_chains, k_slots):
    """Buffers of a learning step's two flips per chain: ``sites [2, B]``, ``flips [4, B, K]``
    (x' before and after, x~ before and after), ``x_new, masks [2, B, K]``, their
    ``log_g_flips [4, B, K]``, and per chain ``log_z``, ``log_q0`` and ``s_flipped``."""
    return (
        np.empty((2, n_chains), dtype=np.int64),
        np.empty((4, n_chains, k_slots)),
        np.empty((2, n_chains, k_slots)),
        np.empty((2, n_chains, k_slots)),
        np.empty((4, n_chains, k_slots)),
        np.empty(n_chains),
        np.empty(n_chains),
        np.empty(n_chains),
    )


_authors_log_ratio = njit(cache=True, nogil=True)(objective.authors_log_ratio)


@njit(cache=True, nogil=True)
def _objective_log_ratio(b, i, s_i, x, authors_field):
    """``log p~(x') - log p~(x)`` in the objective for chain ``b``'s flip of site ``i``: ``s_i``,
    or the authors' form when their field is given (one row for all chains, or one per chain)."""
    if authors_field.shape[0] == 0:
        return s_i
    row = b if authors_field.shape[0] > 1 else 0
    return _authors_log_ratio(s_i, x[b, i], authors_field[row, i])


@njit(cache=True, nogil=True, inline="always")
def _both_flips(b, i, j, x, s, tables, sites, flips, x_new, masks):
    """Chain ``b``'s two flips of a learning step: the proposed site ``i`` (``x'``) and the
    uniform site ``j`` (``x~``), each before and after (``flips [4, B, K]``), with the slots
    that count in sums (``masks [2, B, K]``)."""
    neighbours, unique = tables.neighbours, tables.unique
    sites[0, b], sites[1, b] = i, j
    for f in range(2):
        site = sites[f, b]
        for k in range(neighbours.shape[1]):
            flips[2 * f, b, k] = s[b, neighbours[site, k]]
            masks[f, b, k] = unique[site, k]
        flip_values(b, site, x, s, tables, flips[2 * f + 1, b], x_new[f, b])


@njit(cache=True, nogil=True)
def _optimise(learner, grads, loss):
    """One optimiser step of the parameters; a step that leaves them (or the loss) non-finite
    is undone. Returns whether it failed."""
    params = learner.params
    good = params.copy()
    optimizer_step(params, grads, learner.opt_state, learner.opt_kind, learner.lr)
    failed = not math.isfinite(params.sum() + loss)
    if failed:
        params[:] = good
    return failed


@njit(cache=True, nogil=True, inline="always")
def _accept(b, u_accept, dz, sites, flips, x_new, chains, neighbours, log_p, last):
    """Accept ``x'`` with theta0 (``A = Z / max(Z, Z')``, in units of Z) and commit it; the
    decision goes to ``last``. Returns whether it was accepted."""
    i = sites[0, b]
    accept = _decide(b, u_accept, 1.0 + dz[0, b], i, last)
    if accept:
        log_p[b] -= flips[1, b, 0]  # log p~ gains s_i = -s_i(x')
        write_flip(b, i, chains, neighbours, flips[1, b], x_new[0, b])
    return accept


@njit(cache=True, nogil=True)
def _draw_by_tiles(row, tile_totals, u):
    """``_draw`` of a row whose tiles of ``LATTICE_TILE`` sites sum to ``tile_totals``: the
    running sum skips whole tiles and is followed site by site only in the tile where it
    passes ``u`` times the total (and on, should its rounding fall short there)."""
    n = row.shape[0]
    n_tiles = (n + LATTICE_TILE - 1) // LATTICE_TILE
    total = 0.0
    for tile in range(n_tiles):
        total += tile_totals[tile]
    target = u * total
    acc = 0.0
    for tile in range(n_tiles):
        start = tile * LATTICE_TILE
        if acc + tile_totals[tile] <= target and tile < n_tiles - 1:
            acc += tile_totals[tile]
            continue
        for i in range(start, min(start + LATTICE_TILE, n)):
            acc += row[i]
            if acc > target:
                return i
    return n - 1


@njit(cache=True, nogil=True, inline="always")
def _draw(row, u):
    """Index of the first running sum of ``row`` above ``u`` times its total (an inverse CDF
    searched against its own sequential total, as ``searchsorted`` against ``cumsum[-1]``)."""
    total = 0.0
    for i in range(row.shape[0]):
        total += row[i]
    target = u * total
    acc = 0.0
    for i in range(row.shape[0]):
        acc += row[i]
        if acc > target:
            return i
    return row.shape[0] - 1


@njit(cache=True, nogil=True, inline="always")
def _decide(b, u_accept, z_ratio, site, last):
    """Accept ``x'`` with theta0: ``A = Z / max(Z, Z')`` in units of ``Z`` (``z_ratio = Z'/Z``);
    the decision goes to ``last``."""
    accept = u_accept * max(z_ratio, 1.0) < 1.0
    last[b, 0], last[b, 1], last[b, 2] = site, 1.0, z_ratio
    last[b, 3] = 1.0 if accept else 0.0
    return accept


# ----------------------------------------------------------------------------- LSB 1
@njit(cache=True, nogil=True, fastmath=LOOP_MATH)
def _rebuild_components(b, s, n_sites, comps, shift, sums):
    values = np.empty(4)
    for c in range(4):
        shift[b, c] = -np.inf
    for i in range(n_sites):
        component_log_g(s[b, i], values)
        for c in range(4):
            comps[b, c, i] = values[c]
            shift[b, c] = max(shift[b, c], values[c])
    for c in range(4):
        total = 0.0
        for i in range(n_sites):
            comps[b, c, i] = math.exp(comps[b, c, i] - shift[b, c])
            total += comps[b, c, i]
        sums[b, c] = total


@njit(cache=True, nogil=True, fastmath=LOOP_MATH)
def mixture_learning_steps(n, chains, tables, learner, u, out, cache, fresh):
    """``n`` LSB 1 learning steps in place; ``learner.params = [theta (4), eta_raw]``.

    Returns the steps taken: ``n``, or fewer when a step left non-finite parameters or loss
    (the parameters are restored to the last good ones, that step's move is still made, and
    the caller stops learning). ``losses [n]`` and ``weights_out [n, 5]`` (softmax weights and
    eta) after each step; ``last [B, 4]``: site, 1, Z'/Z, accepted. ``cache`` (comps ``[B, 4, D]``,
    shift and sums ``[B, 4]``) holds the components: rebuilt from ``s`` when ``fresh``, else
    carried over from the previous call (so that chunking the steps changes nothing).
    """
    x, s, _, stats, _, _, trace = chains
    neighbours = tables.neighbours
    params, log_p = learner.params, learner.log_p
    losses, weights_out, last = out
    comps, shift, sums = cache
    n_chains, n_sites, k_slots = x.shape[0], neighbours.shape[0], neighbours.shape[1]
    sites, flips, x_new, masks, log_g_flips, log_z, log_q0, s_flipped = _flip_workspace(
        n_chains, k_slots
    )
    if fresh:
        for b in range(n_chains):
            _rebuild_components(b, s, n_sites, comps, shift, sums)
    shares = np.empty((n_chains, 4))
    resp = np.empty((4, n_chains, k_slots, 4))
    log_w = np.empty(4)
    values = np.empty(4)
    grads = np.empty(5)
    low, high = math.exp(-LOG_RANGE), math.exp(LOG_RANGE)
    for t in range(n):
        top = params[:4].max()
        norm = 0.0
        for c in range(4):
            norm += math.exp(params[c] - top)
        for c in range(4):
            log_w[c] = params[c] - top - math.log(norm)
        for b in range(n_chains):
            # log Z_theta and the components' shares; draw k, then i ~ g_k(t_i) / S_k
            m = -np.inf
            for c in range(4):
                values[c] = log_w[c] + shift[b, c] + math.log(sums[b, c])
                m = max(m, values[c])
            total = 0.0
            for c in range(4):
                shares[b, c] = math.exp(values[c] - m)
                total += shares[b, c]
            log_z[b] = m + math.log(total)
            for c in range(4):
                shares[b, c] /= total
            k = min(_draw(shares[b], u[t, b, 0]), 3)
            i = _draw(comps[b, k], u[t, b, 1])
            j = min(int(u[t, b, 3] * n_sites), n_sites - 1)
            _both_flips(b, i, j, x, s, tables, sites, flips, x_new, masks)
            for f in range(4):
                for kk in range(k_slots):
                    component_log_g(flips[f, b, kk], values)
                    mm = -np.inf
                    for c in range(4):
                        values[c] += log_w[c]
                        mm = max(mm, values[c])
                    tot = 0.0
                    for c in range(4):
                        resp[f, b, kk, c] = math.exp(values[c] - mm)
                        tot += resp[f, b, kk, c]
                    for c in range(4):
                        resp[f, b, kk, c] /= tot
                    log_g_flips[f, b, kk] = mm + math.log(tot)
            log_q0[b] = log_g_flips[0, b, 0] - log_z[b]
            s_flipped[b] = _objective_log_ratio(b, i, flips[0, b, 0], x, learner.authors_field)
        loss, grad_log_z, grad_flips, grad_eta, dz = loss_and_grads(
            log_z, log_g_flips, masks[0], masks[1], log_p, s_flipped, log_q0, params[4]
        )
        # d loss / d log w: through log Z (the shares) and the neighbourhoods' log g
        grad_log_w = np.zeros(4)
        for b in range(n_chains):
            for c in range(4):
                grad_log_w[c] += grad_log_z[b] * shares[b, c]
            for f in range(4):
                for kk in range(k_slots):
                    for c in range(4):
                        grad_log_w[c] += grad_flips[f, b, kk] * resp[f, b, kk, c]
        total = grad_log_w.sum()
        for c in range(4):
            grads[c] = grad_log_w[c] - math.exp(log_w[c]) * total
        grads[4] = grad_eta
        failed = _optimise(learner, grads, loss)
        losses[t] = loss
        top = params[:4].max()
        norm = 0.0
        for c in range(4):
            norm += math.exp(params[c] - top)
        for c in range(4):
            weights_out[t, c] = math.exp(params[c] - top) / norm
        weights_out[t, 4] = _softplus(params[4])
        for b in range(n_chains):
            i = sites[0, b]
            accept = _accept(
                b, u[t, b, 2], dz, sites, flips, x_new, chains, neighbours, log_p, last
            )
            if accept:
                rebuild = False
                for kk in range(k_slots):
                    jj = neighbours[i, kk]
                    component_log_g(s[b, jj], values)
                    for c in range(4):
                        v = values[c] - shift[b, c]
                        rebuild = rebuild or v > LOG_RANGE
                        comps[b, c, jj] = math.exp(min(v, LOG_RANGE))
                for c in range(4):
                    tot = 0.0
                    for ii in range(n_sites):
                        tot += comps[b, c, ii]
                    sums[b, c] = tot
                    rebuild = rebuild or not (low < tot < high)
                if rebuild:
                    _rebuild_components(b, s, n_sites, comps, shift, sums)
            record_step(trace, t, b, stats, 1.0 if accept else 0.0, i)
        if failed:
            return t + 1
    return n


# ----------------------------------------------------------------------------- LSB 2
@njit(cache=True, nogil=True)
def network_pieces(params, hidden):
    """``NetworkBalancing.pieces`` from the flat parameters ``[w1 (H), b1 (H), w2 (H), b2, ...]``:
    ``(breakpoints, slope, intercept, active [pieces, H])``."""
    w1, b1, w2 = params[:hidden], params[hidden : 2 * hidden], params[2 * hidden : 3 * hidden]
    b2 = params[3 * hidden]
    cuts = np.empty(hidden)
    count = 0
    for h in range(hidden):
        if w1[h] != 0.0:
            cut = -b1[h] / w1[h]
            if -0.5 < cut < 0.5:
                cuts[count] = cut
                count += 1
    breakpoints = np.sort(cuts[:count])
    n_pieces = breakpoints.shape[0] + 1
    active = np.zeros((n_pieces, hidden))
    slope = np.zeros(n_pieces)
    intercept = np.full(n_pieces, b2)
    for p in range(n_pieces):
        left = -0.5 if p == 0 else breakpoints[p - 1]
        right = 0.5 if p == n_pieces - 1 else breakpoints[p]
        probe = 0.5 * (left + right)
        for h in range(hidden):
            if probe * w1[h] + b1[h] > 0.0:
                active[p, h] = 1.0
                slope[p] += w2[h] * w1[h]
                intercept[p] += w2[h] * b1[h]
    return breakpoints, slope, intercept, active


@njit(cache=True, nogil=True)
def network_param_grads(params, hidden, active, g_slope, g_icpt):
    """The gradient in the flat parameters ``[w1, b1, w2, b2, eta_raw]`` from those in every
    piece's slope and intercept (``network_pieces``): ``slope_p = sum_h a_ph w2_h w1_h``,
    ``icpt_p = sum_h a_ph w2_h b1_h + b2``. ``eta_raw``'s entry is left 0."""
    grads = np.zeros(params.shape[0])
    for h in range(hidden):
        w1, b1, w2 = params[h], params[hidden + h], params[2 * hidden + h]
        s_sum, i_sum = 0.0, 0.0
        for p in range(g_slope.shape[0]):
            s_sum += active[p, h] * g_slope[p]
            i_sum += active[p, h] * g_icpt[p]
        grads[h] = w2 * s_sum
        grads[hidden + h] = w2 * i_sum
        grads[2 * hidden + h] = w1 * s_sum + b1 * i_sum
    grads[3 * hidden] = g_icpt.sum()
    return grads


@njit(cache=True, nogil=True)
def _piece(v, breakpoints):
    k = 0
    for cut in breakpoints:
        if v > cut:
            k += 1
    return k


@njit(cache=True, nogil=True)
def _site_caches(b, i, s, u, scale, small, top):
    v = s[b, i]
    u[b, i] = 1.0 / (1.0 + math.exp(-v)) - 0.5
    scale[b, i] = math.exp(max(v, 0.0) - top[b])  # P = e^(s+ - M)
    small[b, i] = math.exp(-abs(v))  # E = e^-|s|


@njit(cache=True, nogil=True)
def _rescale_row(b, s, n_sites, u, scale, small, top):
    """Chain ``b``'s per-site values with a fresh scale ``top[b] = max(0, max_i s_i)``."""
    m = 0.0
    for i in range(n_sites):
        m = max(m, s[b, i])
    top[b] = m
    for i in range(n_sites):
        _site_caches(b, i, s, u, scale, small, top)


@njit(cache=True, nogil=True)
def network_caches(s, n_sites, u, scale, small, top):
    """Per site the values that depend on ``s`` only: ``u = sigmoid(s) - 1/2``, ``P``, ``E``."""
    for b in range(s.shape[0]):
        _rescale_row(b, s, n_sites, u, scale, small, top)


@njit(cache=True, nogil=True)
def _flip_log_g(v, breakpoints, slope, intercept, coef, pieces, inputs):
    """``log g(e^v)`` of the network and ``d log g / d z`` for its two inputs (``coef``), with
    their pieces and inputs ``(u, -u)``."""
    u = 1.0 / (1.0 + math.exp(-v)) - 0.5
    value = log_g(5, v, np.zeros(4), breakpoints, slope, intercept)
    for side in range(2):
        w = u if side == 0 else -u
        k = _piece(w, breakpoints)
        z = slope[k] * w + intercept[k]
        if z < -30.0:  # log h = z there (NetworkBalancing._log_softplus)
            dlog_h = 1.0
            log_h = z
        else:
            e = math.exp(min(z, 20.0))
            sp = z if z > 20.0 else math.log1p(e)
            dlog_h = (1.0 if z > 20.0 else e / (1.0 + e)) / sp
            log_h = math.log(sp)
        # log g = log(h(t) + t h(1/t)) - log 2: the share of each term times d log h / dz
        share = math.exp(log_h + (0.0 if side == 0 else v) - value - math.log(2.0))
        coef[side] = share * dlog_h
        pieces[side] = k
        inputs[side] = w
    return value


@njit(cache=True, nogil=True, fastmath=LOOP_MATH, error_model="numpy")
def _lattice_sums(b, s, scale, small, u_cache, pieces, lattice, g, tile_totals, acc_icpt,
                  acc_slope):  # fmt: skip
    """Chain ``b``: ``g_i e^-M`` into ``g`` (returns their sum, each tile's into
    ``tile_totals``) and, per piece, the sums of
    ``d (g e^-M) / dz`` and of it times the input, for the gradient in slopes and intercepts.
    In tiles of ``LATTICE_TILE`` sites (``lattice``: ``NetworkLattice`` work rows that long),
    so that a tile's work rows stay in cache: per tile the network's terms at every site side
    by side (``network_terms.network_terms_at``: ``h`` and ``dh / dz`` of both inputs), then
    the sums per piece (``_tile_sums``)."""
    rows, piece, powers = lattice
    n = g.shape[0]
    total = 0.0
    for tile, start in enumerate(range(0, n, LATTICE_TILE)):
        end = min(start + LATTICE_TILE, n)
        u = u_cache[b, start:end]
        network_terms_at(u, pieces.breakpoints, pieces.slope, pieces.intercept, rows, piece, powers)
        tile_totals[tile] = _tile_sums(
            s[b, start:end], scale[b, start:end], small[b, start:end], u, rows, piece,
            g[start:end], acc_icpt[b], acc_slope[b],
        )  # fmt: skip
        total += tile_totals[tile]
    return total


@njit(cache=True, nogil=True, fastmath=LOOP_MATH, error_model="numpy")
def _tile_sums(s, scale, small, u, rows, piece, g, acc_icpt, acc_slope):
    """``_lattice_sums`` of one tile from its network terms ``rows`` (``h`` and ``dh / dz``
    of both inputs, rows 5-8) and ``piece``."""
    h1, h2, d1, d2 = rows[5], rows[6], rows[7], rows[8]
    a1, a2 = rows[1], rows[2]  # z's rows, read by network_terms_at and free now
    total = 0.0
    for i in range(g.shape[0]):
        half = 0.5 * scale[i]
        c1 = small[i] if s[i] >= 0.0 else 1.0
        c2 = 1.0 if s[i] >= 0.0 else small[i]
        g[i] = half * (h1[i] * c1 + h2[i] * c2)  # g e^-M
        total += g[i]
        a1[i] = half * c1 * d1[i]
        a2[i] = half * c2 * d2[i]
    piece_sums(a1, a2, u, piece, acc_icpt, acc_slope)
    return total


@njit(cache=True, nogil=True, fastmath=LOOP_MATH)
def network_learning_step(
    t, chains, tables, learner, hidden, u_step, out, cache, lattice, pieces, groups
):
    """One LSB 2 learning step in place (step ``t`` of a call). ``lattice``: work rows for the
    network's terms at a chain's sites (``NetworkLattice``, one set per group: ``[groups, ...]``);
    ``pieces`` from ``network_pieces``; ``cache``: the per-site inputs (see ``network_caches``).
    Each chain's O(D) part (``Z`` and its gradient sums, the draw, the flips' terms) runs in its
    group of ``groups`` (``chain_groups``: side by side in the parallel twin); the loss, the
    update and the moves after them. Returns 0, or 1 when the step left non-finite parameters
    or loss (they are restored; the move is still made), or 2 when ``log Z`` was not finite
    (nothing is done)."""
    x, s, _, stats, _, _, trace = chains
    neighbours = tables.neighbours
    params, log_p = learner.params, learner.log_p
    losses, weights_out, last = out
    u_cache, scale, small, top = cache
    breakpoints, slope, intercept, active = pieces
    n_chains, n_sites, k_slots = x.shape[0], neighbours.shape[0], neighbours.shape[1]
    sites, flips, x_new, masks, log_g_flips, log_z, log_q0, s_flipped = _flip_workspace(
        n_chains, k_slots
    )
    n_pieces = slope.shape[0]
    acc_icpt = np.zeros((n_chains, n_pieces))  # d (Z e^-M) / d intercept, per chain
    acc_slope = np.zeros((n_chains, n_pieces))
    flip_coef = np.empty((4, n_chains, k_slots, 2))
    flip_piece = np.empty((4, n_chains, k_slots, 2), dtype=np.int64)
    flip_input = np.empty((4, n_chains, k_slots, 2))
    totals = np.empty(n_chains)
    for group in prange(groups):
        # a group's own g, tile totals and work rows; every other array is written per chain
        g = np.empty(n_sites)
        tile_totals = np.empty((n_sites + LATTICE_TILE - 1) // LATTICE_TILE)
        rows = NetworkLattice(lattice.rows[group], lattice.piece[group], lattice.powers[group])
        lo, hi = group_range(group, groups, n_chains)
        for b in range(lo, hi):
            total = _lattice_sums(
                b, s, scale, small, u_cache, pieces, rows, g, tile_totals, acc_icpt, acc_slope
            )
            if not math.exp(-LOG_RANGE) < total < math.exp(LOG_RANGE):
                # the scale e^M went stale (the chain's largest s fell or rose far): a fresh one
                _rescale_row(b, s, n_sites, u_cache, scale, small, top)
                acc_icpt[b] = 0.0
                acc_slope[b] = 0.0
                total = _lattice_sums(
                    b, s, scale, small, u_cache, pieces, rows, g, tile_totals, acc_icpt,
                    acc_slope,
                )  # fmt: skip
            totals[b] = total
            log_z[b] = top[b] + math.log(total)
            i = _draw_by_tiles(g, tile_totals, u_step[b, 0])
            j = min(int(u_step[b, 3] * n_sites), n_sites - 1)
            _both_flips(b, i, j, x, s, tables, sites, flips, x_new, masks)
            for f in range(4):
                for kk in range(k_slots):
                    log_g_flips[f, b, kk] = _flip_log_g(
                        flips[f, b, kk],
                        breakpoints,
                        slope,
                        intercept,
                        flip_coef[f, b, kk],
                        flip_piece[f, b, kk],
                        flip_input[f, b, kk],
                    )
            log_q0[b] = log_g_flips[0, b, 0] - log_z[b]
            s_flipped[b] = _objective_log_ratio(b, i, flips[0, b, 0], x, learner.authors_field)
    for b in range(n_chains):
        if not math.isfinite(log_z[b]):
            return 2  # nothing done: the caller stops learning

    loss, grad_log_z, grad_flips, grad_eta, dz = loss_and_grads(
        log_z, log_g_flips, masks[0], masks[1], log_p, s_flipped, log_q0, params[3 * hidden + 1]
    )
    # gradient in every piece's slope and intercept: log Z (sums per chain), then the flips
    g_slope = np.zeros(n_pieces)
    g_icpt = np.zeros(n_pieces)
    for b in range(n_chains):
        weight = grad_log_z[b] / totals[b]
        for p in range(n_pieces):
            g_slope[p] += weight * acc_slope[b, p]
            g_icpt[p] += weight * acc_icpt[b, p]
        for f in range(4):
            for kk in range(k_slots):
                for side in range(2):
                    c = grad_flips[f, b, kk] * flip_coef[f, b, kk, side]
                    p = flip_piece[f, b, kk, side]
                    g_slope[p] += c * flip_input[f, b, kk, side]
                    g_icpt[p] += c
    grads = network_param_grads(params, hidden, active, g_slope, g_icpt)
    grads[3 * hidden + 1] = grad_eta
    failed = _optimise(learner, grads, loss)
    losses[t] = loss
    weights_out[t, 4] = _softplus(params[3 * hidden + 1])
    for b in range(n_chains):
        i = sites[0, b]
        accept = _accept(b, u_step[b, 2], dz, sites, flips, x_new, chains, neighbours, log_p, last)
        if accept:
            rescale = False
            for kk in range(k_slots):
                jj = neighbours[i, kk]
                rescale = rescale or s[b, jj] - top[b] > LOG_RANGE
                _site_caches(b, jj, s, u_cache, scale, small, top)
            if rescale:
                _rescale_row(b, s, n_sites, u_cache, scale, small, top)
        record_step(trace, t, b, stats, 1.0 if accept else 0.0, i)
    return 1 if failed else 0


#: ``network_learning_step`` with its chain groups side by side on the cores (``chain_groups``)
network_learning_step_parallel = parallel_twin(network_learning_step)
