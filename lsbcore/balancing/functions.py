"""Balancing functions ``g`` with ``g(t) = t * g(1/t)``, evaluated in log space (spec 2, 4).

Every function maps log-ratios ``s = log t`` to ``log g(t)``. The four fixed ones are Zanella's;
LSB 1 is a softmax mixture of them; LSB 2 symmetrises a small network ``h``:
``g(t) = (h(t) + t * h(1/t)) / 2``. Both learned forms are balanced for every parameter value.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lsbcore.balancing.base import Balancing
from lsbcore.balancing.monotone import MonotoneBalancing
from lsbcore.checks import integer

FIXED = ("barker", "sqrt", "min", "max")
#: LSB 2''s starts: near sqrt(t) (the product's) or exactly max(1, t) (the authors' UAI code).
MONOTONE_INITS = ("sqrt", "max")
# LSB 2 inputs up to this many values go through the network as written; larger ones (whole
# lattices) through its piecewise-linear form, which avoids a [..., hidden] intermediate.
DENSE_LIMIT = 2048
FORMULAS = {
    "barker": "t / (1 + t)",
    "sqrt": "sqrt(t)",
    "min": "min(1, t)",
    "max": "max(1, t)",
}


def log_g_fixed(name: str, s: torch.Tensor) -> torch.Tensor:
    """``log g(e^s)`` for one of Zanella's balancing functions."""
    if name == "barker":
        return F.logsigmoid(s)
    if name == "sqrt":
        return 0.5 * s
    if name == "min":
        return s.clamp(max=0.0)
    if name == "max":
        return s.clamp(min=0.0)
    raise ValueError(f"unknown balancing function {name!r}; choose one of {FIXED}.")


class FixedBalancing(Balancing):
    def __init__(self, name: str):
        super().__init__()
        if name not in FIXED:
            raise ValueError(f"unknown balancing function {name!r}; choose one of {FIXED}.")
        self.name = name

    def log_g(self, s: torch.Tensor) -> torch.Tensor:
        return log_g_fixed(self.name, s)


class PinnedZeroBalancing(Balancing):
    """``inner`` with ``g(0)`` pinned to 0 and every ``g(t)``, ``t > 0``, unchanged: the pair
    (``inner``, this) differs in ``g(0)`` only, which is what appendix G's remark is about. A
    flip into zero mass (``t = 0``, ``s = -inf``) gets ``log g = -inf``: never proposed."""

    def __init__(self, inner: Balancing):
        super().__init__()
        self.inner = inner
        self.name = f"{inner.name}-g0-zero"

    def log_g(self, s: torch.Tensor) -> torch.Tensor:
        return torch.where(torch.isneginf(s), -math.inf, self.inner.log_g(s))

    def g0(self) -> float:
        return 0.0


class MixtureBalancing(Balancing):
    """LSB 1: ``g = sum_k softmax(theta)_k g_k`` over (barker, sqrt, min, max), theta from 0."""

    name = "lsb1"
    learnable = True
    components = FIXED

    def __init__(self, theta=None):
        super().__init__()
        theta = torch.zeros(len(FIXED), dtype=torch.float64) if theta is None else theta
        self.theta = nn.Parameter(torch.as_tensor(theta, dtype=torch.float64).clone())

    def log_weights(self) -> torch.Tensor:
        return torch.log_softmax(self.theta, 0)

    def weights(self) -> np.ndarray:
        """Softmax weights in the order (barker, sqrt, min, max)."""
        return torch.softmax(self.theta.detach(), 0).cpu().numpy()

    def component_log_g(self, s: torch.Tensor) -> torch.Tensor:
        """``log g_k(s)`` for the four components, stacked on a new last axis ``[..., 4]``."""
        return torch.stack([log_g_fixed(k, s) for k in FIXED], -1)

    @torch.no_grad()
    def log_g_and_responsibilities(self, s: torch.Tensor):
        """``log g(s)`` and its gradient in the log-weights, ``softmax_k(log w_k + log g_k(s))``
        (``[..., 4]``), without autograd: the learning step chains gradients by hand."""
        terms = self.component_log_g(s) + self.log_weights().detach()
        return torch.logsumexp(terms, -1), torch.softmax(terms, -1)

    @torch.no_grad()
    def component_log_sums(self, s: torch.Tensor):
        """``log S_k = log sum_i g_k(t_i)`` per row of ``s`` (``[B, D]`` -> ``[B, 4]``), and the
        terms ``g_k(t_i) / g_k(t_max)`` (``[B, 4, D]``, each component's largest term is 1).

        Every ``g_k`` increases with ``s``, so each component peaks at the row's largest ``s``:
        one max instead of four. Barker is ``min(1, t) / (1 + e^-|s|)``: the same values as
        ``exp(logsigmoid(s))``, without the slow logsigmoid kernel.
        """
        s_max = s.amax(1, keepdim=True)  # [B, 1]
        top = self.component_log_g(s_max)  # [B, 1, 4]: log g_k(t_max)
        scaled = torch.empty(s.shape[0], len(FIXED), s.shape[1], dtype=s.dtype, device=s.device)
        barker, sqrt, low, high = scaled.unbind(1)
        torch.exp(0.5 * s - top[..., 1], out=sqrt)
        torch.exp(s.clamp(max=0.0) - top[..., 2], out=low)
        torch.exp(s.clamp(min=0.0) - top[..., 3], out=high)
        # barker / barker(t_max) = min(1, t) / min(1, t_max) * (1 + e^-|s_max|) / (1 + e^-|s|)
        torch.exp(-s.abs(), out=barker)
        barker.add_(1.0).reciprocal_().mul_(low).mul_(1.0 + torch.exp(-s_max.abs()))
        log_sums = top.squeeze(1) + torch.log(scaled.sum(2))
        return log_sums, scaled

    def log_g(self, s: torch.Tensor) -> torch.Tensor:
        # log g = logsumexp_k(log w_k + log g_k(s)). Large inputs are written out over the four
        # components: a reduction over a trailing axis of 4 is far slower than elementwise ops.
        log_w = self.log_weights()
        if s.numel() <= DENSE_LIMIT:
            return torch.logsumexp(self.component_log_g(s) + log_w, -1)
        terms = [log_g_fixed(k, s) + log_w[n] for n, k in enumerate(FIXED)]
        top = torch.maximum(torch.maximum(terms[0], terms[1]), torch.maximum(terms[2], terms[3]))
        top_detached = top.detach()
        total = sum(torch.exp(term - top_detached) for term in terms)
        return top_detached + torch.log(total)


