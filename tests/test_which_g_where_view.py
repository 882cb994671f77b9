"""The Which g where tab: it draws the shipped map on the Ising page, a chosen point shows the
winner and the means of the map document, uploads of results or maps replace it (bad ones say
why in a sentence and the shipped map stays), "Open in the live views" puts the point's
configuration in the run (twice), and its link parameters are validated."""

from __future__ import annotations

import json
import math
import re
import sqlite3
import tempfile

import pytest
import torch

from app import config as cfgmod
from app import sources
from app.views import which_g_where as wg
from lsbcore.studies.experiment.run import build_problem
from lsbcore.studies.figures import sampler_label
from lsbcore.studies.sweep import ResultStore, SweepGrid
from lsbcore.studies.sweep.cell import RESULT_FIELDS, problem_of
from lsbcore.studies.sweep.grid import Cell, Protocol
from tests.app_support import open_app, stop_runs_fixture  # noqa: F401 (autouse fixture)

TAB = "Which g where"
SHIPPED = json.loads(wg.SHIPPED.read_text(encoding="utf-8"))
PROTOCOL = Protocol(size=16, chains=2, burn_in=10, steps=100, max_lag=10)
# hand-made ESS per 1,000 evaluations by (lambda, sampler): max wins at 2, barker at 0
MADE = {(0.0, "barker"): 9.0, (0.0, "max"): 3.0, (2.0, "barker"): 1.0, (2.0, "max"): 6.0}


def _result(value: float) -> dict:
    out = {name: 1.0 for name in RESULT_FIELDS}
    out.update(ess_per_kevals=value, notes="", worker="test:1")
    return out


def box(at, label: str):
    """The λ or σ box (its key changes with every click on the map)."""
    return next(s for s in at.selectbox if s.label == label)


def results_file(path, rows=MADE) -> bytes:
    """A sweep's results file of the square target at sigma 1.5, mu 1, three seeds."""
    grid = SweepGrid(
        targets=("square",),
        lam=(0.0, 2.0),
        sigma=(1.5,),
        samplers=("barker", "max"),
        seeds=(0, 1, 2),
        protocol=PROTOCOL,
    )
    store = ResultStore(path)
    store.start_run(grid, "local", 1)
    for (lam, sampler), value in rows.items():
        for seed in (0, 1, 2):
            cell = Cell("square", lam, 1.0, 1.5, sampler, seed, PROTOCOL)
            assert store.write(cell, _result(value + 0.1 * seed))
    store.end_run("done")
    store.close()
    return path.read_bytes()


def the_run(at):
    return at.session_state["_run"]


def texts(elements) -> str:
    """The elements' text as a reader sees it (markdown escapes removed)."""
    return re.sub(r"\\(.)", r"\1", " ".join(str(e.value) for e in elements))


def healthy(at) -> None:
    assert not at.exception, at.exception
    assert not [e.value for e in at.error], [e.value for e in at.error]


def open_tab(**query):
    at = open_app(size="16", chains="2", samplers="barker", view=TAB, **query)
    assert not at.exception, at.exception
    return at


def bar_heights(at) -> list[float]:
    """The ranking figure's bars (its title names the point)."""
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        data = spec["data"]
        if data and data[0].get("type") == "bar":
            return [float(v) for v in data[0]["y"]]
    raise AssertionError("no ranking figure")


def test_the_tab_draws_the_shipped_map_on_the_ising_page():
    at = open_tab()
    healthy(at)
    assert "Showing the shipped map" in texts(at.caption)
    panels = SHIPPED["panels"]
    assert at.selectbox(key="wg_panel").options == [wg.panel_label(p) for p in panels]
    assert [float(v) for v in box(at, "λ").options] == panels[0]["lam"]
    assert at.button(key="wg_open").label == "Open in the live views"


