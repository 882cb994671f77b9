"""Per-lane building blocks of the device kernels: stable ``log1p``/``expm1`` from ``exp`` and
``log`` alone (libdevice's have no interpreter counterpart), a column of a ``[lanes, slots]``
tile, a site's flip (spec 1), and inverse-CDF draws over rows in tiles."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


def reals(*values: float, device) -> torch.Tensor:
    """Real kernel arguments as one float64 tensor: Triton passes a Python float as fp32 on
    CUDA (e^200 becomes inf there, a learning rate loses digits), the interpreter as fp64."""
    return torch.tensor(values, dtype=torch.float64, device=device)


@triton.jit
def log1p(e):
    # log1p to a few ulps from log alone (libdevice's log1p has no interpreter counterpart):
    # log(1 + e) * e / ((1 + e) - 1) cancels the rounding of 1 + e (Goldberg 1991, thm. 4)
    one_plus = 1.0 + e
    rounded = one_plus - 1.0
    exact = rounded == 0.0  # then log1p(e) = e to double precision
    return tl.where(exact, e, tl.log(one_plus) * (e / tl.where(exact, 1.0, rounded)))


@triton.jit
def log_sigmoid(s):
    e = tl.exp(-tl.abs(s))
    return tl.where(s >= 0.0, -log1p(e), s - log1p(e))


@triton.jit
def softplus(v):
    return tl.where(v > 20.0, v, log1p(tl.exp(tl.minimum(v, 20.0))))


@triton.jit
def expm1(v):
    """``e^v - 1`` to a few ulps from ``exp`` and ``log`` alone (Kahan's trick)."""
    e = tl.exp(v)
    d = e - 1.0
    small = e == 1.0
    ratio = d * (v / tl.log(tl.where(small | (d == -1.0), 2.0, e)))
    return tl.where(small, v, tl.where((d == -1.0) | (e == float("inf")), d, ratio))


@triton.jit
def slot(values, kk, k):
    """Column ``k`` of ``values [BLOCK_B, KP]`` (the other terms are zeros)."""
    return tl.sum(tl.where(kk[None, :] == k, values, tl.zeros_like(values)), 1)


@triton.jit
def finite(v):
    return (v - v) == 0.0  # False for NaN and +-inf


@triton.jit
def draw(values, base, n, target, ok, TILE: tl.constexpr):
    """Per lane the first ``c < n`` whose running sum of ``values[base + c]`` exceeds
    ``target`` (else ``n - 1``): the inverse CDF of ``learning_kernels._draw``, in tiles."""
    return draw_in(values, base, n, n, target, ok, TILE)


@triton.jit
def draw_in(values, base, n, count, target, ok, TILE: tl.constexpr):
    """``draw`` over each lane's first ``count`` values (a scalar or one per lane, at most
    ``n``)."""
    limit = count + tl.zeros(target.shape, tl.int64)
    acc = tl.zeros(target.shape, tl.float64)
    chosen = limit - 1
    found = tl.zeros(target.shape, tl.int32)
    for start in range(0, n, TILE):
        cols = start + tl.arange(0, TILE)
        inside = ok[:, None] & (cols[None, :] < limit[:, None])
        v = tl.load(values + base[:, None] + cols[None, :], mask=inside, other=0.0)
        running = tl.cumsum(v, 1) + acc[:, None]
        first = tl.min(tl.where(inside & (running > target[:, None]), cols[None, :], n), 1)
        hit = (found == 0) & (first < n)
        chosen = tl.where(hit, first.to(tl.int64), chosen)
        found = tl.where(hit, 1, found)
        # the running sum so far, as the last running value (values are non-negative), not
        # acc + sum(v): a reduction added to a loop-carried value that is unused after the
        # loop fails Triton 3.6's thread-locality pass (the GPU machines' Triton)
        acc = tl.max(running, 1)
    return chosen


@triton.jit
def row_sum(values, base, n, ok, TILE: tl.constexpr):
    """Per lane ``sum_c values[base + c]`` over ``c < n``."""
    total = tl.zeros(base.shape, tl.float64)
    for start in range(0, n, TILE):
        cols = start + tl.arange(0, TILE)
        inside = ok[:, None] & (cols < n)[None, :]
        total += tl.sum(tl.load(values + base[:, None] + cols[None, :], mask=inside, other=0.0), 1)
    return tl.where(ok, total, 0.0)  # the loop's result used once (see draw_in)


@triton.jit
def flip(site, x, s, x_row, neighbours, sign, coupling, unique, kk, K, slots_ok):
    """Per lane the neighbourhood of ``site`` and its values before and after the flip (spec 1,
    ``x_i`` before the flip): ``(j, unique, s_old, s_new, x_new, x_site)``, ``[BLOCK_B, KP]``."""
    ok = tl.max(slots_ok.to(tl.int32), 1) > 0
    at = site[:, None] * K + kk[None, :]
    j = tl.load(neighbours + at, mask=slots_ok, other=0)
    sg = tl.load(sign + at, mask=slots_ok, other=1.0)
    cp = tl.load(coupling + at, mask=slots_ok, other=0.0)
    un = tl.load(unique + at, mask=slots_ok, other=0.0)
    x_site = tl.load(x + x_row + site, mask=ok, other=1.0)
    x_j = tl.load(x + x_row[:, None] + j, mask=slots_ok, other=1.0)
    s_j = tl.load(s + x_row[:, None] + j, mask=slots_ok, other=0.0)
    return j, un, s_j, s_j * sg + cp * x_j * x_site[:, None], x_j * sg, x_site


@triton.jit
def record(trace, t, n_chains, rows, ok, log_p, magnetisation, overlap, accept, i):
    """Row ``t`` of the step trace (``kernels.record_step``)."""
    row = trace + (t * n_chains + rows) * 5
    tl.store(row, log_p, mask=ok)
    tl.store(row + 1, magnetisation, mask=ok)
    tl.store(row + 2, overlap, mask=ok)
    tl.store(row + 3, accept.to(tl.float64), mask=ok)
    tl.store(row + 4, i.to(tl.float64), mask=ok)