def _log_softplus(z: torch.Tensor) -> torch.Tensor:
    """``log(softplus(z))`` without underflow: ``softplus(z) ~ e^z`` for very negative ``z``."""
    safe = torch.log(F.softplus(z.clamp(min=-30.0)))
    # log softplus(z) < z everywhere, so the minimum picks z exactly where z < -30: the same as
    # a where(), without that op's slow float64 kernel
    return torch.minimum(z, safe)


class NetworkBalancing(Balancing):
    """LSB 2: ``g(t) = (h(t) + t h(1/t)) / 2`` with ``h`` a one-hidden-layer ReLU network.

    ``h`` reads ``sigmoid(s) - 1/2`` (that is ``t/(1+t) - 1/2``, bounded) and ends in a softplus,
    so ``h > 0``. In log space: ``log g = logaddexp(log h(s), s + log h(-s)) - log 2``.
    """

    name = "lsb2"
    learnable = True

    def __init__(self, hidden: int = 10, generator: torch.Generator | None = None):
        super().__init__()
        hidden = integer(hidden, "hidden", 1, 256)
        self.hidden = hidden
        self.layer1 = nn.Linear(1, hidden, dtype=torch.float64)
        self.layer2 = nn.Linear(hidden, 1, dtype=torch.float64)
        if generator is not None:
            with torch.no_grad():
                bound1, bound2 = 1.0, 1.0 / math.sqrt(hidden)
                for p, bound in (
                    (self.layer1.weight, bound1),
                    (self.layer1.bias, bound1),
                    (self.layer2.weight, bound2),
                    (self.layer2.bias, bound2),
                ):
                    p.copy_(
                        (torch.rand(p.shape, generator=generator, dtype=torch.float64) * 2 - 1)
                        * bound
                    )

    def pieces(self) -> tuple[list[float], torch.Tensor, torch.Tensor]:
        """The network's pre-softplus output ``z(u)`` is piecewise linear in the scalar input
        ``u``: ``z = slope[k] * u + intercept[k]`` on the ``k``-th interval between the hidden
        units' breakpoints ``-b1/w1``. Only breakpoints inside the input range (-1/2, 1/2)
        matter. Returns ``(breakpoints, slope, intercept)``; slope and intercept carry gradients
        (ReLU's derivative is the interval's active set), so a whole lattice is evaluated with a
        few comparisons and two lookups instead of a ``[..., hidden]`` tensor.
        """
        w1 = self.layer1.weight.view(-1)
        b1 = self.layer1.bias
        w2 = self.layer2.weight.view(-1)
        with torch.no_grad():
            cuts = -b1 / torch.where(w1 == 0, torch.ones_like(w1), w1)
            inside = (w1 != 0) & (cuts > -0.5) & (cuts < 0.5)
            breakpoints = sorted(cuts[inside].tolist())
            edges = [-0.5, *breakpoints, 0.5]
            probes = torch.tensor(
                [0.5 * (a + b) for a, b in zip(edges[:-1], edges[1:], strict=True)],
                dtype=w1.dtype,
                device=w1.device,
            )
            active = (probes.unsqueeze(1) * w1 + b1 > 0).to(w1.dtype)  # [pieces, H]
        slope = active @ (w2 * w1)
        intercept = active @ (w2 * b1) + self.layer2.bias
        return breakpoints, slope, intercept

    def log_h(self, s: torch.Tensor, pieces=None) -> torch.Tensor:
        u = torch.sigmoid(s) - 0.5
        if pieces is None:  # small inputs: the network as written
            z = self.layer2(torch.relu(self.layer1(u.unsqueeze(-1)))).squeeze(-1)
        else:  # whole lattices: the same function, piecewise linear (see pieces)
            breakpoints, slope, intercept = pieces
            with torch.no_grad():
                k = torch.zeros(u.shape, dtype=torch.long, device=u.device)
                for cut in breakpoints:
                    k += u > cut
                k = k.view(-1)
            z = slope.index_select(0, k).view_as(u) * u + intercept.index_select(0, k).view_as(u)
        return _log_softplus(z)

    def log_g(self, s: torch.Tensor) -> torch.Tensor:
        pieces = self.pieces() if s.numel() > DENSE_LIMIT else None
        return torch.logaddexp(self.log_h(s, pieces), s + self.log_h(-s, pieces)) - math.log(2.0)

    def fit_sqrt(self, steps: int = 150, lr: float = 0.1, s_max: float = 4.0) -> float:
        """Regress ``log g`` onto ``log sqrt(t) = s/2`` over ``s in [-s_max, s_max]``.

        The paper starts LSB 2 near sqrt(t) (its authors regress on ``t ~ U(0, 1)``, which
        weights ``|s| < 3``; by the balancing property an error at ``s`` equals the error at
        ``-s``). ``h`` reads a bounded input, so ``g`` cannot follow sqrt for ever: the working
        range is ``|s| <= 4`` (``t`` from 0.018 to 55), where a few hundred full-batch Adam
        steps reach within ~0.1 in ``log g``. Deterministic given the initial weights, and well
        under a second. Returns the final max absolute error in ``log g`` on the range.
        """
        s = torch.linspace(-s_max, s_max, 161, dtype=torch.float64)
        target = 0.5 * s
        return self.regress(s, target, steps, lr)


