"""Frozen locally balanced steps on the device: ``m`` steps of every chain in one launch
(``device_balanced_steps``, the twin of the CPU's ``kernels.balanced_steps``), for every
balancing function of the paper comparison: the fixed barker, sqrt, min and max, LSB 1's
mixture and LSB 2's network (``KIND`` 0-5, as ``structures.Function``). The learned ones arrive
as device tensors: LSB 1's log-weights, LSB 2's piecewise-linear form
(``NetworkBalancing.pieces``).

A program owns ``BLOCK_B`` chains (one per lane; ``BLOCK_B = 1`` is one program per chain) and
runs their ``m`` steps in turn, reading ``u [m, B, 3]`` as the CPU kernel does: the block, the
site in it, the decision. Every sum the CPU kernel forms one term at a time (the block sums'
total, both levels of the search, ``dZ`` over the neighbourhood, a block's re-sum, a rebuild)
is formed here in the same order, so the chosen sites, the decisions, ``x`` and ``s`` are
bitwise the CPU's; ``gn``, the block sums, ``Z`` and ``shift`` agree within rounding, because
``exp``/``log`` come from another math library (numpy in the interpreter, libdevice on CUDA).
Sequential sums keep a step O(sqrt(D)) like the CPU's, at the price of a serial latency per
step that a GPU hides only across many chains (speed: BENCHMARKS.md, GPU, not measured).

Chains are independent, so programs never share a row; inside a program a value written in one
step is read in the next, hence a barrier after every write that is read back.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from lsbcore.backends.device import next_power_of_2
from lsbcore.backends.device.primitives import flip, log1p, log_sigmoid, reals, record, slot
from lsbcore.backends.structures import Function
from lsbcore.numerics import LOG_2, LOG_RANGE, MAX_LOG_G

CHAINS_PER_PROGRAM = 1  # on CUDA: one program per chain (the tests use wider programs)
_MAX_LOG_G = tl.constexpr(MAX_LOG_G)  # a kernel reads module constants only as constexpr
_LOG_2 = tl.constexpr(LOG_2)


@triton.jit
def _fixed_log_g(s, KIND: tl.constexpr):
    """``log g(e^s)`` of a fixed function (``structures.Function.kind`` 0-3, as ``kernels``)."""
    if KIND == 0:  # barker: log sigmoid(s), the branch of kernels._log_sigmoid
        out = log_sigmoid(s)
    elif KIND == 1:  # sqrt
        out = 0.5 * s
    elif KIND == 2:  # min
        out = tl.minimum(s, 0.0)
    else:  # max
        out = tl.maximum(s, 0.0)
    return out


@triton.jit
def _log_softplus_piece(s, breakpoints, n_breakpoints, slope, intercept):
    """``log softplus(z(u))``, ``u = sigmoid(s) - 1/2``, ``z`` linear on the piece of ``u``:
    the count of breakpoints below it (as ``kernels._log_softplus_piece``)."""
    # exp capped: beyond 700, u = -1/2 exactly either way (and numpy would warn of inf)
    u = 1.0 / (1.0 + tl.exp(tl.minimum(-s, 700.0))) - 0.5
    piece = tl.zeros(s.shape, tl.int32)
    for c in range(n_breakpoints):
        piece += (u > tl.load(breakpoints + c)).to(tl.int32)
    z = tl.load(slope + piece) * u + tl.load(intercept + piece)
    # min(z, log softplus(max(z, -30))), softplus linear above 20; exp capped where unused
    clipped = tl.maximum(z, -30.0)
    soft = tl.where(clipped > 20.0, clipped, log1p(tl.exp(tl.minimum(clipped, 20.0))))
    return tl.minimum(z, tl.log(soft))


@triton.jit
def _log_g(s, KIND: tl.constexpr, log_w, breakpoints, n_breakpoints, slope, intercept):
    """``log g(e^s)`` of one balancing function, term for term as ``kernels.log_g``: ``KIND``
    0-3 fixed, 4 the mixture with log-weights ``log_w [4]``, 5 the network's pieces."""
    if KIND < 4:
        out = _fixed_log_g(s, KIND)
    elif KIND == 4:  # logsumexp_k(log g_k + log w_k): the max first, then the sum in order
        t0 = _fixed_log_g(s, 0) + tl.load(log_w)
        t1 = _fixed_log_g(s, 1) + tl.load(log_w + 1)
        t2 = _fixed_log_g(s, 2) + tl.load(log_w + 2)
        t3 = _fixed_log_g(s, 3) + tl.load(log_w + 3)
        top = tl.maximum(tl.maximum(tl.maximum(t0, t1), t2), t3)
        total = tl.exp(t0 - top) + tl.exp(t1 - top) + tl.exp(t2 - top) + tl.exp(t3 - top)
        out = top + tl.log(total)
    else:  # log((h(t) + t h(1/t)) / 2), h = softplus(z)
        a = _log_softplus_piece(s, breakpoints, n_breakpoints, slope, intercept)
        b = s + _log_softplus_piece(-s, breakpoints, n_breakpoints, slope, intercept)
        top = tl.maximum(a, b)
        out = top + log1p(tl.exp(tl.minimum(a, b) - top)) - _LOG_2
    return out


