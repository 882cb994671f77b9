"""One results document from several seeds of the experiment (``--seeds N``).

Every seed reruns the whole problem (its alpha noise, its starts, the samplers' generators), so
the spread over seeds is the spread a reader of the paper's table would see on a rerun. Per
sampler, ``aggregate_seeds`` writes:

- ``ess_paper_mean``: mean over seeds and chains (every seed has as many chains);
- ``ess_paper_std``: population std over the chains of every seed pooled (as one seed's
  ``ess_paper_std`` is over its chains);
- ``ess_paper_seed_std``: sample std (``ddof=1``) of the per-seed means; ``ess_paper_by_seed``:
  those means, in seed order;
- ``ess_bulk``, ``rhat``, ``ess_bulk_chain_mean``, ``ess_bulk_chain_std``, ``accept_rate``,
  ``final_accuracy``, ``unsettled_fraction``: mean
  over seeds (``null`` if any seed has none); ``settled``: every seed settled;
- ``target_evals``: mean over seeds per chain (rounded); ``burnin_seconds`` /
  ``mixing_seconds``: summed over seeds (time spent).

``config.seeds_run`` lists the seeds. A single seed's document is left as it is.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SEED_FIELDS", "aggregate_seeds"]

#: Fields added per sampler when more than one seed ran.
SEED_FIELDS = ("ess_paper_seed_std", "ess_paper_by_seed")
_MEANS = (
    "ess_bulk",
    "rhat",
    "ess_bulk_chain_mean",
    "ess_bulk_chain_std",
    "accept_rate",
    "final_accuracy",
    "unsettled_fraction",
)
_SUMS = ("burnin_seconds", "mixing_seconds")


def _mean(values):
    return None if any(v is None for v in values) else float(np.mean(values))


def aggregate_seeds(by_seed: list) -> dict:
    """``by_seed``: ``(seed, results, runs)`` per seed, in order (``runs``: name -> a run with
    ``ess_per_chain``); returns the first seed's document with the aggregated sampler fields."""
    if not by_seed:
        raise ValueError("aggregate_seeds needs at least one seed.")
    first = by_seed[0][1]
    if len(by_seed) == 1:
        return first
    out = {key: value for key, value in first.items() if key != "samplers"}
    out["config"] = {**first["config"], "seeds_run": [seed for seed, _, _ in by_seed]}
    samplers = {}
    for name, entry in first["samplers"].items():
        entries = [results["samplers"][name] for _, results, _ in by_seed]
        chains = [runs[name].ess_per_chain for _, _, runs in by_seed]
        means = [e["ess_paper_mean"] for e in entries]
        merged = dict(entry)
        if all(c is not None for c in chains):
            pooled = np.concatenate(chains)
            merged["ess_paper_mean"] = float(pooled.mean())
            merged["ess_paper_std"] = float(pooled.std())
        else:
            merged["ess_paper_mean"] = merged["ess_paper_std"] = None
        known = None if any(m is None for m in means) else np.asarray(means, dtype=np.float64)
        merged["ess_paper_seed_std"] = None if known is None else float(known.std(ddof=1))
        merged["ess_paper_by_seed"] = means
        for key in _MEANS:
            merged[key] = _mean([e[key] for e in entries])
        for key in _SUMS:
            values = [e[key] for e in entries]
            merged[key] = None if any(v is None for v in values) else float(sum(values))
        merged["target_evals"] = int(round(np.mean([e["target_evals"] for e in entries])))
        settled = [e["settled"] for e in entries]
        merged["settled"] = None if any(s is None for s in settled) else all(settled)
        samplers[name] = merged
    out["samplers"] = samplers
    return out
