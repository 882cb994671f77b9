"""LSB 2's learning steps on the device: a chunk of steps in one launch
(``learning_kernels.network_learning_step``, the compiled CPU step, rule for rule).

``g(t) = (h(t) + t h(1/t)) / 2`` with ``h = softplus(z(u))``, ``u = sigmoid(log t) - 1/2`` and
``z`` a one-hidden-layer ReLU network. ``g`` changes everywhere at every step, so ``Z_theta`` and
its gradient take one network evaluation per chain, site and input (``u`` and ``-u``) per step.
The CPU forms ``z`` through the network's pieces; here each input adds its active units' terms
in unit order, which gives the pieces' slope and intercept term for term without sorting the
breakpoints, and the gradient is gathered per unit (``d z / d w1_h = w2_h u``, ``d z / d b1_h =
w2_h``, ``d z / d w2_h = w1_h u + b1_h`` where unit ``h`` is on) instead of per piece.

Per chain and site the values that depend on ``s`` only are cached as on the CPU (``u``;
``scale = e^(s+ - M)``; ``small = e^-|s|``; ``M = top``, a chain's scale), and a move refreshes
the flipped neighbourhood's.
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
    draw_in,
    finite,
    flip,
    log1p,
    reals,
    record,
    row_sum,
    slot,
    softplus,
)
from lsbcore.numerics import LOG_2, LOG_RANGE

_LOG_2 = tl.constexpr(LOG_2)


@triton.jit
def _z(w, params, hidden):
    """The network's output ``z(w)`` at inputs ``w`` (any shape): the slope and intercept of
    ``w``'s piece, from its active units in unit order (``NetworkBalancing.pieces``)."""
    slope = tl.zeros_like(w)
    intercept = tl.zeros_like(w) + tl.load(params + 3 * hidden)
    for h in range(hidden):
        w1 = tl.load(params + h)
        b1 = tl.load(params + hidden + h)
        w2 = tl.load(params + 2 * hidden + h)
        on = w * w1 + b1 > 0.0
        slope += tl.where(on, w2 * w1, 0.0)
        intercept += tl.where(on, w2 * b1, 0.0)
    return slope * w + intercept


@triton.jit
def _site_caches(v, top):
    """``u = sigmoid(s) - 1/2``, ``scale = e^(s+ - M)`` and ``small = e^-|s|`` of values ``v``."""
    u = 1.0 / (1.0 + tl.exp(-v)) - 0.5
    return u, tl.exp(tl.maximum(v, 0.0) - top), tl.exp(-tl.abs(v))


@triton.jit
def _rescale(need, s, x_row, u_cache, scale, small, top, rows, n_sites, TILE: tl.constexpr):
    """Lanes ``need``: a fresh scale ``M = max(0, max_i s_i)`` and every site's cached values.
    Returns the new ``top`` of every lane (old values where not ``need``)."""
    m = tl.zeros(need.shape, tl.float64)
    for start in range(0, n_sites, TILE):
        cols = start + tl.arange(0, TILE)
        inside = need[:, None] & (cols < n_sites)[None, :]
        v = tl.load(s + x_row[:, None] + cols[None, :], mask=inside, other=0.0)
        m = tl.maximum(m, tl.max(tl.where(inside, v, 0.0), 1))
    new_top = tl.where(need, m, top)
    base = rows * n_sites
    for start in range(0, n_sites, TILE):
        cols = start + tl.arange(0, TILE)
        inside = need[:, None] & (cols < n_sites)[None, :]
        v = tl.load(s + x_row[:, None] + cols[None, :], mask=inside, other=0.0)
        u, sc, sm = _site_caches(v, new_top[:, None])
        at = base[:, None] + cols[None, :]
        tl.store(u_cache + at, u, mask=inside)
        tl.store(scale + at, sc, mask=inside)
        tl.store(small + at, sm, mask=inside)
    return new_top


