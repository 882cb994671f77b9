"""What a run on a Markov network adds to ``app.state.Run``: its problem record.

The run's comparison is an ``lsbcore.Comparison`` with traces on, driven by the same worker,
turns and buttons as the Ising one; the network page (``app/view_catalogue.py`` ``NETWORK``)
draws it.

No Streamlit here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class NetworkProblem:
    """The network a run samples, in the shape the page expects of a problem."""

    name: str  # "MN 1", an uploaded file's name: for captions
    target: object  # the lsbcore FactorGraph
    x0: object = None  # the shared start (None: the comparison's own)
    truth: object = None  # no ground truth: no accuracy trace
    data: object = None  # no photo data: the Ising page's prompt and refits do not apply
    layout: object = None  # the drawing layout (lsbcore.networks.layout), computed once


def is_network_run(run) -> bool:
    return isinstance(run.problem, NetworkProblem)


def start_note(comparison) -> str | None:
    """The comparison's sentence on chains it moved out of zero mass at the start, if any."""
    note = getattr(comparison, "start_note", None)
    return note if isinstance(note, str) and note else None
