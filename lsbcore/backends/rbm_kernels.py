"""Compiled RBM steps: many steps of ``gwg``, ``gibbs``/``metropolis``, block Gibbs and the
Hamming ball sampler on an ``RBM`` in one call (numba, CPU).

An eager torch step on the 100 x 25 RBM is 30 to 50 small operations of a few microseconds
each; here a chain's step is a loop over its ``m`` hidden units, and each chain runs all its
steps in turn (its arrays stay in cache). What makes the loops short:

- the hidden pre-activations ``a = c + W v`` are kept per chain and moved by ``O(m)`` per
  flipped site;
- a move's change of ``sum_j softplus(a_j)`` is one logarithm, of a product of ratios

      (1 + e^(a_j + delta_j)) / (1 + e^(a_j)) = sigmoid(-a_j) + sigmoid(a_j) F_j,

  two terms of one sign (no cancellation, no division), with both sigmoids kept per chain to
  full precision and ``F_j = e^(delta_j)`` a product of the tables ``e^(+-W)`` (finite while
  ``k max|W| <= MAX_SHIFT``, which ``batched.rbm_compiled_refusal`` checks), the product folded
  into a running logarithm before it leaves ``[1e-30, 1e30]``;
- the gradient reads the same ``sigmoid(a_j)``.

Uniforms come from the sampler's seeded ``torch.Generator``, drawn for a whole chunk of steps at
once (the generator's stream does not depend on how a draw is split). ``gwg`` and
``gibbs``/``metropolis`` read them exactly as their torch steps do (same draws, same inverse-CDF
and acceptance rules), so a seed gives the same chains on both paths (up to rounding: a decision
could differ only where a uniform falls within ~1e-13 of a threshold). The block samplers'
torch step with ``blocks="random"`` picks each chain's block from ``n`` uniforms by ``topk``,
whose order of the picked sites is torch's own; here a random block is ``k`` uniforms by
a partial Fisher-Yates shuffle (``pick_block``), an ordered uniform ``k``-subset: the
same law, other chains (``tests/test_rbm_kernels.py`` checks both laws against enumeration).
With ``blocks="sweep"`` or ``"shuffled"`` (the public GWG code's choice: each chain's order
is the argsort of ``n`` uniforms at the start of a sweep, as in the torch step) the block
samplers read the torch step's uniforms too, and give its chains.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from lsbcore.backends.kernels import log_g, search_cdf, trace_row, trace_start, trace_starts
from lsbcore.backends.network_terms import network_g, network_is_linear, network_scratch
from lsbcore.backends.structures import KIND_MIXTURE, KIND_NETWORK
from lsbcore.backends.vector_math import _vector_exp

#: Largest ``|delta_j|`` a move's ``F_j = e^(delta_j)`` may need: ``k max|W| <= MAX_SHIFT``
#: keeps every ``F_j`` and ``t_j F_j`` finite in float64.
MAX_SHIFT = 600.0
# FLSB's proposal is computed as g(t) itself (one exp a site) while every |s~| is at most this:
# t = e^s~ and every term of g stay far inside float64's range (e^+-600 of 1e+-308)
LINEAR_LIMIT = 600.0
# The running product of ratios is folded into its logarithm outside [1e-30, 1e30]: a factor is
# at most e^600 (1e260), so the product never overflows
_FOLD = 1e30


@njit(cache=True, nogil=True, inline="always")
def _ratio(sig, j, f):
    """``(1 + e^(a_j) f) / (1 + e^(a_j)) = sigmoid(-a_j) + sigmoid(a_j) f``: two terms of one
    sign, no cancellation, no division (``sig``: ``_refresh_sig``)."""
    return sig[1, j] + sig[0, j] * f


@njit(cache=True, nogil=True)
def _log_prod_single(sig, table_i):
    """``sum_j softplus(a_j + delta_j) - softplus(a_j)`` for ``F = table_i`` (one flip)."""
    total = 0.0
    prod = 1.0
    for j in range(sig.shape[1]):
        prod *= _ratio(sig, j, table_i[j])
        if prod > _FOLD or prod < 1.0 / _FOLD:
            total += math.log(prod)
            prod = 1.0
    return total + math.log(prod)


@njit(cache=True, nogil=True)
def _shift_table(x_i, i, exp_w, exp_neg_w):
    """``e^(delta)`` rows for flipping site ``i`` at ``x_i``: ``v_i`` changes by ``-x_i``."""
    return exp_neg_w[i] if x_i > 0.0 else exp_w[i]


@njit(cache=True, nogil=True)
def _refresh_sig(a, sig):
    """``sig [2, m]``: ``sigmoid(a)`` and ``sigmoid(-a)``, each to full relative precision."""
    for j in range(a.shape[0]):
        t = math.exp(-abs(a[j]))
        near, far = 1.0 / (1.0 + t), t / (1.0 + t)
        if a[j] >= 0.0:
            sig[0, j], sig[1, j] = near, far
        else:
            sig[0, j], sig[1, j] = far, near


@njit(cache=True, nogil=True)
def _add_flip(a, w_t, i, x_i):
    """``a += dv_i W[:, i]`` for flipping site ``i`` at ``x_i`` (``dv_i = -x_i``)."""
    d = -x_i
    row = w_t[i]
    for j in range(a.shape[0]):
        a[j] += d * row[j]


@njit(cache=True, nogil=True, inline="always")
def _take_hidden(a, sig, a_new, sig_new):
    """An accepted move's pre-activations and sigmoids become the chain's."""
    for j in range(a.shape[0]):
        a[j], sig[0, j], sig[1, j] = a_new[j], sig_new[0, j], sig_new[1, j]


@njit(cache=True, nogil=True)
def pre_activations(x, w_t, c, a):
    """``a[b] = c + W v[b]`` for every chain, ``v = (1 + x) / 2``."""
    chains, n = x.shape
    m = c.shape[0]
    for b in range(chains):
        for j in range(m):
            a[b, j] = c[j]
        for i in range(n):
            if x[b, i] > 0.0:
                row = w_t[i]
                for j in range(m):
                    a[b, j] += row[j]


# ----------------------------------------------------------------- gibbs / metropolis
@njit(cache=True, nogil=True)
def uniform_site_steps(
    x, log_p, n_accepted, u, rule, w_t, b_vis, c, exp_w, exp_neg_w, last_site, last_prob, last_acc,
    trace, truth,
):  # fmt: skip
    """``T = u.shape[0]`` random-scan steps (``rule`` 0: gibbs, 1: metropolis) of every chain,
    ``u [T, 2, B]`` as the torch step reads it: ``u[t, 0]`` picks the site, ``u[t, 1]``
    accepts. ``trace [T, B, 5]`` (or length 0) receives every step's row (``trace_row``) with
    ``truth [n]`` for the overlap."""
    steps = u.shape[0]
    chains, n = x.shape
    m = c.shape[0]
    a = np.empty((chains, m))
    pre_activations(x, w_t, c, a)
    sig = np.empty((2, m))
    for b in range(chains):
        xb, ab = x[b], a[b]
        _refresh_sig(ab, sig)
        sum_x, overlap = trace_start(trace, xb, truth)
        for step in range(steps):
            i = min(int(u[step, 0, b] * n), n - 1)
            x_i = xb[i]
            s = -x_i * b_vis[i] + _log_prod_single(sig, _shift_table(x_i, i, exp_w, exp_neg_w))
            if rule == 0:  # log sigmoid(s)
                log_flip = -math.log1p(math.exp(-s)) if s >= 0.0 else s - math.log1p(math.exp(s))
            else:
                log_flip = min(0.0, s)
            accept = math.log(u[step, 1, b]) < log_flip and s > -math.inf
            if step == steps - 1:
                last_site[b], last_prob[b], last_acc[b] = i, math.exp(log_flip), accept
            if accept:
                _add_flip(ab, w_t, i, x_i)
                _refresh_sig(ab, sig)
                xb[i] = -x_i
                log_p[b] += s
                n_accepted[b] += 1
                sum_x -= 2.0 * x_i
                overlap -= 2.0 * x_i * truth[i]
            trace_row(trace, step, b, log_p[b], sum_x, overlap, 1.0 if accept else 0.0, i)


# ----------------------------------------------------------------- gibbs with gradients
@njit(cache=True, nogil=True)
def _gradient(sig, w, b_vis, g):
    """``g = (b + W^T sigmoid(a)) / 2``."""
    n = g.shape[0]
    for k in range(n):
        g[k] = b_vis[k]
    for j in range(sig.shape[1]):
        p = sig[0, j]
        row = w[j]
        for k in range(n):
            g[k] += row[k] * p
    for k in range(n):
        g[k] *= 0.5


@njit(cache=True, nogil=True)
def has_linear_form(function):
    """Whether ``function`` has a form on ``g(t)`` itself: the fixed functions and LSB 1's
    mixture, LSB 2's network while ``network_terms.network_is_linear``."""
    if function.kind <= KIND_MIXTURE:
        return True
    if function.kind == KIND_NETWORK:
        return network_is_linear(function.breakpoints, function.slope, function.intercept)
    return False