@triton.jit
def _lattice(
    lanes, s, x_row, u_cache, scale, small, g_buf, params, hidden, rows, n_sites, first, last,
    acc_s, acc_i, acc_t, HP: tl.constexpr, TILE: tl.constexpr,
):  # fmt: skip
    """Lanes ``lanes``, sites ``first <= i < last``: ``g_i e^-M`` into ``g_buf`` (their sum is
    returned) and,
    per hidden unit, the sums of ``d (g e^-M) / d z`` times the unit's ``d z`` terms: ``acc_s``
    (times the input), ``acc_i`` ``[BLOCK_B, HP]``, and ``acc_t`` over all (``learning_kernels.
    _lattice_sums``, per unit instead of per piece). Other lanes keep their sums."""
    hh = tl.arange(0, HP)
    total = tl.zeros(lanes.shape, tl.float64)
    acc_s = tl.where(lanes[:, None], 0.0, acc_s)
    acc_i = tl.where(lanes[:, None], 0.0, acc_i)
    acc_t = tl.where(lanes, 0.0, acc_t)
    base = rows * n_sites
    for start in range(first, last, TILE):
        cols = start + tl.arange(0, TILE)
        inside = lanes[:, None] & (cols < last)[None, :]
        at = base[:, None] + cols[None, :]
        u = tl.load(u_cache + at, mask=inside, other=0.0)
        z1 = _z(u, params, hidden)
        z2 = _z(-u, params, hidden)
        e1 = tl.exp(tl.minimum(z1, 20.0))
        e2 = tl.exp(tl.minimum(z2, 20.0))
        sp1 = tl.where(z1 > 20.0, z1, log1p(e1))
        sp2 = tl.where(z2 > 20.0, z2, log1p(e2))
        d1 = tl.where(z1 > 20.0, 1.0, e1 / (1.0 + e1))
        d2 = tl.where(z2 > 20.0, 1.0, e2 / (1.0 + e2))
        half = 0.5 * tl.load(scale + at, mask=inside, other=0.0)
        sm = tl.load(small + at, mask=inside, other=1.0)
        positive = tl.load(s + x_row[:, None] + cols[None, :], mask=inside, other=0.0) >= 0.0
        c1 = tl.where(positive, sm, 1.0)
        c2 = tl.where(positive, 1.0, sm)
        g = tl.where(inside, half * (sp1 * c1 + sp2 * c2), 0.0)
        tl.store(g_buf + at, g, mask=inside)
        total += tl.sum(g, 1)
        a1 = tl.where(inside, half * c1 * d1, 0.0)
        a2 = tl.where(inside, half * c2 * d2, 0.0)
        acc_t += tl.sum(a1 + a2, 1)
        for h in range(hidden):
            w1 = tl.load(params + h)
            b1 = tl.load(params + hidden + h)
            on1 = u * w1 + b1 > 0.0
            on2 = -u * w1 + b1 > 0.0
            d_s = tl.sum(tl.where(on1, a1 * u, 0.0) - tl.where(on2, a2 * u, 0.0), 1)
            d_i = tl.sum(tl.where(on1, a1, 0.0) + tl.where(on2, a2, 0.0), 1)
            unit = hh[None, :] == h
            acc_s = tl.where(unit, acc_s + d_s[:, None], acc_s)
            acc_i = tl.where(unit, acc_i + d_i[:, None], acc_i)
    return total, acc_s, acc_i, acc_t


@triton.jit
def _log_h(z):
    """``log softplus(z)`` and its derivative in ``z`` (``NetworkBalancing._log_softplus``)."""
    e = tl.exp(tl.minimum(z, 20.0))
    sp = tl.where(z > 20.0, z, log1p(e))
    d = tl.where(z > 20.0, 1.0, e / (1.0 + e)) / sp
    deep = z < -30.0  # log h = z there
    return tl.where(deep, z, tl.log(sp)), tl.where(deep, 1.0, d)


