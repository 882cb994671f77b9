"""What a run on an RBM adds to ``app.state.Run``: its problem record and its MMD checkpoints.

The run's comparison is an ``lsbcore.rbm.live.RBMComparison``, driven by the same worker, turns
and buttons as the Ising one. Its MMD curve is recorded at steps spaced geometrically
(``RECORD_GROWTH``), which is what the log-scaled evaluations axis of the chart needs: dense
early, when the MMD falls fast, sparse later; ``advance`` ends its chunks at those steps.

No Streamlit here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

RECORD_GROWTH = 1.08  # the next checkpoint is 8% more steps on (at least one step on)
MAX_RECORDS = 2_000  # never more points per curve than this (far above what 200,000 steps need)


@dataclass
class RBMProblem:
    """The RBM a run samples, in the shape the page expects of a problem."""

    name: str  # "digits 8 x 8", "your model", for captions and pins
    target: object  # the lsbcore RBM
    x0: object = None
    truth: object = None
    data: object = None  # no photo data: the Ising page's prompt and refits do not apply


def next_record(n_steps: int) -> int:
    """The step of the checkpoint after one taken at ``n_steps``."""
    return max(n_steps + 1, math.ceil(n_steps * RECORD_GROWTH))


def is_rbm_run(run) -> bool:
    return isinstance(run.problem, RBMProblem)


def checkpoint(run, force: bool = False) -> None:
    """Record the MMD checkpoint due at the run's step (``force``: one at this step anyway,
    unless there is one already). The caller holds ``run.lock``."""
    comparison = run.comparison
    n = comparison.n_steps
    curve = comparison.curve(comparison.labels[0])["step"]
    last = curve[-1] if curve else -1
    if last == n or len(curve) >= MAX_RECORDS:
        return
    if force or n >= run.next_record:
        comparison.record()
        run.next_record = next_record(n)


def steps_to_checkpoint(run) -> int:
    """Steps left before the next checkpoint is due (at least one)."""
    return max(1, run.next_record - run.comparison.n_steps)
