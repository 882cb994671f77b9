"""The "which g where" map: for every point of a sweep, the sampler that mixes best per target
evaluation, its ties and its margin (``build_map``), as a small JSON document (``write_map``,
``read_map``) that the report and the dashboard draw.

One panel per target and mu, over lambda (columns) and sigma (rows). A document::

    {"format": "lsb-which-g-where", "version": 1,
     "protocol": {"size": 16, "chains": 8, "burn_in": 1000, "steps": 5000, "max_lag": 500},
     "samplers": ["barker", ...], "seeds": [0, 1, 2], "notes": [...],
     "panels": [{"target": "square", "mu": 1.0, "lam": [...], "sigma": [...],
                 "points": [{"lam": 0.0, "sigma": 1.0, ...Ranking.as_dict()}, ...]}]}

NaN is written as null, an infinite margin or z as "inf". ``read_map`` checks a document whole
(it may come from a user's upload) and says in a sentence what is wrong.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path

from lsbcore.bounded_json import loads, read_capped
from lsbcore.out_path import write_text
from lsbcore.studies.sweep.grid import PROTOCOL_BOUNDS, SAMPLERS
from lsbcore.studies.sweep.winner import rank_point

__all__ = ["FORMAT", "MAX_MAP_BYTES", "build_map", "map_from_json", "read_map", "write_map"]

FORMAT, VERSION = "lsb-which-g-where", 1
MAX_MAP_BYTES = 20_000_000
MAX_POINTS = 100_000
PROTOCOL_KEYS = tuple(PROTOCOL_BOUNDS)


def _protocol_of(row: dict) -> tuple:
    return tuple(int(row[k]) for k in PROTOCOL_KEYS)


def build_map(rows: list[dict]) -> dict:
    """The map of the finished cells ``rows`` (``lsbcore.studies.sweep.read_results``).

    Cells of one protocol make a map; where a results file holds several (a sweep resumed with
    other lengths), the protocol with the most cells is used and the notes say how many were
    left out.
    """
    if not rows:
        raise ValueError("the results hold no finished cell yet.")
    protocols = Counter(_protocol_of(r) for r in rows)
    protocol, _ = max(protocols.items(), key=lambda kv: (kv[1], kv[0]))
    notes = []
    if len(protocols) > 1:
        left = sum(protocols.values()) - protocols[protocol]
        notes.append(f"{left:,} cells of {len(protocols) - 1} other protocol(s) left out")
    values: dict = defaultdict(lambda: defaultdict(dict))
    samplers, seeds = set(), set()
    for row in rows:
        if _protocol_of(row) != protocol:
            continue
        point = (row["target"], float(row["mu"]), float(row["lam"]), float(row["sigma"]))
        values[point][row["sampler"]][int(row["seed"])] = float(row["ess_per_kevals"])
        samplers.add(row["sampler"])
        seeds.add(int(row["seed"]))
    panels: dict = defaultdict(list)
    for (target, mu, lam, sigma), by_sampler in sorted(values.items()):
        ranking = rank_point(by_sampler)
        panels[(target, mu)].append({"lam": lam, "sigma": sigma, **ranking.as_dict()})
    order = sorted(samplers, key=lambda s: (SAMPLERS.index(s) if s in SAMPLERS else 99, s))
    return {
        "format": FORMAT,
        "version": VERSION,
        "protocol": dict(zip(PROTOCOL_KEYS, protocol, strict=True)),
        "samplers": order,
        "seeds": sorted(seeds),
        "notes": notes,
        "panels": [
            {
                "target": target,
                "mu": mu,
                "lam": sorted({p["lam"] for p in points}),
                "sigma": sorted({p["sigma"] for p in points}),
                "points": points,
            }
            for (target, mu), points in sorted(panels.items())
        ],
    }


def _finite_or_none(value):
    """NaN as null; an infinite margin or z (the same lead on every seed) as "inf"."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_or_none(v) for v in value]
    return value


def write_map(document: dict, path: Path) -> None:
    """Write the map as strict JSON (non-finite numbers as null), whole or not at all."""
    path = Path(path)
    text = json.dumps(_finite_or_none(document), indent=1, allow_nan=False)
    write_text(path, text + "\n")


def read_map(path: Path) -> dict:
    """A map document from a file, checked (``map_from_json``)."""
    path = Path(path)
    try:
        text = read_capped(path, MAX_MAP_BYTES)
    except OSError as err:
        raise ValueError(f"cannot read {path}: {err.strerror or err}.") from None
    except ValueError as err:
        raise ValueError(f"{path} is not a map: {err}.") from None
    return map_from_json(text)