@pytest.mark.parametrize("panel_index", range(len(SHIPPED["panels"])))
def test_a_chosen_point_shows_the_map_documents_winner_and_means(panel_index):
    panel = SHIPPED["panels"][panel_index]
    point = panel["points"][-1]  # the largest lambda and sigma
    at = open_tab()
    at.selectbox(key="wg_panel").set_value(panel_index + 1).run()
    box(at, "λ").set_value(point["lam"]).run()
    box(at, "σ").set_value(point["sigma"]).run()
    healthy(at)
    means = point["means"]
    winner = max(means, key=lambda s: means[s])  # the document's highest mean, by hand
    headline = texts(at.markdown)
    where = f"λ = {point['lam']:g}, σ = {point['sigma']:g}"
    assert f"{where}**: winner **{sampler_label(winner)}**" in headline
    shown = [s for s in SHIPPED["samplers"] if s in means]
    assert bar_heights(at) == pytest.approx([means[s] for s in shown])


def test_a_click_on_a_cell_reads_its_lambda_and_sigma():
    assert wg.picked_point([{"customdata": [1.5, 3.0], "x": 3, "y": 2}]) == (1.5, 3.0)
    assert wg.picked_point([{"customdata": {"0": 0.5, "1": 2.0}}]) == (0.5, 2.0)
    assert wg.picked_point([{"x": 1, "y": 1}, "junk", {"customdata": ["a", 1]}]) is None
    assert wg.picked_point([{"customdata": [float("nan"), 1.0]}]) is None


def test_an_uploaded_results_file_is_mapped_and_its_point_ranked(tmp_path):
    data = results_file(tmp_path / "mine.sqlite")
    at = open_tab()
    at.file_uploader(key="wg_upload").upload("mine.sqlite", data, "application/octet-stream")
    at.run()
    healthy(at)
    assert "Showing “mine.sqlite”: 1 panel, samplers t/(1+t), max(1,t)" in texts(at.caption)
    assert "wg_panel" not in [s.key for s in at.selectbox]  # one panel: no panel picker
    box(at, "λ").set_value(2.0).run()
    healthy(at)
    assert "winner **max(1,t)**" in texts(at.markdown)
    assert bar_heights(at) == pytest.approx([1.1, 6.1])  # seeds 0, 1, 2 add 0, 0.1, 0.2
    box(at, "λ").set_value(0.0).run()
    assert "winner **t/(1+t)**" in texts(at.markdown)


def test_an_uploaded_map_json_replaces_the_shipped_one():
    doc = json.loads(json.dumps(SHIPPED))
    doc["panels"] = doc["panels"][1:2]  # one panel, whatever the shipped map holds
    doc["notes"] = ["a note of the uploaded map"]
    at = open_tab()
    at.file_uploader(key="wg_upload").upload("map.json", json.dumps(doc).encode(), "text/json")
    at.run()
    healthy(at)
    captions = texts(at.caption)
    assert "Showing “map.json”: 1 panel," in captions
    assert "a note of the uploaded map" in captions


@pytest.mark.parametrize(
    ("name", "data", "says"),
    [
        ("junk.sqlite", b"SQLite format 3\x00" + b"\x01" * 300, "cannot be read"),
        ("words.json", b"this is not a map", "neither a sweep's results file"),
        ("other.json", b'{"format": "something else"}', "not a 'which g where' map"),
        ("empty.json", b"", "is empty"),
    ],
)
def test_a_bad_upload_says_why_and_the_shipped_map_stays(name, data, says):
    at = open_tab()
    at.file_uploader(key="wg_upload").upload(name, data, "application/octet-stream")
    at.run()
    assert not at.exception, at.exception
    errors = texts(at.error)
    assert says in errors and "Showing the shipped map" in errors, errors
    assert "Traceback" not in errors
    assert "Showing the shipped map" in texts(at.caption)