@triton.jit
def _flip_log_g(v, params, hidden):
    """``log g(e^v)`` of the network at values ``v`` (``kernels.log_g``, kind 5), with each
    input's ``d log g / d z`` and the inputs ``u, -u`` (``learning_kernels._flip_log_g``)."""
    u = 1.0 / (1.0 + tl.exp(-v)) - 0.5
    z1 = _z(u, params, hidden)
    z2 = _z(-u, params, hidden)
    zc1 = tl.maximum(z1, -30.0)
    zc2 = tl.maximum(z2, -30.0)
    a = tl.minimum(z1, tl.log(tl.where(zc1 > 20.0, zc1, log1p(tl.exp(tl.minimum(zc1, 20.0))))))
    b = v + tl.minimum(z2, tl.log(tl.where(zc2 > 20.0, zc2, log1p(tl.exp(tl.minimum(zc2, 20.0))))))
    top = tl.maximum(a, b)
    value = top + log1p(tl.exp(tl.minimum(a, b) - top)) - _LOG_2
    log_h1, d1 = _log_h(z1)
    log_h2, d2 = _log_h(z2)
    coef1 = tl.exp(log_h1 - value - _LOG_2) * d1
    coef2 = tl.exp(log_h2 + v - value - _LOG_2) * d2
    return value, coef1, coef2, u


@triton.jit
def _flip_units(grad, coef1, coef2, w, params, hidden, s_units, i_units, b2_grad, hh):
    """Add one neighbourhood's gradient terms to the per-unit sums and ``b2``'s: ``grad`` (d
    loss / d log g) times each input's ``d log g / d z`` (``coef1, coef2``) for the inputs
    ``w`` and ``-w``, ``[BLOCK_B, KP]``."""
    c1 = grad * coef1
    c2 = grad * coef2
    for h in range(hidden):
        w1 = tl.load(params + h)
        b1 = tl.load(params + hidden + h)
        on1 = w * w1 + b1 > 0.0
        on2 = -w * w1 + b1 > 0.0
        d_s = tl.sum(tl.sum(tl.where(on1, c1 * w, 0.0) - tl.where(on2, c2 * w, 0.0), 1), 0)
        d_i = tl.sum(tl.sum(tl.where(on1, c1, 0.0) + tl.where(on2, c2, 0.0), 1), 0)
        s_units = tl.where(hh == h, s_units + d_s, s_units)
        i_units = tl.where(hh == h, i_units + d_i, i_units)
    return s_units, i_units, b2_grad + tl.sum(tl.sum(c1 + c2, 1), 0)


@triton.jit(do_not_specialize=("t",))  # per-launch values: one compile (__init__)
def lattice_kernel(
    s, u_cache, scale, small, g_buf, theta, partial, halt,
    t, n_chains, n_sites, width, hidden, span,
    HP: tl.constexpr, TILE: tl.constexpr,
):  # fmt: skip
    """Step ``t``'s lattice-wide terms (``_lattice``) of chain ``program_id(0)`` over the sites
    of block ``program_id(1)`` (``span`` of them), into ``partial [B, blocks, 2 + 2 HP]``: the
    sum of ``g e^-M``, ``acc_t``, then ``acc_s`` and ``acc_i`` per unit. Nothing after a halt."""
    if t < tl.load(halt):
        rows = tl.program_id(0) + tl.arange(0, 1).to(tl.int64)
        block = tl.program_id(1)
        lanes = rows < n_chains
        first = block * span
        last = tl.minimum(first + span, n_sites)
        zeros = tl.zeros([1, HP], tl.float64)
        total, acc_s, acc_i, acc_t = _lattice(
            lanes, s, rows * width, u_cache, scale, small, g_buf, theta, hidden, rows, n_sites,
            first, last, zeros, zeros, tl.zeros([1], tl.float64), HP, TILE,
        )  # fmt: skip
        hh = tl.arange(0, HP)
        at = (rows * tl.num_programs(1) + block) * (2 + 2 * HP)
        tl.store(partial + at, total)
        tl.store(partial + at + 1, acc_t)
        tl.store(partial + at[:, None] + 2 + hh[None, :], acc_s)
        tl.store(partial + at[:, None] + 2 + HP + hh[None, :], acc_i)


