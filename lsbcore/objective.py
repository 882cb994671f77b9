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

# exp() arguments are capped here: a proposal whose g exceeds every current g by e^600 has
# T < e^-600 either way, and the cap keeps the loss and its gradient finite.
MAX_LOG_SCALE = 600.0


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
    scaled_old = torch.exp((log_g_old - log_c.unsqueeze(1)).clamp(max=MAX_LOG_SCALE))
    scaled_new = torch.exp((log_g_new - log_c.unsqueeze(1)).clamp(max=MAX_LOG_SCALE))
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
