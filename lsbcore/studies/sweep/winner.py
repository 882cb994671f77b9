"""Which sampler mixes best at one point of a sweep, and by how much (``rank_point``).

The figure of merit is ESS per 1,000 target evaluations (``lsbcore.studies.sweep.cell``), one value
per
sampler and seed. The winner has the highest mean over seeds. Every seed's posterior is shared by
all samplers of that seed, so two samplers are compared seed by seed (paired): the difference of
the winner and another sampler has a standard error ``sd(d) / sqrt(n)`` over the ``n`` seeds both
finished. A sampler whose mean is within ``TIE_Z`` such standard errors of the winner's is tied
with it: the seeds cannot tell them apart. With one seed there is no spread to judge by, so
nothing is called tied and the point says it rests on one seed.

The margin is the winner's lead over the best other sampler, relative to that sampler's mean
(0.25: the winner mixes 25% more per evaluation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["TIE_Z", "Ranking", "rank_point"]

TIE_Z = 2.0  # about a 95% two-sided band on the paired difference


@dataclass(frozen=True)
class Ranking:
    """One point's samplers, best first, with the winner, its ties and its margin."""

    order: tuple[str, ...]  # by mean, best first (samplers with no finite value left out)
    means: dict[str, float]
    stderrs: dict[str, float]  # of each sampler's mean over its seeds (nan with one seed)
    n_seeds: dict[str, int]
    winner: str | None
    tied: tuple[str, ...]  # the winner and every sampler it cannot be told apart from
    margin: float  # (winner - runner-up) / runner-up; nan with fewer than two samplers
    z: float  # the runner-up's paired difference in standard errors (inf: no spread at all)
    notes: tuple[str, ...] = field(default=())

    @property
    def is_tie(self) -> bool:
        return len(self.tied) > 1

    def as_dict(self) -> dict:
        return {
            "order": list(self.order),
            "means": self.means,
            "stderrs": self.stderrs,
            "n_seeds": self.n_seeds,
            "winner": self.winner,
            "tied": list(self.tied),
            "margin": self.margin,
            "z": self.z,
            "notes": list(self.notes),
        }


def _paired_z(a: dict[int, float], b: dict[int, float]) -> float:
    """Mean of ``a - b`` over the seeds both have, in standard errors of that mean."""
    seeds = sorted(set(a) & set(b))
    if len(seeds) < 2:
        return math.nan
    d = np.array([a[s] - b[s] for s in seeds])
    spread = d.std(ddof=1) / math.sqrt(len(d))
    if spread == 0:
        return math.inf if d.mean() > 0 else 0.0
    return float(d.mean() / spread)


def rank_point(values: dict[str, dict[int, float]]) -> Ranking:
    """Rank samplers from ``values[sampler][seed]`` (ESS per 1,000 evaluations at one point).

    Values that are not finite (a chain that never moved gives no ESS) are left out, and a
    sampler with none is named in the notes.
    """
    notes = []
    finite = {}
    for name, by_seed in values.items():
        kept = {s: float(v) for s, v in by_seed.items() if math.isfinite(v)}
        if kept:
            finite[name] = kept
        else:
            notes.append(f"{name}: no finite ESS at this point")
    means = {n: float(np.mean(list(v.values()))) for n, v in finite.items()}
    stderrs = {
        n: float(np.std(list(v.values()), ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan
        for n, v in finite.items()
    }
    n_seeds = {n: len(v) for n, v in finite.items()}
    order = tuple(sorted(means, key=lambda n: (-means[n], n)))
    if not order:
        return Ranking((), {}, {}, {}, None, (), math.nan, math.nan, tuple(notes))
    winner = order[0]
    if len(order) == 1:
        return Ranking(order, means, stderrs, n_seeds, winner, (winner,), math.nan, math.nan,
                       tuple(notes))  # fmt: skip
    runner_up = order[1]
    margin = (
        (means[winner] - means[runner_up]) / means[runner_up] if means[runner_up] > 0 else math.inf
    )
    z = _paired_z(finite[winner], finite[runner_up])
    if math.isnan(z):
        notes.append("fewer than two seeds shared with the runner-up: no spread to call a tie by")
        tied = (winner,)
    else:
        tied = (winner,) + tuple(
            n for n in order[1:] if _paired_z(finite[winner], finite[n]) <= TIE_Z
        )
    return Ranking(order, means, stderrs, n_seeds, winner, tied, margin, z, tuple(notes))
