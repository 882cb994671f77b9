"""The base of every balancing function ``g`` (``g(t) = t g(1/t)``): evaluated in log space,
``log g(e^s)`` from log-ratios ``s``; learnable ones are torch modules with parameters."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class Balancing(nn.Module):
    """A balancing function. Subclasses define ``log_g(s)``; learnable ones have parameters."""

    name: str = "balancing"
    learnable: bool = False

    def log_g(self, s: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        return self.log_g(s)

    @torch.no_grad()
    def g(self, t) -> np.ndarray:
        """``g(t)`` on a grid of positive ``t`` (numpy in, numpy out), for plotting."""
        s = torch.log(torch.as_tensor(np.asarray(t, dtype=np.float64)))
        param = next(self.parameters(), None)
        if param is not None:
            s = s.to(param.device)
        return torch.exp(self.log_g(s)).cpu().numpy()

    def project_(self) -> None:
        """Put the parameters back into their allowed set after an optimiser step (projected
        gradient); nothing to do for functions whose every parameter value is allowed."""

    def frozen(self) -> Balancing:
        """Stop gradients through the parameters (sampling after burn-in)."""
        for p in self.parameters():
            p.requires_grad_(False)
        return self


__all__ = ["Balancing"]
