"""The app in records (issue 40): one record per view, from which the tabs, the links and
presentation mode are built; the kind of a target is one explicit function, and a name the
picker does not offer is an error, never a guess."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app import rbm_targets
from app.target_kind import TargetKind, kind_of


def test_every_offered_target_has_a_kind():
    kinds = {target: kind_of(target) for target in rbm_targets.TARGETS}
    assert kinds["ising"] is TargetKind.ISING
    assert {kinds[t] for t in rbm_targets.RBM_TARGETS} == {TargetKind.RBM}
    assert {kinds[t] for t in ("mn1", "mn2", "uai")} == {TargetKind.NETWORK}


@pytest.mark.parametrize("name", ["", "nonsense", "RBM", "Ising", "digits-32x32"])
def test_an_unknown_target_name_is_an_error_not_an_rbm(name):
    with pytest.raises(ValueError, match="not a target the dashboard offers"):
        kind_of(name)


# ----------------------------------------------------------------------------- the view records
def test_the_pages_hold_every_view_once_with_its_sentence():
    from app.view_catalogue import ISING, NETWORK, PAGES, RBM

    assert set(PAGES) == set(TargetKind) and PAGES[TargetKind.ISING] is ISING
    assert list(ISING.groups) == ["LSB views", "Beyond LSB", "Results"]
    assert all(view.group in ISING.groups for view in ISING.views)
    assert not RBM.groups and not NETWORK.groups  # one strip of tabs each
    for page in PAGES.values():
        assert len(set(page.labels)) == len(page.labels)
        assert all(view.seeing and callable(view.draw) for view in page.views)
        assert page.link_param().choices == page.labels
        assert page.link_param().default == page.labels[0]
    assert ISING.group_of("Tempering") == "Beyond LSB" and ISING.group_of("?") == "LSB views"
    # every page pins its runs: the Ising page compares them, the others draw them
    assert "Compare" in ISING.labels
    assert "Pinned runs" in RBM.labels and "Pinned runs" in NETWORK.labels


def test_the_link_table_is_the_records_and_every_value_round_trips():
    from app import presentation, view_links
    from app.view_catalogue import PAGES, link_params

    table = link_params()
    wanted = {page.link for page in PAGES.values()} | {presentation.KEY}
    wanted |= {p.key for page in PAGES.values() for view in page.views for p in view.params}
    assert set(table) == wanted
    assert all(view_links.is_view_key(key) for key in table)
    for page in PAGES.values():
        for label in page.labels:  # a link names every tab of its page
            values, warnings = view_links.from_query_params({page.link: label})
            assert values[page.link] == label and warnings == []
        for view in page.views:
            for param in view.params:  # a view's own values survive the link
                value = param.choices[-1] if param.choices else param.default
                text = param.text(value)
                values, warnings = view_links.from_query_params({param.key: text})
                assert values[param.key] == value and warnings == []
    values, warnings = view_links.from_query_params({"rbm_view": "Chains"})
    assert values["rbm_view"] == "Digits" and warnings[0].startswith("RBM view:")


def test_two_views_that_share_a_link_parameter_share_the_parameter(monkeypatch):
    from app import view_catalogue
    from app.view_links import ViewParam
    from app.view_record import View

    page = view_catalogue.RBM
    clash = View("Clash", print, "A sentence.", params=(ViewParam("bp_k", 3, "other", 1, 9),))
    monkeypatch.setitem(
        view_catalogue.PAGES, TargetKind.RBM, replace(page, views=(*page.views, clash))
    )
    with pytest.raises(ValueError, match="two link parameters are called 'bp_k'"):
        view_catalogue.link_params()


def test_a_new_record_is_a_tab_a_link_value_and_a_sentence(monkeypatch):
    """One record on the Ising page: its tab in its group, opened by a link, its sentence in
    presentation mode, drawn inside the live fragment."""
    from app_support import open_app

    from app import state, view_catalogue, view_links
    from app.view_record import View

    drawn = []
    extra = View("Test view", drawn.append, "A sentence for the room.", "Results")
    page = view_catalogue.ISING
    monkeypatch.setitem(
        view_catalogue.PAGES, TargetKind.ISING, replace(page, views=(*page.views, extra))
    )
    monkeypatch.setattr(view_links, "PARAMS", dict(view_links.PARAMS))  # restored after the test
    view_links.register(view_catalogue.link_params())  # the table from the records above
    try:
        at = open_app(size="16", chains="2", samplers="barker", view="Test view", present="1")
        assert not at.exception and not at.warning
        assert at.session_state["view_group"] == "Results" and len(drawn) == 1
        assert [t.label for t in at.tabs] == ["Export", "Compare", "Which g where", "Test view"]
        html = " ".join(str(h.proto.body) for h in at.get("html"))
        assert "A sentence for the room." in html
    finally:
        state._pause_all_runs()


# ----------------------------------------------------------------------------- session state
def test_no_view_touches_session_state_directly():
    """An architectural contract: the views read and write the session's state through
    ``app/page_state.py`` (typed slots, the link helpers), never ``st.session_state``."""
    views = Path(__file__).resolve().parent.parent / "app" / "views"
    touching = [p.name for p in sorted(views.glob("*.py")) if "session_state" in p.read_text()]
    assert touching == []


def test_a_slot_reads_its_default_until_set(monkeypatch):
    import streamlit as st

    from app import page_state

    state: dict = {}
    monkeypatch.setattr(st, "session_state", state)
    slot = page_state.Slot("t_slot", 3)
    assert (slot.get(), slot.is_set()) == (3, False)
    assert slot.set(5) == 5 and state == {"t_slot": 5} and slot.is_set()
    assert slot.pop() == 5 and slot.pop() == 3 and state == {}
    assert page_state.ensure("t_choice", "a", lambda v: v in "ab") == "a"
    state["t_number"] = 40
    assert page_state.ensure_in_range("t_number", 8, 2, 32) == 32 == state["t_number"]


def test_the_figure_format_is_kept_while_the_export_tab_is_closed(monkeypatch):
    import streamlit as st

    from app import charts

    state: dict = {}
    monkeypatch.setattr(st, "session_state", state)
    assert charts.figure_format() == "png"
    state[charts.FORMAT_KEY] = "svg"  # chosen on the Export tab
    assert charts.figure_format() == "svg"
    del state[charts.FORMAT_KEY]  # the tab is closed: Streamlit drops its widget's value
    assert charts.figure_format() == "svg"
