"""Streamlit's table, drawn after pandas is imported through the gate (``app.late_imports``):
``st.dataframe`` imports pandas on first use, which a figure drawn meanwhile on another page
run would find half-initialised."""

from __future__ import annotations

import streamlit as st

from app import late_imports


def dataframe(data, **kwargs):
    late_imports.ensure()
    return st.dataframe(data, **kwargs)
