"""Who wins at a point (``rank_point``) against hand-computed answers, the map built from a
results file's rows, and the map's JSON: written strict, read back, refused when it is not one.
"""

from __future__ import annotations

import json
import math

import pytest

from lsbcore.studies.sweep.which_g_where import (
    MAX_MAP_BYTES,
    build_map,
    map_from_json,
    read_map,
    write_map,
)
from lsbcore.studies.sweep.winner import TIE_Z, rank_point


# ----------------------------------------------------------------------------- rank_point
def test_a_clear_winner_over_three_seeds():
    ranking = rank_point(
        {
            "barker": {0: 10.0, 1: 11.0, 2: 12.0},
            "sqrt": {0: 20.0, 1: 22.0, 2: 21.0},
            "min": {0: 5.0, 1: 6.0, 2: 7.0},
        }
    )
    assert ranking.order == ("sqrt", "barker", "min")
    assert ranking.winner == "sqrt" and ranking.tied == ("sqrt",) and not ranking.is_tie
    assert ranking.means == {"sqrt": 21.0, "barker": 11.0, "min": 6.0}
    assert ranking.stderrs["sqrt"] == pytest.approx(1 / math.sqrt(3))  # sd 1 over 3 seeds
    assert ranking.n_seeds == {"sqrt": 3, "barker": 3, "min": 3}
    # margin over the runner-up: (21 - 11) / 11; paired d = (10, 11, 9): mean 10, sd 1
    assert ranking.margin == pytest.approx(10 / 11, rel=1e-12)
    assert ranking.z == pytest.approx(10 * math.sqrt(3), rel=1e-12)
    assert ranking.notes == ()


def test_a_lead_within_the_paired_spread_is_a_tie():
    ranking = rank_point(
        {
            "barker": {0: 10.0, 1: 12.0, 2: 14.0},
            "sqrt": {0: 11.0, 1: 10.0, 2: 13.0},
            "max": {0: 1.0, 1: 2.0, 2: 3.0},
        }
    )
    # paired d = (-1, 2, 1): mean 2/3, sd sqrt(7/3), so z = (2/3) / sqrt(7/9) = 2 / sqrt(7)
    assert ranking.winner == "barker"
    assert ranking.z == pytest.approx(2 / math.sqrt(7), rel=1e-12) and ranking.z <= TIE_Z
    assert ranking.tied == ("barker", "sqrt") and ranking.is_tie  # max is far behind
    assert ranking.margin == pytest.approx((12 - 34 / 3) / (34 / 3), rel=1e-12)  # 1/17


def test_pairing_calls_a_winner_that_unpaired_spreads_would_call_a_tie():
    """Seeds differ a lot (each seed is another posterior) but lsb1 beats barker by about one
    unit on every seed: the unpaired standard errors overlap, the paired difference does not."""
    lsb1 = {0: 10.0, 1: 20.0, 2: 30.0, 3: 40.0}
    barker = {0: 9.0, 1: 19.2, 2: 28.8, 3: 39.0}
    ranking = rank_point({"lsb1": lsb1, "barker": barker})
    gap = ranking.means["lsb1"] - ranking.means["barker"]
    assert gap == pytest.approx(1.0)
    unpaired_z = gap / math.hypot(ranking.stderrs["lsb1"], ranking.stderrs["barker"])
    assert unpaired_z < 0.2  # an unpaired rule would call this a tie
    # paired d = (1, 0.8, 1.2, 1): mean 1, sd sqrt(0.08 / 3), n = 4
    assert ranking.z == pytest.approx(1 / math.sqrt(0.08 / 3 / 4), rel=1e-9)
    assert ranking.tied == ("lsb1",) and ranking.winner == "lsb1"


