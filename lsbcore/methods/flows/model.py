"""The flow-augmented model of a target on ``{-1, +1}^n`` (Jaini, Nielsen and Welling 2021).

Three spaces and two learned maps:

    z in R^n  --T (latent flow)-->  v in R^n  --sign-->  x in {-1, +1}^n
    N(0, I)                          q(v)                 p(x)

- **The dequantiser** ``q(w | x)``, a conditional coupling flow (zuko's RealNVP with ``x`` as
  context), lifts a discrete state into its orthant: ``v = x * exp(w)``, so ``x = sign(v)`` and
  ``w = log |v|``. The continuous embedding of the target is

      q(v) = p~(x) q(w | x) / |dv/dw|,        |dv/dw| = exp(sum_i w_i),

  whose mass over the orthant of ``x`` is ``p~(x)`` exactly (the surjection of the paper's
  eq. 2-4, with orthants for the paper's unit cells: no boundary inside the space).
- **The latent flow** ``T``, an unconditional coupling flow, maps ``z ~ N(0, I)`` to ``v``. Its
  own density ``r(v) = N(T^-1 v) |det dT^-1/dv|`` defines what the flow proposes of the discrete
  space, ``r(x) = integral over the orthant of r(v) dv`` (intractable: estimated below).
- **The latent target** (the paper's eq. 5): ``p~(z) = q(T(z)) |det dT/dz|``, the density a chain
  in ``z`` samples in the paper's sampler (``flow-latent``).

Why orthants and ``exp``: the paper rounds ``v`` into unit cells; for two values per site the
sign is the natural surjection, every point of ``R^n`` (off the axes) belongs to one state, and
``exp`` keeps the dequantiser's output unconstrained.

The unbiased estimate of ``r(x)`` (``log_r_estimate``) is importance sampling over the
dequantiser: ``r(x) = E_{w ~ q(.|x)} [r(x * exp w) exp(sum w) / q(w | x)]``, with ``K`` draws.

Everything is batched over rows ``[B, n]``; the flows compute in the module's dtype (float32 to
train, float64 where exactness is tested), the target in float64.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import torch
import zuko
from torch import nn

from lsbcore.checks import integer
from lsbcore.weights_file import load_model

LOG_2PI = math.log(2.0 * math.pi)
#: Coupling layers and hidden width bounds of either flow.
MAX_TRANSFORMS = 12
MAX_HIDDEN = 1024
#: Largest flow weights file read (a 32 x 32 target's flows are a few MB).
MAX_WEIGHTS_BYTES = 64 << 20
#: The smallest |v| a state keeps: v = 0 has no sign (probability zero; guards log 0).
TINY = 1e-30


def log_normal(z: torch.Tensor) -> torch.Tensor:
    """``log N(z; 0, I)`` per row of ``z [B, n]``."""
    return -0.5 * (z.square().sum(-1) + z.shape[-1] * LOG_2PI)


def logmeanexp(values: torch.Tensor, dim: int) -> torch.Tensor:
    """``log mean exp`` along ``dim``, stable in log space."""
    return torch.logsumexp(values, dim) - math.log(values.shape[dim])


def split(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x = sign(v)`` (+1 at ``v = 0``) and ``w = log |v|`` of ``v [B, n]``."""
    x = torch.where(v < 0, -1.0, 1.0).to(v)
    return x, torch.log(v.abs().clamp(min=TINY))


