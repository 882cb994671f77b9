"""The three kinds of target the dashboard samples, and which kind a target name is.

"ising" (the segmentation posterior: the Ising page), "rbm" (``app/rbm_targets.py``: the RBM
page) and "network" (``app/network_targets.py``: the Markov-network page). The app branches on
the kind, never on a target's name; a name the picker does not offer is an error, not a guess.

No Streamlit here.
"""

from __future__ import annotations

from enum import StrEnum

from app import network_run, network_targets, rbm_run, rbm_targets


class TargetKind(StrEnum):
    ISING = "ising"
    RBM = "rbm"
    NETWORK = "network"


def kind_of(target: str) -> TargetKind:
    """The kind of the picker's target ``target``; a ``ValueError`` for a name it does not
    offer."""
    if target == "ising":
        return TargetKind.ISING
    if target in rbm_targets.RBM_TARGETS:
        return TargetKind.RBM
    if network_targets.is_network(target):
        return TargetKind.NETWORK
    raise ValueError(
        f"{target!r} is not a target the dashboard offers; choose one of "
        f"{', '.join(rbm_targets.TARGETS)}."
    )


def run_kind(run) -> TargetKind:
    """The kind of target ``run`` samples (from its problem record, which a run keeps while
    the sidebar's target changes)."""
    if rbm_run.is_rbm_run(run):
        return TargetKind.RBM
    if network_run.is_network_run(run):
        return TargetKind.NETWORK
    return TargetKind.ISING
