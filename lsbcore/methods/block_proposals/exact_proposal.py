"""Exact block Gibbs on the same tiles: the proposal that *is* the block conditional.

``ExactBlockProposal`` answers the proposal's questions (``sample``, ``log_prob``,
``all_log_probs``) from the enumerated conditional (``GridMotif.exact_log_probs``), so
``neural-block`` with ``weights="exact"`` accepts every move: it is block Gibbs on ``k x k``
tiles, the baseline a learned proposal tries to match at a fraction of its cost (scoring all
``2^(k^2)`` states of every tile: 65,536 per 4 x 4 tile).
"""

from __future__ import annotations

import torch
from torch import nn

from lsbcore.methods.block_proposals.motif import GridMotif


class ExactBlockProposal(nn.Module):
    """``q(x_B | c) = p(x_B | c)`` by enumeration, for ``k x k`` blocks."""

    def __init__(self, k: int):
        super().__init__()
        self.motif = GridMotif(k)
        self.k = self.motif.k
        self.info = {"kind": "exact block conditional (enumeration)"}

    def all_log_probs(self, c: torch.Tensor) -> torch.Tensor:
        return self.motif.exact_log_probs(c)

    def log_prob(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        log_p = self.motif.exact_log_probs(c)
        return log_p.gather(1, self.motif.codes(x).unsqueeze(1)).squeeze(1)

    def sample(self, c: torch.Tensor, generator: torch.Generator):
        """One exact draw per row of ``c`` and its ``log p``, by inverse CDF on one uniform per
        row (chunked as ``exact_log_probs`` is)."""
        log_p = self.motif.exact_log_probs(c)  # [N, M]
        index = self._draw(log_p, generator)
        x = self.motif.states.to(c.device)[index.squeeze(1)]
        return x, log_p.gather(1, index).squeeze(1)

    def propose(self, c: torch.Tensor, x: torch.Tensor, generator: torch.Generator):
        """A draw ``y`` and ``log p`` of ``y`` and of the current states ``x``, as
        ``BlockProposal.propose``: the conditional enumerated once for all three."""
        log_p = self.motif.exact_log_probs(c)  # [N, M]
        index = self._draw(log_p, generator)
        y = self.motif.states.to(c.device)[index.squeeze(1)]
        log_p_x = log_p.gather(1, self.motif.codes(x).unsqueeze(1))
        return y, log_p.gather(1, index).squeeze(1), log_p_x.squeeze(1)

    def _draw(self, log_p: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Inverse CDF on one uniform per row: the drawn states' rows of ``states``, ``[N, 1]``."""
        u = torch.rand(len(log_p), 1, generator=generator, dtype=torch.float64, device=log_p.device)
        cdf = log_p.exp().cumsum(1)
        return torch.searchsorted(cdf, u * cdf[:, -1:]).clamp(max=self.motif.n_states - 1)
