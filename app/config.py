"""The dashboard's configuration: one frozen record, its bounds, and its query-parameter form.

Everything a user can set in the sidebar lives in ``Config``. The same record is written to the
URL (``to_query_params``) so that a link reopens the exact configuration, and read back from it
(``from_query_params``) with every value validated: unknown names, NaN, infinities, negative or
huge numbers are clamped or replaced by defaults, and each such repair is reported as a sentence
the page shows as a warning. ``cap_workload`` bounds what one session may ask for.

No Streamlit here: this module is plain data and is tested as such.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace

from lsbcore import PAPER_CASES, REGISTRY, SAMPLERS

SOURCES = ("paper", "sample", "upload")
BOUNDARIES = ("free", "periodic")
OPTIMIZERS = ("adam", "sgd")
DEVICES = ("auto", "cpu", "cuda")
# steps per refresh: "auto" fills the refresh interval, a number caps it (slow motion for demos)
SPEEDS = ("auto", "1", "2", "5", "10", "20", "50", "100", "200", "500", "1000")
# order of the sampler multiselect: by family (fixed, learned and imported, uninformed, block),
# registry order within one; a family the list does not know goes last
FAMILIES = ("locally balanced", "learned", "uninformed", "block")


def _family_rank(name: str) -> tuple[int, int]:
    family = REGISTRY[name].family
    rank = FAMILIES.index(family) if family in FAMILIES else len(FAMILIES)
    return rank, SAMPLERS.index(name)


SAMPLER_ORDER: tuple[str, ...] = tuple(sorted(SAMPLERS, key=_family_rank))

DEFAULT_SAMPLE = "synthetic_disc_letter"
# assets/README.md: every shipped sample shows a dark object except the cell (bright)
BRIGHT_OBJECT_SAMPLES = frozenset({"cell"})

# What one session may ask for (see cap_workload): sites x chains x samplers, and the number of
# per-chain trace values kept ((burn-in + steps) / thin x chains x samplers x 3 fields).
MAX_WORKLOAD = 1_500_000
MAX_TRACE_VALUES = 12_000_000


@dataclass(frozen=True)
class Config:
    """Everything the sidebar sets. Defaults: paper case 3, five samplers, ready to run."""

    source: str = "paper"
    case: int = 3
    sample: str = DEFAULT_SAMPLE
    size: int = 30  # paper: n of the n x n lattice; images: the longer side in pixels
    lam: float = 1.0
    mu: float = 1.0
    sigma: float = 3.0
    boundary: str = "periodic"
    invert: bool = True  # images: the object is dark
    noise: float = 0.0  # images: sd of synthetic Gaussian noise added to y
    seed: int = 0
    samplers: tuple[str, ...] = ("barker", "sqrt", "max", "lsb1", "lsb2")
    chains: int = 4
    burn_in: int = 2000
    steps: int = 30_000  # mixing steps after burn-in (the paper's protocol)
    thin: int = 1
    lr: float = 0.01
    optimizer: str = "adam"
    hidden: int = 10
    device: str = "auto"
    speed: str = "auto"

    @property
    def total_steps(self) -> int:
        return self.burn_in + self.steps

    def as_dict(self) -> dict:
        out = asdict(self)
        out["samplers"] = list(self.samplers)
        return out


# Numeric bounds: name -> (kind, low, high). Values outside are clamped (with a warning).
BOUNDS: dict[str, tuple[type, float, float]] = {
    "case": (int, 1, 4),
    "size": (int, 16, 256),
    "lam": (float, 0.0, 10.0),
    "mu": (float, 0.0, 20.0),
    "sigma": (float, 0.01, 20.0),
    "noise": (float, 0.0, 2.0),
    "seed": (int, 0, 2**31 - 1),
    "chains": (int, 1, 64),
    "burn_in": (int, 0, 50_000),
    "steps": (int, 0, 200_000),
    "thin": (int, 1, 1000),
    "lr": (float, 1e-5, 1.0),
    "hidden": (int, 1, 64),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "source": SOURCES,
    "boundary": BOUNDARIES,
    "optimizer": OPTIMIZERS,
    "device": DEVICES,
    "speed": SPEEDS,
}
# Fields that define the posterior: changing one builds a new target.
TARGET_FIELDS = (
    "source",
    "case",
    "sample",
    "size",
    "lam",
    "mu",
    "sigma",
    "boundary",
    "invert",
    "noise",
    "seed",
)
# Fields that define the samplers: changing one rebuilds the comparison.
SAMPLER_FIELDS = ("samplers", "chains", "thin", "lr", "optimizer", "hidden", "device")
# The run follows the others (mixing steps, speed) without a reset; a new burn-in length resets
# it only once the run has passed it (see session.py).

LABELS = {
    "source": "source",
    "case": "paper case",
    "sample": "sample image",
    "size": "working resolution",
    "lam": "λ",
    "mu": "μ",
    "sigma": "σ",
    "boundary": "boundary",
    "invert": "object is dark",
    "noise": "synthetic noise",
    "seed": "seed",
    "samplers": "samplers",
    "chains": "chains",
    "thin": "record every",
    "lr": "learning rate",
    "optimizer": "optimiser",
    "hidden": "LSB 2 width",
    "device": "device",
    "burn_in": "burn-in",
}


def source_defaults(source: str, case: int = 3, sample: str = DEFAULT_SAMPLE) -> dict:
    """The posterior settings a source starts from: the paper's for a case, ours for images."""
    if source == "paper":
        _, lam, mu, sigma, _ = PAPER_CASES.get(case, PAPER_CASES[3])
        return {
            "size": 30,
            "lam": lam,
            "mu": mu,
            "sigma": sigma,
            "boundary": "periodic",
            "noise": 0.0,
            "invert": True,
        }
    # images: y in [-1, 1], alpha = mu y / sigma^2 up to +-4; lambda = 1 cleans the synthetic
    # sample to ~99 % accuracy at 48 px within ~2000 steps
    return {
        "size": 48,
        "lam": 1.0,
        "mu": 1.0,
        "sigma": 0.5,
        "boundary": "free",
        "noise": 0.0,
        "invert": sample not in BRIGHT_OBJECT_SAMPLES if source == "sample" else True,
    }


