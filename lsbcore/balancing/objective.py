"""The LSB learning objective: the upper bound "case (b)" of spec section 5 (Algorithm 1).

Per chain ``b`` at state ``x`` with ``x'`` drawn from ``Q_theta0`` and ``x~`` = ``x`` with one
uniformly chosen site flipped:

    L = mean_b [ w_b T(x'|x) (log T(x'|x) - log p~(x'))  +  M~_b (eta M~_b - p^_b (log eta + 1)) ]

with ``T(x'|x) = A Q = g(t_i) / max(Z(x), Z(x'))`` (the balancing property gives
``A = min(1, Z(x)/Z(x'))``), ``M~ = 1 - T(x~|x)``, ``p^_b = exp(log p~(x_b) - max log p~)``,
``w_b = p^_b / Q_theta0(x'_b | x_b)`` and ``eta = softplus(eta_raw)``.

Only ``Z(x)`` needs every site (the caller passes ``log Z(x)``); ``Z(x')`` and ``Z(x~)`` differ
from it in one neighbourhood.
Writing ``max(Z, Z') = Z + relu(Z' - Z)`` avoids subtracting nearly equal sums.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lsbcore.numerics import MAX_LOG_G  # exp() arguments are capped here (see numerics)

# How the objective's log p~(x') is computed: "exact", or as the authors' code computes it
OBJECTIVES = ("exact", "authors")


def authors_log_ratio(s, x, h):
    """``log p~(x') - log p~(x)`` as the authors' learning objective computes it.

    Their code adds ``-2 h_i x_i - 2 sum_j J_ij x_j`` for a flip of site ``i``: the exact
    ``s_i = -2 x_i (h_i + sum_j J_ij x_j)`` without ``x_i`` on the coupling term, so it is
    wrong (by up to 16 lambda on a lattice) wherever ``x_i = -1``. From ``s_i`` alone:
    ``sum_j J_ij x_j = -x_i s_i / 2 - h_i`` (``x_i = 1 / x_i``), which gives
    ``x_i s_i + 2 h_i (1 - x_i)``. Plain arithmetic, so tensors and compiled kernels share it.
    """
    return x * s + 2.0 * h * (1.0 - x)


def log_transition(
    log_c: torch.Tensor,
    z: torch.Tensor,
    log_g_old: torch.Tensor,
    log_g_new: torch.Tensor,
    unique: torch.Tensor,
) -> torch.Tensor:
    """``log T(x'|x)`` for flips whose neighbourhoods' ``log g`` go ``old -> new`` ``[..., B, K]``.

    ``z`` is ``Z(x) e^-log_c`` ``[B]``; slot 0 is the flipped site; ``unique`` masks repeated
    slots. Leading dimensions evaluate several flips at once.
    """
    scaled_old = torch.exp((log_g_old - log_c.unsqueeze(1)).clamp(max=MAX_LOG_G))
    scaled_new = torch.exp((log_g_new - log_c.unsqueeze(1)).clamp(max=MAX_LOG_G))
    dz = ((scaled_new - scaled_old) * unique).sum(-1)
    return log_g_old[..., 0] - log_c - torch.log(z + F.relu(dz))


def lsb_loss(
    log_z: torch.Tensor,
    log_g_flips: torch.Tensor,
    unique: torch.Tensor,
    unique_uniform: torch.Tensor,
    log_p: torch.Tensor,
    s_flipped: torch.Tensor,
    log_q0: torch.Tensor,
    eta_raw: torch.Tensor,
) -> torch.Tensor:
    """The scalar loss; differentiable in the balancing parameters and ``eta_raw``.

    Args:
        log_z: ``log Z_theta(x)`` per chain ``[B]``, with gradient.
        log_g_flips: ``log g_theta`` of the neighbourhoods ``[4, B, K]``, with gradient: the
            proposed flip ``x'`` before and after, then the uniform flip ``x~`` before and after.
        unique, unique_uniform: masks of repeated slots of the two neighbourhoods ``[B, K]``.
        log_p: ``log p~(x)`` ``[B]``; s_flipped: ``s_i(x)`` of the proposed site ``[B]``;
        log_q0: ``log Q_theta0(x'|x)`` ``[B]`` (no gradient).
    """
    log_c = log_z.detach()
    z = torch.exp(log_z - log_c)  # 1, carrying the gradient of log Z
    # both flips at once: [2, B] of log T(x'|x) and log T(x~|x)
    log_ts = log_transition(
        log_c, z, log_g_flips[0::2], log_g_flips[1::2], torch.stack([unique, unique_uniform])
    )
    log_t, log_t_uniform = log_ts[0], log_ts[1]

    with torch.no_grad():
        log_p_hat = log_p - log_p.max()
        p_hat = torch.exp(log_p_hat)
        w = torch.exp(log_p_hat - log_q0)  # importance weight p^ / Q_theta0
        log_p_new = log_p + s_flipped  # log p~(x') = log p~(x) + s_i
    t = torch.exp(log_t)
    m = -torch.expm1(log_t_uniform)  # M~ = 1 - T(x~|x)
    eta = F.softplus(eta_raw)
    terms = w * t * (log_t - log_p_new) + m * (eta * m - p_hat * (torch.log(eta) + 1.0))
    return terms.mean()


def lsb_loss_and_grads(
    log_z: torch.Tensor,
    log_g_flips: torch.Tensor,
    unique: torch.Tensor,
    unique_uniform: torch.Tensor,
    log_p: torch.Tensor,
    s_flipped: torch.Tensor,
    log_q0: torch.Tensor,
    eta_raw: torch.Tensor,
):
    """``lsb_loss`` (same arguments) and its gradient, by hand: no autograd graph.

    Returns ``(loss, d loss / d log_z [B], d loss / d log_g_flips [4, B, K], d loss / d eta_raw
    [1], dz [2, B])``, where ``dz = (Z(x') - Z(x)) / Z(x)`` for the proposed and the uniform
    flip (the proposal's acceptance reuses it). The caller chains the first two into the
    balancing parameters. Every value and gradient equals autograd through ``lsb_loss`` to
    rounding (tests compare them); the step is a few dozen small ops instead of a graph.
    """
    with torch.no_grad():
        n = log_z.shape[0]
        log_z, log_g_flips, eta_raw = log_z.detach(), log_g_flips.detach(), eta_raw.detach()
        masks = torch.stack([unique, unique_uniform])  # [2, B, K]
        # as in log_transition with log_c = log Z and z = 1: [2 flips, old/new, B, K]
        shifted = (log_g_flips - log_z.unsqueeze(1)).view(2, 2, n, -1)
        below_cap = shifted <= MAX_LOG_G  # clamp passes the gradient only here
        scaled = torch.exp(shifted.clamp(max=MAX_LOG_G))
        dz = ((scaled[:, 1] - scaled[:, 0]) * masks).sum(-1)  # [2, B]
        denominator = 1.0 + F.relu(dz)  # max(Z, Z') / Z
        log_ts = shifted[:, 0, :, 0] - torch.log(denominator)  # log T(x'|x), log T(x~|x)
        log_t, log_t_uniform = log_ts[0], log_ts[1]

        log_p_hat = log_p - log_p.max()
        p_hat = torch.exp(log_p_hat)
        w = torch.exp(log_p_hat - log_q0)
        log_p_new = log_p + s_flipped
        t = torch.exp(log_t)
        m = -torch.expm1(log_t_uniform)
        eta = F.softplus(eta_raw)
        log_eta_1 = torch.log(eta) + 1.0
        log_ratio = log_t - log_p_new
        terms = w * t * log_ratio + m * (eta * m - p_hat * log_eta_1)
        loss = terms.mean()

        # backward: d terms / d log T and d log T~, each over B for the mean. d M~ / d log T~
        # is -(1 - M~) (= -T~ but rounded as autograd's expm1 backward, which keeps the two equal)
        grad_log_ts = (
            torch.stack(
                [w * t * (log_ratio + 1.0), -(2.0 * eta * m - p_hat * log_eta_1) * (1.0 - m)]
            )
            / n
        )  # [2, B]
        grad_dz = -grad_log_ts / denominator  # through log max(Z, Z') = log Z + log(1 + relu)
        grad_log_z = grad_dz.sum(0)  # Z carries log Z's gradient (z = 1)
        grad_dz = grad_dz * (dz > 0)
        grad_flips = scaled * below_cap * (grad_dz.unsqueeze(-1) * masks).unsqueeze(1)
        grad_flips[:, 0].neg_()  # dz = sum(new - old)
        grad_flips[:, 0, :, 0] += grad_log_ts  # log g(t_i) of each flipped site, directly
        # d eta / d eta_raw = sigmoid, as torch's softplus (linear above its threshold of 20)
        slope = torch.where(eta_raw > 20.0, torch.ones_like(eta_raw), torch.sigmoid(eta_raw))
        grad_eta_raw = (m * (m - p_hat / eta)).sum().view(1) / n * slope
        return loss, grad_log_z, grad_flips.view(4, n, -1), grad_eta_raw, dz
