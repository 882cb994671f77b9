"""LSB 1's learning steps on the device: a chunk of steps in one launch
(``learning_kernels.mixture_learning_steps``, the compiled CPU steps, rule for rule).

``g_theta = sum_k w_k g_k`` with ``w = softmax(theta)``: the four components' scaled values per
chain and site and their sums ``S_k`` are cached (``comps [B, 4, D]``, ``shift, sums [B, 4]``),
so ``log Z_theta = logsumexp_k(log w_k + shift_k + log S_k)`` costs O(1) in theta, a site is
drawn as a component ``k`` by its share and then ``i ~ g_k(t_i) / S_k``, and only the flipped
neighbourhood's components change on a move (the sums are re-added, never nudged).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from lsbcore.backends.device import next_power_of_2
from lsbcore.backends.device.learning import (
    _LOG_RANGE,
    TILE,
    WARPS,
    accept_move,
    check_contiguous,
    finish,
    halt_flag,
    loss_and_grads,
    objective_log_ratio,
    take_step,
)
from lsbcore.backends.device.primitives import (
    draw,
    flip,
    log_sigmoid,
    reals,
    record,
    row_sum,
    slot,
    softplus,
)
from lsbcore.numerics import LOG_RANGE


@triton.jit
def _component(v, C: tl.constexpr):
    """``log g_C(e^v)`` of a fixed function (order of ``FIXED``)."""
    if C == 0:
        out = log_sigmoid(v)
    elif C == 1:
        out = 0.5 * v
    elif C == 2:
        out = tl.minimum(v, 0.0)
    else:
        out = tl.maximum(v, 0.0)
    return out


@triton.jit
def _softmax4(a0, a1, a2, a3):
    """``logsumexp`` of four terms and their shares, the largest first (no overflow)."""
    top = tl.maximum(tl.maximum(a0, a1), tl.maximum(a2, a3))
    e0 = tl.exp(a0 - top)
    e1 = tl.exp(a1 - top)
    e2 = tl.exp(a2 - top)
    e3 = tl.exp(a3 - top)
    total = e0 + e1 + e2 + e3
    return top + tl.log(total), e0 / total, e1 / total, e2 / total, e3 / total


@triton.jit
def _mixture_log_g(v, lw0, lw1, lw2, lw3):
    """``log g_theta(e^v)`` and the components' responsibilities ``w_k g_k / g_theta``."""
    return _softmax4(
        _component(v, 0) + lw0, _component(v, 1) + lw1, _component(v, 2) + lw2,
        _component(v, 3) + lw3,
    )  # fmt: skip


@triton.jit
def _through(grad, v, lw0, lw1, lw2, lw3, gw0, gw1, gw2, gw3):
    """Add ``grad [BLOCK_B, KP]`` (d loss / d log g at values ``v``) times the components'
    responsibilities to the gradient in ``log w``."""
    _, r0, r1, r2, r3 = _mixture_log_g(v, lw0, lw1, lw2, lw3)
    gw0 += tl.sum(tl.sum(grad * r0, 1), 0)
    gw1 += tl.sum(tl.sum(grad * r1, 1), 0)
    gw2 += tl.sum(tl.sum(grad * r2, 1), 0)
    gw3 += tl.sum(tl.sum(grad * r3, 1), 0)
    return gw0, gw1, gw2, gw3


@triton.jit
def _rebuild(need, rows, s, x_row, comps, shift, sums, n_sites, TILE: tl.constexpr):
    """Lanes ``need``: every component's values, log-scale and sum afresh from ``s``."""
    for c in tl.static_range(4):
        top = tl.full(need.shape, float("-inf"), tl.float64)
        for start in range(0, n_sites, TILE):
            cols = start + tl.arange(0, TILE)
            inside = need[:, None] & (cols < n_sites)[None, :]
            v = _component(tl.load(s + x_row[:, None] + cols[None, :], mask=inside, other=0.0), c)
            top = tl.maximum(top, tl.max(tl.where(inside, v, float("-inf")), 1))
        total = tl.zeros(need.shape, tl.float64)
        base = (rows * 4 + c) * n_sites
        for start in range(0, n_sites, TILE):
            cols = start + tl.arange(0, TILE)
            inside = need[:, None] & (cols < n_sites)[None, :]
            v = _component(tl.load(s + x_row[:, None] + cols[None, :], mask=inside, other=0.0), c)
            scaled = tl.exp(v - top[:, None])
            tl.store(comps + base[:, None] + cols[None, :], scaled, mask=inside)
            total += tl.sum(tl.where(inside, scaled, 0.0), 1)
        tl.store(shift + rows * 4 + c, top, mask=need)
        tl.store(sums + rows * 4 + c, total, mask=need)


