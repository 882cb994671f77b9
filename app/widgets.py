"""Keyed widgets whose value lives in Session State: give it a valid value before drawing.

Widgets here are created without ``value=``/``index=`` and read their value from
``st.session_state[key]``; ``ensure`` puts a valid value there first (a default, or a repair
when a range shrank), which avoids Streamlit's "default value and Session State" conflict and
lets query parameters and callbacks set widgets the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st


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
