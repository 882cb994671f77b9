"""A sweep's grid: which targets, parameters, samplers and seeds, and the cells they make.

A cell is one experiment run: one sampler on one posterior with one seed, under one protocol
(lattice or image size, chains, burn-in, mixing steps, ESS lag window). Its ``key`` names every
one of those numbers, so a finished cell is recognised in any later sweep that asks for it
(``--resume``), whatever grid that sweep has. The seed makes the posterior (the noise) and the
sampler's draws, so every sampler of a seed competes on the same posterior.

Targets: ``square`` is the paper's synthetic problem at any ``(lambda, mu, sigma)``
(``lsbcore.cases.square_problem``; the paper's four cases are four of its points); a shipped
sample's name (``horse``, ``camera``, ...) is that photo's segmentation posterior at ``size``
pixels on its longer side, ``alpha = mu y / sigma^2``.

A grid comes from flags or a TOML file (``SweepGrid.from_toml``)::

    targets = ["square"]
    lam = "0:2:5"          # 5 values from 0 to 2; or a list, [0.0, 0.5, 1.0]
    sigma = [1.0, 3.0]
    mu = 1.0
    samplers = ["barker", "sqrt", "min", "max", "lsb1", "lsb2"]
    seeds = 3              # seeds 0, 1, 2; or a list
    [protocol]
    size = 16
    chains = 8
    burn_in = 1000
    steps = 5000
    max_lag = 500
"""

from __future__ import annotations

import itertools
import math
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from lsbcore.bounded_json import read_capped
from lsbcore.samplers.registry import REGISTRY

MAX_GRID_BYTES = 1_000_000  # a sweep's grid file is a few lines

__all__ = [
    "ASSETS",
    "MAX_CELLS",
    "SAMPLERS",
    "Cell",
    "Protocol",
    "SweepGrid",
    "parse_axis",
    "sample_names",
]

ASSETS = Path(__file__).resolve().parents[3] / "assets"
#: What a sweep may compare: the dashboard's samplers that need no balancing-function file.
SAMPLERS = tuple(n for n, spec in REGISTRY.items() if spec.app and not spec.needs_balancing)
DEFAULT_SAMPLERS = ("barker", "sqrt", "min", "max", "lsb1", "lsb2")
MAX_CELLS = 1_000_000  # a million rows is about 300 MB of results: plenty for any map
MAX_AXIS = 1000
MAX_SEED = 2**31 - 1
#: protocol field -> (default, low, high)
PROTOCOL_BOUNDS = {
    "size": (16, 3, 128),
    "chains": (8, 1, 1000),
    "burn_in": (1000, 0, 1_000_000),
    "steps": (5000, 10, 1_000_000),
    "max_lag": (500, 1, 100_000),
}
# axis -> (low, high): lambda >= 0 (a ferromagnetic prior), sigma > 0 (it divides or scales noise)
AXIS_BOUNDS = {"lam": (0.0, 100.0), "mu": (-100.0, 100.0), "sigma": (1e-3, 100.0)}
AXIS_NAMES = {"lam": "lambda", "mu": "mu", "sigma": "sigma"}


def sample_names() -> tuple[str, ...]:
    """The shipped sample photos a sweep can target (``assets/*.png``)."""
    return tuple(sorted(p.stem for p in ASSETS.glob("*.png")))


def _number(value: float) -> float:
    """Seven significant digits: ``0:1:11`` gives the key ``0.1`` gives, not 0.1000...02."""
    return float(f"{value:.7g}") + 0.0  # + 0.0 turns -0.0 into 0.0


