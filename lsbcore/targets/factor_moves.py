"""Rescoring a factor graph after a move from the factors it touches only.

A flip changes only the factors whose scope holds the flipped variable, and only the flip
scores of the variables in those scopes. ``Incidence`` lays every factor (arity 1 and more) out
once for that: scopes padded to the largest arity, and for each variable the factors that touch
it (compressed rows). For chains that moved from ``x_old`` to ``x_new`` (any number of sites,
different per chain):

- ``touched``: the (chain, factor) pairs whose scope holds a changed site, each once;
- ``move_change``: the change of the finite part and of the zero-mass count (``FactorGraph``
  keeps the two apart, so hard zeros stay exact) summed over those pairs only;
- ``update_flip_scores``: each touched factor's share of its variables' flip scores, the old
  share taken out and the new one put in.

The flip scores so kept are sums in another order than a recomputation: equal to float64
rounding (the samplers' ``resync`` recomputes them exactly now and then). Zero-mass counts are
integers in float64 and stay exact.

``Neighbourhoods`` lays out, for the compiled steps, each variable's neighbourhood through its
factors (the variables whose flip scores a flip of it changes, itself first) and where each
variable of each of its factors sits in it, so a step updates a few slots, not a whole row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Incidence:
    """Every factor of arity 1 or more (``F`` of them, largest arity ``K``), for gathers."""

    scopes: torch.Tensor  # [F, K] variable indices; a shorter scope repeats its first variable
    place: torch.Tensor  # [F, K] 2^(k - 1 - p) for the scope's p-th variable, 0 in the padding
    offsets: torch.Tensor  # [F] where each factor's table starts in the flat tables
    finite: torch.Tensor  # [sum 2^k] the log-tables with -inf read as 0
    zero: torch.Tensor  # [sum 2^k] 1 where a table is -inf, else 0
    both: torch.Tensor  # [sum 2^k, 2] the two side by side, for one gather of both
    first: torch.Tensor  # [n + 1] variable v's factors are factors[first[v]:first[v + 1]]
    factors: torch.Tensor  # [sum of arities] factor ids, by variable

    def to(self, device: torch.device) -> Incidence:
        return Incidence(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))


def build_incidence(n: int, scopes, tables) -> Incidence:
    """The layout of ``scopes`` and ``tables`` (``FactorGraph``'s, checked) on ``n`` variables."""
    ids = [f for f, s in enumerate(scopes) if len(s) > 0]  # a constant factor never changes
    width = max((len(scopes[f]) for f in ids), default=1)
    rows = torch.zeros(len(ids), width, dtype=torch.long)
    place = torch.zeros(len(ids), width, dtype=torch.long)
    sizes = torch.tensor([2 ** len(scopes[f]) for f in ids], dtype=torch.long)
    offsets = torch.cumsum(sizes, 0) - sizes
    by_variable: list[list[int]] = [[] for _ in range(n)]
    for row, f in enumerate(ids):
        k = len(scopes[f])
        rows[row, :k] = torch.tensor(scopes[f])
        rows[row, k:] = scopes[f][0]
        place[row, :k] = 2 ** torch.arange(k - 1, -1, -1)
        for v in scopes[f]:
            by_variable[v].append(row)
    flat = torch.cat([tables[f] for f in ids]) if ids else torch.zeros(1, dtype=torch.float64)
    zero = flat == -torch.inf
    counts = torch.tensor([len(fs) for fs in by_variable], dtype=torch.long)
    return Incidence(
        scopes=rows,
        place=place,
        offsets=offsets,
        finite=torch.where(zero, 0.0, flat),
        zero=zero.to(torch.float64),
        both=torch.stack([torch.where(zero, 0.0, flat), zero.to(torch.float64)], 1),
        first=torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(counts, 0)]),
        factors=torch.tensor([f for fs in by_variable for f in fs], dtype=torch.long),
    )


@dataclass(frozen=True)
class Neighbourhoods:
    """Each variable's neighbourhood through its factors, compressed rows (``n`` variables)."""

    first: torch.Tensor  # [n + 1] variable v's neighbourhood is members[first[v]:first[v + 1]]
    members: torch.Tensor  # [sum of sizes] variable ids, each neighbourhood's own variable first
    # [sum of arities, K]: for v's r-th factor (Incidence.factors' order), the slot of its p-th
    # scope variable in v's neighbourhood; -1 in the padding
    slot: torch.Tensor