@triton.jit
def _log_weights(params):
    """``log softmax(theta)`` of the first four parameters, as four scalars."""
    t0 = tl.load(params)
    t1 = tl.load(params + 1)
    t2 = tl.load(params + 2)
    t3 = tl.load(params + 3)
    top = tl.maximum(tl.maximum(t0, t1), tl.maximum(t2, t3))
    norm = tl.log(tl.exp(t0 - top) + tl.exp(t1 - top) + tl.exp(t2 - top) + tl.exp(t3 - top))
    return t0 - top - norm, t1 - top - norm, t2 - top - norm, t3 - top - norm


@triton.jit(do_not_specialize=("m", "fresh"))  # per-launch values: one compile (__init__)
def mixture_kernel(
    x, s, n_accepted, stats, truth, trace,
    neighbours, sign, coupling, unique,
    comps, shift, sums,
    theta, opt_state, log_p_learn, field, field_rows,
    u, losses, weights, last, halt,
    m, real_args, n_chains, n_sites, width, fresh,
    K: tl.constexpr, KP: tl.constexpr, OPT: tl.constexpr, TRACE: tl.constexpr,
    BLOCK_B: tl.constexpr, TILE: tl.constexpr,
):  # fmt: skip
    """``m`` LSB 1 learning steps of every chain (lanes), one program. ``theta [5]`` (four
    logits, eta_raw), ``opt_state [2, 6]``, ``log_p_learn [B]``, ``field [R, D]`` (R rows: 0 for the
    exact objective); out: ``losses [m]``, ``weights [m, 5]``, ``last [B, 4]``, ``halt [2]``."""
    rows = tl.arange(0, BLOCK_B).to(tl.int64)
    lr, low, high = tl.load(real_args), tl.load(real_args + 1), tl.load(real_args + 2)
    ok = rows < n_chains
    kk = tl.arange(0, KP)
    slots_ok = ok[:, None] & (kk < K)[None, :]
    x_row = rows * width
    idx = tl.arange(0, 8)
    inside = idx < 5
    count = tl.load(n_accepted + rows, mask=ok, other=0)
    stat_log_p = tl.load(stats + rows * 3, mask=ok, other=0.0)
    magnetisation = tl.load(stats + rows * 3 + 1, mask=ok, other=0.0)
    overlap = tl.load(stats + rows * 3 + 2, mask=ok, other=0.0)
    log_p = tl.load(log_p_learn + rows, mask=ok, other=0.0)
    if fresh != 0:
        _rebuild(ok, rows, s, x_row, comps, shift, sums, n_sites, TILE)
        tl.debug_barrier()
    taken = m
    status = 0
    for t in range(m):
        if t < taken:
            u_at = u + (t * n_chains + rows) * 4
            lw0, lw1, lw2, lw3 = _log_weights(theta)
            # log Z_theta and the components' shares; a component by its share, then a site
            v0 = lw0 + tl.load(shift + rows * 4, mask=ok, other=0.0)
            v1 = lw1 + tl.load(shift + rows * 4 + 1, mask=ok, other=0.0)
            v2 = lw2 + tl.load(shift + rows * 4 + 2, mask=ok, other=0.0)
            v3 = lw3 + tl.load(shift + rows * 4 + 3, mask=ok, other=0.0)
            v0 += tl.log(tl.load(sums + rows * 4, mask=ok, other=1.0))
            v1 += tl.log(tl.load(sums + rows * 4 + 1, mask=ok, other=1.0))
            v2 += tl.log(tl.load(sums + rows * 4 + 2, mask=ok, other=1.0))
            v3 += tl.log(tl.load(sums + rows * 4 + 3, mask=ok, other=1.0))
            log_z, share0, share1, share2, share3 = _softmax4(v0, v1, v2, v3)
            target = tl.load(u_at, mask=ok, other=0.0) * (share0 + share1 + share2 + share3)
            k = tl.where(share0 + share1 + share2 > target, 2, 3)  # the first running sum above
            k = tl.where(share0 + share1 > target, 1, k)
            k = tl.where(share0 > target, 0, k)
            base = (rows * 4 + k) * n_sites
            row_total = row_sum(comps, base, n_sites, ok, TILE)
            i = draw(
                comps, base, n_sites, tl.load(u_at + 1, mask=ok, other=0.0) * row_total, ok, TILE
            )
            j = tl.minimum(
                (tl.load(u_at + 3, mask=ok, other=0.0) * n_sites).to(tl.int64), n_sites - 1
            )
            # x' (site i) and x~ (site j), each before and after, and their log g_theta0
            nb_i, mask_i, s_old_i, s_new_i, x_new_i, x_i = flip(
                i, x, s, x_row, neighbours, sign, coupling, unique, kk, K, slots_ok
            )
            _, mask_j, s_old_j, s_new_j, _, _ = flip(
                j, x, s, x_row, neighbours, sign, coupling, unique, kk, K, slots_ok
            )
            lg0, _, _, _, _ = _mixture_log_g(s_old_i, lw0, lw1, lw2, lw3)
            lg1, _, _, _, _ = _mixture_log_g(s_new_i, lw0, lw1, lw2, lw3)
            lg2, _, _, _, _ = _mixture_log_g(s_old_j, lw0, lw1, lw2, lw3)
            lg3, _, _, _, _ = _mixture_log_g(s_new_j, lw0, lw1, lw2, lw3)
            log_q0 = slot(lg0, kk, 0) - log_z
            s_objective = objective_log_ratio(
                slot(s_old_i, kk, 0), x_i, field, field_rows, rows, i, n_sites, ok
            )
            eta_raw = tl.load(theta + 4)
            loss, grad_log_z, g0, g1, g2, g3, grad_eta, dz = loss_and_grads(
                log_z, lg0, lg1, lg2, lg3, mask_i, mask_j, log_p, s_objective, log_q0, eta_raw,
                ok, kk, n_chains,
            )  # fmt: skip
            # d loss / d log w: through log Z (the shares) and the neighbourhoods' log g (their
            # responsibilities, evaluated again here rather than held through the objective)
            gw0 = tl.sum(grad_log_z * share0, 0)
            gw1 = tl.sum(grad_log_z * share1, 0)
            gw2 = tl.sum(grad_log_z * share2, 0)
            gw3 = tl.sum(grad_log_z * share3, 0)
            gw0, gw1, gw2, gw3 = _through(g0, s_old_i, lw0, lw1, lw2, lw3, gw0, gw1, gw2, gw3)
            gw0, gw1, gw2, gw3 = _through(g1, s_new_i, lw0, lw1, lw2, lw3, gw0, gw1, gw2, gw3)
            gw0, gw1, gw2, gw3 = _through(g2, s_old_j, lw0, lw1, lw2, lw3, gw0, gw1, gw2, gw3)
            gw0, gw1, gw2, gw3 = _through(g3, s_new_j, lw0, lw1, lw2, lw3, gw0, gw1, gw2, gw3)
            gw = gw0 + gw1 + gw2 + gw3
            grads = tl.where(idx == 0, gw0 - tl.exp(lw0) * gw, 0.0)
            grads = tl.where(idx == 1, gw1 - tl.exp(lw1) * gw, grads)
            grads = tl.where(idx == 2, gw2 - tl.exp(lw2) * gw, grads)
            grads = tl.where(idx == 3, gw3 - tl.exp(lw3) * gw, grads)
            grads = tl.where(idx == 4, grad_eta, grads)
            _, failed = take_step(theta, grads, inside, opt_state, 5, lr, loss, OPT)
            tl.store(losses + t, loss)
            nw0, nw1, nw2, nw3 = _log_weights(theta)
            tl.store(
                weights + t * 5 + idx,
                tl.exp(
                    tl.where(idx == 0, nw0, tl.where(idx == 1, nw1, tl.where(idx == 2, nw2, nw3)))
                ),
                mask=idx < 4,
            )
            tl.store(weights + t * 5 + 4, softplus(tl.load(theta + 4)))
            if failed:
                taken = t + 1
                status = 1
            accept, running = accept_move(
                tl.load(u_at + 2, mask=ok, other=1.0), dz, i, nb_i, s_new_i, x_new_i, x_i, x, s,
                x_row, truth, slots_ok, last, rows, ok,
                (count, log_p, stat_log_p, magnetisation, overlap),
            )  # fmt: skip
            count, log_p, stat_log_p, magnetisation, overlap = running
            tl.debug_barrier()
            # the neighbourhood's components from its new s, then every sum re-added
            write = slots_ok & accept[:, None]
            s_now = tl.load(s + x_row[:, None] + nb_i, mask=write, other=0.0)
            rebuild = tl.zeros([BLOCK_B], tl.int32)
            for c in tl.static_range(4):
                excess = (
                    _component(s_now, c)
                    - tl.load(shift + rows * 4 + c, mask=accept, other=0.0)[:, None]
                )
                over = tl.max(tl.where(write & (excess > _LOG_RANGE), 1, 0), 1)
                rebuild = tl.maximum(rebuild, over)
                place = comps + ((rows * 4 + c) * n_sites)[:, None] + nb_i
                tl.store(place, tl.exp(tl.minimum(excess, _LOG_RANGE)), mask=write)
            tl.debug_barrier()
            for c in tl.static_range(4):
                part = row_sum(comps, (rows * 4 + c) * n_sites, n_sites, accept, TILE)
                tl.store(sums + rows * 4 + c, part, mask=accept)
                rebuild = tl.maximum(rebuild, ((part > low) & (part < high) == 0).to(tl.int32))
            need = accept & (rebuild > 0)
            tl.debug_barrier()
            if tl.max(need.to(tl.int32), 0) > 0:
                _rebuild(need, rows, s, x_row, comps, shift, sums, n_sites, TILE)
                tl.debug_barrier()
            if TRACE:
                record(trace, t, n_chains, rows, ok, stat_log_p, magnetisation, overlap, accept, i)
    finish(n_accepted, stats, log_p_learn, halt, rows, ok, count, stat_log_p, magnetisation,
           overlap, log_p, taken, status)  # fmt: skip