def test_equal_values_on_every_seed_are_a_tie_and_a_constant_lead_is_not():
    same = rank_point({"min": {0: 1.0, 1: 2.0}, "max": {0: 1.0, 1: 2.0}})
    assert same.tied == ("max", "min") and same.z == 0.0  # equal means: by name
    ahead = rank_point({"min": {0: 1.5, 1: 2.5}, "max": {0: 1.0, 1: 2.0}})
    assert ahead.tied == ("min",) and ahead.z == math.inf


def test_one_seed_calls_no_tie_and_says_so():
    ranking = rank_point({"barker": {0: 2.0}, "sqrt": {0: 1.5}, "min": {0: 1.99}})
    assert ranking.winner == "barker" and ranking.tied == ("barker",)
    assert math.isnan(ranking.z) and all(math.isnan(s) for s in ranking.stderrs.values())
    assert ranking.margin == pytest.approx(0.01 / 1.99, rel=1e-12)
    assert ranking.notes == (
        "fewer than two seeds shared with the runner-up: no spread to call a tie by",
    )


def test_values_that_are_not_finite_are_left_out_and_named():
    ranking = rank_point(
        {
            "barker": {0: math.nan, 1: 4.0, 2: 6.0},
            "sqrt": {0: 1.0, 1: 2.0, 2: 3.0},
            "max": {0: math.nan, 1: math.inf},
        }
    )
    assert ranking.order == ("barker", "sqrt")
    assert ranking.means == {"barker": 5.0, "sqrt": 2.0}
    assert ranking.n_seeds == {"barker": 2, "sqrt": 3}
    assert ranking.notes == ("max: no finite ESS at this point",)
    # paired over the seeds both finished (1, 2): d = (2, 3), mean 2.5, sd sqrt(0.5)
    assert ranking.z == pytest.approx(2.5 / (math.sqrt(0.5) / math.sqrt(2)), rel=1e-12)
    assert ranking.margin == pytest.approx(1.5, rel=1e-12)


def test_a_point_with_one_sampler_or_none_left():
    alone = rank_point({"sqrt": {0: 3.0, 1: 5.0}, "min": {0: math.nan}})
    assert alone.winner == "sqrt" and alone.tied == ("sqrt",)
    assert math.isnan(alone.margin) and math.isnan(alone.z)
    empty = rank_point({"min": {0: math.nan}})
    assert empty.winner is None and empty.order == () and empty.tied == ()
    assert empty.notes == ("min: no finite ESS at this point",)


# ----------------------------------------------------------------------------- build_map
PROTOCOL = {"size": 12, "chains": 4, "burn_in": 200, "steps": 1000, "max_lag": 100}


def row(target, lam, mu, sigma, sampler, seed, value, **protocol) -> dict:
    return {
        "target": target,
        "lam": lam,
        "mu": mu,
        "sigma": sigma,
        "sampler": sampler,
        "seed": seed,
        "ess_per_kevals": value,
        **{**PROTOCOL, **protocol},
    }


def value_of(target, lam, mu, sigma, sampler, seed) -> float:
    """A made-up ESS per 1,000 evaluations with a winner that moves across the map."""
    bonus = {"barker": lam, "max": sigma, "sqrt": 1.5}[sampler]
    return 1.0 + bonus + 0.1 * seed + (0.5 if target == "horse" else 0.0) + 0.01 * mu


def hand_rows() -> list[dict]:
    rows = []
    points = [("square", 1.0), ("square", -1.0), ("horse", 1.0)]
    for target, mu in points:
        for lam in (2.0, 0.0, 1.0):  # out of order on purpose
            for sigma in (3.0, 1.0):
                for sampler in ("max", "barker", "sqrt"):
                    for seed in (0, 1):
                        value = value_of(target, lam, mu, sigma, sampler, seed)
                        rows.append(row(target, lam, mu, sigma, sampler, seed, value))
    return rows


