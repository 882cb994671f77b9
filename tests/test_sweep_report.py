"""The map's report command: a results file of hand-made cells gives the map of those cells
(text, JSON and an HTML page with one heat map per panel, each cell the winner's colour), a
map's JSON gives the same report, and every bad input ends in one sentence and exit status 2."""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from lsbcore.studies.sweep.grid import Cell, Protocol
from lsbcore.studies.sweep.report import main, map_figure, point_label
from lsbcore.studies.sweep.store import ResultStore
from lsbcore.studies.sweep.which_g_where import build_map, read_map

REPO = Path(__file__).resolve().parents[1]
PROTOCOL = Protocol(size=8, chains=2, burn_in=10, steps=20, max_lag=5)
SAMPLERS = ("barker", "sqrt", "max")

#: ESS per 1,000 evaluations, [sampler][seed], at each (target, lam, sigma); mu = 1.
VALUES = {
    # sqrt ahead by about 2 on every seed: a clear winner, margin (5.0 - 3.0) / 3.0
    ("square", 0.0, 1.0): {"barker": (3.0, 3.1, 2.9), "sqrt": (5.0, 5.2, 4.8), "max": (1, 1, 1)},
    # barker and max within their paired spread: a tie led by barker
    ("square", 0.0, 2.0): {"barker": (4.0, 4.5, 4.1), "max": (4.2, 4.0, 4.3), "sqrt": (2, 2, 2)},
    # max clearly ahead
    ("square", 1.0, 1.0): {"barker": (1.0, 1.2, 1.1), "sqrt": (2.0, 2.1, 2.2), "max": (8, 9, 10)},
    # barker clearly ahead, sqrt gave no finite ESS on one seed
    ("square", 1.0, 2.0): {"barker": (6.0, 6.1, 6.2), "sqrt": (1.0, math.nan, 1.2),
                           "max": (3, 3, 3)},
    ("horse", 0.5, 3.0): {"barker": (2.0, 2.2, 2.1), "sqrt": (3.0, 3.25, 3.1), "max": (1, 1, 1)},
}  # fmt: skip


def hand_rows() -> list[dict]:
    rows = []
    for (target, lam, sigma), by_sampler in VALUES.items():
        for sampler, per_seed in by_sampler.items():
            for seed, value in enumerate(per_seed):
                cell = Cell(target, lam, 1.0, sigma, sampler, seed, PROTOCOL)
                rows.append({**cell.as_dict(), "ess_per_kevals": float(value)})
    return rows


def write_store(path: Path) -> Path:
    with ResultStore(path) as store:
        for row in hand_rows():
            cell = Cell(row["target"], row["lam"], row["mu"], row["sigma"], row["sampler"],
                        row["seed"], PROTOCOL)  # fmt: skip
            value = row["ess_per_kevals"]
            store.write(
                cell,
                {
                    "ess": value * 2,
                    "ess_bulk": value * 2,
                    "rhat": 1.0,
                    "evals": 2000.0,
                    "ess_per_kevals": value,
                    "accept_rate": 0.5,
                    "seconds": 0.01,
                    "wall_s": 0.02,
                    "notes": "",
                    "worker": "test:1",
                },
            )
    return path


def same(a, b) -> bool:
    """Equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def figures_of(page: str) -> dict[str, dict]:
    """Each figure's JSON in the page, by the id of the div it is drawn into."""
    found = re.findall(
        r'<script type="application/json" data-figure="([^"]+)">(.*?)</script>', page, re.S
    )
    return {name: json.loads(text.replace("<\\/", "</")) for name, text in found}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    store = write_store(folder / "sweep.sqlite")
    return folder, store


def test_the_json_is_the_map_of_the_cells_written(report, capsys):
    folder, store = report
    out = folder / "map.json"
    assert main([str(store), "--json", str(out)]) == 0
    assert same(read_map(out), build_map(hand_rows()))
    assert "map written to" in capsys.readouterr().out