def _number(value, where: str) -> float:
    if value is None:
        return math.nan
    if value in ("inf", "-inf"):
        return float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where} must be a number, got {value!r}.")
    return float(value)


def map_from_json(raw: bytes | str) -> dict:
    """Parse and check a map document; a ``ValueError`` with one sentence when it is not one."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8")
    if len(raw) > MAX_MAP_BYTES:
        raise ValueError(f"the map is over {MAX_MAP_BYTES // 1_000_000} MB; a map is small.")
    try:
        doc = loads(raw.decode("utf-8"), "a map")
    except UnicodeDecodeError:
        raise ValueError("the file is not a map: it is not UTF-8 text.") from None
    except ValueError as err:
        raise ValueError(f"the file is not a map (not JSON: {err}).") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f'the file is not a \'which g where\' map (no "format": "{FORMAT}").')
    if doc.get("version") != VERSION:
        raise ValueError(f"the map's version is {doc.get('version')!r}; this reads {VERSION}.")
    protocol = doc.get("protocol")
    if not isinstance(protocol, dict) or set(protocol) != set(PROTOCOL_KEYS):
        raise ValueError(f"the map's protocol must give {', '.join(PROTOCOL_KEYS)}.")
    for key, (_, low, high) in PROTOCOL_BOUNDS.items():
        value = protocol[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"the map's protocol {key} must be an integer in [{low}, {high}].")
    samplers = doc.get("samplers")
    if not isinstance(samplers, list) or not samplers or not all(s in SAMPLERS for s in samplers):
        raise ValueError(f"the map's samplers must be a list from: {', '.join(SAMPLERS)}.")
    seeds = doc.get("seeds")
    if not isinstance(seeds, list) or not all(isinstance(s, int) for s in seeds):
        raise ValueError("the map's seeds must be a list of integers.")
    panels = doc.get("panels")
    if not isinstance(panels, list) or not panels:
        raise ValueError("the map has no panels.")
    n_points = 0
    for i, panel in enumerate(panels):
        where = f"panel {i + 1}"
        if not isinstance(panel, dict) or not isinstance(panel.get("target"), str):
            raise ValueError(f"{where} must name its target.")
        panel["mu"] = _number(panel.get("mu"), f"{where}'s mu")
        for axis in ("lam", "sigma"):
            if not isinstance(panel.get(axis), list) or not panel[axis]:
                raise ValueError(f"{where} must list its {axis} values.")
            panel[axis] = [_number(v, f"{where}'s {axis}") for v in panel[axis]]
        points = panel.get("points")
        if not isinstance(points, list):
            raise ValueError(f"{where} must list its points.")
        n_points += len(points)
        if n_points > MAX_POINTS:
            raise ValueError(f"the map has over {MAX_POINTS:,} points.")
        for point in points:
            _check_point(point, panel, samplers, where)
    return doc


def _check_point(point, panel: dict, samplers: list, where: str) -> None:
    if not isinstance(point, dict):
        raise ValueError(f"{where} has a point that is not an object.")
    point["lam"] = _number(point.get("lam"), f"{where}'s point lambda")
    point["sigma"] = _number(point.get("sigma"), f"{where}'s point sigma")
    if point["lam"] not in panel["lam"] or point["sigma"] not in panel["sigma"]:
        raise ValueError(f"{where} has a point off its axes.")
    for name in ("order", "tied"):
        if not isinstance(point.get(name), list) or not all(s in samplers for s in point[name]):
            raise ValueError(f"{where}: a point's {name} must list the map's samplers.")
    winner = point.get("winner")
    if winner is not None and winner not in samplers:
        raise ValueError(f"{where}: a point's winner {winner!r} is not one of the map's samplers.")
    for name in ("means", "stderrs"):
        table = point.get(name)
        if not isinstance(table, dict) or not all(s in samplers for s in table):
            raise ValueError(f"{where}: a point's {name} must be keyed by the map's samplers.")
        point[name] = {s: _number(v, f"{where}'s {name}") for s, v in table.items()}
    if not isinstance(point.get("n_seeds"), dict):
        raise ValueError(f"{where}: a point must give n_seeds per sampler.")
    point["margin"] = _number(point.get("margin"), f"{where}'s margin")
    point["z"] = _number(point.get("z"), f"{where}'s z")
    notes = point.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise ValueError(f"{where}: a point's notes must be a list of strings.")
