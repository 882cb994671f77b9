"""Pinned runs without a browser: the pin's JSON, its validation against hostile files, its
name, and the Compare view's tables (the on-disk store: tests/test_pin_store.py)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace

import numpy as np
import pytest
import torch
from app_support import open_app, stop_runs_fixture  # noqa: F401  (autouse)

from app import config as cfgmod
from app import pin_allowance, pin_store, pins, sources, state
from app.pin_store import PinStore
from app.pins import PinError
from app.views import compare
from lsbcore.number_text import number_text
from lsbcore.studies import figures


@pytest.fixture(scope="module")
def pin() -> pins.Pin:
    """A pin of a short run of paper case 1 that reached its mixing phase."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    cfg = replace(cfgmod.defaults_for("paper", 1), burn_in=20, steps=200, chains=2)
    run, _ = state.build_run(cfg, sources.build_problem(cfg))
    state.advance(run, 60.0, 120)
    state.slow_step(run, 0)  # P(move) comes from a slow-motion step
    try:
        return pins.capture(run, "case 1, λ 0")
    finally:
        state.pause(run)
        torch.set_num_threads(before)


def as_dict(pin: pins.Pin) -> dict:
    return json.loads(pin.to_json())


def refused(data) -> str:
    raw = data if isinstance(data, (bytes, str)) else json.dumps(data)
    with pytest.raises(PinError) as err:
        pins.from_json(raw)
    message = str(err.value)
    assert message.endswith(".") and "Traceback" not in message
    return message


# ----------------------------------------------------------------------------- the pin
def test_a_pin_keeps_config_summaries_and_figure_data_and_reads_back_identically(pin):
    assert pin.config.case == 1 and pin.phase == "mixing" and pin.steps == 121
    assert list(pin.samplers) == ["barker", "sqrt", "min", "max", "lsb1", "lsb2"]
    lsb1 = pin.samplers["lsb1"]
    assert 0 <= lsb1["accept_rate"] <= 1 and 0 <= lsb1["move_prob"] <= 1
    assert lsb1["ess_bulk"] > 0 and lsb1["ess_per_second"] > 0 and lsb1["wall_seconds"] > 0
    assert len(pin.acf["max"]) == pin.max_lag + 1 and pin.acf["max"][0] == pytest.approx(1.0)
    assert len(pin.g["sqrt"]) == len(pins.T_GRID)
    # sqrt's g(t) = sqrt(t) on the fixed grid
    assert np.allclose(pin.g["sqrt"], np.sqrt(pins.T_GRID), rtol=1e-5)
    assert set(pin.learned) == {"lsb1", "lsb2"} and sum(pin.weights) == pytest.approx(1.0, abs=1e-5)
    text = pin.to_json()
    assert len(text) < 50_000  # figure data, not traces
    assert pins.from_json(text) == pin
    assert pins.from_json(text.encode("utf-8")) == pin


def test_names_are_trimmed_and_bounded_and_markup_stays_text():
    assert pins.clean_name("  two\n\tlines \x00 ") == "two lines"
    markup = "<script>alert(1)</script> [x](https://e.org) **b**"
    assert pins.clean_name(markup) == markup  # kept as typed: shown only as plain text
    for bad in ("", "   ", "x" * (pins.NAME_CHARS + 1), 42, None):
        with pytest.raises(PinError):
            pins.clean_name(bad)


# bidirectional overrides, embeddings, isolates and marks, zero-width characters, the BOM
INVISIBLE = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
INVISIBLE += "\u200b\u200c\u200d\u2060\ufeff"


def test_names_lose_bidirectional_and_zero_width_characters_and_controls_become_spaces():
    assert pins.clean_name("invoice\u202egnp.exe") == "invoicegnp.exe"  # no reversed text
    assert pins.clean_name("run\u200b1") == pins.clean_name("run1") == "run1"  # no look-alikes
    assert pins.clean_name("bell\x07ring\x85s") == "bell ring s"  # C0 and C1 controls
    assert pins.clean_name(f"a{INVISIBLE}b") == "ab"
    with pytest.raises(PinError, match="needs a name"):
        pins.clean_name(INVISIBLE)


