"""Pinned runs without a browser: the pin's JSON, its validation against hostile files, the
on-disk store's tokens, bounds and cleanup, and the Compare view's tables."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace

import numpy as np
import pytest
import torch

from app import config as cfgmod
from app import pin_store, pins, sources, state
from app.pin_store import PinStore
from app.pins import PinError
from app.views import compare
from lsbcore import figures
from lsbcore.number_text import number_text

TOKEN = "0123456789abcdef0123456789abcdef"


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


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setattr(pin_store, "ROOT", tmp_path)
    monkeypatch.setattr(pin_store, "SWEEP_EVERY_S", 0.0)  # every access sweeps
    return tmp_path


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
    "a creation time in the future": lambda d: d.update(created=time.time() + 1e7),
    "a problem name of a megabyte": lambda d: d.update(problem="p" * 300),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_pin_file_is_refused_with_a_sentence(pin, case):
    data = as_dict(pin)
    HOSTILE[case](data)
    refused(data)


def test_malformed_files_are_refused_before_they_cost_anything(pin):
    text = pin.to_json()
    assert "NaN" in refused(text.replace('"rhat":null', '"rhat":NaN', 1))
    assert "Infinity" in refused(text.replace('"rhat":null', '"rhat":Infinity', 1))
    assert "digits" in refused(text.replace('"steps":121', '"steps":' + "9" * 5000))
    assert "too large" in refused(text.replace('"steps":121', '"steps":1e999'))
    assert "kB" in refused(b" " * (pins.MAX_BYTES + 1))
    assert "UTF-8" in refused(b"\xff\xfe\x00garbage")
    assert "JSON" in refused("[" * 100_000)  # nesting deeper than the parser allows
    assert "JSON" in refused("{not json")
    assert "object" in refused("[1, 2, 3]")
    with pytest.raises(PinError):
        pins.from_json(12)


def test_the_configuration_error_is_the_sidebars_sentence_without_markdown_escapes(pin):
    data = as_dict(pin)
    data["config"]["boundary"] = "[evil](https://e.org)"
    message = refused(data)
    assert "boundary" in message and "\\" not in message


# ----------------------------------------------------------------------------- the store
def test_tokens_are_exactly_32_lowercase_hex_digits():
    assert pin_store.valid_token(pin_store.new_token())
    assert pin_store.new_token() != pin_store.new_token()
    for bad in ("", TOKEN[:-1], TOKEN + "0", TOKEN.upper(), "../" + TOKEN[3:], "0" * 31 + "/",
                f"{TOKEN}\n", None, 123, ["a"]):  # fmt: skip
        assert not pin_store.valid_token(bad)
        with pytest.raises(ValueError):
            PinStore(bad)


def test_a_link_token_opens_its_set_and_says_so_when_it_cannot(root, pin):
    assert pin_store.open_link(None, root) == (None, None)  # a fresh page: nothing to say
    store, why = pin_store.open_link("../../etc/passwd", root)
    assert store is None and "not a pin-set token" in why
    assert not (root / "etc").exists()
    store, why = pin_store.open_link(TOKEN, root)
    assert store is None and "No pinned runs are stored under this link" in why
    PinStore(TOKEN, root).save(pin)
    store, why = pin_store.open_link([TOKEN], root)
    assert why is None and [e.pin for e in store.entries()] == [pin]
    assert pin_store.query_params({pin_store.STATE_KEY: store}) == {"pins": TOKEN}
    assert pin_store.query_params({}) == {}


def test_pins_are_saved_renamed_and_deleted_and_ids_never_leave_the_set(root, pin):
    store = PinStore(TOKEN, root)
    first = store.save(pin)
    second = store.save(pins.from_json(pin.to_json()).renamed("second"))
    assert [e.pin.name for e in store.entries()] == ["case 1, λ 0", "second"]
    store.rename(first, "  renamed\n")
    assert store.get(first).name == "renamed" and store.get(first).samplers == pin.samplers
    with pytest.raises(PinError):
        store.rename(first, "x" * 100)
    store.delete(second)
    assert [e.pin_id for e in store.entries()] == [first]
    for bad in ("../x", f"../{TOKEN}/{first}", first.upper(), ""):
        with pytest.raises(KeyError):
            store.delete(bad)


def test_gaps_in_a_curve_read_back_and_an_unreadable_pin_is_refused_before_it_is_kept(root, pin):
    store = PinStore(TOKEN, root)
    gaps = replace(pin, acf={**pin.acf, "max": [1.0, None, 0.5]})
    assert store.get(store.save(gaps)).acf["max"] == [1.0, None, 0.5]
    learned = json.loads(json.dumps(pin.learned))
    learned["lsb1"]["parameters"]["theta"] = [2e4, 0.0, 0.0, 0.0]  # a learner that diverged
    with pytest.raises(PinError, match="learned function of lsb1"):
        store.save(replace(pin, learned=learned))
    assert len(store.entries()) == 1


def test_a_session_keeps_at_most_eight_pins_each_under_a_megabyte(root, pin, monkeypatch):
    store = PinStore(TOKEN, root)
    for k in range(pin_store.MAX_PINS):
        store.save(pin.renamed(f"pin {k}"))
    with pytest.raises(PinError, match="at most 8"):
        store.save(pin)
    assert len(store.entries()) == pin_store.MAX_PINS
    monkeypatch.setattr(pins, "MAX_BYTES", 1000)
    with pytest.raises(PinError, match="exceed"):
        PinStore("f" * 32, root).save(pin)
    assert not any((root / ("f" * 32)).glob("*.json"))


def test_a_full_store_drops_the_oldest_pins_of_other_sessions_first(root, pin, monkeypatch):
    size = len(pin.to_json().encode())
    old, mine = PinStore("a" * 32, root), PinStore(TOKEN, root)
    old_ids = [old.save(pin) for _ in range(3)]
    for k, pin_id in enumerate(old_ids):  # written an hour ago, oldest first
        os.utime(old.dir / f"{pin_id}.json", (time.time() - 3600 + k, time.time() - 3600 + k))
    monkeypatch.setattr(pin_store, "MAX_STORE_BYTES", 3 * size + size // 2)
    mine.save(pin)
    remaining = [e.pin_id for e in old.entries()]
    assert remaining == old_ids[1:]  # only the oldest went
    mine.save(pin)
    mine.save(pin)
    assert old.entries() == [] and len(mine.entries()) == 3
    with pytest.raises(PinError, match="full"):  # its own pins are never dropped for itself
        mine.save(pin)


def test_pins_older_than_a_day_are_deleted_on_access(root, pin):
    store = PinStore(TOKEN, root)
    stale, fresh = store.save(pin), store.save(pin)
    day_ago = time.time() - pin_store.MAX_AGE_S - 60
    os.utime(store.dir / f"{stale}.json", (day_ago, day_ago))
    assert [e.pin_id for e in store.entries()] == [fresh]
    assert not (store.dir / f"{stale}.json").exists()
    # another session's: the sweep on opening any link deletes its stale pins and, once empty
    # for a day, its directory; a fresh session's stays
    other = PinStore("b" * 32, root)
    gone = other.save(pin)
    os.utime(other.dir / f"{gone}.json", (day_ago, day_ago))
    os.utime(other.dir, (day_ago, day_ago))
    empty_fresh = PinStore("c" * 32, root)
    empty_fresh.create()
    pin_store.open_link(TOKEN, root)
    assert not other.dir.exists() and empty_fresh.dir.exists()
    assert [e.pin_id for e in store.entries()] == [fresh]


def test_the_number_of_sessions_is_bounded(root, pin, monkeypatch):
    monkeypatch.setattr(pin_store, "MAX_SESSIONS", 3)
    tokens = [f"{k:032x}" for k in range(4)]
    for k, token in enumerate(tokens):
        store = PinStore(token, root)
        store.save(pin)
        os.utime(store.dir, (time.time() - 100 + k, time.time() - 100 + k))
    PinStore("e" * 32, root).save(pin)
    left = sorted(p.name for p in root.iterdir())
    assert left == sorted([*tokens[2:], "e" * 32])  # the two least recently written went


def test_a_corrupt_file_in_the_store_is_skipped_not_fatal(root, pin):
    store = PinStore(TOKEN, root)
    good = store.save(pin)
    (store.dir / "0123456789abcdef.json").write_text("{broken", encoding="utf-8")
    (store.dir / "notes.txt").write_text("ignored", encoding="utf-8")
    assert [e.pin_id for e in store.entries()] == [good]


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
