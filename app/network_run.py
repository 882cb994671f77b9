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


@dataclass
class SelectionProblem(NetworkProblem):
    """Variable selection on the network page (``app/selection_target.py``): no factor graph
    to draw, its features' inclusion probabilities instead."""

    informative: tuple[int, ...] = ()  # the truly informative features, for the view to mark


def is_network_run(run) -> bool:
    return isinstance(run.problem, NetworkProblem)


def is_selection_run(run) -> bool:
    return isinstance(run.problem, SelectionProblem)


def draws_a_network(run) -> bool:
    """Whether ``run`` samples a factor graph (the views of its factors apply)."""
    return is_network_run(run) and not is_selection_run(run)


def start_note(comparison) -> str | None:
    """The comparison's sentence on chains it moved out of zero mass at the start, if any."""
    note = getattr(comparison, "start_note", None)
    return note if isinstance(note, str) and note else None
