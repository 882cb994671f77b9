"""The experiment's HTML report for a comparison run elsewhere (the dashboard's run), so that
the page and the command line give the same self-contained document."""

from __future__ import annotations

from types import SimpleNamespace

from lsbcore.balancing.json_io import balancing_to_json
from lsbcore.studies.experiment.report import build_report
from lsbcore.studies.results import comparison_results

__all__ = ["comparison_report"]


def comparison_report(
    comparison,
    problem,
    config: dict,
    burnin_seconds: dict,
    mixing_seconds: dict,
    source: str,
    max_lag: int = 500,
) -> str:
    """``report.html`` of ``comparison`` (a ``Comparison`` with traces) on ``problem``.

    ``config`` needs ``burn_in``; seconds map sampler names to sampling seconds per phase.
    The caller holds whatever lock guards the comparison.
    """
    results = comparison_results(comparison, config, burnin_seconds, mixing_seconds, max_lag)
    runs = {}
    per_sampler = {}
    for name, sampler in comparison.samplers.items():
        learnable = getattr(sampler, "learnable", False)
        runs[name] = SimpleNamespace(
            trace=comparison.traces[name],
            acf=None,  # the report computes it from the trace
            history=sampler.history.arrays() if learnable else None,
            balancing_json=balancing_to_json(sampler.balancing, {"sampler": name})
            if learnable
            else None,
        )
        burn, mix = burnin_seconds.get(name), mixing_seconds.get(name)
        per_sampler[name] = {
            "burnin_seconds": burn,
            "mixing_seconds": mix,
            "recording_seconds": None,
            "csv_seconds": None,
            "burnin_steps_per_second": None,
            "mixing_steps_per_second": None,
        }
    timings = {
        "per_sampler": per_sampler,
        "sampling_wall_seconds": sum(v or 0.0 for v in burnin_seconds.values())
        + sum(v or 0.0 for v in mixing_seconds.values()),
        "workers": 1,
    }
    return build_report(results, runs, problem, int(config["burn_in"]), source, timings)
