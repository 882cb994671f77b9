"""How the choice of sampler (of the balancing function ``g``) changes the exact chain: one row
per sampler with its spectral gap, relaxation time and distance to the target after ``steps``;
and the relaxation times along a family of targets (a growing coupling), where every local
sampler slows down together.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lsbcore.balancing.functions import Balancing
from lsbcore.exact.distance import tv_curve
from lsbcore.exact.spectrum import relaxation_time, spectral_gap
from lsbcore.exact.states import check_target, exact_distribution
from lsbcore.exact.transition import transition_matrix
from lsbcore.samplers.registry import REGISTRY


def compare_samplers(
    target,
    names,
    steps: int = 100,
    start="uniform",
    balancings: Mapping[str, Balancing] | None = None,
) -> list[dict]:
    """One dict per sampler in ``names`` (registry names), for a target of at most 12 sites.

    Keys: ``name``, ``gap`` (absolute spectral gap), ``relaxation_time`` (``1 / gap``, in the
    sampler's steps), ``relaxation_site_updates`` (the same counted in site updates: a
    checkerboard step updates every site), ``tv_final`` (``TV(pi, v P^steps)``), ``tv``
    (the curve, ``[steps + 1]``) and ``invariance_error`` (``max |pi P - pi|``, a check).
    ``balancings`` gives learned samplers their current function (see ``transition_matrix``).
    """
    n = check_target(target)
    balancings = dict(balancings or {})
    pi = exact_distribution(target)
    rows = []
    for name in names:
        p = transition_matrix(target, name, balancing=balancings.get(name))
        gap = spectral_gap(p, pi)
        sites = n if REGISTRY[name].sites_per_step == "all" else 1
        curve = tv_curve(p, pi, start, steps)
        rows.append(
            {
                "name": name,
                "gap": gap,
                "relaxation_time": relaxation_time(gap),
                "relaxation_site_updates": relaxation_time(gap) * sites,
                "tv_final": float(curve[-1]),
                "tv": curve,
                "invariance_error": float(np.abs(pi @ p - pi).max()),
            }
        )
    return rows


def relaxation_along(
    targets, names, balancings: Mapping[str, Balancing] | None = None
) -> dict[str, np.ndarray]:
    """Each sampler's relaxation time in site updates (``relaxation_site_updates``) on each of
    ``targets`` (a family on one graph, e.g. one field under a growing coupling), ``[T]`` per
    name. Site updates make a sweep of block Gibbs comparable with single flips."""
    balancings = dict(balancings or {})
    curves = {name: np.empty(len(targets)) for name in names}
    for k, target in enumerate(targets):
        n = check_target(target)
        pi = exact_distribution(target)
        for name in names:
            p = transition_matrix(target, name, balancing=balancings.get(name))
            sites = n if REGISTRY[name].sites_per_step == "all" else 1
            curves[name][k] = relaxation_time(spectral_gap(p, pi)) * sites
    return curves
