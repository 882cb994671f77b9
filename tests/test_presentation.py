"""Presentation mode's sidebar: the state a fresh page takes follows the switch, and a page that
never turned the mode on keeps Streamlit's "auto" (collapsed on a phone), rerun after rerun. Its
pace: a lecture's run lasts about a minute, its speed in the header."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from streamlit.testing.v1 import AppTest

from app import presentation, scheduler, state
from app.config import Config

APP = Path(__file__).resolve().parent.parent / "app" / "streamlit_app.py"


def test_the_sidebar_state_follows_the_switch(monkeypatch):
    asked: list[str] = []
    real = st.set_page_config

    def record(**kwargs):
        if kwargs.get("initial_sidebar_state"):
            asked.append(kwargs["initial_sidebar_state"])
        return real(**kwargs)

    monkeypatch.setattr(st, "set_page_config", record)
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(size="16", chains="2", samplers="barker")
    try:
        at.run()
        at.run()
        assert asked == ["auto", "auto"] and not at.exception
        sidebar_scripts = len(at.sidebar.get("html"))
        at.toggle(key="present").set_value(True).run()
        assert asked[-1] == "collapsed"
        assert len(at.sidebar.get("html")) == sidebar_scripts + 1  # the one-off sidebar change
        at.run()
        assert asked[-1] == "collapsed" and len(at.sidebar.get("html")) == sidebar_scripts
        at.toggle(key="present").set_value(False).run()
        at.run()
        assert asked[-2:] == ["expanded", "expanded"] and not at.exception
    finally:
        state._pause_all_runs()


def test_a_lecture_runs_at_a_pace_a_room_can_watch_with_its_speed_in_the_header():
    """Presentation mode (from a link, or turned on) caps the default run at a pace that lasts
    about a minute, its speed menu in the page's header (the sidebar is collapsed); turned off,
    the run is as fast as it goes again and the speed is back in the sidebar."""
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(present="1")
    try:
        at.run()
        assert not at.exception
        speed = at.session_state["speed"]
        assert speed == presentation.PACE
        steps_per_second = int(speed) / scheduler.REFRESH_S
        assert 45 <= Config().total_steps / steps_per_second <= 90  # about a minute
        header = [s for s in at.main.selectbox if s.key == "speed"]
        assert len(header) == 1 and header[0].value == speed
        assert not [s for s in at.sidebar.select_slider if s.key == "speed"]

        header[0].set_value("500").run()  # the header's menu sets the run's speed
        assert at.session_state["speed"] == "500" and not at.exception
        header = [s for s in at.main.selectbox if s.key == "speed"]
        header[0].set_value(presentation.PACE).run()

        at.toggle(key="present").set_value(False).run()
        assert at.session_state["speed"] == "auto" and not at.exception
        assert [s for s in at.sidebar.select_slider if s.key == "speed"]
        assert not [s for s in at.main.selectbox if s.key == "speed"]
    finally:
        state._pause_all_runs()


def test_a_pace_chosen_in_a_link_stays():
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(present="1", speed="1000")
    try:
        at.run()
        assert at.session_state["speed"] == "1000" and not at.exception
    finally:
        state._pause_all_runs()


def test_a_lecture_figure_keeps_a_legend_under_the_plot_at_its_foot(monkeypatch):
    """Shrunk to the projector's height, a legend a fraction of the plot below it ran into the
    x-axis title (the Balancing chart at 1280 x 720): it sits at the figure's foot instead, where
    Plotly makes room for it; a legend above the plot stays where it is."""
    import numpy as np

    from lsbcore.studies import figures

    monkeypatch.setattr(presentation, "is_on", lambda: True)
    t = np.logspace(-3, 3, 11)
    below = figures.balancing_figure(t, {"barker": t / (1 + t), "max": np.maximum(1, t)})
    assert below.layout.legend.y < 0  # the page's own figure: under the plot
    big = presentation.figure(below)
    assert big.layout.height <= presentation.MAX_HEIGHT
    legend = big.layout.legend
    assert (legend.yref, legend.y, legend.yanchor) == ("container", 0, "bottom")
    assert below.layout.legend.yref is None  # the cached figure stays as it was

    above = figures.balancing_figure(t, {"barker": t / (1 + t)})
    above.update_layout(legend={"orientation": "h", "y": 1.15})
    assert presentation.figure(above).layout.legend.y == 1.15
