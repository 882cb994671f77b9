"""Compiled learning steps (Algorithm 1, spec 5) of LSB 1 and LSB 2 on an RBM (numba, CPU),
with exact ratios (``lsb1``, ``lsb2``: ``exact_learning``) and gradient-approximated ones
(``flsb1``, ``flsb2``: ``gradient_learning``).

The torch learning step (``BatchedBalancedSampler._learn_step``) evaluates ``log g_theta`` at
every site of ``x``, ``x'`` and ``x~`` and differentiates through it by autograd. Here the
gradient comes by hand through a few numbers ``phi`` the function is linear in (or piecewise
linear): LSB 1's ``g_theta = sum_c w_c g_c`` in its log-weights ``phi = log w``
(``dZ / d log w_c = w_c S_c`` with the component sums ``S_c = sum_k g_c(t_k)``; at a site
``d log g / d log w_c = w_c g_c(t) / g(t)``), LSB 2's network in the slope and intercept of
each of its pieces (``learning_kernels.network_pieces``: ``z = slope_p u + intercept_p`` on
piece ``p``, ``g = (softplus(z(u)) + t softplus(z(-u))) / 2``), chained to the weights as the
pairwise kernel does (``network_param_grads``). Each state contributes ``dZ / dphi`` and each
flipped site ``d log g / dphi``; the loss's own algebra is ``learning_kernels.chain_objective``,
shared with the pairwise kernels, as is the optimiser (``learning_kernels._optimise``: Adam or
SGD with momentum, as ``torch.optim``).

What costs is the ratios at ``x'`` and ``x~``: with exact ratios every ``t_k = e^(s_k)`` is a
product over the hidden units of the shift tables (``rbm_kernels``: ``n m`` multiply-adds a
state, no logarithm); with FLSB the first-order ratios ``s~ = -2 x d`` need the gradient
``d = (b + W^T sigmoid(a)) / 2`` (``n m`` multiply-adds) and one ``exp`` a site; and ``g`` at
the ``3 n`` sites of ``x``, ``x'``, ``x~``: a division and a square root a site for LSB 1, two
softplus for LSB 2 (``network_terms``: an ``exp`` and a ``log1p`` each, written out so that the
sites run side by side: numba has no vector ones here). Each chain keeps its ratios as ``t``
and its hidden pre-activations between steps.

Learning couples the chains (the loss is a mean over them and theta changes every step): the
steps are the outer loop, the chains the inner one. All of a chain's work in a step, its term
of the loss and its move included, is its own (the move is decided under theta0, before the
update); only the sum over the chains and the update are the step's. The kernels read the
torch step's uniforms as it reads them (``u [T, 3, B]``: the site by inverse CDF, the decision,
the uniform site of ``x~``), so a seed gives the torch chains, parameters and losses (up to
rounding).

Both kernels work on ``g(t)`` itself (linear in ``t``), which is exact while every ratio is
within ``LEARNING_LIMIT`` (``ratio_bound``, a bound on every ``|s|`` and ``|s~|``): then every
``g_c(t)`` lies in ``[e^-R / 2, e^R]`` and no ``g(t'_k) / Z(x)`` reaches the torch objective's
cap ``e^MAX_LOG_G`` (``2 e^(2R) <= e^600``), so for LSB 1 the cap never binds and needs no test.
LSB 2's ``g`` also depends on its weights: the cap could bind only once ``h`` spans about
``e^(600 - 2R)`` over its input range, far beyond a network fitted near ``sqrt``; that is not
checked. Beyond ``learned_function.LEARNING_LIMIT`` the torch step runs (``RBMBalancedSteps``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from lsbcore.backends.chain_groups import group_range, parallel_twin
from lsbcore.backends.kernels import trace_move, trace_start
from lsbcore.backends.learned_function import (
    _balanced_objective,
    _draw_sites,
    _function_now,
    _min_share,
    _scratch,
    _site_log_g,
    _state_sum,
    _update_from_chains,
)
from lsbcore.backends.learning_kernels import chain_objective, eta_terms
from lsbcore.backends.rbm_kernels import (
    _add_flip,
    _chain_tables,
    _flip_column,
    _gradient,
    _log_prod_single,
    _refresh_sig,
    _shift_table,
    _table_products,
    pre_activations,
)
from lsbcore.backends.vector_math import _vector_exp

#: Chains x hidden units x sites up to which each chain keeps its shift-factor table (as the
#: frozen steps do: products of contiguous rows, a flip moving one column; 32 MB); beyond it
#: every product selects its factor by the site's state
TABLE_LIMIT = 1 << 22


@njit(cache=True, nogil=True)
def _selected_products(xb, sig, rows, neg_rows, exp_b, exp_neg_b, t):
    """``rbm_kernels._exact_ratio_exps`` (every ``t_k`` a product of the shift tables at the
    state ``xb``) with both factors loaded before the state picks one: a select the compiler
    runs across sites side by side, where a conditional load stays scalar."""
    n = xb.shape[0]
    for k in range(n):
        up, down = exp_neg_b[k], exp_b[k]
        t[k] = up if xb[k] > 0.0 else down
    for j in range(sig.shape[1]):
        p, q = sig[0, j], sig[1, j]
        pos, neg = rows[j], neg_rows[j]
        for k in range(n):
            up, down = neg[k], pos[k]
            t[k] *= q + p * (up if xb[k] > 0.0 else down)


@njit(cache=True, nogil=True, inline="always")
def _flip_state(b, site, x, a, a_new, sig_new, w_t):
    """Chain ``b``'s hidden pre-activations and their sigmoids with ``site`` flipped."""
    for h in range(a.shape[1]):
        a_new[h] = a[b, h]
    _add_flip(a_new, w_t, site, x[b, site])
    _refresh_sig(a_new, sig_new)