@triton.jit
def _gathered(partial, rows, ok, n_blocks, HP: tl.constexpr):
    """Every lane's lattice-wide terms, summed over the blocks of ``lattice_kernel``."""
    hh = tl.arange(0, HP)
    total = tl.zeros(rows.shape, tl.float64)
    acc_t = tl.zeros(rows.shape, tl.float64)
    acc_s = tl.zeros([rows.shape[0], HP], tl.float64)
    acc_i = tl.zeros([rows.shape[0], HP], tl.float64)
    for block in range(n_blocks):
        at = (rows * n_blocks + block) * (2 + 2 * HP)
        total += tl.load(partial + at, mask=ok, other=0.0)
        acc_t += tl.load(partial + at + 1, mask=ok, other=0.0)
        acc_s += tl.load(partial + at[:, None] + 2 + hh[None, :], mask=ok[:, None], other=0.0)
        acc_i += tl.load(partial + at[:, None] + 2 + HP + hh[None, :], mask=ok[:, None], other=0.0)
    return total, acc_s, acc_i, acc_t


@triton.jit
def _two_level_draw(
    partial, g_buf, rows, ok, redone, u_site, n_blocks, span, n_sites,
    HP: tl.constexpr, TILE: tl.constexpr,
):  # fmt: skip
    """The site ``i ~ g_i / Z`` in two levels: a block of ``span`` sites by its share of ``Z``
    (the lattice kernel's block sums; afresh for the lanes ``redone`` here), then a site in it
    (``draw``'s rule: the first running sum above ``u Z``, else the last site)."""
    base = rows * n_sites
    total = tl.zeros(rows.shape, tl.float64)
    for block in range(n_blocks):
        at = (rows * n_blocks + block) * (2 + 2 * HP)
        part = tl.load(partial + at, mask=ok, other=0.0)
        if tl.max(redone.to(tl.int32), 0) > 0:
            count = tl.minimum(span, n_sites - block * span)
            part = tl.where(redone, row_sum(g_buf, base + block * span, count, redone, TILE), part)
            tl.store(partial + at, part, mask=redone)
        total += part
    tl.debug_barrier()
    target = u_site * total
    acc = tl.zeros(rows.shape, tl.float64)
    before = tl.zeros(rows.shape, tl.float64)
    chosen = tl.zeros(rows.shape, tl.int64) + (n_blocks - 1)
    found = tl.zeros(rows.shape, tl.int32)
    for block in range(n_blocks):
        part = tl.load(partial + (rows * n_blocks + block) * (2 + 2 * HP), mask=ok, other=0.0)
        hit = (found == 0) & (acc + part > target)
        chosen = tl.where(hit, block, chosen)
        before = tl.where(hit, acc, before)
        found = tl.where(hit, 1, found)
        acc += part
    # none above u Z (rounding): the last site, as the one-level draw
    inner = tl.where(found == 1, target - before, float("inf"))
    start = chosen * span
    count = tl.minimum(span, n_sites - start)
    return start + draw_in(g_buf, base + start, span, count, inner, ok, TILE)