def defaults_for(source: str = "paper", case: int = 3, sample: str = DEFAULT_SAMPLE) -> Config:
    return replace(
        Config(), source=source, case=case, sample=sample, **source_defaults(source, case, sample)
    )


# ----------------------------------------------------------------------------- validation
def _number(name: str, raw, warnings: list[str]):
    """``raw`` (str or number) as a finite number within BOUNDS[name], or None if unusable."""
    kind, low, high = BOUNDS[name]
    label = LABELS.get(name, name)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        warnings.append(f"{label}: {str(raw)[:40]!r} is not a number; using the default.")
        return None
    if math.isnan(value):
        warnings.append(f"{label}: NaN is not allowed; using the default.")
        return None
    if value < low or value > high:
        clamped = min(max(value, low), high)
        shown = "∞" if math.isinf(value) else f"{value:g}"
        warnings.append(f"{label}: {shown} is outside [{low:g}, {high:g}]; using {clamped:g}.")
        value = clamped
    if kind is int:
        if value != int(value):
            warnings.append(f"{label}: {value:g} is not a whole number; using {round(value)}.")
        return int(round(value))
    return float(value)


def _choice(name: str, raw, choices, warnings: list[str]):
    value = str(raw).strip().lower()
    if value in choices:
        return value
    label = LABELS.get(name, name)
    warnings.append(
        f"{label}: {str(raw)[:40]!r} is not one of {', '.join(choices)}; using the default."
    )
    return None


def _boolean(name: str, raw, warnings: list[str]):
    value = str(raw).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    warnings.append(f"{LABELS.get(name, name)}: {str(raw)[:40]!r} is not true/false; ignored.")
    return None


def parse_samplers(raw, warnings: list[str]) -> tuple[str, ...] | None:
    """A comma-separated (or repeated) list of sampler names; unknown names are dropped."""
    items = raw if isinstance(raw, (list, tuple)) else [raw]
    names: list[str] = []
    for item in items:
        for part in str(item).split(","):
            name = part.strip().lower()
            if not name:
                continue
            if name not in SAMPLERS:
                warnings.append(f"samplers: unknown sampler {name[:40]!r} ignored.")
            elif name not in names:
                names.append(name)
    if not names:
        warnings.append("samplers: none of the names is known; using the default samplers.")
        return None
    return tuple(n for n in SAMPLER_ORDER if n in names)