@njit(cache=True, nogil=True)
def exact_learning(kind, hidden, x, n_accepted, s, a, u, tables, tabled, learner, history, last,
                   failed, trace, truth, groups=1):  # fmt: skip
    """``T = u.shape[0]`` learning steps with exact ratios on an RBM, in place, of LSB 1
    (``kind`` ``KIND_MIXTURE``, ``learner.params = [theta (4), eta_raw]``) or LSB 2
    (``KIND_NETWORK``, ``[w1, b1, w2, b2, eta_raw]`` of ``hidden`` units).

    ``x [B, n]`` +-1, ``s [B, n]`` the exact flip log-ratios and ``a [B, m]`` the hidden
    pre-activations (the torch step's caches, kept), ``learner.log_p [B]`` log p~ (kept), the
    optimiser's state in ``learner``; ``u [T, 3, B]`` as the torch step reads it; ``tables``:
    ``RBM.ratio_tables``; ``tabled``: each chain keeps its shift-factor table ``[m, n]``
    (``TABLE_LIMIT``), else the products select their factors. ``history [T, 3 or 7]``
    receives each step's loss, eta, failed (and LSB 1's weights); ``last [3, B]`` the last
    step's site, acceptance probability and decision; ``failed [1]`` is set (and the parameters
    pinned) by a step that diverged; ``trace`` and ``truth`` as in ``rbm_kernels.balanced_steps``;
    ``groups``: the chains' work of a step in that many contiguous groups (``group_range``),
    side by side in ``exact_learning_parallel``.

    Per chain: ``Z(x)`` and the proposal's CDF, ``i`` and ``j``, every ratio at ``x'`` and at
    ``x~`` (``2 n m`` multiply-adds) and their ``Z``; ``T_theta(x'|x) = g(t_i) / max(Z, Z')``
    (``objective.lsb_loss_and_grads``) and its gradient in ``phi`` (each state's ``dZ / dphi``
    and the flipped sites' ``d log g / dphi``), and the acceptance under theta0, ``min(1, Z /
    Z')`` (the update cannot change it); then the loss and gradient summed over the chains in
    their order (``chain_sums``) and the update.
    """
    w_t, _, _, _, rows, neg_rows, exp_b, exp_neg_b, _ = tables
    params, log_p = learner.params, learner.log_p
    steps = u.shape[0]
    chains, n = x.shape
    m = a.shape[1]
    t = np.exp(s)  # [B, n]: the ratios as t = e^s
    table = np.empty((chains, m, n) if tabled else (1, 1, 1))
    bias = np.empty((chains, n) if tabled else (1, 1))
    if tabled:
        for b in range(chains):
            _chain_tables(x[b], rows, neg_rows, exp_b, exp_neg_b, table[b], bias[b])
    t_new = np.empty((2, chains, n))  # at x' and at x~
    a_new, sig_new = np.empty((2, chains, m)), np.empty((2, chains, 2, m))
    z = np.empty((3, chains))  # Z at x, x', x~
    log_g = np.empty((2, chains))
    sites = np.empty((2, chains), dtype=np.int64)
    weights = np.empty(4)
    dead = np.zeros(2, dtype=np.bool_)  # an RBM has no zero mass
    terms = np.empty((2, chains))  # each chain's term of the loss and share of d loss / d eta
    sum_x, overlap = np.zeros(chains), np.zeros(chains)
    for b in range(chains):
        sum_x[b], overlap[b] = trace_start(trace, x[b], truth)
    for step in range(steps):
        breakpoints, slope, intercept, active, n_phi = _function_now(kind, params, hidden, weights)
        eta, log_eta_1, eta_slope = eta_terms(params[params.shape[0] - 1])
        top = log_p.max()
        dz = np.empty((3, chains, n_phi))  # dZ / dphi at x, x', x~
        dsite = np.empty((2, chains, n_phi))  # d log g / dphi at t_i and t_j
        grads = np.empty((chains, n_phi))  # each chain's d loss / d phi
        for group in prange(groups):  # each group its own scratch
            g, cdf, values, scratch = np.empty(n), np.empty(n), np.empty(4), _scratch(n)
            change = np.empty(2)
            for b in range(*group_range(group, groups, chains)):
                xb = x[b]
                z[0, b] = _draw_sites(kind, t[b], weights, breakpoints, slope, intercept, g, cdf,
                                      dz[0, b], scratch, u[step, :, b], sites[:, b])  # fmt: skip
                for f in range(2):
                    site = sites[f, b]
                    log_g[f, b] = _site_log_g(kind, t[b, site], weights, breakpoints, slope,
                                              intercept, values, dsite[f, b])  # fmt: skip
                    x_site = xb[site]
                    _flip_state(b, site, x, a, a_new[f, b], sig_new[f, b], w_t)
                    if tabled:  # the site's column flipped, the products, the column back
                        _flip_column(
                            x_site, site, rows, neg_rows, exp_b, exp_neg_b, table[b], bias[b]
                        )
                        _table_products(sig_new[f, b], table[b], bias[b], t_new[f, b])
                        _flip_column(-x_site, site, rows, neg_rows, exp_b, exp_neg_b, table[b],
                                     bias[b])  # fmt: skip
                    else:
                        xb[site] = -x_site
                        _selected_products(xb, sig_new[f, b], rows, neg_rows, exp_b, exp_neg_b,
                                           t_new[f, b])  # fmt: skip
                        xb[site] = x_site
                    z[1 + f, b] = _state_sum(kind, t_new[f, b], weights, breakpoints, slope,
                                             intercept, dz[1 + f, b], scratch)  # fmt: skip
                # the chain's term of the loss and its gradient in phi (objective.
                # lsb_loss_and_grads, by hand), summed over the chains in their order below
                change[0], change[1] = z[1, b] - z[0, b], z[2, b] - z[0, b]
                grads[b] = 0.0
                terms[0, b], terms[1, b] = _balanced_objective(
                    z[0, b], change, log_g[:, b], dead, log_p[b], top, math.log(t[b, sites[0, b]]),
                    eta, log_eta_1, chains, dz[:, b], dsite[:, b], grads[b],
                )  # fmt: skip
                # accept x' with theta0 (the update does not change it): A = Z / max(Z, Z')
                i = sites[0, b]
                log_a = -math.log1p(max((z[1, b] - z[0, b]) / z[0, b], 0.0))
                accept = math.log(u[step, 1, b]) < log_a
                last[0, b], last[1, b], last[2, b] = i, math.exp(log_a), 1.0 if accept else 0.0
                x_i = xb[i]
                if accept:
                    log_p[b] += math.log(t[b, i])
                    xb[i] = -x_i
                    n_accepted[b] += 1
                    if tabled:
                        _flip_column(x_i, i, rows, neg_rows, exp_b, exp_neg_b, table[b], bias[b])
                    for k in range(n):
                        t[b, k] = t_new[0, b, k]
                    for h in range(m):
                        a[b, h] = a_new[0, b, h]
                trace_move(trace, step, b, log_p[b], sum_x, overlap, truth, i, x_i, accept)
        _update_from_chains(kind, learner, hidden, terms, grads, eta_slope, weights, active,
                            failed, history, step)  # fmt: skip
    for b in range(chains):
        for k in range(n):
            s[b, k] = math.log(t[b, k])