def test_an_uploaded_pin_s_name_and_problem_are_cleaned_the_same_way(pin):
    data = as_dict(pin)
    data["name"] = "evil\u202egnp.exe\u2066"
    data["problem"] = "case\u200b 1\u202e\x07"
    read = pins.from_json(json.dumps(data))
    assert read.name == "evilgnp.exe" and read.problem == "case 1 "


def test_run_names_are_escaped_in_figure_legends():
    fig = figures.pinned_bars_figure({'<a href="x">run</a>': {"sqrt": 1.0}}, "t", "y")
    assert fig.data[0].name == '&lt;a href="x"&gt;run&lt;/a&gt;'
    assert "<a" not in fig.data[0].hovertemplate


def test_grouped_bars_say_n_a_for_missing_values_and_no_data_when_empty():
    fig = figures.pinned_bars_figure(
        {"a": {"sqrt": None, "max": 2.0}, "b": {"sqrt": 1.5}}, "t", "y"
    )
    assert [list(bar.text) for bar in fig.data] == [["n/a", "2"], ["1.5", "n/a"]]
    assert fig.data[0].marker.pattern.shape != fig.data[1].marker.pattern.shape
    empty = figures.pinned_bars_figure({}, "t", "y")
    assert empty.layout.annotations[0].text == "no data yet"
    weights = figures.pinned_weights_figure({"a": np.array([0.1, 0.2, 0.3, 0.4]), "b": None})
    assert len(weights.data) == 1 and list(weights.data[0].y) == [0.1, 0.2, 0.3, 0.4]


