"""What the AppTest modules share: opening the app script with a link's query, and a fixture
that keeps one intra-op thread (as the app sets) and pauses every run a test started.

Test modules import ``open_app`` and the fixture function (``stop_runs_fixture``); pytest
knows it by its name ``stop_runs`` and, being autouse, runs it around every test there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from app import state

APP = Path(__file__).resolve().parent.parent / "app" / "streamlit_app.py"


@pytest.fixture(autouse=True, name="stop_runs")
def stop_runs_fixture():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    # every run built in the test (by the app or directly) is still live: none samples on
    state._pause_all_runs()
    torch.set_num_threads(before)


def open_app(**query: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(query)
    return at.run()
