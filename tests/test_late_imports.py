"""The later libraries are imported only while no page run draws: a figure drawn while another
thread was half-way through importing pandas read "partially initialized module 'pandas' has no
attribute 'Series'" (tests/test_browser_prompt.py failed on it about one run in two)."""

from __future__ import annotations

import logging
import threading
import time
from types import SimpleNamespace

import pytest

from app import late_imports

HELD = 0.3  # how long a thread is watched for not getting on


@pytest.fixture
def imports(monkeypatch):
    """A fresh gate whose imports are recorded (and can be held half-way) instead of made."""
    for thread in threading.enumerate():  # an app test's real import, still under way
        if thread.name == "late-imports":
            thread.join(60)
    monkeypatch.setattr(late_imports, "_gate", {"drawing": 0, "importing": False, "done": False})
    monkeypatch.setattr(late_imports, "_depth", threading.local())
    monkeypatch.setattr(late_imports, "GATED", ("first", "second"))
    monkeypatch.setattr(late_imports, "PRELOADED", ("third",))
    record = SimpleNamespace(
        names=[], threads=set(), release=threading.Event(), started=threading.Event()
    )
    record.release.set()

    def import_module(name):
        record.started.set()
        record.threads.add(threading.current_thread().name)
        assert record.release.wait(10)
        record.names.append(name)

    monkeypatch.setattr(late_imports.importlib, "import_module", import_module)
    return record


def in_thread(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def page_run_drawing() -> tuple[threading.Thread, threading.Event]:
    """A page run in its own thread, drawing until the event returned is set."""
    drawn, leave = threading.Event(), threading.Event()

    def page_run():
        with late_imports.drawing():
            drawn.set()
            assert leave.wait(10)

    page = in_thread(page_run)
    assert drawn.wait(10)
    return page, leave


def test_an_import_waits_until_no_page_run_draws(imports):
    page, leave = page_run_drawing()
    importer = in_thread(late_imports.ensure)
    time.sleep(HELD)
    assert imports.names == [] and not late_imports._gate["done"]  # the run is still drawing
    leave.set()
    importer.join(10)
    page.join(10)
    assert imports.names == ["first", "second"] and late_imports._gate["done"]


def test_a_page_run_waits_for_an_import_under_way_and_draws_after_it(imports):
    imports.release.clear()
    importer = in_thread(late_imports.ensure)
    assert imports.started.wait(10)  # half-way through the first library
    seen = []

    def page_run():
        with late_imports.drawing():
            seen.append(list(imports.names))

    page = in_thread(page_run)
    time.sleep(HELD)
    assert seen == []  # held at the gate
    imports.release.set()
    page.join(10)
    importer.join(10)
    assert seen == [["first", "second"]]


def test_a_page_run_that_needs_them_imports_them_without_waiting_for_itself(imports):
    with late_imports.drawing():
        late_imports.ensure()  # would wait for itself if it still counted as drawing
        assert imports.names == ["first", "second"]
        with late_imports.drawing():  # a fragment drawn inside the page's run
            assert late_imports._gate["drawing"] == 1
    assert late_imports._gate["drawing"] == 0


def test_a_fragment_inside_a_drawing_run_does_not_wait_for_a_pending_import(imports):
    """The pending import waits for the run; the run's own fragment must not wait for it."""
    done = threading.Event()
    with late_imports.drawing():
        importer = in_thread(late_imports.ensure)
        deadline = time.perf_counter() + 10
        while not late_imports._gate["importing"] and time.perf_counter() < deadline:
            time.sleep(0.01)
        with late_imports.drawing():
            done.set()
        assert imports.names == []  # the import still waits for this run
    importer.join(10)
    assert done.is_set() and imports.names == ["first", "second"]


def test_a_failed_import_is_logged_and_opens_the_gate(imports, monkeypatch, caplog):
    def broken(name):
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(late_imports.importlib, "import_module", broken)
    with caplog.at_level(logging.ERROR, logger=late_imports.__name__):
        late_imports.ensure()
    assert "importing first failed" in caplog.text and "importing second failed" in caplog.text
    assert late_imports._gate["done"]
    with late_imports.drawing():  # no run waits for it any more
        pass


def test_the_background_import_starts_once(imports):
    imports.release.clear()
    thread = late_imports.in_background()
    assert imports.started.wait(10)
    assert late_imports.in_background() is None  # under way: not a second thread
    imports.release.set()
    thread.join(10)
    assert imports.names == ["first", "second", "third"]  # the gated ones, then the others
    assert late_imports.in_background() is None  # done


def test_no_page_run_waits_for_the_preloaded_libraries(imports, monkeypatch):
    """arviz-stats and scipy, which no figure reads from sys.modules, load with the gate open."""
    held, release = threading.Event(), threading.Event()

    def import_module(name):
        imports.names.append(name)
        if name == "third":
            held.set()
            assert release.wait(10)

    monkeypatch.setattr(late_imports.importlib, "import_module", import_module)
    thread = late_imports.in_background()
    assert held.wait(10)
    entered = threading.Event()

    def page_run():
        with late_imports.drawing():
            entered.set()

    in_thread(page_run)
    assert entered.wait(5)  # drawn while "third" is still loading
    release.set()
    thread.join(10)
    assert imports.names == ["first", "second", "third"]


def test_a_page_run_drawing_too_long_does_not_hold_the_import_for_good(
    imports, monkeypatch, caplog
):
    """A large build drawing for seconds: the import goes ahead after DRAWING_WAIT_S (said in
    the log) rather than hold every other visitor's page at the gate."""
    monkeypatch.setattr(late_imports, "DRAWING_WAIT_S", 0.2)
    page, leave = page_run_drawing()
    with caplog.at_level(logging.WARNING, logger=late_imports.__name__):
        late_imports.ensure()
    assert imports.names == ["first", "second"] and "while 1 page runs draw" in caplog.text
    leave.set()
    page.join(10)
    assert late_imports._gate["drawing"] == 0
