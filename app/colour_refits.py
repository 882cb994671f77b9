"""A box-prompted photo run refits its colour models while it goes on, as ``lsbcore.segment``
does (soft GrabCut): the library's schedule, stopping rule and refit, not a second copy.

Every ``REFIT_SWEEPS`` sweeps of draws in the run's marginals (each sampler's, counted in its
own sweeps, so a single-site sampler takes as many site updates as a block one), the object's
and the background's colour models are refitted from the marginal (the latter half of those
draws, samplers pooled, as the library takes its round's), and every sampler goes on sampling
the new field from where its chains are (``set_target``). The marginals start again, so the
settled verdict judges only draws of the newest field; the step counter keeps counting. The
refits stop by the library's rule (``refits_left``): after ``REFITS``, or once one moves the
mask at fewer than ``REFIT_STABLE`` of the free sites; until then the run does not settle.

No Streamlit here: the run's worker calls ``refit_if_due`` between chunks (``state.advance``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

import lsbcore
from lsbcore.samplers.interface import steps_per_sweep
from lsbcore.segmentation.segment import (
    REFIT_STABLE,
    REFIT_SWEEPS,
    REFITS,
    refit_moved,
    refits_left,
)

__all__ = ["REFITS", "REFIT_SWEEPS", "pending", "refit_if_due", "steps_to_refit", "text"]


def pending(run) -> bool:
    """Whether ``run`` is a prompted run whose colour models are still to be refitted."""
    data = getattr(run.problem, "data", None)  # a stand-in run of the pace tests has no problem
    if getattr(data, "prompt", None) is None:
        return False
    return refits_left(data.refits, run.refit_moved)


def _steps_of_draws(run, name: str) -> int:
    """Steps of ``name``'s sampler whose states are in its marginal now (one in ``thin``)."""
    return run.comparison.marginals[name].count * max(run.comparison.thin, 1)


def steps_to_refit(run, names) -> int | None:
    """Steps the samplers ``names`` may take before the next refit is due (at least one);
    None when no refit is to come or they are not yet drawing (burn-in)."""
    if not pending(run):
        return None
    comparison, left = run.comparison, []
    for name in names:
        if comparison.sampler_phases[name] != "mixing":
            return None
        need = REFIT_SWEEPS * steps_per_sweep(comparison[name]) - _steps_of_draws(run, name)
        if need > 0:
            left.append(need)
    return min(left) if left else None


def _due(run) -> bool:
    """Every sampler's marginal holds ``REFIT_SWEEPS`` sweeps of draws of the current field."""
    comparison = run.comparison
    return pending(run) and all(
        comparison.sampler_phases[n] == "mixing"
        and _steps_of_draws(run, n) >= REFIT_SWEEPS * steps_per_sweep(comparison[n])
        for n in comparison.names
    )


def _marginal(run) -> np.ndarray:
    """P(x = +1) from the latter half of the draws since the last refit, samplers pooled."""
    means = []
    for estimate in run.comparison.marginals.values():
        window = estimate.blocks.window_mean()
        means.append(estimate.mean() if window is None else window)
    return np.mean(means, axis=0)


def refit_if_due(run) -> bool:
    """Refit ``run``'s colour models when due and go on sampling the new field; True if it
    did. The caller holds ``run.lock``."""
    if not _due(run):
        return False
    comparison, old = run.comparison, run.problem
    data = old.data.refit(_marginal(run))
    moved = refit_moved(old.data.alpha, data.alpha, data.regions.free)
    target = lsbcore.IsingPosterior(
        torch.from_numpy(data.alpha), old.target.lam, boundary=old.target.boundary
    )
    for sampler in comparison.samplers.values():
        sampler.set_target(target)  # the chains keep their states
    comparison.target = target
    for estimate in comparison.marginals.values():
        estimate.reset()  # only the newest field's draws make the result and its verdict
    run.problem = replace(old, target=target, data=data)
    run.refit_moved = moved
    run.settledness, run.settled_at = {}, None
    run.cache.clear()  # views of the old field (its exact MAP among them)
    return True


def text(run) -> str | None:
    """What the last refit did, for the page; None before the first."""
    data = run.problem.data
    if getattr(data, "prompt", None) is None or run.refit_moved is None:
        return None
    moved = run.refit_moved
    head = (
        f"Refit {data.refits} of at most {REFITS}: the colour models moved {moved:.1%} of the field"
    )
    if pending(run):
        return f"{head}; sampling goes on."
    if moved < REFIT_STABLE:
        return (
            f"{head}, under {REFIT_STABLE:.1%}, so the colours stand: the run now settles on "
            "this field."
        )
    return f"{head}; that was the last refit: the run now settles on this field."
