"""A pinned run: what the page keeps of a run to compare it with others later, as JSON.

A pin holds the run's configuration (``app.config.Config``), its summary numbers per sampler
(acceptance, P(move) where a slow-motion step measured it, the Mixing view's ESS and R-hat, ESS
per mixing second, wall time), and the data its figures need: the autocorrelation of the
magnetisation (mean over chains), g(t) on the fixed grid ``T_GRID`` (so that runs on different
posteriors overlay), the learned functions' parameters (``lsbcore.balancing_to_dict``) and
LSB 1's softmax weights. Never the raw traces: a pin is a few tens of kB.

``from_json`` reads a pin back from a file a user may have edited: every field is checked
(type, size, finite and bounded numbers, known samplers, a configuration the sidebar accepts,
learned functions that ``lsbcore.load_balancing`` accepts, holding exactly the fields
``lsbcore.balancing_to_dict`` writes), a key the format does not have is refused at every level,
and each refusal is a ``PinError`` whose message is one plain sentence (show it with
``app.text.plain``: it may quote the file). Names and problem texts lose control and invisible
format characters (``visible``).

A pin of an RBM run (``config.target`` an RBM) holds its samplers by their variant labels, no
autocorrelation, and its MMD curves instead (``mmd``: per sampler, target evaluations per chain
and log10 MMD at each checkpoint, at most ``MAX_RECORDS`` points) with the run's noise floor.
A pin written before the target picker existed has no ``target`` in its configuration: the
Ising posterior.

No Streamlit here.
"""

from __future__ import annotations

import json
import math
import re
import time
import unicodedata
import warnings
from dataclasses import dataclass, field, fields

import numpy as np

import lsbcore
from app import config as cfgmod
from app import mixing_diagnostics, rbm_run, rbm_targets, sources
from app.config import Config
from lsbcore import REGISTRY, bounded_json
from lsbcore.studies import figures

FORMAT = "lsb-explorer/pin"
VERSION = 1
MAX_BYTES = 1_000_000  # a pin of 8 samplers with a 500-lag ACF is ~60 kB
NAME_CHARS = 60
PROBLEM_CHARS = 200
MAX_NUMBER = 1e12  # summary numbers (ESS, seconds, steps) of any run we can sample are far below
MAX_G = 1e300  # g(t) of the learned functions may be large, but finite
MAX_LAG = 500  # the Mixing view's paper-ESS window; a pin's ACF has at most MAX_LAG + 1 values
# g(t) is kept on one grid for every pin, wide enough for every posterior the sidebar allows
T_GRID = np.logspace(-8.0, 8.0, 129)
SUMMARY_FIELDS = (
    "accept_rate",
    "move_prob",
    "ess_paper_mean",
    "ess_paper_std",
    "ess_bulk",
    "ess_per_second",
    "rhat",
    "wall_seconds",
)
SUMMARY_LABELS = {
    "accept_rate": "acceptance",
    "move_prob": "P(move)",
    "ess_paper_mean": "paper ESS",
    "ess_paper_std": "paper ESS std over chains",
    "ess_bulk": "bulk ESS",
    "ess_per_second": "bulk ESS per mixing second",
    "rhat": "R-hat",
    "wall_seconds": "sampling seconds",
}
PHASES = ("burnin", "mixing")
MAX_RECORDS = rbm_run.MAX_RECORDS  # an MMD curve's points at most
LOG_MMD_RANGE = (-60.0, 1.0)  # log10 of a squared MMD in [0, 2] (a kernel in [e^-1, 1])
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")  # C0, DEL, C1, line breaks
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")  # app.text.escape's backslashes


class PinError(ValueError):
    """A pin that cannot be read: the message is one sentence saying what is wrong."""


