"""Compiled learning steps (Algorithm 1, spec 5) of LSB 1 and LSB 2 on a factor graph (numba,
CPU), with exact ratios: the torch learning step's chains, parameters and losses from the same
uniforms (up to rounding), a step costing ``O(n)`` for ``Z(x)`` and the flipped states'
neighbourhoods, where the torch step rescores all ``n`` ratios at ``x'`` and at ``x~``.

The torch step (``BatchedBalancedSampler._learn_step``) evaluates ``log g_theta`` at every site of
``x``, ``x'`` and ``x~`` and differentiates through it by autograd. ``theta`` changes every step,
so ``Z(x)`` and its derivative are summed over every site (``learned_function._draw_sites``, the
sites side by side); but a flip changes only its neighbourhood's ratios (``factor_kernels``:
``flip_scores_after``), so ``Z(x') = Z(x) + sum_k (g(t'_k) - g(t_k))`` over the neighbourhood,
its derivative in ``phi`` likewise: the torch objective's own form (``lsb_loss_and_grads`` sums
``g'_k / Z - g_k / Z`` over the sites, zero outside the neighbourhood). The loss's algebra is
``learning_kernels.chain_objective`` and the optimiser ``learned_function._update``, shared with
the RBM and pairwise kernels.

Zero mass as the torch step has it: a flip into zero mass (``s = -inf``, ``t = 0``: ``g(0)`` is
finite for LSB 1 and 2) is a proposal that cannot be taken (its weight ``w = 0``, rejected) and a
uniform flip ``x~`` into zero mass has ``T(x~|x) = 0``. The chains hold states of positive mass,
as for the frozen kernel.

The function is read on ``g(t)`` itself, exact while every finite ratio is within
``learned_function.LEARNING_LIMIT`` (``FactorGraph.ratio_bound``; beyond it the torch step runs).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from lsbcore.backends.factor_kernels import flip_scores_after, largest_neighbourhood
from lsbcore.backends.kernels import trace_row, trace_start
from lsbcore.backends.learned_function import (
    _draw_sites,
    _function_now,
    _scratch,
    _site_change,
    _site_log_g,
    _update,
)
from lsbcore.backends.learning_kernels import chain_objective, eta_terms


@njit(cache=True, nogil=True)
def exact_learning(kind, hidden, chains, tables, u, learner, history, last, failed, trace, truth):
    """``T = u.shape[0]`` learning steps with exact ratios on a factor graph, in place, of LSB 1
    (``kind`` ``KIND_MIXTURE``, ``learner.params = [theta (4), eta_raw]``) or LSB 2
    (``KIND_NETWORK``, ``[w1, b1, w2, b2, eta_raw]`` of ``hidden`` units).

    ``chains``: ``FactorChains`` (its ``log_p`` is ``learner.log_p``), the sampler's ratios ``s``
    and ratio cache, kept; ``tables``: ``FactorTables``; ``u [T, 3, B]`` as the torch step reads
    it (the site by inverse CDF, the decision, the uniform site of ``x~``); ``history``,
    ``last``, ``failed``, ``trace`` and ``truth`` as in ``rbm_learning_kernels.exact_learning``.
    """
    x, _, n_accepted, s, d_finite, d_zeros = chains
    near_first, near = tables.near_first, tables.near
    params, log_p = learner.params, learner.log_p
    steps = u.shape[0]
    chains_n, n = x.shape
    most = largest_neighbourhood(near_first)
    t = np.exp(s)  # [B, n]: the ratios as t = e^s (0 into zero mass)
    fin_new, zero_new = np.empty((2, chains_n, most)), np.empty((2, chains_n, most))
    t_new = np.empty((2, chains_n, most))  # the neighbourhood's t at x' and at x~
    z, change = np.empty(chains_n), np.zeros((2, chains_n))  # Z(x); Z(x') - Z(x), Z(x~) - Z(x)
    log_g = np.empty((2, chains_n))
    dead = np.zeros((2, chains_n), dtype=np.bool_)  # x' or x~ has zero mass
    sites = np.empty((2, chains_n), dtype=np.int64)
    g, cdf, values, scratch = np.empty(n), np.empty(n), np.empty(4), _scratch(n)
    weights = np.empty(4)
    sum_x, overlap = np.zeros(chains_n), np.zeros(chains_n)
    for b in range(chains_n):
        sum_x[b], overlap[b] = trace_start(trace, x[b], truth)
    for step in range(steps):
        breakpoints, slope, intercept, active, n_phi = _function_now(kind, params, hidden, weights)
        dz = np.empty((3, chains_n, n_phi))  # dZ / dphi at x, x', x~
        dsite = np.empty((2, chains_n, n_phi))  # d log g / dphi at t_i and t_j
        work = np.empty(n_phi)
        for b in range(chains_n):
            z[b] = _draw_sites(kind, t[b], weights, breakpoints, slope, intercept, g, cdf,
                               dz[0, b], scratch, u[step, :, b], sites[:, b])  # fmt: skip
            for f in range(2):
                site = sites[f, b]
                log_g[f, b] = _site_log_g(kind, t[b, site], weights, breakpoints, slope,
                                          intercept, values, dsite[f, b])  # fmt: skip
                dz[1 + f, b, :] = dz[0, b, :]
                change[f, b] = 0.0
                dead[f, b] = s[b, site] == -math.inf
                if dead[f, b]:  # the torch step scores x itself instead: no change
                    continue
                flip_scores_after(b, site, x, d_finite, d_zeros, tables, fin_new[f, b],
                                  zero_new[f, b])  # fmt: skip
                start = near_first[site]
                total = 0.0
                for k in range(near_first[site + 1] - start):
                    tk = 0.0 if zero_new[f, b, k] > 0.0 else math.exp(fin_new[f, b, k])
                    t_new[f, b, k] = tk
                    total += _site_change(kind, tk, t[b, near[start + k]], weights, breakpoints,
                                          slope, intercept, values, work, dz[1 + f, b])  # fmt: skip
                change[f, b] = total
        # the loss (objective.lsb_loss_and_grads) and its gradient in phi, by hand
        eta, log_eta_1, eta_slope = eta_terms(params[params.shape[0] - 1])
        top = log_p.max()
        loss, grad_eta = 0.0, 0.0
        grad_phi = np.zeros(n_phi)
        for b in range(chains_n):
            log_z = math.log(z[b])
            dz0, dz1 = change[0, b] / z[b], change[1, b] / z[b]  # (Z_f - Z) / Z
            den0, den1 = 1.0 + max(dz0, 0.0), 1.0 + max(dz1, 0.0)
            # a proposal into zero mass: w = 0 (log Q0 = inf) and a finite stand-in ratio
            log_q0 = math.inf if dead[0, b] else log_g[0, b] - log_z
            s_i = 0.0 if dead[0, b] else s[b, sites[0, b]]
            # a uniform flip into zero mass: T(x~|x) = 0, M~ = 1
            log_t_uniform = -math.inf if dead[1, b] else log_g[1, b] - log_z - math.log(den1)
            term, grad_t, grad_t_uniform, grad_eta_b = chain_objective(
                log_g[0, b] - log_z - math.log(den0), log_t_uniform, log_p[b] - top, log_q0,
                log_p[b] + s_i, eta, log_eta_1, chains_n,
            )  # fmt: skip
            loss += term
            grad_eta += grad_eta_b
            # log T = log g(t_site) - log Z - log(1 + relu(dz)), dz = (Z_f - Z) / Z: through
            # log Z, the two dz and the flipped sites' log g
            grad_dz0, grad_dz1 = -grad_t / den0, -grad_t_uniform / den1
            grad_log_z = grad_dz0 + grad_dz1
            grad_dz0 = grad_dz0 if dz0 > 0.0 else 0.0
            grad_dz1 = grad_dz1 if dz1 > 0.0 else 0.0
            c_x = (grad_log_z - grad_dz0 - grad_dz1) / z[b]
            c_new, c_uniform = grad_dz0 / z[b], grad_dz1 / z[b]
            for q in range(n_phi):
                grad_phi[q] += (
                    c_x * dz[0, b, q] + c_new * dz[1, b, q] + c_uniform * dz[2, b, q]
                    + grad_t * dsite[0, b, q] + grad_t_uniform * dsite[1, b, q]
                )  # fmt: skip
        _update(kind, learner, hidden, grad_phi, grad_eta / chains_n * eta_slope, weights, active,
                loss / chains_n, failed, history, step)  # fmt: skip
        # accept x' with theta0: A = Z / max(Z, Z'); never into zero mass
        for b in range(chains_n):
            i = sites[0, b]
            log_a = -math.log1p(max(change[0, b] / z[b], 0.0))
            accept = not dead[0, b] and math.log(u[step, 1, b]) < log_a
            prob = 0.0 if dead[0, b] else math.exp(log_a)
            last[0, b], last[1, b], last[2, b] = i, prob, 1.0 if accept else 0.0
            if accept:
                x_i = x[b, i]
                log_p[b] += s[b, i]
                x[b, i] = -x_i
                n_accepted[b] += 1
                start = near_first[i]
                for k in range(near_first[i + 1] - start):
                    v = near[start + k]
                    d_finite[b, v], d_zeros[b, v] = fin_new[0, b, k], zero_new[0, b, k]
                    s[b, v] = -math.inf if zero_new[0, b, k] > 0.0 else fin_new[0, b, k]
                    t[b, v] = t_new[0, b, k]
                sum_x[b] -= 2.0 * x_i
                overlap[b] -= 2.0 * x_i * truth[i]
            trace_row(trace, step, b, log_p[b], sum_x[b], overlap[b], 1.0 if accept else 0.0, i)