def test_a_results_file_without_finished_cells_says_so(tmp_path):
    data = results_file(tmp_path / "empty.sqlite", rows={})
    with pytest.raises(ValueError, match="holds no finished cell"):
        wg.load_upload("empty.sqlite", data)
    at = open_tab()
    at.file_uploader(key="wg_upload").upload("empty.sqlite", data, "application/octet-stream")
    at.run()
    assert not at.exception
    assert "holds no finished cell" in texts(at.error)
    assert "Showing the shipped map" in texts(at.caption)


def test_an_sqlite_file_that_is_not_a_sweeps_results_says_so(tmp_path):
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    with pytest.raises(ValueError, match="is not a sweep") as err:
        wg.load_upload("other.sqlite", path.read_bytes())
    message = str(err.value)  # the user's file name, not the server's temporary copy
    assert message.startswith("“other") and tempfile.gettempdir() not in message


def test_an_uploaded_results_file_with_an_endless_view_is_refused_in_a_sentence(tmp_path):
    """The red team's 8 kB file (issue 47) grew the server by 2 GB in 12 s: now a sentence."""
    from hostile_files import endless_view_file

    data = endless_view_file(tmp_path / "endless.sqlite").read_bytes()
    at = open_tab()
    at.file_uploader(key="wg_upload").upload("endless.sqlite", data, "application/octet-stream")
    at.run(timeout=30)
    assert not at.exception
    errors = texts(at.error)
    assert "not a plain table" in errors and "Showing the shipped map" in errors, errors


def test_an_oversized_upload_is_refused_before_it_is_read(monkeypatch):
    monkeypatch.setattr(wg, "MAX_UPLOAD_BYTES", 100)
    with pytest.raises(ValueError, match="is over"):
        wg.load_upload("big.json", b"{" + b" " * 200 + b"}")


def test_open_in_the_live_views_sets_the_run_to_the_point_twice():
    at = open_tab()
    square = next(i for i, p in enumerate(SHIPPED["panels"]) if p["target"] == "square")
    panel = SHIPPED["panels"][square]
    # first: the square target at its middle lambda and largest sigma
    lam, sigma = panel["lam"][1], panel["sigma"][-1]
    at.selectbox(key="wg_panel").set_value(square + 1).run()
    box(at, "λ").set_value(lam).run()
    box(at, "σ").set_value(sigma).run()
    at.button(key="wg_open").click().run()
    healthy(at)
    cfg = the_run(at).config
    assert (cfg.source, cfg.lam, cfg.mu, cfg.sigma) == ("paper", lam, panel["mu"], sigma)
    assert cfg.samplers == tuple(SHIPPED["samplers"])
    assert cfg.chains == SHIPPED["protocol"]["chains"]
    assert cfg.size == max(SHIPPED["protocol"]["size"], cfgmod.BOUNDS["size"][1])
    assert at.session_state["view"] == "Chains"
    assert at.query_params["lam"] == repr(lam) and at.query_params["source"] == "paper"
    clamped = SHIPPED["protocol"]["size"] < cfgmod.BOUNDS["size"][1]
    assert ("working resolution" in texts(at.info)) == clamped  # a clamped size is said
    # second: back to the tab, a sample photo's panel at other values
    other = next(i for i, p in enumerate(SHIPPED["panels"]) if p["target"] != "square")
    panel = SHIPPED["panels"][other]
    lam, sigma = panel["lam"][-1], panel["sigma"][0]
    at.session_state["view"] = TAB
    at.run()
    at.selectbox(key="wg_panel").set_value(other + 1).run()
    box(at, "λ").set_value(lam).run()
    box(at, "σ").set_value(sigma).run()
    at.button(key="wg_open").click().run()
    healthy(at)
    cfg = the_run(at).config
    assert (cfg.source, cfg.sample, cfg.model, cfg.polarity) == (
        "sample",
        panel["target"],
        "threshold",
        "bright",
    )
    assert (cfg.lam, cfg.mu, cfg.sigma) == (lam, panel["mu"], sigma)
    assert at.session_state["view"] == "Chains"
    assert at.query_params["sample"] == panel["target"]


