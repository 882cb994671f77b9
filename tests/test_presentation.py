"""Presentation mode's sidebar: the state a fresh page takes follows the switch, and a page that
never turned the mode on keeps Streamlit's "auto" (collapsed on a phone), rerun after rerun."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from streamlit.testing.v1 import AppTest

from app import state

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
