"""LSB 2': ``g(t) = min{h(t), t h(1/t)}`` with ``h`` a monotone min-max network (the arXiv
version of the LSB paper, Propositions 2 and 3, its section 10 and appendix 15).

In log space, with ``s = log t`` and ``phi(s) = log h(e^s)``:

    log g(s) = min(phi(s), s + phi(-s)).

- **Balanced for any phi**: ``log g(-s) = min(phi(-s), -s + phi(s)) = log g(s) - s``, that is
  ``g(1/t) = g(t) / t``, whatever the parameters.
- **Monotone** when ``phi' in [0, 1]``: then ``phi`` and ``s + phi(-s)`` (slope ``1 - phi'(-s)``)
  both increase, and so does their minimum. This is the paper's Proposition 3 (``h`` increasing
  and ``t h(1/t)`` increasing) written in ``s``.
- ``phi`` is a min-max network (Sill 1997): ``phi(s) = max_k min_j (w_kj s + b_kj)``, ``K``
  groups of ``J`` linear units (the paper: 20 x 20). Its derivative is always one of the
  ``w_kj``, so slopes in the closed interval ``[0, 1]`` make ``g`` monotone **by construction**:
  no regulariser is needed (the paper adds a finite-difference penalty on violations instead,
  which holds only approximately and only where it is sampled). Learning keeps the slopes there
  by projection: after every optimiser step ``project_()`` clips them to ``[0, 1]``
  (projected gradient).
- ``g(0) = lim_{t -> 0} g(t)``: as ``s -> -inf`` the two terms follow their end pieces,
  ``phi(s) ~ a_- s + c_-`` and ``s + phi(-s) ~ (1 - a_+) s + c_+``, so ``g(0) > 0`` exactly when
  the piece at ``-inf`` has slope 0 and the piece at ``+inf`` slope 1; then
  ``g(0) = exp(min(c_-, c_+))``. ``max(1, t)`` is ``phi(s) = max(0, s)``. The closed interval
  matters: with slopes in an open interval ``g(0)`` would be 0 for every parameter value.
  A flip into zero mass (``t = 0``) is then proposed with ``g(0) / Z``; samplers never accept it.

Evaluation is exact and memory is ``O(inputs)``: which unit ``phi`` reads at each input is
found without autograd, in chunks of bounded size, and only that unit's ``w`` and ``b`` are
gathered with autograd (a piecewise-linear function's value and gradient are those of its
active piece). Inputs may be whole lattices (30 chains x 900 sites) and ``+-inf`` (zero mass).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from lsbcore.balancing.base import Balancing
from lsbcore.checks import integer, real

# pieces() holds [K * J, K, K] tensors: 32 x 32 keeps them at 8 MiB
MAX_GROUPS = 32
MAX_UNITS = 32
# unit evaluations per chunk of the active-unit search: 2^20 float64 values, 8 MiB at a time
CHUNK = 1 << 20
# inputs up to this many are searched unit by unit; larger ones (whole lattices) by a lookup in
# phi's pieces, which cost a few small sorts to build (see MonotoneBalancing.pieces)
DENSE_LIMIT = 2048
#: How monotonicity of ``t h(1/t)`` is kept: by projecting the slopes (ours, exact) or by the
#: authors' finite-difference penalty (their UAI code: weight 1, t ~ U(0, 2), step 1e-6).
MONOTONICITY = ("projection", "penalty")
PENALTY_DELTA = 1e-6


def _lower_envelope(w: torch.Tensor, b: torch.Tensor):
    """Where each line ``w[r, j] s + b[r, j]`` is the minimum of its row ``r`` (``[R, N]``):
    ``(low, high)``, the line is the minimum exactly on ``[low, high]`` (empty: ``low >= high``).

    Line ``j`` is below line ``i`` for ``s >= x`` when ``i`` is steeper and for ``s <= x`` when
    flatter, ``x = (b_j - b_i) / (w_i - w_j)`` their crossing; of two parallel lines the higher
    is never the minimum (the later of two equal ones, as an argmin would choose).
    """
    dw = w.unsqueeze(1) - w.unsqueeze(2)  # [R, j, i]: w_i - w_j
    db = b.unsqueeze(2) - b.unsqueeze(1)  # [R, j, i]: b_j - b_i
    cross = db / torch.where(dw == 0, 1.0, dw)
    low = torch.where(dw > 0, cross, -math.inf).amax(2)
    high = torch.where(dw < 0, cross, math.inf).amin(2)
    index = torch.arange(w.shape[1], device=w.device)
    earlier = index.view(1, 1, -1) < index.view(1, -1, 1)  # [1, j, i]: i < j
    hidden = (dw == 0) & ((db > 0) | ((db == 0) & earlier))
    return low, torch.where(hidden.any(2), -math.inf, high)


def _line(slope: torch.Tensor, intercept: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """``slope * s + intercept``, with ``s = +-inf`` read as the line's limit (``intercept`` for
    a flat line, ``+-inf`` otherwise) and no NaN in the value or the gradient."""
    finite = torch.isfinite(s)
    s_finite = torch.where(finite, s, 0.0)
    value = torch.addcmul(intercept, slope, s_finite)
    flat = slope.detach() == 0
    return torch.where(finite | flat, value, s * torch.sign(slope.detach()))


class MonotoneBalancing(Balancing):
    """LSB 2': ``log g(s) = min(phi(s), s + phi(-s))``, ``phi`` a min-max network with slopes
    in ``[0, 1]`` (see the module docstring).

    Parameters ``slope`` and ``intercept``, both ``[K, J]`` (group ``k``, unit ``j``). With a
    ``generator`` the network starts near ``sqrt(t)`` (slopes near 1/2, then ``fit_sqrt``),
    deterministically given the generator's seed; without one, at exactly ``sqrt(t)``.
    """

    name = "lsb2-monotone"
    learnable = True

    def __init__(
        self,
        groups: int = 20,
        units: int = 20,
        generator: torch.Generator | None = None,
        monotonicity: str = "projection",
        penalty: float = 1.0,
        penalty_range: float = 2.0,
    ):
        super().__init__()
        self.groups = integer(groups, "groups", 1, MAX_GROUPS)
        self.units = integer(units, "units", 1, MAX_UNITS)
        if monotonicity not in MONOTONICITY:
            raise ValueError(
                f"monotonicity must be one of {', '.join(MONOTONICITY)}, got {monotonicity!r}."
            )
        self.monotonicity = monotonicity
        self.penalty = real(penalty, "penalty", 0.0, 1e6)
        self.penalty_range = real(penalty_range, "penalty_range", 1e-6, 1e6)
        shape = (self.groups, self.units)
        self.slope = nn.Parameter(torch.full(shape, 0.5, dtype=torch.float64))
        self.intercept = nn.Parameter(torch.zeros(shape, dtype=torch.float64))
        if generator is not None:
            with torch.no_grad():
                # distinct lines around s/2, so that many units are active somewhere
                spread = torch.rand((2, *shape), generator=generator, dtype=torch.float64) * 2 - 1
                self.slope.add_(0.2 * spread[0])
                self.intercept.add_(0.5 * spread[1])

    # ----------------------------------------------------------------- the network
    def project_(self) -> None:
        """Clip the slopes to ``[0, 1]``: the projection that keeps ``g`` monotone (and lets a
        slope reach 0 or 1 exactly, which ``g(0) > 0`` needs). Under the authors' penalty only
        to ``[0, inf)``: ``h`` stays increasing by construction (their positive weights) and
        ``t h(1/t)`` is left to the penalty."""
        with torch.no_grad():
            self.slope.clamp_(0.0, 1.0 if self.monotonicity == "projection" else None)

    @torch.no_grad()
    def start_at_max_(self) -> None:
        """Set the network to exactly ``max(1, t)`` (``phi(s) = max(0, s)``), the authors' UAI
        start (they regress onto max(1, t) before burn-in): the first half of the groups are
        the line 0, the rest the line ``s`` (one group each with a single group)."""
        self.slope.zero_()
        self.intercept.zero_()
        self.slope[self.groups // 2 :] = 1.0

    def monotonicity_penalty(self, t: torch.Tensor, delta: float = PENALTY_DELTA) -> torch.Tensor:
        """The authors' penalty on ``u(t) = t h(1/t)`` decreasing: the mean over ``t`` of
        ``max(0, (u(t) - u(t + delta)) / delta)``, a forward difference of ``-u'(t)`` (zero
        wherever ``u`` increases). ``log u(t) = s + phi(-s)`` with ``s = log t``."""
        t = torch.as_tensor(t, dtype=torch.float64, device=self.slope.device)
        s = torch.log(torch.stack([t, t + delta]))
        u = torch.exp(s + self.phi(-s))
        return torch.clamp((u[0] - u[1]) / delta, min=0.0).mean()

    def learning_penalty(self, generator: torch.Generator, n: int) -> torch.Tensor | None:
        """The term a learning step adds to its loss: under ``"penalty"``, ``penalty`` times
        ``monotonicity_penalty`` at ``n`` points ``t ~ U(0, penalty_range)`` (the authors draw
        one per chain, range 2, weight 1); ``None`` under ``"projection"`` (nothing to add)."""
        if self.monotonicity != "penalty" or self.penalty == 0:
            return None
        u = torch.rand(n, generator=generator, dtype=torch.float64, device=generator.device)
        t = (u * self.penalty_range).clamp(min=1e-300)  # t = 0 exactly has no log
        return self.penalty * self.monotonicity_penalty(t.to(self.slope.device))

    @torch.no_grad()
    def _end_units(self) -> torch.Tensor:
        """Flat indices ``k * J + j`` of the units ``phi`` follows as ``s -> -inf`` and as
        ``s -> +inf`` (``[2]``). Lines compare by slope first there, then by intercept: as
        ``s -> +inf`` a group's minimum is its flattest line and the maximum over groups the
        steepest of those; as ``s -> -inf`` the other way round."""
        w, b = self.slope.detach(), self.intercept.detach()
        sign = torch.tensor([-1.0, 1.0], dtype=w.dtype, device=w.device).view(2, 1, 1)
        lead = w * sign  # [2, K, J]: the ends s -> -inf and s -> +inf
        # a group's minimum: the smallest slope * sign, then the smallest intercept
        low = lead.amin(2, keepdim=True)
        j = torch.where(lead == low, b, math.inf).argmin(2, keepdim=True)  # [2, K, 1]
        c = b.expand(2, -1, -1).gather(2, j).squeeze(2)  # [2, K]
        # the maximum over groups: the largest slope * sign, then the largest intercept
        top = low.squeeze(2)
        k = torch.where(top == top.amax(1, keepdim=True), c, -math.inf).argmax(1, keepdim=True)
        return (k * self.units + j.squeeze(2).gather(1, k)).squeeze(1)

    @torch.no_grad()
    def pieces(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``phi`` as its linear pieces: ``(starts, units)``, both ``[K * J * K]``, ``starts``
        ascending (the first ``-inf``; unused slots ``+inf`` at the end) and ``units`` the flat
        index of the unit ``phi`` reads from each start to the next.

        Built in three steps, all small tensor operations (no host read): each group's minimum
        is a lower envelope of ``J`` lines (its pieces and breakpoints); the groups' breakpoints
        together cut ``s`` into intervals on which every group is one line; on each interval
        ``phi`` is the upper envelope of those ``K`` lines. A whole lattice then needs one
        ``searchsorted`` per input instead of ``K * J`` unit evaluations.
        """
        w, b = self.slope.detach(), self.intercept.detach()
        groups, units = w.shape
        inf = torch.full((1,), math.inf, dtype=w.dtype, device=w.device)
        low, high = _lower_envelope(w, b)  # [K, J]
        starts, order = torch.where(low < high, low, math.inf).sort(1)  # each group's pieces
        edges = starts.reshape(-1).sort().values  # [M]: every group's breakpoints, M = K * J
        ends = torch.cat([edges[1:], inf])
        at = torch.searchsorted(starts, edges.expand(groups, -1).contiguous(), right=True) - 1
        line = order.gather(1, at.clamp_(0, units - 1))  # [K, M]: each group's unit there
        a, c = w.gather(1, line).T, b.gather(1, line).T  # [M, K]
        # the upper envelope of (a, c) is minus the lower envelope of (-a, -c)
        low, high = _lower_envelope(-a, -c)
        low = torch.maximum(low, edges.unsqueeze(1))  # within the interval [edges, ends)
        high = torch.minimum(high, ends.unsqueeze(1))
        flat = (torch.arange(groups, device=w.device).unsqueeze(1) * units + line).T  # [M, K]
        starts, order = torch.where(low < high, low, math.inf).reshape(-1).sort()
        return starts, flat.reshape(-1)[order]

    @torch.no_grad()
    def active_units(self, s: torch.Tensor) -> torch.Tensor:
        """The flat index ``k * J + j`` of the unit that gives ``phi(s)``, per input (same
        shape as ``s``; ``s`` may hold ``+-inf``): the group with the largest minimum, and that
        group's minimising unit. Few inputs are searched unit by unit, many by a lookup in
        ``pieces``: the same units but where two lines cross (a tie in value)."""
        flat = s.detach().reshape(-1)
        finite = torch.isfinite(flat)
        safe = torch.where(finite, flat, 0.0)
        if flat.numel() > DENSE_LIMIT:
            starts, units = self.pieces()
            at = torch.searchsorted(starts, safe, right=True).sub_(1).clamp_(min=0)
            out = units[at]
        else:
            out = self._search_units(safe)
        ends = self._end_units()
        out = torch.where(finite, out, torch.where(flat > 0, ends[1], ends[0]))
        return out.view(s.shape)

    def _search_units(self, s: torch.Tensor) -> torch.Tensor:
        """``active_units`` of finite inputs ``[n]`` unit by unit, ``CHUNK`` evaluations at a
        time (bounded memory)."""
        w, b = self.slope.detach(), self.intercept.detach()
        out = torch.empty(s.shape, dtype=torch.long, device=s.device)
        size = max(1, CHUNK // w.numel())
        for first in range(0, s.numel(), size):
            part = s[first : first + size]
            values = torch.addcmul(b, part.view(-1, 1, 1), w)  # [n, K, J]
            low, j = values.min(2)  # [n, K]
            k = low.argmax(1, keepdim=True)  # [n, 1]
            out[first : first + size] = (k * self.units + j.gather(1, k)).squeeze(1)
        return out

    def phi(self, s: torch.Tensor) -> torch.Tensor:
        """``phi(s) = log h(e^s) = max_k min_j (w_kj s + b_kj)``."""
        unit = self.active_units(s).reshape(-1)
        w = self.slope.reshape(-1).index_select(0, unit).view(s.shape)
        b = self.intercept.reshape(-1).index_select(0, unit).view(s.shape)
        return _line(w, b, s)

    def log_g(self, s: torch.Tensor) -> torch.Tensor:
        # log g(s) = min(phi(s), s + phi(-s)); phi at -s reads a unit (w, b) and
        # s + (w (-s) + b) = (1 - w) s + b, written so that s = -inf gives the limit, not NaN
        units = self.active_units(torch.stack([s, -s])).reshape(-1)  # one search for both
        params = torch.stack([self.slope.reshape(-1), self.intercept.reshape(-1)])  # [2, K * J]
        w, b = params.index_select(1, units).view(2, 2, *s.shape)  # [2, *shape] each
        lines = _line(torch.cat([w[:1], 1.0 - w[1:]]), b, s.unsqueeze(0))  # both terms at once
        return torch.minimum(lines[0], lines[1])

    @torch.no_grad()
    def g0(self) -> float:
        """``g(0) = lim_{t -> 0} g(t)``, exactly, from the network's end pieces: positive only
        when ``phi`` ends in slope 0 at ``-inf`` and slope 1 at ``+inf`` (module docstring)."""
        s = torch.tensor([-math.inf], dtype=torch.float64, device=self.slope.device)
        return float(torch.exp(self.log_g(s))[0])

    # ----------------------------------------------------------------- regression
    def fit(
        self,
        log_g_target: Callable[[torch.Tensor], torch.Tensor],
        s_max: float = 10.0,
        steps: int = 300,
        lr: float = 0.05,
        points: int = 401,
    ) -> float:
        """Regress ``log g`` onto ``log_g_target(s)`` (another balancing function, in log space)
        over ``s in [-s_max, s_max]`` by full-batch projected Adam on the squared error.

        Deterministic given the parameters. By the balancing property an error at ``s`` is the
        error at ``-s``. Returns the final max absolute error in ``log g`` on the range (for
        ``g`` a relative error: ``e^err - 1``).
        """
        steps = integer(steps, "steps", 0, 100_000)
        s = torch.linspace(-s_max, s_max, points, dtype=torch.float64, device=self.slope.device)
        target = log_g_target(s).detach()
        return self.regress(s, target, steps, lr)

    def fit_sqrt(self, steps: int = 60, s_max: float = 8.0) -> float:
        """Start near ``sqrt(t)``: ``fit`` onto ``log g = s / 2`` (the paper starts LSB 2 near
        sqrt). Returns the max absolute error in ``log g`` over ``|s| <= s_max``."""
        return self.fit(lambda s: 0.5 * s, s_max=s_max, steps=steps, lr=0.02, points=161)

    def fit_max(self, steps: int = 300, s_max: float = 10.0) -> float:
        """``fit`` onto ``max(1, t)`` (``log g = max(0, s)``), the arXiv appendix's capacity
        check (its section 15, Figure 9). Returns the max absolute error in ``log g``."""
        return self.fit(lambda s: s.clamp(min=0.0), s_max=s_max, steps=steps)