def test_the_text_table_gives_each_panel_its_winners_ties_and_margins(report, capsys):
    _, store = report
    assert main([str(store)]) == 0
    text = capsys.readouterr().out
    assert "Protocol: size 8, 2 chains, burn-in 10, 20 mixing steps" in text
    assert "3 seeds (0, 1, 2)" in text
    square = text[text.index("square, μ = 1") :]
    horse = text[text.index("horse, μ = 1") : text.index("square, μ = 1")]
    lines = {line.split()[0]: line for line in square.splitlines()[2:4]}  # sigma 2, then 1
    # sigma = 1: sqrt +67% at lambda 0, max (9 over 2.1: +329%) at lambda 1
    assert re.search(r"sqrt \+67%\s+max \+329%", lines["1"]), lines["1"]
    # sigma = 2: a tie led by barker with max at lambda 0, barker +103% at lambda 1 (6.1 over 3)
    assert re.search(r"~barker/max\s+barker \+103%", lines["2"]), lines["2"]
    assert "sqrt +48%" in horse  # 3.1167 over 2.1


def test_the_html_has_one_heat_map_per_panel_coloured_by_the_winners(report):
    folder, store = report
    out = folder / "map.html"
    assert main([str(store), "--html", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    doc = build_map(hand_rows())
    drawn = figures_of(page)
    assert len(drawn) == len(doc["panels"]) == 2
    samplers = doc["samplers"]
    assert samplers == list(SAMPLERS)
    for panel, fig in zip(doc["panels"], drawn.values(), strict=True):
        (heat,) = [t for t in fig["data"] if t["type"] == "heatmap"]
        assert heat["x"] == [f"{v:g}" for v in panel["lam"]]
        assert heat["y"] == [f"{v:g}" for v in panel["sigma"]]
        for point in panel["points"]:
            i, j = panel["sigma"].index(point["sigma"]), panel["lam"].index(point["lam"])
            tie = len(samplers) if len(point["tied"]) > 1 else 0
            assert heat["z"][i][j] == tie + samplers.index(point["winner"])
            assert heat["text"][i][j] == point_label(point)
            assert heat["customdata"][i][j] == [point["lam"], point["sigma"]]
            for name in point["order"]:
                assert f"{point['means'][name]:.3g}" in heat["hovertext"][i][j]
        legend = [t["name"] for t in fig["data"] if t.get("showlegend")]
        assert legend[:3] == ["t/(1+t)", "sqrt(t)", "max(1,t)"]
    # the tie at (square, lambda 0, sigma 2) is marked, the clear winners give their margins
    square = doc["panels"][1]
    texts = {(p["lam"], p["sigma"]): point_label(p) for p in square["points"]}
    assert texts == {(0.0, 1.0): "+67%", (0.0, 2.0): "≈ tie ×2", (1.0, 1.0): "+329%",
                     (1.0, 2.0): "+103%"}  # fmt: skip


def test_the_html_is_self_contained_with_plotly_once_and_states_protocol_and_seeds(report):
    folder, store = report
    out = folder / "alone.html"
    assert main([str(store), "--html", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert page.count('id="plotly-gzip"') == 1
    assert re.search(r"<script[^>]+src=", page) is None  # nothing from the network
    assert "https://cdn" not in page
    assert "size 8, 2 chains, burn-in 10, 20 mixing steps, ESS lag window 5" in page
    assert "3 seeds (0, 1, 2)" in page
    assert "<h2>square, μ = 1</h2>" in page and "<h2>horse, μ = 1</h2>" in page


def test_a_map_of_one_seed_says_its_winners_rest_on_one_seed(tmp_path, capsys):
    store = tmp_path / "one.sqlite"
    with ResultStore(store) as results:
        for sampler, value in (("barker", 1.0), ("sqrt", 1.01)):
            results.write(Cell("square", 0.0, 1.0, 1.0, sampler, 0, PROTOCOL),
                          {"ess_per_kevals": value})  # fmt: skip
    assert main([str(store)]) == 0
    text = capsys.readouterr().out
    assert "1 seed (0)" in text and "every winner rests on one seed" in text
    assert "sqrt +1%" in text and "~" not in text.split("Cells:")[1].split("\n", 1)[1]


def test_a_map_json_gives_the_same_report_as_its_results(report, capsys):
    folder, store = report
    json_path, from_results, from_json = folder / "m.json", folder / "a.html", folder / "b.html"
    assert main([str(store), "--json", str(json_path), "--html", str(from_results)]) == 0
    first = capsys.readouterr().out
    assert main([str(json_path), "--html", str(from_json)]) == 0
    second = capsys.readouterr().out
    assert first.split("\n\nmap written")[0] == second.split("\nreport written")[0].rstrip()
    a = figures_of(from_results.read_text(encoding="utf-8"))
    b = figures_of(from_json.read_text(encoding="utf-8"))
    assert a == b


def test_map_figure_leaves_a_missing_point_blank():
    doc = build_map(hand_rows())
    panel = {**doc["panels"][1], "points": doc["panels"][1]["points"][:1]}
    heat = map_figure(panel, doc["samplers"]).data[0]
    filled = [(i, j) for i, row in enumerate(heat.z) for j, v in enumerate(row) if v is not None]
    assert filled == [(0, 0)]
    assert heat.hovertext[1][1] == "no result at this point"


def _empty_store(path: Path) -> Path:
    ResultStore(path).close()
    return path


def _foreign(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (a)")
    db.commit()
    db.close()
    return path


def _text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


BAD_INPUTS = [
    (lambda d: d / "missing.sqlite", [], "does not exist"),
    (lambda d: d, [], "is not a file"),
    (lambda d: _text(d / "notes.txt", "lam,sigma\n1,2\n"), [], "neither a sweep's results"),
    (lambda d: _empty_store(d / "empty.sqlite"), [], "holds no finished cell yet"),
    (lambda d: _foreign(d / "other.sqlite"), [], "is not a sweep's results file"),
    (lambda d: _text(d / "bad.json", '{"format": "lsb-pins"}'), [], "not a 'which g where' map"),
    (lambda d: _text(d / "broken.json", "{"), [], "not JSON"),
]  # --html and --json: refused by argparse, with every command's output flags, in
# tests/test_output_paths.py


@pytest.mark.parametrize(("make", "flags", "words"), BAD_INPUTS)
def test_bad_input_ends_in_one_sentence_and_status_2(tmp_path, capsys, make, flags, words):
    path = make(tmp_path)
    flags = [f.replace("{d}", str(tmp_path)) for f in flags]
    assert main([str(path), *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    message = captured.err.strip()
    assert message.startswith("error: ") and words in message, message
    assert "\n" not in message and "Traceback" not in message


def test_the_command_line_refuses_in_a_sentence_without_a_traceback(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "lsbcore.studies.sweep.report", str(tmp_path / "missing.sqlite")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {tmp_path / 'missing.sqlite'} does not exist."


def test_the_text_counts_where_each_sampler_wins_or_ties_and_the_clear_winners(report, capsys):
    """The hand-made cells: sqrt wins clearly at two points, max at one, barker at one, and
    barker ties with max at one: each is best or tied at 2 of 5; 4 points have a clear winner."""
    _, store = report
    assert main([str(store)]) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("Winner or tied with it"))
    assert line.startswith("Winner or tied with it, of 5 points: ")
    counts = dict(
        item.split() for item in line.split(": ")[1].split(".")[0].split(", ")
    )  # "barker 2, sqrt 2, max 2"
    assert counts == {"barker": "2", "sqrt": "2", "max": "2"}
    assert "A winner without a tie at 4 points: sqrt 2," in line
    assert "max 1" in line and "barker 1" in line