@dataclass(frozen=True)
class Pin:
    name: str
    created: float  # seconds since the epoch
    problem: str  # the problem's name ("case 3: ...", a sample's name, "uploaded image")
    config: Config
    steps: int  # steps done when pinned
    phase: str  # "burnin" or "mixing"
    shared: bool  # every chain samples one posterior (pooled bulk ESS and R-hat are defined)
    max_lag: int | None  # the paper-ESS window used; None before there were mixing draws
    samplers: dict[str, dict[str, float | None]]  # name -> SUMMARY_FIELDS
    acf: dict[str, list[float]] = field(default_factory=dict)  # name -> [max_lag + 1]
    g: dict[str, list[float | None]] = field(default_factory=dict)  # name -> g(T_GRID)
    learned: dict[str, dict] = field(default_factory=dict)  # name -> balancing_to_dict
    weights: list[float] | None = None  # LSB 1's softmax weights (barker, sqrt, min, max)
    mmd: dict[str, dict[str, list]] = field(default_factory=dict)  # RBM: evals, log_mmd
    noise_floor: float | None = None  # RBM: log10 MMD of exact samples at this chain count

    def to_dict(self) -> dict:
        out = {"format": FORMAT, "version": VERSION}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.as_dict() if f.name == "config" else value
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, separators=(",", ":"))

    def renamed(self, name: str) -> Pin:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return Pin(**{**values, "name": clean_name(name)})


def visible(text: str) -> str:
    """``text`` as it may be shown: control characters and line breaks as spaces, and Unicode
    format characters (category Cf: bidirectional overrides, embeddings, isolates and marks,
    zero-width spaces and joiners, the byte-order mark) removed. Removed, not refused: they are
    invisible, so a sentence asking to delete them would name what nobody can see, while left
    in they could reverse a name on the page or make two names look alike."""
    text = _CONTROL.sub(" ", text)
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def clean_name(name) -> str:
    """A pin's name from user text (typed, renamed, or in an uploaded file): ``visible``,
    trimmed, at most NAME_CHARS characters; refused when empty. Shown as plain text wherever
    it appears."""
    if not isinstance(name, str):
        raise PinError("a pin's name must be text.")
    if len(name) > 4 * NAME_CHARS:  # before any work on it: a name is short
        raise PinError(f"a pin's name has at most {NAME_CHARS} characters.")
    text = " ".join(visible(name).split())
    if not text:
        raise PinError("a pin needs a name.")
    if len(text) > NAME_CHARS:
        raise PinError(f"a pin's name has at most {NAME_CHARS} characters.")
    return text


