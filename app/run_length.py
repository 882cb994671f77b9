"""How far each sampler of a run is toward the run's length, in words.

Every sampler takes the run's ``burn_in + steps`` steps of its own (``app/state.py``): one that
joined late (a flow sampler after its training) catches up while the others wait, and the run
is complete only when every sampler asked for has its steps. The status line names each
sampler's steps while they differ; the Flow view names its flow samplers' always.
"""

from __future__ import annotations

from app import state
from lsbcore.studies.figures import sampler_label


def clause(name: str, steps: int | None, total: int) -> str:
    """One sampler's progress: "Flow (exact): 12,000 of 32,000 steps"."""
    if steps is None:
        return f"{sampler_label(name)}: waiting for its flow's training (0 of {total:,} steps)"
    return f"{sampler_label(name)}: {steps:,} of {total:,} steps"


def progress_text(run: state.Run, names=None) -> str:
    """Each sampler's progress (of ``names``, default all the run's), in the order asked for."""
    own = run.sampler_steps()
    shown = [n for n in own if names is None or n in names]
    return " · ".join(clause(n, own[n], run.config.total_steps) for n in shown)


def side_by_side(run: state.Run) -> bool:
    """Whether every sampler of the run has taken as many steps as the others (none waits)."""
    own = run.sampler_steps().values()
    return None not in own and len(set(own)) <= 1


def waiting_text(run: state.Run) -> str | None:
    """What the run waits for when it has nothing to sample but its flow samplers are still
    to join (None otherwise)."""
    if not state.waits_for_flow(run):
        return None
    return (
        f"The other samplers have taken all {run.config.total_steps:,} steps; the run waits "
        "for the flow samplers, which take theirs once their training is done (Stop training "
        "lets them join now)."
    )
