"""The runs file of ``python -m lsbcore.studies.reproduce`` (``WORK/reproduction.json``):
what ``--from-runs`` reads back to rewrite the document without running again.

A user may point ``--from-runs`` at any file, so it is read with a size cap (a real file of
four cases, four variants and twenty seeds is well under 1 MB) and checked whole against what
the document reads before any of it is used: a wrong file is refused in one sentence that
names the first entry that is missing or malformed, never a traceback from deep in the
document. Infinity is allowed: it marks a chain that did not reach its level within burn-in.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from lsbcore.bounded_json import read_capped
from lsbcore.cases import PAPER_CASES

__all__ = ["MAX_BYTES", "RunsFileError", "load_runs"]

MAX_BYTES = 50 * 2**20
MIN_SEEDS, MAX_SEEDS = 2, 20  # as --seeds: the prediction bound needs two seeds at least
# what the document reads from each run's config
CONFIG_INTS = ("size", "chains", "steps", "burn_in", "ess_from_step", "max_lag")
# per sampler: a number or null, and the chains' burn-in reach (numbers, Infinity allowed)
SAMPLER_NUMBERS = ("ess", "ess_chain_std", "accept")
SAMPLER_LISTS = ("burnin_steps", "burnin_evals")


class RunsFileError(ValueError):
    """The file is not a runs file of this command; the message names the first bad entry."""


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value, low: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _check_run(run, where: str, variants, samplers) -> None:
    if not isinstance(run, dict):
        raise RunsFileError(f"{where} is not an object")
    config = run.get("config")
    if not isinstance(config, dict):
        raise RunsFileError(f"{where} has no config object")
    for key in CONFIG_INTS:
        if not _is_count(config.get(key)):
            raise RunsFileError(f"{where}'s config has no whole number {key!r}")
    if not isinstance(config.get("device"), str):
        raise RunsFileError(f"{where}'s config has no device name")
    learning = config.get("learning")
    if not (
        isinstance(learning, dict)
        and _is_number(learning.get("lr"))
        and _is_count(learning.get("hidden"), 1)
    ):
        raise RunsFileError(f"{where}'s config has no learning lr and hidden")
    for name, entry in run.items():
        if name in ("config", "wall_seconds"):
            continue
        if name not in samplers:
            raise RunsFileError(f"{where} holds {name[:40]!r}, which is not one of its samplers")
        if not isinstance(entry, dict):
            raise RunsFileError(f"{where}[{name!r}] is not an object")
        for key in SAMPLER_NUMBERS:
            if entry.get(key) is not None and not _is_number(entry.get(key)):
                raise RunsFileError(f"{where}[{name!r}] has no number or null {key!r}")
        for key in SAMPLER_LISTS:
            values = entry.get(key)
            if not (isinstance(values, list) and values and all(map(_is_number, values))):
                raise RunsFileError(f"{where}[{name!r}] has no list of numbers {key!r}")
        spread = entry.get("collapse_spread")
        if spread is not None and not _is_number(spread):
            raise RunsFileError(f"{where}[{name!r}]'s collapse_spread is not a number")


def check_runs(data, variants: dict) -> None:
    """Raise ``RunsFileError`` unless ``data`` holds what the document reads: ``runs`` as
    ``{case: {variant: [run, ...]}}`` with every variant, each run's config and sampler entries,
    ``seeds`` and ``wall_seconds``. ``variants`` maps each variant to its samplers
    (``reproduce.VARIANTS``)."""
    if not isinstance(data, dict):
        raise RunsFileError("it holds a JSON " + type(data).__name__ + ", not an object")
    runs = data.get("runs")
    if not isinstance(runs, dict) or not runs:
        raise RunsFileError("its 'runs' are not an object of at least one case")
    seeds = data.get("seeds")
    if not (_is_count(seeds) and MIN_SEEDS <= seeds <= MAX_SEEDS):
        raise RunsFileError(f"it has no 'seeds', a whole number from {MIN_SEEDS} to {MAX_SEEDS}")
    wall = data.get("wall_seconds")
    if not (_is_number(wall) and math.isfinite(wall) and wall >= 0):
        raise RunsFileError("it has no 'wall_seconds'")
    for case, by_variant in runs.items():
        if case not in {str(c) for c in PAPER_CASES}:
            raise RunsFileError(f"runs holds case {case[:20]!r}; the cases are {list(PAPER_CASES)}")
        if not isinstance(by_variant, dict):
            raise RunsFileError(f"runs[{case!r}] is not an object of variants")
        missing = [v for v in variants if v not in by_variant]
        if missing:  # every call of reproduce runs them all, and the document reads them all
            raise RunsFileError(f"runs[{case!r}] has no {missing[0]!r} runs")
        for variant, seed_runs in by_variant.items():
            if variant not in variants:
                raise RunsFileError(f"runs[{case!r}] holds an unknown variant {variant[:40]!r}")
            where = f"runs[{case!r}][{variant!r}]"
            if not isinstance(seed_runs, list) or not seed_runs:
                raise RunsFileError(f"{where} is not a list of at least one run")
            for k, run in enumerate(seed_runs):
                _check_run(run, f"{where}[{k}]", variants, set(variants[variant][1]))
    for key in ("command", "commit", "date"):
        if key in data and not isinstance(data[key], str):
            raise RunsFileError(f"its {key} is not text")


def load_runs(path, variants: dict) -> dict:
    """The runs a previous ``reproduce`` stored at ``path``, checked, with the case keys back
    to integers. ``OSError`` when it cannot be read; ``ValueError`` (``RunsFileError``) with a
    sentence when it is too large, not JSON or not a runs file."""
    text = read_capped(Path(path), MAX_BYTES)
    try:
        data = json.loads(text)
    except ValueError as err:  # JSONDecodeError, or an integer of thousands of digits
        raise RunsFileError(f"it is not JSON ({str(err)[:80]})") from None
    try:
        check_runs(data, variants)
    except RunsFileError as err:
        raise RunsFileError(f"it is not a runs file of this command: {err}") from None
    data["runs"] = {int(case): by_variant for case, by_variant in data["runs"].items()}
    return data