# error_model="numpy": divisions without numba's zero check (the denominators are at least
# 1), which would keep the compiler from running the sites side by side
@njit(cache=True, nogil=True, error_model="numpy")
def _linear_values(function, t, weights, g, scratch):
    """``g(t_k)`` at every site into ``g`` (not ``t``: see ``vector_math._vector_exp``), for
    ``t = e^s`` with ``|s| <= LINEAR_LIMIT``: one ``exp`` a site, where the log-space form
    takes four to seven transcendental calls (LSB 2's network: ``network_terms.network_g``);
    ``scratch``: ``network_terms.network_scratch``."""
    kind, n = function.kind, t.shape[0]
    if kind == KIND_NETWORK:
        network_g(t, function.breakpoints, function.slope, function.intercept, g, scratch)
    elif kind == 0:
        for k in range(n):
            g[k] = t[k] / (1.0 + t[k])
    elif kind == 1:
        for k in range(n):
            g[k] = math.sqrt(t[k])
    elif kind == 2:
        for k in range(n):
            g[k] = min(1.0, t[k])
    elif kind == 3:
        for k in range(n):
            g[k] = max(1.0, t[k])
    else:
        w0, w1, w2, w3 = weights[0], weights[1], weights[2], weights[3]
        for k in range(n):
            g[k] = (w0 * t[k] / (1.0 + t[k]) + w1 * math.sqrt(t[k]) + w2 * min(1.0, t[k])
                    + w3 * max(1.0, t[k]))  # fmt: skip