def parse_axis(spec, name: str) -> tuple[float, ...]:
    """An axis from ``"start:stop:count"`` (evenly spaced, ends included), ``"a,b,c"``, a
    number or a list of numbers; each within the axis's bounds, no value twice."""
    label = AXIS_NAMES.get(name, name)
    if isinstance(spec, bool):
        raise ValueError(f"{label} must be numbers, got {spec!r}.")
    if isinstance(spec, (int, float)):
        values = [float(spec)]
    elif isinstance(spec, (list, tuple)):
        if not spec or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in spec):
            raise ValueError(f"{label} must be a non-empty list of numbers, got {spec!r}.")
        values = [float(v) for v in spec]
    elif isinstance(spec, str):
        text = spec.strip()
        try:
            if ":" in text:
                parts = text.split(":")
                if len(parts) != 3:
                    raise ValueError
                start, stop, count = float(parts[0]), float(parts[1]), int(parts[2])
                if not 1 <= count <= MAX_AXIS:
                    raise ValueError(f"{label}: a range takes 1 to {MAX_AXIS} values, got {count}.")
                step = 0.0 if count == 1 else (stop - start) / (count - 1)
                values = [start + i * step for i in range(count)]
            else:
                values = [float(v) for v in text.split(",") if v.strip()]
        except ValueError as err:
            if str(err).startswith(label):
                raise
            raise ValueError(
                f"{label} must be 'start:stop:count' or numbers separated by commas, got {spec!r}."
            ) from None
        if not values:
            raise ValueError(f"{label} must hold at least one number, got {spec!r}.")
    else:
        raise ValueError(f"{label} must be numbers, got {spec!r}.")
    if len(values) > MAX_AXIS:
        raise ValueError(f"{label} takes at most {MAX_AXIS} values, got {len(values)}.")
    low, high = AXIS_BOUNDS[name]
    for v in values:
        if not math.isfinite(v) or not low <= v <= high:
            raise ValueError(f"{label} must be within [{low:g}, {high:g}], got {v!r}.")
    values = [_number(v) for v in values]
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise ValueError(f"{label} lists {', '.join(f'{v:g}' for v in twice)} more than once.")
    return tuple(values)


