"""Compiled learning steps (Algorithm 1, spec 5) of LSB 1, LSB 2 and LSB 2' (kept monotone by
projection) on a factor graph (numba, CPU), with exact ratios: the torch learning step's
chains, parameters and losses from the same uniforms (up to rounding), a step costing ``O(n)``
for ``Z(x)`` and the flipped states' neighbourhoods, where the torch step rescores all ``n``
ratios at ``x'`` and at ``x~``.

The torch step (``BatchedBalancedSampler._learn_step``) evaluates ``log g_theta`` at every site of
``x``, ``x'`` and ``x~`` and differentiates through it by autograd. ``theta`` changes every step,
so ``Z(x)`` and its derivative are summed over every site (``learned_function._draw_sites``, the
sites side by side); but a flip changes only its neighbourhood's ratios (``factor_kernels``:
``flip_scores_after``), so ``Z(x') = Z(x) + sum_k (g(t'_k) - g(t_k))`` over the neighbourhood,
its derivative in ``phi`` likewise: the torch objective's own form (``lsb_loss_and_grads`` sums
``g'_k / Z - g_k / Z`` over the sites, zero outside the neighbourhood). The loss's algebra is
``learned_function._balanced_objective`` and the optimiser ``learned_function._update``, shared
with the RBM kernel.

Zero mass as the torch step has it: a flip into zero mass (``s = -inf``, ``t = 0``; ``g(0)`` is
positive for LSB 1 and 2, 0 or not for LSB 2') is a proposal that cannot be taken (its weight
``w = 0``, rejected) and a uniform flip ``x~`` into zero mass has ``T(x~|x) = 0``. The chains hold
states of positive mass, as for the frozen kernel.

The function is read on ``g(t)`` itself, exact while every finite ratio is within
``learned_function.LEARNING_LIMIT`` (``FactorGraph.ratio_bound``; beyond it the torch step runs).

A step's chains run in contiguous groups, side by side on the cores in the parallel twin
(``exact_learning_parallel``, ``chain_groups``): each chain's work, its term of the loss and its
move included, is its own; the sum over the chains and the update follow, in the chains' order.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from lsbcore.backends.chain_groups import group_range, parallel_twin
from lsbcore.backends.factor_kernels import flip_scores_after, largest_neighbourhood
from lsbcore.backends.kernels import trace_move, trace_start
from lsbcore.backends.learned_function import (
    _balanced_objective,
    _draw_sites,
    _function_now,
    _scratch,
    _site_change,
    _site_log_g,
    _update_from_chains,
)
from lsbcore.backends.learning_kernels import eta_terms


@njit(cache=True, nogil=True)
def exact_learning(kind, hidden, chains, tables, u, learner, history, last, failed, trace, truth,
                   groups=1):  # fmt: skip
    """``T = u.shape[0]`` learning steps with exact ratios on a factor graph, in place, of LSB 1
    (``kind`` ``KIND_MIXTURE``, ``learner.params = [theta (4), eta_raw]``), LSB 2
    (``KIND_NETWORK``, ``[w1, b1, w2, b2, eta_raw]`` of ``hidden`` units) or LSB 2'
    (``KIND_MONOTONE``, ``[slope (K J), intercept (K J), eta_raw]``, ``hidden = J``).

    ``chains``: ``FactorChains`` (its ``log_p`` is ``learner.log_p``), the sampler's ratios ``s``
    and ratio cache, kept; ``tables``: ``FactorTables``; ``u [T, 3, B]`` as the torch step reads
    it (the site by inverse CDF, the decision, the uniform site of ``x~``); ``history``,
    ``last``, ``failed``, ``trace`` and ``truth`` as in ``rbm_learning_kernels.exact_learning``;
    ``groups``: the chains' work of a step in that many contiguous groups, side by side in
    ``exact_learning_parallel`` (``chain_groups``).
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
    weights = np.empty(4)
    terms = np.empty((2, chains_n))  # each chain's term of the loss and share of d loss / d eta
    sum_x, overlap = np.zeros(chains_n), np.zeros(chains_n)
    for b in range(chains_n):
        sum_x[b], overlap[b] = trace_start(trace, x[b], truth)
    for step in range(steps):
        breakpoints, slope, intercept, active, n_phi = _function_now(kind, params, hidden, weights)
        eta, log_eta_1, eta_slope = eta_terms(params[params.shape[0] - 1])
        top = log_p.max()
        dz = np.empty((3, chains_n, n_phi))  # dZ / dphi at x, x', x~
        dsite = np.empty((2, chains_n, n_phi))  # d log g / dphi at t_i and t_j
        grads = np.empty((chains_n, n_phi))  # each chain's d loss / d phi
        for group in prange(groups):  # each group its own scratch
            g, cdf, values, scratch = np.empty(n), np.empty(n), np.empty(4), _scratch(n)
            work = np.empty(n_phi)
            for b in range(*group_range(group, groups, chains_n)):
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
                        total += _site_change(kind, tk, t[b, near[start + k]], weights,
                                              breakpoints, slope, intercept, values, work,
                                              dz[1 + f, b])  # fmt: skip
                    change[f, b] = total
                # the chain's term of the loss (objective.lsb_loss_and_grads) and its gradient
                # in phi, by hand, summed over the chains in their order below
                grads[b] = 0.0
                terms[0, b], terms[1, b] = _balanced_objective(
                    z[b], change[:, b], log_g[:, b], dead[:, b], log_p[b], top,
                    s[b, sites[0, b]], eta, log_eta_1, chains_n, dz[:, b], dsite[:, b], grads[b],
                )  # fmt: skip
                # accept x' with theta0 (the update does not change it): A = Z / max(Z, Z');
                # never into zero mass
                i = sites[0, b]
                log_a = -math.inf if dead[0, b] else -math.log1p(max(change[0, b] / z[b], 0.0))
                accept = math.log(u[step, 1, b]) < log_a
                prob = math.exp(log_a)
                last[0, b], last[1, b], last[2, b] = i, prob, 1.0 if accept else 0.0
                x_i = x[b, i]
                if accept:
                    log_p[b] += s[b, i]
                    x[b, i] = -x_i
                    n_accepted[b] += 1
                    start = near_first[i]
                    for k in range(near_first[i + 1] - start):
                        v = near[start + k]
                        d_finite[b, v], d_zeros[b, v] = fin_new[0, b, k], zero_new[0, b, k]
                        s[b, v] = -math.inf if zero_new[0, b, k] > 0.0 else fin_new[0, b, k]
                        t[b, v] = t_new[0, b, k]
                trace_move(trace, step, b, log_p[b], sum_x, overlap, truth, i, x_i, accept)
        _update_from_chains(kind, learner, hidden, terms, grads, eta_slope, weights, active,
                            failed, history, step)  # fmt: skip


exact_learning_parallel = parallel_twin(exact_learning)