@njit(cache=True, nogil=True)
def ratio_cdf(s, function, weights, logits, cdf, gwg, linear_form, scratch):
    """The locally balanced proposal of the ratios ``s [n]``: ``cdf`` the cumulative sums of
    ``g(e^s)`` up to one factor, ``logits`` each site's ``g`` in the scale the second value
    returned names, and ``log Z`` (as ``draw_site`` computes it). Returns ``(log Z, linear)``:
    ``linear`` True when ``logits`` holds ``g`` itself (``linear_form``, the caller's
    ``has_linear_form`` of ``function``, and every ``|s|`` within ``LINEAR_LIMIT``: ``t = e^s``
    by the vector ``exp``), False when it holds ``log g``. With ``gwg`` (GWG's sqrt on its
    first-order ratios) ``log g = s / 2`` to the last bit, as its torch step. ``scratch``:
    ``network_terms.network_scratch``."""
    kind, log_w, breakpoints, slope, intercept = function
    n = s.shape[0]
    if not gwg and linear_form:
        linear = True
        for k in range(n):
            if abs(s[k]) > LINEAR_LIMIT:
                linear = False
                break
        if linear:
            _vector_exp(s, cdf, scratch[2])  # t = e^s, then g(t), then the sums
            _linear_values(function, cdf, weights, logits, scratch)
            total = 0.0
            for k in range(n):
                total += logits[k]
                cdf[k] = total
            return math.log(total), True
    top = -math.inf
    for k in range(n):
        if gwg:
            logits[k] = 0.5 * s[k]
        else:
            logits[k] = log_g(kind, s[k], log_w, breakpoints, slope, intercept)
        top = max(top, logits[k])
    shifted = scratch[0][0]  # free here: the network's rows serve the linear form only
    for k in range(n):
        shifted[k] = logits[k] - top
    _vector_exp(shifted, cdf, scratch[2])  # the elements side by side, not n library calls
    total = 0.0
    for k in range(n):
        total += cdf[k]
        cdf[k] = total
    return top + math.log(total), False


@njit(cache=True, nogil=True)
def _proposal_cdf(x, g, function, weights, logits, cdf, s, linear_form, scratch):
    """``ratio_cdf`` of the first-order ratios ``s~ = -2 x g`` (written into ``s``); GWG
    (``function`` kind 1, sqrt) keeps ``log g = -x g``, half the ratios, to the last bit."""
    for k in range(x.shape[0]):
        s[k] = -2.0 * x[k] * g[k]
    return ratio_cdf(s, function, weights, logits, cdf, function.kind == 1, linear_form, scratch)


@njit(cache=True, nogil=True)
def gwg_steps(
    x, log_p, grad, n_accepted, u, w, w_t, b_vis, c, exp_w, exp_neg_w, last, function, trace, truth
):
    """``T = u.shape[0]`` steps of every chain of the gradient-approximated locally balanced
    sampler with ``function`` (a ``structures.Function``; kind 1, sqrt, is Gibbs with
    Gradients, the others FLSB), ``u [T, 2, B]`` as the torch step reads it (``u[t, 0]`` draws
    the site by inverse CDF, ``u[t, 1]`` accepts). ``grad`` is the cached gradient (kept);
    ``last [3, B]``: the last step's site, acceptance probability and decision; ``trace`` and
    ``truth`` as in ``uniform_site_steps``."""
    steps = u.shape[0]
    chains, n = x.shape
    m = c.shape[0]
    a = np.empty((chains, m))
    pre_activations(x, w_t, c, a)
    sig, a_new, sig_new = np.empty((2, m)), np.empty(m), np.empty((2, m))
    logits, cdf, s_tilde = np.empty(n), np.empty(n), np.empty(n)
    logits_new, cdf_new, g_spare = np.empty(n), np.empty(n), np.empty(n)
    scratch = network_scratch(n)
    linear_form = has_linear_form(function)  # once: the function is fixed during the call
    weights = np.exp(function.log_w) if function.kind == KIND_MIXTURE else np.zeros(4)
    for b in range(chains):
        # an accepted move swaps the current and proposed arrays (no copies of n values); the
        # chain's gradient is copied into its row at the end where a swap left it in the spare
        xb, ab, gb, g_new = x[b], a[b], grad[b], g_spare
        in_row = True  # whether gb is grad[b]'s own row
        _refresh_sig(ab, sig)
        log_z, linear = _proposal_cdf(
            xb, gb, function, weights, logits, cdf, s_tilde, linear_form, scratch
        )
        sum_x, overlap = trace_start(trace, xb, truth)
        for step in range(steps):
            # forward: inverse CDF, the first site whose CDF exceeds u * total
            i = search_cdf(cdf, u[step, 0, b] * cdf[n - 1])
            log_q_forward = (math.log(logits[i]) if linear else logits[i]) - log_z
            x_i = xb[i]
            table = _shift_table(x_i, i, exp_w, exp_neg_w)
            log_ratio = -x_i * b_vis[i] + _log_prod_single(sig, table)
            for j in range(m):
                a_new[j] = ab[j]
            _add_flip(a_new, w_t, i, x_i)
            _refresh_sig(a_new, sig_new)
            _gradient(sig_new, w, b_vis, g_new)
            xb[i] = -x_i  # the proposed state, undone below if rejected
            log_z_new, linear_new = _proposal_cdf(
                xb, g_new, function, weights, logits_new, cdf_new, s_tilde, linear_form, scratch
            )
            log_q_reverse = (math.log(logits_new[i]) if linear_new else logits_new[i]) - log_z_new
            log_a = min(0.0, log_ratio + log_q_reverse - log_q_forward)
            if math.isnan(log_a):
                log_a = -math.inf
            accept = math.log(u[step, 1, b]) < log_a
            if step == steps - 1:
                last[0, b], last[1, b], last[2, b] = i, math.exp(log_a), accept
            if accept:
                log_p[b] += log_ratio
                n_accepted[b] += 1
                log_z, linear = log_z_new, linear_new
                _take_hidden(ab, sig, a_new, sig_new)
                gb, g_new = g_new, gb
                logits, logits_new = logits_new, logits
                cdf, cdf_new = cdf_new, cdf
                in_row = not in_row
                sum_x -= 2.0 * x_i
                overlap -= 2.0 * x_i * truth[i]
            else:
                xb[i] = x_i
            trace_row(trace, step, b, log_p[b], sum_x, overlap, 1.0 if accept else 0.0, i)
        if not in_row:  # the current gradient is in the spare array, the row a proposal's
            for k in range(n):
                g_new[k] = gb[k]


