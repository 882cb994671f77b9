"""The base of every balancing function ``g`` (``g(t) = t g(1/t)``): evaluated in log space,
``log g(e^s)`` from log-ratios ``s``; learnable ones are torch modules with parameters."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from lsbcore.numerics import ADAM_BETA1, ADAM_BETA2, ADAM_EPS


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

    def learning_penalty(self, generator: torch.Generator, n: int) -> torch.Tensor | None:
        """A term a learning step adds to its loss (LSB 2' under the authors' monotonicity
        penalty); ``None``: nothing to add."""
        return None

    def regress(self, s: torch.Tensor, target: torch.Tensor, steps: int, lr: float) -> float:
        """``steps`` full-batch Adam steps on the squared error of ``log g(s)`` against
        ``target``, each followed by ``project_()``; returns the final max absolute error.

        Adam is written out (as torch.optim.Adam computes it): the first torch.optim optimiser
        in a process imports torch._dynamo, about 2 s that every new sampler would pay."""
        params = list(self.parameters())
        first = [torch.zeros_like(p) for p in params]
        second = [torch.zeros_like(p) for p in params]
        for step in range(1, steps + 1):
            loss = (self.log_g(s) - target).pow(2).mean()
            grads = torch.autograd.grad(loss, params)
            with torch.no_grad():
                correction = math.sqrt(1.0 - ADAM_BETA2**step)
                step_size = -lr / (1 - ADAM_BETA1**step)
                for p, g, m, v in zip(params, grads, first, second, strict=True):
                    m.lerp_(g, 1.0 - ADAM_BETA1)
                    v.mul_(ADAM_BETA2).addcmul_(g, g, value=1.0 - ADAM_BETA2)
                    p.addcdiv_(m, (v.sqrt() / correction).add_(ADAM_EPS), value=step_size)
            self.project_()
        with torch.no_grad():
            return float((self.log_g(s) - target).abs().max())

    def frozen(self) -> Balancing:
        """Stop gradients through the parameters (sampling after burn-in)."""
        for p in self.parameters():
            p.requires_grad_(False)
        return self


__all__ = ["Balancing"]
