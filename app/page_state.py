"""The browser session's state: the one module that reads and writes ``st.session_state``.

Streamlit keeps a session's values in ``st.session_state``: each keyed widget's value under its
key, and what the page holds between reruns (the run, a view's prepared results, the link's
view values). The page reads and writes them here: each key is a ``Slot`` (its name, as the
widget that owns it is keyed, and its value's type and default), declared below by the module
that uses it; ``ensure`` and ``ensure_in_range`` give a keyed widget a valid value before it is
drawn; ``restore_links`` and ``remember_links`` keep the views' link parameters
(``app/view_links.py``) across reruns and in the link. The names stay as they were: links and
widget keys depend on them.

Keyed widgets are created without ``value=``/``index=`` and read their value from their key;
``ensure`` puts a valid value there first (a default, or a repair when a range shrank), which
avoids Streamlit's "default value and Session State" conflict and lets query parameters and
callbacks set widgets the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import streamlit as st

from app import view_links

if TYPE_CHECKING:
    from app.state import Run

T = TypeVar("T")


@dataclass(frozen=True)
class Slot(Generic[T]):
    """One Session State key: ``key`` (a widget's key, where a widget owns it) and the value
    it reads as while unset."""

    key: str
    default: T

    def get(self) -> T:
        return st.session_state.get(self.key, self.default)

    def set(self, value: T) -> T:
        st.session_state[self.key] = value
        return value

    def pop(self) -> T:
        """The value, removed (the default when unset)."""
        return st.session_state.pop(self.key, self.default)

    def is_set(self) -> bool:
        return self.key in st.session_state


def ensure(key: str, default: Any, valid: Callable[[Any], bool] | None = None) -> Any:
    """Make ``st.session_state[key]`` hold a valid value; return it."""
    state = st.session_state
    if key not in state or (valid is not None and not valid(state[key])):
        state[key] = default
    return state[key]


def ensure_in_range(key: str, default: int | float, low, high) -> Any:
    """Like ``ensure`` for a number that must lie in ``[low, high]`` (clamped when it does not)."""
    state = st.session_state
    if key not in state:
        state[key] = default
    value = state[key]
    try:
        clamped = min(max(value, low), high)
    except TypeError:
        clamped = default
    if clamped != value:
        state[key] = clamped
    return state[key]


def state_again(*keys: str) -> None:
    """Write the widgets' values again just before they are drawn, as the sidebar does every
    key. A run stopped for a rerun (a click while the page still draws) skips Streamlit's
    cleanup: a widget that run did not draw keeps its value here while the browser has dropped
    it, and would come back showing its default (its minimum) over the value the page holds. A
    value written in the run is sent to the browser with the widget."""
    state = st.session_state
    for key in keys:
        state[key] = state[key]


def store() -> MutableMapping:
    """The session's whole mapping, for the modules without Streamlit that keep their own keys
    in one they are handed (``app/flow_training.py``'s job)."""
    return st.session_state


# ----------------------------------------------------------------------------- link values
def restore_links(keys: Iterable[str]) -> None:
    """Give the widgets of the link parameters ``keys`` their saved values where Streamlit
    dropped them (a tab that was closed), before they are drawn."""
    view_links.restore(st.session_state, tuple(keys))


def remember_links(keys: Iterable[str], publish: bool = True) -> dict:
    """Save the widgets' current values of ``keys`` and return them; ``publish``: bring the
    page's link up to date (a view redrawn inside a fragment does not rewrite the link)."""
    values = view_links.remember(st.session_state, tuple(keys))
    if publish:
        view_links.publish(st.query_params, st.session_state)
    return values


def link_value(key: str):
    """The saved value of the link parameter ``key``."""
    return view_links.value(st.session_state, key)


def link_query_params() -> dict[str, str]:
    """The view values that differ from their defaults, as link text."""
    return view_links.to_query_params(st.session_state)


# ----------------------------------------------------------------------------- the page
TARGET = Slot("target", "ising")  # the sidebar's target picker (app/target_kind.py: its kind)
# full page runs started in this session: a callback, which runs before the page, reads the
# number of the run before it (fragment reruns do not count)
PAGE_RUNS = Slot("_page_runs", 0)
RUN: Slot[Run | None] = Slot("_run", None)  # the session's ``app.state.Run`` (app/session.py)
# what the run was built from, beside its Config (image, imported function, prompt)
RUN_INPUTS: Slot[tuple | None] = Slot("_run_inputs", None)
# the runs of the sources and targets left, paused: {(target, source): (Run, its inputs)}
PARKED: Slot[dict | None] = Slot("_parked_runs", None)
PENDING_STEP = Slot("_pending_step", False)  # Step was pressed: take it in the next page run
# Run was pressed on a run being left for the source or target chosen just before (the click
# came before the page had drawn that choice's run): the number of the page run before it
PENDING_RUN: Slot[int | None] = Slot("_pending_run", None)
PENDING_RESET = Slot("_pending_reset", False)  # Reset was pressed
VIEW = Slot(view_links.VIEW, "Chains")  # the Ising page's open view (a link parameter)
VIEW_GROUP = Slot("view_group", "")  # its group chooser
# the view last open in each group, reopened with its group
VIEW_LAST: Slot[dict | None] = Slot("_view_last", None)
LIVE = Slot("_live", False)  # whether the live fragment was set to refresh itself
# whether it was set to refresh slowly: its run waits for its compiled steps
WAITING = Slot("_waiting", False)
# the sidebar's note on a lattice size it lowered
SIZE_NOTE: Slot[str | None] = Slot("_size_note", None)

# presentation mode (app/presentation.py)
PRESENT = Slot("present", False)  # the switch (a link parameter)
# the mode at the last rerun (None: never applied in this session)
PRESENT_WAS_ON: Slot[bool | None] = Slot("_present_was_on", None)
PRESENT_TURNS = Slot("_present_turns", 0)  # how many times the mode changed

# figures (app/charts.py): the download format chosen on the Export tab, and kept
FIGURE_FORMAT: Slot[str | None] = Slot("figure_format", None)
FIGURE_FORMAT_CHOSEN = Slot("_figure_format", "png")  # kept while the Export tab is closed


def count_page_run() -> int:
    """Count a full page run (called first thing in the page); its number."""
    return PAGE_RUNS.set(PAGE_RUNS.get() + 1)


def open_config(cfg) -> None:
    """The sidebar's widgets take ``cfg``'s values (``app.config.Config``) in the next page run
    (called from a callback, before the sidebar is drawn)."""
    state = st.session_state
    for f in fields(cfg):
        value = getattr(cfg, f.name)
        state[f.name] = list(value) if f.name == "samplers" else value
    SIZE_NOTE.pop()


# ----------------------------------------------------------------------------- the views
# Chains
CHAINS_SHOWN = Slot("chains_shown", 1)  # the slider: chains shown per sampler
# Proposal
PROPOSAL_CHAIN = Slot("proposal_chain", 1)  # the chain shown (1-based): the Step button's too
# Segmentation: the threshold in use (the slider's own key may be dropped)
SEG_THRESHOLD = Slot("_seg_threshold", 0.5)
# Flow: whether the flow was training at the last redraw (its end reruns the page)
FLOW_WAS_TRAINING = Slot("_flow_was_training", False)
# Export: the traces prepared on request, (run id, step, gzip bytes), one per session
EXPORT_TRACES: Slot[tuple[int, int, bytes] | None] = Slot("export_traces_gz", None)
# Compare: the runs chosen (the multiselect)
COMPARE_RUNS: Slot[list | None] = Slot("compare_runs", None)
# Block proposals: the tab's link parameters, whose chain 1 is shown, the image's selection
BP_K = Slot("bp_k", 2)
BP_WEIGHTS = Slot("bp_weights", "trained")
BP_ROW = Slot("bp_row", 1)
BP_COL = Slot("bp_col", 1)
BP_RACE: Slot[tuple | None] = Slot("bp_race_run", None)  # the source's race shown (expander)
BP_SAMPLER: Slot[str | None] = Slot("bp_sampler", None)  # the run's samplers change: not in links
BP_PICK: Slot[dict | None] = Slot("bp_pick", None)
# Which g where: the tab's link parameters, the upload and what was read of it, the map's
# selection, the count of clicks on the map (the boxes are drawn afresh after one), and the
# keys of the lambda and sigma boxes drawn last
WG_PANEL = Slot("wg_panel", 1)
WG_LAM = Slot("wg_lam", 0.0)
WG_SIGMA = Slot("wg_sigma", 1.0)
WG_UPLOAD: Slot[object | None] = Slot("wg_upload", None)
# the upload read: (file id, name, map or None, error or None)
WG_LOADED: Slot[tuple | None] = Slot("_wg_loaded", None)
WG_PICK: Slot[dict | None] = Slot("wg_pick", None)
WG_VERSION = Slot("_wg_version", 0)
WG_BOXES: Slot[dict | None] = Slot("_wg_boxes", None)
