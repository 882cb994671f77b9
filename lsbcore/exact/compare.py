"""How the choice of sampler (of the balancing function ``g``) changes the exact chain: one row
per sampler with its spectral gap, relaxation time and distance to the target after ``steps``;
and the relaxation times along a family of targets (a growing coupling), where every local
sampler slows down together.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy import sparse

from lsbcore.balancing.functions import Balancing
from lsbcore.exact.distance import mixing_time, tv_curve
from lsbcore.exact.spectrum import relaxation_time, spectral_gap
from lsbcore.exact.states import check_target, exact_distribution
from lsbcore.exact.transition import step_law

#: Below this fraction of nonzero entries a transition matrix is handled as sparse.
SPARSE_DENSITY = 0.1


def compare_samplers(
    target,
    names,
    steps: int = 100,
    start="uniform",
    balancings: Mapping[str, Balancing] | None = None,
    options: Mapping[str, Mapping] | None = None,
) -> list[dict]:
    """One dict per sampler in ``names`` (registry names), for a target of at most 12 sites.

    Keys: ``name``, ``gap`` (absolute spectral gap), ``relaxation_time`` (``1 / gap``, in the
    sampler's steps), ``relaxation_site_updates`` (the same counted in site updates: the
    sampler's ``sites_per_step`` per step; a checkerboard step updates every site, a block
    Gibbs step ``k``), ``tv_final`` (``TV(pi, v P^steps)``), ``tv``
    (the curve, ``[steps + 1]``), ``mixing_steps`` (the first step with TV at most 1/4 from
    ``start``, None when not within ``steps``) and ``invariance_error`` (``max |pi P - pi|``, a
    check).
    ``balancings`` gives learned samplers their current function (see ``transition_matrix``),
    ``options`` a sampler its registry options (``{"block-gibbs": {"block_size": 3}}``).
    """
    check_target(target)
    balancings = dict(balancings or {})
    options = dict(options or {})
    pi = exact_distribution(target)
    rows = []
    for name in names:
        p, sites = _law(target, name, balancings, options)
        gap = spectral_gap(p, pi)
        curve = tv_curve(p, pi, start, steps)
        rows.append(
            {
                "name": name,
                "gap": gap,
                "relaxation_time": relaxation_time(gap),
                "relaxation_site_updates": relaxation_time(gap) * sites,
                "tv_final": float(curve[-1]),
                "tv": curve,
                "mixing_steps": mixing_time(curve),
                "invariance_error": float(np.abs(p.T @ pi - pi).max()),
            }
        )
    return rows


def relaxation_along(
    targets,
    names,
    balancings: Mapping[str, Balancing] | None = None,
    options: Mapping[str, Mapping] | None = None,
) -> dict[str, np.ndarray]:
    """Each sampler's relaxation time in site updates (``relaxation_site_updates``) on each of
    ``targets`` (a family on one graph, e.g. one field under a growing coupling), ``[T]`` per
    name. Site updates make a sweep of block Gibbs comparable with single flips; ``options``
    as in ``compare_samplers``."""
    balancings = dict(balancings or {})
    options = dict(options or {})
    curves = {name: np.empty(len(targets)) for name in names}
    for k, target in enumerate(targets):
        check_target(target)
        pi = exact_distribution(target)
        for name in names:
            p, sites = _law(target, name, balancings, options)
            curves[name][k] = relaxation_time(spectral_gap(p, pi)) * sites
    return curves


def _law(target, name: str, balancings: dict, options: dict):
    """``step_law`` of ``name``, its ``P`` as CSR when few of its entries are nonzero. A
    single-site sampler's comes as CSR already (``n + 1`` entries a row); a block sampler's few
    per row come dense from ``transition_probabilities``. On 4,096 states the TV curve's
    products, the balance check and the eigenvalues then take a fraction of their dense time (a
    sweep's ``P`` is dense and stays so)."""
    p, sites = step_law(
        target, name, balancings.get(name), sparse_form=True, **options.get(name, {})
    )
    if sparse.issparse(p):
        return p.tocsr(), sites
    if np.count_nonzero(p) <= SPARSE_DENSITY * p.size:
        return sparse.csr_matrix(p), sites
    return p, sites
