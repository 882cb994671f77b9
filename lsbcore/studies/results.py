"""The results document shared by the experiment command and the dashboard's export.

``comparison_results`` turns a finished comparison into one JSON-ready dict::

    {
      "config":   {... everything needed to rerun, plus "max_lag": the ESS window used; the
                   experiment adds "protocol", "ess_from_step", "burnin_steps_per_iteration",
                   "start", "seeds" (lsbcore.studies.experiment) ...},
      "device":   "cpu" | "cuda (<GPU name>)",
      "versions": {"lsb_explorer", "torch", "numpy", "python", "arviz_stats"},
      "samplers": {name: {"ess_paper_mean", "ess_paper_std", "ess_bulk", "rhat",
                          "ess_bulk_chain_mean", "ess_bulk_chain_std", "accept_rate",
                          "final_accuracy", "target_evals", "burnin_seconds", "mixing_seconds",
                          "settled", "unsettled_fraction"}},
    }

``ess_bulk`` and ``rhat`` pool the chains, so they are ``null`` when the chains sample
different posteriors (the paper cases give every chain its own noisy alpha; then
``config.chains_share_posterior`` is false); ``ess_bulk_chain_mean`` / ``_std`` are every
chain's own bulk ESS, meaningful either way.

``settled`` and ``unsettled_fraction`` are the marginal's settled verdict
(``lsbcore.diagnostics.settled``) where every chain samples one posterior, else ``null`` (the
paper cases give every chain its own alpha).

The ESS series is each trace's mixing phase unless ``series`` is given (the experiment's
``--protocol authors`` window, ``lsbcore.studies.experiment.paper_protocol.ess_series``). Several
seeds
aggregate in ``lsbcore.studies.experiment.seeds`` (which adds ``ess_paper_seed_std`` and
``ess_paper_by_seed``).

Numbers that are undefined (NaN) or infinite are ``null``; ``results_to_json`` writes strict JSON.
"""

from __future__ import annotations

import json
import math
import platform
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

import numpy as np
import torch

from lsbcore.diagnostics.mixing import (
    MIN_DRAWS_ARVIZ,
    PAPER_MAX_LAG,
    PAPER_THRESHOLD,
    ess_bulk_per_chain,
    summarise_mixing,
)
from lsbcore.diagnostics.trace import accuracy
from lsbcore.samplers.interface import ChainSampler

__all__ = [
    "SAMPLER_FIELDS",
    "comparison_results",
    "effective_max_lag",
    "results_to_json",
    "versions",
]

#: The per-sampler fields of ``results["samplers"][name]``, in order.
SAMPLER_FIELDS = (
    "ess_paper_mean",
    "ess_paper_std",
    "ess_bulk",
    "rhat",
    "ess_bulk_chain_mean",
    "ess_bulk_chain_std",
    "accept_rate",
    "final_accuracy",
    "target_evals",
    "burnin_seconds",
    "mixing_seconds",
    "settled",
    "unsettled_fraction",
)