# ----------------------------------------------------------------- exact locally balanced
@njit(cache=True, nogil=True)
def _exact_ratios(xb, sig, b_vis, exp_w, exp_neg_w, s):
    """Every site's exact flip log-ratio ``s_k = -x_k b_k + sum_j softplus(a_j + delta_jk) -
    softplus(a_j)`` into ``s [n]``, one logarithm a site (``_log_prod_single``)."""
    for k in range(xb.shape[0]):
        x_k = xb[k]
        s[k] = -x_k * b_vis[k] + _log_prod_single(sig, _shift_table(x_k, k, exp_w, exp_neg_w))


@njit(cache=True, nogil=True)
def _exact_ratio_exps(xb, sig, exp_w_rows, exp_neg_w_rows, exp_b, exp_neg_b, t):
    """Every site's ``t_k = e^(s_k)`` into ``t [n]`` as a product of the shift tables, hidden
    unit by hidden unit across all sites (independent products the compiler runs side by side,
    no logarithm). Finite while ``sum_j |W_jk| + |b_k| <= LINEAR_LIMIT``."""
    n = xb.shape[0]
    for k in range(n):
        t[k] = exp_neg_b[k] if xb[k] > 0.0 else exp_b[k]
    for j in range(sig.shape[1]):
        p, q = sig[0, j], sig[1, j]
        pos, neg = exp_w_rows[j], exp_neg_w_rows[j]
        for k in range(n):
            t[k] *= q + p * (neg[k] if xb[k] > 0.0 else pos[k])


@njit(cache=True, nogil=True)
def exact_ratios(x, a, tables, s):
    """Every chain's exact flip log-ratios into ``s [B, n]`` from its states ``x [B, n]`` of +-1
    and hidden pre-activations ``a [B, m]`` (``RBM.flip_log_ratios`` on the CPU): products of the
    shift tables and one logarithm a site where every ratio is bounded by ``LINEAR_LIMIT``,
    else a logarithm of each product's folded part. ``tables``: ``RBM.ratio_tables``."""
    _, b_vis, exp_w, exp_neg_w, rows, neg_rows, exp_b, exp_neg_b, bound = tables
    chains, n = x.shape
    sig, t = np.empty((2, a.shape[1])), np.empty(n)
    for b in range(chains):
        _refresh_sig(a[b], sig)
        if bound[0] <= LINEAR_LIMIT:
            _exact_ratio_exps(x[b], sig, rows, neg_rows, exp_b, exp_neg_b, t)
            for k in range(n):
                s[b, k] = math.log(t[k])
        else:
            _exact_ratios(x[b], sig, b_vis, exp_w, exp_neg_w, s[b])


@njit(cache=True, nogil=True)
def _chain_tables(xb, rows, neg_rows, exp_b, exp_neg_b, table, bias):
    """One chain's shift tables at its state: ``table [m, n]`` the factor ``e^(-x_k W_jk)`` of
    every hidden unit and site, ``bias [n]`` ``e^(-x_k b_k)`` (a flip moves one column)."""
    for k in range(xb.shape[0]):
        bias[k] = exp_neg_b[k] if xb[k] > 0.0 else exp_b[k]
    for j in range(table.shape[0]):
        for k in range(xb.shape[0]):
            table[j, k] = neg_rows[j, k] if xb[k] > 0.0 else rows[j, k]


@njit(cache=True, nogil=True)
def _flip_column(x_i, i, rows, neg_rows, exp_b, exp_neg_b, table, bias):
    """The tables after site ``i`` (at ``x_i``) flips: its column and bias for ``-x_i``."""
    bias[i] = exp_b[i] if x_i > 0.0 else exp_neg_b[i]
    for j in range(table.shape[0]):
        table[j, i] = rows[j, i] if x_i > 0.0 else neg_rows[j, i]


