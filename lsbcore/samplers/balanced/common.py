"""What both locally balanced samplers' constructors do alike (the pairwise one,
``balanced.pairwise``, and the one on any target, ``balanced.batched``): take the balancing
function, and check the optimiser and the objective."""

from __future__ import annotations

from lsbcore.balancing.functions import Balancing
from lsbcore.balancing.history import LearningHistory
from lsbcore.balancing.objective import OBJECTIVES

OPTIMIZERS = ("adam", "sgd")


def take_balancing(sampler, balancing: Balancing) -> None:
    """Give ``sampler`` its balancing function, whether it learns, and an empty history.

    A frozen function (loaded from JSON) samples but does not learn."""
    if not isinstance(balancing, Balancing):
        raise ValueError(f"balancing must be a Balancing, got {type(balancing).__name__}.")
    sampler.balancing = balancing
    sampler.learnable = balancing.learnable and any(p.requires_grad for p in balancing.parameters())
    sampler.learning_failed = False
    sampler.history = LearningHistory()


def check_optimizer(optimizer: str) -> str:
    """``optimizer`` if it is one of ``OPTIMIZERS``, else a ``ValueError``."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}.")
    return optimizer


def check_objective(objective: str) -> str:
    """``objective`` if it is one of the learning objectives, else a ``ValueError``."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}.")
    return objective