@triton.jit(do_not_specialize=("t0", "m", "fresh"))  # per-launch values: one compile (__init__)
def network_kernel(
    x, s, n_accepted, stats, truth, trace,
    neighbours, sign, coupling, unique,
    u_cache, scale, small, top_cache, g_buf, unit_buf, partial,
    theta, opt_state, log_p_learn, field, field_rows,
    u, losses, weights, last, halt,
    t0, m, real_args, n_chains, n_sites, width, hidden, n_blocks, span, fresh,
    K: tl.constexpr, KP: tl.constexpr, HP: tl.constexpr, PP: tl.constexpr, OPT: tl.constexpr,
    TRACE: tl.constexpr, BLOCK_B: tl.constexpr, TILE: tl.constexpr, SPLIT: tl.constexpr,
):  # fmt: skip
    """``m`` LSB 2 learning steps of every chain (lanes), one program. ``theta [3H + 2]``
    (``w1, b1, w2`` per unit, ``b2``, ``eta_raw``), ``opt_state [2, 3H + 3]``; cache ``u_cache,
    scale, small [B, D]``, ``top_cache [B]``; scratch ``g_buf [B, D]``, ``unit_buf [2, HP]``;
    out as ``mixture_kernel``. Steps ``t0 .. t0 + m - 1`` of the chunk; with ``SPLIT`` the
    lattice-wide terms come from ``lattice_kernel`` (``partial``, launched before each step)."""
    rows = tl.arange(0, BLOCK_B).to(tl.int64)
    lr, low, high = tl.load(real_args), tl.load(real_args + 1), tl.load(real_args + 2)
    ok = rows < n_chains
    kk = tl.arange(0, KP)
    hh = tl.arange(0, HP)
    slots_ok = ok[:, None] & (kk < K)[None, :]
    x_row = rows * width
    idx = tl.arange(0, PP)
    n_params = 3 * hidden + 2
    inside = idx < n_params
    count = tl.load(n_accepted + rows, mask=ok, other=0)
    stat_log_p = tl.load(stats + rows * 3, mask=ok, other=0.0)
    magnetisation = tl.load(stats + rows * 3 + 1, mask=ok, other=0.0)
    overlap = tl.load(stats + rows * 3 + 2, mask=ok, other=0.0)
    log_p = tl.load(log_p_learn + rows, mask=ok, other=0.0)
    top = tl.load(top_cache + rows, mask=ok, other=0.0)
    if fresh != 0:
        top = _rescale(ok, s, x_row, u_cache, scale, small, top, rows, n_sites, TILE)
        tl.debug_barrier()
    acc_s = tl.zeros([BLOCK_B, HP], tl.float64)
    acc_i = tl.zeros([BLOCK_B, HP], tl.float64)
    acc_t = tl.zeros([BLOCK_B], tl.float64)
    taken = tl.load(halt).to(tl.int32)
    status = tl.load(halt + 1).to(tl.int32)
    for t in range(t0, t0 + m):
        if t < taken:
            u_at = u + (t * n_chains + rows) * 4
            # Z's terms; again for the lanes whose scale e^M went stale, with a fresh one
            redone = ok & (rows < 0)  # lanes whose terms are formed again here
            if SPLIT:  # the lattice kernel took the first pass: here only stale lanes
                total, acc_s, acc_i, acc_t = _gathered(partial, rows, ok, n_blocks, HP)
                lanes = ok & (rows < 0)
            else:
                lanes = ok
                total = tl.zeros([BLOCK_B], tl.float64)
            for attempt in range(2):
                if tl.max(lanes.to(tl.int32), 0) > 0:
                    if attempt == 1:
                        redone = lanes
                        tl.debug_barrier()
                        top = _rescale(lanes, s, x_row, u_cache, scale, small, top, rows,
                                       n_sites, TILE)  # fmt: skip
                        tl.debug_barrier()
                    part, acc_s, acc_i, acc_t = _lattice(
                        lanes, s, x_row, u_cache, scale, small, g_buf, theta, hidden, rows,
                        n_sites, 0, n_sites, acc_s, acc_i, acc_t, HP, TILE,
                    )  # fmt: skip
                    total = tl.where(lanes, part, total)
                lanes = ok & (((total > low) & (total < high)) == 0)
            tl.debug_barrier()
            log_z = top + tl.log(tl.where(ok, total, 1.0))  # idle lanes: no log 0
            u_site = tl.load(u_at, mask=ok, other=0.0)
            if SPLIT:
                i = _two_level_draw(
                    partial, g_buf, rows, ok, redone, u_site, n_blocks, span, n_sites, HP, TILE
                )
            else:
                base = rows * n_sites
                i = draw(g_buf, base, n_sites, u_site * row_sum(g_buf, base, n_sites, ok, TILE),
                         ok, TILE)  # fmt: skip
            j = tl.load(u_at + 3, mask=ok, other=0.0) * n_sites
            j = tl.minimum(j.to(tl.int64), n_sites - 1)
            nb_i, mask_i, s_old_i, s_new_i, x_new_i, x_i = flip(
                i, x, s, x_row, neighbours, sign, coupling, unique, kk, K, slots_ok
            )
            _, mask_j, s_old_j, s_new_j, _, _ = flip(
                j, x, s, x_row, neighbours, sign, coupling, unique, kk, K, slots_ok
            )
            lg0, c01, c02, w0 = _flip_log_g(s_old_i, theta, hidden)
            lg1, c11, c12, w1 = _flip_log_g(s_new_i, theta, hidden)
            lg2, c21, c22, w2 = _flip_log_g(s_old_j, theta, hidden)
            lg3, c31, c32, w3 = _flip_log_g(s_new_j, theta, hidden)
            log_q0 = slot(lg0, kk, 0) - log_z
            s_objective = objective_log_ratio(
                slot(s_old_i, kk, 0), x_i, field, field_rows, rows, i, n_sites, ok
            )
            if tl.max((ok & (finite(log_z) == 0)).to(tl.int32), 0) > 0:
                taken = t  # log Z is not finite: nothing done, learning stops
                status = 2
            else:
                eta_raw = tl.load(theta + 3 * hidden + 1)
                loss, grad_log_z, g0, g1, g2, g3, grad_eta, dz = loss_and_grads(
                    log_z, lg0, lg1, lg2, lg3, mask_i, mask_j, log_p, s_objective, log_q0,
                    eta_raw, ok, kk, n_chains,
                )  # fmt: skip
                # per unit: log Z's sums weighted by d loss / d log Z / Z, then the flips'
                weight = tl.where(ok, grad_log_z / tl.where(ok, total, 1.0), 0.0)
                s_units = tl.sum(weight[:, None] * acc_s, 0)
                i_units = tl.sum(weight[:, None] * acc_i, 0)
                b2_grad = tl.sum(weight * acc_t, 0)
                s_units, i_units, b2_grad = _flip_units(
                    g0, c01, c02, w0, theta, hidden, s_units, i_units, b2_grad, hh
                )
                s_units, i_units, b2_grad = _flip_units(
                    g1, c11, c12, w1, theta, hidden, s_units, i_units, b2_grad, hh
                )
                s_units, i_units, b2_grad = _flip_units(
                    g2, c21, c22, w2, theta, hidden, s_units, i_units, b2_grad, hh
                )
                s_units, i_units, b2_grad = _flip_units(
                    g3, c31, c32, w3, theta, hidden, s_units, i_units, b2_grad, hh
                )
                # chained to the weights: d z / d w1_h = w2_h w, / d b1_h = w2_h, / d w2_h =
                # w1_h w + b1_h, on the unit's side of its breakpoint
                tl.store(unit_buf + hh, s_units)
                tl.store(unit_buf + HP + hh, i_units)
                tl.debug_barrier()
                part = idx // hidden
                unit = idx % hidden
                in_units = idx < 3 * hidden
                s_at = tl.load(unit_buf + unit, mask=in_units, other=0.0)
                i_at = tl.load(unit_buf + HP + unit, mask=in_units, other=0.0)
                w1_at = tl.load(theta + unit, mask=in_units, other=0.0)
                b1_at = tl.load(theta + hidden + unit, mask=in_units, other=0.0)
                w2_at = tl.load(theta + 2 * hidden + unit, mask=in_units, other=0.0)
                grads = tl.where(part == 0, w2_at * s_at, w1_at * s_at + b1_at * i_at)
                grads = tl.where(part == 1, w2_at * i_at, grads)
                grads = tl.where(idx == 3 * hidden, b2_grad, grads)
                grads = tl.where(idx == 3 * hidden + 1, grad_eta, grads)
                grads = tl.where(inside, grads, 0.0)
                new, failed = take_step(theta, grads, inside, opt_state, n_params, lr, loss, OPT)
                tl.store(losses + t, loss)
                tl.store(
                    weights + t * 5 + 4,
                    softplus(tl.sum(tl.where(idx == n_params - 1, new, 0.0), 0)),
                )
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
                # the neighbourhood's cached values from its new s; a fresh scale if one rose
                write = slots_ok & accept[:, None]
                s_now = tl.load(s + x_row[:, None] + nb_i, mask=write, other=0.0)
                u_now, scale_now, small_now = _site_caches(s_now, top[:, None])
                at = (rows * n_sites)[:, None] + nb_i
                tl.store(u_cache + at, u_now, mask=write)
                tl.store(scale + at, scale_now, mask=write)
                tl.store(small + at, small_now, mask=write)
                risen = tl.max(tl.where(write & (s_now - top[:, None] > _LOG_RANGE), 1, 0), 1)
                need = accept & (risen > 0)
                tl.debug_barrier()
                if tl.max(need.to(tl.int32), 0) > 0:
                    top = _rescale(need, s, x_row, u_cache, scale, small, top, rows, n_sites, TILE)
                    tl.debug_barrier()
                if TRACE:
                    record(
                        trace, t, n_chains, rows, ok, stat_log_p, magnetisation, overlap, accept, i
                    )
    tl.store(top_cache + rows, top, mask=ok)
    finish(n_accepted, stats, log_p_learn, halt, rows, ok, count, stat_log_p, magnetisation,
           overlap, log_p, taken, status)  # fmt: skip