# The fit to sqrt is deterministic given the shape and the seed: each (shape, seed) is fitted
# once per process and every later sampler starts from a copy (a new dashboard session builds
# its samplers without a second of regression first).
_SQRT_FITS: dict[tuple, dict[str, torch.Tensor]] = {}
MAX_SQRT_FITS = 256  # a few kB each


def _fitted_sqrt(function: Balancing, key: tuple) -> Balancing:
    """``function`` fitted to sqrt (``fit_sqrt``), from the memo when this ``key`` was fitted."""
    if key not in _SQRT_FITS:
        function.fit_sqrt()
        if len(_SQRT_FITS) >= MAX_SQRT_FITS:  # a visitor trying many seeds: forget the oldest
            del _SQRT_FITS[next(iter(_SQRT_FITS))]
        _SQRT_FITS[key] = {k: v.detach().clone() for k, v in function.state_dict().items()}
    else:
        function.load_state_dict(_SQRT_FITS[key])
    return function


def make_balancing(
    name: str,
    hidden: int = 10,
    seed: int = 0,
    groups: int = 20,
    units: int = 20,
    init: str = "sqrt",
    monotonicity: str = "projection",
    penalty: float = 1.0,
) -> Balancing:
    """A fresh balancing function: a fixed one, LSB 1 at equal weights, LSB 2 near sqrt or
    LSB 2' (``"lsb2-monotone"``, ``groups`` x ``units`` min-max network) near sqrt, or with
    ``init="max"`` exactly max(1, t) (the authors' UAI start); ``monotonicity`` and ``penalty``
    are LSB 2''s (``MonotoneBalancing``)."""
    if name in FIXED:
        return FixedBalancing(name)
    if name == "lsb1":
        return MixtureBalancing()
    if name == "lsb2":
        generator = torch.Generator().manual_seed(int(seed))
        net = NetworkBalancing(hidden=hidden, generator=generator)
        return _fitted_sqrt(net, (name, hidden, int(seed)))
    if name == "lsb2-monotone":
        if init not in MONOTONE_INITS:
            raise ValueError(f"init must be one of {', '.join(MONOTONE_INITS)}, got {init!r}.")
        generator = torch.Generator().manual_seed(int(seed))
        monotone = MonotoneBalancing(
            groups=groups, units=units, generator=generator, monotonicity=monotonicity,
            penalty=penalty,
        )  # fmt: skip
        if init == "max":
            monotone.start_at_max_()
            return monotone
        return _fitted_sqrt(monotone, (name, groups, units, int(seed)))
    raise ValueError(
        f"unknown balancing function {name!r}; choose one of "
        f"{FIXED + ('lsb1', 'lsb2', 'lsb2-monotone')}."
    )


def sampler_balancing(
    kind: str,
    hidden: int = 10,
    seed: int = 0,
    balancing=None,
    groups: int = 20,
    units: int = 20,
    **monotone,
) -> Balancing:
    """The balancing function a sampler of registry kind ``kind`` starts with: a fixed
    function's, LSB 1's, LSB 2's or LSB 2' (``make_balancing``), or for ``"learned"`` the loaded
    ``balancing``, frozen."""
    if kind != "learned":
        return make_balancing(
            kind, hidden=hidden, seed=seed, groups=groups, units=units, **monotone
        )
    if not isinstance(balancing, Balancing):
        raise ValueError(
            "the 'learned' sampler needs balancing=lsbcore.load_balancing(path_or_dict)."
        )
    return balancing.frozen()