# ----------------------------------------------------------------------------- from a run
def _finite(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _rounded(values) -> list[float | None]:
    # six significant digits keep a pin small and are more than any figure shows
    return [None if v is None else float(f"{v:.6g}") for v in map(_finite, values)]


def _registry_name(cfg: Config, name: str) -> str:
    """The registry sampler behind a pin's sampler name (an RBM's variant label, or itself)."""
    return rbm_targets.registry_name(name) if rbm_targets.is_rbm(cfg.target) else name


def _capture_rbm(run, name: str, now: float | None) -> Pin:
    comparison = run.comparison
    with run.lock:
        samplers = comparison.samplers
        summaries = {
            n: {"accept_rate": s.accept_rate, "wall_seconds": s.wall_seconds}
            for n, s in samplers.items()
        }
        balanced = {
            n: s.balancing
            for n, s in samplers.items()
            if REGISTRY[rbm_targets.registry_name(n)].balanced
        }
        _, g, _ = figures.balancing_curves(balanced, T_GRID)
        learned = {
            n: lsbcore.balancing_to_dict(s.balancing) for n, s in samplers.items() if s.learnable
        }
        weights = samplers["lsb1"].balancing.weights() if "lsb1" in samplers else None
        curves = {n: comparison.curve(n) for n in comparison.labels}
        steps, phase = run.n_steps, run.phase
    floor = run.cache.get("rbm_floor")
    mmd = {
        n: {
            "evals": [int(v) for v in c["evals"][-MAX_RECORDS:]],
            "log_mmd": _rounded(c["log_mmd"][-MAX_RECORDS:]),
        }
        for n, c in curves.items()
    }
    return Pin(
        name=name,
        created=time.time() if now is None else now,
        problem=visible(str(run.problem.name)[: 4 * PROBLEM_CHARS])[:PROBLEM_CHARS],
        config=run.config,
        steps=int(steps),
        phase=phase,
        shared=True,
        max_lag=None,
        samplers={
            n: dict(zip(SUMMARY_FIELDS, _rounded(d.get(k) for k in SUMMARY_FIELDS), strict=True))
            for n, d in summaries.items()
        },
        g={n: _rounded(v) for n, v in g.items()},
        learned=learned,
        weights=None if weights is None else _rounded(weights),
        mmd=mmd,
        noise_floor=_finite(floor),
    )


def capture(run, name: str, now: float | None = None) -> Pin:
    """Pin ``run`` (an ``app.state.Run``) as it is now, under ``name``."""
    name = clean_name(name)
    if rbm_run.is_rbm_run(run):
        return _capture_rbm(run, name, now)
    shared = run.problem.target.batch == 1
    with run.lock:  # the worker updates samplers and traces in place
        series = mixing_diagnostics.snapshot(run)
        _, mixing_seconds = run.phase_seconds()
        samplers = run.comparison.samplers
        summaries = {
            n: {
                "accept_rate": s.accept_rate,
                "wall_seconds": s.wall_seconds,
            }
            for n, s in samplers.items()
        }
        step = run.last_step
        for n, site in step.sites.items() if step is not None else ():
            if n in summaries:
                summaries[n]["move_prob"] = site.move_prob
        balancings = figures.balancings_of(samplers)
        _, g, _ = figures.balancing_curves(balancings, T_GRID)
        learned = {
            n: lsbcore.balancing_to_dict(s.balancing)
            for n, s in samplers.items()
            if REGISTRY[n].learnable
        }
        weights = samplers["lsb1"].balancing.weights() if "lsb1" in samplers else None
        steps, phase = run.n_steps, run.phase
    view = mixing_diagnostics.mixing_view(series, MAX_LAG, shared) if phase == "mixing" else None
    acf = {}
    if view is not None:
        with warnings.catch_warnings():  # a lag no chain defines is a gap, not a warning
            warnings.simplefilter("ignore", RuntimeWarning)
            acf = {n: _rounded(np.nanmean(rho, axis=0)) for n, rho in view.acf_curves.items()}
        for n, d in view.summaries.items():
            ess = _finite(d.get("ess_bulk"))
            seconds = _finite(mixing_seconds.get(n))
            summaries[n].update(
                ess_paper_mean=d.get("ess_paper_mean"),
                ess_paper_std=d.get("ess_paper_std"),
                ess_bulk=ess,
                rhat=d.get("rhat"),
                ess_per_second=ess / seconds if ess is not None and seconds else None,
            )
    return Pin(
        name=name,
        created=time.time() if now is None else now,
        problem=visible(str(run.problem.name)[: 4 * PROBLEM_CHARS])[:PROBLEM_CHARS],
        config=run.config,
        steps=int(steps),
        phase=phase,
        shared=shared,
        max_lag=None if view is None else int(view.max_lag),
        samplers={
            n: dict(zip(SUMMARY_FIELDS, _rounded(d.get(k) for k in SUMMARY_FIELDS), strict=True))
            for n, d in summaries.items()
        },
        acf=acf,
        g={n: _rounded(v) for n, v in g.items()},
        learned=learned,
        weights=None if weights is None else _rounded(weights),
    )


# ----------------------------------------------------------------------------- from JSON


def _parse(raw) -> dict:
    if isinstance(raw, str):
        raw = raw.encode("utf-8")
    if not isinstance(raw, (bytes, bytearray)):
        raise PinError("a pin is read from JSON text.")
    if len(raw) > MAX_BYTES:
        raise PinError(f"the file is larger than {MAX_BYTES // 1000:,} kB; not a pinned run.")
    try:
        text = bytes(raw).decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise PinError("this is not UTF-8 text, so not a pinned run.") from err
    try:
        data = bounded_json.loads(text, "a pin", PinError)
    except (json.JSONDecodeError, RecursionError) as err:
        raise PinError(f"this is not valid JSON ({err.__class__.__name__}).") from err
    if not isinstance(data, dict):
        raise PinError("a pinned run is a JSON object.")
    return data


def _number(value, what: str, low: float, high: float, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    number = not isinstance(value, bool) and isinstance(value, (int, float))
    if not (number and low <= value <= high):  # False for NaN; no float() of a huge int
        raise PinError(f"{what} must be a number between {low:g} and {high:g}.")
    return float(value)


def _integer(value, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise PinError(f"{what} must be a whole number between {low:,} and {high:,}.")
    return value


def _numbers(value, what: str, low: float, high: float, length=None, optional=False) -> list:
    if not isinstance(value, list):
        raise PinError(f"{what} must be a list of numbers.")
    if length is not None and len(value) not in length:
        raise PinError(f"{what} must hold {' or '.join(map(str, length))} numbers.")
    return [_number(v, what, low, high, optional) for v in value]


def _text(value, what: str, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise PinError(f"{what} must be text of at most {limit} characters.")
    return visible(value)


def _per_sampler(value, what: str, names) -> dict:
    if not isinstance(value, dict):
        raise PinError(f"'{what}' must be an object keyed by sampler.")
    unknown = [k for k in value if k not in names]
    if unknown:
        raise PinError(f"'{what}' names a sampler the pinned run did not have: {unknown[0]!r:.40}.")
    return value


def _config(value) -> Config:
    if not isinstance(value, dict):
        raise PinError("'config' must be an object.")
    expected = {f.name for f in fields(Config)}
    if "target" not in value:  # a pin from before the target picker: the Ising posterior
        value = {**value, "target": "ising"}
    if set(value) != expected:
        odd = sorted(set(value) ^ expected)
        raise PinError(f"'config' must hold exactly the app's settings; {odd[0]!r:.40} is amiss.")
    samplers = value["samplers"]
    if not (isinstance(samplers, list) and all(isinstance(n, str) for n in samplers)):
        raise PinError("'config': samplers must be a list of sampler names.")
    if any(isinstance(v, (dict, list)) for k, v in value.items() if k != "samplers"):
        raise PinError("'config' holds only numbers, text and yes/no values.")
    cfg, warnings = cfgmod.validate(value, sources.sample_names())
    if warnings:  # the sidebar's own sentence, its Markdown escapes removed (shown via plain)
        raise PinError("'config': " + _ESCAPED.sub(r"\1", warnings[0]))
    for name in ("target", "source", "case"):  # validate falls back quietly on these
        if getattr(cfg, name) != value[name]:
            raise PinError(f"'config': {name} {value[name]!r:.40} is not one the app knows.")
    if len(cfg.samplers) != len(samplers):
        raise PinError("'config': a sampler is named twice.")
    return cfg


def from_dict(data) -> Pin:
    """A pin from its JSON object, every field checked (module docstring)."""
    if not isinstance(data, dict):
        raise PinError("a pinned run is a JSON object.")
    if data.get("format") != FORMAT:
        raise PinError(f"'format' must be {FORMAT!r}: this is not an LSB Explorer pinned run.")
    if data.get("version") != VERSION:
        raise PinError(f"unsupported pin version; this build reads version {VERSION}.")
    expected = {"format", "version"} | {f.name for f in fields(Pin)}
    extra = sorted(set(data) - expected)
    if extra:
        raise PinError(f"unexpected field {extra[0]!r:.40} in the pin.")
    missing = sorted({"name", "created", "problem", "config", "steps", "samplers"} - set(data))
    if missing:
        raise PinError(f"the pin has no {missing[0]!r}.")
    cfg = _config(data["config"])
    names = set(cfg.samplers)
    phase = data.get("phase", "mixing")
    if phase not in PHASES:
        raise PinError("'phase' must be 'burnin' or 'mixing'.")
    samplers = {}
    for name, summary in _per_sampler(data["samplers"], "samplers", names).items():
        if not isinstance(summary, dict) or set(summary) - set(SUMMARY_FIELDS):
            raise PinError(f"'samplers' of {name}: an object of {', '.join(SUMMARY_FIELDS)}.")
        samplers[name] = {
            k: _number(summary.get(k), f"{name}'s {k}", -MAX_NUMBER, MAX_NUMBER, True)
            for k in SUMMARY_FIELDS
        }
    acf = {
        n: _numbers(
            v, f"{n}'s autocorrelation", -1.0 - 1e-6, 1.0 + 1e-6, range(1, MAX_LAG + 2), True
        )
        for n, v in _per_sampler(data.get("acf", {}), "acf", names).items()
    }
    g = {
        n: _numbers(v, f"{n}'s g(t)", 0.0, MAX_G, (len(T_GRID),), optional=True)
        for n, v in _per_sampler(data.get("g", {}), "g", names).items()
    }
    learned = {}
    for n, params in _per_sampler(data.get("learned", {}), "learned", names).items():
        if not REGISTRY[_registry_name(cfg, n)].learnable:
            raise PinError(f"{n} does not learn its balancing function.")
        learned[n] = _learned(params, n)
    weights = data.get("weights")
    if weights is not None:
        weights = _numbers(weights, "'weights'", 0.0, 1.0, (4,))
        if abs(sum(weights) - 1.0) > 1e-3:
            raise PinError("'weights' must sum to 1.")
    mmd = {n: _mmd_curve(v, n) for n, v in _per_sampler(data.get("mmd", {}), "mmd", names).items()}
    if mmd and not rbm_targets.is_rbm(cfg.target):
        raise PinError("'mmd' curves belong to a pin of an RBM run.")
    floor = data.get("noise_floor")
    floor = None if floor is None else _number(floor, "'noise_floor'", *LOG_MMD_RANGE)
    max_lag = data.get("max_lag")
    shared = data.get("shared", True)
    if not isinstance(shared, bool):
        raise PinError("'shared' must be true or false.")
    return Pin(
        name=clean_name(data["name"]),
        created=_number(data["created"], "'created'", 0.0, time.time() + 86_400.0),
        problem=_text(data["problem"], "'problem'", PROBLEM_CHARS),
        config=cfg,
        steps=_integer(data["steps"], "'steps'", 0, cfgmod.BOUNDS["burn_in"][2] * 100),
        phase=phase,
        shared=shared,
        max_lag=None if max_lag is None else _integer(max_lag, "'max_lag'", 1, MAX_LAG),
        samplers=samplers,
        acf=acf,
        g=g,
        learned=learned,
        weights=weights,
        mmd=mmd,
        noise_floor=floor,
    )


def _learned(params, name: str) -> dict:
    """A learned function of a pin: exactly what ``lsbcore.balancing_to_dict`` writes, no key
    more (padding a pin with extra keys is refused, not carried), its values checked by
    ``lsbcore.load_balancing`` and kept as it writes them back."""
    if not isinstance(params, dict):  # never a path or text for load_balancing to open
        raise PinError(f"the learned function of {name} must be an object.")
    try:
        canonical = lsbcore.balancing_to_dict(lsbcore.load_balancing(params))
    except ValueError as err:  # its own checks: kind, sizes, finite g
        raise PinError(f"the learned function of {name}: {err}") from err
    for given, known in ((params, canonical), (params["parameters"], canonical["parameters"])):
        odd = sorted(set(given) - set(known))
        if odd:
            raise PinError(
                f"the learned function of {name} holds {odd[0]!r:.40}, which is not one of "
                f"its fields ({', '.join(known)})."
            )
    return canonical


def _mmd_curve(value, name: str) -> dict[str, list]:
    """An MMD curve of a pin: ``evals`` (whole, non-decreasing) and ``log_mmd`` alike long."""
    if not isinstance(value, dict) or set(value) != {"evals", "log_mmd"}:
        raise PinError(f"'mmd' of {name} must be an object of evals and log_mmd.")
    evals, log_mmd = value["evals"], value["log_mmd"]
    if not isinstance(evals, list) or not isinstance(log_mmd, list):
        raise PinError(f"'mmd' of {name}: evals and log_mmd must be lists.")
    if len(evals) != len(log_mmd) or len(evals) > MAX_RECORDS:
        raise PinError(
            f"'mmd' of {name}: evals and log_mmd must be equally long, at most {MAX_RECORDS:,}."
        )
    evals = [_integer(v, f"{name}'s evaluations", 0, int(MAX_NUMBER)) for v in evals]
    if any(b < a for a, b in zip(evals, evals[1:], strict=False)):
        raise PinError(f"'mmd' of {name}: evaluations must not decrease.")
    low, high = LOG_MMD_RANGE
    return {
        "evals": evals,
        "log_mmd": _numbers(log_mmd, f"{name}'s log10 MMD", low, high, optional=True),
    }


def from_json(raw) -> Pin:
    """A pin from JSON text or bytes (a download of ``Pin.to_json``), every field checked."""
    return from_dict(_parse(raw))