def validate(values: Mapping, samples: tuple[str, ...] = ()) -> tuple[Config, list[str]]:
    """A ``Config`` from loosely typed ``values`` (query strings or widget values).

    Missing or unusable values take the default of the chosen source (paper case, sample or
    upload); each repair adds a sentence to the returned warnings.
    """
    warnings: list[str] = []
    known = {f.name for f in fields(Config)}
    for key in values:
        if key not in known:
            warnings.append(f"Unknown link parameter {str(key)[:40]!r} ignored.")

    def first(key):
        raw = values.get(key)
        if isinstance(raw, (list, tuple)) and key != "samplers":
            raw = raw[-1] if raw else None
        return raw

    source = _choice("source", first("source"), SOURCES, warnings) if "source" in values else None
    source = source or "paper"
    case = _number("case", first("case"), warnings) if "case" in values else None
    case = case or 3
    sample = DEFAULT_SAMPLE
    if "sample" in values:
        raw = str(first("sample")).strip()
        if raw in samples:
            sample = raw
        else:
            warnings.append(
                f"sample image: {raw[:40]!r} is not a shipped sample; using the default."
            )
    base = defaults_for(source, case, sample)
    out: dict = {}
    for f in fields(Config):
        name = f.name
        if name in ("source", "case", "sample") or name not in values:
            continue
        raw = first(name)
        if name == "samplers":
            value = parse_samplers(values.get(name), warnings)
        elif name in BOUNDS:
            value = _number(name, raw, warnings)
        elif name in CHOICES:
            value = _choice(name, raw, CHOICES[name], warnings)
        else:  # invert
            value = _boolean(name, raw, warnings)
        if value is not None:
            out[name] = value
    return replace(base, **out), warnings


def from_query_params(
    params: Mapping, samples: tuple[str, ...] = ()
) -> tuple[Config | None, list[str]]:
    """The configuration a link asks for, or ``(None, [])`` when the link carries none."""
    if not params:
        return None, []
    return validate(params, samples)


def to_query_params(cfg: Config) -> dict[str, str]:
    """Every field as a string: a link that reopens exactly this configuration."""
    out: dict[str, str] = {}
    for f in fields(Config):
        value = getattr(cfg, f.name)
        if f.name == "samplers":
            out[f.name] = ",".join(value)
        elif isinstance(value, bool):
            out[f.name] = "1" if value else "0"
        elif isinstance(value, float):
            out[f.name] = repr(value)
        else:
            out[f.name] = str(value)
    return out


# ----------------------------------------------------------------------------- workload
def cap_workload(cfg: Config) -> tuple[Config, list[str]]:
    """Bound the work and memory one session may ask for; say what was reduced and why."""
    notes: list[str] = []
    n_samplers = max(1, len(cfg.samplers))
    sites = cfg.size * cfg.size  # the longer side bounds the image
    chains = cfg.chains
    if sites * chains * n_samplers > MAX_WORKLOAD:
        chains = max(1, MAX_WORKLOAD // (sites * n_samplers))
        notes.append(
            f"Chains reduced from {cfg.chains} to {chains} so that one session stays responsive "
            f"(resolution² × chains × samplers ≤ {MAX_WORKLOAD:,})."
        )
    size = cfg.size
    if size * size * chains * n_samplers > MAX_WORKLOAD:
        size = max(BOUNDS["size"][1], math.isqrt(MAX_WORKLOAD // (chains * n_samplers)))
        notes.append(
            f"Working resolution reduced from {cfg.size} to {size} "
            f"(resolution² × chains × samplers ≤ {MAX_WORKLOAD:,})."
        )
    thin = cfg.thin
    per_record = chains * n_samplers * 3
    if cfg.total_steps / thin * per_record > MAX_TRACE_VALUES:
        thin = math.ceil(cfg.total_steps * per_record / MAX_TRACE_VALUES)
        notes.append(
            f"Recording every {thin} steps instead of every {cfg.thin} to bound the memory of "
            "the traces; the paper ESS then counts lags in recorded draws."
        )
    return replace(cfg, chains=chains, size=size, thin=thin), notes


def changed(old: Config, new: Config, names) -> list[str]:
    """The labels of the fields among ``names`` that differ between two configurations."""
    return [LABELS.get(n, n) for n in names if getattr(old, n) != getattr(new, n)]


def steps_per_refresh(cfg: Config) -> int | None:
    """The user's cap on steps per refresh, or None for "fill the refresh interval"."""
    return None if cfg.speed == "auto" else int(cfg.speed)