# Above this many chain-sites a step's lattice-wide terms (the O(D) part of LSB 2's step) run in
# ``lattice_kernel``, spread over programs of SPAN sites, and each step takes two launches;
# below it one program runs the whole chunk in one launch. The paper's workload (30 x 900) stays
# in one launch, the 256x256 image (8 x 65,536) splits. A guess until measured on a GPU.
SPLIT_ABOVE = 1 << 16
SPAN = 1024
SPAN_TILE = 256  # sites per tile in lattice_kernel (one chain per program)


def network_learning_steps(
    m: int, chains: dict, tables: dict, learner: dict, u: torch.Tensor, out: dict, cache: dict,
    fresh: bool, trace, hidden: int,
) -> torch.Tensor:  # fmt: skip
    """Up to ``m`` LSB 2 learning steps in place; arguments as
    ``mixture.mixture_learning_steps``, with ``learner["params"] [3H + 2]`` and ``cache``:
    ``u, scale, small [B, D], top [B]`` (rebuilt first when ``fresh``). Returns ``halt``."""
    x = chains["x"]
    n_chains, width = x.shape
    n_sites, k = tables["neighbours"].shape
    check_contiguous(**chains, **tables, **cache, params=learner["params"], uniforms=u)
    halt = halt_flag(m, x.device)
    hp = next_power_of_2(hidden)
    g_buf = torch.empty(n_chains, n_sites, dtype=torch.float64, device=x.device)
    unit_buf = torch.empty(2 * hp, dtype=torch.float64, device=x.device)
    split = n_chains * n_sites > SPLIT_ABOVE
    n_blocks = triton.cdiv(n_sites, SPAN) if split else 1
    partial = torch.empty(n_chains, n_blocks, 2 + 2 * hp, dtype=torch.float64, device=x.device)
    params = learner["params"]
    bounds_lr = reals(learner["lr"], math.exp(-LOG_RANGE), math.exp(LOG_RANGE), device=x.device)

    def steps(t0: int, count: int, rebuild: bool) -> None:
        network_kernel[(1,)](
            x, chains["s"], chains["n_accepted"], chains["stats"], chains["truth"],
            trace if trace is not None else out["last"],
            tables["neighbours"], tables["sign"], tables["coupling"], tables["unique"],
            cache["u"], cache["scale"], cache["small"], cache["top"], g_buf, unit_buf, partial,
            params, learner["opt_state"], learner["log_p"], learner["field"],
            learner["field"].shape[0],
            u, out["losses"], out["weights"], out["last"], halt,
            t0, count, bounds_lr, n_chains, n_sites, width, hidden, n_blocks, SPAN,
            int(rebuild),
            K=k, KP=next_power_of_2(k), HP=hp, PP=next_power_of_2(3 * hidden + 2),
            OPT=learner["opt_kind"], TRACE=trace is not None,
            BLOCK_B=next_power_of_2(n_chains), TILE=TILE, SPLIT=split, num_warps=WARPS,
            enable_fp_fusion=False,
        )  # fmt: skip

    if not split:
        steps(0, m, fresh)
        return halt
    if fresh:
        steps(0, 0, True)  # the cache first: the lattice kernel reads it
    for t in range(m):  # two launches a step; both do nothing after a halt
        lattice_kernel[(n_chains, n_blocks)](
            chains["s"], cache["u"], cache["scale"], cache["small"], g_buf, params, partial,
            halt, t, n_chains, n_sites, width, hidden, SPAN,
            HP=hp, TILE=SPAN_TILE, num_warps=4, enable_fp_fusion=False,
        )  # fmt: skip
        steps(t, 1, False)
    return halt