def effective_max_lag(n_draws: int, max_lag: int = PAPER_MAX_LAG) -> int | None:
    """The paper-ESS window ``L`` for a mixing phase of ``n_draws`` recorded draws.

    ``max_lag`` when the phase is at least twice as long (the paper: L = 500 of 30 000 draws);
    otherwise ``n_draws // 2``, so that every autocorrelation still averages over at least half
    of the series. ``None`` below 2 draws (no ESS). A clipped window changes the scale of the
    paper ESS (it lies in ``[1, L + 1]``), which is why the value used goes into the config.
    """
    if isinstance(max_lag, bool) or not isinstance(max_lag, int) or max_lag < 1:
        raise ValueError(f"max_lag must be a positive integer, got {max_lag!r}.")
    if n_draws < 2:
        return None
    return min(max_lag, n_draws // 2)


def _package_version() -> str:
    try:
        return metadata.version("lsb-explorer")
    except metadata.PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        import tomllib

        return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"])
    except (OSError, KeyError, ValueError):
        return "unknown"


def versions() -> dict[str, str]:
    """Versions of LSB Explorer and of the libraries the numbers depend on."""
    try:
        arviz_stats = metadata.version("arviz-stats")
    except metadata.PackageNotFoundError:
        arviz_stats = "unknown"
    return {
        "lsb_explorer": _package_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "arviz_stats": arviz_stats,
    }


def describe_device(device) -> str:
    """``"cpu"`` or ``"cuda (<GPU name>)"``."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    if device.type == "cuda" and torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return device.type


def json_safe(value):
    """``value`` with numpy/torch scalars and arrays as Python values and NaN/inf as ``None``."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, torch.Tensor):
        return json_safe(value.detach().cpu().tolist())
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot store a {type(value).__name__} in the results JSON.")


def _mixing_length(trace) -> int:
    return int(np.count_nonzero(trace.arrays()["phase"] == 1))


def _final_accuracy(sampler: ChainSampler, truth) -> float | None:
    if truth is None:
        return None
    with torch.no_grad():
        x = sampler.x.detach()
        return float(accuracy(x, torch.as_tensor(truth).to(x.device)).mean())


def _settledness(comparison, name: str):
    """The marginal's settled verdict (``diagnostics.settled``) where it means something: every
    chain samples one posterior (a target with one field row); else None."""
    marginals = getattr(comparison, "marginals", {}).get(name)
    target = getattr(comparison, "target", None)
    if marginals is None or target is None or getattr(target, "batch", 1) != 1:
        return None
    return marginals.settledness()


def comparison_results(
    comparison,
    config: dict,
    burnin_seconds: dict,
    mixing_seconds: dict,
    max_lag: int = PAPER_MAX_LAG,
    *,
    summaries: dict | None = None,
    series: Mapping[str, np.ndarray] | None = None,
) -> dict:
    """The results document of a comparison after its mixing phase (module docstring).

    ``comparison`` is a ``lsbcore.Comparison`` (or anything with ``samplers``: name -> object
    with ``x``, ``accept_rate`` and ``n_target_evals``; ``traces``: name -> ``Trace``; ``truth``;
    ``device``). The ESS and R-hat come from the mixing-phase magnetisation of
    ``comparison.traces[name]`` via ``lsbcore.diagnostics.mixing.summarise_mixing``, with the window
    ``effective_max_lag`` of the shortest mixing phase, written to the config as ``max_lag``
    (``max_lag_requested`` keeps the asked-for value). ``accept_rate`` and ``target_evals`` are
    the samplers' own counters (the whole run, burn-in included; target evaluations per chain);
    ``final_accuracy`` is the mean over chains of the final states' accuracy against the ground
    truth, ``None`` without one. ``burnin_seconds`` / ``mixing_seconds`` map names to sampling
    seconds. ``summaries`` may hold ``MixingSummary`` objects computed elsewhere (the experiment
    computes them in its worker processes); one is used when its ``max_lag`` is the window
    chosen here, otherwise the summary is recomputed. ``series`` may give, per sampler, the
    ``[B, T]`` magnetisation series the ESS is computed on
    (``lsbcore.studies.experiment.paper_protocol.ess_series``: a window that opens before the mixing
    phase); by default each trace's mixing series.
    """
    traces = getattr(comparison, "traces", {}) or {}
    names = list(comparison.samplers)
    series = dict(series or {})
    for n in names:
        if n not in series and traces.get(n) is not None:
            series[n] = None  # the mixing series, read only if a summary must be recomputed
    lengths_by = {
        n: _mixing_length(traces[n]) if s is None else s.shape[1] for n, s in series.items()
    }
    lengths = list(lengths_by.values())
    lag = effective_max_lag(min(lengths), max_lag) if lengths else effective_max_lag(0, max_lag)
    truth = getattr(comparison, "truth", None)
    one_posterior = _one_posterior(comparison)

    samplers = {}
    for name in names:
        sampler = comparison.samplers[name]
        entry = dict.fromkeys(SAMPLER_FIELDS)
        if name in series and lag is not None:
            values = series[name]
            if values is None:
                values = traces[name].mixing_series("magnetisation")
            summary = (summaries or {}).get(name)
            if summary is None or summary.max_lag != lag or summary.n_draws != lengths_by[name]:
                summary = summarise_mixing(values, max_lag=lag, threshold=PAPER_THRESHOLD)
            entry.update(
                ess_paper_mean=summary.ess_paper_mean,
                ess_paper_std=summary.ess_paper_std,
                ess_bulk=summary.ess_bulk if one_posterior else None,
                rhat=summary.rhat if one_posterior else None,
            )
            entry.update(_bulk_per_chain(values))
        entry["accept_rate"] = sampler.accept_rate
        entry["final_accuracy"] = _final_accuracy(sampler, truth)
        entry["target_evals"] = int(sampler.n_target_evals)
        entry["burnin_seconds"] = burnin_seconds.get(name)
        entry["mixing_seconds"] = mixing_seconds.get(name)
        verdict = _settledness(comparison, name)
        if verdict is not None:
            entry["settled"] = verdict.settled
            entry["unsettled_fraction"] = verdict.unsettled_fraction
        samplers[name] = entry

    config = dict(config)
    config["chains_share_posterior"] = one_posterior
    config["max_lag_requested"] = max_lag
    config["max_lag"] = lag
    config["ess_threshold"] = PAPER_THRESHOLD
    return json_safe(
        {
            "config": config,
            "device": describe_device(getattr(comparison, "device", None)),
            "versions": versions(),
            "samplers": samplers,
        }
    )


def _one_posterior(comparison) -> bool:
    """Whether every chain samples the same posterior (pooled diagnostics mean something)."""
    known = getattr(comparison, "one_posterior", None)
    if known is not None:
        return bool(known)
    return getattr(getattr(comparison, "target", None), "batch", 1) == 1


def _bulk_per_chain(values) -> dict:
    """Mean and std over chains of each chain's own bulk ESS (constant chains left out)."""
    values = np.asarray(values, dtype=np.float64)
    own = ess_bulk_per_chain(values) if values.shape[1] >= MIN_DRAWS_ARVIZ else np.zeros(0)
    own = own[np.isfinite(own)]
    if own.size == 0:
        return {"ess_bulk_chain_mean": None, "ess_bulk_chain_std": None}
    return {"ess_bulk_chain_mean": float(own.mean()), "ess_bulk_chain_std": float(own.std())}


def results_to_json(results: dict) -> str:
    """Strict JSON text of ``results`` (non-finite numbers as ``null``), indented."""
    return json.dumps(json_safe(results), indent=2, allow_nan=False)
