"""Importance sampling of a pairwise binary target from a factorised proposal (the field alone
or a naive mean-field fit): ``log Z``, the marginals, their error bars, the Kish effective
sample size, and how that collapses as the lattice grows (Goodfellow et al., ch. 17)."""

from lsbcore.importance.collapse import SIDES, CollapseRow, collapse_study, synthetic_posterior
from lsbcore.importance.estimate import PROPOSALS, ImportanceEstimate, importance_sample
from lsbcore.importance.mean_field import MeanField, mean_field, mean_field_proposal
from lsbcore.importance.proposal import FactorisedProposal, field_proposal
from lsbcore.importance.reference import (
    enumerated_log_partition,
    enumerated_p_plus,
    exact_log_partition,
)
from lsbcore.importance.transfer import MAX_WIDTH, transfer_log_partition
from lsbcore.importance.weights import WeightSums, kish_ess

__all__ = [
    "MAX_WIDTH",
    "PROPOSALS",
    "SIDES",
    "CollapseRow",
    "FactorisedProposal",
    "ImportanceEstimate",
    "MeanField",
    "WeightSums",
    "collapse_study",
    "enumerated_log_partition",
    "enumerated_p_plus",
    "exact_log_partition",
    "field_proposal",
    "importance_sample",
    "kish_ess",
    "mean_field",
    "mean_field_proposal",
    "synthetic_posterior",
    "transfer_log_partition",
]