def _integer(value, label: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{label} must be an integer from {low:,} to {high:,}, got {value!r}.")
    if not low <= value <= high:
        raise ValueError(f"{label} must be from {low:,} to {high:,}, got {value:,}.")
    return int(value)


@dataclass(frozen=True)
class Protocol:
    """How long each cell runs and on what size: the same for every cell of a sweep."""

    size: int = PROTOCOL_BOUNDS["size"][0]
    chains: int = PROTOCOL_BOUNDS["chains"][0]
    burn_in: int = PROTOCOL_BOUNDS["burn_in"][0]
    steps: int = PROTOCOL_BOUNDS["steps"][0]
    max_lag: int = PROTOCOL_BOUNDS["max_lag"][0]

    def __post_init__(self):
        for name, (_, low, high) in PROTOCOL_BOUNDS.items():
            _integer(getattr(self, name), name.replace("_", "-"), low, high)


@dataclass(frozen=True)
class Cell:
    """One experiment run: ``sampler`` on ``target`` at ``(lam, mu, sigma)`` with ``seed``."""

    target: str
    lam: float
    mu: float
    sigma: float
    sampler: str
    seed: int
    protocol: Protocol = field(default_factory=Protocol)

    @property
    def key(self) -> str:
        """Every number that decides the cell's result, as one stable string."""
        p = self.protocol
        return (
            f"{self.target} lam={self.lam!r} mu={self.mu!r} sigma={self.sigma!r} "
            f"{self.sampler} seed={self.seed} size={p.size} chains={p.chains} "
            f"burn_in={p.burn_in} steps={p.steps} max_lag={p.max_lag}"
        )

    @property
    def point(self) -> tuple[str, float, float, float]:
        """The map's point this cell is one sampler-and-seed of."""
        return (self.target, self.lam, self.mu, self.sigma)

    def as_dict(self) -> dict:
        out = asdict(self)
        out.pop("protocol")
        out.update(asdict(self.protocol))
        return out


@dataclass(frozen=True)
class SweepGrid:
    """Targets x lambda x mu x sigma x samplers x seeds, under one protocol."""

    targets: tuple[str, ...] = ("square",)
    lam: tuple[float, ...] = (1.0,)
    mu: tuple[float, ...] = (1.0,)
    sigma: tuple[float, ...] = (3.0,)
    samplers: tuple[str, ...] = DEFAULT_SAMPLERS
    seeds: tuple[int, ...] = (0,)
    protocol: Protocol = field(default_factory=Protocol)

    def __post_init__(self):
        samples = sample_names()
        for name in ("targets", "samplers"):
            values = getattr(self, name)
            if not values:
                raise ValueError(f"give at least one of the {name}.")
            twice = sorted({v for v in values if values.count(v) > 1})
            if twice:
                raise ValueError(f"{name} lists {', '.join(twice)} more than once.")
        for target in self.targets:
            if target != "square" and target not in samples:
                raise ValueError(
                    f"unknown target {target!r}: 'square' (the paper's synthetic problem) or a "
                    f"shipped sample ({', '.join(samples)})."
                )
        unknown = [s for s in self.samplers if s not in SAMPLERS]
        if unknown:
            raise ValueError(
                f"unknown sampler(s) {', '.join(map(repr, unknown))}; "
                f"choose from: {', '.join(SAMPLERS)}."
            )
        for name in ("lam", "mu", "sigma"):
            object.__setattr__(self, name, parse_axis(list(getattr(self, name)), name))
        if not self.seeds:
            raise ValueError("give at least one seed.")
        for seed in self.seeds:
            _integer(seed, "a seed", 0, MAX_SEED)
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds lists a seed more than once.")
        if self.n_cells > MAX_CELLS:
            raise ValueError(
                f"the grid has {self.n_cells:,} cells; a sweep takes at most {MAX_CELLS:,}."
            )

    @property
    def n_cells(self) -> int:
        sizes = (self.targets, self.lam, self.mu, self.sigma, self.samplers, self.seeds)
        return math.prod(len(axis) for axis in sizes)

    def cells(self) -> list[Cell]:
        """Every cell, seed by seed (a sweep stopped early has whole maps for its first seeds),
        then target, lambda, mu, sigma and sampler."""
        product = itertools.product(
            self.seeds, self.targets, self.lam, self.mu, self.sigma, self.samplers
        )
        return [
            Cell(target, lam, mu, sigma, sampler, seed, self.protocol)
            for seed, target, lam, mu, sigma, sampler in product
        ]

    def as_dict(self) -> dict:
        out = {f.name: list(getattr(self, f.name)) for f in fields(self) if f.name != "protocol"}
        out["protocol"] = asdict(self.protocol)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> SweepGrid:
        """A grid from the TOML file's keys (see the module's docstring); unknown keys refused."""
        if not isinstance(data, dict):
            raise ValueError("a sweep's grid must be a table of keys.")
        allowed = {"targets", "lam", "mu", "sigma", "samplers", "seeds", "protocol"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ValueError(
                f"unknown key(s) {', '.join(unknown)}; a grid takes {', '.join(sorted(allowed))}."
            )
        kwargs: dict = {}
        for name in ("targets", "samplers"):
            if name in data:
                value = data[name]
                if isinstance(value, str):
                    value = [v.strip() for v in value.split(",") if v.strip()]
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError(f"{name} must be a list of names, got {value!r}.")
                kwargs[name] = tuple(value)
        for name in ("lam", "mu", "sigma"):
            if name in data:
                kwargs[name] = parse_axis(data[name], name)
        if "seeds" in data:
            kwargs["seeds"] = seeds_from(data["seeds"])
        if "protocol" in data:
            protocol = data["protocol"]
            if not isinstance(protocol, dict):
                raise ValueError(
                    "protocol must be a table (size, chains, burn_in, steps, max_lag)."
                )
            unknown = sorted(set(protocol) - set(PROTOCOL_BOUNDS))
            if unknown:
                raise ValueError(
                    f"unknown protocol key(s) {', '.join(unknown)}; "
                    f"it takes {', '.join(PROTOCOL_BOUNDS)}."
                )
            kwargs["protocol"] = Protocol(**protocol)
        return cls(**kwargs)

    @classmethod
    def from_toml(cls, path: Path) -> SweepGrid:
        """A grid from a TOML file (at most ``MAX_GRID_BYTES``); a sentence naming the file when
        it is bad."""
        path = Path(path)
        if path.exists() and not path.is_file() and not path.is_dir():
            # a device (/dev/zero) never ends, a FIFO waits for a writer: neither is read
            raise ValueError(f"cannot read {path}: it is not a regular file.")
        try:
            size = path.stat().st_size
            text = None if size > MAX_GRID_BYTES else read_capped(path, MAX_GRID_BYTES)
        except OSError as err:
            raise ValueError(f"cannot read {path}: {err.strerror or err}.") from None
        except ValueError as err:  # grown past the cap since stat, or not UTF-8
            raise ValueError(f"{path}: {err}.") from None
        if text is None:
            raise ValueError(f"{path} is over 1 MB; a sweep's grid file is a few lines.")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ValueError(f"{path} is not valid TOML: {err}.") from None
        try:
            return cls.from_dict(data)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None


def seeds_from(value) -> tuple[int, ...]:
    """``3`` means seeds 0, 1, 2; a list gives them one by one."""
    if isinstance(value, bool):
        raise ValueError(f"seeds must be a count or a list of seeds, got {value!r}.")
    if isinstance(value, int):
        count = _integer(value, "seeds", 1, 1000)
        return tuple(range(count))
    if isinstance(value, list) and value:
        return tuple(_integer(v, "a seed", 0, MAX_SEED) for v in value)
    raise ValueError(f"seeds must be a count or a list of seeds, got {value!r}.")