@njit(cache=True, nogil=True)
def _table_products(sig, table, bias, t):
    """``t_k = bias_k prod_j (sigmoid(-a_j) + sigmoid(a_j) table_jk)``: independent products
    the compiler runs side by side across sites, four hidden units a pass (``t`` read and
    written once for four factors: 1.3-1.5x on the larger RBMs)."""
    n, m = t.shape[0], sig.shape[1]
    for k in range(n):
        t[k] = bias[k]
    for j in range(0, m - m % 4, 4):
        p0, p1, p2, p3 = sig[0, j], sig[0, j + 1], sig[0, j + 2], sig[0, j + 3]
        q0, q1, q2, q3 = sig[1, j], sig[1, j + 1], sig[1, j + 2], sig[1, j + 3]
        r0, r1, r2, r3 = table[j], table[j + 1], table[j + 2], table[j + 3]
        for k in range(n):
            t[k] *= ((q0 + p0 * r0[k]) * (q1 + p1 * r1[k])) * (
                (q2 + p2 * r2[k]) * (q3 + p3 * r3[k])
            )
    for j in range(m - m % 4, m):
        p, q = sig[0, j], sig[1, j]
        row = table[j]
        for k in range(n):
            t[k] *= q + p * row[k]


@njit(cache=True, nogil=True)
def _linear_cdf(function, t, weights, cdf, scratch):
    """Cumulative sums of ``g(t)`` into ``cdf`` (``g`` first, into it: ``_linear_values``);
    returns ``Z``."""
    _linear_values(function, t, weights, cdf, scratch)
    total = 0.0
    for k in range(t.shape[0]):
        total += cdf[k]
        cdf[k] = total
    return total


@njit(cache=True, nogil=True)
def _accept_flip(log_z, log_z_new, s_i, u_accept):
    """``(log A, accept)`` of a proposed flip: ``A = min(1, Z(x) / Z(x'))``, the balancing
    property (spec 2); never into zero mass, nor from a chain with ``Z = 0``."""
    log_a = min(0.0, log_z - log_z_new)
    if math.isnan(log_a) or not (s_i > -math.inf and log_z > -math.inf):
        log_a = -math.inf
    return log_a, math.log(u_accept) < log_a


@njit(cache=True, nogil=True)
def balanced_steps(x, log_p, n_accepted, s, a, u, arrays, last, function, trace, truth):
    """``T = u.shape[0]`` frozen steps of every chain of the locally balanced sampler with exact
    ratios and ``function`` (any ``structures.Function``), in place: ``s [B, n]`` the chains'
    exact flip log-ratios and ``a [B, m]`` their hidden pre-activations (the torch step's
    cache, kept). ``u [T, 2, B]`` as the torch step reads it (``u[t, 0]`` draws the site by
    inverse CDF, ``u[t, 1]`` accepts with ``min(1, Z(x) / Z(x'))``); ``arrays``: ``w_t``,
    ``b_vis``, ``exp_w``, ``exp_neg_w``, ``exp_w_rows``, ``exp_neg_w_rows``, ``exp_b``,
    ``exp_neg_b``, ``ratio_bound`` (``RBM.kernel_arrays``); ``last [3, B]``, ``trace`` and
    ``truth`` as in ``gwg_steps``.

    ``Z(x')`` needs every ratio at ``x'`` (the torch step: ``n m`` softplus). A function with a
    linear form (``has_linear_form``) on an RBM whose ratios stay within ``LINEAR_LIMIT`` takes
    ``t = e^s`` as products of the shift tables and ``g(t)`` itself: ``n m`` multiply-adds and
    no logarithm a site; otherwise one logarithm a site and ``log g``."""
    w_t, b_vis, exp_w, exp_neg_w, rows, neg_rows, exp_b, exp_neg_b, bound = arrays
    if has_linear_form(function) and bound[0] <= LINEAR_LIMIT:
        _linear_balanced(x, log_p, n_accepted, s, a, u, w_t, rows, neg_rows, exp_b, exp_neg_b,
                         last, function, trace, truth)  # fmt: skip
    else:
        _log_balanced(x, log_p, n_accepted, s, a, u, w_t, b_vis, exp_w, exp_neg_w, last,
                      function, trace, truth)  # fmt: skip