@njit(cache=True, nogil=True, fastmath={"contract"})
def _first_order_exps(xb, d, t, s, powers):
    """``t~_k = e^(s~_k)``, ``s~_k = -2 x_k d_k`` (into ``s``): the first-order ratios as ``t``
    (``_vector_exp``; ``powers [2, n]`` scratch)."""
    for k in range(xb.shape[0]):
        s[k] = -2.0 * xb[k] * d[k]
    _vector_exp(s, t, powers)


@njit(cache=True, nogil=True)
def gradient_learning(kind, hidden, x, log_p, n_accepted, grad, u, w, w_t, b_vis, c, exp_w,
                      exp_neg_w, learner, history, last, failed, trace, truth,
                      groups=1):  # fmt: skip
    """``T = u.shape[0]`` FLSB learning steps (LSB 1 or 2, ``kind`` and ``hidden`` as in
    ``exact_learning``, on the first-order ratios ``s~ = -2 x d``, ``d = grad log p~(x)``) on an
    RBM, in place: Algorithm 2's objective with ``T(x'|x) = min(Q~(x'|x), p~(x')/p~(x)
    Q~(x|x'))`` (``batched.lsb_mh_loss``), for ``x'`` and for the uniform flip ``x~``.

    ``x [B, n]`` +-1, ``log_p [B]`` (``learner.log_p`` is it) and ``grad [B, n]`` the cached
    gradient ``d`` (kept); ``w``, ``w_t``, ``b_vis``, ``c``, ``exp_w``, ``exp_neg_w`` from
    ``RBM.kernel_arrays``; the rest as in ``exact_learning``. Per chain: ``Z(x)`` and the
    proposal's CDF from ``t~ = e^(s~)``, ``i`` and ``j``, each flip's exact ``log p~`` ratio
    (``m`` products), gradient at the flipped state (``n m`` multiply-adds) and its ``Z``.
    """
    params = learner.params
    steps = u.shape[0]
    chains, n = x.shape
    m = c.shape[0]
    a, sig = np.empty((chains, m)), np.empty((chains, 2, m))
    pre_activations(x, w_t, c, a)
    for b in range(chains):
        _refresh_sig(a[b], sig[b])
    start = _scratch(n)
    t = np.empty((chains, n))  # e^(s~) at x
    for b in range(chains):
        _first_order_exps(x[b], grad[b], t[b], start[1][10], start[3])
    t_new, grad_new = np.empty((2, chains, n)), np.empty((2, chains, n))
    a_new, sig_new = np.empty((2, chains, m)), np.empty((2, chains, 2, m))
    z = np.empty((3, chains))  # Z at x, x', x~
    log_g = np.empty((2, 2, chains))  # [forward / reverse, flip]
    log_ratio = np.empty((2, chains))
    sites = np.empty((2, chains), dtype=np.int64)
    weights = np.empty(4)
    terms = np.empty((2, chains))  # each chain's term of the loss and share of d loss / d eta
    sum_x, overlap = np.zeros(chains), np.zeros(chains)
    for b in range(chains):
        sum_x[b], overlap[b] = trace_start(trace, x[b], truth)
    for step in range(steps):
        breakpoints, slope, intercept, active, n_phi = _function_now(kind, params, hidden, weights)
        eta, log_eta_1, eta_slope = eta_terms(params[params.shape[0] - 1])
        top = log_p.max()
        dz = np.empty((3, chains, n_phi))  # dZ / dphi at x, x', x~
        dsite = np.empty((2, 2, chains, n_phi))  # d log g / dphi at the sites, [x or flip, f]
        grads = np.empty((chains, n_phi))  # each chain's d loss / d phi
        for group in prange(groups):  # each group its own scratch
            g, cdf, values, scratch = np.empty(n), np.empty(n), np.empty(4), _scratch(n)
            first_order, powers = scratch[1][10], scratch[3]  # s~, and the exponent bits
            log_t, share = np.empty(2), np.empty(2)
            for b in range(*group_range(group, groups, chains)):
                xb = x[b]
                z[0, b] = _draw_sites(kind, t[b], weights, breakpoints, slope, intercept, g, cdf,
                                      dz[0, b], scratch, u[step, :, b], sites[:, b])  # fmt: skip
                for f in range(2):
                    site = sites[f, b]
                    log_g[0, f, b] = _site_log_g(kind, t[b, site], weights, breakpoints, slope,
                                                 intercept, values, dsite[0, f, b])  # fmt: skip
                    x_site = xb[site]
                    table = _shift_table(x_site, site, exp_w, exp_neg_w)
                    log_ratio[f, b] = -x_site * b_vis[site] + _log_prod_single(sig[b], table)
                    _flip_state(b, site, x, a, a_new[f, b], sig_new[f, b], w_t)
                    _gradient(sig_new[f, b], w, b_vis, grad_new[f, b])
                    xb[site] = -x_site  # the flipped state's first-order ratios
                    _first_order_exps(xb, grad_new[f, b], t_new[f, b], first_order, powers)
                    xb[site] = x_site
                    z[1 + f, b] = _state_sum(kind, t_new[f, b], weights, breakpoints, slope,
                                             intercept, dz[1 + f, b], scratch)  # fmt: skip
                    log_g[1, f, b] = _site_log_g(kind, t_new[f, b, site], weights,
                                                 breakpoints, slope, intercept, values,
                                                 dsite[1, f, b])  # fmt: skip
                # the chain's term of the loss (batched.lsb_mh_loss) and its gradient in phi,
                # by hand, summed over the chains in their order below
                log_z = math.log(z[0, b])
                for f in range(2):
                    log_q = log_g[0, f, b] - log_z
                    log_reverse = log_ratio[f, b] + log_g[1, f, b] - math.log(z[1 + f, b])
                    log_t[f] = min(log_q, log_reverse)
                    share[f] = _min_share(log_q, log_reverse)
                log_q0 = log_g[0, 0, b] - log_z
                log_a = log_t[0] - log_q0
                terms[0, b], grad_t, grad_t_uniform, terms[1, b] = chain_objective(
                    log_t[0], log_t[1], log_p[b] - top, log_q0, log_p[b] + log_ratio[0, b], eta,
                    log_eta_1, chains,
                )  # fmt: skip
                grads[b] = 0.0
                for f in range(2):
                    # log Q~ = log g(t_site) - log Z(x); the reverse likewise at the flipped state
                    gf = grad_t if f == 0 else grad_t_uniform
                    forward, reverse = gf * share[f], gf * (1.0 - share[f])
                    c_x, c_flip = forward / z[0, b], reverse / z[1 + f, b]
                    for q in range(n_phi):
                        grads[b, q] += (
                            forward * dsite[0, f, b, q] - c_x * dz[0, b, q]
                            + reverse * dsite[1, f, b, q] - c_flip * dz[1 + f, b, q]
                        )  # fmt: skip
                # accept x' with theta0 (the update does not change it):
                # log A = log T - log Q~ = min(0, log R)
                i = sites[0, b]
                accept = math.log(u[step, 1, b]) < log_a
                last[0, b], last[1, b], last[2, b] = i, math.exp(log_a), 1.0 if accept else 0.0
                x_i = xb[i]
                if accept:
                    log_p[b] += log_ratio[0, b]
                    xb[i] = -x_i
                    n_accepted[b] += 1
                    for k in range(n):
                        t[b, k], grad[b, k] = t_new[0, b, k], grad_new[0, b, k]
                    for h in range(m):
                        a[b, h] = a_new[0, b, h]
                        sig[b, 0, h], sig[b, 1, h] = sig_new[0, b, 0, h], sig_new[0, b, 1, h]
                trace_move(trace, step, b, log_p[b], sum_x, overlap, truth, i, x_i, accept)
        _update_from_chains(kind, learner, hidden, terms, grads, eta_slope, weights, active,
                            failed, history, step)  # fmt: skip


exact_learning_parallel = parallel_twin(exact_learning)
gradient_learning_parallel = parallel_twin(gradient_learning)