def build_neighbourhoods(inc: Incidence) -> Neighbourhoods:
    """The neighbourhoods of ``inc``'s variables (once per graph: a loop over the incidences)."""
    scopes, place = inc.scopes.tolist(), inc.place.tolist()
    first, factors = inc.first.tolist(), inc.factors.tolist()
    width = inc.scopes.shape[1]
    starts, members, slot = [0], [], []
    for v in range(len(first) - 1):
        where = {v: 0}
        for r in range(first[v], first[v + 1]):
            f = factors[r]
            row = []
            for p in range(width):
                if place[f][p] == 0:  # the padding repeats the scope's first variable
                    row.append(-1)
                    continue
                row.append(where.setdefault(scopes[f][p], len(where)))
            slot.append(row)
        members.extend(where)  # a dict keeps the order of first sight: v, then the others
        starts.append(len(members))
    return Neighbourhoods(
        first=torch.tensor(starts, dtype=torch.long),
        members=torch.tensor(members, dtype=torch.long),
        slot=torch.tensor(slot, dtype=torch.long).reshape(len(slot), width),
    )


def touched(inc: Incidence, x_old: torch.Tensor, x_new: torch.Tensor):
    """``(chain [Q], factor [Q])``: each factor whose scope holds a site that changed between
    the flat states ``x_old`` and ``x_new`` ``[B, n]``, once per chain, sorted."""
    chain, site = (x_new != x_old).nonzero(as_tuple=True)
    start, stop = inc.first[site], inc.first[site + 1]
    counts = stop - start
    total = int(counts.sum())
    # the factors of each changed site, laid end to end
    within = torch.arange(total, device=x_old.device) - torch.repeat_interleave(
        torch.cumsum(counts, 0) - counts, counts, output_size=total
    )
    factor = inc.factors[torch.repeat_interleave(start, counts, output_size=total) + within]
    chain = torch.repeat_interleave(chain, counts, output_size=total)
    n_factors = len(inc.offsets)
    keys = torch.unique(chain * n_factors + factor)  # a factor two changed sites share: once
    return keys // n_factors, keys % n_factors


def _entries(inc: Incidence, x: torch.Tensor, chain: torch.Tensor, factor: torch.Tensor):
    """The index of each (chain, factor) pair's entry in the flat tables at states ``x``."""
    bits = (x[chain.unsqueeze(1), inc.scopes[factor]] > 0).long()
    return inc.offsets[factor] + (bits * inc.place[factor]).sum(1)


def move_change(inc: Incidence, x_old: torch.Tensor, x_new: torch.Tensor):
    """The change ``[B]`` of the finite part and of the zero-mass count from ``x_old`` to
    ``x_new``, from the touched factors only."""
    chain, factor = touched(inc, x_old, x_new)
    old, new = _entries(inc, x_old, chain, factor), _entries(inc, x_new, chain, factor)
    d_finite = x_old.new_zeros(x_old.shape[0]).index_add_(
        0, chain, inc.finite[new] - inc.finite[old]
    )
    d_zeros = x_old.new_zeros(x_old.shape[0]).index_add_(0, chain, inc.zero[new] - inc.zero[old])
    return d_finite, d_zeros


def update_flip_scores(inc: Incidence, x_old, x_new, d_finite, d_zeros, zeros):
    """The flip scores at ``x_new`` (new tensors) from those at ``x_old``: ``d_finite``,
    ``d_zeros`` ``[B, n]`` (the change of each part under each single flip) and ``zeros [B]``
    (the state's zero-mass count)."""
    chain, factor = touched(inc, x_old, x_new)
    scopes, place = inc.scopes[factor], inc.place[factor]
    offsets = inc.offsets[factor].unsqueeze(1)
    both = inc.both
    change = 0.0
    for x, sign in ((x_new, 1.0), (x_old, -1.0)):
        bits = (x[chain.unsqueeze(1), scopes] > 0).long()
        entry = offsets + (bits * place).sum(1, keepdim=True)  # [Q, 1]
        flipped = offsets + ((entry - offsets) ^ place)  # [Q, K]; the padding's place is 0
        share = both[flipped] - both[entry]  # [Q, K, 2]: each variable's flip, both parts
        change = change + sign * share
        zeros = zeros.index_add(0, chain, sign * both[entry.squeeze(1), 1])
    at = (chain.unsqueeze(1).expand_as(scopes), scopes)
    d_finite = d_finite.index_put(at, change[..., 0], accumulate=True)
    d_zeros = d_zeros.index_put(at, change[..., 1], accumulate=True)
    return d_finite, d_zeros, zeros


__all__ = [
    "Incidence",
    "Neighbourhoods",
    "build_incidence",
    "build_neighbourhoods",
    "move_change",
    "touched",
    "update_flip_scores",
]
