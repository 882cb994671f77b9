"""Which chains the paper's Q1 restarts in a learning step (spec 5, ``pi``), given that one does.

Each chain restarts with probability ``pi`` per learning step, independently; the learners draw
the wait until any chain does once (a geometric), and on that step ask here which ones: the
first, ``J``, has ``P(J = j | J <= B) ~ (1 - pi)^j pi`` (a truncated geometric) and every chain
after it restarts independently with ``pi``.
"""

from __future__ import annotations

import math

import torch


def restarting_chains(restart_prob: float, u: torch.Tensor) -> torch.Tensor:
    """``[B]`` bool: the chains that restart, from ``B + 1`` uniforms ``u`` (``u[0]`` picks
    ``J``, ``u[j + 1]`` decides chain ``j`` after it)."""
    pi, b = restart_prob, u.shape[0] - 1
    if pi >= 1:
        first = 0
    else:
        none = math.exp(b * math.log1p(-pi))  # (1 - pi)^B
        first = min(b - 1, math.floor(math.log1p(-float(u[0]) * (1 - none)) / math.log1p(-pi)))
    restart = torch.zeros(b, dtype=torch.bool, device=u.device)
    restart[first] = True
    restart[first + 1 :] = u[first + 2 :] < pi
    return restart