@njit(cache=True, nogil=True)
def _linear_balanced(
    x, log_p, n_accepted, s, a, u, w_t, rows, neg_rows, exp_b, exp_neg_b, last, function, trace,
    truth,
):  # fmt: skip
    """``balanced_steps`` on ``t = e^s`` and ``g(t)``; ``s`` written back at the end."""
    steps = u.shape[0]
    chains, n = x.shape
    m = a.shape[1]
    sig, a_new, sig_new = np.empty((2, m)), np.empty(m), np.empty((2, m))
    weights = np.exp(function.log_w) if function.kind == KIND_MIXTURE else np.zeros(4)
    table, bias = np.empty((m, n)), np.empty(n)
    scratch = network_scratch(n)
    for b in range(chains):
        xb, ab = x[b], a[b]
        t, cdf, t_new, cdf_new = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
        _refresh_sig(ab, sig)
        _chain_tables(xb, rows, neg_rows, exp_b, exp_neg_b, table, bias)
        _table_products(sig, table, bias, t)
        log_z = math.log(_linear_cdf(function, t, weights, cdf, scratch))
        sum_x, overlap = trace_start(trace, xb, truth)
        for step in range(steps):
            i = search_cdf(cdf, u[step, 0, b] * cdf[n - 1])
            x_i = xb[i]
            for j in range(m):
                a_new[j] = ab[j]
            _add_flip(a_new, w_t, i, x_i)
            _refresh_sig(a_new, sig_new)
            xb[i] = -x_i  # the proposed state, undone below if rejected
            _flip_column(x_i, i, rows, neg_rows, exp_b, exp_neg_b, table, bias)
            _table_products(sig_new, table, bias, t_new)
            log_z_new = math.log(_linear_cdf(function, t_new, weights, cdf_new, scratch))
            s_i = math.log(t[i])
            log_a, accept = _accept_flip(log_z, log_z_new, s_i, u[step, 1, b])
            if step == steps - 1:
                last[0, b], last[1, b], last[2, b] = i, math.exp(log_a), accept
            if accept:
                log_p[b] += s_i
                n_accepted[b] += 1
                log_z = log_z_new
                t, t_new, cdf, cdf_new = t_new, t, cdf_new, cdf
                _take_hidden(ab, sig, a_new, sig_new)
                sum_x -= 2.0 * x_i
                overlap -= 2.0 * x_i * truth[i]
            else:
                xb[i] = x_i
                _flip_column(-x_i, i, rows, neg_rows, exp_b, exp_neg_b, table, bias)
            trace_row(trace, step, b, log_p[b], sum_x, overlap, 1.0 if accept else 0.0, i)
        for k in range(n):
            s[b, k] = math.log(t[k])


@njit(cache=True, nogil=True)
def _log_balanced(
    x, log_p, n_accepted, s, a, u, w_t, b_vis, exp_w, exp_neg_w, last, function, trace, truth
):  # fmt: skip
    """``balanced_steps`` on the log-ratios and ``log g``."""
    steps = u.shape[0]
    chains, n = x.shape
    m = a.shape[1]
    sig, a_new, sig_new = np.empty((2, m)), np.empty(m), np.empty((2, m))
    logits, cdf, s_new, cdf_new = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    scratch = network_scratch(n)
    linear_form = has_linear_form(function)  # once: the function is fixed during the call
    weights = np.exp(function.log_w) if function.kind == KIND_MIXTURE else np.zeros(4)
    for b in range(chains):
        xb, ab, sb = x[b], a[b], s[b]
        _refresh_sig(ab, sig)
        log_z = ratio_cdf(sb, function, weights, logits, cdf, False, linear_form, scratch)[0]
        sum_x, overlap = trace_start(trace, xb, truth)
        for step in range(steps):
            i = search_cdf(cdf, u[step, 0, b] * cdf[n - 1])
            x_i, s_i = xb[i], sb[i]
            for j in range(m):
                a_new[j] = ab[j]
            _add_flip(a_new, w_t, i, x_i)
            _refresh_sig(a_new, sig_new)
            xb[i] = -x_i  # the proposed state, undone below if rejected
            _exact_ratios(xb, sig_new, b_vis, exp_w, exp_neg_w, s_new)
            log_z_new = ratio_cdf(
                s_new, function, weights, logits, cdf_new, False, linear_form, scratch
            )[0]
            log_a, accept = _accept_flip(log_z, log_z_new, s_i, u[step, 1, b])
            if step == steps - 1:
                last[0, b], last[1, b], last[2, b] = i, math.exp(log_a), accept
            if accept:
                log_p[b] += s_i
                n_accepted[b] += 1
                log_z = log_z_new
                _take_hidden(ab, sig, a_new, sig_new)
                for k in range(n):
                    sb[k], cdf[k] = s_new[k], cdf_new[k]
                sum_x -= 2.0 * x_i
                overlap -= 2.0 * x_i * truth[i]
            else:
                xb[i] = x_i
            trace_row(trace, step, b, log_p[b], sum_x, overlap, 1.0 if accept else 0.0, i)


# ----------------------------------------------------------------- block moves
@njit(cache=True, nogil=True, inline="always")
def pick_block(u, at, n, k, sites, swaps):
    """``k`` distinct sites from the ``k`` uniforms ``u[at:at + k]`` by a partial
    Fisher-Yates shuffle of ``0..n-1``: site ``j`` is the entry at position
    ``r = j + floor(u_j (n - j))``, which then takes position ``j``'s entry; an ordered
    uniform ``k``-subset. The shuffle is virtual: ``swaps [2, k]`` (scratch) holds the
    positions written so far and their entries, searched newest first; an entry never written
    is its position. Equality tests that almost never hold are cheap to predict, where keeping
    the picks sorted cost a mispredicted branch per comparison."""
    for j in range(k):
        r = j + min(int(u[at + j] * (n - j)), n - j - 1)
        site, moved = r, j
        for p in range(j - 1, -1, -1):
            if swaps[0, p] == r:
                site = swaps[1, p]
                break
        for p in range(j - 1, -1, -1):
            if swaps[0, p] == j:
                moved = swaps[1, p]
                break
        swaps[0, j], swaps[1, j] = r, moved
        sites[j] = site