def mixture_learning_steps(
    m: int, chains: dict, tables: dict, learner: dict, u: torch.Tensor, out: dict, cache: dict,
    fresh: bool, trace,
) -> torch.Tensor:  # fmt: skip
    """Up to ``m`` LSB 1 learning steps in place (one launch). ``chains``: ``x, s, n_accepted,
    stats, truth``; ``tables``: the flip tables; ``learner``: ``params [5], opt_state [2, 6],
    opt_kind, lr, log_p [B], field [R, D]``; ``u [m, B, 4]``; ``out``: ``losses [m], weights
    [m, 5], last [B, 4]``; ``cache``: ``comps [B, 4, D], shift, sums [B, 4]``, rebuilt first
    when ``fresh``; ``trace [m, B, 5]`` or None. Returns ``halt`` (see ``halt_flag``)."""
    x = chains["x"]
    n_chains, width = x.shape
    n_sites, k = tables["neighbours"].shape
    check_contiguous(**chains, **tables, **cache, params=learner["params"], uniforms=u)
    halt = halt_flag(m, x.device)
    mixture_kernel[(1,)](
        x, chains["s"], chains["n_accepted"], chains["stats"], chains["truth"],
        trace if trace is not None else out["last"],
        tables["neighbours"], tables["sign"], tables["coupling"], tables["unique"],
        cache["comps"], cache["shift"], cache["sums"],
        learner["params"], learner["opt_state"], learner["log_p"], learner["field"],
        learner["field"].shape[0],
        u, out["losses"], out["weights"], out["last"], halt,
        m, reals(learner["lr"], math.exp(-LOG_RANGE), math.exp(LOG_RANGE), device=x.device),
        n_chains, n_sites, width, int(fresh),
        K=k, KP=next_power_of_2(k), OPT=learner["opt_kind"], TRACE=trace is not None,
        BLOCK_B=next_power_of_2(n_chains), TILE=TILE,
        num_warps=WARPS, enable_fp_fusion=False,
    )  # fmt: skip
    return halt
