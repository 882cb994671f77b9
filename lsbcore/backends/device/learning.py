"""What LSB 1's and LSB 2's device learning kernels share (Algorithm 1, spec 5, on the GPU).

Learning couples the chains: the loss is a mean over them and every step changes the shared
parameters. So a learning kernel is one program that runs a whole chunk of steps, with the
chains on its lanes (``rows``, ``BLOCK_B`` of them) and the lattice in tiles of ``TILE`` sites:
per step it forms the lattice-wide terms, draws, evaluates the objective, reduces over the
chains, takes the optimiser step and checks finiteness, then accepts with theta0, all without a
launch or a host read in between. The host reads one small tensor at the end of the chunk:
how many steps were taken and whether learning stopped.

The pieces follow ``learning_kernels`` (the compiled CPU steps) rule for rule: the same
uniforms, the same draws, the same objective and optimiser. Sums over chains and sites are
formed in another order (lanes and tiles), so values agree with the CPU within rounding, and
the chains agree step by step (``tests/test_device_learning.py``).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from lsbcore.backends.device.primitives import expm1, finite, slot, softplus
from lsbcore.numerics import (
    ADAM_BETA1,
    ADAM_BETA2,
    ADAM_EPS,
    LOG_RANGE,
    MAX_LOG_G,
    SGD_MOMENTUM,
)

_MAX_LOG_G = tl.constexpr(MAX_LOG_G)
_LOG_RANGE = tl.constexpr(LOG_RANGE)
_BETA1 = tl.constexpr(ADAM_BETA1)
_BETA2 = tl.constexpr(ADAM_BETA2)
# the logs in Python's double: tl.log of a constant would run in float32
_LOG_BETA1 = tl.constexpr(math.log(ADAM_BETA1))
_LOG_BETA2 = tl.constexpr(math.log(ADAM_BETA2))
_EPS = tl.constexpr(ADAM_EPS)
_MOMENTUM = tl.constexpr(SGD_MOMENTUM)

TILE = 32  # sites per tile of a lattice-wide pass: BLOCK_B x TILE doubles in registers
WARPS = 8  # one program holds the whole step: the SM's register file, no spills
#: The most chains a learning kernel holds on its lanes (BLOCK_B, a power of 2). The kernels
#: were built for the paper's 30 chains (BLOCK_B 32); at 1,024 chains the lanes' tiles are far
#: beyond a program's registers (their PTX ran to 6.5-8.8 MB, and ptxas took over 3 minutes
#: and 4 GB for each one on dev-cpu without finishing). More chains learn with torch steps.
MAX_LANES = 128


@triton.jit
def objective_log_ratio(s_i, x_site, field, field_rows, rows, site, n_sites, ok):
    """``log p~(x') - log p~(x)`` as the objective sees it (``_objective_log_ratio``): ``s_i``,
    or the authors' form when their field is given (one row, or one per chain)."""
    given = (rows * 0 + field_rows) > 0  # per lane: a runtime scalar is no mask
    row = tl.where(given & (field_rows > 1), rows, 0)
    h = tl.load(field + row * n_sites + site, mask=ok & given, other=0.0)
    authors = x_site * s_i + 2.0 * h * (1.0 - x_site)
    return tl.where(given, authors, s_i)


@triton.jit
def loss_and_grads(
    log_z, lg0, lg1, lg2, lg3, mask_i, mask_j, log_p, s_objective, log_q0, eta_raw, ok, kk,
    n_chains,
):  # fmt: skip
    """``objective.lsb_loss_and_grads`` with the chains on lanes: ``log_z [BLOCK_B]``, the
    neighbourhoods' ``log g`` (x' before and after, x~ before and after) and the slots that
    count, ``[BLOCK_B, KP]``. Returns ``(loss, grad_log_z, g0, g1, g2, g3, grad_eta_raw, dz)``,
    with ``dz = Z(x')/Z(x) - 1`` per chain; lanes past ``n_chains`` contribute nothing."""
    n = n_chains * 1.0
    shifted00 = lg0 - log_z[:, None]
    shifted01 = lg1 - log_z[:, None]
    shifted10 = lg2 - log_z[:, None]
    shifted11 = lg3 - log_z[:, None]
    scaled00 = tl.exp(tl.minimum(shifted00, _MAX_LOG_G))
    scaled01 = tl.exp(tl.minimum(shifted01, _MAX_LOG_G))
    scaled10 = tl.exp(tl.minimum(shifted10, _MAX_LOG_G))
    scaled11 = tl.exp(tl.minimum(shifted11, _MAX_LOG_G))
    dz_i = tl.sum((scaled01 - scaled00) * mask_i, 1)
    dz_j = tl.sum((scaled11 - scaled10) * mask_j, 1)
    denominator_i = 1.0 + tl.maximum(dz_i, 0.0)
    denominator_j = 1.0 + tl.maximum(dz_j, 0.0)
    log_t_i = (slot(lg0, kk, 0) - log_z) - tl.log(denominator_i)
    log_t_j = (slot(lg2, kk, 0) - log_z) - tl.log(denominator_j)
    top = tl.max(tl.where(ok, log_p, float("-inf")), 0)
    p_hat = tl.exp(log_p - top)
    w = tl.exp((log_p - top) - log_q0)
    eta = softplus(eta_raw)
    log_eta_1 = tl.log(eta) + 1.0
    eta_slope = tl.where(eta_raw > 20.0, 1.0, 1.0 / (1.0 + tl.exp(-eta_raw)))
    t = tl.exp(log_t_i)
    m = -expm1(log_t_j)
    log_ratio = log_t_i - (log_p + s_objective)
    zero = tl.zeros_like(log_z)
    loss = tl.sum(tl.where(ok, w * t * log_ratio + m * (eta * m - p_hat * log_eta_1), zero), 0)
    grad_t_i = tl.where(ok, w * t * (log_ratio + 1.0) / n, zero)
    grad_t_j = tl.where(ok, -(2.0 * eta * m - p_hat * log_eta_1) * (1.0 - m) / n, zero)
    grad_dz_i = -grad_t_i / denominator_i
    grad_dz_j = -grad_t_j / denominator_j
    grad_log_z = grad_dz_i + grad_dz_j
    common_i = (tl.where(dz_i > 0.0, grad_dz_i, zero))[:, None] * mask_i
    common_j = (tl.where(dz_j > 0.0, grad_dz_j, zero))[:, None] * mask_j
    at_site = kk[None, :] == 0
    below00 = (shifted00 <= _MAX_LOG_G).to(tl.float64)
    g0 = -(scaled00 * below00 * common_i) + tl.where(at_site, grad_t_i[:, None], 0.0)
    g1 = scaled01 * (shifted01 <= _MAX_LOG_G).to(tl.float64) * common_i
    below10 = (shifted10 <= _MAX_LOG_G).to(tl.float64)
    g2 = -(scaled10 * below10 * common_j) + tl.where(at_site, grad_t_j[:, None], 0.0)
    g3 = scaled11 * (shifted11 <= _MAX_LOG_G).to(tl.float64) * common_j
    grad_eta = tl.sum(tl.where(ok, m * (m - p_hat / eta), zero), 0) / n * eta_slope
    return loss / n, grad_log_z, g0, g1, g2, g3, grad_eta, dz_i


@triton.jit
def optimizer_step(params, grads, inside, state, n_params, lr, OPT: tl.constexpr):
    """One ``torch.optim`` step of the parameter vector (``learning_kernels.optimizer_step``);
    ``state [2, P + 1]`` is read and written here. ``OPT`` 0: Adam, 1: SGD with momentum."""
    idx = tl.arange(0, params.shape[0])
    if OPT == 0:
        step = tl.load(state + n_params) + 1.0
        tl.store(state + n_params, step)
        correction1 = 1.0 - tl.exp(step * _LOG_BETA1)
        correction2_sqrt = tl.sqrt(1.0 - tl.exp(step * _LOG_BETA2))
        first = tl.load(state + idx, mask=inside, other=0.0)
        second = tl.load(state + n_params + 1 + idx, mask=inside, other=0.0)
        first += (grads - first) * (1.0 - _BETA1)
        second = second * _BETA2 + (1.0 - _BETA2) * grads * grads
        tl.store(state + idx, first, mask=inside)
        tl.store(state + n_params + 1 + idx, second, mask=inside)
        denominator = tl.sqrt(second) / correction2_sqrt + _EPS
        new = params - lr / correction1 * first / denominator
    else:
        started = tl.load(state + 2 * n_params + 1) > 0.0
        buffer = tl.load(state + idx, mask=inside, other=0.0)
        buffer = tl.where(started, _MOMENTUM * buffer + grads, grads)
        tl.store(state + idx, buffer, mask=inside)
        tl.store(state + 2 * n_params + 1, 1.0)
        new = params - lr * buffer
    return new


@triton.jit
def take_step(params, grads, inside, opt_state, n_params, lr, loss, OPT: tl.constexpr):
    """The optimiser's step of the parameters in memory, undone when it leaves them or the loss
    non-finite (``learning_kernels._optimise``). Returns the parameters and whether it failed."""
    idx = tl.arange(0, grads.shape[0])
    good = tl.load(params + idx, mask=inside, other=0.0)
    new = optimizer_step(good, grads, inside, opt_state, n_params, lr, OPT)
    failed = finite(tl.sum(tl.where(inside, new, 0.0), 0) + loss) == 0
    new = tl.where(failed, good, new)
    tl.debug_barrier()  # every lane has read this step's parameters
    tl.store(params + idx, new, mask=inside)
    tl.debug_barrier()
    return new, failed


@triton.jit
def accept_move(u_accept, dz, i, nb, s_new, x_new, x_site, x, s, x_row, truth, slots_ok, last,
                rows, ok, running):  # fmt: skip
    """Accept ``x'`` with theta0 (``A = Z / max(Z, Z')`` in units of ``Z``, ``dz = Z'/Z - 1``),
    note the step in ``last`` (site, 1, Z'/Z, decision) and write the accepted flips
    (``kernels.write_flip``). ``running``: per lane the count of moves, the objective's log p~
    and the statistics (log p~, magnetisation, overlap). Returns the decisions and ``running``
    after the moves."""
    z_ratio = 1.0 + dz
    accept = ok & (u_accept * tl.maximum(z_ratio, 1.0) < 1.0)
    tl.store(last + rows * 4, i.to(tl.float64), mask=ok)
    tl.store(last + rows * 4 + 1, tl.zeros_like(dz) + 1.0, mask=ok)
    tl.store(last + rows * 4 + 2, z_ratio, mask=ok)
    tl.store(last + rows * 4 + 3, accept.to(tl.float64), mask=ok)
    write = slots_ok & accept[:, None]
    tl.store(x + x_row[:, None] + nb, x_new, mask=write)
    tl.store(s + x_row[:, None] + nb, s_new, mask=write)
    t_site = tl.load(truth + i, mask=accept, other=0.0)
    zero = tl.zeros_like(x_site)
    kk = tl.arange(0, s_new.shape[1])
    d_log_p = tl.where(accept, -slot(s_new, kk, 0), zero)
    count, log_p, stat_log_p, magnetisation, overlap = running
    return accept, (
        count + accept.to(tl.int64), log_p + d_log_p, stat_log_p + d_log_p,
        magnetisation + tl.where(accept, -2.0 * x_site, zero),
        overlap + tl.where(accept, -2.0 * x_site * t_site, zero),
    )  # fmt: skip


@triton.jit
def finish(n_accepted, stats, log_p_learn, halt, rows, ok, count, stat_log_p, magnetisation,
           overlap, log_p, taken, status):  # fmt: skip
    """What a learning chunk hands back: counts, statistics, the objective's log p~ and the
    halt flag (see ``halt_flag``)."""
    tl.store(n_accepted + rows, count, mask=ok)
    tl.store(stats + rows * 3, stat_log_p, mask=ok)
    tl.store(stats + rows * 3 + 1, magnetisation, mask=ok)
    tl.store(stats + rows * 3 + 2, overlap, mask=ok)
    tl.store(log_p_learn + rows, log_p, mask=ok)
    tl.store(halt, taken)
    tl.store(halt + 1, status)


def halt_flag(m: int, device) -> torch.Tensor:
    """``[steps taken, status]`` of a chunk, on the device: ``m`` and 0 unless a step stopped
    learning (status 1: it diverged, its move made; 2: log Z was not finite, nothing done).
    Filled on the device: a tensor built from a Python list would be a blocking copy."""
    halt = torch.zeros(2, dtype=torch.int64, device=device)
    halt[0] = m
    return halt


def check_contiguous(**tensors) -> None:
    for name, value in tensors.items():
        if not value.is_contiguous():
            raise ValueError(f"the device kernel needs a contiguous {name}.")