@njit(cache=True, nogil=True, inline="always")
def step_block(u, layout, step, mode, sweep_blocks, orders, current_order, b, n, sites, swaps):
    """Chain ``b``'s block for step ``step`` of ``layout`` (see ``block_steps``) into
    ``sites [k]``; returns the index in ``orders`` of the chain's order of the sites now (a
    new one where a sweep starts, "shuffled"). Scalars read, no views made: a view costs
    its array's reference count, about as much as a small block's draw."""
    block_at, position = layout[step, 0], layout[step, 3]
    k = sites.shape[0]
    if mode == 0:
        pick_block(u, block_at + b * k, n, k, sites, swaps)
        return current_order
    if block_at >= 0:  # a new sweep: this chain's new order of the sites
        current_order = block_at
    for s in range(k):
        slot = sweep_blocks[position, s]
        sites[s] = slot if mode == 1 else orders[current_order, b, slot]
    return current_order


@njit(cache=True, nogil=True)
def _candidate_log_weights(xb, sig, sites, flips, b_vis, exp_w, exp_neg_w, f, log_w):
    """``log p~`` of every candidate (``xb`` with ``sites`` multiplied by ``flips[q]``) minus
    that of ``xb``, into ``log_w [M]``; ``f`` scratch ``[m]``."""
    count, k = flips.shape
    m = sig.shape[1]
    for q in range(count):
        visible, flipped, first = 0.0, 0, 0
        for s in range(k):
            if flips[q, s] < 0.0:
                i = sites[s]
                visible -= xb[i] * b_vis[i]
                if flipped == 0:
                    first = i
                flipped += 1
        if flipped == 0:
            log_w[q] = 0.0
            continue
        if flipped == 1:  # one flip (every candidate of a ball of radius 1): its table
            table = _shift_table(xb[first], first, exp_w, exp_neg_w)
            log_w[q] = visible + _log_prod_single(sig, table)
            continue
        for j in range(m):
            f[j] = 1.0
        for s in range(k):
            if flips[q, s] < 0.0:
                i = sites[s]
                table = _shift_table(xb[i], i, exp_w, exp_neg_w)
                for j in range(m):
                    f[j] *= table[j]
        log_w[q] = visible + _log_prod_single(sig, f)


@njit(cache=True, nogil=True)
def draw_index(log_w, w, u):
    """As ``block_gibbs.draw_index`` on ``weights_of(log_w)``: the first positive weight whose
    CDF reaches ``u`` times the CDF at the last positive weight; fills ``w``, returns the
    index and ``sum(w)``."""
    count = log_w.shape[0]
    top = -math.inf
    for q in range(count):
        top = max(top, log_w[q])
    total, last_positive = 0.0, 0.0
    for q in range(count):
        w[q] = math.exp(log_w[q] - top)
        total += w[q]
        if w[q] > 0.0:
            last_positive = total
    target = u * last_positive
    cum = 0.0
    for q in range(count):
        cum += w[q]
        if w[q] > 0.0 and cum >= target:
            return q, total
    return count - 1, total


@njit(cache=True, nogil=True)
def _apply(xb, ab, w_t, sites, flips, q):
    """Multiply ``sites`` of ``xb`` by ``flips[q]``, moving ``ab`` with them."""
    for s in range(sites.shape[0]):
        if flips[q, s] < 0.0:
            i = sites[s]
            _add_flip(ab, w_t, i, xb[i])
            xb[i] = -xb[i]


#: Steps a block kernel takes with every chain before the next ones: the uniforms lie step by
#: step, chain by chain, so a chain's walk through all the steps would stream the whole array
#: through the cache once per chain (at 200,000 steps, a third of block-gibbs 8's time on a
#: 256 x 256 photo).
STEP_TILE = 256

#: How ``block_steps`` picks blocks (``blocks=`` of the block samplers).
BLOCK_MODES = ("random", "sweep", "shuffled")