@triton.jit
def _search(row, base, count, target, ok):
    """The first ``c < count`` with ``row[base + c]`` summed from 0 above ``target`` (else the
    last), summed one term at a time as the CPU's search does."""
    acc = tl.zeros(target.shape, tl.float64)
    chosen = tl.zeros(target.shape, tl.int64) + (count - 1)
    found = tl.zeros(target.shape, tl.int32)
    for c in range(count):
        acc += tl.load(row + base + c, mask=ok, other=0.0)
        hit = (acc > target) & (found == 0)
        chosen = tl.where(hit, c, chosen)
        found = tl.where(hit, 1, found)
    return chosen


@triton.jit
def _row_sum(row, base, count, ok):
    total = tl.zeros(base.shape, tl.float64)
    for c in range(count):
        total += tl.load(row + base + c, mask=ok, other=0.0)
    return total


@triton.jit(do_not_specialize=("m", "n_breakpoints"))  # per-launch values: one compile (__init__)
def balanced_kernel(
    x, s, n_accepted, stats, truth, trace,
    neighbours, sign, coupling, unique,
    log_w, breakpoints, slope, intercept,
    gn, block_sum, z, shift,
    u, last, rebuilt,
    m, n_chains, n_sites, width, n_blocks, block, n_breakpoints, bounds,
    K: tl.constexpr, KP: tl.constexpr, KIND: tl.constexpr, TRACE: tl.constexpr,
    BLOCK_B: tl.constexpr,
):  # fmt: skip
    """``m`` steps of chains ``rows``. Chains: ``x, s [B, width]``, ``n_accepted [B]`` (int64),
    ``stats [B, 3]``, ``truth [width]``, ``trace [m, B, 5]`` (when ``TRACE``); tables ``[D, K]``;
    the function's ``log_w [4]``, ``breakpoints [n_breakpoints]``, ``slope, intercept
    [n_breakpoints + 1]`` (read for ``KIND`` 4 and 5 only); cache ``gn [B, (n_blocks + 1) *
    block]``, ``block_sum [B, n_blocks]``, ``z, shift [B]``; ``u [m, B, 3]``; out: ``last
    [B, 4]`` (site, Z, Z', decision), ``rebuilt [B]``."""
    rows = (tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)).to(tl.int64)  # [BLOCK_B]
    ok = rows < n_chains
    kk = tl.arange(0, KP)
    slots_ok = ok[:, None] & (kk < K)[None, :]  # [BLOCK_B, KP]
    gn_row = rows * (n_blocks + 1) * block
    sum_row = rows * n_blocks
    x_row = rows * width
    sh = tl.load(shift + rows, mask=ok, other=0.0)
    count = tl.load(n_accepted + rows, mask=ok, other=0)
    log_p = tl.load(stats + rows * 3, mask=ok, other=0.0)
    magnetisation = tl.load(stats + rows * 3 + 1, mask=ok, other=0.0)
    overlap = tl.load(stats + rows * 3 + 2, mask=ok, other=0.0)
    n_rebuilt = tl.zeros([BLOCK_B], tl.int32)
    total = _row_sum(block_sum, sum_row, n_blocks, ok)  # Z, as the CPU sums it
    for t in range(m):
        u_at = u + (t * n_chains + rows) * 3
        # level 1: a block with probability block_sum / Z; level 2: a site in it, gn / its sum
        chosen = _search(
            block_sum, sum_row, n_blocks, tl.load(u_at, mask=ok, other=0.0) * total, ok
        )
        start = chosen * block
        row_total = _row_sum(gn, gn_row + start, block, ok)
        target = tl.load(u_at + 1, mask=ok, other=0.0) * row_total
        site = start + _search(gn, gn_row + start, block, target, ok)
        # Z(x'): the neighbourhood's new log-ratios (spec 1, x_i before the flip) and g values
        j, un, _, s_new, x_new, x_site = flip(
            site, x, s, x_row, neighbours, sign, coupling, unique, kk, K, slots_ok
        )
        log_g = _log_g(s_new, KIND, log_w, breakpoints, n_breakpoints, slope, intercept)
        g_new = tl.exp(tl.minimum(log_g - sh[:, None], _MAX_LOG_G))
        g_old = tl.load(gn + gn_row[:, None] + j, mask=slots_ok, other=0.0)
        dz = tl.zeros([BLOCK_B], tl.float64)
        for k in tl.static_range(K):  # in slot order, as the CPU adds them
            dz += slot((g_new - g_old) * un, kk, k)
        z_new = total + dz
        # A = Z / max(Z, Z'): no cancellation, and Z' = inf simply rejects
        accept = ok & (tl.load(u_at + 2, mask=ok, other=1.0) * tl.maximum(total, z_new) < total)
        final = ok & ((rows * 0 + t) == m - 1)  # the last step, per lane
        tl.store(last + rows * 4, site.to(tl.float64), mask=final)
        tl.store(last + rows * 4 + 1, total, mask=final)
        tl.store(last + rows * 4 + 2, z_new, mask=final)
        tl.store(last + rows * 4 + 3, accept.to(tl.float64), mask=final)
        # the flip (kernels.write_flip): count, statistics, then x, s and gn of the neighbourhood
        count += accept.to(tl.int64)
        log_p = tl.where(accept, log_p - slot(s_new, kk, 0), log_p)
        t_site = tl.load(truth + site, mask=ok, other=0.0)
        magnetisation = tl.where(accept, magnetisation - 2.0 * x_site, magnetisation)
        overlap = tl.where(accept, overlap - 2.0 * x_site * t_site, overlap)
        write = slots_ok & accept[:, None]
        tl.store(x + x_row[:, None] + j, x_new, mask=write)
        tl.store(s + x_row[:, None] + j, s_new, mask=write)
        tl.store(gn + gn_row[:, None] + j, g_new, mask=write)
        tl.debug_barrier()
        # every touched block re-added from gn, never nudged
        first = (j // block) * block
        for k in tl.static_range(K):
            begin = slot(first, kk, k)
            part = _row_sum(gn, gn_row + begin, block, accept)
            tl.store(block_sum + sum_row + begin // block, part, mask=accept)
        tl.debug_barrier()
        total = tl.where(accept, _row_sum(block_sum, sum_row, n_blocks, accept), total)
        in_range = (total > tl.load(bounds)) & (total < tl.load(bounds + 1))
        need = accept & (in_range == 0)
        if tl.max(need.to(tl.int32), 0) > 0:  # Z left its range: rebuild with a fresh shift
            # as kernels.rebuild_row: the log values into gn first, exponentiated below
            top = tl.full([BLOCK_B], float("-inf"), tl.float64)
            for i in range(n_sites):
                s_i = tl.load(s + x_row + i, mask=need, other=0.0)
                v = _log_g(s_i, KIND, log_w, breakpoints, n_breakpoints, slope, intercept)
                tl.store(gn + gn_row + i, v, mask=need)
                top = tl.maximum(top, v)
            tl.debug_barrier()
            for i in range(n_sites):
                v = tl.load(gn + gn_row + i, mask=need, other=0.0)
                tl.store(gn + gn_row + i, tl.exp(v - top), mask=need)
            sh = tl.where(need, top, sh)
            tl.debug_barrier()
            for b in range(n_blocks):
                part = _row_sum(gn, gn_row + b * block, block, need)
                tl.store(block_sum + sum_row + b, part, mask=need)
            tl.debug_barrier()
            total = tl.where(need, _row_sum(block_sum, sum_row, n_blocks, need), total)
            n_rebuilt += need.to(tl.int32)
        if TRACE:
            record(trace, t, n_chains, rows, ok, log_p, magnetisation, overlap, accept, site)
    tl.store(z + rows, total, mask=ok)
    tl.store(shift + rows, sh, mask=ok)
    tl.store(n_accepted + rows, count, mask=ok)
    tl.store(stats + rows * 3, log_p, mask=ok)
    tl.store(stats + rows * 3 + 1, magnetisation, mask=ok)
    tl.store(stats + rows * 3 + 2, overlap, mask=ok)
    tl.store(rebuilt + rows, n_rebuilt, mask=ok)


def device_balanced_steps(
    m: int, chains: dict, tables: dict, function: Function, cache: dict, u: torch.Tensor, trace,
    chains_per_program: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """``m`` frozen steps of every chain in place. ``chains``: ``x, s, n_accepted, stats,
    truth``; ``tables``: ``neighbours, sign, coupling, unique``; ``function``: a
    ``structures.Function`` of device tensors (``log_w`` of 4 entries whatever the kind);
    ``cache``: ``gn, block_sum, z, shift`` (device tensors, contiguous); ``u [m, B, 3]``;
    ``trace [m, B, 5]`` or None. ``chains_per_program``: lanes of one program (default
    ``CHAINS_PER_PROGRAM``). Returns ``last [B, 4]`` and the rows rebuilt per chain ``[B]``,
    on the device."""
    x = chains["x"]
    n_chains, width = x.shape
    n_sites, k = tables["neighbours"].shape
    n_blocks = cache["block_sum"].shape[1]
    block = cache["gn"].shape[1] // (n_blocks + 1)
    parameters = {
        "log_w": function.log_w,
        "breakpoints": function.breakpoints,
        "slope": function.slope,
        "intercept": function.intercept,
    }
    for name, value in {**chains, **tables, **parameters, **cache}.items():
        if not value.is_contiguous():
            raise ValueError(f"the device kernel needs a contiguous {name}.")
    # an empty parameter (no breakpoints inside the range; those a kind does not read) is never
    # loaded: the log-weights stand in for its pointer
    breakpoints, slope, intercept = (
        p if p.numel() else function.log_w
        for p in (function.breakpoints, function.slope, function.intercept)
    )
    last = torch.zeros(n_chains, 4, dtype=torch.float64, device=x.device)
    rebuilt = torch.zeros(n_chains, dtype=torch.int32, device=x.device)
    trace_out = trace if trace is not None else last  # never written without TRACE
    lanes = chains_per_program or CHAINS_PER_PROGRAM
    block_b = min(next_power_of_2(n_chains), next_power_of_2(lanes))
    balanced_kernel[(triton.cdiv(n_chains, block_b),)](
        x, chains["s"], chains["n_accepted"], chains["stats"], chains["truth"], trace_out,
        tables["neighbours"], tables["sign"], tables["coupling"], tables["unique"],
        function.log_w, breakpoints, slope, intercept,
        cache["gn"], cache["block_sum"], cache["z"], cache["shift"],
        u, last, rebuilt,
        m, n_chains, n_sites, width, n_blocks, block, function.breakpoints.numel(),
        reals(math.exp(-LOG_RANGE), math.exp(LOG_RANGE), device=x.device),
        K=k, KP=next_power_of_2(k), KIND=function.kind, TRACE=trace is not None,
        BLOCK_B=block_b,
        num_warps=1 if block_b <= 32 else 4,  # one chain's scalar work needs no second warp
        enable_fp_fusion=False,  # no a * b + c contraction: numba's rounding, step for step
    )  # fmt: skip
    return last, rebuilt
