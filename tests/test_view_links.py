"""Link parameters of the views with their own controls (``app.view_links``): parsed and
clamped like the sidebar's, kept while Streamlit drops a hidden widget's state, and written to
the link only where they differ from the defaults. The views' groups: each view in one group, a
link's ``view=`` opens it, and only the open view of the open group is drawn."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app import config, view_links
from app.view_links import ViewParam


@pytest.fixture
def params(monkeypatch):
    table = {
        "t_count": ViewParam("t_count", 8, "count", 2, 32),
        "t_rate": ViewParam("t_rate", 0.5, "rate", 0.0, 1.0),
        "t_kind": ViewParam("t_kind", "a", "kind", choices=("a", "b")),
        "t_on": ViewParam("t_on", False, "switch"),
    }
    monkeypatch.setattr(view_links, "PARAMS", table)
    return table


@pytest.mark.parametrize(
    "raw, expected, says",
    [
        ("12", 12, None),
        (["3", "17"], 17, None),
        ("40", 32, "outside [2, 32]"),
        ("-inf", 2, "-∞ is outside [2, 32]"),
        ("inf", 32, ": ∞ is outside [2, 32]"),
        ("nan", 8, "NaN"),
        ("7.6", 8, "whole number"),
        ("1e999", 32, "outside"),
        ("eight", 8, "not a number"),
        ("<b>x</b>", 8, "not a number"),
    ],
)
def test_numbers_are_validated(params, raw, expected, says):
    values, warnings = view_links.from_query_params({"t_count": raw})
    assert values["t_count"] == expected
    assert (says is None) == (not warnings)
    if says:
        assert says in warnings[0] and warnings[0].startswith("count:")
        assert "<b>" not in warnings[0]


def test_choices_and_switches(params):
    values, warnings = view_links.from_query_params({"t_kind": "b", "t_on": "1"})
    assert (values["t_kind"], values["t_on"], warnings) == ("b", True, [])
    values, warnings = view_links.from_query_params({"t_kind": "c", "t_on": "maybe"})
    assert (values["t_kind"], values["t_on"]) == ("a", False)
    assert len(warnings) == 2


def test_values_survive_a_dropped_widget_and_reach_the_link(params):
    state: dict = {}
    values, _ = view_links.from_query_params({"t_rate": "0.25"})
    view_links.init(state, values)
    view_links.restore(state, ["t_rate", "t_count"])
    assert state["t_rate"] == 0.25 and state["t_count"] == 8
    state["t_count"] = 20  # the user moves the widget
    assert view_links.remember(state, ["t_count"]) == {"t_count": 20}
    del state["t_count"], state["t_rate"]  # the tab is closed: Streamlit drops both
    view_links.restore(state, ["t_count", "t_rate"])
    assert (state["t_count"], state["t_rate"]) == (20, 0.25)
    assert view_links.to_query_params(state) == {"t_count": "20", "t_rate": "0.25"}
    link = {"t_kind": "b", "case": "3"}
    view_links.publish(link, state)
    assert link == {"t_count": "20", "t_rate": "0.25", "case": "3"}


def test_the_sidebar_link_reader_accepts_view_keys(params):
    _, warnings = config.from_query_params({"t_count": "4", "nonsense": "1"})
    assert warnings == ["Unknown link parameter “nonsense” ignored."]


# ----------------------------------------------------------------------------- the views' groups
def test_every_view_is_in_one_group_and_a_link_names_it():
    from app.view_catalogue import ISING

    names = [v.label for group in ISING.groups.values() for v in group]
    assert sorted(names) == sorted(ISING.labels) and len(set(names)) == len(names)
    assert ISING.group_of("Tempering") == "Beyond LSB"
    assert ISING.group_of("Compare") == "Results"
    values, warnings = view_links.from_query_params({"view": "MAP (annealing)"})
    assert values["view"] == "MAP (annealing)" and warnings == []
    values, warnings = view_links.from_query_params({"view": "<b>Nope</b>"})
    assert values["view"] == "Chains" and warnings[0].startswith("view:")


def test_the_group_chooser_opens_one_view_and_the_link_follows(monkeypatch):
    """Only the open view of the open group is drawn; Step opens Proposal from any group; a
    group reopens the view last open in it."""
    from streamlit.testing.v1 import AppTest

    from app import state, view_catalogue
    from app.target_kind import TargetKind

    app = Path(__file__).resolve().parent.parent / "app" / "streamlit_app.py"
    drawn: list[str] = []
    page = view_catalogue.ISING
    stubs = tuple(replace(v, draw=lambda run, name=v.label: drawn.append(name)) for v in page.views)
    monkeypatch.setitem(view_catalogue.PAGES, TargetKind.ISING, replace(page, views=stubs))
    at = AppTest.from_file(str(app), default_timeout=60)
    at.query_params.update(size="16", chains="2", samplers="barker", view="Tempering")
    try:
        at.run()
        assert not at.exception
        assert at.session_state["view_group"] == "Beyond LSB" and drawn == ["Tempering"]

        at.button(key="step").click().run()
        assert at.session_state["view_group"] == "LSB views" and drawn[-1] == "Proposal"
        assert at.query_params["view"] == "Proposal"

        drawn.clear()
        at.button_group(key="view_group").set_value("Results").run()
        assert drawn == ["Export"] and at.query_params["view"] == "Export"
        at.button_group(key="view_group").set_value("LSB views").run()
        assert drawn[-1] == "Proposal" and not at.exception
    finally:
        state._pause_all_runs()


def test_a_link_naming_a_library_sampler_says_where_it_runs():
    from app.config import parse_samplers

    warnings: list[str] = []
    assert parse_samplers(["gwg,sqrt", "nonsense"], warnings) == ("sqrt",)
    assert warnings == [
        "samplers: “gwg” runs from the library (lsbcore), not in the dashboard; ignored.",
        "samplers: unknown sampler “nonsense” ignored.",
    ]


class WriteLog(dict):
    """Session State as the browser sees it: the keys written in this run."""

    def __init__(self, *args):
        super().__init__(*args)
        self.written: list[str] = []

    def __setitem__(self, key, value):
        self.written.append(key)
        super().__setitem__(key, value)


def test_a_widget_kept_by_a_run_stopped_for_a_rerun_is_written_again_before_it_is_drawn(params):
    """A run stopped for a rerun skips Streamlit's cleanup: the closed tab's widget keeps its
    value in Session State while the browser dropped it. Only a value written in the run that
    draws it again reaches the browser, which would otherwise show the widget's default."""
    state = WriteLog()
    view_links.restore(state, ["t_count"])
    state["t_count"] = 20  # the user moves the widget; then the tab is closed and opened again
    state.written.clear()
    view_links.restore(state, ["t_count", "t_rate"])
    assert state.written == ["t_count", "t_rate"]
    assert (state["t_count"], state["t_rate"]) == (20, 0.5)