@njit(cache=True, nogil=True)
def block_steps(
    x, log_p, n_accepted, u, layout, mode, sweep_blocks, orders, flips, aux, w_t, b_vis, c,
    exp_w, exp_neg_w, last_sites, last, trace, truth, first=0, stop=-1,
):  # fmt: skip
    """``T = layout.shape[0]`` block steps of every chain on blocks of ``k = flips.shape[1]``
    sites: block Gibbs over the candidates ``flips [M, k]`` (``aux`` False), or the Hamming
    ball sampler with the ball ``flips`` (``aux`` True: first ``u`` uniform in the ball around
    ``x``, then the draw in the ball around ``u``).

    ``u`` is flat; ``layout [T, 4]`` gives per step (-1: none) the block's uniforms (``mode``
    0 "random": the offset of ``k`` per chain for ``pick_block``; 2 "shuffled": at the start
    of a sweep, the index of the chains' new orders of the sites in ``orders [S, B, n]``, whose
    row 0 is the order before the steps), the offsets of the auxiliary index's and of the
    candidate's uniforms (one per chain each), and the sweep position, the block of
    ``sweep_blocks [nb, k]`` (modes 1 "sweep": those sites; 2: those slots of the order).
    ``last_sites [B, k]`` and ``last [2, B]`` (probability of moving, moved) describe the last
    step; ``trace`` and ``truth`` as in ``uniform_site_steps`` (the site: -1, a block). Steps
    in tiles and chains ``first`` to ``stop`` (-1: the last) as in
    ``block_kernels.pairwise_block_steps``."""
    steps, chains = layout.shape[0], x.shape[0]
    stop = chains if stop < 0 else stop
    n = x.shape[1]
    count, k = flips.shape
    m = c.shape[0]
    a = np.empty((chains, m))
    pre_activations(x, w_t, c, a)
    sig = np.empty((2, m))
    f, log_w, w = np.empty(m), np.empty(count), np.empty(count)
    sites, swaps = np.empty(k, np.int64), np.empty((2, k), np.int64)
    a_base, sig_base = np.empty(m), np.empty((2, m))
    before = np.empty(k)
    orders_now = np.zeros(chains, np.int64)  # each chain's current order ("shuffled")
    sums = trace_starts(trace, x, truth, first, stop)  # each chain's sum x and x . truth
    for tile in range(0, steps, STEP_TILE):  # a tile's uniforms stay cached for every chain
        for b in range(first, stop):
            xb, ab = x[b], a[b]
            _refresh_sig(ab, sig)
            current_order = orders_now[b]
            sum_x, overlap = sums[0, b], sums[1, b]
            for step in range(tile, min(tile + STEP_TILE, steps)):
                aux_at, choice_at = layout[step, 1], layout[step, 2]
                current_order = step_block(
                    u, layout, step, mode, sweep_blocks, orders, current_order, b, n, sites, swaps
                )
                for s in range(k):
                    before[s] = xb[sites[s]]
                current = 0
                log_base = 0.0  # log p~ of the base state minus that of x
                for j in range(m):
                    a_base[j], sig_base[0, j], sig_base[1, j] = ab[j], sig[0, j], sig[1, j]
                if aux:
                    current = min(int(u[aux_at + b] * count), count - 1)
                    if current > 0:  # the base u: x with flips[current] applied
                        _candidate_log_weights(
                            xb, sig, sites, flips[current : current + 1], b_vis, exp_w,
                            exp_neg_w, f, log_w[:1],
                        )  # fmt: skip
                        log_base = log_w[0]
                        _apply(xb, a_base, w_t, sites, flips, current)
                        _refresh_sig(a_base, sig_base)
                _candidate_log_weights(
                    xb, sig_base, sites, flips, b_vis, exp_w, exp_neg_w, f, log_w
                )
                q, total = draw_index(log_w, w, u[choice_at + b])
                moved = q != current
                if step == steps - 1:
                    for s in range(k):
                        last_sites[b, s] = sites[s]
                    last[0, b], last[1, b] = 1.0 - w[current] / total, moved
                changed = 0
                if moved:
                    log_p[b] += log_base + log_w[q]
                    _apply(xb, a_base, w_t, sites, flips, q)
                    for j in range(m):
                        ab[j] = a_base[j]
                    _refresh_sig(ab, sig)
                    for s in range(k):
                        if xb[sites[s]] != before[s]:
                            n_accepted[b] += 1
                            changed += 1
                            sum_x -= 2.0 * before[s]
                            overlap -= 2.0 * before[s] * truth[sites[s]]
                elif current > 0:  # back to x: undo the auxiliary flips on the states
                    for s in range(k):
                        xb[sites[s]] = before[s]
                trace_row(trace, step, b, log_p[b], sum_x, overlap, changed, -1)
            orders_now[b], sums[0, b], sums[1, b] = current_order, sum_x, overlap


def block_layout(
    steps: int, chains: int, n: int, k: int, mode: int, aux: bool, position: int, n_blocks: int
) -> tuple[np.ndarray, list[int], int, int]:
    """``block_steps``' ``layout [steps, 4]`` for uniforms drawn in the torch steps' order
    (per step: the block's, the auxiliary index's, the candidate's), the offsets of the ``n``
    uniforms per chain whose argsorts are the orders of the sweeps that start ("shuffled"),
    the number of uniforms and the sweep position after the steps. Array arithmetic, not a
    loop over the steps: a chunk of random blocks has tens of thousands of them."""
    step = np.arange(steps, dtype=np.int64)
    positions = (position + step) % n_blocks if mode != 0 else np.full(steps, position)
    starts = (positions == 0) if mode == 2 else np.zeros(steps, dtype=bool)
    block = np.full(steps, chains * k) if mode == 0 else chains * n * starts  # the block's
    size = block + chains * (int(aux) + 1)
    first = np.cumsum(size) - size  # each step's first uniform
    layout = np.full((steps, 4), -1, dtype=np.int64)
    if mode == 0:
        layout[:, 0] = first
    elif mode == 2:  # a new sweep's index in the orders (orders[0]: the old one)
        layout[starts, 0] = np.arange(1, int(starts.sum()) + 1)
    if aux:
        layout[:, 1] = first + block
    layout[:, 2] = first + block + chains * int(aux)
    layout[:, 3] = positions
    after = (position + steps) % n_blocks if mode != 0 else position
    return layout, [int(at) for at in first[starts]], int(size.sum()), after


__all__ = [
    "BLOCK_MODES",
    "STEP_TILE",
    "MAX_SHIFT",
    "balanced_steps",
    "block_layout",
    "block_steps",
    "exact_ratios",
    "gwg_steps",
    "pick_block",
    "step_block",
    "pre_activations",
    "uniform_site_steps",
]
