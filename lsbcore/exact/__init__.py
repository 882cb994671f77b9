"""The exact chain: every state of a tiny target (at most 12 sites) enumerated, each sampler's
full transition matrix, and what it says about convergence (spectral gap, TV against steps)."""

from lsbcore.exact.compare import compare_samplers, relaxation_along
from lsbcore.exact.distance import MIXING_TV, STARTS, mixing_time, start_distribution, tv_curve
from lsbcore.exact.spectrum import (
    is_reversible,
    relaxation_time,
    second_eigenvalue_modulus,
    spectral_gap,
    stationary_vector,
)
from lsbcore.exact.states import (
    MAX_SITES,
    all_states,
    check_target,
    exact_distribution,
    state_codes,
)
from lsbcore.exact.transition import (
    block_update_matrix,
    flip_matrix,
    step_law,
    sweep_matrix,
    transition_matrix,
)

__all__ = [
    "MAX_SITES",
    "MIXING_TV",
    "STARTS",
    "all_states",
    "block_update_matrix",
    "check_target",
    "compare_samplers",
    "relaxation_along",
    "exact_distribution",
    "flip_matrix",
    "is_reversible",
    "mixing_time",
    "relaxation_time",
    "second_eigenvalue_modulus",
    "spectral_gap",
    "start_distribution",
    "state_codes",
    "stationary_vector",
    "step_law",
    "sweep_matrix",
    "transition_matrix",
    "tv_curve",
]