def test_the_map_has_a_panel_per_target_and_mu_with_sorted_axes():
    doc = build_map(hand_rows())
    assert doc["format"] == "lsb-which-g-where" and doc["version"] == 1
    assert doc["protocol"] == PROTOCOL
    assert doc["samplers"] == ["barker", "sqrt", "max"]  # the registry's order
    assert doc["seeds"] == [0, 1] and doc["notes"] == []
    assert [(p["target"], p["mu"]) for p in doc["panels"]] == [
        ("horse", 1.0),
        ("square", -1.0),
        ("square", 1.0),
    ]
    for panel in doc["panels"]:
        assert panel["lam"] == [0.0, 1.0, 2.0] and panel["sigma"] == [1.0, 3.0]
        assert len(panel["points"]) == 6


def test_every_point_of_the_map_is_rank_point_of_its_cells():
    doc = build_map(hand_rows())
    for panel in doc["panels"]:
        for point in panel["points"]:
            values = {
                s: {
                    seed: value_of(panel["target"], point["lam"], panel["mu"], point["sigma"],
                                   s, seed)
                    for seed in (0, 1)
                }
                for s in ("barker", "sqrt", "max")
            }  # fmt: skip
            expected = rank_point(values).as_dict()
            assert {k: point[k] for k in expected} == expected
    # and the winners are the ones the made-up values were built to have
    square = next(p for p in doc["panels"] if (p["target"], p["mu"]) == ("square", 1.0))
    winners = {(p["lam"], p["sigma"]): p["winner"] for p in square["points"]}
    assert winners == {
        (0.0, 1.0): "sqrt", (0.0, 3.0): "max", (1.0, 1.0): "sqrt",
        (1.0, 3.0): "max", (2.0, 1.0): "barker", (2.0, 3.0): "max",
    }  # fmt: skip


def test_cells_of_another_protocol_are_left_out_and_noted():
    rows = hand_rows()
    other = [row("square", 9.0, 1.0, 1.0, "barker", 0, 100.0, steps=5000) for _ in range(2)]
    other[1]["sampler"] = "min"
    doc = build_map(rows + other)
    assert doc["protocol"] == PROTOCOL  # the protocol with the most cells
    assert doc["notes"] == ["2 cells of 1 other protocol(s) left out"]
    assert "min" not in doc["samplers"]
    assert all(9.0 not in p["lam"] for p in doc["panels"])


def test_a_map_of_no_rows_is_refused():
    with pytest.raises(ValueError, match="no finished cell"):
        build_map([])


# ----------------------------------------------------------------------------- JSON
def small_map() -> dict:
    """A map with a one-seed point (NaN standard errors and z) and a two-seed point."""
    rows = [row("square", 0.0, 1.0, 1.0, s, 0, v) for s, v in (("barker", 2.0), ("sqrt", 1.0))]
    rows += [
        row("square", 1.0, 1.0, 1.0, s, seed, v)
        for s, seed, v in (("barker", 0, 2.0), ("barker", 1, 3.0), ("sqrt", 0, 1.0),
                           ("sqrt", 1, 3.5))
    ]  # fmt: skip
    return build_map(rows)