def embed(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``v = x * exp(w)``: the point of ``x``'s orthant that ``w`` names."""
    return x * torch.exp(w)


class FlowModel(nn.Module):
    """The dequantiser and the latent flow for ``n_sites`` binary sites (module docstring).

    ``transforms`` coupling layers per flow with two hidden layers of ``hidden`` units;
    ``seed`` fixes the initial weights (the global RNG is left as it was).
    """

    def __init__(self, n_sites: int, transforms: int = 4, hidden: int = 64, seed: int = 0):
        super().__init__()
        self.n_sites = integer(n_sites, "n_sites", 2, 1 << 16)
        self.transforms = integer(transforms, "transforms", 1, MAX_TRANSFORMS)
        self.hidden = integer(hidden, "hidden", 2, MAX_HIDDEN)
        self.seed = integer(seed, "seed", 0, 2**63 - 1)
        n, layers = self.n_sites, (self.hidden, self.hidden)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.dequantiser = zuko.flows.RealNVP(n, context=n, transforms=transforms,
                                                  hidden_features=layers)  # fmt: skip
            self.latent = zuko.flows.RealNVP(n, transforms=transforms, hidden_features=layers)

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def normal(self, rows: int, generator: torch.Generator) -> torch.Tensor:
        """``[rows, n]`` standard normal draws from ``generator``, in the model's dtype."""
        z = torch.randn(rows, self.n_sites, generator=generator, device=self.device,
                        dtype=torch.float64)  # fmt: skip
        return z.to(self.dtype)

    # ----------------------------------------------------------------- the latent flow
    def generate(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``v = T(z)``, ``log |det dT/dz|`` and ``log r(v) = log N(z) - log |det dT/dz|``."""
        v, ladj = self.latent.transform().inv.call_and_ladj(z)
        return v, ladj, log_normal(z) - ladj

    def to_latent(self, v: torch.Tensor) -> torch.Tensor:
        """``z = T^-1(v)``."""
        return self.latent.transform()(v)

    def log_r(self, v: torch.Tensor) -> torch.Tensor:
        """The latent flow's density ``log r(v)`` at given points (the inverse direction)."""
        z, ladj = self.latent.transform().call_and_ladj(v)
        return log_normal(z) + ladj

    def log_r_joint(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """``log r(x, w) = log r(x * exp w) + sum w``: the flow's density in ``w``-coordinates."""
        return self.log_r(embed(x, w)) + w.sum(-1)

    # ----------------------------------------------------------------- the dequantiser
    def dequantise(self, x: torch.Tensor, generator: torch.Generator):
        """``w ~ q(. | x)`` for each row of ``x [B, n]`` (+-1, the model's dtype) and
        ``log q(w | x)``."""
        eps = self.normal(x.shape[0], generator)
        w, ladj = self.dequantiser.transform(x).inv.call_and_ladj(eps)
        return w, log_normal(eps) - ladj

    def log_q(self, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``log q(w | x)`` at given ``w``."""
        eps, ladj = self.dequantiser.transform(x).call_and_ladj(w)
        return log_normal(eps) + ladj

    # ----------------------------------------------------------------- the two uses
    def latent_target(self, z: torch.Tensor, log_prob):
        """The paper's eq. 5 at ``z [B, n]``: ``log p~(z) = log p~(x) + log q(w | x) - sum w +
        log |det dT/dz|`` with ``v = T(z)``, ``x = sign v``, ``w = log |v|``. ``log_prob`` maps
        float64 states ``[B, n]`` to ``log p~`` ``[B]``. Returns ``(log p~(z), x, log p~(x))``,
        ``x`` in float64."""
        v, ladj, _ = self.generate(z)
        x, w = split(v)
        x64 = x.double()
        log_p = log_prob(x64)
        log_pz = log_p + (self.log_q(w, x) - w.sum(-1) + ladj).double()
        return log_pz, x64, log_p

    def _importance_terms(self, x: torch.Tensor, draws: int, generator) -> torch.Tensor:
        """``log r(x, w_k) - log q(w_k | x)`` for ``draws`` fresh ``w_k ~ q(. | x)``, ``[draws,
        B]``: all draws in one pass of each flow (rows ``x`` repeated), not one pass per draw."""
        rows = x.shape[0]
        x_rep = x.repeat(draws, 1)  # [draws * B, n], draw k in rows k B .. (k + 1) B - 1
        w, log_q = self.dequantise(x_rep, generator)
        return (self.log_r_joint(x_rep, w) - log_q).view(draws, rows)

    def log_r_estimate(self, x: torch.Tensor, draws: int, generator: torch.Generator):
        """An unbiased estimate of the flow's discrete mass ``r(x)``, in log space, ``[B]``:
        ``log mean_k r(x, w_k) / q(w_k | x)``, ``w_k ~ q(. | x)`` (``x`` in the model's
        dtype)."""
        draws = integer(draws, "draws", 1, 4096)
        return logmeanexp(self._importance_terms(x, draws, generator), 0)

    def propose(self, rows: int, draws: int, generator: torch.Generator):
        """``rows`` states from the flow, ``x = sign(T(z))``, each with the unbiased estimate of
        ``log r(x)`` that the pseudo-marginal test needs: the ``w`` that came with the draw and
        ``draws - 1`` fresh ones from the dequantiser (``lsbcore.methods.flows.exact_sampler``)."""
        draws = integer(draws, "draws", 1, 4096)
        v, _, log_r_v = self.generate(self.normal(rows, generator))
        x, w = split(v)
        first = (log_r_v + w.sum(-1) - self.log_q(w, x)).unsqueeze(0)  # [1, B]
        if draws == 1:
            return x, first[0]
        terms = torch.cat([first, self._importance_terms(x, draws - 1, generator)])
        return x, logmeanexp(terms, 0)

    # ----------------------------------------------------------------- files
    def save(self, path=None, info: dict | None = None) -> bytes:
        """The weights and shape as bytes (also written to ``path`` when given)."""
        buffer = io.BytesIO()
        shape = dict(n_sites=self.n_sites, transforms=self.transforms, hidden=self.hidden,
                     seed=self.seed)  # fmt: skip
        state = {k: v.detach().cpu() for k, v in self.state_dict().items()}
        torch.save({"shape": shape, "state": state, "info": dict(info or {})}, buffer)
        data = buffer.getvalue()
        if path is not None:
            Path(path).write_bytes(data)
        return data


def parameter_count(n_sites: int, transforms: int = 4, hidden: int = 64, seed: int = 0) -> int:
    """The weights of ``FlowModel(n_sites, transforms, hidden)``, counted without building it.

    Each flow is ``transforms`` couplings whose masks alternate: coupling ``i`` reads ``a``
    sites (every other one, from site ``i % 2``) plus the context (the dequantiser's ``n``) and
    outputs a shift and a scale for the ``n - a`` others, through two hidden layers.
    """
    n = integer(n_sites, "n_sites", 2, 1 << 16)
    integer(transforms, "transforms", 1, MAX_TRANSFORMS)
    h = integer(hidden, "hidden", 2, MAX_HIDDEN)
    integer(seed, "seed", 0, 2**63 - 1)
    total = 0
    for context in (n, 0):  # the dequantiser, then the latent flow
        for i in range(transforms):
            read = (n - i % 2 + 1) // 2  # sites j < n with j % 2 == i % 2
            total += (read + context + 1) * h + (h + 1) * h + (h + 1) * 2 * (n - read)
    return total


def load_flow(source) -> FlowModel:
    """A ``FlowModel`` from bytes or a file written by ``FlowModel.save``: only tensors and
    plain values are read (``weights_only``), the shape is checked against the file's size
    before the model is built, and every weight must be finite; anything else is refused in a
    sentence (``lsbcore.weights_file.load_model``)."""
    return load_model(
        source,
        max_bytes=MAX_WEIGHTS_BYTES,
        what="flow weights",
        kind="a flow's weights file",
        build=FlowModel,
        parameter_count=parameter_count,
    )