def test_a_sample_point_opens_the_sweeps_own_posterior():
    """The dashboard's threshold model with the object bright is the sweep cell's posterior:
    the same alpha, pixel for pixel, and the same lambda."""
    doc = {"protocol": {**PROTOCOL.__dict__, "size": 24}, "samplers": ["barker"], "seeds": [5]}
    cfg, notes = wg.live_config(
        doc,
        {"target": "horse", "mu": 1.5},
        {"lam": 0.5, "sigma": 2.0},
        sources.sample_names(),
        cfgmod.Config(),
    )
    assert notes == [] and cfg.size == 24 and cfg.seed == 5
    app_problem = sources.build_problem(cfg, sources.load_sample("horse", cfg.size))
    cell = Cell("horse", 0.5, 1.5, 2.0, "barker", 5, Protocol(24, 2, 10, 100, 10))
    sweep_problem = build_problem(problem_of(cell))
    assert torch.equal(app_problem.target.alpha.squeeze(), sweep_problem.target.alpha.squeeze())
    assert app_problem.target.lam == sweep_problem.target.lam == 0.5


def test_a_point_outside_the_dashboards_bounds_is_clamped_and_said():
    doc = {"protocol": PROTOCOL.__dict__, "samplers": ["max"], "seeds": [0]}
    cfg, notes = wg.live_config(
        doc, {"target": "square", "mu": -4.0}, {"lam": 50.0, "sigma": 2.0}, (), cfgmod.Config()
    )
    assert (cfg.lam, cfg.mu) == (cfgmod.BOUNDS["lam"][2], 0.0)
    assert any("λ" in n for n in notes) and any("μ" in n for n in notes)
    cfg, notes = wg.live_config(
        doc, {"target": "nowhere", "mu": 1.0}, {"lam": 1.0, "sigma": 2.0}, (), cfgmod.Config()
    )
    assert cfg is None and "not a sample of this install" in notes[0]


def test_link_parameters_choose_the_point_and_bad_ones_warn():
    panel = SHIPPED["panels"][1]
    at = open_tab(wg_panel="2", wg_lam=str(panel["lam"][2]), wg_sigma=str(panel["sigma"][1]))
    healthy(at)
    assert at.selectbox(key="wg_panel").value == 2
    assert float(box(at, "λ").value) == panel["lam"][2]
    assert float(box(at, "σ").value) == panel["sigma"][1]
    at = open_tab(wg_lam="abc", wg_sigma="-3", wg_panel="0")
    assert not at.exception
    warnings = texts(at.warning)
    assert "which-g-where λ: “abc” is not a number; using the default" in warnings
    assert "which-g-where σ" in warnings and "which-g-where panel" in warnings
    first = SHIPPED["panels"][0]
    assert at.selectbox(key="wg_panel").value == 1
    assert float(box(at, "λ").value) == first["lam"][0]  # the default, 0
    assert float(box(at, "σ").value) == min(first["sigma"])  # nearest 1e-3
    assert math.isfinite(float(box(at, "σ").value))


def _in_order(node) -> list:
    """The elements under ``node`` in page order."""
    out = []
    for child in getattr(node, "children", {}).values():
        out.append(child)
        out.extend(_in_order(child))
    return out


def test_presentation_mode_heads_the_tab_with_its_sentence():
    at = open_app(present="1", view=TAB)
    tab = next(t for t in at.tabs if t.label == TAB)
    shown = [e for e in _in_order(tab) if type(e).__name__ in ("Html", "Caption", "Markdown")]
    seeing = [k for k, e in enumerate(shown) if "What you are seeing." in str(e.proto.body)]
    assert seeing == [0], [str(getattr(e, "value", e.proto))[:60] for e in shown[:3]]