def same(a, b) -> bool:
    """Equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_a_map_written_and_read_back_is_the_same_map(tmp_path):
    doc = small_map()
    point = doc["panels"][0]["points"][0]
    assert math.isnan(point["z"]) and math.isnan(point["stderrs"]["barker"])
    path = tmp_path / "map.json"
    write_map(doc, path)
    text = path.read_text(encoding="utf-8")
    assert "NaN" not in text and "null" in text
    raw = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in strict JSON"))
    assert raw["panels"][0]["points"][0]["z"] is None
    back = read_map(path)
    assert same(back, doc)
    assert not same(back, small_map() | {"seeds": [0]})  # `same` can tell maps apart
    assert not (tmp_path / "map.json.partial").exists()


def valid_text() -> str:
    return json.dumps(json.loads(json.dumps(small_map()).replace("NaN", "null")))


def mutated(change) -> str:
    doc = json.loads(valid_text())
    change(doc)
    return json.dumps(doc)


def _set(path, value):
    def change(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


POINT = ("panels", 0, "points", 0)
REFUSALS = [
    ("{", "not JSON"),
    ("[1, 2]", "not a 'which g where' map"),
    (mutated(_set(("format",), "lsb-pins")), "not a 'which g where' map"),
    (mutated(_set(("version",), 2)), "version is 2"),
    (mutated(_set(("protocol", "size"), 0)), "protocol size must be an integer in [3, 128]"),
    (mutated(_set(("protocol", "chains"), True)), "protocol chains must be an integer"),
    (mutated(lambda d: d["protocol"].pop("steps")), "protocol must give size"),
    (mutated(_set(("samplers",), ["barker", "warp"])), "samplers must be a list from"),
    (mutated(_set(("samplers",), [])), "samplers must be a list from"),
    (mutated(_set(("seeds",), [0, "1"])), "seeds must be a list of integers"),
    (mutated(_set(("panels",), [])), "has no panels"),
    (mutated(_set(("panels", 0, "target"), 3)), "panel 1 must name its target"),
    (mutated(_set(("panels", 0, "lam"), [])), "panel 1 must list its lam values"),
    (mutated(_set((*POINT, "lam"), 99.0)), "panel 1 has a point off its axes"),
    (mutated(_set((*POINT, "sigma"), "1")), "point sigma must be a number"),
    (mutated(_set((*POINT, "winner"), "warp")), "winner 'warp' is not one of"),
    (mutated(_set((*POINT, "order"), ["warp"])), "order must list the map's samplers"),
    (mutated(_set((*POINT, "means"), {"warp": 1.0})), "means must be keyed by"),
    (mutated(_set((*POINT, "means", "barker"), "big")), "means must be a number"),
    (mutated(_set((*POINT, "margin"), [1])), "margin must be a number"),
    (mutated(_set((*POINT, "notes"), [1])), "notes must be a list of strings"),
    ("[" * 100_000 + "]" * 100_000, "nests its lists or objects more than about"),
    (valid_text().replace('"version": 1', '"version": 1e400'), "too large for a float"),
    (valid_text().replace('"seeds": [0, 1]', '"seeds": [0, ' + "9" * 30 + "]"), "more than 20"),
    (valid_text().replace('"version": 1', '"version": NaN'), "NaN is not a number"),
]


@pytest.mark.parametrize(("raw", "words"), REFUSALS, ids=[w for _, w in REFUSALS])
def test_a_document_that_is_not_a_map_is_refused_in_one_sentence(raw, words):
    map_from_json(valid_text())  # the unchanged document is a map
    with pytest.raises(ValueError) as err:
        map_from_json(raw)
    message = str(err.value)
    assert words in message, message
    assert "\n" not in message and len(message) < 300


def test_a_map_over_the_size_limit_or_not_text_is_refused(tmp_path):
    with pytest.raises(ValueError, match="over 20 MB"):
        map_from_json(b" " * (MAX_MAP_BYTES + 1))
    with pytest.raises(ValueError, match="not UTF-8"):
        map_from_json(b'{"format": "\xff"}')
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(MAX_MAP_BYTES + 10)  # sparse: no disk is filled
    with pytest.raises(ValueError, match="is not a map: it holds more than"):
        read_map(big)
    with pytest.raises(ValueError, match="cannot read"):
        read_map(tmp_path / "missing.json")


def test_an_infinite_z_survives_the_json_round_trip(tmp_path):
    rows = [
        row("square", 0.0, 1.0, 1.0, s, seed, v)
        for s, seed, v in (("barker", 0, 2.0), ("barker", 1, 3.0), ("sqrt", 0, 1.0),
                           ("sqrt", 1, 2.0))
    ]  # fmt: skip
    doc = build_map(rows)
    assert doc["panels"][0]["points"][0]["z"] == math.inf  # a lead of 1 on both seeds
    write_map(doc, tmp_path / "map.json")
    assert read_map(tmp_path / "map.json")["panels"][0]["points"][0]["z"] == math.inf