HOSTILE = {
    "a huge ESS": lambda d: d["samplers"]["sqrt"].update(ess_bulk=1e300),
    "a string for a number": lambda d: d["samplers"]["sqrt"].update(rhat="1.0"),
    "a bool for a number": lambda d: d["samplers"]["sqrt"].update(rhat=True),
    "a list for the summaries": lambda d: d.update(samplers=[1, 2]),
    "an unknown sampler": lambda d: d["samplers"].update(evil={}),
    "a sampler the run did not have": lambda d: d["acf"].update(gibbs=[1.0]),
    "an unknown field": lambda d: d.update(extra=1),
    "another format": lambda d: d.update(format="something/else"),
    "a future version": lambda d: d.update(version=2),
    "a long name": lambda d: d.update(name="x" * 500),
    "a name that is not text": lambda d: d.update(name=["a"]),
    "a lambda out of range": lambda d: d["config"].update(lam=1e9),
    "a case that does not exist": lambda d: d["config"].update(case=9),
    "a setting that is not one": lambda d: d["config"].update(evil=1),
    "a missing setting": lambda d: d["config"].pop("lam"),
    "a nested setting": lambda d: d["config"].update(seed={"a": 1}),
    "steps as text": lambda d: d.update(steps="100"),
    "negative steps": lambda d: d.update(steps=-1),
    "an autocorrelation above 1": lambda d: d["acf"]["max"].__setitem__(3, 7.0),
    "a too long autocorrelation": lambda d: d["acf"].update(max=[0.5] * 5000),
    "g(t) on another grid": lambda d: d["g"].update(sqrt=[1.0, 2.0]),
    "a negative g(t)": lambda d: d["g"]["sqrt"].__setitem__(0, -1.0),
    "weights that do not sum to 1": lambda d: d.update(weights=[0.5, 0.5, 0.5, 0.5]),
    "a learned function with wild parameters": lambda d: d["learned"]["lsb1"]["parameters"].update(
        theta=[1e6, 0, 0, 0]
    ),
    "a learned function for a fixed sampler": lambda d: d["learned"].update(
        sqrt=d["learned"]["lsb1"]
    ),
    "padding beside a learned function": lambda d: d["learned"]["lsb1"].update(pad="x" * 900),
    "padding among its parameters": lambda d: d["learned"]["lsb2"]["parameters"].update(
        pad=[0.0] * 1000
    ),
    "a note on a learned function": lambda d: d["learned"]["lsb1"].update(meta={"a": 1}),
    "a learned function as a path": lambda d: d["learned"].update(lsb1="/etc/passwd"),
    "a creation time in the future": lambda d: d.update(created=time.time() + 1e7),
    "a problem name of a megabyte": lambda d: d.update(problem="p" * 300),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_pin_file_is_refused_with_a_sentence(pin, case):
    data = as_dict(pin)
    HOSTILE[case](data)
    refused(data)


def test_a_pin_padded_to_a_megabyte_under_learned_is_refused_in_a_sentence(pin):
    """The red team's padding: an extra key under learned.<sampler> grew a pin to ~1 MB."""
    data = as_dict(pin)
    data["learned"]["lsb2"]["junk"] = "x" * (pins.MAX_BYTES - len(json.dumps(data)) - 100)
    assert len(json.dumps(data)) < pins.MAX_BYTES
    message = refused(data)
    assert "learned function of lsb2" in message and "'junk'" in message


def test_malformed_files_are_refused_before_they_cost_anything(pin):
    text = pin.to_json()
    assert "NaN" in refused(text.replace('"rhat":null', '"rhat":NaN', 1))
    assert "Infinity" in refused(text.replace('"rhat":null', '"rhat":Infinity', 1))
    assert "digits" in refused(text.replace('"steps":121', '"steps":' + "9" * 5000))
    assert "too large" in refused(text.replace('"steps":121', '"steps":1e999'))
    assert "kB" in refused(b" " * (pins.MAX_BYTES + 1))
    assert "UTF-8" in refused(b"\xff\xfe\x00garbage")
    assert "levels deep" in refused("[" * 100_000)  # nesting deeper than the parser allows
    assert "JSON" in refused("{not json")
    assert "object" in refused("[1, 2, 3]")
    with pytest.raises(PinError):
        pins.from_json(12)


def test_the_configuration_error_is_the_sidebars_sentence_without_markdown_escapes(pin):
    data = as_dict(pin)
    data["config"]["boundary"] = "[evil](https://e.org)"
    message = refused(data)
    assert "boundary" in message and "\\" not in message


# ----------------------------------------------------------------------------- compare
def test_the_difference_table_names_only_the_settings_that_differ(pin):
    other = replace(pin, config=replace(pin.config, case=4, lam=0.5), steps=300, problem="other")
    rows = compare.differences({"1. a": pin, "2. b": other})
    settings = [r["setting"] for r in rows]
    assert settings == ["problem", "paper case", "λ", "steps done"]
    assert rows[1] == {"setting": "paper case", "1. a": "1", "2. b": "4"}
    assert rows[2]["1. a"] == "0" and rows[2]["2. b"] == "0.5"
    assert compare.differences({"1. a": pin, "2. b": pin}) == []


def test_the_summary_table_has_every_sampler_of_every_run(pin):
    fewer = replace(pin, samplers={"sqrt": pin.samplers["sqrt"]})
    rows = compare.summary_rows({"1. a": pin, "2. b": fewer})
    assert len(rows) == len(pin.samplers) + 1
    sqrt = [r for r in rows if r["sampler"] == figures.sampler_label("sqrt")]
    assert [r["run"] for r in sqrt] == ["1. a", "2. b"]
    assert sqrt[0]["bulk ESS"] == number_text(pin.samplers["sqrt"]["ess_bulk"], 4)
    missing = replace(fewer, samplers={"sqrt": {**pin.samplers["sqrt"], "move_prob": None}})
    row = compare.summary_rows({"1. a": missing})[0]
    assert row["P(move)"] == "—" and None not in row.values()  # never the word None


def test_a_visitor_whose_pins_expired_is_told_so_on_the_compare_tab(pin, tmp_path, monkeypatch):
    """Not just "No pinned runs yet": the page says the pins expired, and when they do."""
    monkeypatch.setattr(pin_store, "ROOT", tmp_path)
    token = pin_store.new_token()
    store = PinStore(token)
    day_ago = time.time() - pin_store.MAX_AGE_S - 60
    for pin_id in [store.save(pin) for _ in range(3)]:
        os.utime(store.dir / f"{pin_id}.json", (day_ago, day_ago))
    at = open_app(pins=token)
    at.session_state["view"] = "Compare"
    at.run()
    assert not at.exception and not at.error
    info = " | ".join(str(e.value) for e in at.info)
    assert "Your 3 pins expired: pins are kept 24 hours after they were last written." in info
    assert "No pinned runs yet" in info


def test_pins_switched_off_say_why_and_a_refused_pin_is_offered_as_json(pin, tmp_path, monkeypatch):
    """A pin folder that is a symbolic link: the page says pins are off and works on; the Pin
    button's run is refused in a sentence and offered as a download, so nothing is lost."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "pins").symlink_to(real)
    monkeypatch.setattr(pin_store, "ROOT", tmp_path / "pins")
    at = open_app(case="2", burn_in="10", steps="40", chains="2")
    assert not at.exception and not at.error
    assert "Runs cannot be pinned: pins are switched off" in " | ".join(
        str(e.value) for e in at.info
    )
    at.text_input(key="pin_name").input("kept anyway")
    at.button(key="pin_save").click().run()
    assert not at.exception
    (error,) = [str(e.value) for e in at.error]
    assert error.startswith("This run cannot be pinned: pins are switched off")
    (download,) = [
        d for d in at.get("download_button") if d.proto.label.startswith("Download this")
    ]
    assert "pins" not in at.query_params and not any(real.iterdir())


def test_a_tab_past_its_rate_is_told_when_it_may_pin_again_and_a_page_run_marks_its_set_used(
    tmp_path, monkeypatch
):
    """The Pin button names its visitor: a tab past its rate (one write a minute here) gets
    the allowance's sentence and the pin as JSON; each run of the page keeps its set in use."""
    monkeypatch.setattr(pin_store, "ROOT", tmp_path)
    monkeypatch.setitem(pin_allowance.LIMITS, "browser tab", pin_allowance.Limit(1, 1, 3_000_000))
    at = open_app(case="2", burn_in="10", steps="40", chains="2")
    at.text_input(key="pin_name").input("first")
    at.button(key="pin_save").click().run()
    assert not at.exception and [str(e.value) for e in at.success] == [
        "Pinned “first”: see the Compare tab."
    ]
    at.text_input(key="pin_name").input("second")
    at.button(key="pin_save").click().run()
    assert not at.exception
    (error,) = [str(e.value).replace("\\", "") for e in at.error]  # as Markdown escapes it
    assert error.startswith(
        "This run cannot be pinned: this browser tab has pinned, renamed or uploaded 1 pin in "
        "the last minute, the most one browser tab may, so you can pin again in "
    )
    assert error.endswith(" seconds.")
    assert [d for d in at.get("download_button") if d.proto.label.startswith("Download this")]
    store = at.session_state[pin_store.STATE_KEY]
    assert [e.pin.name for e in store.entries()] == ["first"]
    two_hours_ago = time.time() - 2 * 3600
    os.utime(store.dir, (two_hours_ago, two_hours_ago))
    at.run()
    assert time.time() - os.stat(store.dir).st_mtime < 60


def test_the_suggested_name_and_the_tab_named_follow_the_page():
    from types import SimpleNamespace

    from app import pin_controls

    def run(target, name, **settings):
        cfg = replace(cfgmod.defaults_for(target=target), seed=3, **settings)
        return SimpleNamespace(config=cfg, problem=SimpleNamespace(name=name), n_steps=1200)

    assert pin_controls.default_name(run("mn2", "MN 2", epsilon=0.01)) == (
        "MN 2 · ε 0.01 · 5 chains · seed 3 · step 1,200"
    )
    assert pin_controls.default_name(run("uai", "grid.uai")) == (
        "grid.uai · 5 chains · seed 3 · step 1,200"
    )
    assert pin_controls.default_name(run("digits-8x8", "digits 8 × 8")).startswith(
        "digits 8 × 8 · 8 chains"
    )
    assert [pin_controls.pins_view(t) for t in ("ising", "digits-8x8", "mn1", "uai")] == [
        "Compare",
        "Pinned runs",
        "Pinned runs",
        "Pinned runs",
    ]
