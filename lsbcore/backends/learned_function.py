"""A learnable balancing function and its derivatives, as the compiled learning kernels on RBMs
and factor graphs read it (numba, CPU): LSB 1's mixture and LSB 2's network evaluated on
``g(t)`` itself, ``t = e^s``, at one site or at every site of a state, with the derivatives of
``g`` in a few numbers ``phi`` the function is linear (or piecewise linear) in, and the
optimiser's step from the gradient in ``phi``.

``phi``: LSB 1's log-weights (``g_theta = sum_c w_c g_c``, ``dZ / d log w_c = w_c S_c`` with the
component sums ``S_c = sum_k g_c(t_k)``; at a site ``d log g / d log w_c = w_c g_c(t) / g(t)``);
LSB 2's network in the slope and intercept of each of its pieces
(``learning_kernels.network_pieces``: ``z = slope_p u + intercept_p`` on piece ``p``,
``g = (softplus(z(u)) + t softplus(z(-u))) / 2``, ``u = t / (1 + t) - 1/2``), chained to the
weights as the pairwise kernel does (``network_param_grads``). A ratio into zero mass is
``t = 0``: ``g_c(0) = (0, 0, 0, 1)`` and LSB 2's ``h(-1/2) / 2``, both finite.

LSB 2' (``balancing.monotone``: ``log g(s) = min(phi(s), s + phi(-s))``, ``phi`` a min-max
network of ``K`` groups of ``J`` lines) in its slopes and intercepts themselves: at each site
the unit ``phi`` reads is searched line by line (``K J`` evaluations, the first of equals as the
torch search), ``d log g`` goes to the active units as autograd sends it (split at a tie of the
two terms), ``t = 0`` reads each term's limit, and the optimiser's step is followed by the
projection of the slopes onto ``[0, 1]`` (``_projected_step``). ``g(0)`` may be 0 there: a chain
whose every flip leads into zero mass then has ``Z = 0`` and a term constant in ``phi``. Its
``g = e^(log g)`` is exact while ``log g`` stays below about 700, which needs intercepts beyond
400 to fail (not checked).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from lsbcore.backends.chain_groups import chain_sums
from lsbcore.backends.kernels import search_cdf
from lsbcore.backends.learning_kernels import (
    LOOP_MATH,
    _optimise,
    _piece,
    _softplus,
    chain_objective,
    network_param_grads,
    network_pieces,
    optimizer_step,
)
from lsbcore.backends.network_terms import _network_terms, piece_sums
from lsbcore.backends.structures import KIND_MIXTURE, KIND_MONOTONE
from lsbcore.numerics import MAX_LOG_G

#: The largest bound on the ratios' size (``|s|``, and ``|s~|`` with FLSB) for which the learning
#: kernels' form on ``g(t)`` is exact: every ``g_c(t)`` then lies in ``[e^-R / 2, e^R]`` and no
#: ``g(t'_k) / Z(x)`` reaches the torch objective's cap ``e^MAX_LOG_G`` (``2 e^(2R) <= e^600``)
LEARNING_LIMIT = 0.5 * (MAX_LOG_G - math.log(2.0)) - 1e-9
#: Columns of a learning call's history rows: loss, eta, failed, then LSB 1's four weights
HISTORY_COLUMNS = {"mixture": 7, "network": 3}


@njit(cache=True, nogil=True, inline="always")
def _components(t, out):
    """``g_c(t)`` of the four fixed functions (barker, sqrt, min, max) into ``out[0..3]``."""
    out[0] = t / (1.0 + t)
    out[1] = math.sqrt(t)
    out[2] = min(1.0, t)
    out[3] = max(1.0, t)


# error_model="numpy" on the loops that divide: no zero check (the denominators are at least 1),
# which would keep the compiler from running the sites side by side (2-4x slower)


@njit(cache=True, nogil=True, fastmath=LOOP_MATH, error_model="numpy")
def _mixture_values(t, weights, g, sums):
    """``g_theta(t_k) = sum_c w_c g_c(t_k)`` into ``g [n]`` and the four component sums
    ``S_c = sum_k g_c(t_k)`` into ``sums [4]`` (independent terms: sites side by side)."""
    s0, s1, s2, s3 = 0.0, 0.0, 0.0, 0.0
    w0, w1, w2, w3 = weights[0], weights[1], weights[2], weights[3]
    for k in range(t.shape[0]):
        tk = t[k]
        barker, root, low, high = tk / (1.0 + tk), math.sqrt(tk), min(1.0, tk), max(1.0, tk)
        s0 += barker
        s1 += root
        s2 += low
        s3 += high
        g[k] = w0 * barker + w1 * root + w2 * low + w3 * high
    sums[0], sums[1], sums[2], sums[3] = s0, s1, s2, s3


@njit(cache=True, nogil=True)
def _running_sums(g, cdf):
    """``cdf`` the running sums of ``g`` in order (as torch's ``cumsum``); returns the total."""
    total = 0.0
    for k in range(g.shape[0]):
        total += g[k]
        cdf[k] = total
    return total


@njit(cache=True, nogil=True, fastmath=LOOP_MATH, error_model="numpy")
def _component_sums(t, sums):
    """The four component sums ``S_c = sum_k g_c(t_k)`` into ``sums [4]`` (independent terms:
    the loop may reorder the sums and run sites side by side)."""
    s0, s1, s2, s3 = 0.0, 0.0, 0.0, 0.0
    for k in range(t.shape[0]):
        tk = t[k]
        s0 += tk / (1.0 + tk)
        s1 += math.sqrt(tk)
        s2 += min(1.0, tk)
        s3 += max(1.0, tk)
    sums[0], sums[1], sums[2], sums[3] = s0, s1, s2, s3


@njit(cache=True, nogil=True, inline="always")
def _softplus_slope(z):
    """``h = softplus(z)`` and ``dh / dz`` as the torch network computes them
    (``NetworkBalancing.log_h``): ``e^z`` below -30, ``z`` (slope 1) above 20."""
    if z < -30.0:
        e = math.exp(z)
        return e, e
    if z > 20.0:
        return z, 1.0
    e = math.exp(z)
    return math.log1p(e), e / (1.0 + e)


@njit(cache=True, nogil=True, inline="always")
def _network_g(t, breakpoints, slope, intercept, dphi):
    """LSB 2's ``g(t) = (h(u) + t h(-u)) / 2``, ``u = t / (1 + t) - 1/2``, through the network's
    pieces (``learning_kernels.network_pieces``); adds ``dg / d(slope_p, intercept_p)`` into
    ``dphi [2 P]`` (slopes, then intercepts)."""
    u = t / (1.0 + t) - 0.5
    k1, k2 = _piece(u, breakpoints), _piece(-u, breakpoints)
    h1, d1 = _softplus_slope(slope[k1] * u + intercept[k1])
    h2, d2 = _softplus_slope(-slope[k2] * u + intercept[k2])
    a1, a2 = 0.5 * d1, 0.5 * t * d2
    p = slope.shape[0]
    dphi[k1] += a1 * u
    dphi[p + k1] += a1
    dphi[k2] -= a2 * u
    dphi[p + k2] += a2
    return 0.5 * (h1 + t * h2)


@njit(cache=True, nogil=True)
def _state_values(kind, t, weights, breakpoints, slope, intercept, g, dphi, scratch):
    """``g(t_k)`` of every site into ``g [n]`` and ``dZ / dphi`` into ``dphi`` (zeroed first):
    LSB 1's ``phi = log w`` (``dZ / d log w_c = w_c S_c``), LSB 2's the pieces' slopes and
    intercepts. ``scratch``: ``_scratch``."""
    sums, rows, pieces, powers = scratch
    dphi[:] = 0.0
    if kind == KIND_MIXTURE:
        _mixture_values(t, weights, g, sums)
        for c in range(4):
            dphi[c] = weights[c] * sums[c]
    elif kind == KIND_MONOTONE:
        _monotone_values(t, slope, intercept, breakpoints, g, dphi)
    else:
        _network_values(t, breakpoints, slope, intercept, g, dphi, rows, pieces, powers)


@njit(cache=True, nogil=True, inline="always")
def _draw_sites(kind, t, weights, breakpoints, slope, intercept, g, cdf, dphi, scratch, u, sites):
    """A chain's step at ``x``: ``g`` and ``dZ / dphi`` at every site, the proposal's site ``i``
    by inverse CDF (``u[0]``) and the uniform site ``j`` of ``x~`` (``u[2]``) into ``sites``;
    returns ``Z(x)``."""
    n = g.shape[0]
    _state_values(kind, t, weights, breakpoints, slope, intercept, g, dphi, scratch)
    z = _running_sums(g, cdf)
    sites[0] = search_cdf(cdf, u[0] * cdf[n - 1])
    sites[1] = min(int(u[2] * n), n - 1)
    return z


@njit(cache=True, nogil=True)
def _state_sum(kind, t, weights, breakpoints, slope, intercept, dphi, scratch):
    """``Z = sum_k g(t_k)``, with ``dZ / dphi`` into ``dphi`` (``_state_values`` without the
    sites' values: LSB 1 sums its components side by side)."""
    sums, rows, pieces, powers = scratch
    dphi[:] = 0.0
    if kind == KIND_MIXTURE:
        _component_sums(t, sums)
        total = 0.0
        for c in range(4):
            dphi[c] = weights[c] * sums[c]
            total += dphi[c]
        return total
    g = rows[9]
    if kind == KIND_MONOTONE:
        return _monotone_values(t, slope, intercept, breakpoints, g, dphi)
    return _network_values(t, breakpoints, slope, intercept, g, dphi, rows, pieces, powers)


@njit(cache=True, nogil=True)
def _scratch(n):
    """Work arrays of ``_state_values`` and ``_state_sum`` for states of ``n`` sites: LSB 1's
    sums, LSB 2's rows and pieces (``_network_terms``, a row for ``g``, one for FLSB's ``s~``),
    the exponent bits."""
    return (np.empty(4), np.empty((11, n)), np.empty((2, n), dtype=np.int64),
            np.empty((2, n), dtype=np.int64))  # fmt: skip


@njit(cache=True, nogil=True)
def _site_log_g(kind, t, weights, breakpoints, slope, intercept, values, dsite):
    """``log g(t)`` of one site and ``d log g / dphi`` into ``dsite``; ``values [4]`` scratch."""
    dsite[:] = 0.0
    if kind == KIND_MIXTURE:
        _components(t, values)
        g = 0.0
        for c in range(4):
            values[c] *= weights[c]
            g += values[c]
        for c in range(4):
            dsite[c] = values[c] / g
        return math.log(g)
    if kind == KIND_MONOTONE:
        return _monotone_log_g(t, slope, intercept, breakpoints, dsite)
    g = _network_g(t, breakpoints, slope, intercept, dsite)
    for q in range(dsite.shape[0]):
        dsite[q] /= g
    return math.log(g)


@njit(cache=True, nogil=True)
def _site_change(kind, t_new, t, weights, breakpoints, slope, intercept, values, work, dphi):
    """``g(t_new) - g(t)`` of one site whose ratio moved, and the change of ``dg / dphi`` added
    into ``dphi`` (``values [4]``, ``work [n_phi]`` scratch): a state's ``Z`` and ``dZ / dphi``
    after a flip from the sites whose ratios it changed."""
    if kind == KIND_MIXTURE:
        _components(t_new, values)
        g_new = 0.0
        for c in range(4):
            g_new += weights[c] * values[c]
            dphi[c] += weights[c] * values[c]
        _components(t, values)
        g = 0.0
        for c in range(4):
            g += weights[c] * values[c]
            dphi[c] -= weights[c] * values[c]
        return g_new - g
    if kind == KIND_MONOTONE:
        g_new = _monotone_g(t_new, slope, intercept, breakpoints, 1.0, dphi)
        return g_new - _monotone_g(t, slope, intercept, breakpoints, -1.0, dphi)
    work[:] = 0.0
    g_new = _network_g(t_new, breakpoints, slope, intercept, dphi)
    g = _network_g(t, breakpoints, slope, intercept, work)
    for q in range(work.shape[0]):
        dphi[q] -= work[q]
    return g_new - g


@njit(cache=True, nogil=True, inline="always")
def _softmax(params, weights):
    """``softmax(theta)`` of ``params[:4]`` into ``weights``."""
    top = max(max(params[0], params[1]), max(params[2], params[3]))
    norm = 0.0
    for c in range(4):
        weights[c] = math.exp(params[c] - top)
        norm += weights[c]
    for c in range(4):
        weights[c] /= norm


@njit(cache=True, nogil=True)
def _function_now(kind, params, hidden, weights):
    """The function under the current parameters: LSB 1's weights (into ``weights``), LSB 2's
    pieces ``(breakpoints, slope, intercept, active)``, and the number of ``phi``."""
    if kind == KIND_MIXTURE:
        _softmax(params, weights)
        return np.zeros(0), np.zeros(1), np.zeros(1), np.zeros((1, 1)), 4
    if kind == KIND_MONOTONE:  # LSB 2': hidden is J, the units of a group; the shape [K, J]
        kj = (params.shape[0] - 1) // 2
        shape = np.array([kj // hidden, hidden], dtype=np.float64)
        return shape, params[:kj].copy(), params[kj : 2 * kj].copy(), np.zeros((1, 1)), 2 * kj
    breakpoints, slope, intercept, active = network_pieces(params, hidden)
    return breakpoints, slope, intercept, active, 2 * slope.shape[0]


@njit(cache=True, nogil=True)
def _update(kind, learner, hidden, grad_phi, grad_eta, weights, active, loss, failed, history,
            step):  # fmt: skip
    """The gradient in the parameters from that in ``phi`` (LSB 1: ``log_softmax``'s backward;
    LSB 2: the pieces' active units), one optimiser step, and the step's history row (loss,
    eta, failed, LSB 1's weights after the update). After a step that left the parameters or
    the loss non-finite, the last good parameters stay for good (``failed[0]``), as the torch
    step's ``_guard`` pins them."""
    params = learner.params
    eta_at = params.shape[0] - 1
    if kind == KIND_MIXTURE:
        grads = np.zeros(5)
        total = grad_phi.sum()
        for c in range(4):
            grads[c] = grad_phi[c] - weights[c] * total
    elif kind == KIND_MONOTONE:  # phi is the parameters themselves
        grads = np.zeros(params.shape[0])
        grads[: grad_phi.shape[0]] = grad_phi
    else:
        p = grad_phi.shape[0] // 2
        grads = network_param_grads(params, hidden, active, grad_phi[:p], grad_phi[p:])
    grads[eta_at] = grad_eta
    good = params.copy()
    if kind == KIND_MONOTONE:
        bad = _projected_step(learner, grads, loss)
    else:
        bad = _optimise(learner, grads, loss)
    if failed[0] > 0.0:
        params[:] = good
    if bad:
        failed[0] = 1.0
    history[step, 0], history[step, 1], history[step, 2] = (
        loss,
        _softplus(params[eta_at]),
        failed[0],
    )
    if kind == KIND_MIXTURE:
        _softmax(params, weights)
        for c in range(4):
            history[step, 3 + c] = weights[c]


@njit(cache=True, nogil=True)
def _update_from_chains(kind, learner, hidden, terms, grads, eta_slope, weights, active, failed,
                        history, step):  # fmt: skip
    """``_update`` from each chain's term of the loss and share of its gradient (``terms [2,
    B]``, ``grads [B, n_phi]``), summed over the chains in their order (``chain_groups.
    chain_sums``); the loss is their mean."""
    chains = grads.shape[0]
    loss, grad_eta, grad_phi = chain_sums(terms, grads)
    _update(kind, learner, hidden, grad_phi, grad_eta / chains * eta_slope, weights, active,
            loss / chains, failed, history, step)  # fmt: skip


@njit(cache=True, nogil=True, fastmath=LOOP_MATH, error_model="numpy")
def _network_values(t, breakpoints, slope, intercept, g, dphi, rows, pieces, powers):
    """``g(t_k)`` of LSB 2's network at every site into ``g [n]``, and ``dZ / dphi`` added into
    ``dphi`` (``_network_g`` for a whole state, the sites side by side: the sums per piece by
    ``network_terms.piece_sums``); returns ``Z``."""
    _network_terms(t, breakpoints, slope, intercept, rows, pieces, powers)
    u, h1, h2, d1, d2 = rows[0], rows[5], rows[6], rows[7], rows[8]
    a1, a2 = rows[1], rows[2]  # z's rows, free now: dg / dz of the two inputs
    total = 0.0
    for k in range(t.shape[0]):
        g[k] = 0.5 * (h1[k] + t[k] * h2[k])
        total += g[k]
        a1[k], a2[k] = 0.5 * d1[k], 0.5 * t[k] * d2[k]
    p = slope.shape[0]
    piece_sums(a1, a2, u, pieces, dphi[p:], dphi[:p])
    return total


@njit(cache=True, nogil=True, inline="always")
def _balanced_objective(z, change, log_g, dead, log_p, top, s_i, eta, log_eta_1, chains, dz,
                        dsite, grad_phi):  # fmt: skip
    """One chain's term of the loss with exact ratios (``objective.lsb_loss_and_grads``) and its
    gradient in ``phi`` added into ``grad_phi``; returns ``(term, the chain's share of d loss /
    d eta)``.

    ``z = Z(x)``, ``change [2]``: ``Z(x') - Z(x)`` and ``Z(x~) - Z(x)``; ``log_g [2]``: ``log
    g`` at the proposed site ``i`` and the uniform site ``j`` at ``x``; ``dead [2]``: ``x'`` or
    ``x~`` has zero mass (a proposal that cannot be taken, ``w = 0``; ``T(x~|x) = 0``); ``s_i``
    the proposal's log-ratio; ``dz [3, n_phi]``: ``dZ / dphi`` at ``x``, ``x'``, ``x~``;
    ``dsite [2, n_phi]``: ``d log g / dphi`` at ``t_i`` and ``t_j``. ``log T = log g(t_site) -
    log Z - log(1 + relu(dz))``, ``dz = (Z_f - Z) / Z``: the gradient passes through ``log Z``,
    the two ``dz`` and the sites' ``log g``. A chain with ``Z = 0`` (every flip into zero mass
    and ``g(0) = 0``) has ``T = 0`` for every ``theta``: its term is constant in ``phi``, as the
    torch step's finite stand-in makes it."""
    if z <= 0.0:
        term, _, _, grad_eta = chain_objective(
            0.0, -math.inf, log_p - top, math.inf, log_p, eta, log_eta_1, chains
        )
        return term, grad_eta
    log_z = math.log(z)
    dz0, dz1 = change[0] / z, change[1] / z
    den0, den1 = 1.0 + max(dz0, 0.0), 1.0 + max(dz1, 0.0)
    # a proposal into zero mass: w = 0 (log Q0 = inf) and a finite stand-in ratio
    log_q0 = math.inf if dead[0] else log_g[0] - log_z
    log_t_uniform = -math.inf if dead[1] else log_g[1] - log_z - math.log(den1)
    term, grad_t, grad_t_uniform, grad_eta = chain_objective(
        log_g[0] - log_z - math.log(den0), log_t_uniform, log_p - top, log_q0,
        log_p + (0.0 if dead[0] else s_i), eta, log_eta_1, chains,
    )  # fmt: skip
    grad_dz0, grad_dz1 = -grad_t / den0, -grad_t_uniform / den1
    grad_log_z = grad_dz0 + grad_dz1
    grad_dz0 = grad_dz0 if dz0 > 0.0 else 0.0
    grad_dz1 = grad_dz1 if dz1 > 0.0 else 0.0
    c_x = (grad_log_z - grad_dz0 - grad_dz1) / z
    c_new, c_uniform = grad_dz0 / z, grad_dz1 / z
    for q in range(grad_phi.shape[0]):
        grad_phi[q] += (
            c_x * dz[0, q] + c_new * dz[1, q] + c_uniform * dz[2, q]
            + grad_t * dsite[0, q] + grad_t_uniform * dsite[1, q]
        )  # fmt: skip
    return term, grad_eta


# ----------------------------------------------------------------- LSB 2' (the monotone network)
@njit(cache=True, nogil=True)
def _projected_step(learner, grads, loss):
    """``_optimise`` with LSB 2''s projection between the step and the check, as the torch step
    orders them (``optimizer.step``, ``project_``, ``_guard``): the slopes clipped to
    ``[0, 1]`` (a NaN stays NaN)."""
    params = learner.params
    good = params.copy()
    optimizer_step(params, grads, learner.opt_state, learner.opt_kind, learner.lr)
    for q in range((params.shape[0] - 1) // 2):
        if params[q] < 0.0:
            params[q] = 0.0
        elif params[q] > 1.0:
            params[q] = 1.0
    failed = not math.isfinite(params.sum() + loss)
    if failed:
        params[:] = good
    return failed


# log g(s) = min(phi(s), s + phi(-s)), phi(s) = max_k min_j (w_kj s + b_kj) (balancing.monotone):
# phi = (w, b), slopes then intercepts; the network's shape [K, J] rides on ``active``'s


@njit(cache=True, nogil=True, inline="always")
def _min_share(log_q, log_reverse):
    """How ``d min(log_q, log_reverse)`` splits between its two arguments, as autograd's
    ``torch.minimum`` (half each at a tie)."""
    if log_q < log_reverse:
        return 1.0
    if log_q > log_reverse:
        return 0.0
    return 0.5


@njit(cache=True, nogil=True)
def _monotone_unit(s, w, b, groups, units):
    """The flat index ``k J + j`` of the unit ``phi`` reads at a finite ``s``: the group with the
    largest minimum and its minimising unit, the first of equals (as the torch search)."""
    best, unit = -math.inf, 0
    for k in range(groups):
        low, chosen = math.inf, 0
        for j in range(units):
            v = b[k * units + j] + s * w[k * units + j]
            if v < low:
                low, chosen = v, j
        if low > best:
            best, unit = low, k * units + chosen
    return unit


@njit(cache=True, nogil=True)
def _monotone_end(w, b, groups, units, sign):
    """The unit ``phi`` follows as ``s -> sign * inf`` (``MonotoneBalancing._end_units``): a
    group's minimum is its smallest ``sign * w``, then its smallest intercept; the maximum over
    groups the largest of those, then the largest intercept; the first of equals."""
    top = -math.inf
    for k in range(groups):
        low = math.inf
        for j in range(units):
            low = min(low, sign * w[k * units + j])
        top = max(top, low)
    best, unit = -math.inf, 0
    for k in range(groups):
        low = math.inf
        for j in range(units):
            low = min(low, sign * w[k * units + j])
        if low != top:
            continue
        c, chosen = math.inf, 0
        for j in range(units):
            if sign * w[k * units + j] == low and b[k * units + j] < c:
                c, chosen = b[k * units + j], j
        if c > best:
            best, unit = c, k * units + chosen
    return unit


@njit(cache=True, nogil=True, inline="always")
def _monotone_terms(t, w, b, shape):
    """LSB 2''s ``log g`` at ``s = log t`` (``t = 0``: ``s = -inf``, each term its limit) and
    where ``d log g / dphi`` goes, as autograd sends it: ``(log g, a, c, d / dw_a, d / db_a,
    d / dw_c, d / db_c)``, ``a`` and ``c`` the units ``phi`` reads at ``s`` and ``-s`` (split at a
    tie of the two terms as ``torch.minimum``; at ``s = -inf`` only a flat line's intercept)."""
    groups, units = int(shape[0]), int(shape[1])
    if t > 0.0:
        s = math.log(t)
        a, c = _monotone_unit(s, w, b, groups, units), _monotone_unit(-s, w, b, groups, units)
        first, second = b[a] + w[a] * s, b[c] + (1.0 - w[c]) * s
        share = _min_share(first, second)
        return min(first, second), a, c, share * s, share, -(1.0 - share) * s, 1.0 - share
    a, c = _monotone_end(w, b, groups, units, -1.0), _monotone_end(w, b, groups, units, 1.0)
    slope = 1.0 - w[c]
    first = b[a] if w[a] == 0.0 else (-math.inf if w[a] > 0.0 else math.inf)
    second = b[c] if slope == 0.0 else (-math.inf if slope > 0.0 else math.inf)
    share = _min_share(first, second)
    to_a = share if w[a] == 0.0 else 0.0
    to_c = 1.0 - share if slope == 0.0 else 0.0
    return min(first, second), a, c, 0.0, to_a, 0.0, to_c


@njit(cache=True, nogil=True, inline="always")
def _monotone_add(terms, scale, dphi):
    """``scale`` times ``_monotone_terms``' ``d log g / dphi`` added into ``dphi``: four
    entries (slopes first, then intercepts)."""
    _, a, c, wa, ba, wc, bc = terms
    kj = dphi.shape[0] // 2
    dphi[a] += scale * wa
    dphi[kj + a] += scale * ba
    dphi[c] += scale * wc
    dphi[kj + c] += scale * bc


@njit(cache=True, nogil=True)
def _monotone_log_g(t, w, b, shape, dphi):
    """LSB 2''s ``log g(t)``, with ``d log g / dphi`` added into ``dphi``."""
    terms = _monotone_terms(t, w, b, shape)
    _monotone_add(terms, 1.0, dphi)
    return terms[0]


@njit(cache=True, nogil=True)
def _monotone_g(t, w, b, shape, sign, dphi):
    """LSB 2''s ``g(t)``, with ``sign`` times ``dg / dphi = g d log g / dphi`` added into
    ``dphi``."""
    terms = _monotone_terms(t, w, b, shape)
    g = math.exp(terms[0])
    _monotone_add(terms, sign * g, dphi)
    return g


@njit(cache=True, nogil=True)
def _monotone_values(t, w, b, shape, g, dphi):
    """``g(t_k)`` of LSB 2' at every site into ``g [n]`` and ``dZ / dphi`` added into ``dphi``;
    returns ``Z``."""
    total = 0.0
    for k in range(t.shape[0]):
        g[k] = _monotone_g(t[k], w, b, shape, 1.0, dphi)
        total += g[k]
    return total
